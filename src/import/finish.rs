//! A Draft made a definition: the transport picked, literal secrets moved out, the
//! other transport's settings refused, and the definition validated.

use std::collections::BTreeMap;

use super::draft::Draft;
use super::names::variable_name;
use super::secrets::{Moved, Outward, is_literal};
use super::{Introduced, NotCarried, Planned};
use crate::config::{
    LiteralKind, McpAuthorization, McpHttpDefinition, McpServerDefinition, McpStdioDefinition,
    ServerDefinition, TransportKind, is_credential_name, is_single_reference, literal_credentials,
};

/// Picks the transport, moves literal secrets out and validates the definition.
pub(super) fn finish(
    alias: &str,
    mut draft: Draft,
    kind: Option<TransportKind>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    let kind = transport(kind, &draft)?;
    let wire = if kind == TransportKind::Http {
        http_definition(alias, &mut draft, moved)
    } else {
        stdio_definition(alias, &mut draft, moved)
    };
    other_transport_settings(kind, &draft)?;
    no_literal_left(&wire)?;
    let definition = ServerDefinition::try_from(wire).map_err(NotCarried::Invalid)?;
    Ok(Planned {
        source: String::new(),
        definition,
        enabled: draft.enabled,
        introduced: draft.introduced,
        notes: draft.notes,
    })
}

/// The transport the entry's type names, else the one its command or URL implies.
fn transport(kind: Option<TransportKind>, draft: &Draft) -> Result<TransportKind, NotCarried> {
    match (kind, &draft.command, &draft.url) {
        (Some(TransportKind::Stdio), None, _) => Err(NotCarried::MissingForType {
            kind: "stdio",
            needs: "command",
        }),
        (Some(TransportKind::Http), _, None) => Err(NotCarried::MissingForType {
            kind: "http",
            needs: "url",
        }),
        (Some(kind), _, _) => Ok(kind),
        (None, Some(_), Some(_)) => Err(NotCarried::BothTargets),
        (None, Some(_), None) => Ok(TransportKind::Stdio),
        (None, None, Some(_)) => Ok(TransportKind::Http),
        (None, None, None) => Err(NotCarried::NoTarget),
    }
}

/// The HTTP definition, its headers and URL with their secrets moved out; takes the draft's
/// headers.
fn http_definition(alias: &str, draft: &mut Draft, moved: &mut Moved) -> McpServerDefinition {
    let headers = http_headers(alias, draft, moved);
    let url = Outward {
        alias,
        moved,
        introduced: &mut draft.introduced,
    }
    .literals_in(
        draft.url.as_deref().unwrap_or_default(),
        "url",
        |kind| match kind {
            LiteralKind::Password => variable_name(&[alias, "PASSWORD"]),
            LiteralKind::Query(query) => variable_name(&[alias, query]),
            LiteralKind::Token => variable_name(&[alias, "TOKEN"]),
            LiteralKind::Webhook => variable_name(&[alias, "URL"]),
        },
    );
    McpServerDefinition::Http(McpHttpDefinition {
        name: alias.to_owned(),
        url,
        headers,
        authorization: draft
            .bearer
            .clone()
            .map(|token| McpAuthorization::Bearer { token }),
        tools: draft.tools.clone(),
        read: Vec::new(),
        summary: None,
        tool_summaries: BTreeMap::new(),
    })
}

/// The draft's headers with their secrets moved out; a bearer token, written or referred to
/// in `Authorization`, becomes the draft's bearer instead.
fn http_headers(alias: &str, draft: &mut Draft, moved: &mut Moved) -> BTreeMap<String, String> {
    let mut headers = BTreeMap::new();
    for (name, value) in std::mem::take(&mut draft.headers) {
        if let Some(value) = moved_header(alias, &name, value, draft, moved) {
            headers.insert(name, value);
        }
    }
    // An `Authorization: Bearer ${NAME}` header is the bearer authorization itself.
    if draft.bearer.is_none()
        && let Some(key) = headers
            .keys()
            .find(|key| key.eq_ignore_ascii_case("authorization"))
            .cloned()
        && let Some(token) = headers[&key]
            .split_once(' ')
            .filter(|(scheme, token)| {
                scheme.eq_ignore_ascii_case("bearer") && is_single_reference(token.trim())
            })
            .map(|(_, token)| token.trim().to_owned())
    {
        headers.remove(&key);
        draft.bearer = Some(token);
    }
    headers
}

