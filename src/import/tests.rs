//! The readers against files written from each client's documentation.

use super::*;
use crate::config::{McpAuthorization, McpServerDefinition, Transport};

/// A literal credential that must leave the plan only as a `${NAME}` reference.
const SECRET: &str = "ghp_SeNtInEl4d8f2a";
const OTHER_SECRET: &str = "sk-OtHeRsEcReT-91c3";

fn planned<'a>(plan: &'a Plan, alias: &str) -> &'a Planned {
    plan.servers
        .iter()
        .find(|server| server.alias() == alias)
        .unwrap_or_else(|| panic!("{alias} is planned: {plan:#?}"))
}

fn reason<'a>(plan: &'a Plan, source: &str) -> &'a NotCarried {
    &plan
        .skipped
        .iter()
        .find(|skipped| skipped.source == source)
        .unwrap_or_else(|| panic!("{source} is skipped: {plan:#?}"))
        .reason
}

fn wire(server: &Planned) -> McpServerDefinition {
    McpServerDefinition::try_from(&server.definition).expect("a wire form")
}

/// Nothing the plan shows (Debug, reasons, notes, the wire forms it stores) holds a secret.
fn assert_no_secret(plan: &Plan) {
    let mut shown = format!("{plan:?}");
    for server in &plan.servers {
        shown.push_str(&serde_json::to_string(&wire(server)).expect("JSON"));
    }
    for skipped in &plan.skipped {
        shown.push_str(&skipped.reason.to_string());
    }
    for secret in [SECRET, OTHER_SECRET] {
        assert!(!shown.contains(secret), "a secret is shown:\n{shown}");
    }
}

#[test]
fn claude_desktop_moves_literal_secrets_out_and_keeps_the_rest() {
    // The shape of the quickstart's examples: stdio servers with args and env.
    let text = format!(
        r#"{{
  "mcpServers": {{
    "github": {{
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {{ "GITHUB_PERSONAL_ACCESS_TOKEN": "{SECRET}", "LOG_LEVEL": "debug" }}
    }},
    "filesystem": {{
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/you/projects"],
      "cwd": "/Users/you"
    }},
    "remote": {{ "url": "https://mcp.example.test/mcp", "headers": {{ "Authorization": "Bearer {OTHER_SECRET}" }} }}
  }},
  "globalShortcut": "Ctrl+Space"
}}"#
    );
    let plan = plan(&text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    assert!(plan.skipped.is_empty(), "{plan:#?}");
    let github = planned(&plan, "github");
    assert!(github.enabled);
    let McpServerDefinition::Stdio(stdio) = wire(github) else {
        panic!("stdio");
    };
    assert_eq!(stdio.command, "npx");
    assert_eq!(
        stdio.env["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_PERSONAL_ACCESS_TOKEN}"
    );
    // Every literal value is moved, whatever its name says.
    assert_eq!(stdio.env["LOG_LEVEL"], "${LOG_LEVEL}");
    assert_eq!(
        github.introduced,
        vec![
            Introduced {
                variable: "GITHUB_PERSONAL_ACCESS_TOKEN".into(),
                from: "env GITHUB_PERSONAL_ACCESS_TOKEN".into(),
            },
            Introduced {
                variable: "LOG_LEVEL".into(),
                from: "env LOG_LEVEL".into(),
            }
        ]
    );
    let filesystem = planned(&plan, "filesystem");
    assert!(filesystem.introduced.is_empty());
    assert!(
        matches!(filesystem.definition.transport(), Transport::Stdio(s) if s.cwd.as_deref() == Some("/Users/you"))
    );
    // A literal bearer header becomes the bearer authorization, named after the alias.
    let McpServerDefinition::Http(http) = wire(planned(&plan, "remote")) else {
        panic!("http");
    };
    assert!(http.headers.is_empty());
    assert_eq!(
        http.authorization,
        Some(McpAuthorization::Bearer {
            token: "${REMOTE_TOKEN}".into()
        })
    );
    assert_eq!(
        plan.variables(),
        BTreeSet::from([
            "GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(),
            "LOG_LEVEL".to_owned(),
            "REMOTE_TOKEN".to_owned()
        ])
    );
    assert_eq!(
        planned(&plan, "remote").target(),
        "https://mcp.example.test/<redacted>"
    );
    assert_no_secret(&plan);
}

#[test]
fn cursor_carries_env_references_disabled_entries_and_reports_sse() {
    let text = format!(
        r#"{{
  "mcpServers": {{
    "userjot": {{
      "url": "https://api.userjot.test/v1/mcp",
      "headers": {{ "Authorization": "Bearer ${{env:USERJOT_API_TOKEN}}", "X-Client": "cursor" }}
    }},
    "holistics": {{
      "type": "streamable-http",
      "url": "https://holistics.test/mcp",
      "headers": {{ "X-Holistics-Key": "{SECRET}" }}
    }},
    "server-name": {{ "command": "npx", "args": ["-y", "mcp-server"], "env": {{ "API_KEY": "value-of-it" }}, "disabled": true }},
    "old-sse": {{ "type": "sse", "url": "http://example.test:8000/sse" }},
    "signed-in": {{ "url": "https://oauth.test/mcp", "auth": {{ "CLIENT_ID": "abc" }} }}
  }}
}}"#
    );
    assert_eq!(
        Format::detect("/home/u/.cursor/mcp.json", &text),
        Format::Cursor
    );
    let plan = plan(&text, Format::Cursor, &Environment::default()).expect("a plan");
    let McpServerDefinition::Http(userjot) = wire(planned(&plan, "userjot")) else {
        panic!("http");
    };
    assert_eq!(
        userjot.authorization,
        Some(McpAuthorization::Bearer {
            token: "${USERJOT_API_TOKEN}".into()
        })
    );
    assert_eq!(userjot.headers["X-Client"], "${USERJOT_X_CLIENT}");
    assert_eq!(
        planned(&plan, "userjot").introduced,
        [Introduced {
            variable: "USERJOT_X_CLIENT".into(),
            from: "header X-Client".into(),
        }]
    );
    let McpServerDefinition::Http(holistics) = wire(planned(&plan, "holistics")) else {
        panic!("http");
    };
    assert_eq!(
        holistics.headers["X-Holistics-Key"],
        "${HOLISTICS_X_HOLISTICS_KEY}"
    );
    let disabled = planned(&plan, "server-name");
    assert!(!disabled.enabled);
    assert_eq!(disabled.introduced[0].variable, "API_KEY");
    assert_eq!(reason(&plan, "old-sse"), &NotCarried::Sse);
    assert!(matches!(reason(&plan, "signed-in"), NotCarried::OAuth { field } if field == "auth"));
    assert_no_secret(&plan);
}

