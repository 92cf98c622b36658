//! Codex's `[mcp_servers.NAME]` tables, read into a Draft.

use serde_json::{Map, Value};

use super::draft::{Draft, boolean, note_each, string, string_map, strings, wrong};
use super::finish::finish;
use super::names::variable_name;
use super::secrets::{Moved, is_literal, is_reference_name};
use super::{Introduced, NotCarried, Planned};
use crate::config::shorten;

/// Codex `[mcp_servers.NAME]` tables.
pub(super) fn codex_entry(
    alias: &str,
    fields: &Map<String, Value>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    known_fields(fields)?;
    let mut draft = Draft {
        command: string(fields, "command")?,
        args: strings(fields, "args")?.unwrap_or_default(),
        cwd: string(fields, "cwd")?,
        env: string_map(fields, "env")?,
        url: string(fields, "url")?,
        headers: string_map(fields, "http_headers")?,
        enabled: boolean(fields, "enabled")?.unwrap_or(true),
        ..Draft::default()
    };
    passed_through(fields, &mut draft)?;
    bearer_token(alias, fields, moved, &mut draft)?;
    draft.tools = tools(fields)?;
    note_each(fields, NOT_CARRIED, &mut draft.notes);
    finish(alias, draft, None, moved)
}

/// Refuses an entry with a field this reader does not know, or OAuth settings.
fn known_fields(fields: &Map<String, Value>) -> Result<(), NotCarried> {
    for field in fields.keys() {
        match field.as_str() {
            "command"
            | "args"
            | "env"
            | "env_vars"
            | "cwd"
            | "url"
            | "bearer_token"
            | "bearer_token_env_var"
            | "http_headers"
            | "env_http_headers"
            | "enabled"
            | "required"
            | "startup_timeout_sec"
            | "startup_timeout_ms"
            | "tool_timeout_sec"
            | "enabled_tools"
            | "disabled_tools" => {}
            "auth" | "oauth" | "scopes" | "oauth_resource" => {
                return Err(NotCarried::OAuth {
                    field: field.clone(),
                });
            }
            _ => {
                return Err(NotCarried::UnknownField {
                    field: shorten(field),
                });
            }
        }
    }
    Ok(())
}

/// Variables passed through from Codex's own environment (`env_vars`, `env_http_headers`,
/// `bearer_token_env_var`): the same names, referred to.
fn passed_through(fields: &Map<String, Value>, draft: &mut Draft) -> Result<(), NotCarried> {
    if let Some(Value::Array(names)) = fields.get("env_vars") {
        for name in names {
            let name = match name {
                Value::String(name) => name.as_str(),
                Value::Object(entry) => entry.get("name").and_then(Value::as_str).unwrap_or(""),
                _ => "",
            };
            if !is_reference_name(name) {
                return Err(wrong("env_vars", "an array of variable names"));
            }
            draft.env.insert(name.to_owned(), format!("${{{name}}}"));
        }
    } else if fields.get("env_vars").is_some_and(|v| !v.is_null()) {
        return Err(wrong("env_vars", "an array of variable names"));
    }
    for (header, variable) in string_map(fields, "env_http_headers")? {
        if !is_reference_name(&variable) {
            return Err(wrong(
                &format!("env_http_headers.{header}"),
                "a variable name",
            ));
        }
        draft.headers.insert(header, format!("${{{variable}}}"));
    }
    if let Some(variable) = string(fields, "bearer_token_env_var")? {
        if !is_reference_name(&variable) {
            return Err(wrong("bearer_token_env_var", "a variable name"));
        }
        draft.bearer = Some(format!("${{{variable}}}"));
    }
    Ok(())
}

/// A `bearer_token` written in the file, moved out when it is literal.
fn bearer_token(
    alias: &str,
    fields: &Map<String, Value>,
    moved: &mut Moved,
    draft: &mut Draft,
) -> Result<(), NotCarried> {
    if let Some(token) = string(fields, "bearer_token")? {
        draft.bearer = Some(if is_literal(&token) {
            let variable = moved.variable(variable_name(&[alias, "TOKEN"]), alias, &token);
            draft.introduced.push(Introduced {
                variable: variable.clone(),
                from: "bearer_token".to_owned(),
            });
            format!("${{{variable}}}")
        } else {
            token
        });
    }
    Ok(())
}

/// `enabled_tools` less `disabled_tools`; `disabled_tools` alone names what to leave out,
/// which a definition's tool list cannot say.
fn tools(fields: &Map<String, Value>) -> Result<Option<Vec<String>>, NotCarried> {
    let enabled_tools = strings(fields, "enabled_tools")?;
    let disabled_tools = strings(fields, "disabled_tools")?.unwrap_or_default();
    match enabled_tools {
        Some(tools) => Ok(Some(
            tools
                .into_iter()
                .filter(|tool| !disabled_tools.contains(tool))
                .collect(),
        )),
        None if disabled_tools.is_empty() => Ok(None),
        None => Err(NotCarried::ExcludedTools),
    }
}

/// The settings that tune only Codex, each dropped with this note.
const NOT_CARRIED: &[(&str, &str)] = &[
    (
        "startup_timeout_sec",
        "startup_timeout_sec is not carried: the host's PLURNK_MCP_CONNECT_TIMEOUT applies",
    ),
    (
        "startup_timeout_ms",
        "startup_timeout_ms is not carried: the host's PLURNK_MCP_CONNECT_TIMEOUT applies",
    ),
    (
        "tool_timeout_sec",
        "tool_timeout_sec is not carried: the host's PLURNK_MCP_REQUEST_TIMEOUT applies",
    ),
    (
        "required",
        "required is not carried: a server that cannot connect is shown unavailable and never stops the others",
    ),
];
