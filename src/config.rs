//! Configuration: the `PLURNK_MCP_` environment namespace read into validated, unexpanded server definitions.
//!
//! [`HostConfig::from_env`] reads a map of variables: the daemon passes
//! `std::env::vars()`, tests pass a literal map, and nothing here touches the
//! process environment. Only keys starting with `PLURNK_MCP_` (exactly, in
//! upper case) configure anything. The whole map, ours and everyone else's, is
//! kept as the [`Environment`] that `${NAME}` references resolve against when a
//! connection is prepared.
//!
//! # Variables
//!
//! | Variable | Holds |
//! |---|---|
//! | `PLURNK_MCP_<server>` | The target, which declares the server. An absolute `http://` or `https://` URL with a host selects Streamable HTTP; anything else is one exact stdio executable, kept verbatim even with spaces in its path and never split into arguments |
//! | `PLURNK_MCP_<server>_ARGS` | stdio: JSON array of strings |
//! | `PLURNK_MCP_<server>_CWD` | stdio: working directory |
//! | `PLURNK_MCP_<server>_ENV` | stdio: JSON object of strings added to the child's environment |
//! | `PLURNK_MCP_<server>_BEARER` | http: bearer credential ([`Authorization::Bearer`]), best written as one `${TOKEN}` reference (a literal token is accepted here but can never be stored); excludes an `Authorization` entry in `_HEADERS` |
//! | `PLURNK_MCP_<server>_HEADERS` | http: JSON object of strings, supplementary request headers (not `Mcp-*`, `Accept`, `Content-Type` and the other headers the transport sets) |
//! | `PLURNK_MCP_<server>_AUTHORIZATION` | http: the wire's `authorization` ([`McpAuthorization`]) as a JSON object: `oauth`, `client-credentials`, `workload-identity` or `bearer`, read by the same closed-shape reader as the stored definition; every credential one `${NAME}` of the operator's environment and none written literally ([`literal_credentials`]'s reading); its faults name `<variable>.<field>`; excludes `_BEARER` and an `Authorization` entry in `_HEADERS` |
//! | `PLURNK_MCP_<server>_TOOLS` | JSON array of exact tool names to enable; absent enables every tool the server lists, `[]` enables none |
//! | `PLURNK_MCP_<server>_READ` | JSON array of tools the operator classifies read-only; within `_TOOLS` when that is set, otherwise checked against the server's list once known |
//! | `PLURNK_MCP_<server>_SUMMARY` | Authored one-line server orientation |
//! | `PLURNK_MCP_<server>_<tool>_SUMMARY` | Authored one-line tool orientation; see [`tool_summary_key`] |
//! | `PLURNK_MCP_ENABLED` | JSON array of configured servers enabled by default; absent or `[]` enables none |
//! | `PLURNK_MCP_EXPANDED` | JSON array, a subset of `ENABLED`, whose tool trees expand into the turn-0 survey |
//! | `PLURNK_MCP_CONNECT_TIMEOUT` | Positive whole milliseconds, default 60000: a server's start and negotiation (its answer to `server/discover`, and a legacy server's `initialize`) |
//! | `PLURNK_MCP_REQUEST_TIMEOUT` | Positive whole milliseconds, default 60000: every request, and listing a new connection's catalog |
//! | `PLURNK_MCP_DISCOVER_TIMEOUT` | No longer read, and refused: the host waits for a server's answer to `server/discover` within `PLURNK_MCP_CONNECT_TIMEOUT` |
//! | `PLURNK_MCP_<server>_SANDBOX` | stdio: its sandbox policy ([`SandboxPolicy`]) as a JSON object; members left out take `PLURNK_MCP_SANDBOX`'s |
//! | `PLURNK_MCP_SANDBOX` | The host-wide sandbox policy of every process the host starts, as a JSON object; the built-in default where it is unset |
//! | `PLURNK_MCP_INHERIT_ENV` | JSON array of the variable names every child process inherits beyond the default few (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, the locale); none by default |
//!
//! `${NAME}` references are expanded (only while preparing a connection) in the
//! target, arguments, working directory, `_ENV` values, `_HEADERS` values, the
//! bearer, the credentials of `_AUTHORIZATION` and the summaries; at load every such
//! reference must name a variable in the map. Names (`_ENV` and `_HEADERS` keys,
//! `_TOOLS`, `_READ`, the globals) are never expanded. See [`Environment`] for the
//! expansion rules.
//!
//! # Names
//!
//! After `PLURNK_MCP_`, a key is *folded*: ASCII lower case, with `_` read as
//! `-` (portable variable names cannot hold `-`, while server names may). So
//! `PLURNK_MCP_CHROME_DEVTOOLS` declares `chrome-devtools`, and
//! `PLURNK_MCP_GitHub` and `PLURNK_MCP_GITHUB` are the same setting: both at
//! once is a fault, never a silent choice. A server name must match
//! `[a-z][a-z0-9-]*` after folding and must not be one of [`RESERVED_ALIASES`]
//! (the globals' folded names). See [`is_valid_alias`].
//!
//! # Telling servers from companions
//!
//! A folded key is read in this order:
//!
//! 1. It is a **global** if it is exactly one of the global names
//!    (`enabled`, `connect-timeout`, ...).
//! 2. It is a **companion** if it ends in `-` plus a companion word (`args`,
//!    `cwd`, `env`, `bearer`, `headers`, `authorization`, `tools`, `read`, `summary`) with
//!    something before it. Every other key **declares a server** named by the
//!    whole folded key.
//! 3. A companion belongs to the declared server whose name is everything
//!    before `-<word>`. A `-summary` key may instead be `<server>-<tool>-summary`;
//!    of the declared servers that fit, the one with the longest name wins.
//! 4. A companion no declared server claims is a fault (an *orphan*), or a
//!    *reserved name* fault when the part before the word is a global name.
//!
//! So a server name can never end in a companion word: `PLURNK_MCP_MY_TOOLS`
//! alone is an orphan `_TOOLS` of an undeclared `my`, not a server `my-tools`.
//! Reading it as a server would turn a mistyped companion
//! (`PLURNK_MCP_GITHB_TOOLS`) into a server that spawns a JSON array as a
//! command while the `_TOOLS` restriction it carried silently vanished.
//!
//! | Keys set | Reading |
//! |---|---|
//! | `PLURNK_MCP_GITHUB`, `PLURNK_MCP_GITHUB_ARGS` | server `github` and its `_ARGS` |
//! | `PLURNK_MCP_GITHUB_FOO` | server `github-foo` (`foo` is no companion word) |
//! | `PLURNK_MCP_CHROME_DEVTOOLS_ENV` with `PLURNK_MCP_CHROME_DEVTOOLS` | `_ENV` of `chrome-devtools` |
//! | `PLURNK_MCP_GITHUB_CREATE_ISSUE_SUMMARY` with `PLURNK_MCP_GITHUB` | summary of tool `create_issue` of `github` |
//! | `PLURNK_MCP_GITHUB_ENTERPRISE_SUMMARY` with `PLURNK_MCP_GITHUB` and `PLURNK_MCP_GITHUB_ENTERPRISE` | summary of server `github-enterprise` (longest name wins; a `github` tool whose name begins `enterprise_` cannot get a summary companion while `github-enterprise` is declared) |
//! | `PLURNK_MCP_GITHUB_FOO_ARGS` with only `PLURNK_MCP_GITHUB` | orphan: `_ARGS` of undeclared `github-foo` |
//! | `PLURNK_MCP_MY_TOOLS` alone | orphan: `_TOOLS` of undeclared `my` |
//! | `PLURNK_MCP_TOOLS` | server `tools` (nothing before the word) |
//! | `PLURNK_MCP_ENABLED_ARGS` | reserved name `enabled` |
//!
//! # Faults
//!
//! Every fault in the namespace is found in one pass and returned together as
//! [`ConfigErrors`], one [`ConfigError`] per fault, sorted by variable. Each
//! message names the variable and the fix, and none quotes a value that could
//! be a secret.
//!
//! # Secrets
//!
//! Definitions hold the unexpanded text (`${TOKEN}`), which is the only form
//! that is ever stored. Expansion happens in [`ServerDefinition::prepare`],
//! whose [`PreparedServer`] is for connecting, not for keeping. No `Debug` or
//! `Serialize` output prints an environment value, a header value, a literal
//! bearer token, a URL beyond its origin, or anything expanded.
//!
//! # The wire shapes and the cascade
//!
//! [`McpServerDefinition`] is the normalized durable definition: a closed
//! union on `transport` (stdio; http with no authorization, a bearer, OAuth or
//! client credentials) whose JSON Schema is generated from the type and checked
//! into `schema/`. [`ServerDefinition`] converts to it losslessly (everything
//! unexpanded, credentials as their `${NAME}` text) and back through the
//! environment's checks, where every credential must be one `${NAME}`
//! reference; [`ServerDefinition::to_durable`] is the conversion for storing.
//! [`McpServerOptions`] is the closed supplement add and customized enable
//! accept; [`ServerDefinition::with_options`] applies it.
//!
//! [`resolve`] is the configuration cascade: service environment, durable
//! workspace specialization, client configuration [`Overlay`] (the same
//! `PLURNK_MCP_*` syntax, read by the same code, minus the service controls),
//! then explicit options, field by field. A layer with a target replaces the
//! whole definition below it; a layer without one replaces only the fields it
//! sets, arrays and maps whole. Regenerate the schemas after changing a wire
//! type with `UPDATE_SCHEMAS=1 cargo test --lib config::`.
//!
//! # Layout
//!
//! - `keys`: the namespace's prefix, folding, globals, companion suffixes, alias rules.
//! - `environment`: the reference [`Environment`] and `${NAME}` expansion.
//! - `target`: reading a target (URL or executable); header and env name rules.
//! - `json`: JSON-valued variables, with faults that never quote a value.
//! - `definition`: [`ServerDefinition`] and its parts, and the field checks
//!   shared by the loader and [`ServerDefinition::new`].
//! - `authorization`: [`Authorization`], an HTTP server's bearer, OAuth or client credentials.
//! - `load`: the pass over the namespace behind [`HostConfig::from_env`] and [`Overlay::from_env_map`].
//! - `wire`: [`McpServerDefinition`], [`McpServerOptions`] and their conversions.
//! - `shape`: closed-object checks of wire JSON whose faults never quote a value.
//! - `cascade`: [`Overlay`], [`resolve`] and [`ServerDefinition::with_options`].
//! - `prepared`: [`PreparedServer`], the expanded connection parameters.
//! - `literal`: credentials written literally, and the one refusal of them every kept
//!   definition goes through ([`literal_credentials`]).
//! - `error`: [`ConfigError`] and [`ConfigErrors`].

