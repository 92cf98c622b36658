//! The commands over real servers: configuration faults at once, status, tools, call and
//! exec, the demo, third-party peers, workspace actions, a sentinel secret through every
//! output, metrics beside a command, tool sources.

#[allow(unused_imports)]
use super::*;

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
            vec![(
                "PLURNK_MCP_SPACED",
                "python3 zq-served.py --token zq-secret",
            )],
            vec![
                "PLURNK_MCP_SPACED",
                "PLURNK_MCP_SPACED_ARGS",
                "a command line (4 words)",
                "the program alone",
            ],
        ),
        (
            "a path and its arguments with no _ARGS",
            vec![("PLURNK_MCP_SHELLED", "/bin/sh -c true")],
            vec!["PLURNK_MCP_SHELLED_ARGS", "a command line (3 words)"],
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
    // A command line is never quoted, not a word of it: it can carry a token.
    assert!(
        !stderr.contains("zq-"),
        "a command line was quoted:\n{stderr}"
    );
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

#[test]
fn a_sentinel_secret_in_every_field_appears_in_no_output() {
    // One secret, referenced from every field that can carry one, and reflected back by the
    // servers (as the stdio server's name, its environment, the HTTP headers it received).
    const SENTINEL: &str = "SeNtInEl-7f3a9c-XyZ";
    let web = HttpFixture::start(&[]);
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
