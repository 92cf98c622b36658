//! Reading the `PLURNK_MCP_` namespace out of a variable map into a [`HostConfig`], collecting every fault.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use super::HostConfig;
use super::authorization::Authorization;
use super::check::{Checker, SettingNames, check_alias, check_name_list, target_fault};
use super::definition::{DefinitionParts, ServerDefinition};
use super::environment::Environment;
use super::error::{ConfigError, ConfigErrors};
use super::json;
use super::keys::{
    Global, PREFIX, RESERVED_ALIASES, Suffix, fold, is_alias_syntax, target_variable,
    tool_summary_key,
};
use super::literal::literal_authorization;
use super::sandbox::SandboxPolicy;
use super::target;
use super::target::TransportKind;
use super::transport::{HttpDefinition, StdioDefinition, Transport};
use super::wire::McpAuthorization;

/// The companion variables found for one declared server.
#[derive(Default)]
pub(crate) struct Companions<'a> {
    /// `_ARGS`, `_CWD`, ... `_SUMMARY` (the server's own), by the key as written.
    by_suffix: BTreeMap<Suffix, &'a str>,
    /// `_<tool>_SUMMARY`, by [`tool_summary_key`], with the key as written.
    tool_summaries: BTreeMap<String, &'a str>,
}

/// A key that ends in a companion suffix, before it is matched to a server.
pub(crate) struct CompanionKey<'a> {
    pub(crate) key: &'a str,
    pub(crate) folded: String,
    pub(crate) suffix: Suffix,
    /// Length of the folded key before `-<suffix word>`.
    pub(crate) stem_len: usize,
}

impl CompanionKey<'_> {
    /// The folded key before `-<suffix word>`.
    pub(crate) fn stem(&self) -> &str {
        &self.folded[..self.stem_len]
    }
}

/// What one pass over a variable map finds in the `PLURNK_MCP_` namespace.
pub(crate) struct Scan<'a> {
    /// The global settings, by the key as written.
    pub(crate) globals: BTreeMap<Global, &'a str>,
    /// Declared servers: folded alias to the target's key as written.
    pub(crate) declared: BTreeMap<String, &'a str>,
    /// The companions of declared servers.
    attached: BTreeMap<String, Companions<'a>>,
    /// Companions that no declared server claims.
    pub(crate) unattached: Vec<CompanionKey<'a>>,
}

pub(crate) fn load(env: Environment) -> Result<HostConfig, ConfigErrors> {
    let mut faults = Vec::new();
    let scan = scan(&env, &mut faults);
    for companion in &scan.unattached {
        faults.push(unattached(companion));
    }
    let mut servers = read_servers(&env, &scan, Some(&env), &mut faults);
    let Scan {
        globals, declared, ..
    } = scan;
    let mut declared: BTreeMap<String, String> = declared
        .into_iter()
        .map(|(alias, key)| (alias, key.to_owned()))
        .collect();
    if let Some(key) = globals.get(&Global::Sources) {
        for (alias, claimant, definition) in
            read_sources(key, env.get(key).unwrap_or_default(), &mut faults)
        {
            if let Some(first) = declared.get(&alias) {
                faults.push(ConfigError::DuplicateClaim {
                    alias,
                    first: first.clone(),
                    second: claimant,
                });
                continue;
            }
            declared.insert(alias.clone(), claimant);
            servers.insert(alias, definition);
        }
    }
    let declared: BTreeSet<String> = declared.into_keys().collect();
    let globals: BTreeMap<Global, String> = globals
        .into_iter()
        .map(|(global, key)| (global, key.to_owned()))
        .collect();
    finish(env, servers, &globals, &declared, faults)
}