mod authorization;
mod cascade;
mod check;
mod definition;
mod environment;
mod error;
mod inherit;
mod json;
mod keys;
mod literal;
mod load;
mod prepared;
mod sandbox;
mod secret;
mod shape;
mod source;
mod target;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_authorization;
#[cfg(test)]
mod tests_cascade;
mod transport;
mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub use authorization::{
    Authorization, ClientCredentials, OAuthAuthorization, PreparedAuthorization, WorkloadIdentity,
};
pub use cascade::{Overlay, OverlayServer, OverlaySpecialization, resolve};
pub use definition::{DefinitionParts, ServerDefinition};
pub use environment::Environment;
// What the tool sources and `import` read of a definition's strings, headers and URLs.
#[cfg(feature = "import")]
pub(crate) use environment::is_reference_name;
#[cfg(any(feature = "sources", feature = "import"))]
pub(crate) use environment::is_single_reference;
#[cfg(feature = "sources")]
pub(crate) use environment::{Piece, pieces};
pub use error::{ConfigError, ConfigErrors, MAX_QUOTED_NAME, shorten};
pub(crate) use json::kind as json_kind;
pub use keys::target_variable;
pub use keys::{
    MAX_ALIAS_LEN, NAMESPACE_ALIASES, RESERVED_ALIASES, is_valid_alias, tool_summary_key,
};
#[cfg(any(feature = "sources", feature = "import"))]
pub(crate) use literal::is_credential_name;
pub use literal::{LiteralCredentials, literal_credentials, looks_like_token};
#[cfg(feature = "import")]
pub(crate) use literal::{LiteralKind, credential_flag, literals_in};
pub use prepared::{PreparedServer, PreparedTransport};
pub use sandbox::{
    Resolved as ResolvedSandbox, SandboxAmount, SandboxMode, SandboxNetwork, SandboxPolicy,
    show_bytes,
};
pub use secret::Secret;
pub use source::DeclarationError;
pub(crate) use source::{anchor, each_string, each_string_mut};
pub use target::TransportKind;
#[cfg(feature = "http")]
pub(crate) use target::is_reserved_header;
#[cfg(any(feature = "sources", feature = "import"))]
pub(crate) use target::redact_url;
#[cfg(feature = "sources")]
pub(crate) use target::{
    caller_may_set_header, invalid_header_name, is_absolute_http_url, is_valid_header_value,
};
pub use transport::{HttpDefinition, StdioDefinition, Transport};
pub use wire::{
    McpAuthorization, McpHttpDefinition, McpServerDefinition, McpServerOptions, McpStdioDefinition,
};

