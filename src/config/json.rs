//! JSON-valued variables: string arrays and string maps, with faults that describe shape but never quote a value.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::ConfigError;

pub(crate) const STRING_ARRAY: &str = "a JSON array of strings, such as [\"a\", \"b\"]";
pub(crate) const STRING_MAP: &str =
    "a JSON object whose values are strings, such as {\"A\": \"b\"}";

/// Parses JSON without letting serde_json's messages through: its type errors
/// quote the offending value, which may be a secret.
pub(crate) fn parse(
    variable: &str,
    raw: &str,
    expected: &'static str,
) -> Result<Value, ConfigError> {
    serde_json::from_str(raw).map_err(|err| ConfigError::InvalidJson {
        variable: variable.to_owned(),
        expected,
        detail: if err.is_eof() {
            "it ends too early".to_owned()
        } else {
            format!("it breaks at line {} column {}", err.line(), err.column())
        },
    })
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON array of strings. Every non-string element is reported and left
/// out, so the rest can still be checked; `None` when it is not an array at all.
pub(crate) fn string_array(
    variable: &str,
    raw: &str,
    faults: &mut Vec<ConfigError>,
) -> Option<Vec<String>> {
    let shape = |found: String| ConfigError::WrongJsonShape {
        variable: variable.to_owned(),
        expected: STRING_ARRAY,
        found,
    };
    let items = match parse(variable, raw, STRING_ARRAY) {
        Ok(Value::Array(items)) => items,
        Ok(other) => {
            faults.push(shape(format!("it is {}", kind(&other))));
            return None;
        }
        Err(fault) => {
            faults.push(fault);
            return None;
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::String(s) => out.push(s),
            other => faults.push(shape(format!("element {} is {}", i + 1, kind(&other)))),
        }
    }
    Some(out)
}

/// A JSON object of strings. Every non-string value is reported by its key and
/// left out, so the rest can still be checked; `None` when it is not an object.
pub(crate) fn string_map(
    variable: &str,
    raw: &str,
    faults: &mut Vec<ConfigError>,
) -> Option<BTreeMap<String, String>> {
    let shape = |found: String| ConfigError::WrongJsonShape {
        variable: variable.to_owned(),
        expected: STRING_MAP,
        found,
    };
    let entries = match parse(variable, raw, STRING_MAP) {
        Ok(Value::Object(entries)) => entries,
        Ok(other) => {
            faults.push(shape(format!("it is {}", kind(&other))));
            return None;
        }
        Err(fault) => {
            faults.push(fault);
            return None;
        }
    };
    let mut out = BTreeMap::new();
    for (key, value) in entries {
        match value {
            Value::String(s) => {
                out.insert(key, s);
            }
            // Only the key's beginning is shown: a malformed key may be a pasted
            // `Name: secret` line, and the name checks never see this entry.
            other => faults.push(shape(format!(
                "the value of {:?} is {}",
                key.chars()
                    .take_while(|c| !c.is_whitespace() && *c != ':' && *c != '=')
                    .collect::<String>(),
                kind(&other)
            ))),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays() {
        let mut faults = Vec::new();
        assert_eq!(
            string_array("V", r#"["a", "b c", ""]"#, &mut faults).unwrap(),
            ["a", "b c", ""]
        );
        assert_eq!(
            string_array("V", "[]", &mut faults).unwrap(),
            Vec::<String>::new()
        );
        assert!(faults.is_empty());
        let partial = string_array("V", r#"["a", 1, null]"#, &mut faults);
        assert_eq!(partial.unwrap(), ["a"]);
        assert_eq!(faults.len(), 2);
        assert!(faults[0].to_string().contains("element 2 is a number"));
        faults.clear();
        assert_eq!(string_array("V", r#"{"a": "b"}"#, &mut faults), None);
        assert!(faults[0].to_string().contains("it is an object"));
    }

    #[test]
    fn maps() {
        let mut faults = Vec::new();
        let map = string_map("V", r#"{"A": "1", "B": ""}"#, &mut faults).unwrap();
        assert_eq!(map.len(), 2);
        let partial = string_map("V", r#"{"A": 1, "B": ["x"], "C": "c"}"#, &mut faults);
        assert_eq!(partial.unwrap().len(), 1);
        assert_eq!(faults.len(), 2);
    }

    #[test]
    fn faults_quote_no_value() {
        let mut faults = Vec::new();
        string_map("PLURNK_MCP_X_ENV", r#"{"A": "hunter2""#, &mut faults);
        let text = faults[0].to_string();
        assert!(
            text.starts_with("PLURNK_MCP_X_ENV is not valid JSON"),
            "{text}"
        );
        string_array("V", "hunter2", &mut faults);
        string_map("V", r#""hunter2""#, &mut faults);
        string_map("V", r#"{"Authorization: hunter2": 1}"#, &mut faults);
        string_map("V", r#"{"Authorization=hunter2": 1}"#, &mut faults);
        string_array("V", r#"[{"hunter2": "hunter2"}]"#, &mut faults);
        assert_eq!(faults.len(), 6);
        for fault in &faults {
            assert!(!fault.to_string().contains("hunter2"), "{fault}");
        }
    }
}
