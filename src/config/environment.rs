//! The reference environment and `${NAME}` expansion.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::error::ConfigError;

/// The variables `${NAME}` references resolve against: the complete map that
/// [`HostConfig::from_env`](super::HostConfig::from_env) was given, our own
/// `PLURNK_MCP_` variables included.
///
/// It holds secrets, so `Debug` prints only how many variables there are and no
/// method hands a value out except through [`expand`](Self::expand).
///
/// # Expansion rules
///
/// - `${NAME}` is replaced by the value of `NAME`, where `NAME` matches
///   `[A-Za-z_][A-Za-z0-9_]*`. A name the environment does not hold is a fault,
///   never an empty string.
/// - A `$` not followed by `{` is literal, so `$HOME`, `$$` and a trailing `$`
///   stay as written. There is no escape: `$${A}` is a literal `$` followed by the
///   value of `A`, and a literal `${` cannot be written directly (put it in a
///   variable and refer to that).
/// - `${` without a closing `}` is a fault, and so is `${...}` around anything that
///   is not a name (`${}`, `${1A}`, `${A-B}`, `${A:-default}`).
/// - Expansion is a single pass: a value brought in by `${NAME}` is not expanded again.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

/// One piece of a string that may hold references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Literal(&'a str),
    Reference(&'a str),
}

/// Why a string's references cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReferenceFault {
    Unterminated,
    InvalidName,
}

impl ReferenceFault {
    pub(crate) fn into_error(self, variable: &str) -> ConfigError {
        let variable = variable.to_owned();
        match self {
            Self::Unterminated => ConfigError::UnterminatedReference { variable },
            Self::InvalidName => ConfigError::InvalidReference { variable },
        }
    }
}

/// Splits `s` into literal text and `${NAME}` references.
pub(crate) fn pieces(s: &str) -> Result<Vec<Piece<'_>>, ReferenceFault> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Piece::Literal(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ReferenceFault::Unterminated)?;
        let name = &after[..end];
        if !is_reference_name(name) {
            return Err(ReferenceFault::InvalidName);
        }
        out.push(Piece::Reference(name));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest));
    }
    Ok(out)
}

/// Whether `s` is exactly one `${NAME}` reference and nothing else.
pub(crate) fn is_single_reference(s: &str) -> bool {
    matches!(pieces(s).as_deref(), Ok([Piece::Reference(_)]))
}

