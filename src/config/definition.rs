//! Normalized, unexpanded server definitions: what a server is, how to reach it, and which of its tools are enabled.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Serialize, Serializer};

use super::environment::{Environment, is_single_reference};
use super::error::{ConfigError, ConfigErrors};
use super::keys::{RESERVED_ALIASES, Suffix, is_alias_syntax, target_variable, tool_summary_key};
use super::target::{self, TargetFault};

/// Which transport a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        })
    }
}

/// A credential as configured, unexpanded: ideally one `${NAME}` reference.
///
/// `Debug` and `Serialize` show the text only when it is exactly one `${NAME}`
/// reference (which names where the secret lives, not the secret); a literal
/// token prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps an unexpanded credential.
    pub fn new(unexpanded: impl Into<String>) -> Self {
        Self(unexpanded.into())
    }

    /// The credential as configured, before expansion. Handle with care: it is a
    /// literal token unless [`is_reference`](Self::is_reference).
    pub fn unexpanded(&self) -> &str {
        &self.0
    }

    /// Whether it is exactly one `${NAME}` reference.
    pub fn is_reference(&self) -> bool {
        is_single_reference(&self.0)
    }

    fn shown(&self) -> &str {
        if self.is_reference() {
            &self.0
        } else {
            REDACTED
        }
    }
}

const REDACTED: &str = "<redacted>";

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_reference() {
            write!(f, "Secret({:?})", self.0)
        } else {
            f.write_str("Secret(<redacted>)")
        }
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.shown())
    }
}

/// How to start a stdio server. All strings unexpanded.
#[derive(Clone, PartialEq, Eq, Default, Serialize)]
pub struct StdioDefinition {
    /// One exact executable, never split on white space and never run through a shell.
    pub command: String,
    /// The argument array.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory, when not the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables added to the child's environment. Values may be secrets and are
    /// never printed.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "serialize_redacted_values"
    )]
    pub env: BTreeMap<String, String>,
}

impl StdioDefinition {
    /// A command with no arguments, working directory or environment.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }
}

/// How to reach a Streamable HTTP server. All strings unexpanded.
#[derive(Clone, PartialEq, Eq, Default, Serialize)]
pub struct HttpDefinition {
    /// The absolute `http://` or `https://` endpoint. Printed only as its origin.
    #[serde(serialize_with = "serialize_url")]
    pub url: String,
    /// The bearer credential, sent as `Authorization: Bearer <token>`.
    #[serde(
        rename = "authorization",
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_bearer"
    )]
    pub bearer: Option<Secret>,
    /// Supplementary request headers. Values may be secrets and are never printed.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "serialize_redacted_values"
    )]
    pub headers: BTreeMap<String, String>,
}

impl HttpDefinition {
    /// An endpoint with no credential or extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

/// A server's transport and its connection parameters.
///
/// Serializes as the `transport` discriminator of the `McpServerDefinition`
/// wire shape (`"stdio"` or `"http"`) beside the variant's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum Transport {
    /// A child process.
    Stdio(StdioDefinition),
    /// Streamable HTTP.
    Http(HttpDefinition),
}

impl Transport {
    /// Which transport this is.
    pub fn kind(&self) -> TransportKind {
        match self {
            Self::Stdio(_) => TransportKind::Stdio,
            Self::Http(_) => TransportKind::Http,
        }
    }
}

/// The fields of a server definition before validation.
///
/// [`ServerDefinition::new`] checks them; [`ServerDefinition::into_parts`]
/// gives them back, so a layer of the configuration cascade can replace fields
/// and validate again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionParts {
    /// The server's name, `[a-z][a-z0-9-]*`.
    #[serde(rename = "name")]
    pub alias: String,
    /// How to reach it.
    #[serde(flatten)]
    pub transport: Transport,
    /// The exact tool names enabled; `None` enables every tool the server lists,
    /// `Some(vec![])` enables none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The enabled tools the operator classifies as read-only; every other enabled
    /// tool keeps the conservative `host` effect. A subset of `tools` when that is
    /// given; otherwise checked against the server's tool list once it is known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// The authored one-line server orientation, unexpanded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Authored one-line tool orientations, unexpanded, keyed by
    /// [`tool_summary_key`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_summaries: BTreeMap<String, String>,
}

