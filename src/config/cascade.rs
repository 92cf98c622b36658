//! The configuration cascade: service environment, durable workspace specialization, client configuration overlay, then explicit action options, field by field.
//!
//! A layer with a *target* (a service or workspace definition, or an overlay
//! entry with `PLURNK_MCP_<SERVER>` set) replaces the whole lower definition
//! before its own companions apply. A layer without one (overlay companions
//! alone, [`McpServerOptions`]) *specializes* the lower definition: each field
//! it sets replaces that field, and arrays and maps replace their lower value
//! instead of appending or merging. A field that does not fit the lower
//! definition's transport is a fault naming the field, found before any
//! connection work. [`resolve`] is the whole cascade as a pure function;
//! [`ServerDefinition::with_options`] is its last step alone.
//!
//! The [`Overlay`] is read by the same code as the service environment
//! (`PLURNK_MCP_*` keys, folded alike, with the same faults), carries no
//! service controls, and has no serialized form: what persists is the
//! resolved [`ServerDefinition`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::authorization::Authorization;
use super::check::{Checker, SettingNames, check_alias, check_name_list};
use super::definition::{DefinitionParts, ServerDefinition};
use super::environment::Environment;
use super::error::{ConfigError, ConfigErrors};
use super::json;
use super::keys::{PREFIX, RESERVED_ALIASES, Suffix, target_variable, tool_summary_key};
use super::literal::literal_authorization;
use super::load;
use super::sandbox::SandboxPolicy;
use super::target::TransportKind;
use super::transport::{RedactedValues, Transport};
use super::wire::{McpAuthorization, McpServerOptions, OPTIONS};

/// One field a layer sets, with the name faults give it.
#[derive(Clone, PartialEq, Eq)]
struct Set<T> {
    name: String,
    value: T,
}

impl<T> Set<T> {
    fn new(name: impl Into<String>, value: T) -> Self {
        Self {
            name: name.into(),
            value,
        }
    }
}

/// The fields a target-less layer replaces.
#[derive(Clone, Default, PartialEq, Eq)]
struct Patch {
    args: Option<Set<Vec<String>>>,
    cwd: Option<Set<String>>,
    env: Option<Set<BTreeMap<String, String>>>,
    sandbox: Option<Set<SandboxPolicy>>,
    headers: Option<Set<BTreeMap<String, String>>>,
    /// `true` when named by a `_BEARER` variable, else by a wire path.
    authorization: Option<(Set<Authorization>, bool)>,
    tools: Option<Set<Vec<String>>>,
    read: Option<Set<Vec<String>>>,
    summary: Option<Set<String>>,
    tool_summaries: BTreeMap<String, Set<String>>,
}

impl Patch {
    /// Options as a patch; a credential that is not one `${NAME}` reference is a fault.
    fn from_options(options: &McpServerOptions, faults: &mut Vec<ConfigError>) -> Self {
        let name = |field: &str| format!("{OPTIONS}.{field}");
        let authorization = options.authorization.as_ref().map(|wire| {
            let authorization = Authorization::from(wire);
            for (field, secret) in authorization.credentials() {
                if !secret.is_reference() {
                    faults.push(ConfigError::CredentialNotReference {
                        variable: name(&format!("authorization.{field}")),
                    });
                }
            }
            (Set::new(name("authorization"), authorization), false)
        });
        Self {
            args: options.args.clone().map(|v| Set::new(name("args"), v)),
            cwd: options.cwd.clone().map(|v| Set::new(name("cwd"), v)),
            env: options.env.clone().map(|v| Set::new(name("env"), v)),
            sandbox: options
                .sandbox
                .clone()
                .map(|v| Set::new(name("sandbox"), v)),
            headers: options
                .headers
                .clone()
                .map(|v| Set::new(name("headers"), v)),
            authorization,
            tools: options.tools.clone().map(|v| Set::new(name("tools"), v)),
            read: options.read.clone().map(|v| Set::new(name("read"), v)),
            summary: None,
            tool_summaries: BTreeMap::new(),
        }
    }

