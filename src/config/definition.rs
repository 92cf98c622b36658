//! Normalized, unexpanded server definitions: what a server is, how to reach it, and which of its tools are enabled.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::environment::Environment;
use super::error::{ConfigError, ConfigErrors};
use super::keys::tool_summary_key;
use super::target;
use super::target::TransportKind;

use super::check::{Checker, SettingNames, check_alias, target_fault};
use super::transport::{HttpDefinition, SourceDefinition, StdioDefinition, Transport};

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
        let names = SettingNames::canonical(&parts.alias);
        Self::validate(parts, &names, false)
    }

    /// Validates `parts`, naming faults by `names`; with `strict` a bearer, too,
    /// must be one `${NAME}` reference.
    pub(crate) fn validate(
        parts: DefinitionParts,
        names: &SettingNames,
        strict: bool,
    ) -> Result<Self, ConfigErrors> {
        let mut faults = Vec::new();
        check_alias(names.alias(), &parts.alias, &mut faults);
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
        let mut checker = Checker::new(names, None).strict(strict);
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
            Ok(TransportKind::Http) => Transport::Http(HttpDefinition::new(target)),
            // `classify` answers stdio or http only.
            Ok(_) => Transport::Stdio(StdioDefinition::new(target)),
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

    /// A definition of a server the embedder serves in its own process under `alias`
    /// ([`HostOptions::in_process`](crate::HostOptions::in_process)). Every tool is
    /// enabled.
    ///
    /// # Errors
    ///
    /// An invalid or reserved alias.
    pub fn in_process(alias: &str) -> Result<Self, ConfigErrors> {
        Self::new(DefinitionParts::new(alias, Transport::InProcess))
    }

    /// A tool source `alias` of `kind` (`cli`, `script` or `openapi`) whose declaration was
    /// read elsewhere: [`crate::sources::definition`] reads it and is the constructor to use;
    /// the loader and the store come here, and the source's reader reads the declaration
    /// again when the host starts and when it opens it.
    ///
    /// # Errors
    ///
    /// An invalid or reserved alias, or a kind that is not a tool source.
    pub fn declared_source(
        alias: &str,
        kind: TransportKind,
        declaration: serde_json::Value,
        origin: &str,
    ) -> Result<Self, ConfigErrors> {
        if !kind.is_source() {
            return Err(ConfigErrors::from(ConfigError::InvalidSource(
                super::DeclarationError::new(
                    origin,
                    "kind",
                    format!("{kind} is not a kind of tool source"),
                    "write cli, script or openapi",
                ),
            )));
        }
        Self::new(DefinitionParts::new(
            alias,
            Transport::Source(SourceDefinition {
                kind,
                declaration: std::sync::Arc::new(declaration),
                origin: origin.to_owned(),
            }),
        ))
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

    /// Every environment name a `${NAME}` of this definition refers to.
    pub fn referenced_names(&self) -> std::collections::BTreeSet<String> {
        // Against an empty environment every reference is reported missing, by name.
        match self.check_references(&Environment::default()) {
            Ok(()) => std::collections::BTreeSet::new(),
            Err(errors) => errors
                .iter()
                .filter_map(|error| match error {
                    ConfigError::MissingReference { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect(),
        }
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
