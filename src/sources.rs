//! Tool sources beyond MCP servers: anything that can list tools with JSON Schemas and call
//! one — a command-line program (`cli`), a script (`script`) or an OpenAPI document
//! (`openapi`) — served to the host as an in-process MCP server, so each is a namespace like
//! any other: listed in the snapshot, projected into the model's documents, callable through
//! the EXEC bridge and the gateway, enabled and disabled by the same actions.
//!
//! A source is declared (a JSON object with a `kind`), checked by [`validate`] with errors
//! that name the field and the fix, made a server's definition by [`definition`], and opened
//! by its kind's declaration into a [`ToolSource`]. [`server::SourceServer`] adapts any
//! [`ToolSource`] to rmcp's `ServerHandler`. [`check()`] says what is missing on this machine
//! (a binary, a runtime) and whether the installed version is the one the declaration was
//! written against.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use serde_json::Value;

pub use crate::config::DeclarationError;
pub use error::SourceError;

/// Which kind of tool source a declaration is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A command-line program: its tools are fixed subcommands with typed parameters.
    Cli,
    /// A script whose header declares its parameters.
    Script,
    /// An OpenAPI 3.x document: one tool per operation.
    OpenApi,
}

impl SourceKind {
    /// The kind as declarations write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cli => "cli",
            Self::Script => "script",
            Self::OpenApi => "openapi",
        }
    }

    /// The kind a declaration's `kind` names.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "cli" => Some(Self::Cli),
            "script" => Some(Self::Script),
            "openapi" => Some(Self::OpenApi),
            _ => None,
        }
    }
}

impl From<SourceKind> for crate::config::TransportKind {
    fn from(kind: SourceKind) -> Self {
        match kind {
            SourceKind::Cli => Self::Cli,
            SourceKind::Script => Self::Script,
            SourceKind::OpenApi => Self::OpenApi,
        }
    }
}

impl SourceKind {
    /// The kind of source a transport is, if it is one.
    pub fn of(transport: crate::config::TransportKind) -> Option<Self> {
        use crate::config::TransportKind;
        match transport {
            TransportKind::Cli => Some(Self::Cli),
            TransportKind::Script => Some(Self::Script),
            TransportKind::OpenApi => Some(Self::OpenApi),
            TransportKind::Stdio | TransportKind::Http | TransportKind::InProcess => None,
        }
    }
}

/// A tool source `alias` of `kind`, from `declaration` (read from `origin`, a file or the
/// action that adds it): a relative script path or spec file is anchored to the file's
/// directory, and the declaration is read by its kind's reader.
///
/// # Errors
///
/// An invalid or reserved alias, or every fault of the declaration, each naming the origin,
/// the field and the fix.
pub fn definition(
    alias: &str,
    kind: SourceKind,
    mut declaration: Value,
    origin: &str,
) -> Result<crate::config::ServerDefinition, crate::config::ConfigErrors> {
    crate::config::anchor(kind.into(), &mut declaration, origin);
    let faults = validate(kind, &declaration, origin);
    if let Some((first, rest)) = faults.split_first() {
        return Err(crate::config::ConfigErrors::sources(
            first.clone(),
            rest.iter().cloned(),
        ));
    }
    crate::config::ServerDefinition::declared_source(alias, kind.into(), declaration, origin)
}

/// The input schema of a tool whose arguments are exactly `properties`, `required` among
/// them: an object that allows nothing else.
pub(crate) fn closed_object(
    properties: serde_json::Map<String, Value>,
    required: Vec<Value>,
) -> serde_json::Map<String, Value> {
    let mut schema = serde_json::Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    schema
}