#[test]
fn vscode_reads_jsonc_and_reports_inputs_env_files_and_editor_variables() {
    // The reference's shapes: typed servers, an `inputs` array, comments, a trailing comma.
    let text = r#"{
  // Servers of this workspace.
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }
  ],
  "servers": {
    "Perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" }
    },
    "fetch": { "type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "envFile": "${workspaceFolder}/.env" },
    "github": { "type": "http", "url": "https://api.githubcopilot.test/mcp", "headers": { "Authorization": "Bearer ${env:GITHUB_TOKEN}" } },
    "memory": { "type": "stdio", "command": "npx", "args": ["-y", "server-memory"], "env": { "MEMORY_FILE_PATH": "${userHome}/memory.json" } },
    "here": { "type": "stdio", "command": "node", "args": ["${workspaceFolder}/build/index.js"] },
    /* a trailing comma, as VS Code allows */
  },
}"#;
    assert_eq!(Format::detect("/p/.vscode/mcp.json", text), Format::VsCode);
    let plan = plan(text, Format::VsCode, &Environment::default()).expect("a plan");
    assert!(matches!(
        reason(&plan, "Perplexity"),
        NotCarried::InputVariable { field, id } if field == "env.PERPLEXITY_API_KEY" && id == "perplexity-key"
    ));
    assert_eq!(reason(&plan, "fetch"), &NotCarried::EnvFile);
    assert!(matches!(
        reason(&plan, "here"),
        NotCarried::EditorVariable { variable, .. } if variable == "workspaceFolder"
    ));
    let McpServerDefinition::Http(github) = wire(planned(&plan, "github")) else {
        panic!("http");
    };
    assert_eq!(
        github.authorization,
        Some(McpAuthorization::Bearer {
            token: "${GITHUB_TOKEN}".into()
        })
    );
    let McpServerDefinition::Stdio(memory) = wire(planned(&plan, "memory")) else {
        panic!("stdio");
    };
    assert_eq!(memory.env["MEMORY_FILE_PATH"], "${HOME}/memory.json");
    // A settings.json keeps the same list under "mcp".
    let settings = r#"{"editor.fontSize": 14, "mcp": {"servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}}"#;
    assert_eq!(Format::detect("settings.json", settings), Format::VsCode);
    assert_eq!(
        super::plan(settings, Format::VsCode, &Environment::default())
            .expect("a plan")
            .servers
            .len(),
        1
    );
}