    /// The names of every field it sets, in a stable order.
    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = [
            self.args.as_ref().map(|s| s.name.as_str()),
            self.cwd.as_ref().map(|s| s.name.as_str()),
            self.env.as_ref().map(|s| s.name.as_str()),
            self.sandbox.as_ref().map(|s| s.name.as_str()),
            self.headers.as_ref().map(|s| s.name.as_str()),
            self.authorization.as_ref().map(|(s, _)| s.name.as_str()),
            self.tools.as_ref().map(|s| s.name.as_str()),
            self.read.as_ref().map(|s| s.name.as_str()),
            self.summary.as_ref().map(|s| s.name.as_str()),
        ]
        .into_iter()
        .flatten()
        .collect();
        names.extend(self.tool_summaries.values().map(|s| s.name.as_str()));
        names
    }

    /// Replaces each field it sets in `parts`, renaming it in `names`. A field
    /// for the other transport is a fault naming it.
    fn apply(
        &self,
        parts: &mut DefinitionParts,
        names: &mut SettingNames,
        faults: &mut Vec<ConfigError>,
    ) {
        let wrong = |name: &str, applies_to: TransportKind| ConfigError::WrongTransport {
            variable: name.to_owned(),
            server: parts.alias.clone(),
            applies_to,
            target_variable: names.target().to_owned(),
        };
        let mut wrong_transport = Vec::new();
        match &parts.transport {
            Transport::Stdio(_) => {
                if let Some(set) = &self.headers {
                    wrong_transport.push(wrong(&set.name, TransportKind::Http));
                }
                if let Some((set, _)) = &self.authorization {
                    wrong_transport.push(wrong(&set.name, TransportKind::Http));
                }
            }
            Transport::Http(_) => {
                let stdio_only = [
                    self.args.as_ref().map(|s| &s.name),
                    self.cwd.as_ref().map(|s| &s.name),
                    self.env.as_ref().map(|s| &s.name),
                    self.sandbox.as_ref().map(|s| &s.name),
                ];
                for name in stdio_only.into_iter().flatten() {
                    wrong_transport.push(wrong(name, TransportKind::Stdio));
                }
            }
            Transport::InProcess | Transport::Source(_) => {
                let connection = [
                    self.args.as_ref().map(|s| &s.name),
                    self.cwd.as_ref().map(|s| &s.name),
                    self.env.as_ref().map(|s| &s.name),
                    self.sandbox.as_ref().map(|s| &s.name),
                    self.headers.as_ref().map(|s| &s.name),
                    self.authorization.as_ref().map(|(s, _)| &s.name),
                ];
                for name in connection.into_iter().flatten() {
                    wrong_transport.push(ConfigError::InProcessNotConfigurable {
                        variable: name.clone(),
                        server: parts.alias.clone(),
                    });
                }
            }
        }
        if !wrong_transport.is_empty() {
            faults.append(&mut wrong_transport);
            return;
        }
        match &mut parts.transport {
            Transport::Stdio(stdio) => {
                if let Some(set) = &self.args {
                    stdio.args.clone_from(&set.value);
                    names.set_companion(Suffix::Args, &set.name);
                }
                if let Some(set) = &self.cwd {
                    stdio.cwd = Some(set.value.clone());
                    names.set_companion(Suffix::Cwd, &set.name);
                }
                if let Some(set) = &self.env {
                    stdio.env.clone_from(&set.value);
                    names.set_companion(Suffix::Env, &set.name);
                }
                if let Some(set) = &self.sandbox {
                    stdio.sandbox = Some(set.value.clone());
                    names.set_companion(Suffix::Sandbox, &set.name);
                }
            }
            Transport::Http(http) => {
                if let Some(set) = &self.headers {
                    http.headers.clone_from(&set.value);
                    names.set_companion(Suffix::Headers, &set.name);
                }
                if let Some((set, is_variable)) = &self.authorization {
                    http.authorization = Some(set.value.clone());
                    if *is_variable {
                        names.set_companion(Suffix::Bearer, &set.name);
                        names.clear_authorization();
                    } else {
                        names.set_authorization(&set.name);
                    }
                }
            }
            Transport::InProcess | Transport::Source(_) => {}
        }
        if let Some(set) = &self.tools {
            parts.tools = Some(set.value.clone());
            names.set_companion(Suffix::Tools, &set.name);
        }
        if let Some(set) = &self.read {
            parts.read.clone_from(&set.value);
            names.set_companion(Suffix::Read, &set.name);
        }
        if let Some(set) = &self.summary {
            parts.summary = Some(set.value.clone());
            names.set_companion(Suffix::Summary, &set.name);
        }
        for (key, set) in &self.tool_summaries {
            parts.tool_summaries.insert(key.clone(), set.value.clone());
            names.set_tool_summary(key, &set.name);
        }
    }
}

