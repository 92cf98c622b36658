//! What the model reads: one-liners, the survey, the family and tool documents, and the
//! resource and prompt facets — pure functions of one [`WorkspaceSnapshot`] (no I/O, no
//! clock): the same snapshot always gives byte-identical text.
//!
//! | document | address |
//! |---|---|
//! | survey | [`survey`]: one row per enabled server, plus the whole tool tree of each `PLURNK_MCP_EXPANDED` server |
//! | family | `worker://plurnk/tools/<server>.md`: the server one-liner and one annotated, copyable EXEC heading per enabled tool |
//! | tool | `worker://plurnk/tools/<server>/<encoded-tool>.md`: the invocation form, the signature, every argument with its constraints |
//! | resources | `<server>:///` and `<server>:///resources`: resources and templates, each under an encoded URI |
//! | prompts | `<server>:///prompts`: prompts, each under an encoded name |
//!
//! One-liners come from authored metadata only, in this order — server: its `_SUMMARY`,
//! `serverInfo.description`, its `title`, the first sentence of its `instructions`, then a
//! factual tool-name list; tool: its `_<tool>_SUMMARY`, its title (`title`, else
//! `annotations.title`), the first sentence of its description (capped), then its name.
//! Nothing under `_meta` (MCP Apps' `_meta.ui` included) and no output schema ever enters,
//! and disabled tools appear nowhere (the snapshot holds enabled tools only).

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::{Effect, ServerSnapshot, ServerState, ToolInfo, WorkspaceSnapshot};

/// The longest one-liner, in characters; a longer one is cut at a word and ends in `…`.
pub const ONE_LINER_MAX: usize = 160;

/// How an EXEC op opens: `<<EXEC[server]…`. The op's spelling is written with these two
/// wherever it is written or read (the documents here, `exec`'s reader, its messages).
pub(crate) const EXEC_OPEN: &str = "<<EXEC";

/// How an EXEC op closes: `…:EXEC`.
pub(crate) const EXEC_CLOSE: &str = ":EXEC";

/// How many tool names a server one-liner lists before it says how many more there are.
const LISTED_TOOLS: usize = 8;

/// How deep a signature spells out nested objects and `$ref`s before it says `object`.
const SIGNATURE_DEPTH: usize = 4;

/// The address of `server`'s family document.
pub fn family_uri(server: &str) -> String {
    format!("worker://plurnk/tools/{}.md", encode(server))
}

