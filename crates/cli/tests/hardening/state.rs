//! Where workspace state lives, as the command line is given it: a password in `--state` is
//! in every local user's process list.

use std::collections::BTreeMap;

use crate::{run, text};

#[test]
fn a_password_in_state_is_warned_of_and_never_shown() {
    const PASSWORD: &str = "argv-Pa55word-9c1";
    // Nothing listens on port 1: the command fails after the warning, as it should.
    let url = format!("postgres://app:{PASSWORD}@127.0.0.1:1/mcp");
    let none = BTreeMap::new();
    let flagged = run(&["--state", &url, "list"], &none);
    let said = text(&flagged.stderr);
    assert!(
        said.contains("warning: --state carries the database's password")
            && said.contains("PLURNK_MCP_STATE")
            && said.contains("~/.pgpass"),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "{said}");
    // As a parameter too.
    let flagged = run(
        &[
            "--state",
            &format!("postgres://app@127.0.0.1:1/mcp?password={PASSWORD}"),
            "list",
        ],
        &none,
    );
    assert!(text(&flagged.stderr).contains("warning: --state carries"));
    // Through the environment, or without a password: nothing to warn of.
    let from_env: BTreeMap<String, String> = [("PLURNK_MCP_STATE".to_owned(), url.clone())]
        .into_iter()
        .collect();
    let quiet = run(&["list"], &from_env);
    assert!(
        !text(&quiet.stderr).contains("warning"),
        "{}",
        text(&quiet.stderr)
    );
    let quiet = run(
        &["--state", "postgres://app@127.0.0.1:1/mcp", "list"],
        &none,
    );
    assert!(
        !text(&quiet.stderr).contains("warning"),
        "{}",
        text(&quiet.stderr)
    );
}