/// Whether `name` can name a workspace: 1 to 128 letters, digits, `.`, `_` and `-`.
pub(crate) fn valid_workspace_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The host's service configuration: every declared server, the default
/// enabled and expanded subsets, the timeouts, and the reference environment.
///
/// Holding one means the whole namespace was valid: `enabled` names only
/// configured servers and `expanded` only enabled ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    servers: BTreeMap<String, ServerDefinition>,
    enabled: BTreeSet<String>,
    expanded: BTreeSet<String>,
    connect_timeout: Duration,
    request_timeout: Duration,
    /// `PLURNK_MCP_ALLOW_ADD`: whether workspaces may add and customize servers at runtime.
    allow_add: bool,
    /// `PLURNK_MCP_WORKSPACE_ENV`: the names such definitions may refer to.
    workspace_env: BTreeSet<String>,
    /// `PLURNK_MCP_INHERIT_ENV`: the variables every child process inherits beyond the
    /// default few.
    inherit_env: BTreeSet<String>,
    /// `PLURNK_MCP_SANDBOX`: the sandbox policy of every process the host starts whose own
    /// definition leaves a member out.
    sandbox: Option<SandboxPolicy>,
    /// Kept whole for `${NAME}` expansion at connection time; it holds secrets,
    /// so its `Debug` shows only a count.
    env: Environment,
}