/// The address of the document of `tool` of `server`.
pub fn tool_uri(server: &str, tool: &str) -> String {
    format!(
        "worker://plurnk/tools/{}/{}.md",
        encode(server),
        encode(tool)
    )
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The server's one-liner.
pub fn server_summary(server: &ServerSnapshot) -> String {
    let negotiated = server.negotiated.as_deref();
    let authored = [
        server.authored.summary.as_deref(),
        negotiated.and_then(|n| n.description.as_deref()),
        negotiated.and_then(|n| n.title.as_deref()),
    ];
    if let Some(line) = authored.into_iter().flatten().find_map(one_line) {
        return line;
    }
    if let Some(line) = negotiated
        .and_then(|n| n.instructions.as_deref())
        .and_then(first_sentence)
    {
        return line;
    }
    // Nothing authored: the facts.
    let names: Vec<&str> = server.tools.iter().map(|tool| tool.name.as_str()).collect();
    let line = match names.len() {
        0 if server.state == ServerState::Ready => {
            format!("MCP server {} with no enabled tools", server.alias)
        }
        0 => format!("MCP server {} ({})", server.alias, server.state),
        _ => tool_list(&server.alias, &names),
    };
    cap(&line)
}

/// `MCP server <alias> with tools a, b and N more`: as many names as fit a one-liner (at most
/// [`LISTED_TOOLS`]), the rest counted, so the list itself is never cut mid-name.
fn tool_list(alias: &str, names: &[&str]) -> String {
    let line = |listed: usize| {
        let shown = names[..listed].join(", ");
        match names.len() - listed {
            0 => format!("MCP server {alias} with tools {shown}"),
            more => format!("MCP server {alias} with tools {shown} and {more} more"),
        }
    };
    let fits = (1..=names.len().min(LISTED_TOOLS))
        .rev()
        .map(line)
        .find(|text| text.chars().count() <= ONE_LINER_MAX);
    // Not even one name fits (a name of over a hundred characters): cut, as any line is.
    fits.unwrap_or_else(|| line(1))
}

/// The tool's one-liner.
pub fn tool_summary(server: &ServerSnapshot, tool: &ToolInfo) -> String {
    let authored = server
        .authored
        .tools
        .get(&crate::config::tool_summary_key(&tool.name))
        .map(String::as_str);
    [authored, tool.title.as_deref()]
        .into_iter()
        .flatten()
        .find_map(one_line)
        .or_else(|| tool.description.as_deref().and_then(first_sentence))
        .unwrap_or_else(|| cap(&tool.name))
}

/// The invocation form of a tool, as its document's Summary and the family's headings
/// carry it: `EXEC [server] (tool) <!-- one-liner -->`.
pub fn invocation(server: &ServerSnapshot, tool: &ToolInfo) -> String {
    format!(
        "EXEC [{}] ({}) <!-- {} -->",
        server.alias,
        tool.name,
        comment_safe(&tool_summary(server, tool))
    )
}

/// The copyable op that calls `tool` with arguments of its signature's shape.
pub fn op_template(server: &ServerSnapshot, tool: &ToolInfo) -> String {
    format!(
        "{EXEC_OPEN}[{}]({}):{}{EXEC_CLOSE}",
        server.alias,
        tool.name,
        signature(&tool.input_schema)
    )
}

/// The survey: one row per enabled server (its one-liner and family document), and for a
/// `PLURNK_MCP_EXPANDED` server every enabled tool beneath it. A server that is not ready
/// says so, so the model does not call it now.
pub fn survey(snapshot: &WorkspaceSnapshot) -> String {
    let mut out = String::from("# MCP tools\n\n");
    let enabled: Vec<&ServerSnapshot> = snapshot
        .servers
        .values()
        .map(|server| &**server)
        .filter(|server| server.state != ServerState::Disabled)
        .collect();
    if enabled.is_empty() {
        out.push_str("No MCP server is enabled.\n");
        return out;
    }
    for server in enabled {
        let _ = write!(
            out,
            "- [{}]({}): {}",
            server.alias,
            family_uri(&server.alias),
            server_summary(server)
        );
        if server.state != ServerState::Ready {
            let _ = write!(out, " ({} now)", server.state);
        }
        out.push('\n');
        if server.authored.expanded {
            for tool in server.tools.iter() {
                let _ = writeln!(
                    out,
                    "  - [{}]({}): {}",
                    tool.name,
                    tool_uri(&server.alias, &tool.name),
                    tool_summary(server, tool)
                );
            }
        }
    }
    out
}

/// The family document of `server`: `None` when the snapshot has no such enabled server.
pub fn family_document(snapshot: &WorkspaceSnapshot, server: &str) -> Option<String> {
    let server = enabled(snapshot, server)?;
    let mut out = format!("# {}\n\n{}\n\n", server.alias, server_summary(server));
    if server.state != ServerState::Ready {
        let _ = writeln!(
            out,
            "This server is {} now and takes no calls until it is ready; its tools are not \
             known until then.",
            server.state
        );
        return Some(out);
    }
    if server.tools.is_empty() {
        out.push_str("It has no enabled tools.\n");
        return Some(out);
    }
    let _ = writeln!(
        out,
        "Call a tool by copying its op line below and writing a JSON value in place of each \
         type (a property marked `?` is optional: leave it out or give it). Each tool's exact \
         input contract is its own document, `worker://plurnk/tools/{}/<tool>.md`.\n",
        encode(&server.alias)
    );
    for tool in server.tools.iter() {
        let _ = writeln!(out, "## {}", invocation(server, tool));
        let _ = writeln!(out, "{}", op_template(server, tool));
        let _ = writeln!(out, "Effect: {}.\n", effect_word(tool.effect));
    }
    Some(out)
}

/// The document of `tool` of `server`: `None` unless that tool is enabled in the snapshot.
pub fn tool_document(snapshot: &WorkspaceSnapshot, server: &str, tool: &str) -> Option<String> {
    let server = enabled(snapshot, server)?;
    let tool = server.tool(tool)?;
    let schema = &tool.input_schema;
    let mut out = format!("# {}\n\n", tool.name);
    let _ = writeln!(out, "## Summary\n{}\n", invocation(server, tool));
    let _ = writeln!(out, "## Invocation\n{}\n", op_template(server, tool));
    let _ = writeln!(out, "## Arguments");
    if properties_of(schema, schema).is_empty() {
        out.push_str("None: send an empty body, or `{}`.\n");
    } else {
        arguments(&mut out, schema, schema, 0);
    }
    out.push('\n');
    let _ = writeln!(out, "## Description");
    match tool.description.as_deref().and_then(normalized) {
        Some(text) => {
            let _ = writeln!(out, "{text}\n");
        }
        None => {
            let _ = writeln!(
                out,
                "Server {} gives no description of its tool {}.\n",
                server.alias, tool.name
            );
        }
    }
    let _ = writeln!(out, "Effect: {}.", effect_word(tool.effect));
    Some(out)
}

/// One line per property of `schema` (its type, requiredness, constraints and
/// description), and beneath an object or an array of objects the same for its own
/// properties, indented, to a bounded depth.
fn arguments(out: &mut String, schema: &Value, root: &Value, depth: usize) {
    let indent = "  ".repeat(depth);
    let required = required_of(schema, root);
    for (name, property) in properties_of(schema, root) {
        let requiredness = if required.contains(&name.as_str()) {
            "required"
        } else {
            "optional"
        };
        let _ = write!(
            out,
            "{indent}- {} ({}, {}{})",
            quoted(name),
            type_expression(property, root, depth + 1),
            requiredness,
            constraints(property, root)
        );
        if let Some(text) = property
            .get("description")
            .or_else(|| resolve(property, root, 0).get("description"))
            .and_then(Value::as_str)
            .and_then(normalized)
        {
            let _ = write!(out, ": {text}");
        }
        out.push('\n');
        if depth >= SIGNATURE_DEPTH {
            continue;
        }
        let resolved = resolve(property, root, 0);
        if !properties_of(resolved, root).is_empty() {
            arguments(out, resolved, root, depth + 1);
        } else if let Some(items) = resolved.get("items").map(|items| resolve(items, root, 0))
            && !properties_of(items, root).is_empty()
        {
            let _ = writeln!(out, "{indent}  - each item:");
            arguments(out, items, root, depth + 2);
        }
    }
}

/// `<server>:///` and `<server>:///resources`: the server's resources and resource
/// templates, each with its encoded address. Never tools.
pub fn resource_facet(snapshot: &WorkspaceSnapshot, server: &str) -> Option<String> {
    let server = enabled(snapshot, server)?;
    let alias = &server.alias;
    let mut out = format!("# {alias}:///resources\n\n");
    if let Some(line) = not_listed(server, "resources") {
        out.push_str(&line);
        return Some(out);
    }
    let catalog = &server.catalog;
    if catalog.resources.is_empty() && catalog.templates.is_empty() {
        out.push_str("This server lists no resources.\n");
        return Some(out);
    }
    if !catalog.resources.is_empty() {
        out.push_str("## Resources\n");
        for resource in catalog.resources.iter() {
            let _ = write!(
                out,
                "- [{}]({alias}:///resources/{})",
                one_line(&resource.name).unwrap_or_default(),
                encode(&resource.uri)
            );
            if let Some(mime) = &resource.mime_type {
                let _ = write!(out, " ({})", one_line(mime).unwrap_or_default());
            }
            if let Some(text) = resource.description.as_deref().and_then(first_sentence) {
                let _ = write!(out, ": {text}");
            }
            let _ = writeln!(
                out,
                " — `{}`",
                normalized(&resource.uri).unwrap_or_default()
            );
        }
        out.push('\n');
    }
    if !catalog.templates.is_empty() {
        out.push_str("## Templates\n");
        for template in catalog.templates.iter() {
            let _ = write!(
                out,
                "- {} `{}`",
                one_line(&template.name).unwrap_or_default(),
                normalized(&template.uri_template).unwrap_or_default()
            );
            if let Some(text) = template.description.as_deref().and_then(first_sentence) {
                let _ = write!(out, ": {text}");
            }
            let _ = writeln!(out, " — read one as `{alias}:///resources/<encoded URI>`");
        }
        out.push('\n');
    }
    Some(out)
}

/// `<server>:///prompts`: the server's prompts, each with its arguments and its address.
pub fn prompt_facet(snapshot: &WorkspaceSnapshot, server: &str) -> Option<String> {
    let server = enabled(snapshot, server)?;
    let alias = &server.alias;
    let mut out = format!("# {alias}:///prompts\n\n");
    if let Some(line) = not_listed(server, "prompts") {
        out.push_str(&line);
        return Some(out);
    }
    if server.catalog.prompts.is_empty() {
        out.push_str("This server lists no prompts.\n");
        return Some(out);
    }
    for prompt in server.catalog.prompts.iter() {
        let _ = write!(
            out,
            "- [{}]({alias}:///prompts/{})",
            one_line(&prompt.name).unwrap_or_default(),
            encode(&prompt.name)
        );
        if let Some(text) = prompt.description.as_deref().and_then(first_sentence) {
            let _ = write!(out, ": {text}");
        }
        out.push('\n');
        for argument in &prompt.arguments {
            let _ = write!(
                out,
                "  - {} ({})",
                quoted(&argument.name),
                if argument.required {
                    "required"
                } else {
                    "optional"
                }
            );
            if let Some(text) = argument.description.as_deref().and_then(first_sentence) {
                let _ = write!(out, ": {text}");
            }
            out.push('\n');
        }
    }
    Some(out)
}

/// The document at `uri`, whichever it is: the family or tool documents, or a server's
/// resource or prompt facet. `None` for any other address.
pub fn document(snapshot: &WorkspaceSnapshot, uri: &str) -> Option<String> {
    if let Some(rest) = uri.strip_prefix("worker://plurnk/tools/") {
        let rest = rest.strip_suffix(".md")?;
        return match rest.split_once('/') {
            None => {
                let server = decode(rest)?;
                family_document(snapshot, &server)
            }
            Some((server, tool)) => tool_document(snapshot, &decode(server)?, &decode(tool)?),
        };
    }
    let (server, path) = uri.split_once(":///")?;
    match path {
        "" | "resources" => resource_facet(snapshot, server),
        "prompts" => prompt_facet(snapshot, server),
        _ => None,
    }
}

/// The server a document address names (`worker://plurnk/tools/<server>.md`, a tool's document
/// beneath it, `<server>:///resources`, `<server>:///prompts`), decoded; `None` for anything
/// that is not such an address. What [`document`] reads an address as, so a caller can make
/// ready only the server the document needs.
pub fn addressed_server(uri: &str) -> Option<String> {
    if let Some(rest) = uri.strip_prefix("worker://plurnk/tools/") {
        let rest = rest.strip_suffix(".md")?;
        let server = rest.split_once('/').map_or(rest, |(server, _)| server);
        return decode(server);
    }
    let (server, _) = uri.split_once(":///")?;
    Some(server.to_owned())
}

/// The deterministic one-line, JSON-shaped invocation signature of an input schema: quoted
/// property names, `?` on optional ones, primitive type words (`string`, `number`,
/// `integer`, `boolean`, `null`), `[T]` for arrays, literal unions for `enum` and `const`,
/// `|` between alternatives, nested objects spelled out (to a bounded depth), local `$ref`s
/// resolved and remote ones never fetched (`any`). It never invents argument values.
pub fn signature(schema: &Value) -> String {
    object_signature(schema, schema, 0)
}

/// One property of a signature, as [`read_signature`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureField {
    /// The property name, unquoted.
    pub name: String,
    /// Whether it has no `?`.
    pub required: bool,
    /// Its type expression, as written (`string`, `"r" | "w"`, `[{"x": number}]`, …).
    pub kind: String,
}

