//! `PLURNK_MCP_INHERIT_ENV`: the operator's names of the variables every child process (a stdio
//! server, a source's program or script) inherits beyond the default few.
//!
//! A child starts from a small default of the daemon's environment (`protocol/stdio.rs` says
//! which and why) and what its own definition declares; nothing else reaches it unless named
//! here. The values come from the same variables `${NAME}` references resolve against.

use std::collections::BTreeSet;

use super::error::ConfigError;
use super::json;
use super::keys::PREFIX;
use super::target::invalid_env_name;

/// The names `raw` (the value of `variable`) lists: every fault at once, each entry that is
/// not a name a child could be given left out.
pub(crate) fn read(variable: &str, raw: &str, faults: &mut Vec<ConfigError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let listed = json::string_array(variable, raw, faults).unwrap_or_default();
    for (index, name) in listed.into_iter().enumerate() {
        let variable = variable.to_owned();
        if name.is_empty() {
            faults.push(ConfigError::EmptyEntry {
                variable,
                position: index + 1,
            });
        } else if let Some(shown) = invalid_env_name(&name) {
            faults.push(ConfigError::InvalidEnvName { variable, shown });
        } else if name.starts_with(PREFIX) {
            faults.push(ConfigError::InheritsHostSetting {
                variable,
                entry: name,
            });
        } else if names.contains(&name) {
            faults.push(ConfigError::DuplicateEntry {
                variable,
                entry: name,
            });
        } else {
            names.insert(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::super::HostConfig;

    const VARIABLE: &str = "PLURNK_MCP_INHERIT_ENV";

    #[test]
    fn the_names_are_read_and_every_fault_is_its_own_error() {
        let config = HostConfig::from_env([
            (VARIABLE, r#"["SSL_CERT_FILE", "HTTPS_PROXY"]"#),
            ("HTTPS_PROXY", "http://proxy.test:3128"),
        ])
        .expect("valid");
        assert_eq!(
            config.inherit_env().iter().collect::<Vec<_>>(),
            ["HTTPS_PROXY", "SSL_CERT_FILE"]
        );
        // Only the listed names the environment sets, with their values.
        assert_eq!(
            config.inherited().collect::<Vec<_>>(),
            [("HTTPS_PROXY", "http://proxy.test:3128")]
        );

        let errors = HostConfig::from_env([(
            VARIABLE,
            r#"["", "A=B", "PLURNK_MCP_GITHUB_BEARER", "HOME", "HOME", 7]"#,
        )])
        .expect_err("faults");
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "PLURNK_MCP_INHERIT_ENV must be a JSON array of strings, such as [\"a\", \"b\"], \
                 but element 6 is a number: fix the value",
                "PLURNK_MCP_INHERIT_ENV has an empty name at position 1: remove it or give the \
                 name",
                "PLURNK_MCP_INHERIT_ENV has an entry named \"A\" that cannot be an environment \
                 variable name: use a non-empty name without = or NUL",
                "PLURNK_MCP_INHERIT_ENV names \"PLURNK_MCP_GITHUB_BEARER\", one of the host's own \
                 settings, which describe every server and may hold their credentials: remove it \
                 (a server gets what its own definition declares)",
                "PLURNK_MCP_INHERIT_ENV names \"HOME\" more than once: list it once",
            ]
        );
        // Reserved like every host setting: no server can be named by it.
        let errors = HostConfig::from_env([(format!("{VARIABLE}_ARGS"), "[]")])
            .expect_err("a reserved name");
        assert!(
            errors
                .to_string()
                .contains("reserved for a global PLURNK_MCP_ setting"),
            "{errors}"
        );
    }
}