impl fmt::Debug for Patch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Patch")
            .field(&RedactedValues(&self.names()))
            .finish()
    }
}

// === the overlay ===

/// A client configuration overlay: `PLURNK_MCP_<SERVER>` targets and
/// companions as a client carries them, read by the same code as the service
/// environment.
///
/// It holds no service controls (`PLURNK_MCP_ENABLED`, `_EXPANDED`, the
/// timeouts): those are faults here. Its `${NAME}` references are checked for
/// syntax only, since they resolve against the *service* environment when a
/// connection is prepared; every credential must be one such reference.
/// Companions whose server the overlay gives no target are not orphans but
/// specializations of that server's lower definition. It has no serialized
/// form, so it can never be persisted as raw environment syntax; `Debug`
/// shows no value.
#[derive(Clone, PartialEq, Eq)]
pub struct Overlay {
    /// Servers the overlay gives a target.
    definitions: BTreeMap<String, ServerDefinition>,
    /// Companions of servers the overlay gives no target.
    loose: Vec<Loose>,
}

/// A target-less companion, parsed.
#[derive(Clone, PartialEq, Eq)]
struct Loose {
    variable: String,
    folded: String,
    suffix: Suffix,
    stem_len: usize,
    value: LooseValue,
}

impl Loose {
    fn stem(&self) -> &str {
        &self.folded[..self.stem_len]
    }
}

#[derive(Clone, PartialEq, Eq)]
enum LooseValue {
    Text(String),
    List(Vec<String>),
    Map(BTreeMap<String, String>),
    Authorization(Authorization),
    Sandbox(SandboxPolicy),
}

/// One server's entry in an [`Overlay`].
// Made per request and matched at once; boxing either variant buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayServer {
    /// The overlay gives the server a target: this complete definition
    /// replaces every lower layer.
    Definition(ServerDefinition),
    /// Companions without a target, which specialize the lower definition.
    Specialization(OverlaySpecialization),
}

impl OverlayServer {
    /// The server's alias.
    pub fn alias(&self) -> &str {
        match self {
            Self::Definition(definition) => definition.alias(),
            Self::Specialization(specialization) => &specialization.alias,
        }
    }
}

/// Target-less overlay companions of one server.
#[derive(Clone, PartialEq, Eq)]
pub struct OverlaySpecialization {
    alias: String,
    patch: Patch,
}

impl OverlaySpecialization {
    /// The server's alias.
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The overlay variables it consists of.
    pub fn variables(&self) -> Vec<&str> {
        self.patch.names()
    }
}

impl fmt::Debug for OverlaySpecialization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverlaySpecialization")
            .field("alias", &self.alias)
            .field("variables", &self.patch.names())
            .finish()
    }
}