impl HostConfig {
    /// Used when `PLURNK_MCP_CONNECT_TIMEOUT` is unset: what the official SDK clients allow a
    /// server to initialize in, which a Python interpreter's cold start, a first `npx -y` or
    /// `uvx` run or a headless browser on a busy machine needs.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(60_000);
    /// Used when `PLURNK_MCP_REQUEST_TIMEOUT` is unset.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(60_000);

    /// Reads the configuration from `vars` (see the [module docs](self)). Of
    /// repeated keys the last wins.
    ///
    /// # Errors
    ///
    /// Every fault in the `PLURNK_MCP_` namespace, all at once.
    pub fn from_env<I, K, V>(vars: I) -> Result<Self, ConfigErrors>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        load::load(Environment::new(vars))
    }

    /// Every declared server, by alias.
    pub fn servers(&self) -> &BTreeMap<String, ServerDefinition> {
        &self.servers
    }

    /// One server's definition.
    pub fn server(&self, alias: &str) -> Option<&ServerDefinition> {
        self.servers.get(alias)
    }

    /// The servers enabled when a workspace has no override of its own.
    pub fn enabled(&self) -> &BTreeSet<String> {
        &self.enabled
    }

    /// The enabled servers whose complete tool tree expands into the turn-0 survey.
    pub fn expanded(&self) -> &BTreeSet<String> {
        &self.expanded
    }

    /// How long a server may take to start and negotiate (the answer to `server/discover`,
    /// and a legacy server's `initialize`).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Whether workspaces may add servers, and enable servers with customized definitions, at
    /// runtime (`PLURNK_MCP_ALLOW_ADD`, off unless the operator turns it on).
    pub fn allows_runtime_servers(&self) -> bool {
        self.allow_add
    }

    /// The environment names an added or customized definition may refer to
    /// (`PLURNK_MCP_WORKSPACE_ENV`); none unless the operator lists them.
    pub fn workspace_env(&self) -> &BTreeSet<String> {
        &self.workspace_env
    }

    /// The names of the variables every child process (a stdio server, a source's program or
    /// script) inherits beyond the default few (`PLURNK_MCP_INHERIT_ENV`); none unless the
    /// operator lists them.
    pub fn inherit_env(&self) -> &BTreeSet<String> {
        &self.inherit_env
    }

    /// The variables [`inherit_env`](Self::inherit_env) names that the environment sets, with
    /// their values: what every child is given beyond the default few.
    pub(crate) fn inherited(&self) -> impl Iterator<Item = (&str, &str)> {
        self.inherit_env
            .iter()
            .filter_map(|name| Some((name.as_str(), self.env.get(name)?)))
    }

    /// The host-wide sandbox policy (`PLURNK_MCP_SANDBOX`), if the operator set one.
    pub fn sandbox(&self) -> Option<&SandboxPolicy> {
        self.sandbox.as_ref()
    }

    /// How long to wait for one request's response, and for a new connection's catalog to
    /// be listed.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The reference environment `${NAME}` references resolve against.
    pub fn env(&self) -> &Environment {
        &self.env
    }
}

impl Default for HostConfig {
    /// No servers, the default timeouts, an empty environment.
    fn default() -> Self {
        Self {
            servers: BTreeMap::new(),
            enabled: BTreeSet::new(),
            expanded: BTreeSet::new(),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            allow_add: false,
            workspace_env: BTreeSet::new(),
            inherit_env: BTreeSet::new(),
            sandbox: None,
            env: Environment::default(),
        }
    }
}
