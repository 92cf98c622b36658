//! The bridge from a validated, unexpanded definition to an expanded connection [`Target`].

use super::connect::Target;
use crate::config::{Environment, PreparedTransport, ServerDefinition};

/// Expands `definition` against `env` into what a connection attempt needs. The error names
/// the variable, never a value.
pub(crate) fn target(definition: &ServerDefinition, env: &Environment) -> Result<Target, String> {
    let prepared = definition.prepare(env).map_err(|error| error.to_string())?;
    // Registered before anything is spawned or dialled: whatever comes back from here on
    // (stderr, transport errors, reflected headers) is scrubbed of them.
    crate::redact::register(&prepared.secrets);
    Ok(match prepared.transport {
        PreparedTransport::Stdio {
            command,
            args,
            cwd,
            env,
        } => Target::Stdio {
            command,
            args,
            cwd,
            env,
        },
        PreparedTransport::Http { url, headers } => Target::Http { url, headers },
    })
}
