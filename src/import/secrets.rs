//! Literal secrets moved out of an entry into `${NAME}` references, and the references it
//! already writes carried over.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::names::variable_name;
use super::{Introduced, NotCarried};
use crate::config::{Environment, LiteralKind, credential_flag, literals_in, shorten};

/// The literal values moved out of the file so far, by the variable that holds each, the
/// names the file refers to itself (which hold values of their own), and the operator's
/// environment (whose variables hold theirs).
pub(super) struct Moved {
    values: BTreeMap<String, String>,
    referred: BTreeSet<String>,
    environment: Environment,
}

impl Moved {
    /// Nothing moved yet; `document`'s own references are taken, and so is every variable of
    /// `environment` that holds another value.
    pub(super) fn new(document: &Value, environment: &Environment) -> Self {
        let mut referred = BTreeSet::new();
        referred_names(document, None, &mut referred);
        Self {
            values: BTreeMap::new(),
            referred,
            environment: environment.clone(),
        }
    }

    /// The variable that will hold `value`: `preferred`, unless the file refers to that name
    /// itself, another entry already moved a different value there, or the operator's
    /// environment holds it with another value (an entry named `github` would otherwise be
    /// handed the operator's own `GITHUB_TOKEN`); then `<ALIAS>_<preferred>` (numbered if
    /// that is taken too). A variable the environment holds with this very value is this
    /// value's: the operator set it for the entry, after a plan named it.
    pub(super) fn variable(&mut self, preferred: String, alias: &str, value: &str) -> String {
        let prefix = variable_name(&[alias]);
        let prefixed = if preferred.starts_with(&format!("{prefix}_")) {
            preferred.clone()
        } else {
            format!("{prefix}_{preferred}")
        };
        let mut candidate = preferred;
        let mut n = 1;
        loop {
            match self.values.get(&candidate) {
                Some(held) if held != value => {}
                Some(_) => return candidate,
                None if self.referred.contains(&candidate) => {}
                None if self
                    .environment
                    .get(&candidate)
                    .is_some_and(|held| held != value) => {}
                None => {
                    self.values.insert(candidate.clone(), value.to_owned());
                    return candidate;
                }
            }
            n += 1;
            candidate = if n == 2 && prefixed != candidate {
                prefixed.clone()
            } else {
                format!("{prefixed}_{n}")
            };
        }
    }
}

/// Every name `value` refers to: `${NAME}` and `${env:NAME}` in any string (`${userHome}` is
/// `HOME`), and the variable names Codex's `env_vars`, `bearer_token_env_var` and
/// `env_http_headers` hold.
fn referred_names(value: &Value, key: Option<&str>, names: &mut BTreeSet<String>) {
    let codex = matches!(
        key,
        Some("env_vars" | "bearer_token_env_var" | "env_http_headers")
    );
    match value {
        Value::String(s) => {
            if codex && is_reference_name(s) {
                names.insert(s.clone());
            }
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                let after = &rest[start + 2..];
                let Some(end) = after.find('}') else {
                    break;
                };
                let inner = &after[..end];
                let name = inner.strip_prefix("env:").unwrap_or(inner);
                if inner == "userHome" {
                    names.insert("HOME".to_owned());
                } else if is_reference_name(name) {
                    names.insert(name.to_owned());
                }
                rest = &after[end + 1..];
            }
        }
        Value::Array(items) => {
            for item in items {
                referred_names(item, key, names);
            }
        }
        Value::Object(fields) => {
            for (field, item) in fields {
                // Below a Codex list of names (`{ name = "X" }`, a header's variable) every
                // name counts.
                referred_names(item, if codex { key } else { Some(field) }, names);
            }
        }
        _ => {}
    }
}

impl fmt::Debug for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.values.keys()).finish()
    }
}

/// Moves the credentials written into one entry's strings out into references.
pub(super) struct Outward<'a> {
    pub(super) alias: &'a str,
    pub(super) moved: &'a mut Moved,
    pub(super) introduced: &'a mut Vec<Introduced>,
}