impl Overlay {
    /// Reads an overlay from a map of `PLURNK_MCP_*` keys, with the service
    /// environment's rules.
    ///
    /// # Errors
    ///
    /// Every fault at once: those the environment would report (bad names,
    /// duplicates after folding, invalid JSON, wrong-transport companions of a
    /// server with an overlay target, malformed references, ...), plus any key
    /// outside `PLURNK_MCP_`, any service control, and any credential that is
    /// not one `${NAME}` reference.
    pub fn from_env_map<I, K, V>(map: I) -> Result<Self, ConfigErrors>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let env = Environment::new(map);
        let mut faults = Vec::new();
        for (key, _) in env.iter() {
            if !key.starts_with(PREFIX) {
                faults.push(ConfigError::NotInNamespace {
                    shown: key
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .take(64)
                        .collect(),
                });
            }
        }
        let scan = load::scan(&env, &mut faults);
        for key in scan.globals.values() {
            faults.push(ConfigError::ServiceControlInOverlay {
                variable: (*key).to_owned(),
            });
        }
        let definitions = load::read_servers(&env, &scan, None, &mut faults);
        let mut loose: Vec<Loose> = Vec::new();
        for companion in &scan.unattached {
            if let Some(parsed) = read_loose(&env, companion, &mut faults) {
                loose.push(parsed);
            }
        }
        for authorization in loose.iter().filter(|l| l.suffix == Suffix::Authorization) {
            if let Some(bearer) = loose
                .iter()
                .find(|l| l.suffix == Suffix::Bearer && l.stem() == authorization.stem())
            {
                faults.push(ConfigError::ConflictingFields {
                    variable: authorization.variable.clone(),
                    other: bearer.variable.clone(),
                });
            }
        }
        faults.sort_by(|a, b| a.variable().cmp(b.variable()));
        ConfigErrors::check(faults)?;
        Ok(Self { definitions, loose })
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty() && self.loose.is_empty()
    }

    /// The servers the overlay gives a target, complete definitions by alias.
    /// Those not in the available set are client-only definitions.
    pub fn definitions(&self) -> &BTreeMap<String, ServerDefinition> {
        &self.definitions
    }

    /// Every alias the overlay defines or specializes (a target-less
    /// `_<tool>_SUMMARY` aside, whose server is only known when asked for).
    pub fn aliases(&self) -> BTreeSet<String> {
        let mut aliases: BTreeSet<String> = self.definitions.keys().cloned().collect();
        aliases.extend(
            self.loose
                .iter()
                .filter(|l| l.suffix != Suffix::Summary)
                .map(|l| l.stem().to_owned()),
        );
        aliases
    }

    /// The overlay's entry for `alias`: its definition when the overlay gives
    /// the server a target, else the companions that specialize it, else `None`.
    ///
    /// A target-less `PLURNK_MCP_<A>_<B>_SUMMARY` is read as in the service
    /// environment, the longest fitting alias winning: it is tool `b`'s summary
    /// for `alias` `a` unless the overlay mentions a server `a-b` (or a longer
    /// fit), and server `a-b`'s own summary when asked for `a-b`.
    pub fn server(&self, alias: &str) -> Option<OverlayServer> {
        if let Some(definition) = self.definitions.get(alias) {
            return Some(OverlayServer::Definition(definition.clone()));
        }
        let mentioned = self.aliases();
        let longer_fit = |stem: &str| {
            mentioned.iter().any(|other| {
                other.len() > alias.len()
                    && (stem == other
                        || stem
                            .strip_prefix(other.as_str())
                            .is_some_and(|rest| rest.starts_with('-')))
            })
        };
        let mut patch = Patch::default();
        let mut any = false;
        for l in &self.loose {
            let stem = l.stem();
            if stem == alias {
                any = true;
                set_loose(&mut patch, l);
            } else if l.suffix == Suffix::Summary
                && let Some(tool) = stem
                    .strip_prefix(alias)
                    .and_then(|rest| rest.strip_prefix('-'))
                && !tool.is_empty()
                && !longer_fit(stem)
                && let LooseValue::Text(text) = &l.value
            {
                any = true;
                patch.tool_summaries.insert(
                    tool_summary_key(tool),
                    Set::new(l.variable.clone(), text.clone()),
                );
            }
        }
        any.then(|| {
            OverlayServer::Specialization(OverlaySpecialization {
                alias: alias.to_owned(),
                patch,
            })
        })
    }
}

