//! The checks a definition meets: SettingNames (how a fault names each setting) and the
//! Checker that reads a target, a name list or an alias into its definition or its faults.

use std::collections::{BTreeMap, BTreeSet};

use super::authorization::Authorization;
use super::environment::{Environment, is_single_reference};
use super::error::ConfigError;
use super::keys::{NAMESPACE_ALIASES, RESERVED_ALIASES, Suffix, is_alias_syntax, target_variable};
use super::sandbox::SandboxPolicy;
use super::target::TransportKind;
use super::target::{self, TargetFault};

use super::transport::{HttpDefinition, StdioDefinition, Transport};

/// How faults name each setting of one server.
///
/// In *variable style* (the loader, [`ServerDefinition::new`](super::ServerDefinition::new),
/// the overlay) a setting is named by the variable as the operator wrote it, else by the
/// canonical `PLURNK_MCP_<ALIAS>_<SUFFIX>`. In *field style* (the wire
/// definition, options) it is named by its JSON path, such as `github.headers`
/// or `options.authorization.clientSecret`. Any setting can be renamed on its
/// own, so a definition resolved through the cascade names each field by the
/// layer that supplied it.
#[derive(Debug, Clone)]
pub(crate) struct SettingNames {
    /// The variable or field naming the alias itself.
    alias: String,
    /// The server's name, for authorization fields in variable style.
    server: String,
    target: String,
    /// `Some(prefix)` in field style.
    fields: Option<String>,
    companions: BTreeMap<Suffix, String>,
    tool_summaries: BTreeMap<String, String>,
    /// The whole authorization, when renamed; its fields are `<name>.<field>`.
    authorization: Option<String>,
}

impl SettingNames {
    /// Variable style with every name canonical.
    pub(crate) fn canonical(alias: &str) -> Self {
        Self::written(alias, &target_variable(alias))
    }

    /// Variable style: the target's variable as written, then each companion's as it is found.
    pub(crate) fn written(alias: &str, target: &str) -> Self {
        Self {
            alias: "the alias".to_owned(),
            server: alias.to_owned(),
            target: target.to_owned(),
            fields: None,
            companions: BTreeMap::new(),
            tool_summaries: BTreeMap::new(),
            authorization: None,
        }
    }

    /// Field style under `prefix`: `<prefix>.name`, `<prefix>.command` or
    /// `<prefix>.url`, `<prefix>.args`, `<prefix>.authorization.token`, ...
    pub(crate) fn fields(alias: &str, prefix: &str, kind: TransportKind) -> Self {
        let target = match kind {
            TransportKind::Stdio => "command",
            TransportKind::Http => "url",
            TransportKind::InProcess => "target",
            TransportKind::Cli | TransportKind::Script | TransportKind::OpenApi => "declaration",
        };
        Self {
            alias: format!("{prefix}.name"),
            server: alias.to_owned(),
            target: format!("{prefix}.{target}"),
            fields: Some(prefix.to_owned()),
            companions: BTreeMap::new(),
            tool_summaries: BTreeMap::new(),
            authorization: None,
        }
    }

    pub(crate) fn set_companion(&mut self, suffix: Suffix, variable: &str) {
        self.companions.insert(suffix, variable.to_owned());
    }

    pub(crate) fn set_tool_summary(&mut self, key: &str, variable: &str) {
        self.tool_summaries
            .insert(key.to_owned(), variable.to_owned());
    }

    /// Names the whole authorization; its fields become `<name>.<field>`.
    pub(crate) fn set_authorization(&mut self, name: &str) {
        self.authorization = Some(name.to_owned());
    }

    /// Undoes [`set_authorization`](Self::set_authorization).
    pub(crate) fn clear_authorization(&mut self) {
        self.authorization = None;
    }

    pub(crate) fn alias(&self) -> &str {
        &self.alias
    }

    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    pub(crate) fn companion(&self, suffix: Suffix) -> String {
        if let Some(name) = self.companions.get(&suffix) {
            return name.clone();
        }
        match &self.fields {
            Some(prefix) => format!("{prefix}.{}", wire_field(suffix)),
            None => format!("{}{}", self.target, suffix.upper()),
        }
    }

    pub(crate) fn tool_summary(&self, key: &str) -> String {
        if let Some(name) = self.tool_summaries.get(key) {
            return name.clone();
        }
        match &self.fields {
            Some(prefix) => format!("{prefix}.toolSummaries.{key}"),
            None => format!("{}_{}_SUMMARY", self.target, key.to_ascii_uppercase()),
        }
    }