#[test]
fn codex_maps_its_fields_and_reports_what_it_cannot() {
    // The reference's `[mcp_servers.<id>]` keys.
    let text = format!(
        r#"
model = "gpt-5"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
cwd = "/srv/docs"
env_vars = ["HOME", {{ name = "DOCS_INDEX" }}]
startup_timeout_sec = 20
tool_timeout_sec = 45
enabled_tools = ["search", "open", "delete"]
disabled_tools = ["delete"]

[mcp_servers.docs.env]
DOCS_API_KEY = "{SECRET}"
MODE = "fast"

[mcp_servers.figma]
url = "https://mcp.figma.test/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"
http_headers = {{ "X-Figma-Region" = "us-east-1", "X-Api-Key" = "{OTHER_SECRET}" }}
env_http_headers = {{ "X-Org" = "FIGMA_ORG" }}
enabled = false

[mcp_servers.linear]
url = "https://mcp.linear.test/mcp"
scopes = ["read"]

[mcp_servers.trimmed]
command = "trimmed-mcp"
disabled_tools = ["rm"]

[mcp_servers.sandboxed]
command = "x"
experimental_sandbox = true
"#
    );
    assert_eq!(
        Format::detect("/home/u/.codex/config.toml", &text),
        Format::Codex
    );
    let plan = plan(&text, Format::Codex, &Environment::default()).expect("a plan");
    let docs = planned(&plan, "docs");
    let McpServerDefinition::Stdio(stdio) = wire(docs) else {
        panic!("stdio");
    };
    assert_eq!(stdio.env["DOCS_API_KEY"], "${DOCS_API_KEY}");
    assert_eq!(stdio.env["HOME"], "${HOME}");
    assert_eq!(stdio.env["DOCS_INDEX"], "${DOCS_INDEX}");
    assert_eq!(stdio.env["MODE"], "${MODE}");
    assert_eq!(
        stdio.tools,
        Some(vec!["search".to_owned(), "open".to_owned()])
    );
    assert_eq!(docs.notes.len(), 2, "{:?}", docs.notes);
    let figma = planned(&plan, "figma");
    assert!(!figma.enabled);
    let McpServerDefinition::Http(http) = wire(figma) else {
        panic!("http");
    };
    assert_eq!(
        http.authorization,
        Some(McpAuthorization::Bearer {
            token: "${FIGMA_OAUTH_TOKEN}".into()
        })
    );
    assert_eq!(http.headers["X-Figma-Region"], "${FIGMA_X_FIGMA_REGION}");
    assert_eq!(http.headers["X-Api-Key"], "${FIGMA_X_API_KEY}");
    assert_eq!(http.headers["X-Org"], "${FIGMA_ORG}");
    assert!(matches!(reason(&plan, "linear"), NotCarried::OAuth { field } if field == "scopes"));
    assert_eq!(reason(&plan, "trimmed"), &NotCarried::ExcludedTools);
    assert!(matches!(
        reason(&plan, "sandboxed"),
        NotCarried::UnknownField { field } if field == "experimental_sandbox"
    ));
    assert_no_secret(&plan);
}

