//! What the configuration knows of tool sources (their declarations are read by
//! [`crate::sources`], above it): the error a declaration's reader gives, and walking a
//! declaration's strings (their `${NAME}` references are checked and expanded here, like any
//! definition's).

use serde_json::Value;

/// A declaration that cannot be used: where, which field, what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {field}: {problem}; {fix}")]
pub struct DeclarationError {
    /// The file (or `add` action) the declaration came from.
    pub origin: String,
    /// The field, as a JSON path (`tools[2].params[0].flag`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
    /// What to write instead.
    pub fix: String,
}

impl DeclarationError {
    /// An error at `field` of the declaration from `origin`.
    pub fn new(
        origin: impl Into<String>,
        field: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            origin: origin.into(),
            field: field.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

/// Calls `each` with the JSON path and text of every string in `value`.
pub(crate) fn each_string(value: &Value, each: &mut dyn FnMut(&str, &str)) {
    fn walk(value: &Value, path: &mut String, each: &mut dyn FnMut(&str, &str)) {
        match value {
            Value::String(text) => each(path, text),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{index}]"));
                    walk(item, path, each);
                    path.truncate(len);
                }
            }
            Value::Object(fields) => {
                for (key, item) in fields {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    walk(item, path, each);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    walk(value, &mut String::new(), each);
}

/// Calls `each` with the JSON path of every string in `value`, to change it in place.
pub(crate) fn each_string_mut(value: &mut Value, each: &mut dyn FnMut(&str, &mut String)) {
    fn walk(value: &mut Value, path: &mut String, each: &mut dyn FnMut(&str, &mut String)) {
        match value {
            Value::String(text) => each(path, text),
            Value::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{index}]"));
                    walk(item, path, each);
                    path.truncate(len);
                }
            }
            Value::Object(fields) => {
                for (key, item) in fields.iter_mut() {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    walk(item, path, each);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    walk(value, &mut String::new(), each);
}

/// Makes a relative `path` (script) or `spec` file (OpenAPI) absolute against the directory
/// of `origin` when that is a declaration file, so the definition reads the same wherever it
/// is stored, reopened or checked (`source check` reads it with no file beside it).
pub(crate) fn anchor(kind: super::TransportKind, declaration: &mut Value, origin: &str) {
    let field = match kind {
        super::TransportKind::Script => "path",
        super::TransportKind::OpenApi => "spec",
        _ => return,
    };
    let origin = std::path::Path::new(origin);
    let Some(directory) = origin.is_absolute().then(|| origin.parent()).flatten() else {
        return;
    };
    if let Some(Value::String(path)) = declaration.get_mut(field)
        && !path.contains("://")
        && !path.starts_with("${")
        && std::path::Path::new(path.as_str()).is_relative()
    {
        *path = directory.join(&*path).display().to_string();
    }
}