/// Sets the field a server's own target-less companion names.
fn set_loose(patch: &mut Patch, l: &Loose) {
    let name = l.variable.clone();
    match (&l.value, l.suffix) {
        (LooseValue::List(v), Suffix::Args) => patch.args = Some(Set::new(name, v.clone())),
        (LooseValue::Text(v), Suffix::Cwd) => patch.cwd = Some(Set::new(name, v.clone())),
        (LooseValue::Map(v), Suffix::Env) => patch.env = Some(Set::new(name, v.clone())),
        (LooseValue::Sandbox(v), Suffix::Sandbox) => {
            patch.sandbox = Some(Set::new(name, v.clone()));
        }
        (LooseValue::Map(v), Suffix::Headers) => patch.headers = Some(Set::new(name, v.clone())),
        (LooseValue::Text(v), Suffix::Bearer) => {
            patch.authorization = Some((Set::new(name, Authorization::bearer(v.clone())), true));
        }
        (LooseValue::Authorization(v), Suffix::Authorization) => {
            patch.authorization = Some((Set::new(name, v.clone()), false));
        }
        (LooseValue::List(v), Suffix::Tools) => patch.tools = Some(Set::new(name, v.clone())),
        (LooseValue::List(v), Suffix::Read) => patch.read = Some(Set::new(name, v.clone())),
        (LooseValue::Text(v), Suffix::Summary) => patch.summary = Some(Set::new(name, v.clone())),
        // `read_loose` pairs every suffix with its kind of value.
        _ => {}
    }
}

/// Parses and checks one target-less overlay companion on its own; what
/// depends on the lower definition (its transport, `_READ` within `_TOOLS`) is
/// checked when it is applied.
fn read_loose(
    env: &Environment,
    companion: &load::CompanionKey<'_>,
    faults: &mut Vec<ConfigError>,
) -> Option<Loose> {
    let stem = companion.stem();
    let key = companion.key;
    if RESERVED_ALIASES.contains(&stem) {
        faults.push(load::unattached(companion));
        return None;
    }
    // A summary's stem may be `<server>-<tool>`, whose tool part need not be
    // alias-shaped; every other stem is the server's name.
    if companion.suffix != Suffix::Summary {
        check_alias(key, stem, faults);
    }
    let raw = env.get(key).unwrap_or_default();
    let mut names = SettingNames::written(stem, &target_variable(stem));
    names.set_companion(companion.suffix, key);
    if companion.suffix == Suffix::Authorization {
        names.set_authorization(key);
    }
    let mut checker = Checker::new(&names, None).strict(true);
    let mut literal = Vec::new();
    let value = match companion.suffix {
        Suffix::Args => {
            let list = json::string_array(key, raw, faults)?;
            checker.args(&list);
            LooseValue::List(list)
        }
        Suffix::Tools | Suffix::Read => {
            let list = json::string_array(key, raw, faults)?;
            check_name_list(key, &list, faults);
            LooseValue::List(list)
        }
        Suffix::Env => {
            let map = json::string_map(key, raw, faults)?;
            checker.env(&map);
            LooseValue::Map(map)
        }
        Suffix::Headers => {
            let map = json::string_map(key, raw, faults)?;
            checker.headers(&map);
            LooseValue::Map(map)
        }
        Suffix::Cwd => {
            checker.cwd(raw);
            LooseValue::Text(raw.to_owned())
        }
        Suffix::Bearer => {
            checker.bearer(raw, &BTreeMap::new());
            LooseValue::Text(raw.to_owned())
        }
        Suffix::Authorization => {
            let (wire, value) = McpAuthorization::from_variable(key, raw, faults)?;
            let authorization = Authorization::from(&wire);
            checker.authorization(&authorization, &BTreeMap::new());
            literal = literal_authorization(key, &value);
            LooseValue::Authorization(authorization)
        }
        Suffix::Summary => {
            checker.summaries(Some(raw), &BTreeMap::new());
            LooseValue::Text(raw.to_owned())
        }
        Suffix::Sandbox => LooseValue::Sandbox(SandboxPolicy::from_variable(key, raw, faults)?),
    };
    // A literal client secret is also not a reference: one fault, not two.
    checker.faults.retain(|fault| !literal.contains(fault));
    faults.append(&mut literal);
    faults.append(&mut checker.faults);
    Some(Loose {
        variable: key.to_owned(),
        folded: companion.folded.clone(),
        suffix: companion.suffix,
        stem_len: companion.stem_len,
        value,
    })
}

impl fmt::Debug for Overlay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loose: Vec<&str> = self.loose.iter().map(|l| l.variable.as_str()).collect();
        f.debug_struct("Overlay")
            .field("definitions", &self.definitions)
            .field("specializations", &RedactedValues(&loose))
            .finish()
    }
}

// === resolving ===