/// Reads the top level of a [`signature`] back into its properties, in order; `None` when
/// `text` is not one.
pub fn read_signature(text: &str) -> Option<Vec<SignatureField>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let mut names = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let name = names.next()?.ok()?;
        rest = &rest[names.byte_offset()..];
        let (required, after) = match rest.strip_prefix("?: ") {
            Some(after) => (false, after),
            None => (true, rest.strip_prefix(": ")?),
        };
        // The type runs to the next ", " outside brackets, braces and string literals.
        let (mut depth, mut in_string, mut escaped, mut end) = (0i32, false, false, after.len());
        for (at, c) in after.char_indices() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => depth -= 1,
                ',' if depth == 0 => {
                    end = at;
                    break;
                }
                _ => {}
            }
        }
        out.push(SignatureField {
            name,
            required,
            kind: after[..end].to_owned(),
        });
        rest = match &after[end..] {
            "" => "",
            more => more.strip_prefix(", ")?,
        };
    }
    Some(out)
}

fn object_signature(schema: &Value, root: &Value, depth: usize) -> String {
    let properties = properties_of(schema, root);
    if properties.is_empty() {
        return "{}".into();
    }
    let required = required_of(schema, root);
    let fields: Vec<String> = properties
        .into_iter()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!(
                "{}{optional}: {}",
                quoted(name),
                type_expression(property, root, depth + 1)
            )
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// The type of one schema as the signature spells it.
fn type_expression(schema: &Value, root: &Value, depth: usize) -> String {
    // Alternatives and `$ref`s can nest (or loop) without adding a level of the value.
    if depth > SIGNATURE_DEPTH * 4 {
        return "any".into();
    }
    let schema = resolve(schema, root, 0);
    let Some(object) = schema.as_object() else {
        // `true` (or a broken schema) admits anything.
        return "any".into();
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str)
        && resolve_pointer(reference, root).is_none()
    {
        return "any".into();
    }
    if let Some(constant) = object.get("const") {
        return literal(constant);
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array)
        && !values.is_empty()
    {
        return values.iter().map(literal).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alternatives) = object.get(key).and_then(Value::as_array)
            && !alternatives.is_empty()
        {
            let mut words: Vec<String> = Vec::new();
            for alternative in alternatives {
                let word = type_expression(alternative, root, depth + 1);
                if !words.contains(&word) {
                    words.push(word);
                }
            }
            return words.join(" | ");
        }
    }
    if let Some(all) = object.get("allOf").and_then(Value::as_array)
        && all.len() == 1
    {
        return type_expression(&all[0], root, depth + 1);
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(word)) => vec![word.as_str()],
        Some(Value::Array(words)) => words.iter().filter_map(Value::as_str).collect(),
        _ if object.contains_key("properties") => vec!["object"],
        _ if object.contains_key("items") => vec!["array"],
        _ => vec![],
    };
    if types.is_empty() {
        return "any".into();
    }
    let words: Vec<String> = types
        .into_iter()
        .map(|word| match word {
            "object" if depth <= SIGNATURE_DEPTH && !properties_of(schema, root).is_empty() => {
                object_signature(schema, root, depth)
            }
            "array" => match object.get("items") {
                Some(items) if depth <= SIGNATURE_DEPTH => {
                    let inner = type_expression(items, root, depth + 1);
                    if inner.contains(" | ") {
                        format!("[({inner})]")
                    } else {
                        format!("[{inner}]")
                    }
                }
                _ => "[any]".into(),
            },
            "string" | "number" | "integer" | "boolean" | "null" | "object" => word.to_owned(),
            _ => "any".into(),
        })
        .collect();
    words.join(" | ")
}

