//! `plurnk-mcp import`: each client's file, every credential shape moved out, the file and
//! concurrency bounds, the install gate.

#[allow(unused_imports)]
use super::*;

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
    let web = HttpFixture::start(&["--bearer", BEARER]);
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
    let web = HttpFixture::start(&["--bearer", BEARER]);
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
    let web = HttpFixture::start(&["--bearer", BEARER]);
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
    let web = HttpFixture::start(&["--bearer", BEARER]);
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
    let web = HttpFixture::start(&[]);
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