/// Reads every tool source among `definitions` with its kind's reader: every fault of every
/// declaration at once, or none.
pub(crate) fn admit<'a>(
    definitions: impl IntoIterator<Item = &'a crate::config::ServerDefinition>,
) -> Result<(), crate::config::ConfigErrors> {
    let mut faults = Vec::new();
    for definition in definitions {
        if let crate::config::Transport::Source(source) = definition.transport()
            && let Some(kind) = SourceKind::of(source.kind)
        {
            faults.extend(validate(kind, &source.declaration, &source.origin));
        }
    }
    match faults.split_first() {
        None => Ok(()),
        Some((first, rest)) => Err(crate::config::ConfigErrors::sources(
            first.clone(),
            rest.iter().cloned(),
        )),
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool a source offers.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTool {
    /// Its exact name (`[A-Za-z0-9_.-]`, at most 64 characters).
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// The JSON Schema (an object schema) of its arguments.
    pub input_schema: serde_json::Map<String, Value>,
}

/// What one call of a source's tool gave.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceResult {
    /// The result's text (a program's standard output, an HTTP response body).
    pub text: String,
    /// The tool's output parsed, when it is JSON (`json` output, a JSON response); it
    /// becomes the result's `structuredContent` only when it is an object.
    pub structured: Option<Value>,
    /// The tool ran and reported failure (a non-zero exit, an HTTP error status): a result
    /// the model sees, not a failure of the call.
    pub is_error: bool,
}

/// A boxed future of a call.
pub type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SourceResult, SourceError>> + Send + 'a>>;

/// Anything that can list tools with JSON Schemas and call one.
pub trait ToolSource: Send + Sync + 'static {
    /// Every tool, in a stable order.
    fn tools(&self) -> Vec<SourceTool>;
    /// Calls `tool` with `arguments` (an object), ending by `deadline`.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: serde_json::Map<String, Value>,
        deadline: Duration,
    ) -> CallFuture<'a>;
}

/// A shared tool source.
pub type SharedSource = Arc<dyn ToolSource>;

/// Every fault of `declaration` as a source of `kind`, each naming `origin`, the field and
/// the fix; none when it can be opened.
pub fn validate(kind: SourceKind, declaration: &Value, origin: &str) -> Vec<DeclarationError> {
    let Some(object) = declaration.as_object() else {
        return vec![DeclarationError::new(
            origin,
            "(the declaration)",
            "is not a JSON object",
            "write an object with \"kind\", \"name\" and the fields of its kind",
        )];
    };
    if let Some(named) = object.get("kind").and_then(Value::as_str)
        && named != kind.as_str()
    {
        return vec![DeclarationError::new(
            origin,
            "kind",
            format!("says \"{named}\" where a {kind} source is declared"),
            format!("write \"kind\": \"{kind}\" or declare it as {named}"),
        )];
    }
    readers::validate(kind, declaration, origin)
}

/// The host's opener of tool sources: reads a declaration (its `${NAME}` references already
/// expanded), opens it (its document, its program) and serves it in-process; the error says
/// what is wrong and what to do.
pub(crate) fn opener() -> crate::protocol::SourceOpener {
    // The String is the opener's contract with protocol/, which sits below this layer: the
    // final message, which becomes the server's Problem detail as it is.
    Arc::new(|kind, declaration, origin, children| {
        Box::pin(async move {
            let kind = SourceKind::of(kind)
                .ok_or_else(|| format!("{origin}: {kind} is not a kind of tool source"))?;
            let source = readers::open(kind, &declaration, &origin, children)
                .await
                .map_err(|faults| said(&faults))?;
            Ok(server::connector(source, origin))
        })
    })
}

/// A declaration's faults as one message.
fn said(faults: &[DeclarationError]) -> String {
    faults
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// What `declaration` needs on this machine (its binary, its runtime, its document) and
/// whether the installed version is the one it was written against.
///
/// # Errors
///
/// The declaration's faults, when it cannot be read at all.
pub async fn check(
    kind: SourceKind,
    declaration: &Value,
    origin: &str,
) -> Result<Finding, Vec<DeclarationError>> {
    readers::check(kind, declaration, origin).await
}

/// What `plurnk-mcp source check` found about one declaration on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Everything it needs is here (what was checked, e.g. the resolved binary and version).
    Ready(String),
    /// A binary or runtime it needs is not installed, or a file it names is missing.
    Missing(String),
    /// The installed version is not the one the declaration was written against.
    VersionDrift {
        /// The `--version` output the declaration records.
        declared: String,
        /// The `--version` output of the binary installed now.
        installed: String,
    },
}

pub mod cli;
mod error;
mod faults;
pub mod openapi;
mod params;
mod program;
mod readers;
pub mod script;
pub mod server;
