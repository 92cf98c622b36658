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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_entry_is_let_go_once_checked_and_stays_enabled() {
    use crate::processes::marked;
    use plurnk_mcp_fixture::probe::Probe;
    const ENTRIES: usize = 3;
    let probe = Probe::start().await;
    let mark = format!("import-release-{}", std::process::id());
    // Each entry a fixture held listing until the test releases it, marked by a variable the
    // operator hands over (a reference, carried as written).
    let servers: serde_json::Map<String, serde_json::Value> = (0..ENTRIES)
        .map(|n| {
            let args = json!([
                "fixture",
                "--name",
                format!("s{n}"),
                "--probe",
                probe.address(),
                "--hold-lists"
            ]);
            let env = json!({"TEST_MARK": format!("${{MARK_{n}}}")});
            (
                format!("s{n}"),
                json!({"command": crate::env::EXE, "args": args, "env": env}),
            )
        })
        .collect();
    let dir = scratch("import-release");
    let file = dir.join("claude_desktop_config.json");
    std::fs::write(&file, json!({"mcpServers": servers}).to_string()).expect("the file");
    let state = dir.join("state.sqlite").display().to_string();
    let mut vars: BTreeMap<String, String> = (0..ENTRIES)
        .map(|n| (format!("MARK_{n}"), format!("{mark}-s{n}")))
        .collect();
    let names: Vec<String> = (0..ENTRIES).map(|n| format!("MARK_{n}")).collect();
    vars.insert("PLURNK_MCP_WORKSPACE_ENV".into(), json!(names).to_string());
    vars.insert("PLURNK_MCP_ALLOW_ADD".into(), "true".into());
    let importing = {
        let (file, state, vars) = (file.display().to_string(), state.clone(), vars.clone());
        tokio::task::spawn_blocking(move || {
            run(
                &["--state", &state, "import", &file, "--concurrency", "1"],
                &vars,
            )
        })
    };
    let listed = |events: &[plurnk_mcp_fixture::probe::Event]| {
        events.iter().filter(|e| e.event == "tools/list").count()
    };
    for n in 0..ENTRIES {
        assert!(
            probe
                .until(std::time::Duration::from_secs(20), |events| listed(events)
                    > n)
                .await,
            "entry {n} never listed: {:?}",
            probe.count("tools/list")
        );
        // While entry n is held listing, every entry before it was checked and let go: its
        // process is gone, not kept until the import ends.
        for before in 0..n {
            let gone = crate::wait::until_async(crate::wait::BOUND, || {
                let prefix = format!("{mark}-s{before}");
                async move { marked(&prefix).is_empty() }
            })
            .await;
            assert!(gone, "s{before} still runs while s{n} is checked");
        }
        probe.release_all().await;
    }
    let output = importing.await.expect("the import ran");
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    // Every entry stays enabled: the next command connects each (held listing, then let go).
    vars.remove("PLURNK_MCP_ALLOW_ADD");
    let listing = {
        let (state, vars) = (state.clone(), vars.clone());
        tokio::task::spawn_blocking(move || run(&["--state", &state, "list", "--json"], &vars))
    };
    for _ in 0..ENTRIES {
        if listing.is_finished() {
            break;
        }
        let _ = probe
            .until(std::time::Duration::from_secs(5), |events| {
                listed(events) > ENTRIES
            })
            .await;
        probe.release_all().await;
    }
    let listed_out = listing.await.expect("list ran");
    let said = text(&listed_out.stdout);
    for n in 0..ENTRIES {
        assert!(said.contains(&format!("\"s{n}\"")), "{said}");
    }
    assert!(!said.contains("\"enabled\": false"), "{said}");
    assert_eq!(said.matches("\"enabled\": true").count(), ENTRIES, "{said}");
}
