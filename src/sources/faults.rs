//! Reading a source's declaration with every fault at once, each naming the field and the
//! fix: the checks the CLI and script declarations share (names, a command, the
//! environment, the working directory, the bounds, the version), and the bounds a
//! declaration may ask for.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::DeclarationError;

/// How long a call may run unless the declaration says otherwise.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How much a call may write (stdout and stderr together) unless the declaration says
/// otherwise.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 20;
/// The longest `timeoutMs` a declaration may ask for: one hour.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// The largest `maxOutputBytes` a declaration may ask for: 256 MiB.
pub const MAX_OUTPUT_CEILING: usize = 256 << 20;

/// The faults found in one declaration so far; shared by the declaration readers.
pub(crate) struct Faults {
    origin: String,
    errors: Vec<DeclarationError>,
}

/// `path.key`, or `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Faults {
    pub(crate) fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_owned(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn add(
        &mut self,
        field: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let field = field.into();
        let field = if field.is_empty() {
            "(the declaration)".to_owned()
        } else {
            field
        };
        self.errors
            .push(DeclarationError::new(&self.origin, field, problem, fix));
    }

    pub(crate) fn into_errors(self) -> Vec<DeclarationError> {
        self.errors
    }

    /// `value` when nothing was wrong.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Vec<DeclarationError>> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self.errors)
        }
    }

    /// `value` as an object with only `known` fields (each other field is a fault).
    pub(crate) fn object<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        known: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(object) = value.as_object() else {
            self.add(path, "is not an object", "write a JSON object");
            return None;
        };
        for key in object.keys() {
            if !known.contains(&key.as_str()) {
                self.add(
                    join(path, key),
                    "is not a field of this declaration",
                    format!("remove it, or use one of: {}", known.join(", ")),
                );
            }
        }
        Some(object)
    }

    /// The field `key` of `object` as a `T`, if present and of the right shape.
    pub(crate) fn take<T: DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        expected: &str,
    ) -> Option<T> {
        let value = object.get(key)?;
        match T::deserialize(value) {
            Ok(value) => Some(value),
            Err(_) => {
                self.add(
                    join(path, key),
                    format!("is not {expected}"),
                    format!("write {expected}"),
                );
                None
            }
        }
    }

    /// Like [`Faults::take`], and a fault when the field is absent.
    pub(crate) fn required<T: DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        expected: &str,
    ) -> Option<T> {
        if !object.contains_key(key) {
            self.add(join(path, key), "is missing", format!("write {expected}"));
            return None;
        }
        self.take(object, path, key, expected)
    }

    pub(crate) fn strings(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Vec<String> {
        let strings: Vec<String> = self
            .take(object, path, key, "an array of strings")
            .unwrap_or_default();
        if strings.iter().any(|s| s.contains('\0')) {
            self.add(
                join(path, key),
                "holds a NUL character, which no argument can carry",
                "remove the NUL",
            );
        }
        strings
    }

    /// A source's name: the namespace of its tools.
    pub(crate) fn source_name(&mut self, field: &str, name: &str) {
        let mut chars = name.chars();
        let shaped = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && name.len() <= 64;
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a source name"),
                "use lower-case letters, digits and '-', starting with a letter, at most 64 \
                 characters, such as \"git\"",
            );
        }
    }

    pub(crate) fn tool_name(&mut self, field: &str, name: &str) {
        let shaped = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a tool name"),
                "use 1 to 64 letters, digits, '_', '.' and '-', such as \"log\"",
            );
        }
    }

    pub(crate) fn param_name(&mut self, field: &str, name: &str) {
        let mut chars = name.chars();
        let shaped = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            && name.len() <= 64;
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a parameter name"),
                "use letters, digits, '_' and '-', starting with a letter, such as \"maxCount\"",
            );
        }
    }

    /// A program to run: absolute, or a bare name found on `PATH`.
    pub(crate) fn command(&mut self, field: &str, command: &str) {
        if command.is_empty() || command.contains('\0') {
            self.add(
                field,
                "is empty or holds a NUL",
                "name one executable, such as \"git\" or \"/usr/bin/git\"",
            );
        } else if command.contains('/') && !command.starts_with('/') {
            self.add(
                field,
                format!("\"{command}\" is a relative path"),
                "write an absolute path, or a bare name looked up on PATH",
            );
        } else if command.chars().any(char::is_whitespace) && !command.starts_with('/') {
            self.add(
                field,
                format!("\"{command}\" is more than one word"),
                "name only the executable here and put its arguments in \"args\": no shell \
                 splits this",
            );
        }
    }

    pub(crate) fn env(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> BTreeMap<String, String> {
        let env: BTreeMap<String, String> = self
            .take(object, path, "env", "an object of strings")
            .unwrap_or_default();
        for (name, value) in &env {
            let mut chars = name.chars();
            let shaped = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !shaped {
                self.add(
                    format!("{}.{name}", join(path, "env")),
                    format!("\"{name}\" is not an environment variable name"),
                    "use letters, digits and '_', not starting with a digit",
                );
            }
            if value.contains('\0') {
                self.add(
                    format!("{}.{name}", join(path, "env")),
                    "holds a NUL character",
                    "remove the NUL",
                );
            }
        }
        env
    }

    /// `sandbox`: a sandbox policy, each of its faults named `sandbox.<member>`.
    pub(crate) fn sandbox(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Option<crate::config::SandboxPolicy> {
        let value = object.get("sandbox")?;
        let field = join(path, "sandbox");
        let mut found = Vec::new();
        let policy = crate::config::SandboxPolicy::from_value(&field, value, &mut found);
        for fault in found {
            match fault {
                crate::config::ConfigError::InvalidSandbox {
                    variable,
                    problem,
                    fix,
                } => self.add(variable, problem, fix),
                other => self.add(
                    other.variable().to_owned(),
                    other.to_string(),
                    "write the policy as the README's Sandbox section shows",
                ),
            }
        }
        policy
    }

    pub(crate) fn cwd(&mut self, object: &Map<String, Value>, path: &str) -> Option<PathBuf> {
        let cwd: PathBuf = self.take(object, path, "cwd", "a string")?;
        if !cwd.is_absolute() {
            self.add(
                join(path, "cwd"),
                format!("\"{}\" is a relative path", cwd.display()),
                "write an absolute directory",
            );
        }
        Some(cwd)
    }

    pub(crate) fn timeout(&mut self, object: &Map<String, Value>, path: &str) -> Option<u64> {
        let expected = format!("a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}");
        let timeout: u64 = self.take(object, path, "timeoutMs", &expected)?;
        if timeout == 0 || timeout > MAX_TIMEOUT_MS {
            self.add(
                join(path, "timeoutMs"),
                format!("{timeout} is out of range"),
                format!("write {expected}"),
            );
            return None;
        }
        Some(timeout)
    }

    pub(crate) fn max_output(&mut self, object: &Map<String, Value>, path: &str) -> Option<usize> {
        let expected = format!("a whole number of bytes from 1 to {MAX_OUTPUT_CEILING}");
        let bound: usize = self.take(object, path, "maxOutputBytes", &expected)?;
        if bound == 0 || bound > MAX_OUTPUT_CEILING {
            self.add(
                join(path, "maxOutputBytes"),
                format!("{bound} is out of range"),
                format!("write {expected}"),
            );
            return None;
        }
        Some(bound)
    }

    pub(crate) fn version(&mut self, object: &Map<String, Value>, path: &str) -> Option<String> {
        let version: String = self.take(object, path, "version", "a string")?;
        if version.trim().is_empty() {
            self.add(
                join(path, "version"),
                "is empty",
                "write the trimmed --version output, or drop \"version\"",
            );
        }
        Some(version)
    }
}
