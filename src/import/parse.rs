//! Each format's text read into one JSON document: TOML for Codex, JSON with comments and
//! trailing commas for the others, with the line and column of a syntax error.

use serde_json::Value;

use super::{Format, ImportError};

pub(super) fn parse(text: &str, format: Format) -> Result<Value, ImportError> {
    if format == Format::Codex {
        let table: toml::Table = toml::from_str(text).map_err(|error| {
            let (line, column) = error
                .span()
                .map(|span| line_column(text, span.start))
                .unzip();
            ImportError::Syntax {
                language: "TOML",
                line,
                column,
                message: error.message().trim().replace('\n', "; "),
            }
        })?;
        return Ok(toml_to_json(toml::Value::Table(table)));
    }
    serde_json::from_str(&strip_jsonc(text)).map_err(|error| ImportError::Syntax {
        language: "JSON",
        line: Some(error.line()),
        column: Some(error.column()),
        // serde_json's syntax messages end in " at line L column C", said once already.
        message: error
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    })
}

/// VS Code's list: `servers` of `mcp.json`, or `mcp.servers` of a `settings.json`.
pub(super) fn vscode_servers(document: &Value) -> Option<&Value> {
    document
        .get("servers")
        .or_else(|| document.get("mcp").and_then(|mcp| mcp.get("servers")))
        .filter(|servers| servers.is_object())
}

/// The 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(key, value)| (key, toml_to_json(value)))
                .collect(),
        ),
    }
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as VS Code and Cursor accept it,
/// made plain JSON. Every removed byte becomes a space, so the parser's line and column
/// still point into the file as written.
pub(super) fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    // Comments first, so that a comma before one is seen to trail.
    outside_strings(&mut bytes, |bytes, i| match (bytes[i], bytes.get(i + 1)) {
        (b'/', Some(b'/')) => {
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| i + n);
            bytes[i..end].fill(b' ');
            end
        }
        (b'/', Some(b'*')) => {
            let end = bytes[i + 2..]
                .windows(2)
                .position(|pair| pair == b"*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            for byte in &mut bytes[i..end] {
                if *byte != b'\n' {
                    *byte = b' ';
                }
            }
            end
        }
        _ => i + 1,
    });
    outside_strings(&mut bytes, |bytes, i| {
        if bytes[i] == b',' {
            let next = bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i + 1
    });
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// Calls `visit` at each byte outside JSON strings; it answers where to go on.
fn outside_strings(bytes: &mut [u8], mut visit: impl FnMut(&mut [u8], usize) -> usize) {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        if in_string {
            match bytes[i] {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
        } else if bytes[i] == b'"' {
            in_string = true;
            i += 1;
        } else {
            i = visit(bytes, i).max(i + 1);
        }
    }
}