/// One header's value with its secrets moved out, or `None` when its literal bearer token
/// became the draft's bearer. A literal value is moved whole, whatever the header's name: a
/// header's value is where a credential goes, and no test of names or shapes finds every one
/// (`X-Access` with a hexadecimal key, a session id).
fn moved_header(
    alias: &str,
    name: &str,
    value: String,
    draft: &mut Draft,
    moved: &mut Moved,
) -> Option<String> {
    if !is_literal(&value) || value.is_empty() {
        if is_credential_name(name) {
            return Some(value);
        }
        let mut out = Outward {
            alias,
            moved,
            introduced: &mut draft.introduced,
        };
        return Some(
            out.literals_in(&value, &format!("header {name}"), |kind| match kind {
                LiteralKind::Password => variable_name(&[alias, name, "PASSWORD"]),
                LiteralKind::Query(query) => variable_name(&[alias, query]),
                LiteralKind::Token | LiteralKind::Webhook => variable_name(&[alias, name]),
            }),
        );
    }
    let scheme_and_token = if name.eq_ignore_ascii_case("authorization") {
        value.split_once(' ')
    } else {
        None
    };
    let bearer = scheme_and_token
        .filter(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty())
        .map(|(_, token)| token.trim());
    if let Some(token) = bearer
        && draft.bearer.is_none()
    {
        let variable = moved.variable(variable_name(&[alias, "TOKEN"]), alias, token);
        draft.introduced.push(Introduced {
            variable: variable.clone(),
            from: format!("header {name}"),
        });
        draft.bearer = Some(format!("${{{variable}}}"));
        return None;
    }
    let variable = moved.variable(variable_name(&[alias, name]), alias, &value);
    draft.introduced.push(Introduced {
        variable: variable.clone(),
        from: format!("header {name}"),
    });
    Some(format!("${{{variable}}}"))
}

/// The stdio definition, its environment and arguments with their secrets moved out; takes
/// the draft's environment.
fn stdio_definition(alias: &str, draft: &mut Draft, moved: &mut Moved) -> McpServerDefinition {
    let mut env = BTreeMap::new();
    // A literal value is moved whole, whatever the variable's name: the environment is where
    // a credential goes, and no test of names or shapes finds every one (`SESSION`, a
    // webhook URL). One mixed with references has the credentials written into it moved.
    for (name, value) in std::mem::take(&mut draft.env) {
        let from = format!("env {name}");
        let value = if is_literal(&value) && !value.is_empty() {
            let variable = moved.variable(variable_name(&[&name]), alias, &value);
            draft.introduced.push(Introduced {
                variable: variable.clone(),
                from,
            });
            format!("${{{variable}}}")
        } else if !is_credential_name(&name) {
            let mut out = Outward {
                alias,
                moved,
                introduced: &mut draft.introduced,
            };
            out.literals_in(&value, &from, |kind| match kind {
                LiteralKind::Password => variable_name(&[&name, "PASSWORD"]),
                LiteralKind::Query(query) => variable_name(&[&name, query]),
                LiteralKind::Token | LiteralKind::Webhook => variable_name(&[&name]),
            })
        } else {
            value
        };
        env.insert(name, value);
    }
    let args = Outward {
        alias,
        moved,
        introduced: &mut draft.introduced,
    }
    .arguments(&draft.args);
    McpServerDefinition::Stdio(McpStdioDefinition {
        name: alias.to_owned(),
        command: draft.command.clone().unwrap_or_default(),
        args,
        cwd: draft.cwd.clone(),
        env,
        sandbox: None,
        tools: draft.tools.clone(),
        read: Vec::new(),
        summary: None,
        tool_summaries: BTreeMap::new(),
    })
}

/// Settings of the other transport would be silently lost: say so. The definition took its
/// own transport's settings out of the draft, so only the other's are left to find.
fn other_transport_settings(kind: TransportKind, draft: &Draft) -> Result<(), NotCarried> {
    let dropped = match kind {
        TransportKind::Http => [
            ("args", !draft.args.is_empty()),
            ("cwd", draft.cwd.is_some()),
            ("env", !draft.env.is_empty()),
        ],
        _ => [
            ("headers", !draft.headers.is_empty()),
            ("bearer", draft.bearer.is_some()),
            ("", false),
        ],
    };
    match dropped.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(NotCarried::WrongType {
            field: (*field).to_owned(),
            expected: "a setting of this server's transport",
        }),
        None => Ok(()),
    }
}

/// Whatever could not be moved out (a credential mixed with references) is not carried:
/// the one refusal the add would answer with, said before anything is tried.
fn no_literal_left(wire: &McpServerDefinition) -> Result<(), NotCarried> {
    let literal = serde_json::to_value(wire)
        .map(|wire| literal_credentials(&wire))
        .unwrap_or_default();
    if literal.is_empty() {
        Ok(())
    } else {
        Err(NotCarried::LiteralCredential {
            fields: literal.join(", "),
        })
    }
}