impl DefinitionParts {
    /// A definition with every tool enabled, none read-only, and no summaries.
    pub fn new(alias: impl Into<String>, transport: Transport) -> Self {
        Self {
            alias: alias.into(),
            transport,
            tools: None,
            read: Vec::new(),
            summary: None,
            tool_summaries: BTreeMap::new(),
        }
    }
}

/// A validated, unexpanded server definition: the normalized durable shape.
///
/// Holding one means the alias, target, companions and tool policy are all
/// well-formed; what remains to go wrong is `${NAME}` expansion against a
/// particular environment ([`prepare`](Self::prepare)) and the server itself.
///
/// `Debug` and `Serialize` never show a secret: environment and header values
/// print as `<redacted>`, the URL only as its origin, the bearer only when it
/// is one `${NAME}` reference. Command, arguments and working directory print
/// as written (unexpanded).
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ServerDefinition {
    parts: DefinitionParts,
}

impl ServerDefinition {
    /// Validates `parts`, reporting every fault. Faults name each setting by its
    /// canonical variable (`PLURNK_MCP_<ALIAS>_READ`), the way the environment
    /// and configuration overlays spell it. Tool summary keys are normalized
    /// with [`tool_summary_key`].
    ///
    /// # Errors
    ///
    /// Every fault in the parts, all at once.
    pub fn new(parts: DefinitionParts) -> Result<Self, ConfigErrors> {
        let mut faults = Vec::new();
        check_alias("the alias", &parts.alias, &mut faults);
        let names = SettingNames::canonical(&parts.alias);
        let mut tool_summaries = BTreeMap::new();
        for (tool, summary) in parts.tool_summaries {
            let key = tool_summary_key(&tool);
            if key.is_empty() {
                faults.push(ConfigError::Empty {
                    variable: format!("the tool name of a summary of {}", names.target()),
                });
            } else if tool_summaries.insert(key.clone(), summary).is_some() {
                faults.push(ConfigError::DuplicateEntry {
                    variable: names.tool_summary(&key),
                    entry: key,
                });
            }
        }
        let parts = DefinitionParts {
            tool_summaries,
            ..parts
        };
        let mut checker = Checker::new(&names, None);
        checker.transport(&parts.transport);
        checker.tools_and_read(parts.tools.as_deref(), &parts.read);
        checker.summaries(parts.summary.as_deref(), &parts.tool_summaries);
        faults.append(&mut checker.faults);
        ConfigErrors::check(faults)?;
        Ok(Self { parts })
    }

    /// A definition from an alias and a target, as `add` receives them: an
    /// absolute `http(s)://` URL selects Streamable HTTP, anything else is one
    /// exact stdio executable. Every tool is enabled.
    ///
    /// # Errors
    ///
    /// An invalid or reserved alias, an empty target, or a target that starts
    /// like an HTTP URL but is not absolute.
    pub fn from_target(alias: &str, target: &str) -> Result<Self, ConfigErrors> {
        let transport = match target::classify(target) {
            Ok(TransportKind::Stdio) => Transport::Stdio(StdioDefinition::new(target)),
            Ok(TransportKind::Http) => Transport::Http(HttpDefinition::new(target)),
            Err(fault) => {
                let mut faults = Vec::new();
                check_alias("the alias", alias, &mut faults);
                let mut errors = ConfigErrors::from(target_fault(fault, "the target"));
                errors.extend(faults);
                return Err(errors);
            }
        };
        Self::new(DefinitionParts::new(alias, transport))
    }

    /// Already checked by the loader, which names faults by the variables as written.
    pub(crate) fn from_checked(parts: DefinitionParts) -> Self {
        Self { parts }
    }

    /// The fields, for a cascade layer to replace some and validate again.
    pub fn into_parts(self) -> DefinitionParts {
        self.parts
    }

    /// The fields, borrowed.
    pub fn parts(&self) -> &DefinitionParts {
        &self.parts
    }

    /// The server's name.
    pub fn alias(&self) -> &str {
        &self.parts.alias
    }

    /// How to reach it.
    pub fn transport(&self) -> &Transport {
        &self.parts.transport
    }

    /// The exact enabled tool names; `None` enables every listed tool.
    pub fn tools(&self) -> Option<&[String]> {
        self.parts.tools.as_deref()
    }

    /// The tools classified read-only.
    pub fn read(&self) -> &[String] {
        &self.parts.read
    }