/// Resolves one server through the cascade: the service environment's
/// definition, the durable workspace specialization, the client configuration
/// overlay's entry ([`Overlay::server`]), then explicit action options.
///
/// The highest layer with a target (workspace over service, an overlay
/// [`OverlayServer::Definition`] over both) is taken whole; each target-less
/// layer above it then replaces the fields it sets. The result is validated
/// like any definition; its `${NAME}` references are not resolved here (see
/// [`ServerDefinition::check_references`]).
///
/// # Errors
///
/// Layers for different aliases; a target-less layer with nothing below it;
/// a field that does not fit the transport (naming the field, such as
/// `options.headers` or `PLURNK_MCP_X_ARGS`); an option credential that is
/// not one `${NAME}` reference; and every fault of the resolved definition
/// (such as `read` outside `tools`), each naming the layer's field.
pub fn resolve(
    service: Option<&ServerDefinition>,
    workspace: Option<&ServerDefinition>,
    overlay: Option<&OverlayServer>,
    options: Option<&McpServerOptions>,
) -> Result<ServerDefinition, ConfigErrors> {
    let mut faults = Vec::new();
    let lower = workspace.or(service);
    if let (Some(service), Some(workspace)) = (service, workspace)
        && service.alias() != workspace.alias()
    {
        faults.push(ConfigError::AliasMismatch {
            variable: "the workspace definition".to_owned(),
            name: workspace.alias().to_owned(),
            expected: service.alias().to_owned(),
        });
    }
    if let (Some(overlay), Some(lower)) = (overlay, lower)
        && overlay.alias() != lower.alias()
    {
        faults.push(ConfigError::AliasMismatch {
            variable: "the overlay entry".to_owned(),
            name: overlay.alias().to_owned(),
            expected: lower.alias().to_owned(),
        });
    }
    ConfigErrors::check(faults)?;

    let mut current = lower.map(|definition| {
        (
            definition.parts().clone(),
            SettingNames::canonical(definition.alias()),
        )
    });
    let mut faults = Vec::new();
    match overlay {
        Some(OverlayServer::Definition(definition)) => {
            current = Some((
                definition.parts().clone(),
                SettingNames::canonical(definition.alias()),
            ));
        }
        Some(OverlayServer::Specialization(specialization)) => match &mut current {
            Some((parts, names)) => specialization.patch.apply(parts, names, &mut faults),
            None => faults.push(ConfigError::NothingToSpecialize {
                variable: specialization.patch.names().first().map_or_else(
                    || target_variable(&specialization.alias),
                    |n| (*n).to_owned(),
                ),
                server: specialization.alias.clone(),
            }),
        },
        None => {}
    }
    if let Some(options) = options {
        let patch = Patch::from_options(options, &mut faults);
        match (&mut current, overlay) {
            (Some((parts, names)), _) => patch.apply(parts, names, &mut faults),
            // The overlay's fault already says there is nothing below.
            (None, Some(_)) => {}
            (None, None) => faults.push(ConfigError::NoDefinition {
                variable: "the configuration cascade".to_owned(),
            }),
        }
    }
    ConfigErrors::check(faults)?;
    let Some((parts, names)) = current else {
        return Err(ConfigError::NoDefinition {
            variable: "the configuration cascade".to_owned(),
        }
        .into());
    };
    ServerDefinition::validate(parts, &names, false)
}

impl ServerDefinition {
    /// This definition with `options` applied, the last step of the cascade
    /// alone (as `add` does after [`from_target`](Self::from_target)): each
    /// option given replaces the field, arrays and maps whole.
    ///
    /// # Errors
    ///
    /// An option that does not fit the transport (`args`, `cwd` or `env` on an
    /// http server; `headers` or `authorization` on a stdio server), named as
    /// `options.<field>`; an option credential that is not one `${NAME}`
    /// reference; and every fault of the result.
    pub fn with_options(self, options: &McpServerOptions) -> Result<Self, ConfigErrors> {
        let mut faults = Vec::new();
        let patch = Patch::from_options(options, &mut faults);
        let mut names = SettingNames::canonical(self.alias());
        let mut parts = self.into_parts();
        patch.apply(&mut parts, &mut names, &mut faults);
        ConfigErrors::check(faults)?;
        Self::validate(parts, &names, false)
    }
}
