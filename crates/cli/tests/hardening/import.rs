//! `import` and `add`: a client's file names the servers, never the operator's variables,
//! and what is kept holds no credential of any shape.

use std::collections::BTreeMap;

use serde_json::json;

use crate::{HttpFixture, run, scratch, scratch_state, text};

/// The bearer the file's `github` entry carries, which its server requires.
const FILES_TOKEN: &str = "files-bearer-T0ken-4f1e";
/// The operator's own `GITHUB_TOKEN`, which no server of the file may be handed.
const OPERATORS_TOKEN: &str = "operators-real-T0ken-9a2b";

#[test]
fn an_imported_literal_never_takes_the_name_of_the_operators_variable() {
    let web = HttpFixture::start(&["--bearer", FILES_TOKEN]);
    let dir = scratch("import-names");
    let file = dir.join("claude_desktop_config.json");
    let entries = json!({"mcpServers": {"github": {
        "url": web.url,
        "headers": {"Authorization": format!("Bearer {FILES_TOKEN}")}
    }}});
    std::fs::write(&file, entries.to_string()).expect("the file");
    let file = file.display().to_string();
    let state = scratch_state("import-names-state");
    // The operator hands GITHUB_TOKEN to workspaces, for servers of their own.
    let mut vars: BTreeMap<String, String> = [
        ("PLURNK_MCP_ALLOW_ADD", "true"),
        (
            "PLURNK_MCP_WORKSPACE_ENV",
            r#"["GITHUB_TOKEN", "GITHUB_TOKEN_2"]"#,
        ),
        ("GITHUB_TOKEN", OPERATORS_TOKEN),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    let planned = run(&["--state", &state, "import", &file, "--dry-run"], &vars);
    let plan = text(&planned.stdout);
    assert!(
        plan.lines()
            .any(|line| line.starts_with("github") && line.contains("${GITHUB_TOKEN_2}")),
        "the moved bearer takes a fresh name: {plan}"
    );
    assert!(
        plan.lines().any(|line| line.starts_with("GITHUB_TOKEN_2")
            && line.contains("moved out of github's header Authorization")),
        "the plan names the variable to set and where its value was: {plan}"
    );
    assert!(
        !plan.contains(FILES_TOKEN) && !plan.contains(OPERATORS_TOKEN),
        "{plan}"
    );
    // The operator sets the name the plan gave, to the file's value, and imports: the server
    // gets the file's token, never the operator's (it would refuse that with 401).
    vars.insert("GITHUB_TOKEN_2".into(), FILES_TOKEN.into());
    let imported = run(&["--state", &state, "import", &file], &vars);
    assert!(
        imported.status.success(),
        "{}{}",
        text(&imported.stdout),
        text(&imported.stderr)
    );
    let stored = std::fs::read(&state).expect("the state file");
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains("${GITHUB_TOKEN_2}"), "stored as planned");
    assert!(!stored.contains(FILES_TOKEN) && !stored.contains(OPERATORS_TOKEN));
}

#[test]
fn add_keeps_no_session_access_key_or_webhook_url_written_literally() {
    let web = HttpFixture::start(&[]);
    let state = scratch_state("add-literals");
    let vars: BTreeMap<String, String> = [("PLURNK_MCP_ALLOW_ADD", "true")]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    const HEX: &str = "3f9a0c4e1b7d2a6f8e5c9b0d4a1f7e3c2b6d8a90";
    const HOOK: &str =
        "https://hooks.slack.com/services/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";
    const SESSION: &str = "s3ssion-V4lue-77";
    let options = json!({"headers": {"X-Access": HEX, "X-Session": SESSION}}).to_string();
    let added = run(
        &[
            "--state",
            &state,
            "add",
            "web",
            &web.url,
            "--options",
            &options,
        ],
        &vars,
    );
    let said = text(&added.stderr);
    assert_eq!(
        added.status.code(),
        Some(2),
        "{said}{}",
        text(&added.stdout)
    );
    assert!(
        said.contains("400 literal-credential")
            && said.contains("headers.\"X-Access\"")
            && said.contains("headers.\"X-Session\""),
        "{said}"
    );
    let options = json!({"args": ["fixture", "--name", "s"],
                         "env": {"SESSION": SESSION, "NOTIFY_URL": HOOK}})
    .to_string();
    let added = run(
        &[
            "--state",
            &state,
            "add",
            "s",
            crate::env::EXE,
            "--options",
            &options,
        ],
        &vars,
    );
    let said = text(&added.stderr);
    assert_eq!(
        added.status.code(),
        Some(2),
        "{said}{}",
        text(&added.stdout)
    );
    assert!(
        said.contains("env.\"SESSION\"") && said.contains("env.\"NOTIFY_URL\" (a webhook URL"),
        "{said}"
    );
    for value in [HEX, HOOK, SESSION] {
        assert!(!said.contains(value), "{said}");
    }
    let stored = std::fs::read(&state).unwrap_or_default();
    let stored = String::from_utf8_lossy(&stored);
    for value in [HEX, HOOK, SESSION] {
        assert!(!stored.contains(value), "{value} was stored");
    }
}