    /// The authored server summary, unexpanded.
    pub fn summary(&self) -> Option<&str> {
        self.parts.summary.as_deref()
    }

    /// Authored tool summaries, unexpanded, keyed by [`tool_summary_key`].
    pub fn tool_summaries(&self) -> &BTreeMap<String, String> {
        &self.parts.tool_summaries
    }

    /// The authored summary of `tool` (matched through [`tool_summary_key`]), unexpanded.
    pub fn tool_summary(&self, tool: &str) -> Option<&str> {
        self.parts
            .tool_summaries
            .get(&tool_summary_key(tool))
            .map(String::as_str)
    }

    /// Whether the tool policy enables `tool` (exact name).
    pub fn enables_tool(&self, tool: &str) -> bool {
        self.parts
            .tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }

    /// Whether the operator classified `tool` (exact name) as read-only.
    pub fn is_read(&self, tool: &str) -> bool {
        self.parts.read.iter().any(|t| t == tool)
    }

    /// Every `${NAME}` reference fault against `env`, all at once, without
    /// expanding anything. [`prepare`](Self::prepare) stops at the first.
    ///
    /// # Errors
    ///
    /// Every malformed reference and every name `env` does not hold.
    pub fn check_references(&self, env: &Environment) -> Result<(), ConfigErrors> {
        let names = SettingNames::canonical(&self.parts.alias);
        let mut checker = Checker::new(&names, Some(env));
        checker.transport(&self.parts.transport);
        checker.summaries(self.summary(), self.tool_summaries());
        ConfigErrors::check(checker.faults)
    }
}

impl fmt::Debug for ServerDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        f.debug_struct("ServerDefinition")
            .field("alias", &p.alias)
            .field("transport", &p.transport)
            .field("tools", &p.tools)
            .field("read", &p.read)
            .field("summary", &p.summary)
            .field("tool_summaries", &p.tool_summaries)
            .finish()
    }
}

/// Prints `<redacted>` without quotes.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A map's keys with every value redacted.
pub(crate) struct RedactedValues<'a, K>(pub(crate) &'a [K]);

impl<K: fmt::Debug> fmt::Debug for RedactedValues<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|k| (k, Redacted)))
            .finish()
    }
}

/// Prints a string without quotes.
pub(crate) struct Bare<'a>(pub(crate) &'a str);

impl fmt::Debug for Bare<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for StdioDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env_keys: Vec<&String> = self.env.keys().collect();
        f.debug_struct("StdioDefinition")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &RedactedValues(&env_keys))
            .finish()
    }
}

impl fmt::Debug for HttpDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&String> = self.headers.keys().collect();
        f.debug_struct("HttpDefinition")
            .field("url", &target::redact_url(&self.url))
            .field("bearer", &self.bearer)
            .field("headers", &RedactedValues(&header_names))
            .finish()
    }
}

fn serialize_redacted_values<S: Serializer>(
    map: &BTreeMap<String, String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(map.keys().map(|k| (k, REDACTED)))
}

fn serialize_url<S: Serializer>(url: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&target::redact_url(url))
}

fn serialize_bearer<S: Serializer>(
    bearer: &Option<Secret>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    /// The wire's `authorization: { type: "bearer", token: "${NAME}" }`.
    #[derive(Serialize)]
    struct Bearer<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        token: &'a Secret,
    }
    match bearer {
        Some(token) => Bearer {
            kind: "bearer",
            token,
        }
        .serialize(serializer),
        None => serializer.serialize_none(),
    }
}

// === validation ===

/// How faults name each setting of one server: the variables as the operator
/// wrote them when loading the environment, else the canonical
/// `PLURNK_MCP_<ALIAS>_<SUFFIX>`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SettingNames {
    target: String,
    companions: BTreeMap<Suffix, String>,
    tool_summaries: BTreeMap<String, String>,
}

impl SettingNames {
    pub(crate) fn canonical(alias: &str) -> Self {
        Self {
            target: target_variable(alias),
            ..Self::default()
        }
    }

    /// Names as written: the target's variable, then each companion's as it is found.
    pub(crate) fn written(target: &str) -> Self {
        Self {
            target: target.to_owned(),
            ..Self::default()
        }
    }

    pub(crate) fn set_companion(&mut self, suffix: Suffix, variable: &str) {
        self.companions.insert(suffix, variable.to_owned());
    }