/// Standard constraints of one property, as `, default "x", format email, 1 to 10, …`.
fn constraints(schema: &Value, root: &Value) -> String {
    let schema = resolve(schema, root, 0);
    let Some(object) = schema.as_object() else {
        return String::new();
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(default) = object.get("default") {
        parts.push(format!("default {}", literal(default)));
    }
    if let Some(format) = object.get("format").and_then(Value::as_str) {
        parts.push(format!("format {format}"));
    }
    let bound = |key: &str| {
        object
            .get(key)
            .filter(|v| v.is_number())
            .map(Value::to_string)
    };
    match (bound("minimum"), bound("maximum")) {
        (Some(min), Some(max)) => parts.push(format!("from {min} to {max}")),
        (Some(min), None) => parts.push(format!("at least {min}")),
        (None, Some(max)) => parts.push(format!("at most {max}")),
        (None, None) => {}
    }
    if let Some(min) = bound("exclusiveMinimum") {
        parts.push(format!("above {min}"));
    }
    if let Some(max) = bound("exclusiveMaximum") {
        parts.push(format!("below {max}"));
    }
    if let Some(step) = bound("multipleOf") {
        parts.push(format!("a multiple of {step}"));
    }
    for (min, max, unit) in [
        ("minLength", "maxLength", "characters"),
        ("minItems", "maxItems", "items"),
        ("minProperties", "maxProperties", "properties"),
    ] {
        match (bound(min), bound(max)) {
            (Some(min), Some(max)) if min == max => parts.push(format!("exactly {min} {unit}")),
            (Some(min), Some(max)) => parts.push(format!("{min} to {max} {unit}")),
            (Some(min), None) => parts.push(format!("at least {min} {unit}")),
            (None, Some(max)) => parts.push(format!("at most {max} {unit}")),
            (None, None) => {}
        }
    }
    if object.get("uniqueItems") == Some(&Value::Bool(true)) {
        parts.push("unique items".into());
    }
    if let Some(pattern) = object.get("pattern").and_then(Value::as_str) {
        parts.push(format!("pattern `{}`", pattern.replace('`', "\\`")));
    }
    if let Some(values) = object.get("examples").and_then(Value::as_array)
        && !values.is_empty()
    {
        let shown: Vec<String> = values.iter().take(3).map(literal).collect();
        parts.push(format!("for example {}", shown.join(", ")));
    }
    if object.get("deprecated") == Some(&Value::Bool(true)) {
        parts.push("deprecated".into());
    }
    parts.iter().map(|part| format!(", {part}")).collect()
}

/// The properties of an object schema (through local `$ref`s and `allOf`): the required
/// ones first, each group in name order.
fn properties_of<'s>(schema: &'s Value, root: &'s Value) -> Vec<(&'s String, &'s Value)> {
    let required = required_of(schema, root);
    let mut all = all_properties(schema, root, 0);
    all.sort_by_key(|(name, _)| !required.contains(&name.as_str()));
    all
}

