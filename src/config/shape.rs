//! Shape checks for the closed JSON objects of the wire (`McpServerDefinition`, `McpServerOptions`), with faults that name the field and never quote a value.
//!
//! serde's own messages quote the offending value ("invalid type: string
//! \"hunter2\", expected a sequence"), and a value here may be a credential, so
//! a JSON value is checked against the closed shape first, fault by fault, and
//! only a value that passes is handed to serde.

use serde_json::{Map, Value};

use super::error::ConfigError;
use super::json::{self, STRING_ARRAY, STRING_MAP};
use super::keys::is_alias_syntax;
use super::target::TransportKind;

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    List,
    Map,
    Authorization,
    /// A JSON object whose own reader checks it (a tool source's declaration).
    Object,
    /// A sandbox policy, read by its own reader.
    Sandbox,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Self::Text => "a JSON string",
            Self::List => STRING_ARRAY,
            Self::Map => STRING_MAP,
            Self::Authorization => AUTHORIZATION,
            Self::Object => "a JSON object (the source's declaration)",
            Self::Sandbox => "a JSON object (a sandbox policy)",
        }
    }
}

const AUTHORIZATION: &str = "a JSON object whose \"type\" is \"bearer\", \"oauth\", \
                             \"client-credentials\" or \"workload-identity\", such as {\"type\": \"bearer\", \"token\": \
                             \"${API_TOKEN}\"}";
const OBJECT: &str = "a JSON object";

/// One field of a closed object.
struct Field {
    name: &'static str,
    kind: Kind,
    required: bool,
    /// `null` reads as absent (serde's reading of an `Option`).
    nullable: bool,
    /// The one transport the field belongs to, if only one.
    transport: Option<TransportKind>,
}

const fn field(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
        nullable: false,
        transport: None,
    }
}

const fn required(name: &'static str, kind: Kind) -> Field {
    Field {
        required: true,
        ..field(name, kind)
    }
}

const fn nullable(name: &'static str, kind: Kind) -> Field {
    Field {
        nullable: true,
        ..field(name, kind)
    }
}

const fn only(transport: TransportKind, field: Field) -> Field {
    Field {
        transport: Some(transport),
        ..field
    }
}

use TransportKind::{Http, Stdio};

/// `McpServerDefinition`, after `transport` (which is checked on its own).
const DEFINITION: [Field; 16] = [
    required("name", Kind::Text),
    only(Stdio, required("command", Kind::Text)),
    only(Stdio, field("args", Kind::List)),
    only(Stdio, nullable("cwd", Kind::Text)),
    only(Stdio, field("env", Kind::Map)),
    only(Stdio, nullable("sandbox", Kind::Sandbox)),
    only(Http, required("url", Kind::Text)),
    only(Http, field("headers", Kind::Map)),
    only(Http, nullable("authorization", Kind::Authorization)),
    only(TransportKind::Cli, required("declaration", Kind::Object)),
    only(TransportKind::Script, required("declaration", Kind::Object)),
    only(
        TransportKind::OpenApi,
        required("declaration", Kind::Object),
    ),
    nullable("tools", Kind::List),
    field("read", Kind::List),
    nullable("summary", Kind::Text),
    field("toolSummaries", Kind::Map),
];

/// `McpServerOptions`.
const OPTIONS: [Field; 8] = [
    nullable("args", Kind::List),
    nullable("cwd", Kind::Text),
    nullable("env", Kind::Map),
    nullable("sandbox", Kind::Sandbox),
    nullable("headers", Kind::Map),
    nullable("authorization", Kind::Authorization),
    nullable("tools", Kind::List),
    nullable("read", Kind::List),
];

/// What options may not repeat: the action gives the alias, target and transport.
const NOT_OPTIONS: [&str; 6] = ["name", "alias", "target", "transport", "command", "url"];

const BEARER: [Field; 1] = [required("token", Kind::Text)];
const OAUTH: [Field; 5] = [
    nullable("redirectUrl", Kind::Text),
    nullable("clientMetadataUrl", Kind::Text),
    nullable("clientId", Kind::Text),
    nullable("clientSecret", Kind::Text),
    nullable("scope", Kind::Text),
];
const CLIENT_CREDENTIALS: [Field; 4] = [
    required("clientId", Kind::Text),
    required("clientSecret", Kind::Text),
    nullable("scope", Kind::Text),
    nullable("issuer", Kind::Text),
];
const WORKLOAD_IDENTITY: [Field; 4] = [
    required("assertion", Kind::Text),
    nullable("clientId", Kind::Text),
    nullable("scope", Kind::Text),
    nullable("issuer", Kind::Text),
];

