//! Claude Desktop's, Cursor's and VS Code's entries: one JSON shape, read into a Draft.

use serde_json::{Map, Value};

use super::draft::{Draft, boolean, note_each, string, string_map, strings, wrong};
use super::finish::finish;
use super::secrets::Moved;
use super::{NotCarried, Planned};
use crate::config::{TransportKind, shorten};

/// Claude Desktop, Cursor and VS Code entries.
pub(super) fn json_entry(
    alias: &str,
    fields: &Map<String, Value>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    for field in fields.keys() {
        match field.as_str() {
            "command" | "args" | "env" | "cwd" | "url" | "headers" | "type" | "disabled"
            | "enabled" => {}
            "envFile" => return Err(NotCarried::EnvFile),
            "auth" | "oauth" => {
                return Err(NotCarried::OAuth {
                    field: field.clone(),
                });
            }
            // Descriptive, or tuning only the other client.
            "description" | "gallery" | "version" | "dev" | "autoApprove" | "alwaysAllow"
            | "timeout" => {}
            _ => {
                return Err(NotCarried::UnknownField {
                    field: shorten(field),
                });
            }
        }
    }
    let mut draft = Draft {
        command: string(fields, "command")?,
        args: strings(fields, "args")?.unwrap_or_default(),
        cwd: string(fields, "cwd")?,
        env: string_map(fields, "env")?,
        url: string(fields, "url")?,
        headers: string_map(fields, "headers")?,
        enabled: !boolean(fields, "disabled")?.unwrap_or(false)
            && boolean(fields, "enabled")?.unwrap_or(true),
        ..Draft::default()
    };
    note_each(fields, NOT_CARRIED, &mut draft.notes);
    let kind = match fields.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) => Some(kind.as_str()),
        Some(_) => return Err(wrong("type", "a string")),
    };
    let kind = match kind {
        None => None,
        Some("stdio") => Some(TransportKind::Stdio),
        Some("http" | "streamable-http" | "streamableHttp") => Some(TransportKind::Http),
        Some("sse") => return Err(NotCarried::Sse),
        Some(_) => return Err(NotCarried::UnknownType),
    };
    finish(alias, draft, kind, moved)
}

/// The settings that tune only the other client, each dropped with this note.
const NOT_CARRIED: &[(&str, &str)] = &[
    ("dev", "VS Code's dev mode (watch and debug) is not carried"),
    (
        "timeout",
        "its timeout is not carried: the host's PLURNK_MCP_REQUEST_TIMEOUT applies",
    ),
    (
        "autoApprove",
        "tool approvals are not carried: the workspace decides what it calls",
    ),
    (
        "alwaysAllow",
        "tool approvals are not carried: the workspace decides what it calls",
    ),
];