impl Outward<'_> {
    /// `s` with each credential written into it (a URL's password or credential-named query
    /// value, a token-shaped word) replaced by a reference to the variable `name` gives it.
    pub(super) fn literals_in(
        &mut self,
        s: &str,
        from: &str,
        name: impl Fn(&LiteralKind) -> String,
    ) -> String {
        let mut out = String::with_capacity(s.len());
        let mut copied = 0;
        for literal in literals_in(s) {
            let value = &s[literal.range.clone()];
            let variable = self.moved.variable(name(&literal.kind), self.alias, value);
            self.introduced.push(Introduced {
                variable: variable.clone(),
                from: format!("{from} ({})", literal.kind),
            });
            out.push_str(&s[copied..literal.range.start]);
            out.push_str(&format!("${{{variable}}}"));
            copied = literal.range.end;
        }
        out.push_str(&s[copied..]);
        out
    }

    /// An argument array with each credential flag's literal value (`--token X`,
    /// `--api-key=X`) and each credential written into an argument moved out; a flag's
    /// value becomes `${<ALIAS>_<FLAG>}`.
    pub(super) fn arguments(&mut self, args: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(args.len());
        // The flag whose value the next argument is: its name and as written.
        let mut value_of: Option<(&str, &str)> = None;
        for (index, arg) in args.iter().enumerate() {
            let from = format!("args[{index}]");
            if let Some(flag) = value_of.take()
                && !arg.starts_with('-')
                && !arg.is_empty()
            {
                out.push(if is_literal(arg) {
                    self.flag_value(flag, arg, &from)
                } else {
                    arg.clone()
                });
                continue;
            }
            if let Some(flag) = credential_flag(arg) {
                match flag.inline {
                    Some(start) if !arg[start..].is_empty() && is_literal(&arg[start..]) => {
                        let written = &arg[..start - 1];
                        let reference = self.flag_value((flag.name, written), &arg[start..], &from);
                        out.push(format!("{}{reference}", &arg[..start]));
                    }
                    Some(_) => out.push(arg.clone()),
                    None => {
                        value_of = Some((flag.name, arg));
                        out.push(arg.clone());
                    }
                }
                continue;
            }
            let alias = self.alias;
            out.push(self.literals_in(arg, &from, |kind| match kind {
                LiteralKind::Password => variable_name(&[alias, "PASSWORD"]),
                LiteralKind::Query(query) => variable_name(&[alias, query]),
                LiteralKind::Token => variable_name(&[alias, "TOKEN"]),
                LiteralKind::Webhook => variable_name(&[alias, "URL"]),
            }));
        }
        out
    }

    /// The reference that replaces the value of a credential flag (its name, and the flag
    /// as written).
    fn flag_value(&mut self, (name, written): (&str, &str), value: &str, from: &str) -> String {
        let variable = self
            .moved
            .variable(variable_name(&[self.alias, name]), self.alias, value);
        self.introduced.push(Introduced {
            variable: variable.clone(),
            from: format!("{from} (the value of {written})"),
        });
        format!("${{{variable}}}")
    }
}

/// Whether `s` holds no `${` at all: a literal, not a reference or a template.
pub(super) fn is_literal(s: &str) -> bool {
    !s.contains("${")
}

/// Editor variables that name no environment variable.
const EDITOR_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "cwd",
    "file",
    "fileBasename",
    "fileDirname",
    "relativeFile",
    "execPath",
    "defaultBuildTask",
    "selectedText",
    "lineNumber",
];

/// Rewrites a client's `${...}` variables into the host's `${NAME}` references.
pub(super) fn references(field: &str, s: &str) -> Result<String, NotCarried> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // Unterminated: left as written for the host's check to name.
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let editor = || NotCarried::EditorVariable {
            field: shorten(field),
            variable: shorten(inner),
        };
        if let Some(id) = inner.strip_prefix("input:") {
            return Err(NotCarried::InputVariable {
                field: shorten(field),
                id: shorten(id),
            });
        } else if let Some(name) = inner.strip_prefix("env:") {
            if !is_reference_name(name) {
                return Err(editor());
            }
            out.push_str(&format!("${{{name}}}"));
        } else if inner == "userHome" {
            out.push_str("${HOME}");
        } else if inner == "/" || inner == "pathSeparator" {
            out.push('/');
        } else if is_reference_name(inner) && !EDITOR_VARIABLES.contains(&inner) {
            out.push_str(&format!("${{{inner}}}"));
        } else {
            return Err(editor());
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

pub(super) use crate::config::is_reference_name;