#[test]
fn names_fold_to_aliases_and_collisions_skip_every_claimant() {
    let text = r#"{"mcpServers": {
        "My_Server": {"command": "a"},
        "GitHub": {"command": "a"},
        "github": {"command": "a"},
        "1password": {"command": "a"},
        "github-tools": {"command": "a"},
        "enabled": {"command": "a"},
        "café": {"command": "a"},
        "@scope/pkg": {"command": "a"}
    }}"#;
    let plan = plan(text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    let aliases: BTreeSet<&str> = plan.servers.iter().map(Planned::alias).collect();
    assert_eq!(
        aliases,
        BTreeSet::from(["my-server", "scope-pkg"]),
        "{plan:#?}"
    );
    for source in ["GitHub", "github"] {
        assert!(
            matches!(reason(&plan, source), NotCarried::Collision { alias, .. } if alias == "github")
        );
    }
    for source in ["1password", "github-tools", "enabled", "café"] {
        assert_eq!(reason(&plan, source), &NotCarried::Unfoldable, "{source}");
    }
}

#[test]
fn one_variable_name_with_two_values_is_told_apart_by_alias() {
    let text = format!(
        r#"{{"mcpServers": {{
        "one": {{"command": "a", "env": {{"API_KEY": "{SECRET}"}}}},
        "two": {{"command": "a", "env": {{"API_KEY": "{OTHER_SECRET}"}}}},
        "three": {{"command": "a", "env": {{"API_KEY": "{SECRET}"}}}}
    }}}}"#
    );
    let plan = plan(&text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    let variable = |alias| planned(&plan, alias).introduced[0].variable.clone();
    // serde_json keeps keys sorted: one, three, two.
    assert_eq!(variable("one"), "API_KEY");
    assert_eq!(variable("three"), "API_KEY");
    assert_eq!(variable("two"), "TWO_API_KEY");
    assert_no_secret(&plan);
}

#[test]
fn unreadable_files_name_the_line_and_column() {
    let broken = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\" \"args\": []}\n  }\n}";
    let error =
        plan(broken, Format::ClaudeDesktop, &Environment::default()).expect_err("broken JSON");
    assert!(
        matches!(
            error,
            ImportError::Syntax {
                language: "JSON",
                line: Some(3),
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("at line 3, column"), "{error}");
    let broken = "[mcp_servers.a]\ncommand = \"x\"\nargs = [\"unterminated\n";
    let error = plan(broken, Format::Codex, &Environment::default()).expect_err("broken TOML");
    assert!(
        matches!(
            error,
            ImportError::Syntax {
                language: "TOML",
                line: Some(3),
                ..
            }
        ),
        "{error:?}"
    );
    let error = plan(
        r#"{"servers": {}}"#,
        Format::ClaudeDesktop,
        &Environment::default(),
    )
    .expect_err("no mcpServers");
    assert!(error.to_string().contains("\"mcpServers\""), "{error}");
    assert!(error.to_string().contains("--format"), "{error}");
}

#[test]
fn entries_with_wrong_shapes_are_skipped_with_the_field() {
    let text = r#"{"mcpServers": {
        "both": {"command": "a", "url": "https://x.test/mcp"},
        "none": {"env": {}},
        "args": {"command": "a", "args": "--fast"},
        "odd": {"type": "websocket", "url": "wss://x.test"},
        "mixed": {"url": "https://x.test/mcp", "env": {"A": "b"}},
        "text": "npx server",
        "bad-url": {"url": "https://"}
    }}"#;
    let plan = plan(text, Format::Cursor, &Environment::default()).expect("a plan");
    assert!(plan.servers.is_empty(), "{plan:#?}");
    assert_eq!(reason(&plan, "both"), &NotCarried::BothTargets);
    assert_eq!(reason(&plan, "none"), &NotCarried::NoTarget);
    assert!(
        matches!(reason(&plan, "args"), NotCarried::WrongType { field, .. } if field == "args")
    );
    assert_eq!(reason(&plan, "odd"), &NotCarried::UnknownType);
    assert!(
        matches!(reason(&plan, "mixed"), NotCarried::WrongType { field, .. } if field == "env")
    );
    assert_eq!(reason(&plan, "text"), &NotCarried::NotAnObject);
    assert!(matches!(reason(&plan, "bad-url"), NotCarried::Invalid(_)));
}

