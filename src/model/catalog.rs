//! What a server publishes: its tools with their Effect, resources, templates and prompts.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

/// The operator's classification of a tool: `read` tools may be auto-run by the embedder,
/// every other enabled tool keeps the conservative `host` effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Read-only, by the operator's `_READ` list.
    Read,
    /// Anything else.
    Host,
}

/// One enabled tool, as published in a snapshot (serialized with MCP's own spelling of its
/// members, `inputSchema` and `outputSchema`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// The exact remote name; calls use it unchanged.
    pub name: String,
    /// The display title, if the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments, as the server sent it.
    pub input_schema: Value,
    /// The JSON Schema of its structured result, as the server sent it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The server's annotations (hints such as `readOnlyHint`), as it sent them, if any;
    /// never consulted for the effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The tool's effect from `_READ`.
    pub effect: Effect,
}

/// One resource a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceInfo {
    /// The resource URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if given.
    #[serde(skip_serializing_if = "Option::is_none", rename = "mimeType")]
    pub mime_type: Option<String>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One resource template a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceTemplateInfo {
    /// The RFC 6570 URI template.
    #[serde(rename = "uriTemplate")]
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One prompt a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptInfo {
    /// The prompt's name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentInfo>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptArgumentInfo {
    /// The argument's name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// A server's published catalog besides its tools.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Catalog {
    /// Its resources.
    pub resources: Arc<[ResourceInfo]>,
    /// Its resource templates.
    pub templates: Arc<[ResourceTemplateInfo]>,
    /// Its prompts.
    pub prompts: Arc<[PromptInfo]>,
}
