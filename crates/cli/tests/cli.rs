//! The `plurnk-mcp` command line as a user runs it: configuration faults, `status`, `tools`,
//! `call`, the demo, and the third-party peers (the Python SDK server and
//! `@modelcontextprotocol/server-everything`), installed by `scripts/install-peers.sh`.

use std::collections::BTreeMap;
use std::process::{Command, Output};

#[path = "support/scrape.rs"]
mod scrape;
use scrape::{http_get, sample};

#[path = "support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "support/env.rs"]
mod env;
#[path = "support/processes.rs"]
mod processes;
#[path = "support/wait.rs"]
mod wait;
use processes::marked;

use serde_json::{Value, json};

use env::{EXE, fixture};

/// A state file of its own for every run that does not name one.
fn scratch_state() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{}-{}.sqlite",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_file(&path);
    path.to_string_lossy().into_owned()
}

/// Runs `plurnk-mcp` with exactly `vars` (plus PATH and HOME), never the caller's env, and
/// with a fresh state file unless `args` name one.
fn run(args: &[&str], vars: &BTreeMap<String, String>) -> Output {
    let mut command = Command::new(EXE);
    command.args(args).env_clear();
    if !args.contains(&"--state") && args.first() != Some(&"demo") {
        command.args(["--state", &scratch_state()]);
    }
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command.envs(vars);
    command.output().expect("plurnk-mcp runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_configuration_fault_has_its_own_error_naming_the_variable() {
    /// What is wrong, the variables that make it so, and what its error must name. Each
    /// case has its own aliases, so that all of them can be set up at once too.
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<&'static str>,
    );
    // A value that must never appear in an error, in any spelling.
    const LEAK: &str = "tok-LEAK-7531";
    let cases: Vec<Case> = vec![
        (
            "duplicate names after case folding",
            vec![
                ("PLURNK_MCP_GitHub", "/bin/a"),
                ("PLURNK_MCP_GITHUB", "/bin/b"),
            ],
            vec!["PLURNK_MCP_GITHUB"],
        ),
        (
            "a command line with no _ARGS",
            vec![("PLURNK_MCP_SPACED", "python3 server.py --port 1")],
            vec![
                "PLURNK_MCP_SPACED",
                "PLURNK_MCP_SPACED_ARGS",
                "\"python3\"",
                "[\"server.py\",\"--port\",\"1\"]",
            ],
        ),
        (
            "a path and its arguments with no _ARGS",
            vec![("PLURNK_MCP_SHELLED", "/bin/sh -c true")],
            vec![
                "PLURNK_MCP_SHELLED_ARGS",
                "\"/bin/sh\"",
                "[\"-c\",\"true\"]",
            ],
        ),
        (
            "reserved name",
            vec![("PLURNK_MCP_ENABLED_ARGS", "[]")],
            vec!["PLURNK_MCP_ENABLED_ARGS"],
        ),
        (
            "invalid alias",
            vec![("PLURNK_MCP_9LIVES", "/bin/a")],
            vec!["PLURNK_MCP_9LIVES"],
        ),
        (
            "orphan companion",
            vec![("PLURNK_MCP_GHOST_ARGS", "[]")],
            vec!["PLURNK_MCP_GHOST_ARGS"],
        ),
        (
            "stdio companion on an http server",
            vec![
                ("PLURNK_MCP_WEB", "https://example.test/mcp"),
                ("PLURNK_MCP_WEB_ARGS", "[]"),
            ],
            vec!["PLURNK_MCP_WEB_ARGS"],
        ),
        (
            "http companion on a stdio server",
            vec![
                ("PLURNK_MCP_LOCAL", "/bin/a"),
                ("PLURNK_MCP_LOCAL_BEARER", LEAK),
            ],
            vec!["PLURNK_MCP_LOCAL_BEARER"],
        ),
        (
            "invalid JSON",
            vec![
                ("PLURNK_MCP_PARSE", "/bin/a"),
                ("PLURNK_MCP_PARSE_ARGS", "[oops"),
            ],
            vec!["PLURNK_MCP_PARSE_ARGS"],
        ),
        (
            "wrong JSON shape",
            vec![
                ("PLURNK_MCP_SHAPE", "/bin/a"),
                ("PLURNK_MCP_SHAPE_ENV", "[\"a\"]"),
            ],
            vec!["PLURNK_MCP_SHAPE_ENV"],
        ),
        (
            "missing ${NAME} reference",
            vec![
                ("PLURNK_MCP_REMOTE", "https://example.test/mcp"),
                ("PLURNK_MCP_REMOTE_BEARER", "${NOT_SET_ANYWHERE}"),
            ],
            vec!["PLURNK_MCP_REMOTE_BEARER", "NOT_SET_ANYWHERE"],
        ),
        (
            "bearer together with an Authorization header",
            vec![
                ("PLURNK_MCP_BOTH", "https://example.test/mcp"),
                ("PLURNK_MCP_BOTH_BEARER", LEAK),
                (
                    "PLURNK_MCP_BOTH_HEADERS",
                    "{\"authorization\":\"Basic tok-LEAK-7531\"}",
                ),
            ],
            vec!["PLURNK_MCP_BOTH_HEADERS"],
        ),
        (
            "_READ outside _TOOLS",
            vec![
                ("PLURNK_MCP_POLICY", "/bin/a"),
                ("PLURNK_MCP_POLICY_TOOLS", "[\"get\"]"),
                ("PLURNK_MCP_POLICY_READ", "[\"push\"]"),
            ],
            vec!["PLURNK_MCP_POLICY_READ", "\"push\""],
        ),
        (
            "zero timeout",
            vec![("PLURNK_MCP_CONNECT_TIMEOUT", "0")],
            vec!["PLURNK_MCP_CONNECT_TIMEOUT"],
        ),
        (
            "negative timeout",
            vec![("PLURNK_MCP_REQUEST_TIMEOUT", "-5")],
            vec!["PLURNK_MCP_REQUEST_TIMEOUT"],
        ),
        (
            "ENABLED naming an unknown server",
            vec![("PLURNK_MCP_ENABLED", "[\"nobody\"]")],
            vec!["PLURNK_MCP_ENABLED", "\"nobody\""],
        ),
    ];
    let leaks = |text: &str| {
        text.to_ascii_lowercase()
            .contains(&LEAK.to_ascii_lowercase())
    };
    for (what, pairs, names) in &cases {
        let errors = match plurnk_mcp::HostConfig::from_env(pairs.iter().cloned()) {
            Ok(_) => panic!("{what}: accepted"),
            Err(errors) => errors,
        };
        let message = errors.to_string();
        assert_eq!(
            errors.iter().count(),
            1,
            "{what}: one fault, one error: {message}"
        );
        for name in names {
            assert!(
                message.contains(name),
                "{what}: {name} missing from {message}"
            );
        }
        assert!(!leaks(&message), "{what}: a value leaked: {message}");
        assert!(
            !leaks(&format!("{errors:?}")),
            "{what}: a value leaked in Debug"
        );
    }
    // All at once: every fault has its own error, and the command line reports each and
    // starts nothing.
    let all: BTreeMap<String, String> = cases
        .iter()
        .flat_map(|(_, pairs, _)| pairs.iter())
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    let errors = match plurnk_mcp::HostConfig::from_env(all.clone()) {
        Ok(_) => panic!("accepted"),
        Err(errors) => errors,
    };
    assert_eq!(
        errors.iter().count(),
        cases.len(),
        "each fault its own error:\n{errors}"
    );
    let output = run(&["status"], &all);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    for (what, _, names) in &cases {
        for name in names {
            assert!(
                stderr.contains(name),
                "{what}: {name} missing from:\n{stderr}"
            );
        }
    }
    assert!(!leaks(&stderr), "a value leaked:\n{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn status_tools_and_call_on_fixture_servers() {
    let mut pairs = fixture("modern", &[]);
    pairs.extend(fixture("legacy", &["--legacy"]));
    pairs.extend(fixture("off", &[]));
    pairs.push(("PLURNK_MCP_MODERN_READ".into(), json!(["echo"]).to_string()));
    pairs.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["modern", "legacy"]).to_string(),
    ));
    let env: BTreeMap<String, String> = pairs.into_iter().collect();

    let output = run(&["status"], &env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    let line = |alias: &str| {
        table
            .lines()
            .find(|line| line.starts_with(alias))
            .map(|line| {
                line.split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        line("modern"),
        ["modern", "stdio", "ready", "2026-07-28", "12"],
        "{table}"
    );
    assert_eq!(
        line("legacy"),
        ["legacy", "stdio", "ready", "2025-11-25", "12"],
        "{table}"
    );
    assert_eq!(
        line("off"),
        ["off", "stdio", "disabled", "-", "-"],
        "{table}"
    );

    let output = run(&["status", "--json"], &env);
    let status: Value = serde_json::from_slice(&output.stdout).expect("status --json is JSON");
    assert_eq!(
        status["servers"]["modern"]["negotiated"]["revision"],
        "2026-07-28"
    );
    assert_eq!(status["servers"]["legacy"]["negotiated"]["modern"], false);

    let output = run(&["tools", "modern"], &env);
    assert!(output.status.success());
    let tools = text(&output.stdout);
    assert!(
        tools
            .lines()
            .any(|l| l.starts_with("echo") && l.contains(" read ")),
        "{tools}"
    );
    assert!(
        tools
            .lines()
            .any(|l| l.starts_with("sleep") && l.contains(" host ")),
        "{tools}"
    );

    let output = run(&["call", "legacy", "add", "{\"a\": 2, \"b\": 40}"], &env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON result");
    assert_eq!(result["content"][0]["text"], "42");

    let output = run(&["call", "modern", "fail", "{}"], &env);
    assert_eq!(output.status.code(), Some(1), "isError exits 1");
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON result");
    assert_eq!(result["isError"], true);

    let output = run(&["call", "modern", "nope", "{}"], &env);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no enabled tool \"nope\""));

    let output = run(&["call", "modern", "echo", "not json"], &env);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("not valid JSON"));

    let output = run(&["tools", "off"], &env);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("disabled"));
}

