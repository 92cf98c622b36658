//! The transport-neutral Draft of one entry and the typed readers of its fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::secrets::references;
use super::{Introduced, NotCarried};
use crate::config::shorten;

/// The transport-neutral reading of one entry, before it becomes a definition.
#[derive(Default)]
pub(super) struct Draft {
    pub(super) command: Option<String>,
    pub(super) args: Vec<String>,
    pub(super) cwd: Option<String>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) url: Option<String>,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) bearer: Option<String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) enabled: bool,
    pub(super) introduced: Vec<Introduced>,
    pub(super) notes: Vec<String>,
}

pub(super) fn string(
    fields: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => references(field, s).map(Some),
        Some(_) => Err(wrong(field, "a string")),
    }
}

pub(super) fn strings(
    fields: &Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<String>>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => references(field, s),
                _ => Err(wrong(field, "an array of strings")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(wrong(field, "an array of strings")),
    }
}

/// A map of strings; numbers and booleans are written as text (VS Code allows them).
pub(super) fn string_map(
    fields: &Map<String, Value>,
    field: &str,
) -> Result<BTreeMap<String, String>, NotCarried> {
    let Some(value) = fields.get(field).filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Some(entries) = value.as_object() else {
        return Err(wrong(field, "an object of strings"));
    };
    let mut out = BTreeMap::new();
    for (name, value) in entries {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => {
                return Err(NotCarried::UnsetEnv {
                    name: shorten(name),
                });
            }
            _ => return Err(wrong(&format!("{field}.{name}"), "a string")),
        };
        out.insert(name.clone(), references(&format!("{field}.{name}"), &text)?);
    }
    Ok(out)
}

pub(super) fn boolean(
    fields: &Map<String, Value>,
    field: &str,
) -> Result<Option<bool>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(field, "true or false")),
    }
}

pub(super) fn wrong(field: &str, expected: &'static str) -> NotCarried {
    NotCarried::WrongType {
        field: shorten(field),
        expected,
    }
}

/// Notes, for each setting of `table` the entry has, that it is dropped and why.
pub(super) fn note_each(
    fields: &Map<String, Value>,
    table: &[(&str, &str)],
    notes: &mut Vec<String>,
) {
    for (field, note) in table {
        if fields.contains_key(*field) {
            notes.push((*note).to_owned());
        }
    }
}
