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
    // A server must never be reached without the credential its definition names: until
    // the host performs OAuth and the client-credentials grant, such a server stays
    // unavailable rather than being dialled bare.
    if let Some(authorization) = &prepared.authorization {
        let kind = match authorization {
            crate::config::PreparedAuthorization::OAuth { .. } => "OAuth",
            crate::config::PreparedAuthorization::ClientCredentials { .. } => {
                "the OAuth client-credentials grant"
            }
        };
        return Err(format!(
            "its definition authorizes with {kind}, which this host does not perform yet; it is \
             not connected without that credential (use a bearer ${{NAME}} meanwhile)"
        ));
    }
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