#[test]
fn exec_prints_the_result_and_exits_as_call_does() {
    let mut pairs = fixture("fx", &[]);
    pairs.push(("PLURNK_MCP_ENABLED".into(), json!(["fx"]).to_string()));
    let env: BTreeMap<String, String> = pairs.into_iter().collect();

    let output = run(&["exec", r#"<<EXEC[fx](add):{"a":2,"b":40}:EXEC"#], &env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON result");
    assert_eq!(result["content"][0]["text"], "42");

    let output = run(&["exec", "<<EXEC[fx]:?:EXEC"], &env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let catalog: Value = serde_json::from_slice(&output.stdout).expect("JSON catalog");
    assert_eq!(catalog["server"], "fx");
    assert!(
        catalog["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == "echo")),
        "{catalog}"
    );

    let output = run(&["exec", "<<EXEC[fx](fail):EXEC"], &env);
    assert_eq!(output.status.code(), Some(1), "isError exits 1");
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON result");
    assert_eq!(result["isError"], true);
    assert!(text(&output.stderr).contains("fx/fail reported a tool error"));

    for (op, says) in [
        ("<<EXEC[fx](nope):EXEC", "no enabled tool \"nope\""),
        (
            r#"<<EXEC[fx](add):{"a":"x","b":1}:EXEC"#,
            "/a: \"x\" is not of type",
        ),
        // Refused before any server is started.
        ("<<EXEC[fx](echo):{", "not closed"),
    ] {
        let output = run(&["exec", op], &env);
        assert_eq!(output.status.code(), Some(2), "{op}");
        assert!(
            text(&output.stderr).contains(says),
            "{op}: {}",
            text(&output.stderr)
        );
        assert!(output.stdout.is_empty(), "{op}");
    }
}

#[test]
fn demo_runs_to_exit_0() {
    let output = run(&["demo"], &BTreeMap::new());
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed:\n{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains("every step behaved as expected"),
        "{stdout}"
    );
    assert!(!stdout.contains("FAIL"), "{stdout}");
}

#[test]
fn third_party_peers_over_stdio() {
    let peers = peers();
    let env = env::map(&[
        ("PLURNK_MCP_PYTHON", peers.python.clone()),
        (
            "PLURNK_MCP_PYTHON_ARGS",
            json!([peers.python_peer]).to_string(),
        ),
        ("PLURNK_MCP_EVERYTHING", peers.node.clone()),
        (
            "PLURNK_MCP_EVERYTHING_ARGS",
            json!([peers.everything, "stdio"]).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED",
            json!(["python", "everything"]).to_string(),
        ),
        ("PLURNK_MCP_CONNECT_TIMEOUT", "30000".into()),
    ]);
    let output = run(&["status", "--json"], &env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let status: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let python = &status["servers"]["python"];
    assert_eq!(python["state"], "ready", "{python}");
    assert_eq!(python["negotiated"]["revision"], "2026-07-28");
    assert_eq!(python["negotiated"]["name"], "python-peer");
    // Every key of the JSON is camelCase, the discover answer's, a tool's and the phases'.
    let discovery = &python["negotiated"]["discovery"];
    assert!(discovery["supportedVersions"].is_array(), "{discovery}");
    assert!(discovery["cacheScope"].is_string(), "{discovery}");
    assert!(python["tools"][0]["inputSchema"].is_object(), "{python}");
    assert!(python["phases"]["startingMs"].is_u64(), "{python}");
    let everything = &status["servers"]["everything"];
    assert_eq!(everything["state"], "ready", "{everything}");
    assert_eq!(everything["negotiated"]["revision"], "2025-11-25");
    assert!(
        everything["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == "get-sum")),
        "{everything}"
    );

    let output = run(
        &["call", "python", "echo", "{\"text\":\"hi from plurnk\"}"],
        &env,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(result["content"][0]["text"], "hi from plurnk");

    let output = run(
        &["call", "everything", "get-sum", "{\"a\":2,\"b\":3}"],
        &env,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(result["content"][0]["text"], "The sum of 2 and 3 is 5.");
}

#[test]
fn workspace_actions_from_the_command_line() {
    let state = scratch_state();
    let mut pairs = fixture("svc", &[]);
    pairs.push(("PLURNK_MCP_ENABLED".into(), json!(["svc"]).to_string()));
    let mut env: BTreeMap<String, String> = pairs.into_iter().collect();
    // Without the operator's leave, a runtime add is refused with what to do.
    let options = json!({"args": ["fixture", "--name", "mine"]}).to_string();
    let refused = run(
        &[
            "--state",
            &state,
            "--workspace",
            "team",
            "add",
            "mine",
            EXE,
            "--options",
            &options,
        ],
        &env,
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("PLURNK_MCP_ALLOW_ADD=true"),
        "{}",
        text(&refused.stderr)
    );
    env.insert("PLURNK_MCP_ALLOW_ADD".into(), "true".into());
    let with = |args: &[&str]| {
        let mut all = vec!["--state", state.as_str(), "--workspace", "team"];
        all.extend_from_slice(args);
        run(&all, &env)
    };
    let options = json!({"args": ["fixture", "--name", "mine"]}).to_string();
    let output = with(&["add", "mine", EXE, "--options", &options]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("mine") && l.contains("workspace") && l.contains("ready")),
        "{table}"
    );

    let output = with(&["disable", "svc", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        (summary["state"].as_str(), summary["enabled"].as_bool()),
        (Some("disabled"), Some(false))
    );

    // A new process on the same state file sees both changes.
    let output = with(&["list", "--json"]);
    let list: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let find = |alias: &str| {
        list.as_array()
            .and_then(|all| all.iter().find(|s| s["alias"] == alias))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(find("mine")["state"], "ready");
    assert_eq!(find("mine")["source"], "workspace");
    assert_eq!(find("svc")["enabled"], false);
    // The default workspace is untouched.
    let output = run(&["--state", &state, "list", "--json"], &env);
    let list: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(
        list.as_array()
            .is_some_and(|all| all.iter().all(|s| s["alias"] != "mine"))
    );

    let output = with(&["enable", "svc"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = with(&["remove", "mine"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = with(&["remove", "svc"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("409"),
        "{}",
        text(&output.stderr)
    );
    let output = with(&["add", "bad name", EXE]);
    assert_eq!(output.status.code(), Some(2));
    let output = with(&[
        "add",
        "web",
        "https://example.test/mcp",
        "--options",
        r#"{"args":["x"]}"#,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("args"),
        "{}",
        text(&output.stderr)
    );
}

/// A fixture serving Streamable HTTP in a child process; killed on drop.
struct HttpChild {
    child: std::process::Child,
    url: String,
}

impl HttpChild {
    fn start() -> Self {
        Self::with(&[])
    }

    /// The fixture with `extra` arguments, such as `--bearer TOKEN`.
    fn with(extra: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(EXE)
            .args(["fixture", "--name", "web", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the fixture starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("it says where it listens");
        let url = line
            .trim()
            .strip_prefix("listening ")
            .expect("a listening line")
            .to_owned();
        Self { child, url }
    }
}

impl Drop for HttpChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_sentinel_secret_in_every_field_appears_in_no_output() {
    // One secret, referenced from every field that can carry one, and reflected back by the
    // servers (as the stdio server's name, its environment, the HTTP headers it received).
    const SENTINEL: &str = "SeNtInEl-7f3a9c-XyZ";
    let web = HttpChild::start();
    let authority = web.url.trim_start_matches("http://");
    let (host_port, path) = authority.split_once('/').unwrap_or((authority, "mcp"));
    let state = scratch_state();
    let env = env::map(&[
        ("SENTINEL", SENTINEL.into()),
        ("PLURNK_MCP_LOG", "trace".into()),
        ("PLURNK_MCP_LOCAL", EXE.into()),
        (
            "PLURNK_MCP_LOCAL_ARGS",
            json!(["fixture", "--name", "${SENTINEL}"]).to_string(),
        ),
        (
            "PLURNK_MCP_LOCAL_ENV",
            json!({"API_KEY": "${SENTINEL}"}).to_string(),
        ),
        ("PLURNK_MCP_LOCAL_SUMMARY", "uses ${SENTINEL}".into()),
        (
            "PLURNK_MCP_WEB",
            format!("http://user:${{SENTINEL}}@{host_port}/{path}?token=${{SENTINEL}}"),
        ),
        ("PLURNK_MCP_WEB_BEARER", "${SENTINEL}".into()),
        (
            "PLURNK_MCP_WEB_HEADERS",
            json!({"X-Api-Key": "${SENTINEL}"}).to_string(),
        ),
        // A server that cannot be reached: its Problem carries the URL reqwest printed.
        (
            "PLURNK_MCP_GONE",
            "http://user:${SENTINEL}@127.0.0.1:9/mcp?token=${SENTINEL}".into(),
        ),
        (
            "PLURNK_MCP_ENABLED",
            json!(["local", "web", "gone"]).to_string(),
        ),
    ]);
    let spellings = [
        SENTINEL.to_owned(),
        SENTINEL.to_ascii_lowercase(),
        SENTINEL.replace('-', "%2D"),
    ];
    let commands: [&[&str]; 8] = [
        &["--state", &state, "status"],
        &["--state", &state, "status", "--json"],
        &["--state", &state, "tools", "local", "--json"],
        &[
            "--state",
            &state,
            "call",
            "local",
            "reveal",
            r#"{"name":"API_KEY","to":"text"}"#,
        ],
        &[
            "--state",
            &state,
            "call",
            "local",
            "reveal",
            r#"{"name":"API_KEY","to":"error"}"#,
        ],
        &["--state", &state, "call", "web", "headers", "{}"],
        &["--state", &state, "list", "--json"],
        &[
            "--state",
            &state,
            "call",
            "local",
            "reveal",
            r#"{"name":"API_KEY","to":"crash"}"#,
        ],
    ];
    let mut seen = String::new();
    for args in commands {
        let output = run(args, &env);
        let shown = format!("{}{}", text(&output.stdout), text(&output.stderr));
        for spelling in &spellings {
            assert!(
                !shown
                    .to_ascii_lowercase()
                    .contains(&spelling.to_ascii_lowercase()),
                "{args:?} showed the secret:\n{shown}"
            );
        }
        seen.push_str(&shown);
    }
    // PLURNK_MCP_LOG is the log filter, never a server named "log".
    assert!(
        !seen.lines().any(|line| line.starts_with("log ")),
        "PLURNK_MCP_LOG was read as a server:\n{seen}"
    );
    // The servers did receive it, and reflected it: what the caller saw was scrubbed.
    assert!(seen.contains("API_KEY=<redacted>"), "{seen}");
    assert!(seen.contains(r#"\"x-api-key\":\"<redacted>\""#), "{seen}");
    // The state file holds no value either.
    let bytes = std::fs::read(&state).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&bytes).contains(SENTINEL));
}

/// A `plurnk-mcp status --watch` (which connects every enabled server and runs until a
/// signal) over the fixture, a server that ignores SIGTERM and stdin EOF and one whose
/// grandchild moved to a session of its own; each carries `mark`. Returns once all of them
/// run. (A one-shot `call` would start only the server it names.)
fn held_cli(mark: &str) -> std::process::Child {
    let mut env = BTreeMap::new();
    for (alias, args) in [
        ("slow", json!(["fixture"])),
        ("immortal", json!(["fixture", "--hostile", "immortal"])),
        ("runaway", json!(["fixture", "--hostile", "escape"])),
    ] {
        let upper = alias.to_ascii_uppercase();
        env.insert(format!("PLURNK_MCP_{upper}"), EXE.to_owned());
        env.insert(format!("PLURNK_MCP_{upper}_ARGS"), args.to_string());
        env.insert(
            format!("PLURNK_MCP_{upper}_ENV"),
            json!({ "TEST_MARK": mark }).to_string(),
        );
    }
    env.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["slow", "immortal", "runaway"]).to_string(),
    );
    let mut command = Command::new(EXE);
    command
        .args(["--state", &scratch_state(), "status", "--watch"])
        .env_clear()
        .envs(&env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    let mut child = command.spawn().expect("plurnk-mcp runs");
    // The host is up once the watch prints its table (its first line is the header); what
    // follows is read and dropped so the watch never blocks on a full pipe.
    let stdout = child.stdout.take().expect("stdout");
    let (up, table) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("SERVER") {
                let _ = up.send(());
            }
        }
    });
    assert!(
        table.recv_timeout(wait::BOUND).is_ok(),
        "status --watch printed no table"
    );
    // Every server runs, and so does the runaway's grandchild.
    assert!(
        wait::until_blocking(wait::BOUND, || marked(mark).len() >= 4),
        "the servers did not start: {:?}",
        marked(mark)
    );
    child
}

#[test]
fn nothing_outlives_a_host_killed_with_sigkill() {
    let mark = format!("sigkill-{}", std::process::id());
    let mut cli = held_cli(&mark);
    cli.kill().expect("SIGKILL");
    let _ = cli.wait();
    assert!(
        wait::until_blocking(wait::BOUND, || marked(&mark).is_empty()),
        "outlived the host: {:?}",
        marked(&mark)
    );
}

#[test]
fn the_command_line_shuts_down_on_sigterm_sigint_and_sighup() {
    for (signal, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let mark = format!("{name}-{}", std::process::id());
        let cli = held_cli(&mark);
        let pid = i32::try_from(cli.id()).expect("pid");
        // SAFETY: a signal to the process we spawned.
        unsafe {
            libc::kill(pid, signal);
        }
        let output = cli.wait_with_output().expect("it exits");
        assert_eq!(
            output.status.code(),
            Some(128 + signal),
            "{name}: {:?} {}",
            output.status,
            text(&output.stderr)
        );
        assert!(
            text(&output.stderr).contains("closing every server"),
            "{name}: {}",
            text(&output.stderr)
        );
        assert!(
            wait::until_blocking(wait::BOUND, || marked(&mark).is_empty()),
            "{name}: outlived the host: {:?}",
            marked(&mark)
        );
    }
}

/// A 2026-07-28 `tools/call` of `name` with `arguments`, POSTed to a gateway at `url` by a
/// client that declares the Tasks extension; the answer is not awaited (the test stops the
/// gateway under it).
fn post_call_in_background(url: &str, name: &str, arguments: Value) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_once('/').expect("a path");
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}
    })
    .to_string();
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(authority).expect("the gateway answers");
    stream
        .write_all(request.as_bytes())
        .expect("the request goes out");
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    });
}

/// SIGTERM with a Task and a plain call in flight: before the command line exits, the
/// Python SDK server's Task is cancelled (`tasks/cancel`) and the stdio fixture is sent
/// `notifications/cancelled` for the call's request, so no server keeps working for a
/// client that is gone.
#[test]
fn a_sigterm_tells_every_server_of_the_work_it_stops() {
    use std::io::BufRead;
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let probe = runtime.block_on(plurnk_mcp_fixture::probe::Probe::start());
    let mut python = processes::Killed(
        Command::new(&peers().python)
            .arg(peer_script("python_surfaces.py"))
            .args(["--http", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the Python peer starts"),
    );
    let mut line = String::new();
    std::io::BufReader::new(python.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the peer announces its address");
    let web = line
        .trim()
        .strip_prefix("listening ")
        .expect("a listening line")
        .to_owned();
    // What the Python server's tasks look like, asked by a host of the test's own.
    let tasks = || {
        runtime.block_on(async {
            let host = plurnk_mcp::Host::start(
                plurnk_mcp::HostConfig::from_env([
                    ("PLURNK_MCP_WEB".to_owned(), web.clone()),
                    ("PLURNK_MCP_ENABLED".to_owned(), json!(["web"]).to_string()),
                ])
                .expect("valid"),
            )
            .await
            .expect("host starts");
            let log = host
                .default_workspace()
                .call_tool(
                    "web",
                    "task_log",
                    json!({}),
                    plurnk_mcp::CallOptions::default(),
                )
                .await
                .expect("task_log")
                .text();
            let _ = host.shutdown().await;
            serde_json::from_str::<Value>(&log).expect("JSON")
        })
    };
    let env: BTreeMap<String, String> = [
        ("PLURNK_MCP_WEB".to_owned(), web.clone()),
        ("PLURNK_MCP_FX".to_owned(), EXE.to_owned()),
        (
            "PLURNK_MCP_FX_ARGS".to_owned(),
            json!(["fixture", "--probe", probe.address()]).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED".to_owned(),
            json!(["web", "fx"]).to_string(),
        ),
    ]
    .into_iter()
    .collect();
    let mut serve = processes::Killed(
        Command::new(EXE)
            .args(["--state", &scratch_state(), "serve", "--transport", "http"])
            .args(["--listen", "127.0.0.1:0"])
            .env_clear()
            .envs(&env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("plurnk-mcp serve starts"),
    );
    // It says where it serves on stderr; the rest of stderr is kept for the failure message.
    let (found, address) = std::sync::mpsc::channel();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let lines = std::io::BufReader::new(serve.0.stderr.take().expect("stderr"));
    let kept = said.clone();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                let _ = found.send(url.to_owned());
            }
            if let Ok(mut said) = kept.lock() {
                said.push_str(&line);
                said.push('\n');
            }
        }
    });
    let gateway = address
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("serve says where it serves");

    post_call_in_background(&gateway, "fx_gate", json!({"id": "held"}));
    post_call_in_background(
        &gateway,
        "web_long_job",
        json!({"steps": 500, "delay_ms": 200}),
    );
    runtime.block_on(probe.wait_gate("held", std::time::Duration::from_secs(20)));
    let task_id = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let log = tasks();
            let working = log.as_object().and_then(|tasks| {
                tasks
                    .iter()
                    .find(|(_, task)| {
                        task["status"] == "working" && task["polls"].as_u64() >= Some(1)
                    })
                    .map(|(id, _)| id.clone())
            });
            if let Some(id) = working {
                break id;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no Task is polled: {log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };

    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(i32::try_from(serve.0.id()).expect("pid"), libc::SIGTERM);
    }
    let status = serve.0.wait().expect("it exits");
    let said = said.lock().map(|said| said.clone()).unwrap_or_default();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{said}");
    assert!(
        probe.count("cancel-notice") >= 1,
        "the fixture was not told: {:?}",
        probe.events()
    );
    let log = tasks();
    assert_eq!(
        log[&task_id]["status"], "cancelled",
        "the Task was not cancelled: {log}"
    );
}

/// SIGTERM to a one-shot `plurnk-mcp call` whose call is held on the fixture: the fixture is
/// sent `notifications/cancelled` for it before the command exits, every time (20 runs).
#[test]
fn a_sigterm_to_a_one_shot_call_tells_its_server_every_time() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    for run in 0..20 {
        let probe = runtime.block_on(plurnk_mcp_fixture::probe::Probe::start());
        let env: BTreeMap<String, String> = [
            ("PLURNK_MCP_FX".to_owned(), EXE.to_owned()),
            (
                "PLURNK_MCP_FX_ARGS".to_owned(),
                json!(["fixture", "--probe", probe.address()]).to_string(),
            ),
            ("PLURNK_MCP_ENABLED".to_owned(), json!(["fx"]).to_string()),
        ]
        .into_iter()
        .collect();
        let id = format!("held-{run}");
        let mut call = processes::Killed(
            Command::new(EXE)
                .args(["--state", &scratch_state(), "call", "fx", "gate"])
                .arg(json!({ "id": id }).to_string())
                .env_clear()
                .envs(&env)
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("plurnk-mcp call starts"),
        );
        runtime.block_on(probe.wait_gate(&id, wait::BOUND));
        // SAFETY: a signal to the process we spawned.
        unsafe {
            libc::kill(i32::try_from(call.0.id()).expect("pid"), libc::SIGTERM);
        }
        let status = call.0.wait().expect("it exits");
        assert_eq!(status.code(), Some(128 + libc::SIGTERM), "run {run}");
        // The fixture reports what it received before acting on it; the report may still be
        // on its way when the command has exited.
        assert!(
            wait::until_blocking(wait::BOUND, || probe.count("cancel-notice") >= 1),
            "run {run}: the fixture was not told: {:?}",
            probe.events()
        );
    }
}

#[test]
fn a_closed_stdout_does_not_panic_the_command_line() {
    let env: BTreeMap<String, String> = fixture("local", &[])
        .into_iter()
        .chain([(
            "PLURNK_MCP_ENABLED".to_owned(),
            json!(["local"]).to_string(),
        )])
        .collect();
    let mut command = Command::new(EXE);
    command
        .args(["--state", &scratch_state(), "tools", "local"])
        .env_clear()
        .envs(&env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("plurnk-mcp runs");
    // The reader goes away before anything is written (`plurnk-mcp tools | head -0`).
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("it exits");
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
}

#[test]
fn metrics_are_served_while_a_command_runs_and_stdout_stays_the_commands() {
    use std::io::BufRead;
    let runtime = tokio::runtime::Runtime::new().expect("a runtime for the probe");
    let probe = runtime.block_on(plurnk_mcp_fixture::probe::Probe::start());
    let mut env = env::map(&[("PLURNK_MCP_ENABLED", json!(["slow"]).to_string())]);
    env.extend(fixture("slow", &["--probe", probe.address()]));
    let mut command = Command::new(EXE);
    command
        .args(["--metrics", "127.0.0.1:0", "--state", &scratch_state()])
        .args(["call", "slow", "gate", r#"{"id": "scraped"}"#])
        .env_clear()
        .envs(&env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    let mut child = command.spawn().expect("plurnk-mcp runs");
    // Stderr is read on a thread, so a line that never comes fails the test in time
    // instead of blocking it.
    let stderr = child.stderr.take().expect("stderr");
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let url = loop {
        let line = seen
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the command names the metrics URL on stderr");
        if let Some(url) = line.strip_prefix("metrics: ") {
            break url.to_owned();
        }
    };
    let address = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("http://ADDRESS/metrics")
        .to_owned();
    assert!(!address.ends_with(":0"), "the bound port is named: {url}");
    // The host is up and the call in flight: the server connected (connecting → ready, one
    // change) and the commits that showed it were counted, exactly: the process is the
    // command's alone.
    runtime.block_on(probe.wait_gate("scraped", std::time::Duration::from_secs(20)));
    let (status, scrape) = http_get(&address, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{scrape}");
    for (series, value) in [
        (r#"plurnk_mcp_state_changes_total{to="ready"}"#, 1.0),
        (
            r#"plurnk_mcp_attachments{workspace="default",state="ready"}"#,
            1.0,
        ),
    ] {
        assert_eq!(sample(&scrape, series), Some(value), "{series}:\n{scrape}");
    }
    assert!(
        sample(&scrape, "plurnk_mcp_commits_total").is_some_and(|commits| commits >= 1.0),
        "{scrape}"
    );
    assert!(
        !scrape.contains("slow") && !scrape.contains("scraped"),
        "no alias or argument is a label:\n{scrape}"
    );
    let (status, _) = http_get(&address, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(runtime.block_on(probe.release("scraped")));
    let output = child.wait_with_output().expect("it exits");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let result: Value = serde_json::from_slice(&output.stdout).expect("stdout is the result");
    assert_eq!(result["content"][0]["text"], "released scraped", "{result}");
}

#[test]
fn a_metrics_address_that_is_none_or_is_taken_is_refused_by_name() {
    let output = run(&["--metrics", "localhost", "status"], &BTreeMap::new());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--metrics") && stderr.contains("localhost"),
        "{stderr}"
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let address = taken.local_addr().expect("address").to_string();
    let output = run(&["--metrics", &address, "status"], &BTreeMap::new());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot serve metrics on {address}")),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
}

#[test]
fn serve_warns_of_a_failed_connection_and_a_one_shot_command_shows_it_once() {
    let env = env::map(&[
        ("PLURNK_MCP_BROKEN", "/nonexistent/mcp-server".into()),
        ("PLURNK_MCP_ENABLED", json!(["broken"]).to_string()),
    ]);
    // Over stdio, `serve` ends when its client closes its input: here at once, after start.
    let served = run(&["serve"], &env);
    let stderr = text(&served.stderr);
    assert!(
        stderr.lines().any(|line| line.contains("WARN")
            && line.contains("server \"broken\" (stdio) could not be connected")),
        "{stderr}"
    );
    let status = run(&["status"], &env);
    let stderr = text(&status.stderr);
    assert!(
        !stderr.contains("could not be connected"),
        "said twice: {stderr}"
    );
    assert!(
        text(&status.stdout).contains("could not be connected"),
        "{}",
        text(&status.stdout)
    );
}

#[test]
fn a_dry_run_import_says_each_entry_would_be_refused_while_the_install_gate_is_closed() {
    let state = scratch_state();
    let file = std::path::PathBuf::from(format!("{state}.files/claude_desktop_config.json"));
    std::fs::create_dir_all(file.parent().expect("a folder")).expect("the folder");
    let servers = json!({"mcpServers": {"files": {"command": "/usr/bin/true", "args": []}}});
    std::fs::write(&file, servers.to_string()).expect("the file");
    let path = file.to_string_lossy().into_owned();
    // No PLURNK_MCP_ALLOW_ADD: the gate is closed, as by default.
    let output = run(
        &["--state", &state, "import", &path, "--dry-run"],
        &BTreeMap::new(),
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let plan = text(&output.stdout);
    assert!(
        plan.lines().any(|line| line.starts_with("files")
            && line.contains("would be refused: the install gate is closed")
            && line.contains("PLURNK_MCP_ALLOW_ADD=true")),
        "{plan}"
    );
    assert!(!plan.contains("would be added"), "{plan}");
    // Opened, the same plan would add it.
    let open = env::map(&[("PLURNK_MCP_ALLOW_ADD", "true".into())]);
    let output = run(&["--state", &state, "import", &path, "--dry-run"], &open);
    assert!(
        text(&output.stdout).contains("would be added"),
        "{}",
        text(&output.stdout)
    );
}

// === import ===

/// One client's file imported into workspace `team` of a fresh state file.
struct Import {
    state: String,
    file: std::path::PathBuf,
    env: BTreeMap<String, String>,
    /// Every output so far, for the check that no literal secret of the file shows.
    seen: String,
}

impl Import {
    /// Writes `contents` at `<scratch>/<relative>` (the name is part of format detection);
    /// `env` is the operator's: the gate opened for `handed`, each set to its value.
    fn new(relative: &str, contents: &str, handed: &[(&str, &str)]) -> Self {
        let state = scratch_state();
        let dir = std::path::PathBuf::from(format!("{state}.files"));
        let file = dir.join(relative);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("the folder");
        std::fs::write(&file, contents).expect("the file is written");
        let names: Vec<&str> = handed.iter().map(|(name, _)| *name).collect();
        let mut env = env::map(&[
            ("PLURNK_MCP_ALLOW_ADD", "true".into()),
            ("PLURNK_MCP_WORKSPACE_ENV", json!(names).to_string()),
        ]);
        for (name, value) in handed {
            env.insert((*name).to_owned(), (*value).to_owned());
        }
        Self {
            state,
            file,
            env,
            seen: String::new(),
        }
    }

    fn run(&mut self, args: &[&str]) -> Output {
        let mut all = vec!["--state", self.state.as_str(), "--workspace", "team"];
        all.extend_from_slice(args);
        let output = run(&all, &self.env);
        self.seen.push_str(&text(&output.stdout));
        self.seen.push_str(&text(&output.stderr));
        output
    }

    /// [`Import::run`], killed (and failing the test) if it has not ended within 20 s.
    fn run_bounded(&mut self, args: &[&str]) -> Output {
        let mut all = vec!["--state", self.state.as_str(), "--workspace", "team"];
        all.extend_from_slice(args);
        let mut command = Command::new(EXE);
        command
            .args(&all)
            .env_clear()
            .envs(&self.env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Ok(path) = std::env::var("PATH") {
            command.env("PATH", path);
        }
        let mut child = command.spawn().expect("plurnk-mcp runs");
        let ended = wait::until_blocking(wait::BOUND, || {
            child.try_wait().is_ok_and(|status| status.is_some())
        });
        if !ended {
            let _ = child.kill();
        }
        let output = child.wait_with_output().expect("its output");
        assert!(ended, "{args:?} did not end: {}", text(&output.stderr));
        output
    }

    fn import(&mut self, extra: &[&str]) -> Output {
        let file = self.file.to_string_lossy().into_owned();
        let mut args = vec!["import", file.as_str()];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// `list --json`, by alias.
    fn list(&mut self) -> BTreeMap<String, Value> {
        let output = self.run(&["list", "--json"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let list: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        list.as_array()
            .expect("an array")
            .iter()
            .map(|summary| {
                (
                    summary["alias"].as_str().unwrap_or_default().to_owned(),
                    summary.clone(),
                )
            })
            .collect()
    }

    /// A dry run changes nothing: no state file is even created.
    fn dry_run(&mut self) -> String {
        let output = self.import(&["--dry-run"]);
        assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
        assert!(
            !std::path::Path::new(&self.state).exists(),
            "a dry run wrote the state file"
        );
        text(&output.stdout)
    }

    /// The import itself; exit 1 as one entry of each file cannot be carried over.
    fn apply(&mut self) -> String {
        let output = self.import(&[]);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
        assert!(
            text(&output.stderr).contains("were not imported"),
            "{}",
            text(&output.stderr)
        );
        text(&output.stdout)
    }

    /// The state file holds each of `fragments` (a definition's JSON as stored).
    fn assert_stored(&self, fragments: &[&str]) {
        let stored = self.stored_bytes();
        for fragment in fragments {
            assert!(stored.contains(fragment), "{fragment} is not stored");
        }
    }

    /// Every byte the state file holds: the database, its WAL, rollback journal and shared
    /// memory.
    fn stored_bytes(&self) -> String {
        let mut bytes = std::fs::read(&self.state).expect("the state file");
        for suffix in ["-wal", "-journal", "-shm"] {
            bytes.extend(std::fs::read(format!("{}{suffix}", self.state)).unwrap_or_default());
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// No literal secret of the file shows in any output, in any case, or in the state file
    /// (its journals included).
    fn assert_secrets_stayed_out(&self, secrets: &[&str]) {
        let stored = self.stored_bytes().to_ascii_lowercase();
        let seen = self.seen.to_ascii_lowercase();
        for secret in secrets {
            let secret = secret.to_ascii_lowercase();
            assert!(
                !seen.contains(&secret),
                "a secret was shown:\n{}",
                self.seen
            );
            assert!(!stored.contains(&secret), "a secret was stored");
        }
    }
}

/// The names of a map the list shows (its values are shown `<redacted>`).
fn assert_env_keys(map: &Value, keys: &[&str]) {
    let shown: Vec<&str> = map
        .as_object()
        .map(|map| map.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(shown, keys, "{map:#}");
}

/// The server is in the list, enabled or not as asked, and (when enabled) connected.
fn assert_imported(list: &BTreeMap<String, Value>, alias: &str, enabled: bool) {
    let summary = list
        .get(alias)
        .unwrap_or_else(|| panic!("{alias} was imported: {list:#?}"));
    assert_eq!(summary["source"], "workspace", "{summary:#}");
    assert_eq!(summary["enabled"], enabled, "{summary:#}");
    let state = if enabled { "ready" } else { "disabled" };
    assert_eq!(summary["state"], state, "{summary:#}");
}

/// The stdio fixture's arguments, as a JSON array.
fn fixture_args(name: &str) -> Value {
    json!(["fixture", "--name", name])
}

#[test]
fn import_of_a_claude_desktop_file_connects_its_servers() {
    const ENV_SECRET: &str = "claude-env-SeCrEt-5b1e";
    const BEARER: &str = "claude-bearer-SeCrEt-7c2d";
    let web = HttpChild::with(&["--bearer", BEARER]);
    // The shape of Claude Desktop's documented examples: stdio servers with args and env.
    let file = json!({
        "mcpServers": {
            "Local_Files": {
                "command": EXE,
                "args": fixture_args("files"),
                "env": {"API_KEY": ENV_SECRET, "LOG_LEVEL": "debug"}
            },
            "remote": {
                "url": web.url,
                "headers": {"Authorization": format!("Bearer {BEARER}"), "X-Client": "claude"}
            },
            "1password": {"command": EXE, "args": fixture_args("op")}
        },
        "globalShortcut": ""
    });
    let mut import = Import::new(
        "Claude/claude_desktop_config.json",
        &serde_json::to_string_pretty(&file).expect("JSON"),
        &[
            ("API_KEY", ENV_SECRET),
            ("REMOTE_TOKEN", BEARER),
            ("LOG_LEVEL", "debug"),
            ("REMOTE_X_CLIENT", "claude"),
        ],
    );
    let plan = import.dry_run();
    assert!(plan.contains("read as claude-desktop"), "{plan}");
    assert!(
        plan.lines().any(|l| l.starts_with("local-files")
            && l.contains("Local_Files")
            && l.contains("${API_KEY}")
            && l.contains("would be added")),
        "{plan}"
    );
    assert!(
        plan.lines()
            .any(|l| l.starts_with("remote") && l.contains("${REMOTE_TOKEN}")),
        "{plan}"
    );
    assert!(plan.contains("skipped \"1password\""), "{plan}");
    assert!(
        plan.contains("moved out of remote's header Authorization"),
        "{plan}"
    );

    let report = import.apply();
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("local-files") && l.contains("added")),
        "{report}"
    );
    let list = import.list();
    assert_imported(&list, "local-files", true);
    assert_imported(&list, "remote", true);
    assert!(!list.contains_key("1password"), "{list:#?}");
    assert_env_keys(
        &list["local-files"]["definition"]["env"],
        &["API_KEY", "LOG_LEVEL"],
    );
    import.assert_stored(&[r#""API_KEY":"${API_KEY}""#, r#""LOG_LEVEL":"${LOG_LEVEL}""#]);
    assert_eq!(
        list["remote"]["definition"]["authorization"],
        json!({"type": "bearer", "token": "${REMOTE_TOKEN}"})
    );
    // The moved variable reached the server (and what it reflects is scrubbed).
    let output = import.run(&[
        "call",
        "local-files",
        "reveal",
        r#"{"name":"API_KEY","to":"text"}"#,
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("API_KEY=<redacted>"));
    import.assert_secrets_stayed_out(&[ENV_SECRET, BEARER]);
}

#[test]
fn import_of_a_cursor_file_keeps_disabled_entries_disabled() {
    const ENV_SECRET: &str = "cursor-env-SeCrEt-11aa";
    const BEARER: &str = "cursor-bearer-SeCrEt-22bb";
    const HEADER: &str = "cursor-header-SeCrEt-33cc";
    let web = HttpChild::with(&["--bearer", BEARER]);
    // Cursor's documented shapes: stdio, a typed remote with headers and ${env:NAME},
    // `disabled`, and an SSE server.
    let file = json!({
        "mcpServers": {
            "local": {"command": EXE, "args": fixture_args("local"), "env": {"GITHUB_TOKEN": ENV_SECRET}},
            "web": {
                "type": "streamable-http",
                "url": web.url,
                "headers": {"Authorization": "Bearer ${env:CURSOR_WEB_TOKEN}", "X-Api-Key": HEADER}
            },
            "resting": {"command": EXE, "args": fixture_args("resting"), "disabled": true},
            "old-sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
        }
    });
    let mut import = Import::new(
        ".cursor/mcp.json",
        &serde_json::to_string_pretty(&file).expect("JSON"),
        &[
            ("GITHUB_TOKEN", ENV_SECRET),
            ("CURSOR_WEB_TOKEN", BEARER),
            ("WEB_X_API_KEY", HEADER),
            ("WEB_X_REGION", "eu"),
        ],
    );
    let plan = import.dry_run();
    assert!(plan.contains("read as cursor"), "{plan}");
    assert!(
        plan.contains("skipped \"old-sse\": it uses the SSE-only transport"),
        "{plan}"
    );
    assert!(
        plan.lines()
            .any(|l| l.starts_with("web") && l.contains("${WEB_X_API_KEY}")),
        "{plan}"
    );
    import.apply();
    let list = import.list();
    assert_imported(&list, "local", true);
    assert_imported(&list, "web", true);
    assert_imported(&list, "resting", false);
    assert!(!list.contains_key("old-sse"));
    assert_env_keys(&list["web"]["definition"]["headers"], &["X-Api-Key"]);
    import.assert_stored(&[
        r#""X-Api-Key":"${WEB_X_API_KEY}""#,
        r#""GITHUB_TOKEN":"${GITHUB_TOKEN}""#,
        r#""token":"${CURSOR_WEB_TOKEN}""#,
    ]);
    // The moved header arrives with its value: the fixture reflects it reversed, a spelling
    // no scrubber knows.
    let output = import.run(&["call", "web", "headers", "{}"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let reversed: String = HEADER.chars().rev().collect();
    assert!(
        text(&output.stdout).contains(&reversed),
        "{}",
        text(&output.stdout)
    );
    import.assert_secrets_stayed_out(&[ENV_SECRET, BEARER, HEADER]);
}

#[test]
fn import_of_a_vscode_file_reports_inputs_and_env_files() {
    const ENV_SECRET: &str = "vscode-env-SeCrEt-44dd";
    const BEARER: &str = "vscode-bearer-SeCrEt-55ee";
    let web = HttpChild::with(&["--bearer", BEARER]);
    let exe = serde_json::to_string(EXE).expect("JSON");
    let url = serde_json::to_string(&web.url).expect("JSON");
    // VS Code's reference: typed servers, `inputs`, comments and a trailing comma.
    let file = format!(
        r#"{{
  // Prompted for by VS Code; plurnk-mcp cannot ask.
  "inputs": [
    {{ "type": "promptString", "id": "api-key", "description": "API key", "password": true }}
  ],
  "servers": {{
    "fixture": {{
      "type": "stdio",
      "command": {exe},
      "args": ["fixture", "--name", "fixture"],
      "env": {{ "SERVICE_PASSWORD": "{ENV_SECRET}", "MODE": "fast" }}
    }},
    "web": {{ "type": "http", "url": {url}, "headers": {{ "Authorization": "Bearer {BEARER}" }} }},
    "asks": {{ "type": "stdio", "command": {exe}, "env": {{ "API_KEY": "${{input:api-key}}" }} }},
    "dotenv": {{ "type": "stdio", "command": {exe}, "envFile": "${{workspaceFolder}}/.env" }},
  }}
}}"#
    );
    let mut import = Import::new(
        ".vscode/mcp.json",
        &file,
        &[
            ("SERVICE_PASSWORD", ENV_SECRET),
            ("WEB_TOKEN", BEARER),
            ("MODE", "fast"),
        ],
    );
    let plan = import.dry_run();
    assert!(plan.contains("read as vscode"), "{plan}");
    assert!(
        plan.contains("skipped \"asks\": \"env.API_KEY\" uses ${input:api-key}"),
        "{plan}"
    );
    assert!(
        plan.contains("skipped \"dotenv\": it reads \"envFile\""),
        "{plan}"
    );
    import.apply();
    let list = import.list();
    assert_imported(&list, "fixture", true);
    assert_imported(&list, "web", true);
    assert!(!list.contains_key("asks") && !list.contains_key("dotenv"));
    assert_env_keys(
        &list["fixture"]["definition"]["env"],
        &["MODE", "SERVICE_PASSWORD"],
    );
    import.assert_stored(&[
        r#""SERVICE_PASSWORD":"${SERVICE_PASSWORD}""#,
        r#""token":"${WEB_TOKEN}""#,
    ]);
    import.assert_secrets_stayed_out(&[ENV_SECRET, BEARER]);
}

#[test]
fn import_of_a_codex_file_carries_its_references_and_tool_lists() {
    const ENV_SECRET: &str = "codex-env-SeCrEt-66ff";
    const BEARER: &str = "codex-bearer-SeCrEt-77aa";
    const HEADER: &str = "codex-header-SeCrEt-88bb";
    let web = HttpChild::with(&["--bearer", BEARER]);
    let exe = serde_json::to_string(EXE).expect("a TOML basic string");
    let url = serde_json::to_string(&web.url).expect("a TOML basic string");
    // Codex's `[mcp_servers.<id>]` keys, as its configuration reference lists them.
    let file = format!(
        r#"model = "gpt-5"

[mcp_servers.local]
command = {exe}
args = ["fixture", "--name", "local"]
startup_timeout_sec = 20
enabled_tools = ["echo", "reveal", "crash"]
disabled_tools = ["crash"]

[mcp_servers.local.env]
DEPLOY_TOKEN = "{ENV_SECRET}"

[mcp_servers.web]
url = {url}
bearer_token_env_var = "CODEX_WEB_TOKEN"
http_headers = {{ "X-Region" = "eu", "X-Api-Key" = "{HEADER}" }}
tool_timeout_sec = 30

[mcp_servers.resting]
command = {exe}
args = ["fixture", "--name", "resting"]
enabled = false

[mcp_servers.linear]
url = "https://mcp.linear.test/mcp"
scopes = ["read"]
"#
    );
    let mut import = Import::new(
        ".codex/config.toml",
        &file,
        &[
            ("DEPLOY_TOKEN", ENV_SECRET),
            ("CODEX_WEB_TOKEN", BEARER),
            ("WEB_X_API_KEY", HEADER),
            ("WEB_X_REGION", "eu"),
        ],
    );
    let plan = import.dry_run();
    assert!(plan.contains("read as codex"), "{plan}");
    assert!(
        plan.contains("skipped \"linear\": it configures OAuth (\"scopes\")"),
        "{plan}"
    );
    assert!(
        plan.contains("note \"local\": startup_timeout_sec"),
        "{plan}"
    );
    import.apply();
    let list = import.list();
    assert_imported(&list, "local", true);
    assert_imported(&list, "web", true);
    assert_imported(&list, "resting", false);
    assert!(!list.contains_key("linear"));
    assert_eq!(list["local"]["tools"], json!(["echo", "reveal"]));
    assert_env_keys(
        &list["web"]["definition"]["headers"],
        &["X-Api-Key", "X-Region"],
    );
    import.assert_stored(&[
        r#""DEPLOY_TOKEN":"${DEPLOY_TOKEN}""#,
        r#""X-Api-Key":"${WEB_X_API_KEY}""#,
        r#""X-Region":"${WEB_X_REGION}""#,
        r#""token":"${CODEX_WEB_TOKEN}""#,
    ]);
    import.assert_secrets_stayed_out(&[ENV_SECRET, BEARER, HEADER]);
}

#[test]
fn import_refuses_an_unreadable_file_by_name_and_line() {
    let mut import = Import::new(
        "claude_desktop_config.json",
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",},\n    \"b\": {\"command\": \"x\" \"args\": []}\n  }\n}",
        &[],
    );
    // A trailing comma passes (as VS Code allows it); a missing one does not.
    let output = import.import(&[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("claude_desktop_config.json") && stderr.contains("at line 4, column 26"),
        "{stderr}"
    );
    let output = import.run(&["import", "/nonexistent/mcp.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("/nonexistent/mcp.json"));
    let file = import.file.to_string_lossy().into_owned();
    let output = import.run(&["import", &file, "--format", "zed"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("claude-desktop, cursor, vscode or codex"));
}

/// A stdio entry that runs the fixture named `name` through `sh -c`, so that `extra`
/// arguments (which the fixture would refuse) are carried, stored and ignored.
fn fixture_under_sh(name: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "-c".to_owned(),
        format!("exec \"$0\" fixture --name {name}"),
        EXE.to_owned(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    json!({"command": "/bin/sh", "args": args})
}

#[test]
fn import_moves_every_credential_shape_out_and_the_state_file_holds_none() {
    // Each shape a literal credential takes in a client's file, on servers that connect.
    const PAT: &str = "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o";
    const DB_PASSWORD: &str = "Db-Pa55-W0rd-8e1f";
    const SHAPED: &str = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    const DOLLARS: &str = "pa$$w0rd-4c2d";
    const API_KEY: &str = "api-K3y-Value-1a2b";
    const TOKEN: &str = "t0ken-Value-3c4d";
    const API_KEY_2: &str = "api-K3y-Value-5e6f";
    const TOKEN_2: &str = "t0ken-Value-7a8b";
    const X_AUTH: &str = "x-Auth-Value-9c0d";
    let web = HttpChild::start();
    let mut gh = fixture_under_sh("gh", &["--api-key", API_KEY, &format!("--token={TOKEN}")]);
    gh["env"] = json!({
        "GH_PAT": PAT,
        "DATABASE_URL": format!("postgres://app:{DB_PASSWORD}@db.internal:5432/app"),
        "SETTINGS": SHAPED,
        "DB_PASS": DOLLARS,
        "LOG_LEVEL": "debug",
    });
    let other = fixture_under_sh(
        "other",
        &[&format!("--api-key={API_KEY_2}"), "--token", TOKEN_2],
    );
    let file = json!({"mcpServers": {
        "gh": gh,
        "other": other,
        "web": {"url": web.url, "headers": {"X-Auth": X_AUTH, "X-Client": "claude"}},
    }});
    let literals = [
        PAT,
        DB_PASSWORD,
        SHAPED,
        DOLLARS,
        API_KEY,
        TOKEN,
        API_KEY_2,
        TOKEN_2,
        X_AUTH,
    ];
    let database_url = format!("postgres://app:{DB_PASSWORD}@db.internal:5432/app");
    let handed = [
        ("GH_PAT", PAT),
        ("DATABASE_URL", database_url.as_str()),
        ("SETTINGS", SHAPED),
        ("DB_PASS", DOLLARS),
        ("LOG_LEVEL", "debug"),
        ("WEB_X_CLIENT", "claude"),
        ("GH_API_KEY", API_KEY),
        ("GH_TOKEN", TOKEN),
        ("OTHER_API_KEY", API_KEY_2),
        ("OTHER_TOKEN", TOKEN_2),
        ("WEB_X_AUTH", X_AUTH),
    ];
    let mut import = Import::new(
        "claude_desktop_config.json",
        &serde_json::to_string_pretty(&file).expect("JSON"),
        &handed,
    );
    let output = import.import(&[]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    // The variables to set, each with where its value was, never the value.
    for (variable, from) in [
        ("GH_PAT", "moved out of gh's env GH_PAT"),
        ("DATABASE_URL", "moved out of gh's env DATABASE_URL"),
        ("SETTINGS", "moved out of gh's env SETTINGS"),
        ("DB_PASS", "moved out of gh's env DB_PASS"),
        ("LOG_LEVEL", "moved out of gh's env LOG_LEVEL"),
        ("WEB_X_CLIENT", "moved out of web's header X-Client"),
        (
            "GH_API_KEY",
            "moved out of gh's args[4] (the value of --api-key)",
        ),
        (
            "GH_TOKEN",
            "moved out of gh's args[5] (the value of --token)",
        ),
        (
            "OTHER_API_KEY",
            "moved out of other's args[3] (the value of --api-key)",
        ),
        (
            "OTHER_TOKEN",
            "moved out of other's args[5] (the value of --token)",
        ),
        ("WEB_X_AUTH", "moved out of web's header X-Auth"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(variable) && line.contains(from)),
            "{variable}: {stdout}"
        );
    }
    let list = import.list();
    for alias in ["gh", "other", "web"] {
        assert_imported(&list, alias, true);
    }
    import.assert_stored(&[
        r#""GH_PAT":"${GH_PAT}""#,
        r#""DATABASE_URL":"${DATABASE_URL}""#,
        r#""--api-key","${GH_API_KEY}""#,
        "--token=${GH_TOKEN}",
        "--api-key=${OTHER_API_KEY}",
        r#""--token","${OTHER_TOKEN}""#,
        r#""X-Auth":"${WEB_X_AUTH}""#,
        r#""DB_PASS":"${DB_PASS}""#,
    ]);
    // The moved values reached the servers, which reflect them scrubbed.
    let output = import.run(&["call", "gh", "reveal", r#"{"name":"DB_PASS","to":"text"}"#]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("DB_PASS=<redacted>"),
        "{}",
        text(&output.stdout)
    );
    import.assert_secrets_stayed_out(&literals);
}

#[test]
fn import_refuses_what_is_not_a_regular_file_and_a_file_past_its_bound() {
    let mut import = Import::new("mcp.json", r#"{"mcpServers": {}}"#, &[]);
    let dir = import.file.parent().expect("a folder").to_path_buf();
    let fifo = dir.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    // A FIFO with no writer would hold a blocking read for ever: the command must end.
    for (target, said) in [
        (fifo.clone(), "is not a regular file (it is a FIFO)"),
        (dir.clone(), "is not a regular file (it is a directory)"),
    ] {
        let target = target.display().to_string();
        let output = import.run_bounded(&["import", &target]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        assert!(
            text(&output.stderr).contains(said),
            "{}",
            text(&output.stderr)
        );
    }
    // Past the bound, given or default: refused by name, after reading one byte past it.
    let big = dir.join("big.json");
    std::fs::write(&big, " ".repeat(2048)).expect("written");
    let big_arg = big.display().to_string();
    let output = import.run(&["import", &big_arg, "--max-bytes", "1024"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("larger than 1024 bytes")
            && text(&output.stderr).contains("--max-bytes"),
        "{}",
        text(&output.stderr)
    );
    let bound = plurnk_mcp::import::DEFAULT_MAX_FILE_BYTES as usize;
    let mut padded = r#"{"mcpServers": {}}"#.to_owned();
    padded.push_str(&" ".repeat(bound + 1 - padded.len()));
    std::fs::write(&big, &padded).expect("written");
    let output = import.run(&["import", &big_arg]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains(&format!("larger than {bound} bytes")),
        "{}",
        text(&output.stderr)
    );
    // At the bound it is read.
    padded.pop();
    std::fs::write(&big, &padded).expect("written");
    let output = import.run(&["import", &big_arg, "--dry-run"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(!std::path::Path::new(&import.state).exists());
}

#[test]
fn import_echoes_a_files_long_names_cut() {
    let long = "Z".repeat(100_000);
    let mut servers = serde_json::Map::new();
    servers.insert(format!("{long}@"), json!({"command": "x"}));
    let mut odd = serde_json::Map::new();
    odd.insert("command".into(), json!("x"));
    odd.insert(long.clone(), json!(true));
    servers.insert("odd".into(), Value::Object(odd));
    let file = json!({ "mcpServers": servers });
    let mut import = Import::new("claude_desktop_config.json", &file.to_string(), &[]);
    let output = import.import(&["--dry-run"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let shown = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(shown.len() < 2_000, "{} bytes", shown.len());
    assert!(shown.contains("(100001 characters)"), "{shown}");
    assert!(shown.contains("(100000 characters)"), "{shown}");
    let output = import.run(&[
        "import",
        &import.file.display().to_string(),
        "--format",
        &long,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).len() < 400,
        "{}",
        text(&output.stderr).len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_connects_at_most_its_concurrency_at_once() {
    use plurnk_mcp_fixture::probe::Probe;
    const ENTRIES: usize = 5;
    const AT_ONCE: usize = 2;
    let probe = Probe::start().await;
    let servers: serde_json::Map<String, Value> = (0..ENTRIES)
        .map(|n| {
            let args = json!([
                "fixture",
                "--name",
                format!("s{n}"),
                "--probe",
                probe.address(),
                "--hold-lists"
            ]);
            (format!("s{n}"), json!({"command": EXE, "args": args}))
        })
        .collect();
    let file = json!({ "mcpServers": servers });
    let import = Import::new("claude_desktop_config.json", &file.to_string(), &[]);
    let importing = {
        let file = import.file.display().to_string();
        let state = import.state.clone();
        let env = import.env.clone();
        tokio::task::spawn_blocking(move || {
            let concurrency = AT_ONCE.to_string();
            let args = [
                "--state",
                state.as_str(),
                "--workspace",
                "team",
                "import",
                file.as_str(),
                "--concurrency",
                concurrency.as_str(),
            ];
            run(&args, &env)
        })
    };
    let listed = |events: &[plurnk_mcp_fixture::probe::Event]| {
        events.iter().filter(|e| e.event == "tools/list").count()
    };
    let mut released = 0;
    while released < ENTRIES {
        let expected = (released + AT_ONCE).min(ENTRIES);
        assert!(
            probe
                .until(std::time::Duration::from_secs(20), |events| listed(events)
                    >= expected)
                .await,
            "{} listings began, {expected} expected",
            probe.count("tools/list")
        );
        // With this many held listing, no other entry may begin: one that had would be
        // seen here within half a second (a slow start only weakens the check).
        let more = probe
            .until(std::time::Duration::from_millis(500), |events| {
                listed(events) > expected
            })
            .await;
        assert!(
            !more,
            "{} connected at once",
            probe.count("tools/list") - released
        );
        released += probe.release_all().await;
    }
    let output = importing.await.expect("the import ran");
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    for n in 0..ENTRIES {
        let alias = format!("s{n}");
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(&alias) && line.ends_with("added")),
            "{alias}: {stdout}"
        );
    }
}

#[test]
fn import_without_the_install_gate_reports_each_refusal() {
    let file = json!({"mcpServers": {"local": {"command": EXE, "args": fixture_args("local")}}});
    let mut import = Import::new("claude_desktop_config.json", &file.to_string(), &[]);
    import.env.remove("PLURNK_MCP_ALLOW_ADD");
    let output = import.import(&[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("local") && l.contains("refused") && l.contains("403")),
        "{stdout}"
    );
    assert!(import.list().is_empty());
}

#[test]
fn a_tool_source_is_added_from_its_file_called_and_checked() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-source-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let installed = String::from_utf8_lossy(
        &Command::new("git")
            .arg("--version")
            .output()
            .expect("git")
            .stdout,
    )
    .trim()
    .to_owned();
    let declaration = |version: &str| {
        json!({"kind": "cli", "command": "git", "version": version,
               "tools": [{"name": "version", "description": "git's version", "args": ["--version"]}]})
        .to_string()
    };
    let file = dir.join("git.json");
    std::fs::write(&file, declaration(&installed)).expect("write");
    let state = scratch_state();
    let allow = env::map(&[("PLURNK_MCP_ALLOW_ADD", "true".into())]);
    let file_arg = file.display().to_string();
    let added = run(
        &["--state", &state, "add", "git", "--source", &file_arg],
        &allow,
    );
    assert!(added.status.success(), "{}", text(&added.stderr));
    let listed = run(&["--state", &state, "list"], &allow);
    let listed = text(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("git") && line.contains("cli") && line.contains("ready")),
        "{listed}"
    );
    let called = run(&["--state", &state, "call", "git", "version"], &allow);
    assert!(
        text(&called.stdout).contains(&installed),
        "{}",
        text(&called.stderr)
    );
    let checked = run(&["--state", &state, "source", "check"], &allow);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));
    assert!(
        text(&checked.stdout).contains("ready"),
        "{}",
        text(&checked.stdout)
    );

    // Written against another version: check says so, and exits 1.
    let old = dir.join("old.json");
    std::fs::write(&old, declaration("git version 0.0.1")).expect("write");
    let old_arg = old.display().to_string();
    let added = run(
        &["--state", &state, "add", "oldgit", "--source", &old_arg],
        &allow,
    );
    assert!(added.status.success(), "{}", text(&added.stderr));
    let checked = run(&["--state", &state, "source", "check", "--json"], &allow);
    assert_eq!(checked.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&checked.stdout).expect("JSON");
    let old_row = report
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["alias"] == "oldgit"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(old_row["status"], "version-drift", "{report}");
    assert!(
        old_row["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&installed)),
        "{report}"
    );

    // A bad declaration names the file, the field and the fix, and adds nothing.
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        json!({"kind": "cli", "command": "git", "tools": [{"name": "x", "params": [{"name": "p", "type": "colour"}]}]})
            .to_string(),
    )
    .expect("write");
    let bad_arg = bad.display().to_string();
    let refused = run(
        &["--state", &state, "add", "bad", "--source", &bad_arg],
        &allow,
    );
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    assert!(
        said.contains(&bad_arg) && said.contains("tools[0].params[0].type"),
        "{said}"
    );
    let listed = text(&run(&["--state", &state, "list"], &allow).stdout);
    assert!(!listed.contains("bad"), "{listed}");
    // A credential written into the declaration is refused by the action, as a 400 naming
    // the field and the fix, and never stored.
    const CLIENT_SECRET: &str = "cl1ent-Secret-Literal-2f7e";
    let literal = dir.join("literal.json");
    std::fs::write(
        &literal,
        json!({"kind": "cli", "command": "git", "env": {"CLIENT_SECRET": CLIENT_SECRET},
               "tools": [{"name": "version", "args": ["--version"]}]})
        .to_string(),
    )
    .expect("write");
    let literal_arg = literal.display().to_string();
    let refused = run(
        &[
            "--state",
            &state,
            "add",
            "secretive",
            "--source",
            &literal_arg,
        ],
        &allow,
    );
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    for fragment in [
        "400 literal-credential",
        "declaration.env.\"CLIENT_SECRET\"",
        "${NAME}",
        "PLURNK_MCP_WORKSPACE_ENV",
    ] {
        assert!(said.contains(fragment), "{fragment}: {said}");
    }
    assert!(!said.contains(CLIENT_SECRET), "{said}");
    let listed = text(&run(&["--state", &state, "list"], &allow).stdout);
    assert!(!listed.contains("secretive"), "{listed}");
    let mut stored = std::fs::read(&state).expect("the state file");
    for suffix in ["-wal", "-journal"] {
        stored.extend(std::fs::read(format!("{state}{suffix}")).unwrap_or_default());
    }
    assert!(!String::from_utf8_lossy(&stored).contains(CLIENT_SECRET));
}

/// What a server says (here a JSON-RPC error's message) reaches the
/// terminal without starting a line of its own, so it can never pass for the command's own
/// words, and without a control character.
#[test]
fn a_servers_text_never_forges_a_line_of_the_command_line() {
    let forged = "x\nplurnk-mcp: call succeeded\r\u{1b}[2K";
    let mut pairs = fixture("fx", &[]);
    pairs.push((
        "PLURNK_MCP_FX_ENV".to_owned(),
        json!({ "FORGE": forged }).to_string(),
    ));
    pairs.push(("PLURNK_MCP_ENABLED".to_owned(), json!(["fx"]).to_string()));
    let vars: BTreeMap<String, String> = pairs.into_iter().collect();
    let out = run(
        &[
            "call",
            "fx",
            "reveal",
            &json!({"name": "FORGE", "to": "error"}).to_string(),
        ],
        &vars,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("call succeeded"),
        "the server's words are shown: {stderr}"
    );
    for line in stderr.lines() {
        assert!(
            !line.starts_with("plurnk-mcp: call succeeded"),
            "a forged line {line:?} in {stderr}"
        );
        assert!(
            !line.contains('\r') && !line.contains('\u{1b}'),
            "a control character in {line:?}"
        );
    }
}

/// A service declaration whose script path is relative to its file is checked where its
/// reader finds it: `source check` says ready, as `status` does, not "relative to no file".
#[test]
fn source_check_resolves_a_relative_path_as_the_reader_does() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("relative-source-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("declarations")).expect("a directory");
    let script = dir.join("greet.sh");
    std::fs::write(
        &script,
        "#!/usr/bin/env bash\n# @description Greets someone.\n# @param name:string who to greet\necho hello\n",
    )
    .expect("the script");
    std::fs::write(
        dir.join("declarations/greet.json"),
        json!({"kind": "script", "name": "greet", "path": "../greet.sh", "runtime": "bash"})
            .to_string(),
    )
    .expect("the declaration");
    let vars = env::map(&[
        (
            "PLURNK_MCP_SOURCES",
            dir.join("declarations").display().to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["greet"]).to_string()),
    ]);
    let checked = run(&["source", "check", "--json"], &vars);
    let stdout = text(&checked.stdout);
    assert!(
        checked.status.success(),
        "{stdout} {}",
        text(&checked.stderr)
    );
    let rows: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(rows[0]["status"], "ready", "{rows}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "support/pty.rs"]
mod pty;

/// `plurnk-mcp <args>` with exactly `vars` (plus PATH and HOME) and a fresh state file, as a
/// command for a terminal; `piped` runs it as `plurnk-mcp … | cat` from a shell, so its
/// output is a pipe while its stderr is still the terminal.
fn terminal_command(args: &[&str], vars: &BTreeMap<String, String>, piped: bool) -> Command {
    let state = scratch_state();
    let mut command = if piped {
        let mut shell = Command::new("sh");
        shell.args(["-c", "\"$0\" \"$@\" | cat", EXE]);
        shell
    } else {
        Command::new(EXE)
    };
    command.args(["--state", &state]).args(args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command.env("TERM", "xterm").envs(vars);
    command
}

/// 200 fixture servers and one more, `last`: with `hold` it answers after sleeping that long
/// (a fixture started late), without it never (held until the connect timeout,
/// `connect_ms`).
fn two_hundred_and_one(hold: Option<u64>, connect_ms: u64) -> BTreeMap<String, String> {
    let aliases: Vec<String> = (0..200).map(|n| format!("s{n:03}")).collect();
    let mut vars: BTreeMap<String, String> = aliases
        .iter()
        .flat_map(|alias| fixture(alias, &[]))
        .collect();
    let (target, args) = match hold {
        Some(seconds) => (
            "/bin/sh",
            json!([
                "-c",
                format!("sleep {seconds}; exec \"$0\" fixture --name last"),
                EXE
            ]),
        ),
        None => ("/bin/sleep", json!(["3600"])),
    };
    vars.insert("PLURNK_MCP_LAST".into(), target.into());
    vars.insert("PLURNK_MCP_LAST_ARGS".into(), args.to_string());
    let mut enabled = aliases;
    enabled.push("last".into());
    vars.insert("PLURNK_MCP_ENABLED".into(), json!(enabled).to_string());
    vars.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), connect_ms.to_string());
    vars
}

#[test]
fn hydration_shows_its_progress_on_a_terminal_and_none_when_piped_or_json() {
    let bound = std::time::Duration::from_secs(120);
    // On a terminal: the line counts the servers and names the one pending longest, in the
    // end the one that answers 8 s late (the others have 30 s, which they never need).
    let mut shown = pty::Terminal::spawn(
        terminal_command(&["status"], &two_hundred_and_one(Some(8), 30_000), false),
        200,
        50,
    );
    let status = shown.wait(bound).expect("status ends");
    let text = shown.text();
    assert!(status.success(), "{status:?}: {text}");
    let progress: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("connecting workspace \"default\": "))
        .collect();
    assert!(!progress.is_empty(), "no progress line: {text}");
    assert!(
        progress
            .iter()
            .any(|line| line.contains(" ready, ") && line.contains(" pending (slowest: ")),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|line| line.contains("200 ready, 0 unavailable, 1 pending (slowest: last, ")),
        "the last one pending is named: {progress:?}"
    );
    // The table follows, each row a line of its own.
    assert!(row_says(&text, "last", "ready"), "{text}");
    assert!(row_says(&text, "s199", "ready"), "{text}");

    // Piped, and as JSON, on the same terminal (stderr is still one): no line at all. The
    // two run at once, their servers held for 2 s by the one that never answers.
    let quiet = two_hundred_and_one(None, 2_000);
    let mut piped = pty::Terminal::spawn(terminal_command(&["status"], &quiet, true), 200, 50);
    let mut json = pty::Terminal::spawn(
        terminal_command(&["status", "--json"], &quiet, false),
        200,
        50,
    );
    for (terminal, what) in [(&mut piped, "piped"), (&mut json, "--json")] {
        let status = terminal.wait(bound).expect("status ends");
        let raw = terminal.raw();
        assert!(status.success(), "{what}: {status:?}: {raw}");
        assert!(raw.contains("s199"), "{what}: the output is there: {raw}");
        assert!(
            !raw.contains("connecting workspace") && !raw.contains("slowest"),
            "{what} shows progress: {raw}"
        );
    }
}

/// The lines of `text` that are `alias`'s row in a status table and say `state`.
fn row_says(text: &str, alias: &str, state: &str) -> bool {
    text.lines().any(|line| {
        let mut cells = line.split_whitespace();
        cells.next() == Some(alias) && cells.nth(1) == Some(state)
    })
}

#[test]
fn status_watch_on_a_short_terminal_draws_what_fits_and_says_how_many_more() {
    let bound = std::time::Duration::from_secs(30);
    let aliases: Vec<String> = (0..6).map(|n| format!("s{n}")).collect();
    let mut vars: BTreeMap<String, String> = aliases
        .iter()
        .flat_map(|alias| fixture(alias, &[]))
        .collect();
    vars.insert("PLURNK_MCP_ENABLED".into(), json!(aliases).to_string());
    // Six rows: the header, three servers and the line that counts the rest, and the cursor's
    // row. A table taller than the terminal would scroll off, and each redraw would leave a
    // copy behind.
    let mut watched = pty::Terminal::spawn(
        terminal_command(&["status", "--watch"], &vars, false),
        120,
        6,
    );
    assert!(
        wait::until_blocking(bound, || watched.text().contains("… 3 more servers")),
        "{}",
        watched.text()
    );
    watched.type_in("\u{3}");
    assert!(
        watched.wait(bound).is_some(),
        "the watch ends on Ctrl-C: {}",
        watched.text()
    );
}

#[test]
fn status_watch_shows_a_killed_server_go_unavailable_and_come_back_and_ends_on_ctrl_c() {
    let bound = std::time::Duration::from_secs(30);
    let mark = format!("watch-{}", std::process::id());
    let mut vars: BTreeMap<String, String> = fixture("alpha", &[])
        .into_iter()
        .chain(fixture("beta", &[]))
        .collect();
    for alias in ["alpha", "beta"] {
        vars.insert(
            format!("PLURNK_MCP_{}_ENV", alias.to_uppercase()),
            json!({"TEST_MARK": format!("{mark}-{alias}")}).to_string(),
        );
    }
    vars.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["alpha", "beta"]).to_string(),
    );
    let mut watched = pty::Terminal::spawn(
        terminal_command(&["status", "--watch"], &vars, false),
        160,
        40,
    );
    assert!(
        wait::until_blocking(bound, || {
            let text = watched.text();
            row_says(&text, "alpha", "ready") && row_says(&text, "beta", "ready")
        }),
        "{}",
        watched.text()
    );
    let alpha = marked(&format!("{mark}-alpha"));
    assert_eq!(alpha.len(), 1, "{alpha:?}");
    let before = watched.raw().len();
    // SAFETY: a signal to a fixture process this test's command started.
    unsafe {
        libc::kill(alpha[0].0, libc::SIGKILL);
    }
    // The same command, never run again, shows it go and come back.
    let after = |watched: &pty::Terminal| pty::plain(&watched.raw()[before..]);
    assert!(
        wait::until_blocking(bound, || row_says(&after(&watched), "alpha", "unavailable")),
        "{}",
        after(&watched)
    );
    assert!(
        wait::until_blocking(bound, || {
            let text = after(&watched);
            let gone = text.find("unavailable").unwrap_or(text.len());
            row_says(&text[gone..], "alpha", "ready")
        }),
        "{}",
        after(&watched)
    );
    let raw = watched.raw()[before..].to_owned();
    // The change is highlighted (reverse video), and the row keeps the Problem it had.
    assert!(raw.contains("\u{1b}[7m"), "{raw:?}");
    let text = pty::plain(&raw);
    assert!(
        text.lines()
            .any(|line| line.starts_with("alpha") && line.contains(" s ago: ")),
        "{text}"
    );
    assert!(
        !row_says(&text, "beta", "unavailable"),
        "beta never went: {text}"
    );
    // Ctrl-C on the terminal: the servers are closed and nothing is left behind.
    watched.type_in("\u{3}");
    let status = watched.wait(bound).expect("the watch ends on Ctrl-C");
    assert_eq!(status.code(), Some(130), "{}", watched.text());
    assert!(
        watched.text().contains("closing every server"),
        "{}",
        watched.text()
    );
    assert!(
        wait::until_blocking(bound, || marked(&mark).is_empty()),
        "left behind: {:?}",
        marked(&mark)
    );
}