/// The prefix that names a definition's fields: its `name` when that is
/// usable, else `definition`.
pub(crate) fn definition_prefix(value: &Value) -> String {
    match value.get("name") {
        Some(Value::String(name)) if is_alias_syntax(name) => name.clone(),
        _ => "definition".to_owned(),
    }
}

/// Every shape fault of an `McpServerDefinition`, its fields named `<prefix>.<field>`.
pub(crate) fn check_definition(value: &Value, prefix: &str) -> Vec<ConfigError> {
    let mut faults = Vec::new();
    let Some(object) = object(prefix, value, OBJECT, &mut faults) else {
        return faults;
    };
    let transport_variable = format!("{prefix}.transport");
    let transport = match object.get("transport") {
        None => {
            faults.push(ConfigError::MissingField {
                variable: prefix.to_owned(),
                field: "transport",
            });
            None
        }
        Some(Value::String(s)) if s == "stdio" => Some(Stdio),
        Some(Value::String(s)) if s == "http" => Some(Http),
        Some(Value::String(s)) if s == "cli" => Some(TransportKind::Cli),
        Some(Value::String(s)) if s == "script" => Some(TransportKind::Script),
        Some(Value::String(s)) if s == "openapi" => Some(TransportKind::OpenApi),
        Some(other) => {
            faults.push(ConfigError::WrongJsonShape {
                variable: transport_variable.clone(),
                expected: "\"stdio\", \"http\", \"cli\", \"script\" or \"openapi\"",
                found: match other {
                    Value::String(_) => "it is another string".to_owned(),
                    other => format!("it is {}", json::kind(other)),
                },
            });
            None
        }
    };
    let allowed = |transport: TransportKind| {
        let mut names = vec!["name", "transport"];
        names.extend(
            DEFINITION
                .iter()
                .filter(|f| f.name != "name" && f.transport.is_none_or(|t| t == transport))
                .map(|f| f.name),
        );
        names.join(", ")
    };
    for (key, value) in object {
        if key == "transport" {
            continue;
        }
        // A field several transports share (`declaration`) is looked up for this one first.
        let Some(field) = DEFINITION
            .iter()
            .find(|f| f.name == key && transport.is_some() && f.transport == transport)
            .or_else(|| DEFINITION.iter().find(|f| f.name == key))
        else {
            faults.push(ConfigError::UnknownField {
                variable: prefix.to_owned(),
                field: shown(key),
                allowed: transport.map_or_else(
                    || {
                        let mut names = vec!["transport"];
                        names.extend(DEFINITION.iter().map(|f| f.name));
                        names.join(", ")
                    },
                    allowed,
                ),
            });
            continue;
        };
        let variable = format!("{prefix}.{key}");
        match (field.transport, transport) {
            // Which transport the field should fit is unknown: check its shape alone.
            (_, None) | (None, _) => {}
            (Some(applies_to), Some(transport)) if applies_to != transport => {
                faults.push(ConfigError::WrongTransport {
                    variable,
                    server: prefix.to_owned(),
                    applies_to,
                    target_variable: transport_variable.clone(),
                });
                continue;
            }
            _ => {}
        }
        check_value(&variable, field, value, &mut faults);
    }
    for field in DEFINITION.iter().filter(|f| f.required) {
        let applies = match (field.transport, transport) {
            (None, _) => true,
            (Some(applies_to), Some(transport)) => applies_to == transport,
            (Some(_), None) => false,
        };
        if applies && !object.contains_key(field.name) {
            faults.push(ConfigError::MissingField {
                variable: prefix.to_owned(),
                field: field.name,
            });
        }
    }
    faults
}

/// Every shape fault of an `McpServerOptions`, its fields named `<variable>.<field>`.
pub(crate) fn check_options(value: &Value, variable: &str) -> Vec<ConfigError> {
    let mut faults = Vec::new();
    let Some(object) = object(variable, value, OBJECT, &mut faults) else {
        return faults;
    };
    for (key, value) in object {
        if let Some(field) = OPTIONS.iter().find(|f| f.name == key) {
            check_value(&format!("{variable}.{key}"), field, value, &mut faults);
        } else if NOT_OPTIONS.contains(&key.as_str()) {
            faults.push(ConfigError::RepeatedInOptions {
                variable: variable.to_owned(),
                field: key.clone(),
            });
        } else {
            faults.push(ConfigError::UnknownField {
                variable: variable.to_owned(),
                field: shown(key),
                allowed: names(&OPTIONS),
            });
        }
    }
    faults
}

/// Every shape fault of one `authorization` held whole by `variable` (the
/// `PLURNK_MCP_<server>_AUTHORIZATION` companion), its fields named `<variable>.<field>`.
pub(crate) fn check_authorization(value: &Value, variable: &str) -> Vec<ConfigError> {
    let mut faults = Vec::new();
    check_value(
        variable,
        &field("authorization", Kind::Authorization),
        value,
        &mut faults,
    );
    faults
}