/// Reads every `*.json` declaration in the directory `PLURNK_MCP_SOURCES` names, in name
/// order: (alias, the file, its definition). Each fault names the file (and the field and the
/// fix); a file with a fault contributes nothing.
fn read_sources(
    variable: &str,
    directory: &str,
    faults: &mut Vec<ConfigError>,
) -> Vec<(String, String, ServerDefinition)> {
    let source_fault = |origin: &str, field: &str, problem: String, fix: &str| {
        ConfigError::InvalidSource(super::DeclarationError::new(origin, field, problem, fix))
    };
    let path = std::path::Path::new(directory.trim());
    if !path.is_absolute() {
        faults.push(source_fault(
            variable,
            "(the value)",
            "is not an absolute directory path".to_owned(),
            "name the directory of tool-source declarations by its absolute path",
        ));
        return Vec::new();
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) => {
            faults.push(source_fault(
                variable,
                "(the directory)",
                format!("cannot be read ({error})"),
                "create it, or point the variable at the directory that holds the declarations",
            ));
            return Vec::new();
        }
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|file| file.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let origin = file.display().to_string();
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) => {
                faults.push(source_fault(
                    &origin,
                    "(the file)",
                    format!("cannot be read ({error})"),
                    "make it readable by the host",
                ));
                continue;
            }
        };
        let value: serde_json::Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(error) => {
                faults.push(source_fault(
                    &origin,
                    &format!("line {} column {}", error.line(), error.column()),
                    "is not valid JSON".to_owned(),
                    "write one JSON object with \"kind\", \"name\" and the fields of its kind",
                ));
                continue;
            }
        };
        let kind = value.get("kind").and_then(serde_json::Value::as_str);
        let Some(kind) = kind.and_then(TransportKind::source_named) else {
            faults.push(source_fault(
                &origin,
                "kind",
                match kind {
                    Some(other) => format!("names no kind of source (\"{other}\")"),
                    None => "is missing".to_owned(),
                },
                "write \"kind\": \"cli\", \"script\" or \"openapi\"",
            ));
            continue;
        };
        let Some(name) = value.get("name").and_then(serde_json::Value::as_str) else {
            faults.push(source_fault(
                &origin,
                "name",
                "is missing".to_owned(),
                "write \"name\": the alias, [a-z][a-z0-9-]*",
            ));
            continue;
        };
        let name = name.to_owned();
        let mut value = value;
        super::anchor(kind, &mut value, &origin);
        // Its reader reads the declaration when the host starts (every fault at once).
        match ServerDefinition::declared_source(&name, kind, value, &origin) {
            Ok(definition) => found.push((name, origin, definition)),
            Err(errors) => faults.extend(errors.errors().iter().cloned()),
        }
    }
    found
}

/// Finds every global, declared server and companion in `env`'s
/// `PLURNK_MCP_` keys, attaching each companion it can to its server.
/// Reports duplicates after folding and unusable server names.
pub(crate) fn scan<'a>(env: &'a Environment, faults: &mut Vec<ConfigError>) -> Scan<'a> {
    // Group our keys by their folded form: keys that fold alike set one thing, so
    // more than one in a group is a duplicate, reported once for the group.
    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (key, _) in env.iter() {
        if let Some(rest) = key.strip_prefix(PREFIX) {
            groups.entry(fold(rest)).or_default().push(key);
        }
    }

    let mut globals: BTreeMap<Global, &str> = BTreeMap::new();
    let mut declared: BTreeMap<String, &str> = BTreeMap::new();
    let mut companion_keys = Vec::new();
    for (folded, keys) in groups {
        let Some(&key) = keys.first() else { continue };
        let what = if let Some(global) = Global::from_folded(&folded) {
            globals.insert(global, key);
            format!("setting {}", global.variable())
        } else if let Some((suffix, stem_len)) = Suffix::split(&folded) {
            companion_keys.push(CompanionKey {
                key,
                folded,
                suffix,
                stem_len,
            });
            format!("{} companion", suffix.upper())
        } else {
            let what = format!("server \"{folded}\"");
            declared.insert(folded, key);
            what
        };
        if keys.len() > 1 {
            faults.push(ConfigError::DuplicateSetting {
                variables: keys.iter().map(|k| (*k).to_owned()).collect(),
                what,
            });
        }
    }

    // A declared key never ends in a companion word and never folds to a global
    // (those were sorted out above), so only the syntax can be wrong here.
    for (alias, key) in &declared {
        check_alias(key, alias, faults);
    }

    let mut attached: BTreeMap<String, Companions<'_>> = BTreeMap::new();
    let mut unattached = Vec::new();
    for companion in companion_keys {
        let Some((alias, tool)) = resolve(&companion, &declared) else {
            unattached.push(companion);
            continue;
        };
        let found = attached.entry(alias.to_owned()).or_default();
        match tool {
            None => {
                found.by_suffix.insert(companion.suffix, companion.key);
            }
            Some(range) => {
                let tool = tool_summary_key(&companion.folded[range]);
                // `A.B` and `A_B` fold apart but name the same tool key.
                if let Some(earlier) = found.tool_summaries.insert(tool.clone(), companion.key) {
                    let mut variables = vec![earlier.to_owned(), companion.key.to_owned()];
                    variables.sort();
                    faults.push(ConfigError::DuplicateSetting {
                        variables,
                        what: format!("summary of tool \"{tool}\" of server \"{alias}\""),
                    });
                }
            }
        }
    }

    Scan {
        globals,
        declared,
        attached,
        unattached,
    }
}