    /// The name of the whole authorization: a bearer from the environment is
    /// its `_BEARER` variable.
    pub(crate) fn authorization(&self, authorization: &Authorization) -> String {
        if let Some(name) = &self.authorization {
            return name.clone();
        }
        match (&self.fields, authorization) {
            (Some(prefix), _) => format!("{prefix}.authorization"),
            (None, Authorization::Bearer { .. }) => self.companion(Suffix::Bearer),
            (None, _) => format!("{}.authorization", self.server),
        }
    }

    /// The name of one field of the authorization, by its wire name.
    pub(crate) fn authorization_field(&self, authorization: &Authorization, field: &str) -> String {
        if self.authorization.is_none()
            && self.fields.is_none()
            && matches!(authorization, Authorization::Bearer { .. })
        {
            return self.companion(Suffix::Bearer);
        }
        format!("{}.{field}", self.authorization(authorization))
    }
}

/// A companion's field in the wire shape.
fn wire_field(suffix: Suffix) -> &'static str {
    match suffix {
        Suffix::Args => "args",
        Suffix::Cwd => "cwd",
        Suffix::Env => "env",
        Suffix::Bearer => "authorization.token",
        Suffix::Headers => "headers",
        Suffix::Authorization => "authorization",
        Suffix::Tools => "tools",
        Suffix::Read => "read",
        Suffix::Summary => "summary",
        Suffix::Sandbox => "sandbox",
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

/// The fault of a command written as a command line (`python3 x.py`, `/usr/bin/python3
/// x.py`) with no arguments beside it: several words, no `${NAME}` (its value may be one
/// path), no file of the whole name, and a first word that is a program's bare name or a file
/// that exists. A path with a space in it (`/opt/My Server/run`) is an executable like any
/// other.
fn command_line(command: &str, names: &SettingNames) -> Option<ConfigError> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.len() < 2 || command.contains("${") || std::path::Path::new(command).exists() {
        return None;
    }
    let program = words[0];
    if program.contains('/') && !std::path::Path::new(program).is_file() {
        return None;
    }
    Some(ConfigError::CommandLine {
        variable: names.target().to_owned(),
        words: words.len(),
        args: names.companion(Suffix::Args),
    })
}