/// How deep `allOf`s are followed (they can refer back to where they are).
const ALL_OF_DEPTH: usize = 8;

fn all_properties<'s>(
    schema: &'s Value,
    root: &'s Value,
    depth: usize,
) -> Vec<(&'s String, &'s Value)> {
    let schema = resolve(schema, root, 0);
    let mut out: Vec<(&String, &Value)> = Vec::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        out.extend(properties.iter());
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array)
        && depth < ALL_OF_DEPTH
    {
        for part in all {
            for (name, property) in all_properties(part, root, depth + 1) {
                if !out.iter().any(|(seen, _)| *seen == name) {
                    out.push((name, property));
                }
            }
        }
    }
    out
}

fn required_of<'s>(schema: &'s Value, root: &'s Value) -> Vec<&'s str> {
    required_within(schema, root, 0)
}

fn required_within<'s>(schema: &'s Value, root: &'s Value, depth: usize) -> Vec<&'s str> {
    let schema = resolve(schema, root, 0);
    let mut out: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(all) = schema.get("allOf").and_then(Value::as_array)
        && depth < ALL_OF_DEPTH
    {
        for part in all {
            out.extend(required_within(part, root, depth + 1));
        }
    }
    out
}

/// Follows local `$ref`s (`#/$defs/x`, `#/definitions/x`, any JSON pointer into the
/// document) a bounded number of times; a remote or broken reference stays as it is.
fn resolve<'s>(schema: &'s Value, root: &'s Value, hops: usize) -> &'s Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) if hops < 16 => match resolve_pointer(reference, root) {
            Some(target) => resolve(target, root, hops + 1),
            None => schema,
        },
        _ => schema,
    }
}