/// Reads every declared server with a usable name. `references` is what
/// `${NAME}` must resolve against: the map itself for the service
/// environment, nothing (syntax only) for a client overlay.
pub(crate) fn read_servers(
    env: &Environment,
    scan: &Scan<'_>,
    references: Option<&Environment>,
    faults: &mut Vec<ConfigError>,
) -> BTreeMap<String, ServerDefinition> {
    let mut servers = BTreeMap::new();
    let empty = Companions::default();
    for (alias, key) in &scan.declared {
        if !is_alias_syntax(alias) {
            continue;
        }
        let companions = scan.attached.get(alias).unwrap_or(&empty);
        let server = load_server(env, references, alias, key, companions, faults);
        if let Some(definition) = server {
            servers.insert(alias.clone(), definition);
        }
    }
    servers
}

/// Reads the service controls and assembles the configuration.
fn finish(
    env: Environment,
    servers: BTreeMap<String, ServerDefinition>,
    globals: &BTreeMap<Global, String>,
    declared: &BTreeSet<String>,
    mut faults: Vec<ConfigError>,
) -> Result<HostConfig, ConfigErrors> {
    let timeout = |global: Global, default: Duration, faults: &mut Vec<ConfigError>| {
        read_timeout(&env, globals.get(&global).map(String::as_str), faults).unwrap_or(default)
    };
    let connect_timeout = timeout(
        Global::ConnectTimeout,
        HostConfig::DEFAULT_CONNECT_TIMEOUT,
        &mut faults,
    );
    let request_timeout = timeout(
        Global::RequestTimeout,
        HostConfig::DEFAULT_REQUEST_TIMEOUT,
        &mut faults,
    );
    if let Some(variable) = globals.get(&Global::DiscoverTimeout) {
        faults.push(ConfigError::Retired {
            variable: variable.clone(),
            advice: "the host now waits for a server's answer to server/discover on its one \
                     connection, within PLURNK_MCP_CONNECT_TIMEOUT: remove it, and raise \
                     PLURNK_MCP_CONNECT_TIMEOUT for a server slow to start",
        });
    }
    let (enabled, expanded) = read_enabled_and_expanded(&env, globals, declared, &mut faults);
    let allow_add = match globals.get(&Global::AllowAdd).map(String::as_str) {
        None => false,
        Some(key) => match env.get(key).unwrap_or_default().trim() {
            "true" | "1" => true,
            "false" | "0" | "" => false,
            _ => {
                faults.push(ConfigError::InvalidSwitch {
                    variable: key.to_owned(),
                });
                false
            }
        },
    };
    let workspace_env: BTreeSet<String> = globals
        .get(&Global::WorkspaceEnv)
        .and_then(|key| json::string_array(key, env.get(key).unwrap_or_default(), &mut faults))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let inherit_env = globals
        .get(&Global::InheritEnv)
        .map(|key| super::inherit::read(key, env.get(key).unwrap_or_default(), &mut faults))
        .unwrap_or_default();
    let sandbox = globals.get(&Global::Sandbox).and_then(|key| {
        let policy =
            SandboxPolicy::from_variable(key, env.get(key).unwrap_or_default(), &mut faults)?;
        super::check::sandbox_built(key, &policy, &mut faults);
        Some(policy)
    });

    // Sorting by variable groups each variable's faults together; the sort is
    // stable, so within a variable they keep the order they were found in.
    faults.sort_by(|a, b| a.variable().cmp(b.variable()));
    ConfigErrors::check(faults)?;
    Ok(HostConfig {
        servers,
        enabled,
        expanded,
        connect_timeout,
        request_timeout,
        allow_add,
        workspace_env,
        inherit_env,
        sandbox,
        env,
    })
}