#[test]
fn formats_are_named_and_detected() {
    for format in Format::ALL {
        assert_eq!(Format::from_name(format.name()), Some(format));
    }
    assert_eq!(Format::from_name("claude"), Some(Format::ClaudeDesktop));
    assert_eq!(Format::from_name("zed"), None);
    let claude = r#"{"mcpServers": {"a": {"command": "x"}}}"#;
    assert_eq!(
        Format::detect("claude_desktop_config.json", claude),
        Format::ClaudeDesktop
    );
    let cursor = r#"{"mcpServers": {"a": {"command": "x", "disabled": true}}}"#;
    assert_eq!(Format::detect("mcp.json", cursor), Format::Cursor);
    assert_eq!(
        Format::detect("config", "[mcp_servers.a]\ncommand = \"x\"\n"),
        Format::Codex
    );
    assert_eq!(
        Format::detect("/x/.vscode/mcp.json", "{ broken"),
        Format::VsCode
    );
}

#[test]
fn every_credential_shape_is_moved_into_a_reference_and_none_is_kept() {
    const PAT: &str = "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o";
    const SHAPED: &str = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    let text = format!(
        r#"{{"mcpServers": {{
        "gh": {{
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github", "--api-key", "k3y-V4lue-1", "--token=t0k-V4lue-2"],
            "env": {{"GH_PAT": "{PAT}", "DATABASE_URL": "postgres://app:pa55-W0rd-3@db:5432/app",
                     "SETTINGS": "{SHAPED}", "DB_PASSWORD": "pa$$w0rd", "LOG_LEVEL": "debug"}}
        }},
        "web": {{
            "url": "https://user:url-Pa55-4@mcp.example.test/mcp?api_key=q-K3y-5&v=1",
            "headers": {{"X-Auth": "hdr-Au7h-6", "X-Trace": "on"}}
        }}
    }}}}"#
    );
    let plan = plan(&text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    assert!(plan.skipped.is_empty(), "{plan:#?}");
    let gh = planned(&plan, "gh");
    let McpServerDefinition::Stdio(stdio) = wire(gh) else {
        panic!("stdio");
    };
    assert_eq!(
        stdio.args,
        [
            "-y",
            "@modelcontextprotocol/server-github",
            "--api-key",
            "${GH_API_KEY}",
            "--token=${GH_TOKEN}"
        ]
    );
    // Every literal value of the environment is moved whole, whatever its name or shape.
    assert_eq!(stdio.env["GH_PAT"], "${GH_PAT}");
    assert_eq!(stdio.env["DATABASE_URL"], "${DATABASE_URL}");
    assert_eq!(stdio.env["SETTINGS"], "${SETTINGS}");
    // A `$` that starts no reference is part of the secret, not a reference.
    assert_eq!(stdio.env["DB_PASSWORD"], "${DB_PASSWORD}");
    assert_eq!(stdio.env["LOG_LEVEL"], "${LOG_LEVEL}");
    let from = |server: &Planned| -> Vec<(String, String)> {
        server
            .introduced
            .iter()
            .map(|i| (i.variable.clone(), i.from.clone()))
            .collect()
    };
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert_eq!(
        from(gh),
        pairs(&[
            ("DATABASE_URL", "env DATABASE_URL"),
            ("DB_PASSWORD", "env DB_PASSWORD"),
            ("GH_PAT", "env GH_PAT"),
            ("LOG_LEVEL", "env LOG_LEVEL"),
            ("SETTINGS", "env SETTINGS"),
            ("GH_API_KEY", "args[3] (the value of --api-key)"),
            ("GH_TOKEN", "args[4] (the value of --token)"),
        ])
    );
    let web = planned(&plan, "web");
    let McpServerDefinition::Http(http) = wire(web) else {
        panic!("http");
    };
    assert_eq!(
        http.url,
        "https://user:${WEB_PASSWORD}@mcp.example.test/mcp?api_key=${WEB_API_KEY}&v=1"
    );
    assert_eq!(http.headers["X-Auth"], "${WEB_X_AUTH}");
    assert_eq!(http.headers["X-Trace"], "${WEB_X_TRACE}");
    assert_eq!(
        from(web),
        pairs(&[
            ("WEB_X_AUTH", "header X-Auth"),
            ("WEB_X_TRACE", "header X-Trace"),
            ("WEB_PASSWORD", "url (its password)"),
            ("WEB_API_KEY", "url (its query value \"api_key\")"),
        ])
    );
    // What is kept passes the one refusal, and shows no value.
    for server in &plan.servers {
        assert_eq!(
            server.definition.literal_credentials(),
            Vec::<String>::new()
        );
    }
    let shown = format!("{plan:?}")
        + &plan
            .servers
            .iter()
            .map(|server| serde_json::to_string(&wire(server)).expect("JSON"))
            .collect::<String>();
    for value in [
        PAT,
        SHAPED,
        "pa55-W0rd-3",
        "pa$$w0rd",
        "k3y-V4lue-1",
        "t0k-V4lue-2",
        "url-Pa55-4",
        "q-K3y-5",
        "hdr-Au7h-6",
    ] {
        assert!(!shown.contains(value), "{value} is kept:\n{shown}");
    }
}