    pub(crate) fn set_tool_summary(&mut self, key: &str, variable: &str) {
        self.tool_summaries
            .insert(key.to_owned(), variable.to_owned());
    }

    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    pub(crate) fn companion(&self, suffix: Suffix) -> String {
        self.companions
            .get(&suffix)
            .cloned()
            .unwrap_or_else(|| format!("{}{}", self.target, suffix.upper()))
    }

    pub(crate) fn tool_summary(&self, key: &str) -> String {
        self.tool_summaries
            .get(key)
            .cloned()
            .unwrap_or_else(|| format!("{}_{}_SUMMARY", self.target, key.to_ascii_uppercase()))
    }
}

/// The fault for a target that cannot be used.
pub(crate) fn target_fault(fault: TargetFault, variable: &str) -> ConfigError {
    let variable = variable.to_owned();
    match fault {
        TargetFault::Empty => ConfigError::Empty { variable },
        TargetFault::NotAbsoluteUrl => ConfigError::NotAbsoluteUrl { variable },
    }
}

/// Checks that `alias` can name a server.
pub(crate) fn check_alias(variable: &str, alias: &str, faults: &mut Vec<ConfigError>) {
    let variable = variable.to_owned();
    let name = alias.to_owned();
    if !is_alias_syntax(alias) {
        faults.push(ConfigError::InvalidName { variable, name });
    } else if RESERVED_ALIASES.contains(&alias) {
        faults.push(ConfigError::ReservedName { variable, name });
    } else if let Some((suffix, _)) = Suffix::split(alias) {
        faults.push(ConfigError::NameEndsInCompanion {
            variable,
            name,
            suffix: suffix.upper(),
        });
    }
}

/// Checks a list of names: none empty, none twice. Returns the distinct names.
pub(crate) fn check_name_list<'a>(
    variable: &str,
    list: &'a [String],
    faults: &mut Vec<ConfigError>,
) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut repeated = BTreeSet::new();
    for (i, name) in list.iter().enumerate() {
        if name.is_empty() {
            faults.push(ConfigError::EmptyEntry {
                variable: variable.to_owned(),
                position: i + 1,
            });
        } else if !seen.insert(name.as_str()) && repeated.insert(name.as_str()) {
            faults.push(ConfigError::DuplicateEntry {
                variable: variable.to_owned(),
                entry: name.clone(),
            });
        }
    }
    seen
}