/// Which declared server a companion belongs to, and for `_<tool>_SUMMARY` the
/// tool's part of the folded key.
///
/// Every companion but a summary must be exactly `<alias>-<word>`. A summary
/// is `<alias>-summary` or `<alias>-<tool>-summary`; the longest declared alias
/// that fits wins, so with `github` and `github-enterprise` both declared,
/// `GITHUB_ENTERPRISE_SUMMARY` is `github-enterprise`'s own summary.
fn resolve<'d>(
    companion: &CompanionKey<'_>,
    declared: &'d BTreeMap<String, &str>,
) -> Option<(&'d str, Option<Range<usize>>)> {
    let stem = companion.stem();
    if let Some((alias, _)) = declared.get_key_value(stem) {
        return Some((alias, None));
    }
    if companion.suffix != Suffix::Summary {
        return None;
    }
    stem.rmatch_indices('-').find_map(|(i, _)| {
        let tool = i + 1..companion.stem_len;
        if tool.is_empty() {
            return None;
        }
        let (alias, _) = declared.get_key_value(&stem[..i])?;
        Some((alias.as_str(), Some(tool)))
    })
}

/// The fault for a companion that no declared server claims.
pub(crate) fn unattached(companion: &CompanionKey<'_>) -> ConfigError {
    let stem = companion.stem();
    if RESERVED_ALIASES.contains(&stem) {
        ConfigError::ReservedName {
            variable: companion.key.to_owned(),
            name: stem.to_owned(),
        }
    } else {
        ConfigError::OrphanCompanion {
            variable: companion.key.to_owned(),
            server: stem.to_owned(),
            suffix: companion.suffix.upper(),
            declare: target_variable(stem),
        }
    }
}

/// Reads one declared server and its companions, reporting every fault.
///
/// Returns a definition whenever the target is usable, even if some companion
/// was faulty (it is left at its default): the caller discards everything
/// when any fault was found, and reading on finds the remaining faults.
fn load_server(
    env: &Environment,
    references: Option<&Environment>,
    alias: &str,
    key: &str,
    companions: &Companions<'_>,
    faults: &mut Vec<ConfigError>,
) -> Option<ServerDefinition> {
    let target = env.get(key).unwrap_or_default();
    let kind = match target::classify(target) {
        Ok(kind) => Some(kind),
        Err(fault) => {
            faults.push(target_fault(fault, key));
            None
        }
    };
    let mut names = written_names(alias, key, companions);
    let mut reader = Reader {
        env,
        alias,
        key,
        kind,
        companions,
        faults,
    };
    let args = reader.array(Suffix::Args);
    let cwd = reader.string(Suffix::Cwd);
    let vars = reader.map(Suffix::Env);
    let sandbox = reader.sandbox();
    let bearer = reader.string(Suffix::Bearer);
    let headers = reader.map(Suffix::Headers);
    let declared = reader.authorization();
    let tools = reader.array(Suffix::Tools);
    let read = reader.array(Suffix::Read).unwrap_or_default();
    let summary = reader.string(Suffix::Summary);
    let tool_summaries = tool_summaries(env, companions);

    // `_AUTHORIZATION` excludes `_BEARER` (also while its own value is faulty) and names its
    // own fields; its literal credentials were found as it was read.
    if let (Some(_), Some(variable), Some(bearer)) = (
        &bearer,
        companions.by_suffix.get(&Suffix::Authorization),
        companions.by_suffix.get(&Suffix::Bearer),
    ) {
        faults.push(ConfigError::ConflictingFields {
            variable: (*variable).to_owned(),
            other: (*bearer).to_owned(),
        });
    }
    let mut literal = Vec::new();
    let authorization = match declared {
        Some(declared) => {
            names.set_authorization(declared.variable);
            literal = declared.literal;
            Some(declared.authorization)
        }
        None if companions.by_suffix.contains_key(&Suffix::Authorization) => None,
        None => bearer.map(Authorization::bearer),
    };

    // Outside the service environment (a client overlay) every credential
    // must be a reference, which only the service resolves.
    let strict = references.is_none();
    let mut checker = Checker::new(&names, references).strict(strict);
    let transport = match kind {
        // A target never names an in-process server (`classify` does not answer it).
        Some(
            TransportKind::Stdio
            | TransportKind::InProcess
            | TransportKind::Cli
            | TransportKind::Script
            | TransportKind::OpenApi,
        ) => Some(Transport::Stdio(StdioDefinition {
            command: target.to_owned(),
            args: args.unwrap_or_default(),
            cwd,
            env: vars.unwrap_or_default(),
            sandbox,
        })),
        Some(TransportKind::Http) => Some(Transport::Http(HttpDefinition {
            url: target.to_owned(),
            authorization,
            headers: headers.unwrap_or_default(),
        })),
        None => {
            let settings = Settings {
                args: args.as_deref().unwrap_or_default(),
                cwd: cwd.as_deref(),
                env: &vars.unwrap_or_default(),
                headers: &headers.unwrap_or_default(),
                authorization: authorization.as_ref(),
            };
            check_each_setting(&mut checker, &settings);
            None
        }
    };
    if let Some(transport) = &transport {
        checker.transport(transport);
    }
    checker.tools_and_read(tools.as_deref(), &read);
    checker.summaries(summary.as_deref(), &tool_summaries);
    // A literal client secret is also not a reference: one fault, not two.
    checker.faults.retain(|fault| !literal.contains(fault));
    faults.append(&mut literal);
    faults.append(&mut checker.faults);

    Some(ServerDefinition::from_checked(DefinitionParts {
        alias: alias.to_owned(),
        transport: transport?,
        tools,
        read,
        summary,
        tool_summaries,
    }))
}

