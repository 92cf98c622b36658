//! Entry names folded to the host's alias rule, and the variable names derived for moved
//! secrets.

use std::collections::BTreeMap;

use super::NotCarried;
use crate::config::{is_valid_alias, shorten};

/// Each name's alias, or why it has none: unfoldable, or shared with another name.
pub(super) fn fold_all<'a>(
    names: impl Iterator<Item = &'a str>,
) -> BTreeMap<&'a str, Result<String, NotCarried>> {
    let folded: Vec<(&str, Option<String>)> = names.map(|name| (name, fold(name))).collect();
    let mut by_alias: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, alias) in &folded {
        if let Some(alias) = alias {
            by_alias.entry(alias).or_default().push(name);
        }
    }
    folded
        .iter()
        .map(|(name, alias)| {
            let result = match alias {
                None => Err(NotCarried::Unfoldable),
                Some(alias) => {
                    let others: Vec<&&str> = by_alias[alias.as_str()]
                        .iter()
                        .filter(|other| *other != name)
                        .collect();
                    if others.is_empty() {
                        Ok(alias.clone())
                    } else {
                        Err(NotCarried::Collision {
                            alias: alias.clone(),
                            others: some_of(&others),
                        })
                    }
                }
            };
            (*name, result)
        })
        .collect()
}

/// How many other names a collision names; the rest are counted. Thousands of names folding
/// to one alias would otherwise make each of their reasons list all the others.
const NAMED_OTHERS: usize = 3;

/// `"a", "b", "c" and 7 more`, each name cut to the quoting bound.
fn some_of(names: &[&&str]) -> String {
    let mut shown: Vec<String> = names
        .iter()
        .take(NAMED_OTHERS)
        .map(|name| format!("{:?}", shorten(name)))
        .collect();
    if names.len() > NAMED_OTHERS {
        shown.push(format!("{} more", names.len() - NAMED_OTHERS));
    }
    match shown.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => shown.join(""),
    }
}

/// A client's server name folded to the host's alias rule, if it can be.
pub(super) fn fold(name: &str) -> Option<String> {
    let mut alias = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            c if c.is_ascii_alphanumeric() => alias.push(c.to_ascii_lowercase()),
            '-' | '_' | '.' | ' ' | '/' | ':' | '@' => {
                if !alias.is_empty() && !alias.ends_with('-') {
                    alias.push('-');
                }
            }
            _ => return None,
        }
    }
    while alias.ends_with('-') {
        alias.pop();
    }
    is_valid_alias(&alias).then_some(alias)
}

/// `web` → `WEB`, `my-server` → `MY_SERVER`; any name → a reference name.
pub(super) fn variable_name(parts: &[&str]) -> String {
    let mut name: String = parts
        .iter()
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("_");
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}