/// Collects the faults of one server's fields. With an environment it also
/// checks that every `${NAME}` resolves; without one, only reference syntax.
pub(crate) struct Checker<'a> {
    names: &'a SettingNames,
    env: Option<&'a Environment>,
    pub(crate) faults: Vec<ConfigError>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(names: &'a SettingNames, env: Option<&'a Environment>) -> Self {
        Self {
            names,
            env,
            faults: Vec::new(),
        }
    }

    fn references(&mut self, variable: &str, s: &str) {
        self.faults
            .extend(Environment::check(self.env, variable, s));
    }

    /// A value that is expanded later: it must not be blank, and its references must resolve.
    fn expandable(&mut self, variable: &str, s: &str) {
        if s.trim().is_empty() {
            self.faults.push(ConfigError::Empty {
                variable: variable.to_owned(),
            });
        } else {
            self.references(variable, s);
        }
    }

    pub(crate) fn transport(&mut self, transport: &Transport) {
        match transport {
            Transport::Stdio(stdio) => self.stdio(stdio),
            Transport::Http(http) => self.http(http),
        }
    }

    pub(crate) fn target(&mut self, target: &str) {
        self.references(self.names.target(), target);
    }

    fn stdio(&mut self, stdio: &StdioDefinition) {
        let target = self.names.target().to_owned();
        if stdio.command.trim().is_empty() {
            self.faults.push(ConfigError::Empty { variable: target });
        } else {
            self.target(&stdio.command);
        }
        self.args(&stdio.args);
        if let Some(cwd) = &stdio.cwd {
            self.cwd(cwd);
        }
        self.env(&stdio.env);
    }

    pub(crate) fn args(&mut self, args: &[String]) {
        let variable = self.names.companion(Suffix::Args);
        for (i, arg) in args.iter().enumerate() {
            // An empty argument is legitimate; only references are checked.
            self.references(&format!("{variable} element {}", i + 1), arg);
        }
    }

    pub(crate) fn cwd(&mut self, cwd: &str) {
        self.expandable(&self.names.companion(Suffix::Cwd), cwd);
    }

    pub(crate) fn env(&mut self, env: &BTreeMap<String, String>) {
        let variable = self.names.companion(Suffix::Env);
        for (name, value) in env {
            if let Some(shown) = target::invalid_env_name(name) {
                self.faults.push(ConfigError::InvalidEnvName {
                    variable: variable.clone(),
                    shown,
                });
                continue;
            }
            // An empty value is legitimate (it sets the variable to "").
            self.references(&format!("{variable} entry {name:?}"), value);
        }
    }

    fn http(&mut self, http: &HttpDefinition) {
        let target = self.names.target().to_owned();
        if http.url.trim().is_empty() {
            self.faults.push(ConfigError::Empty { variable: target });
        } else if !target::is_absolute_http_url(&http.url) {
            self.faults
                .push(ConfigError::NotAbsoluteUrl { variable: target });
        } else {
            self.target(&http.url);
        }
        self.headers(&http.headers);
        if let Some(bearer) = &http.bearer {
            self.bearer(bearer.unexpanded(), &http.headers);
        }
    }

    pub(crate) fn headers(&mut self, headers: &BTreeMap<String, String>) {
        let variable = self.names.companion(Suffix::Headers);
        let mut seen = BTreeSet::new();
        for (name, value) in headers {
            if let Some(shown) = target::invalid_header_name(name) {
                self.faults.push(ConfigError::InvalidHeaderName {
                    variable: variable.clone(),
                    shown,
                });
                continue;
            }
            if target::is_reserved_header(name) {
                self.faults.push(ConfigError::ReservedHeader {
                    variable: variable.clone(),
                    header: name.clone(),
                });
            }
            // Header names compare case-insensitively, so `X-A` and `x-a` clash.
            let lower = name.to_ascii_lowercase();
            if !seen.insert(lower.clone()) {
                self.faults.push(ConfigError::DuplicateEntry {
                    variable: variable.clone(),
                    entry: lower,
                });
            }
            if !target::is_valid_header_value(value) {
                self.faults.push(ConfigError::InvalidHeaderValue {
                    variable: variable.clone(),
                    header: name.clone(),
                });
            }
            self.references(&format!("{variable} entry {name:?}"), value);
        }
    }

    pub(crate) fn bearer(&mut self, bearer: &str, headers: &BTreeMap<String, String>) {
        let variable = self.names.companion(Suffix::Bearer);
        if !target::is_valid_header_value(bearer) {
            self.faults.push(ConfigError::InvalidHeaderValue {
                variable: variable.clone(),
                header: "Authorization".to_owned(),
            });
        }
        self.expandable(&variable, bearer);
        if let Some(header) = headers
            .keys()
            .find(|name| name.eq_ignore_ascii_case("authorization"))
        {
            self.faults
                .push(ConfigError::BearerWithAuthorizationHeader {
                    variable,
                    headers_variable: self.names.companion(Suffix::Headers),
                    header: header.clone(),
                });
        }
    }

    pub(crate) fn tools_and_read(&mut self, tools: Option<&[String]>, read: &[String]) {
        let tools_variable = self.names.companion(Suffix::Tools);
        let read_variable = self.names.companion(Suffix::Read);
        let enabled = tools.map(|tools| check_name_list(&tools_variable, tools, &mut self.faults));
        let read = check_name_list(&read_variable, read, &mut self.faults);
        // Without `_TOOLS` the read names are checked against the server's own
        // list once it is known; that is a runtime Problem, not a load fault.
        if let Some(enabled) = enabled {
            for tool in read.difference(&enabled) {
                self.faults.push(ConfigError::ReadNotInTools {
                    variable: read_variable.clone(),
                    tool: (*tool).to_owned(),
                    tools_variable: tools_variable.clone(),
                });
            }
        }
    }

    pub(crate) fn summaries(
        &mut self,
        summary: Option<&str>,
        tool_summaries: &BTreeMap<String, String>,
    ) {
        if let Some(summary) = summary {
            self.expandable(&self.names.companion(Suffix::Summary), summary);
        }
        for (key, summary) in tool_summaries {
            self.expandable(&self.names.tool_summary(key), summary);
        }
    }
}