/// How faults name this server's settings: by the variables as the operator wrote them.
fn written_names(alias: &str, key: &str, companions: &Companions<'_>) -> SettingNames {
    let mut names = SettingNames::written(alias, key);
    for (suffix, variable) in &companions.by_suffix {
        names.set_companion(*suffix, variable);
    }
    for (tool, variable) in &companions.tool_summaries {
        names.set_tool_summary(tool, variable);
    }
    names
}

/// The tool summaries written for this server, by tool.
fn tool_summaries(env: &Environment, companions: &Companions<'_>) -> BTreeMap<String, String> {
    companions
        .tool_summaries
        .iter()
        .map(|(tool, variable)| {
            (
                tool.clone(),
                env.get(variable).unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A server's settings as read, whatever its transport.
struct Settings<'a> {
    args: &'a [String],
    cwd: Option<&'a str>,
    env: &'a BTreeMap<String, String>,
    headers: &'a BTreeMap<String, String>,
    authorization: Option<&'a Authorization>,
}

/// The transport is unknown, so each setting is checked on its own: the faults it has
/// under any transport are still reported, all at once.
fn check_each_setting(checker: &mut Checker<'_>, settings: &Settings<'_>) {
    checker.args(settings.args);
    if let Some(cwd) = settings.cwd {
        checker.cwd(cwd);
    }
    checker.env(settings.env);
    checker.headers(settings.headers);
    if let Some(authorization) = settings.authorization {
        checker.authorization(authorization, settings.headers);
    }
}

/// Reads one server's companions, recording their faults.
struct Reader<'a, 'f> {
    env: &'a Environment,
    alias: &'a str,
    key: &'a str,
    /// `None` when the target is unusable: then every companion is read for its
    /// own faults, since which transport it should fit is unknown.
    kind: Option<TransportKind>,
    companions: &'a Companions<'a>,
    faults: &'f mut Vec<ConfigError>,
}

impl<'a> Reader<'a, '_> {
    /// The variable and raw value of a companion, if set and fitting the transport.
    fn raw(&mut self, suffix: Suffix) -> Option<(&'a str, &'a str)> {
        let variable = *self.companions.by_suffix.get(&suffix)?;
        if let (Some(applies_to), Some(kind)) = (suffix.applies_to(), self.kind)
            && applies_to != kind
        {
            self.faults.push(ConfigError::WrongTransport {
                variable: variable.to_owned(),
                server: self.alias.to_owned(),
                applies_to,
                target_variable: self.key.to_owned(),
            });
            return None;
        }
        Some((variable, self.env.get(variable).unwrap_or_default()))
    }

    fn string(&mut self, suffix: Suffix) -> Option<String> {
        self.raw(suffix).map(|(_, raw)| raw.to_owned())
    }

    fn array(&mut self, suffix: Suffix) -> Option<Vec<String>> {
        let (variable, raw) = self.raw(suffix)?;
        json::string_array(variable, raw, self.faults)
    }

    fn map(&mut self, suffix: Suffix) -> Option<BTreeMap<String, String>> {
        let (variable, raw) = self.raw(suffix)?;
        json::string_map(variable, raw, self.faults)
    }

    /// `_SANDBOX`: a sandbox policy, read by its own reader.
    fn sandbox(&mut self) -> Option<SandboxPolicy> {
        let (variable, raw) = self.raw(Suffix::Sandbox)?;
        SandboxPolicy::from_variable(variable, raw, self.faults)
    }

    /// `_AUTHORIZATION`: the wire's union, read by its own reader.
    fn authorization(&mut self) -> Option<Declared<'a>> {
        let (variable, raw) = self.raw(Suffix::Authorization)?;
        let (wire, value) = McpAuthorization::from_variable(variable, raw, self.faults)?;
        Some(Declared {
            variable,
            authorization: Authorization::from(&wire),
            literal: literal_authorization(variable, &value),
        })
    }
}

/// A server's `_AUTHORIZATION`, read.
struct Declared<'a> {
    /// The variable as written.
    variable: &'a str,
    authorization: Authorization,
    /// Every credential it writes literally, as faults naming its fields.
    literal: Vec<ConfigError>,
}