/// Checks that `alias` can name a server.
pub(crate) fn check_alias(variable: &str, alias: &str, faults: &mut Vec<ConfigError>) {
    let variable = variable.to_owned();
    let name = alias.to_owned();
    if !is_alias_syntax(alias) {
        faults.push(ConfigError::InvalidName { variable, name });
    } else if RESERVED_ALIASES.contains(&alias) {
        faults.push(ConfigError::ReservedName { variable, name });
    } else if NAMESPACE_ALIASES.contains(&alias) {
        faults.push(ConfigError::NamespaceName { variable, name });
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

const HTTP_URL: &str =
    "an absolute http(s) URL with a host and no spaces, such as https://host/path";
const REDIRECT_URL: &str =
    "an absolute URL with a scheme and no spaces, such as http://127.0.0.1:3000/callback";

/// Whether `s` is an absolute URL of any scheme (`scheme:rest`) with no white
/// space or control characters.
fn is_absolute_url(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut scheme_bytes = scheme.bytes();
    scheme_bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && scheme_bytes.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !rest.is_empty()
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The optional ways of reaching and authorizing a server this build carries: each is a
/// cargo feature of the crate, and a definition that needs one that is off is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Built {
    pub stdio: bool,
    pub http: bool,
    pub sources: bool,
    pub oauth: bool,
    pub sandbox: bool,
}

impl Built {
    /// What this build was compiled with.
    pub(crate) const THIS: Built = Built {
        stdio: cfg!(feature = "stdio"),
        http: cfg!(feature = "http"),
        sources: cfg!(feature = "sources"),
        oauth: cfg!(feature = "oauth"),
        sandbox: cfg!(feature = "sandbox"),
    };
}

/// A sandbox policy that asks for a sandbox in a build without the `sandbox` feature is
/// refused naming the feature; `off` asks for nothing and is accepted.
pub(crate) fn sandbox_built(variable: &str, policy: &SandboxPolicy, faults: &mut Vec<ConfigError>) {
    if !Built::THIS.sandbox && !policy.is_off() {
        faults.push(ConfigError::FeatureOff {
            variable: variable.to_owned(),
            what: "asks for a sandbox",
            feature: "sandbox",
        });
    }
}

/// Collects the faults of one server's fields. With an environment it also
/// checks that every `${NAME}` resolves; without one, only reference syntax.
pub(crate) struct Checker<'a> {
    names: &'a SettingNames,
    env: Option<&'a Environment>,
    /// Whether a bearer, too, must be one `${NAME}` reference (OAuth client
    /// secrets always must): true for everything but the service environment.
    strict: bool,
    /// What the build carries: a definition needing more is refused.
    built: Built,
    pub(crate) faults: Vec<ConfigError>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(names: &'a SettingNames, env: Option<&'a Environment>) -> Self {
        Self {
            names,
            env,
            strict: false,
            built: Built::THIS,
            faults: Vec::new(),
        }
    }

    /// Checks as a build carrying only `built` would.
    #[cfg(test)]
    pub(crate) fn built(mut self, built: Built) -> Self {
        self.built = built;
        self
    }

    /// Requires every credential, a bearer included, to be one `${NAME}` reference.
    pub(crate) fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
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

    /// A literal value that must not be blank.
    fn non_blank(&mut self, variable: &str, s: &str) {
        if s.trim().is_empty() {
            self.faults.push(ConfigError::Empty {
                variable: variable.to_owned(),
            });
        }
    }

    /// A literal URL: an absolute http(s) URL, or for a redirect any absolute URL.
    fn url(&mut self, variable: &str, s: &str, redirect: bool) {
        let (fits, expected) = if redirect {
            (is_absolute_url(s), REDIRECT_URL)
        } else {
            (target::is_absolute_http_url(s), HTTP_URL)
        };
        if s.trim().is_empty() {
            self.non_blank(variable, s);
        } else if !fits {
            self.faults.push(ConfigError::InvalidUrl {
                variable: variable.to_owned(),
                expected,
            });
        }
    }

    /// A credential: one `${NAME}` reference when `strict`, and sendable in a header when `header`.
    fn credential(&mut self, variable: &str, s: &str, strict: bool, header: bool) {
        if strict && !is_single_reference(s) {
            self.faults.push(ConfigError::CredentialNotReference {
                variable: variable.to_owned(),
            });
            return;
        }
        if header && !target::is_valid_header_value(s) {
            self.faults.push(ConfigError::InvalidHeaderValue {
                variable: variable.to_owned(),
                header: "Authorization".to_owned(),
            });
        }
        self.expandable(variable, s);
    }

    pub(crate) fn transport(&mut self, transport: &Transport) {
        self.built_for(transport);
        match transport {
            Transport::Stdio(stdio) => self.stdio(stdio),
            Transport::Http(http) => self.http(http),
            Transport::InProcess => {}
            // Its kind's reader checked its shape; here, that its references resolve.
            Transport::Source(source) => {
                let origin = source.origin.clone();
                super::each_string(&source.declaration, &mut |path, text| {
                    self.references(&format!("{origin}: {path}"), text);
                });
            }
        }
    }

    pub(crate) fn target(&mut self, target: &str) {
        self.references(self.names.target(), target);
    }

    /// A transport this build was compiled without is a fault naming the cargo feature.
    fn built_for(&mut self, transport: &Transport) {
        let (what, feature, built) = match transport {
            Transport::Stdio(_) => ("is a command (a stdio server)", "stdio", self.built.stdio),
            Transport::Http(_) => (
                "is an http(s) URL (a Streamable HTTP server)",
                "http",
                self.built.http,
            ),
            Transport::Source(_) => ("is a tool source", "sources", self.built.sources),
            Transport::InProcess => return,
        };
        if !built {
            self.faults.push(ConfigError::FeatureOff {
                variable: self.names.target().to_owned(),
                what,
                feature,
            });
        }
    }

    fn stdio(&mut self, stdio: &StdioDefinition) {
        let target = self.names.target().to_owned();
        match target::classify(&stdio.command) {
            Err(fault) => self.faults.push(target_fault(fault, &target)),
            // The environment picks http for such a target, so it cannot be a command.
            Ok(TransportKind::Http) => self
                .faults
                .push(ConfigError::UrlAsCommand { variable: target }),
            Ok(_) => {
                self.target(&stdio.command);
                if stdio.args.is_empty()
                    && let Some(fault) = command_line(&stdio.command, self.names)
                {
                    self.faults.push(fault);
                }
            }
        }
        self.args(&stdio.args);
        if let Some(cwd) = &stdio.cwd {
            self.cwd(cwd);
        }
        self.env(&stdio.env);
        if let Some(policy) = &stdio.sandbox {
            let variable = self.names.companion(Suffix::Sandbox);
            policy.check(&variable, &mut self.faults);
            if !self.built.sandbox && !policy.is_off() {
                self.faults.push(ConfigError::FeatureOff {
                    variable,
                    what: "asks for a sandbox",
                    feature: "sandbox",
                });
            }
        }
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
        if let Some(authorization) = &http.authorization {
            self.authorization(authorization, &http.headers);
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

    /// A bearer read from the environment whose server's transport is unknown.
    pub(crate) fn bearer(&mut self, bearer: &str, headers: &BTreeMap<String, String>) {
        self.authorization(&Authorization::bearer(bearer), headers);
    }

    /// An authorization of any kind, and that `headers` does not also set `Authorization`.
    pub(crate) fn authorization(
        &mut self,
        authorization: &Authorization,
        headers: &BTreeMap<String, String>,
    ) {
        let names = self.names;
        let field = |name: &str| names.authorization_field(authorization, name);
        if !self.built.oauth && !matches!(authorization, Authorization::Bearer { .. }) {
            self.faults.push(ConfigError::FeatureOff {
                variable: names.authorization(authorization),
                what: "asks for OAuth (an interactive flow, or a machine grant)",
                feature: "oauth",
            });
        }
        match authorization {
            Authorization::Bearer { token } => {
                self.credential(&field("token"), token.unexpanded(), self.strict, true);
            }
            Authorization::OAuth(oauth) => {
                if let Some(url) = &oauth.redirect_url {
                    self.url(&field("redirectUrl"), url, true);
                }
                if let Some(url) = &oauth.client_metadata_url {
                    self.url(&field("clientMetadataUrl"), url, false);
                }
                if let Some(id) = &oauth.client_id {
                    self.non_blank(&field("clientId"), id);
                }
                if let Some(secret) = &oauth.client_secret {
                    self.credential(&field("clientSecret"), secret.unexpanded(), true, false);
                }
                // The pre-registered form is a pair; CIMD replaces it.
                match (&oauth.client_id, &oauth.client_secret) {
                    (Some(_), None) => self.faults.push(ConfigError::FieldNeedsField {
                        variable: field("clientId"),
                        needs: field("clientSecret"),
                    }),
                    (None, Some(_)) => self.faults.push(ConfigError::FieldNeedsField {
                        variable: field("clientSecret"),
                        needs: field("clientId"),
                    }),
                    _ => {}
                }
                if oauth.client_metadata_url.is_some() && oauth.client_id.is_some() {
                    self.faults.push(ConfigError::ConflictingFields {
                        variable: field("clientMetadataUrl"),
                        other: field("clientId"),
                    });
                }
                if let Some(scope) = &oauth.scope {
                    self.non_blank(&field("scope"), scope);
                }
            }
            Authorization::ClientCredentials(grant) => {
                self.non_blank(&field("clientId"), &grant.client_id);
                self.credential(
                    &field("clientSecret"),
                    grant.client_secret.unexpanded(),
                    true,
                    false,
                );
                if let Some(scope) = &grant.scope {
                    self.non_blank(&field("scope"), scope);
                }
                if let Some(issuer) = &grant.issuer {
                    self.url(&field("issuer"), issuer, false);
                }
            }
            Authorization::WorkloadIdentity(grant) => {
                self.credential(
                    &field("assertion"),
                    grant.assertion.unexpanded(),
                    true,
                    false,
                );
                if let Some(client_id) = &grant.client_id {
                    self.non_blank(&field("clientId"), client_id);
                }
                if let Some(scope) = &grant.scope {
                    self.non_blank(&field("scope"), scope);
                }
                if let Some(issuer) = &grant.issuer {
                    self.url(&field("issuer"), issuer, false);
                }
            }
        }
        if let Some(header) = headers
            .keys()
            .find(|name| name.eq_ignore_ascii_case("authorization"))
        {
            self.faults
                .push(ConfigError::BearerWithAuthorizationHeader {
                    variable: names.authorization(authorization),
                    headers_variable: names.companion(Suffix::Headers),
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