#[test]
fn a_moved_secret_never_takes_a_name_the_file_refers_to() {
    let text = format!(
        r#"{{"mcpServers": {{
        "a": {{"command": "x", "env": {{"GH_PAT": "{SECRET}"}}}},
        "b": {{"command": "x", "env": {{"UPSTREAM": "${{GH_PAT}}", "HOME_DIR": "${{env:A_TOKEN}}"}}}},
        "c": {{"command": "x", "env": {{"A_TOKEN": "{OTHER_SECRET}"}}}}
    }}}}"#
    );
    let plan = plan(&text, Format::Cursor, &Environment::default()).expect("a plan");
    // `GH_PAT` and `A_TOKEN` hold what the file refers to: the literals go elsewhere.
    assert_eq!(planned(&plan, "a").introduced[0].variable, "A_GH_PAT");
    assert_eq!(planned(&plan, "c").introduced[0].variable, "C_A_TOKEN");
    assert_no_secret(&plan);
}

#[test]
fn a_credential_mixed_with_references_is_not_carried_and_says_where() {
    let text = r#"{"mcpServers": {
        "mixed": {"command": "x", "env": {"API_KEY": "prefix-${REST}"}},
        "flag": {"command": "x", "args": ["--token=abc${REST}"]}
    }}"#;
    let plan = plan(text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    for (source, field) in [
        ("mixed", "env.\"API_KEY\""),
        ("flag", "args[0] (the value of --token)"),
    ] {
        let reason = reason(&plan, source);
        assert!(
            matches!(reason, NotCarried::LiteralCredential { fields } if fields == field),
            "{reason:?}"
        );
        assert!(reason.to_string().contains("${NAME}"), "{reason}");
    }
}