fn names(fields: &[Field]) -> String {
    fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
}

/// The object, or a fault saying what it is instead.
fn object<'v>(
    variable: &str,
    value: &'v Value,
    expected: &'static str,
    faults: &mut Vec<ConfigError>,
) -> Option<&'v Map<String, Value>> {
    match value {
        Value::Object(object) => Some(object),
        other => {
            faults.push(ConfigError::WrongJsonShape {
                variable: variable.to_owned(),
                expected,
                found: format!("it is {}", json::kind(other)),
            });
            None
        }
    }
}

fn check_value(variable: &str, field: &Field, value: &Value, faults: &mut Vec<ConfigError>) {
    let shape = |found: String| ConfigError::WrongJsonShape {
        variable: variable.to_owned(),
        expected: field.kind.expected(),
        found,
    };
    match (field.kind, value) {
        (_, Value::Null) if field.nullable => {}
        (Kind::Text, Value::String(_)) => {}
        (Kind::List, Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if !item.is_string() {
                    faults.push(shape(format!("element {} is {}", i + 1, json::kind(item))));
                }
            }
        }
        (Kind::Map, Value::Object(entries)) => {
            for (key, value) in entries {
                if !value.is_string() {
                    faults.push(shape(format!(
                        "the value of {:?} is {}",
                        shown(key),
                        json::kind(value)
                    )));
                }
            }
        }
        (Kind::Authorization, Value::Object(object)) => authorization(variable, object, faults),
        (Kind::Object, Value::Object(_)) => {}
        (Kind::Sandbox, value) => {
            super::sandbox::SandboxPolicy::from_value(variable, value, faults);
        }
        (_, other) => faults.push(shape(format!("it is {}", json::kind(other)))),
    }
}

/// An authorization `type` naming an arm the host declines by design: what it is and why.
fn declined(kind: &str) -> Option<(&'static str, &'static str)> {
    let kind = kind.to_ascii_lowercase();
    if kind.contains("enterprise") || kind.contains("id-jag") || kind == "ema" {
        return Some((
            "enterprise-managed authorization",
            "its single sign-on and kept identity assertions are an organization's deployment \
             policy, which the host does not own",
        ));
    }
    if kind.contains("jwt") || kind.contains("private-key") {
        return Some((
            "private-key JWT client authentication",
            "a client secret is the client authentication the host supports",
        ));
    }
    None
}

fn authorization(variable: &str, object: &Map<String, Value>, faults: &mut Vec<ConfigError>) {
    let fields: &[Field] = match object.get("type") {
        Some(Value::String(kind)) if kind == "bearer" => &BEARER,
        Some(Value::String(kind)) if kind == "oauth" => &OAUTH,
        Some(Value::String(kind)) if kind == "client-credentials" => &CLIENT_CREDENTIALS,
        Some(Value::String(kind)) if kind == "workload-identity" => &WORKLOAD_IDENTITY,
        None => {
            faults.push(ConfigError::MissingField {
                variable: variable.to_owned(),
                field: "type",
            });
            return;
        }
        Some(Value::String(kind)) if declined(kind).is_some() => {
            if let Some((what, why)) = declined(kind) {
                faults.push(ConfigError::DeclinedAuthorization {
                    variable: format!("{variable}.type"),
                    what,
                    why,
                });
            }
            return;
        }
        Some(other) => {
            faults.push(ConfigError::WrongJsonShape {
                variable: format!("{variable}.type"),
                expected: "\"bearer\", \"oauth\", \"client-credentials\" or \"workload-identity\"",
                found: match other {
                    Value::String(_) => "it is another string".to_owned(),
                    other => format!("it is {}", json::kind(other)),
                },
            });
            return;
        }
    };
    for (key, value) in object {
        if key == "type" {
            continue;
        }
        match fields.iter().find(|f| f.name == key) {
            Some(field) => check_value(&format!("{variable}.{key}"), field, value, faults),
            None => faults.push(ConfigError::UnknownField {
                variable: variable.to_owned(),
                field: shown(key),
                allowed: format!("type, {}", names(fields)),
            }),
        }
    }
    for field in fields.iter().filter(|f| f.required) {
        if !object.contains_key(field.name) {
            faults.push(ConfigError::MissingField {
                variable: variable.to_owned(),
                field: field.name,
            });
        }
    }
}

/// The beginning of a key that looks like a field name; the rest is not shown
/// in case it is a pasted secret.
fn shown(key: &str) -> String {
    key.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
        .take(64)
        .collect()
}