/// Whether `name` can be the NAME of a `${NAME}` reference: a letter or `_`, then letters,
/// digits and `_`.
pub(crate) fn is_reference_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Environment {
    /// Takes a copy of `vars`. Of repeated keys the last wins.
    pub fn new<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// How many variables it holds.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether it holds no variables.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// Whether `name` is set (to anything, the empty string included).
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// Expands every `${NAME}` in `s` (see the type's rules). Faults name the
    /// setting only as "the value"; use [`expand_setting`](Self::expand_setting)
    /// to name it.
    ///
    /// # Errors
    ///
    /// A malformed reference, or a name this environment does not hold.
    pub fn expand(&self, s: &str) -> Result<String, ConfigError> {
        self.expand_setting("the value", s)
    }

    /// Expands every `${NAME}` in `s`; a fault names `variable` as the setting
    /// that held `s`.
    ///
    /// # Errors
    ///
    /// A malformed reference, or a name this environment does not hold.
    pub fn expand_setting(&self, variable: &str, s: &str) -> Result<String, ConfigError> {
        let pieces = pieces(s).map_err(|fault| fault.into_error(variable))?;
        let mut out = String::with_capacity(s.len());
        for piece in pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Reference(name) => match self.vars.get(name) {
                    Some(value) => out.push_str(value),
                    None => {
                        return Err(ConfigError::MissingReference {
                            variable: variable.to_owned(),
                            name: name.to_owned(),
                        });
                    }
                },
            }
        }
        Ok(out)
    }

    /// Every fault in `s`'s references without expanding it: a syntax fault, or
    /// one fault per distinct missing name. With no environment only syntax is
    /// checked.
    pub(crate) fn check(env: Option<&Self>, variable: &str, s: &str) -> Vec<ConfigError> {
        let pieces = match pieces(s) {
            Ok(pieces) => pieces,
            Err(fault) => return vec![fault.into_error(variable)],
        };
        let Some(env) = env else {
            return Vec::new();
        };
        let missing: BTreeSet<&str> = pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Reference(name) if !env.contains(name) => Some(*name),
                _ => None,
            })
            .collect();
        missing
            .into_iter()
            .map(|name| ConfigError::MissingReference {
                variable: variable.to_owned(),
                name: name.to_owned(),
            })
            .collect()
    }

    /// The variables, for reading our own namespace out of the map.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The part of this environment that holds only `names`: what a definition a workspace
    /// added may expand.
    pub fn only(&self, names: &BTreeSet<String>) -> Self {
        Self {
            vars: self
                .vars
                .iter()
                .filter(|(name, _)| names.contains(*name))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        }
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Environment {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self::new(iter)
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Environment(<{} variables>)", self.vars.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment::new([("TOKEN", "s3cr3t"), ("EMPTY", ""), ("A_1", "x")])
    }

    #[test]
    fn expands_references() {
        let env = env();
        assert_eq!(env.expand("Bearer ${TOKEN}").unwrap(), "Bearer s3cr3t");
        assert_eq!(env.expand("${A_1}${A_1}-${EMPTY}.").unwrap(), "xx-.");
        assert_eq!(env.expand("plain").unwrap(), "plain");
        assert_eq!(env.expand("").unwrap(), "");
    }

    #[test]
    fn lone_dollars_stay_literal() {
        let env = env();
        assert_eq!(env.expand("$HOME $$ a$ $").unwrap(), "$HOME $$ a$ $");
        assert_eq!(env.expand("$${A_1}").unwrap(), "$x");
        assert_eq!(env.expand("{TOKEN}").unwrap(), "{TOKEN}");
    }

    #[test]
    fn expansion_is_single_pass() {
        let env = Environment::new([("OUTER", "${INNER}"), ("INNER", "no")]);
        assert_eq!(env.expand("${OUTER}").unwrap(), "${INNER}");
    }

    #[test]
    fn missing_reference_is_a_fault_naming_both() {
        let err = env()
            .expand_setting("PLURNK_MCP_X_BEARER", "${NOPE}")
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingReference {
                variable: "PLURNK_MCP_X_BEARER".into(),
                name: "NOPE".into()
            }
        );
        let text = err.to_string();
        assert!(text.contains("PLURNK_MCP_X_BEARER") && text.contains("${NOPE}"));
    }

    #[test]
    fn malformed_references_are_faults() {
        let env = env();
        for s in ["${TOKEN", "a ${", "${A_1}${"] {
            assert!(
                matches!(
                    env.expand(s),
                    Err(ConfigError::UnterminatedReference { .. })
                ),
                "{s}"
            );
        }
        for s in ["${}", "${1A}", "${A-B}", "${A:-x}", "${ TOKEN}"] {
            assert!(
                matches!(env.expand(s), Err(ConfigError::InvalidReference { .. })),
                "{s}"
            );
        }
    }

    #[test]
    fn check_reports_each_missing_name_once() {
        let faults = Environment::check(Some(&env()), "V", "${X}${Y}${X}${TOKEN}");
        let names: Vec<_> = faults
            .iter()
            .map(|f| match f {
                ConfigError::MissingReference { name, .. } => name.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(names, ["X", "Y"]);
        assert!(Environment::check(None, "V", "${X}").is_empty());
        assert_eq!(Environment::check(None, "V", "${X").len(), 1);
    }

    #[test]
    fn single_reference() {
        assert!(is_single_reference("${TOKEN}"));
        assert!(!is_single_reference("Bearer ${TOKEN}"));
        assert!(!is_single_reference("${A}${B}"));
        assert!(!is_single_reference("literal"));
    }

    #[test]
    fn debug_shows_no_values() {
        let text = format!("{:?}", env());
        assert_eq!(text, "Environment(<3 variables>)");
    }
}