#[test]
fn names_and_fields_from_the_file_are_echoed_cut() {
    let long = "Q".repeat(10_000);
    let mut servers = serde_json::Map::new();
    servers.insert(
        "unknown".into(),
        json_value(&format!(r#"{{"command": "x", "{long}": 1}}"#)),
    );
    servers.insert(
        "input".into(),
        json_value(&format!(
            r#"{{"command": "x", "env": {{"A": "${{input:{long}}}"}}}}"#
        )),
    );
    servers.insert(
        "unset".into(),
        json_value(&format!(r#"{{"command": "x", "env": {{"{long}": null}}}}"#)),
    );
    // A thousand names folding to one alias: each reason names three others and counts the
    // rest.
    for n in 0..1000 {
        servers.insert(
            format!("same{}", "_".repeat(n)),
            json_value(r#"{"command": "x"}"#),
        );
    }
    let text = serde_json::json!({ "mcpServers": servers }).to_string();
    let plan = plan(&text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    for skipped in &plan.skipped {
        let said = skipped.reason.to_string();
        assert!(said.len() < 400, "{} bytes: {}", said.len(), &said[..400]);
    }
    let collision = reason(&plan, "same").to_string();
    assert!(collision.contains("and 996 more"), "{collision}");
    assert!(
        reason(&plan, "unknown")
            .to_string()
            .contains("(10000 characters)")
    );
}

fn json_value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON")
}

#[test]
fn every_literal_env_and_header_value_is_moved_whatever_its_name_or_shape() {
    const HOOK: &str =
        "https://hooks.slack.com/services/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";
    const HEX: &str = "3f9a0c4e1b7d2a6f8e5c9b0d4a1f7e3c2b6d8a90";
    let text = format!(
        r#"{{"mcpServers": {{
        "gh": {{ "command": "npx", "args": ["notify", "{HOOK}"],
                 "env": {{"SESSION": "s3ss-V4lue-7", "NOTIFY": "{HOOK}"}} }},
        "web": {{ "url": "https://mcp.example.test/mcp",
                  "headers": {{"X-Session": "s3ss-V4lue-8", "X-Access": "{HEX}"}} }}
    }}}}"#
    );
    let plan = plan(&text, Format::ClaudeDesktop, &Environment::default()).expect("a plan");
    let McpServerDefinition::Stdio(gh) = wire(planned(&plan, "gh")) else {
        panic!("stdio");
    };
    assert_eq!(gh.env["SESSION"], "${SESSION}");
    assert_eq!(gh.env["NOTIFY"], "${NOTIFY}");
    // A webhook URL in an argument is moved by its shape.
    assert_eq!(gh.args, ["notify", "${GH_URL}"]);
    let McpServerDefinition::Http(web) = wire(planned(&plan, "web")) else {
        panic!("http");
    };
    assert_eq!(web.headers["X-Session"], "${WEB_X_SESSION}");
    assert_eq!(web.headers["X-Access"], "${WEB_X_ACCESS}");
    let moved: Vec<(String, String)> = plan
        .servers
        .iter()
        .flat_map(|server| server.introduced.iter())
        .map(|introduced| (introduced.variable.clone(), introduced.from.clone()))
        .collect();
    assert!(
        moved.contains(&(
            "GH_URL".to_owned(),
            "args[1] (a webhook URL, whose path is its secret)".to_owned()
        )),
        "{moved:?}"
    );
    for server in &plan.servers {
        assert_eq!(
            server.definition.literal_credentials(),
            Vec::<String>::new()
        );
    }
    let shown = format!("{plan:?}")
        + &plan
            .servers
            .iter()
            .map(|server| serde_json::to_string(&wire(server)).expect("JSON"))
            .collect::<String>();
    for value in ["s3ss-V4lue-7", "s3ss-V4lue-8", HOOK, HEX] {
        assert!(!shown.contains(value), "{value} is kept:\n{shown}");
    }
}

#[test]
fn a_moved_literal_never_takes_a_variable_the_operator_holds_with_another_value() {
    let text = format!(
        r#"{{"mcpServers": {{
        "github": {{ "url": "https://mcp.attacker.test/mcp",
                     "headers": {{ "Authorization": "Bearer {SECRET}" }} }},
        "gh": {{ "command": "npx", "env": {{ "GITHUB_TOKEN": "{OTHER_SECRET}" }} }}
    }}}}"#
    );
    // The operator's own GITHUB_TOKEN: neither entry may be handed it.
    let operators = Environment::new([("GITHUB_TOKEN", "the-operators-real-token-0001")]);
    let first = plan(&text, Format::ClaudeDesktop, &operators).expect("a plan");
    let McpServerDefinition::Http(github) = wire(planned(&first, "github")) else {
        panic!("http");
    };
    assert_eq!(
        github.authorization,
        Some(McpAuthorization::Bearer {
            token: "${GITHUB_TOKEN_2}".into()
        })
    );
    let McpServerDefinition::Stdio(gh) = wire(planned(&first, "gh")) else {
        panic!("stdio");
    };
    assert_eq!(gh.env["GITHUB_TOKEN"], "${GH_GITHUB_TOKEN}");
    assert!(!first.variables().contains("GITHUB_TOKEN"), "{first:#?}");
    // Once the operator set the name a plan gave it, to the value it moved, it is that
    // value's: importing again names it again.
    let set = Environment::new([
        ("GITHUB_TOKEN", "the-operators-real-token-0001"),
        ("GITHUB_TOKEN_2", SECRET),
    ]);
    let again = plan(&text, Format::ClaudeDesktop, &set).expect("a plan");
    let McpServerDefinition::Http(github) = wire(planned(&again, "github")) else {
        panic!("http");
    };
    assert_eq!(
        github.authorization,
        Some(McpAuthorization::Bearer {
            token: "${GITHUB_TOKEN_2}".into()
        })
    );
    assert_no_secret(&first);
}
