//! Configuration faults: one variant per mistake an operator can make, each naming the variable and the fix.

use std::fmt;

use super::target::TransportKind;

/// One fault in the MCP configuration.
///
/// Every message is lower case, names the variable at fault and says what to do
/// about it. No message ever carries a value that could be a secret: target URLs,
/// bearer tokens, header values, environment values and expanded `${NAME}`
/// references are never quoted, only the names of variables, entries and tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A server name that does not match `[a-z][a-z0-9-]*` after case-folding, or is longer
    /// than [`MAX_ALIAS_LEN`](super::MAX_ALIAS_LEN).
    #[error(
        "\"{}\" ({}) is not a valid server name: start with a letter, use only letters, \
         digits and hyphens (an underscore in a variable name reads as a hyphen), at most {} \
         characters",
        shorten(name),
        shorten(variable),
        super::MAX_ALIAS_LEN
    )]
    InvalidName {
        /// The variable (or setting) that gave the name.
        variable: String,
        /// The name after case-folding.
        name: String,
    },

    /// A switch that is neither `true` nor `false`.
    #[error("{variable} must be true or false")]
    InvalidSwitch {
        /// The variable.
        variable: String,
    },

    /// A server name the executor or a document's URI authority already uses
    /// ([`NAMESPACE_ALIASES`](super::NAMESPACE_ALIASES)).
    #[error(
        "\"{name}\" ({variable}) is the executor's or a document address's own name (worker://, \
         exec, a URI scheme) and cannot name a server: choose another server name"
    )]
    NamespaceName {
        /// The variable (or setting) that gave the name.
        variable: String,
        /// The name.
        name: String,
    },

    /// A server name that is one of the global settings ([`RESERVED_ALIASES`](super::RESERVED_ALIASES)).
    #[error(
        "\"{name}\" ({variable}) is reserved for a global PLURNK_MCP_ setting and cannot name a \
         server: choose another server name"
    )]
    ReservedName {
        /// The variable (or setting) that gave the name.
        variable: String,
        /// The reserved name.
        name: String,
    },

    /// A server name ending in a companion word, which the environment could never declare.
    #[error(
        "\"{name}\" ({variable}) ends in the companion word {suffix}, so the environment could \
         not declare it: choose a server name that does not end in {suffix}"
    )]
    NameEndsInCompanion {
        /// The variable (or setting) that gave the name.
        variable: String,
        /// The server name.
        name: String,
        /// The companion suffix it ends in, such as `_TOOLS`.
        suffix: &'static str,
    },

    /// Two or more variables that fold to the same setting.
    #[error(
        "{} set the same {what} once case is folded and _ is read as -: keep only one of them",
        and_list(.variables)
    )]
    DuplicateSetting {
        /// The variables as written, sorted.
        variables: Vec<String>,
        /// What they all set, such as `server "github"`.
        what: String,
    },

    /// A companion variable whose server is not declared.
    #[error(
        "{variable} is the {suffix} companion of server \"{server}\", which is not declared: \
         declare {declare} or remove {variable} (a server name cannot end in {suffix})"
    )]
    OrphanCompanion {
        /// The companion variable.
        variable: String,
        /// The server it would belong to.
        server: String,
        /// Its companion suffix, such as `_ARGS`.
        suffix: &'static str,
        /// The variable that would declare that server.
        declare: String,
    },

    /// A transport-specific companion on a server of the other transport.
    #[error(
        "{variable} applies only to {applies_to} servers, but server \"{server}\" is {} (see \
         {target_variable}): remove {variable}",
        other_transport(*.applies_to)
    )]
    WrongTransport {
        /// The companion variable.
        variable: String,
        /// The server.
        server: String,
        /// The transport the companion applies to.
        applies_to: TransportKind,
        /// The variable whose target chose the server's transport.
        target_variable: String,
    },

    /// A tool source's declaration its kind's reader refuses (the file, the field, the fix).
    #[error("{0}")]
    InvalidSource(super::DeclarationError),

    /// Two declarations claim one alias: a tool source and a server, or two sources.
    #[error(
        "\"{alias}\" is claimed twice, by {first} and by {second}: every server and tool \
         source needs an alias of its own; rename one (a declaration's `name`)"
    )]
    DuplicateClaim {
        /// The alias.
        alias: String,
        /// The first claimant (a variable or a file).
        first: String,
        /// The second claimant.
        second: String,
    },

    /// A command, connection or credential setting for a server the embedder serves in
    /// its own process.
    #[error(
        "{variable} cannot apply to server \"{server}\": it is served inside the embedding \
         process, which has no command, arguments, working directory, environment, headers or \
         credentials to set; remove {variable} (its tool policy and summaries can be set)"
    )]
    InProcessNotConfigurable {
        /// The setting.
        variable: String,
        /// The server.
        server: String,
    },

    /// A value that is not JSON at all.
    #[error("{variable} is not valid JSON ({detail}): write {expected}")]
    InvalidJson {
        /// The variable.
        variable: String,
        /// What it should hold, such as `a JSON array of strings`.
        expected: &'static str,
        /// Where the syntax broke; never quotes the value.
        detail: String,
    },

    /// An authorization the host declines by design (enterprise-managed authorization,
    /// private-key JWT client authentication).
    #[error(
        "{variable} asks for {what}, which plurnk-mcp declines by design ({why}): use \"oauth\" \
         for a person, \"client-credentials\" with a client secret for an application, or \
         \"workload-identity\" with its platform's identity token for a workload"
    )]
    DeclinedAuthorization {
        /// The variable.
        variable: String,
        /// What was asked for.
        what: &'static str,
        /// Why it is declined.
        why: &'static str,
    },

    /// JSON of the wrong shape.
    #[error("{variable} must be {expected}, but {found}: fix the value")]
    WrongJsonShape {
        /// The variable.
        variable: String,
        /// What it should hold.
        expected: &'static str,
        /// What was found instead, by kind and position only.
        found: String,
    },

    /// A name list entry that is the empty string.
    #[error("{variable} has an empty name at position {position}: remove it or give the name")]
    EmptyEntry {
        /// The variable.
        variable: String,
        /// The 1-based position in the list.
        position: usize,
    },

    /// A name listed twice.
    #[error("{variable} names \"{entry}\" more than once: list it once")]
    DuplicateEntry {
        /// The variable.
        variable: String,
        /// The repeated name (for headers, lower-cased).
        entry: String,
    },

    /// A `${NAME}` reference to a variable the environment does not hold.
    #[error(
        "{variable} refers to ${{{name}}}, which is not set in the environment: set {name} or \
         change the reference"
    )]
    MissingReference {
        /// The variable holding the reference.
        variable: String,
        /// The referenced name.
        name: String,
    },

    /// A `${` with no closing `}`.
    #[error(
        "{variable} has a \"${{\" with no closing \"}}\": finish the reference as ${{NAME}} (a \
         literal \"${{\" cannot be written; put it in a variable and refer to that)"
    )]
    UnterminatedReference {
        /// The variable holding the reference.
        variable: String,
    },

    /// A `${...}` whose contents are not a variable name.
    #[error(
        "{variable} has a ${{...}} reference whose name is not a variable name: write ${{NAME}} \
         with letters, digits and underscores, not starting with a digit"
    )]
    InvalidReference {
        /// The variable holding the reference.
        variable: String,
    },

    /// A value that is empty (or only white space) where something is needed.
    #[error("{variable} is empty: give it a value or unset it")]
    Empty {
        /// The variable.
        variable: String,
    },

    /// A value that only became empty once its references were expanded.
    #[error(
        "{variable} is empty once its ${{NAME}} references are expanded: give the referenced \
         variables values"
    )]
    EmptyExpansion {
        /// The variable.
        variable: String,
    },

    /// A target that starts like an HTTP(S) URL but is not absolute with a host.
    #[error(
        "{variable} starts like an http(s) URL but is not an absolute URL with a host and no \
         spaces: write it as https://host/path, or give the path of an executable instead"
    )]
    NotAbsoluteUrl {
        /// The variable holding the target.
        variable: String,
    },

    /// `_BEARER` together with an `Authorization` header.
    #[error(
        "{variable} and the \"{header}\" entry of {headers_variable} both set authorization: \
         keep only one of them"
    )]
    BearerWithAuthorizationHeader {
        /// The `_BEARER` variable.
        variable: String,
        /// The `_HEADERS` variable.
        headers_variable: String,
        /// The header name as written.
        header: String,
    },

    /// A `_READ` tool that `_TOOLS` does not enable.
    #[error(
        "{variable} names \"{tool}\", which is not in {tools_variable}: add it to _TOOLS or \
         remove it from _READ"
    )]
    ReadNotInTools {
        /// The `_READ` variable.
        variable: String,
        /// The tool.
        tool: String,
        /// The `_TOOLS` variable.
        tools_variable: String,
    },

    /// A setting this version no longer reads: what replaced it, and what to do.
    #[error("{variable} is no longer read: {advice}")]
    Retired {
        /// The variable.
        variable: String,
        /// What replaced it.
        advice: &'static str,
    },

    /// A timeout that is not a positive whole number of milliseconds.
    #[error(
        "{variable} must be a positive whole number of milliseconds, such as 10000: fix it or \
         unset it for the default"
    )]
    InvalidTimeout {
        /// The variable.
        variable: String,
    },

    /// `PLURNK_MCP_ENABLED` naming a server that is not configured.
    #[error(
        "{variable} names \"{alias}\", which is not a configured server: declare it with \
         PLURNK_MCP_<NAME> or remove it from {variable}"
    )]
    UnknownServer {
        /// The variable.
        variable: String,
        /// The name as written.
        alias: String,
    },

    /// `PLURNK_MCP_EXPANDED` naming a server that `PLURNK_MCP_ENABLED` does not.
    #[error(
        "{variable} names \"{alias}\", which is not in PLURNK_MCP_ENABLED: enable it or remove \
         it from {variable}"
    )]
    ExpandedNotEnabled {
        /// The variable.
        variable: String,
        /// The name as written.
        alias: String,
    },

    /// A `_HEADERS` name that is not an HTTP token.
    #[error(
        "{variable} has a header name starting \"{shown}\" that is not a valid HTTP header \
         name: use only letters, digits and !#$%&'*+-.^_`|~"
    )]
    InvalidHeaderName {
        /// The `_HEADERS` variable.
        variable: String,
        /// The valid beginning of the name; the rest is not shown in case it is a pasted secret.
        shown: String,
    },

    /// A `_HEADERS` name that the MCP transport owns.
    #[error("{variable} sets \"{header}\", which the MCP transport sets itself: remove it")]
    ReservedHeader {
        /// The `_HEADERS` variable.
        variable: String,
        /// The header name as written.
        header: String,
    },

    /// A header value (or bearer token) holding a line break or control character.
    #[error(
        "{variable} gives header \"{header}\" a line break or control character (perhaps once \
         expanded): remove it"
    )]
    InvalidHeaderValue {
        /// The variable holding the value.
        variable: String,
        /// The header name.
        header: String,
    },

    /// An `_ENV` name that cannot be an environment variable.
    #[error(
        "{variable} has an entry named \"{shown}\" that cannot be an environment variable name: \
         use a non-empty name without = or NUL"
    )]
    InvalidEnvName {
        /// The `_ENV` variable.
        variable: String,
        /// The valid beginning of the name; the rest is not shown in case it is a pasted secret.
        shown: String,
    },

    /// `PLURNK_MCP_INHERIT_ENV` naming one of the host's own settings.
    #[error(
        "{variable} names \"{entry}\", one of the host's own settings, which describe every \
         server and may hold their credentials: remove it (a server gets what its own \
         definition declares)"
    )]
    InheritsHostSetting {
        /// The variable.
        variable: String,
        /// The setting it names.
        entry: String,
    },

    /// A credential field that is not exactly one `${NAME}` reference.
    #[error(
        "{variable} must be exactly one ${{NAME}} reference, such as ${{API_TOKEN}}, naming the \
         service environment variable that holds the credential: put the credential in the \
         service environment and refer to it instead of writing it here"
    )]
    CredentialNotReference {
        /// The credential field or variable.
        variable: String,
    },

    /// A credential written into a field that holds no credential of its own (a token, a
    /// URL's password, a credential-named query value), where only `${NAME}` references may
    /// carry one.
    #[error(
        "{variable} holds a credential written literally ({what}), which that field cannot keep \
         secret: remove it (only the credential fields token, clientSecret and assertion carry \
         one, each as one ${{NAME}} reference to the service environment)"
    )]
    LiteralCredential {
        /// The field.
        variable: String,
        /// What in it is the credential, such as `its password`; never the value.
        what: String,
    },

    /// A global service control (`PLURNK_MCP_ENABLED`, a timeout, ...) in a client configuration overlay.
    #[error(
        "{variable} is a service control, which a client configuration overlay cannot set: \
         remove it from the overlay (only the service environment sets it)"
    )]
    ServiceControlInOverlay {
        /// The overlay key.
        variable: String,
    },

    /// A configuration overlay key outside the `PLURNK_MCP_` namespace.
    #[error(
        "\"{shown}\" is not a PLURNK_MCP_ variable, and a configuration overlay holds only \
         PLURNK_MCP_<SERVER> settings: remove it, or spell its prefix PLURNK_MCP_ in upper case"
    )]
    NotInNamespace {
        /// The valid beginning of the key; the rest is not shown in case it is a pasted secret.
        shown: String,
    },

    /// A JSON field that the closed shape does not have.
    #[error("{variable} has no field \"{field}\": use only {allowed}")]
    UnknownField {
        /// The object holding the field.
        variable: String,
        /// The valid beginning of the field name.
        field: String,
        /// The fields that are allowed here.
        allowed: String,
    },

    /// A required JSON field that is absent.
    #[error("{variable} needs the field \"{field}\": add it")]
    MissingField {
        /// The object lacking the field.
        variable: String,
        /// The field.
        field: &'static str,
    },

    /// Options naming the alias, target or transport, which the action itself gives.
    #[error(
        "{variable} cannot set \"{field}\": the alias, target and transport come from the action \
         itself, so remove \"{field}\" from the options"
    )]
    RepeatedInOptions {
        /// The options.
        variable: String,
        /// The field.
        field: String,
    },

    /// A field that is only meaningful together with another.
    #[error("{variable} is set without {needs}: set both or neither")]
    FieldNeedsField {
        /// The field that is set.
        variable: String,
        /// The field it needs.
        needs: String,
    },

    /// Two fields that exclude each other.
    #[error("{variable} and {other} cannot both be set: keep only one of them")]
    ConflictingFields {
        /// One field.
        variable: String,
        /// The other.
        other: String,
    },

    /// A URL field (other than a target) that is not an absolute URL of the kind needed.
    #[error("{variable} must be {expected}: fix it")]
    InvalidUrl {
        /// The field.
        variable: String,
        /// What it must be.
        expected: &'static str,
    },

    /// A stdio command that is an absolute http(s) URL, which would select the http transport.
    #[error(
        "{variable} is an absolute http(s) URL, which selects the http transport rather than a \
         stdio executable: make the server http with this as its url"
    )]
    UrlAsCommand {
        /// The command field.
        variable: String,
    },

    /// A stdio command written as a command line (`python3 x.py`) with no arguments beside
    /// it: a command names one executable, and no file of that whole name exists. The value
    /// is never quoted (a command line can carry a token); its words are counted.
    #[error(
        "{variable} holds a command line ({words} words) and {args} is not set: a command \
         names one executable, with no shell to split it; set {variable} to the program alone \
         (the first word) and {args} to the other words as a JSON array, such as \
         [\"server.py\", \"--port\", \"8080\"]"
    )]
    CommandLine {
        /// The command field.
        variable: String,
        /// How many words the command holds.
        words: usize,
        /// The arguments field beside it.
        args: String,
    },

    /// A setting this build cannot honour: the cargo feature of plurnk-mcp that carries it is
    /// off. Refused like any other fault, never ignored.
    #[error(
        "{variable} {what}, which needs the `{feature}` feature of plurnk-mcp: build the host \
         with that feature, or remove the setting"
    )]
    FeatureOff {
        /// The setting.
        variable: String,
        /// What the setting asks for, such as `is a command (a stdio server)`.
        what: &'static str,
        /// The cargo feature.
        feature: &'static str,
    },

    /// A sandbox policy member that cannot be held as written: a path that is not absolute
    /// or does not exist, a limit that cannot be read or is below what any runtime needs, a
    /// policy on a server the host does not start.
    #[error("{variable} {problem}: {fix}")]
    InvalidSandbox {
        /// The member, `<variable>.<member>`.
        variable: String,
        /// What is wrong, never quoting a value.
        problem: String,
        /// What to do.
        fix: String,
    },

    /// A cascade layer without a target, over no lower definition.
    #[error(
        "{variable} specializes server \"{server}\", which has no definition below it to \
         specialize: give the server a target first (in the service environment, with add, or \
         as PLURNK_MCP_<SERVER> in the overlay)"
    )]
    NothingToSpecialize {
        /// The specializing setting.
        variable: String,
        /// The server.
        server: String,
    },

    /// A cascade layer for another server than the rest.
    #[error(
        "{variable} is for server \"{name}\", not \"{expected}\": resolve each server's layers \
         separately"
    )]
    AliasMismatch {
        /// The layer.
        variable: String,
        /// The server it is for.
        name: String,
        /// The server the other layers are for.
        expected: String,
    },

    /// A cascade with no layer that gives a definition.
    #[error(
        "{variable} has no layer that defines the server: pass a service, workspace or overlay \
         definition"
    )]
    NoDefinition {
        /// The cascade.
        variable: String,
    },
}