fn resolve_pointer<'s>(reference: &str, root: &'s Value) -> Option<&'s Value> {
    let pointer = reference.strip_prefix('#')?;
    let pointer = decode(pointer)?;
    root.pointer(&pointer)
}

/// For a server that is not ready, the line that says its `family` is not known: never
/// "lists none", which would present an unlisted catalog as complete.
fn not_listed(server: &ServerSnapshot, family: &str) -> Option<String> {
    (server.state != ServerState::Ready).then(|| {
        format!(
            "This server is {} now; its {family} are not known until it is ready.\n",
            server.state
        )
    })
}

fn enabled<'s>(snapshot: &'s WorkspaceSnapshot, server: &str) -> Option<&'s ServerSnapshot> {
    snapshot
        .server(server)
        .filter(|server| server.state != ServerState::Disabled)
}

fn effect_word(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "read (an observation; runs without approval)",
        Effect::Host => "host (proposed for approval before it runs)",
    }
}

/// A JSON value as a literal of the signature.
fn literal(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        return match value {
            Value::String(_) => "string".into(),
            Value::Array(_) => "[any]".into(),
            Value::Object(_) => "object".into(),
            _ => text,
        };
    }
    text
}

fn quoted(name: &str) -> String {
    Value::String(name.to_owned()).to_string()
}