/// Reads `PLURNK_MCP_ENABLED` and `PLURNK_MCP_EXPANDED`: every enabled name
/// declared, every expanded name enabled.
fn read_enabled_and_expanded(
    env: &Environment,
    globals: &BTreeMap<Global, String>,
    declared: &BTreeSet<String>,
    faults: &mut Vec<ConfigError>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    // Servers whose declaration was faulty still count as declared here, so a
    // bad name is reported once rather than again from PLURNK_MCP_ENABLED.
    let enabled_list = alias_list(
        env,
        globals.get(&Global::Enabled).map(String::as_str),
        faults,
    );
    if let Some((key, list)) = &enabled_list {
        for alias in list {
            if !declared.contains(alias.as_str()) {
                faults.push(ConfigError::UnknownServer {
                    variable: (*key).to_owned(),
                    alias: alias.clone(),
                });
            }
        }
    }
    let enabled: BTreeSet<String> = enabled_list
        .as_ref()
        .map(|(_, list)| list.iter().cloned().collect())
        .unwrap_or_default();

    let expanded_list = alias_list(
        env,
        globals.get(&Global::Expanded).map(String::as_str),
        faults,
    );
    // An unreadable PLURNK_MCP_ENABLED was reported already; don't pile on.
    let enabled_readable = globals
        .get(&Global::Enabled)
        .is_none_or(|_| enabled_list.is_some());
    if let Some((key, list)) = &expanded_list
        && enabled_readable
    {
        for alias in list {
            if !enabled.contains(alias) {
                faults.push(ConfigError::ExpandedNotEnabled {
                    variable: (*key).to_owned(),
                    alias: alias.clone(),
                });
            }
        }
    }
    let expanded = expanded_list
        .map(|(_, list)| list.into_iter().collect())
        .unwrap_or_default();
    (enabled, expanded)
}

/// Reads a timeout global; `None` when unset or faulty (the fault is recorded).
fn read_timeout(
    env: &Environment,
    key: Option<&str>,
    faults: &mut Vec<ConfigError>,
) -> Option<Duration> {
    let key = key?;
    let timeout = parse_timeout(env.get(key).unwrap_or_default());
    if timeout.is_none() {
        faults.push(ConfigError::InvalidTimeout {
            variable: key.to_owned(),
        });
    }
    timeout
}

/// A positive whole number of milliseconds.
fn parse_timeout(raw: &str) -> Option<Duration> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let millis: u64 = raw.parse().ok()?;
    (millis > 0).then(|| Duration::from_millis(millis))
}

/// Reads `PLURNK_MCP_ENABLED` or `_EXPANDED`: a JSON array of distinct aliases.
/// `None` when unset or unreadable (the fault is recorded).
fn alias_list<'a>(
    env: &Environment,
    key: Option<&'a str>,
    faults: &mut Vec<ConfigError>,
) -> Option<(&'a str, Vec<String>)> {
    let key = key?;
    let list = json::string_array(key, env.get(key).unwrap_or_default(), faults)?;
    check_name_list(key, &list, faults);
    Some((key, list))
}