impl ConfigError {
    /// The variable (or setting) the fault is about, for grouping and for tests.
    pub fn variable(&self) -> &str {
        match self {
            Self::InvalidName { variable, .. }
            | Self::InvalidSwitch { variable }
            | Self::ReservedName { variable, .. }
            | Self::NamespaceName { variable, .. }
            | Self::NameEndsInCompanion { variable, .. }
            | Self::OrphanCompanion { variable, .. }
            | Self::WrongTransport { variable, .. }
            | Self::InProcessNotConfigurable { variable, .. }
            | Self::InvalidSource(super::DeclarationError {
                origin: variable, ..
            })
            | Self::DuplicateClaim {
                second: variable, ..
            }
            | Self::InvalidJson { variable, .. }
            | Self::WrongJsonShape { variable, .. }
            | Self::DeclinedAuthorization { variable, .. }
            | Self::EmptyEntry { variable, .. }
            | Self::DuplicateEntry { variable, .. }
            | Self::MissingReference { variable, .. }
            | Self::UnterminatedReference { variable }
            | Self::InvalidReference { variable }
            | Self::Empty { variable }
            | Self::EmptyExpansion { variable }
            | Self::NotAbsoluteUrl { variable }
            | Self::BearerWithAuthorizationHeader { variable, .. }
            | Self::ReadNotInTools { variable, .. }
            | Self::InvalidTimeout { variable }
            | Self::Retired { variable, .. }
            | Self::UnknownServer { variable, .. }
            | Self::ExpandedNotEnabled { variable, .. }
            | Self::InvalidHeaderName { variable, .. }
            | Self::ReservedHeader { variable, .. }
            | Self::InvalidHeaderValue { variable, .. }
            | Self::InvalidEnvName { variable, .. }
            | Self::InheritsHostSetting { variable, .. }
            | Self::CredentialNotReference { variable }
            | Self::LiteralCredential { variable, .. }
            | Self::ServiceControlInOverlay { variable }
            | Self::UnknownField { variable, .. }
            | Self::MissingField { variable, .. }
            | Self::RepeatedInOptions { variable, .. }
            | Self::FieldNeedsField { variable, .. }
            | Self::ConflictingFields { variable, .. }
            | Self::InvalidUrl { variable, .. }
            | Self::UrlAsCommand { variable }
            | Self::CommandLine { variable, .. }
            | Self::FeatureOff { variable, .. }
            | Self::InvalidSandbox { variable, .. }
            | Self::NothingToSpecialize { variable, .. }
            | Self::AliasMismatch { variable, .. }
            | Self::NoDefinition { variable } => variable,
            Self::NotInNamespace { shown } => shown,
            Self::DuplicateSetting { variables, .. } => {
                variables.first().map_or("", String::as_str)
            }
        }
    }
}