/// Whitespace collapsed to single spaces and other control characters (a server's escape
/// sequences) and format characters (a bidirectional override) dropped; `None` when nothing
/// is left.
fn normalized(text: &str) -> Option<String> {
    let joined = text
        .split_whitespace()
        .map(|word| {
            word.chars()
                .filter(|c| !crate::text::is_unshown(*c))
                .collect::<String>()
        })
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!joined.is_empty()).then_some(joined)
}

/// `text` as one capped line.
fn one_line(text: &str) -> Option<String> {
    normalized(text).map(|line| cap(&line))
}

/// The first sentence of `text` (to the first `.`, `!` or `?` followed by whitespace, or the
/// first blank line), as one capped line.
fn first_sentence(text: &str) -> Option<String> {
    let paragraph = text
        .split("\n\n")
        .map(str::trim)
        .find(|paragraph| !paragraph.is_empty())?;
    let paragraph = normalized(paragraph)?;
    let mut end = paragraph.len();
    let chars: Vec<(usize, char)> = paragraph.char_indices().collect();
    for window in chars.windows(2) {
        let ((at, c), (_, next)) = (window[0], window[1]);
        if matches!(c, '.' | '!' | '?') && next == ' ' {
            end = at + c.len_utf8();
            break;
        }
    }
    Some(cap(&paragraph[..end]))
}

/// Cuts `line` to [`ONE_LINER_MAX`] characters at a word, ending in `…`; every one-liner
/// passes here, and none ends in a full stop, whatever its source wrote: a one-liner is a
/// label, and a survey of them reads one way.
fn cap(line: &str) -> String {
    let line = match line.strip_suffix('.') {
        Some(stripped) if !stripped.ends_with('.') => stripped.trim_end(),
        _ => line,
    };
    if line.chars().count() <= ONE_LINER_MAX {
        return line.to_owned();
    }
    let cut: String = line.chars().take(ONE_LINER_MAX - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(space) if space > ONE_LINER_MAX / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end())
}

/// A one-liner that cannot end the HTML comment it sits in.
fn comment_safe(text: &str) -> String {
    text.replace("-->", "- ->")
}

/// Percent-decoding of what [`encode`] wrote (and any other valid escapes).
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