/// Every fault in a configuration, so the operator can fix them all in one pass.
///
/// Never empty. `Display` prints one fault per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// `Ok(())` when there are no faults, else all of them.
    pub(crate) fn check(errors: Vec<ConfigError>) -> Result<(), Self> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Self { errors })
        }
    }

    /// Adds more faults.
    /// A tool source's declaration faults, the first and the rest.
    pub fn sources(
        first: super::DeclarationError,
        rest: impl IntoIterator<Item = super::DeclarationError>,
    ) -> Self {
        let mut errors = Self::from(ConfigError::InvalidSource(first));
        errors.extend(rest.into_iter().map(ConfigError::InvalidSource));
        errors
    }

    pub(crate) fn extend(&mut self, more: impl IntoIterator<Item = ConfigError>) {
        self.errors.extend(more);
    }

    /// The faults, in a stable order.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// Iterates over the faults.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }

    /// The faults, by value.
    pub fn into_vec(self) -> Vec<ConfigError> {
        self.errors
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self {
            errors: vec![error],
        }
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// `A and B`, `A, B and C`.
pub(super) fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn other_transport(applies_to: TransportKind) -> &'static str {
    match applies_to {
        TransportKind::Stdio => "an http server",
        _ => "a stdio server",
    }
}

/// How many characters of a name an error quotes (an alias, a caller's tool or server name,
/// a name from an imported file) before it is cut: the longest valid alias, so a valid name
/// is never cut.
pub const MAX_QUOTED_NAME: usize = 64;

/// A name as an error message quotes it: whole when short, else its first
/// [`MAX_QUOTED_NAME`] characters and its length, so that a megabyte of input does not
/// become a megabyte of error.
pub fn shorten(name: &str) -> String {
    let mut chars = name.char_indices();
    match chars.nth(MAX_QUOTED_NAME) {
        None => name.to_owned(),
        Some((cut, _)) => format!("{}… ({} characters)", &name[..cut], name.chars().count()),
    }
}
