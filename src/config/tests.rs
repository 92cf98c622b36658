//! Tests of the whole namespace read through `HostConfig::from_env`, as an operator would see it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

mod definitions;

fn load(vars: &[(&str, &str)]) -> Result<HostConfig, ConfigErrors> {
    HostConfig::from_env(vars.iter().copied())
}

fn faults(vars: &[(&str, &str)]) -> Vec<ConfigError> {
    match load(vars) {
        Ok(config) => panic!("expected faults, loaded {config:#?}"),
        Err(errors) => errors.into_vec(),
    }
}

/// The single fault `vars` produce; its message must name `variable`.
fn only_fault(vars: &[(&str, &str)], variable: &str) -> ConfigError {
    let mut all = faults(vars);
    assert_eq!(all.len(), 1, "expected one fault, got {all:#?}");
    let fault = all.remove(0);
    assert_eq!(fault.variable(), variable, "{fault}");
    assert!(
        fault.to_string().contains(variable),
        "message does not name {variable}: {fault}"
    );
    fault
}

fn stdio(config: &HostConfig, alias: &str) -> StdioDefinition {
    match config.server(alias).map(ServerDefinition::transport) {
        Some(Transport::Stdio(stdio)) => stdio.clone(),
        other => panic!("{alias} is not stdio: {other:?}"),
    }
}

fn http(config: &HostConfig, alias: &str) -> HttpDefinition {
    match config.server(alias).map(ServerDefinition::transport) {
        Some(Transport::Http(http)) => http.clone(),
        other => panic!("{alias} is not http: {other:?}"),
    }
}

// === reading ===

#[test]
fn empty_environment_gives_defaults() {
    let config = load(&[("PATH", "/bin"), ("plurnk_mcp_x", "not ours")]).unwrap();
    assert!(config.servers().is_empty());
    assert!(config.enabled().is_empty());
    assert!(config.expanded().is_empty());
    assert_eq!(config.connect_timeout(), Duration::from_millis(60_000));
    assert_eq!(config.request_timeout(), Duration::from_millis(60_000));
    // The whole map is kept for expansion, ours or not.
    assert_eq!(config.env().len(), 2);
    assert!(config.env().contains("PATH"));
    assert_eq!(
        HostConfig::default(),
        HostConfig::from_env(Vec::<(String, String)>::new()).unwrap()
    );
}

#[test]
fn stdio_server_with_companions() {
    let config = load(&[
        ("PLURNK_MCP_FS", "/opt/My Tools/mcp server"),
        ("PLURNK_MCP_FS_ARGS", r#"["--root", "/srv/data files", ""]"#),
        ("PLURNK_MCP_FS_CWD", "/srv"),
        ("PLURNK_MCP_FS_ENV", r#"{"API_KEY": "${KEY}", "MODE": ""}"#),
        ("KEY", "k"),
    ])
    .unwrap();
    let fs = stdio(&config, "fs");
    // One exact executable: the space is part of the path, never an argument split.
    assert_eq!(fs.command, "/opt/My Tools/mcp server");
    assert_eq!(fs.args, ["--root", "/srv/data files", ""]);
    assert_eq!(fs.cwd.as_deref(), Some("/srv"));
    // Kept unexpanded.
    assert_eq!(fs.env["API_KEY"], "${KEY}");
    assert_eq!(fs.env["MODE"], "");
}

#[test]
fn http_is_chosen_by_an_absolute_url() {
    let config = load(&[
        ("PLURNK_MCP_GITHUB", "https://api.githubcopilot.com/mcp/"),
        ("PLURNK_MCP_LOCAL", "http://127.0.0.1:8080/mcp"),
        ("PLURNK_MCP_SHOUTY", "HTTPS://EXAMPLE.COM/mcp"),
        ("PLURNK_MCP_TEMPLATED", "https://${MCP_HOST}/mcp"),
        ("PLURNK_MCP_HTTPD", "httpd"),
        ("PLURNK_MCP_REF", "${SERVER_BIN}"),
        ("MCP_HOST", "h"),
        ("SERVER_BIN", "/bin/s"),
    ])
    .unwrap();
    for alias in ["github", "local", "shouty", "templated"] {
        assert_eq!(
            config.server(alias).unwrap().transport().kind(),
            TransportKind::Http,
            "{alias}"
        );
    }
    assert_eq!(http(&config, "local").url, "http://127.0.0.1:8080/mcp");
    // The transport is chosen from the target as written: a pure reference is
    // an executable, so a URL must spell its scheme.
    assert_eq!(stdio(&config, "httpd").command, "httpd");
    assert_eq!(stdio(&config, "ref").command, "${SERVER_BIN}");
}

#[test]
fn http_server_with_companions() {
    let config = load(&[
        ("PLURNK_MCP_GITHUB", "https://api.githubcopilot.com/mcp/"),
        ("PLURNK_MCP_GITHUB_BEARER", "${GH_TOKEN}"),
        (
            "PLURNK_MCP_GITHUB_HEADERS",
            r#"{"X-Toolsets": "repos,issues"}"#,
        ),
        ("GH_TOKEN", "ghp_x"),
    ])
    .unwrap();
    let github = http(&config, "github");
    assert_eq!(github.bearer(), Some(&Secret::new("${GH_TOKEN}")));
    assert_eq!(
        github.authorization,
        Some(Authorization::bearer("${GH_TOKEN}"))
    );
    assert_eq!(github.headers["X-Toolsets"], "repos,issues");
}

#[test]
fn tools_absent_enables_all_and_empty_enables_none() {
    let config = load(&[
        ("PLURNK_MCP_ALL", "/bin/a"),
        ("PLURNK_MCP_NONE", "/bin/b"),
        ("PLURNK_MCP_NONE_TOOLS", "[]"),
        ("PLURNK_MCP_SOME", "/bin/c"),
        ("PLURNK_MCP_SOME_TOOLS", r#"["get", "push"]"#),
        ("PLURNK_MCP_SOME_READ", r#"["get"]"#),
        // Without _TOOLS, _READ names wait for the server's own list.
        ("PLURNK_MCP_ALL_READ", r#"["list"]"#),
    ])
    .unwrap();
    let all = config.server("all").unwrap();
    assert_eq!(all.tools(), None);
    assert!(all.enables_tool("anything"));
    assert!(all.is_read("list"));
    let none = config.server("none").unwrap();
    assert_eq!(none.tools(), Some(&[][..]));
    assert!(!none.enables_tool("anything"));
    let some = config.server("some").unwrap();
    assert!(some.enables_tool("push") && !some.enables_tool("delete"));
    assert!(some.is_read("get") && !some.is_read("push"));
}

#[test]
fn tool_summaries_may_hold_underscores() {
    let config = load(&[
        ("PLURNK_MCP_GITHUB", "https://h/mcp"),
        ("PLURNK_MCP_GITHUB_SUMMARY", "GitHub issues and pulls"),
        ("PLURNK_MCP_GITHUB_CREATE_ISSUE_SUMMARY", "Open an issue"),
        ("PLURNK_MCP_github_Take_Screenshot_summary", "Capture"),
    ])
    .unwrap();
    let github = config.server("github").unwrap();
    assert_eq!(github.summary(), Some("GitHub issues and pulls"));
    assert_eq!(github.tool_summary("create_issue"), Some("Open an issue"));
    assert_eq!(github.tool_summary("take-screenshot"), Some("Capture"));
    assert_eq!(github.tool_summary("create"), None);
    assert_eq!(
        github.tool_summaries().keys().collect::<Vec<_>>(),
        ["create_issue", "take_screenshot"]
    );
}

#[test]
fn hyphenated_aliases_and_their_companions() {
    let config = load(&[
        ("PLURNK_MCP_CHROME_DEVTOOLS", "npx"),
        (
            "PLURNK_MCP_CHROME_DEVTOOLS_ARGS",
            r#"["chrome-devtools-mcp"]"#,
        ),
        ("PLURNK_MCP_GITHUB", "https://h/mcp"),
        ("PLURNK_MCP_GITHUB_FOO", "/bin/foo"),
        ("PLURNK_MCP_TOOLS", "/bin/tools"),
        ("PLURNK_MCP_TOOLS_TOOLS", r#"["x"]"#),
    ])
    .unwrap();
    assert_eq!(
        config.servers().keys().collect::<Vec<_>>(),
        ["chrome-devtools", "github", "github-foo", "tools"]
    );
    assert_eq!(
        stdio(&config, "chrome-devtools").args,
        ["chrome-devtools-mcp"]
    );
    assert_eq!(
        config.server("tools").unwrap().tools(),
        Some(&["x".to_owned()][..])
    );
}

#[test]
fn nested_aliases_give_a_summary_to_the_longest() {
    let config = load(&[
        ("PLURNK_MCP_GITHUB", "https://h/mcp"),
        ("PLURNK_MCP_GITHUB_ENTERPRISE", "https://ghe/mcp"),
        ("PLURNK_MCP_GITHUB_ENTERPRISE_SUMMARY", "GHE"),
        ("PLURNK_MCP_GITHUB_ENTERPRISE_SEARCH_SUMMARY", "search GHE"),
        ("PLURNK_MCP_GITHUB_ENTERPRISE_BEARER", "${T}"),
        ("PLURNK_MCP_GITHUB_SEARCH_SUMMARY", "search"),
        ("T", "t"),
    ])
    .unwrap();
    let ghe = config.server("github-enterprise").unwrap();
    assert_eq!(ghe.summary(), Some("GHE"));
    assert_eq!(ghe.tool_summary("search"), Some("search GHE"));
    let github = config.server("github").unwrap();
    assert_eq!(github.summary(), None);
    assert_eq!(github.tool_summary("search"), Some("search"));
    // FIXME: a `github` tool named `enterprise_search` cannot be given a summary
    // companion while `github-enterprise` is declared; the longer alias wins.
    assert_eq!(github.tool_summary("enterprise_search"), None);
}

#[test]
fn globals() {
    let config = load(&[
        ("PLURNK_MCP_A", "/bin/a"),
        ("PLURNK_MCP_B", "/bin/b"),
        ("PLURNK_MCP_C-D", "/bin/cd"),
        ("PLURNK_MCP_ENABLED", r#"["a", "c-d"]"#),
        ("PLURNK_MCP_EXPANDED", r#"["c-d"]"#),
        ("PLURNK_MCP_CONNECT_TIMEOUT", "1500"),
        ("PLURNK_MCP_REQUEST_TIMEOUT", "007"),
    ])
    .unwrap();
    assert_eq!(config.enabled().iter().collect::<Vec<_>>(), ["a", "c-d"]);
    assert_eq!(config.expanded().iter().collect::<Vec<_>>(), ["c-d"]);
    assert_eq!(config.connect_timeout(), Duration::from_millis(1500));
    assert_eq!(config.request_timeout(), Duration::from_millis(7));

    let config = load(&[("PLURNK_MCP_A", "/bin/a"), ("PLURNK_MCP_ENABLED", "[]")]).unwrap();
    assert!(config.enabled().is_empty());
}

// === one test per fault ===

#[test]
fn fault_invalid_name() {
    let fault = only_fault(
        &[("PLURNK_MCP_1PASSWORD", "/bin/op")],
        "PLURNK_MCP_1PASSWORD",
    );
    assert!(matches!(fault, ConfigError::InvalidName { ref name, .. } if name == "1password"));
    only_fault(&[("PLURNK_MCP_", "/bin/x")], "PLURNK_MCP_");
    only_fault(&[("PLURNK_MCP_GIT.HUB", "/bin/x")], "PLURNK_MCP_GIT.HUB");
}

#[test]
fn fault_duplicate_after_folding() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_GitHub", "https://a/mcp"),
            ("PLURNK_MCP_GITHUB", "https://b/mcp"),
        ],
        "PLURNK_MCP_GITHUB",
    );
    let text = fault.to_string();
    assert!(
        text.contains("PLURNK_MCP_GITHUB and PLURNK_MCP_GitHub")
            && text.contains("server \"github\""),
        "{text}"
    );
    // `_` and `-` fold alike too, and companions and globals are settings like any other.
    let all = faults(&[
        ("PLURNK_MCP_A_B", "/bin/x"),
        ("PLURNK_MCP_a-b", "/bin/y"),
        ("PLURNK_MCP_A_B_ARGS", "[]"),
        ("PLURNK_MCP_a_b_args", "[]"),
        ("PLURNK_MCP_ENABLED", "[]"),
        ("PLURNK_MCP_enabled", "[]"),
    ]);
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(
        all.iter()
            .all(|f| matches!(f, ConfigError::DuplicateSetting { .. }))
    );
}

#[test]
fn names_the_executor_and_the_document_addresses_use_cannot_name_a_server() {
    let all = faults(&[
        ("PLURNK_MCP_WORKER", "/bin/x"),
        ("PLURNK_MCP_EXEC", "/bin/x"),
        ("PLURNK_MCP_HTTP", "https://h/mcp"),
    ]);
    let named: Vec<&str> = all
        .iter()
        .filter_map(|fault| match fault {
            ConfigError::NamespaceName { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(named.len(), 3, "{all:#?}");
    for name in ["worker", "exec", "http"] {
        assert!(named.contains(&name), "{name} in {named:?}");
    }
    let message = all[0].to_string();
    assert!(message.contains("choose another server name"), "{message}");
    let errors = ServerDefinition::from_target("worker", "/bin/x").unwrap_err();
    assert!(matches!(
        errors.errors(),
        [ConfigError::NamespaceName { .. }]
    ));
}

#[test]
fn fault_reserved_name() {
    let fault = only_fault(
        &[("PLURNK_MCP_ENABLED_ARGS", "[]")],
        "PLURNK_MCP_ENABLED_ARGS",
    );
    assert!(matches!(fault, ConfigError::ReservedName { ref name, .. } if name == "enabled"));
    let errors = ServerDefinition::from_target("connect-timeout", "/bin/x").unwrap_err();
    assert!(matches!(
        errors.errors(),
        [ConfigError::ReservedName { .. }]
    ));
}

#[test]
fn fault_orphan_companion() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "https://h/mcp"),
            ("PLURNK_MCP_GITBUB_TOOLS", "[]"),
        ],
        "PLURNK_MCP_GITBUB_TOOLS",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_GITBUB_TOOLS is the _TOOLS companion of server \"gitbub\", which is not \
         declared: declare PLURNK_MCP_GITBUB or remove PLURNK_MCP_GITBUB_TOOLS (a server name \
         cannot end in _TOOLS)"
    );
    // A server name cannot end in a companion word, even alone.
    only_fault(&[("PLURNK_MCP_MY_TOOLS", "/bin/x")], "PLURNK_MCP_MY_TOOLS");
    // Only _SUMMARY may carry a tool part; `foo_args` is no companion of github.
    only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "/bin/g"),
            ("PLURNK_MCP_GITHUB_FOO_ARGS", "[]"),
        ],
        "PLURNK_MCP_GITHUB_FOO_ARGS",
    );
}

#[test]
fn fault_wrong_transport() {
    let http = ("PLURNK_MCP_WEB", "https://h/mcp");
    let std = ("PLURNK_MCP_CLI", "/bin/cli");
    for (companion, value) in [
        ("PLURNK_MCP_WEB_ARGS", "[]"),
        ("PLURNK_MCP_WEB_CWD", "/tmp"),
        ("PLURNK_MCP_WEB_ENV", "{}"),
        ("PLURNK_MCP_CLI_BEARER", "${T}"),
        ("PLURNK_MCP_CLI_HEADERS", "{}"),
    ] {
        let fault = only_fault(&[http, std, (companion, value), ("T", "t")], companion);
        assert!(
            matches!(fault, ConfigError::WrongTransport { .. }),
            "{fault}"
        );
    }
    let fault = only_fault(
        &[http, ("PLURNK_MCP_WEB_ARGS", "[]")],
        "PLURNK_MCP_WEB_ARGS",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_WEB_ARGS applies only to stdio servers, but server \"web\" is an http server \
         (see PLURNK_MCP_WEB): remove PLURNK_MCP_WEB_ARGS"
    );
}

#[test]
fn fault_invalid_json() {
    for (companion, value) in [
        ("PLURNK_MCP_X_ARGS", "[\"--a\""),
        ("PLURNK_MCP_X_ENV", "A=b"),
        ("PLURNK_MCP_X_TOOLS", ""),
        ("PLURNK_MCP_X_READ", "[a]"),
    ] {
        let fault = only_fault(&[("PLURNK_MCP_X", "/bin/x"), (companion, value)], companion);
        assert!(matches!(fault, ConfigError::InvalidJson { .. }), "{fault}");
    }
    only_fault(&[("PLURNK_MCP_ENABLED", "github")], "PLURNK_MCP_ENABLED");
}

#[test]
fn fault_wrong_json_shape() {
    let all = faults(&[
        ("PLURNK_MCP_X", "/bin/x"),
        ("PLURNK_MCP_X_ARGS", r#"{"a": "b"}"#),
        ("PLURNK_MCP_X_ENV", r#"{"A": 1, "B": "ok", "C": null}"#),
        ("PLURNK_MCP_X_TOOLS", r#"["a", 2]"#),
    ]);
    let text: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert_eq!(all.len(), 4, "{text:#?}");
    assert!(text[0].starts_with("PLURNK_MCP_X_ARGS must be a JSON array of strings"));
    assert!(text[0].contains("it is an object"));
    assert!(text[1].contains("the value of \"A\" is a number"));
    assert!(text[2].contains("the value of \"C\" is null"));
    assert!(text[3].starts_with("PLURNK_MCP_X_TOOLS") && text[3].contains("element 2"));
}

#[test]
fn fault_empty_and_duplicate_entries() {
    let all = faults(&[
        ("PLURNK_MCP_X", "/bin/x"),
        ("PLURNK_MCP_X_TOOLS", r#"["a", "", "a", "a"]"#),
        ("PLURNK_MCP_X_READ", r#"["a", "a"]"#),
        ("PLURNK_MCP_ENABLED", r#"["x", "x"]"#),
    ]);
    let text: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "PLURNK_MCP_ENABLED names \"x\" more than once: list it once",
            "PLURNK_MCP_X_READ names \"a\" more than once: list it once",
            "PLURNK_MCP_X_TOOLS has an empty name at position 2: remove it or give the name",
            "PLURNK_MCP_X_TOOLS names \"a\" more than once: list it once",
        ]
    );
}

#[test]
fn fault_missing_reference_everywhere_it_is_expanded() {
    let all = faults(&[
        ("PLURNK_MCP_CLI", "${BIN}/server"),
        ("PLURNK_MCP_CLI_ARGS", r#"["--a", "${ARG}"]"#),
        ("PLURNK_MCP_CLI_CWD", "${DIR}"),
        ("PLURNK_MCP_CLI_ENV", r#"{"KEY": "${ENVV}"}"#),
        ("PLURNK_MCP_CLI_SUMMARY", "${SUM}"),
        ("PLURNK_MCP_CLI_RUN_SUMMARY", "${TSUM}"),
        ("PLURNK_MCP_WEB", "https://${HOST}/mcp"),
        ("PLURNK_MCP_WEB_BEARER", "${TOKEN}"),
        ("PLURNK_MCP_WEB_HEADERS", r#"{"X-Key": "k ${HDR}"}"#),
        // Names are not expanded, so these are not references.
        ("PLURNK_MCP_WEB_TOOLS", r#"["${NOT_A_REF}"]"#),
    ]);
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|f| match f {
            ConfigError::MissingReference { variable, name } => (variable.as_str(), name.as_str()),
            other => panic!("unexpected {other}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("PLURNK_MCP_CLI", "BIN"),
            ("PLURNK_MCP_CLI_ARGS element 2", "ARG"),
            ("PLURNK_MCP_CLI_CWD", "DIR"),
            ("PLURNK_MCP_CLI_ENV entry \"KEY\"", "ENVV"),
            ("PLURNK_MCP_CLI_RUN_SUMMARY", "TSUM"),
            ("PLURNK_MCP_CLI_SUMMARY", "SUM"),
            ("PLURNK_MCP_WEB", "HOST"),
            ("PLURNK_MCP_WEB_BEARER", "TOKEN"),
            ("PLURNK_MCP_WEB_HEADERS entry \"X-Key\"", "HDR"),
        ]
    );
    assert_eq!(
        all[7].to_string(),
        "PLURNK_MCP_WEB_BEARER refers to ${TOKEN}, which is not set in the environment: set \
         TOKEN or change the reference"
    );
}

#[test]
fn fault_malformed_reference() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_X", "/bin/x"),
            ("PLURNK_MCP_X_CWD", "/srv/${DIR"),
        ],
        "PLURNK_MCP_X_CWD",
    );
    assert!(matches!(fault, ConfigError::UnterminatedReference { .. }));
    let fault = only_fault(
        &[
            ("PLURNK_MCP_X", "/bin/x"),
            ("PLURNK_MCP_X_CWD", "${A:-/srv}"),
        ],
        "PLURNK_MCP_X_CWD",
    );
    assert!(matches!(fault, ConfigError::InvalidReference { .. }));
}

#[test]
fn fault_empty_value() {
    only_fault(&[("PLURNK_MCP_X", "")], "PLURNK_MCP_X");
    only_fault(&[("PLURNK_MCP_X", "   ")], "PLURNK_MCP_X");
    for (companion, target) in [
        ("PLURNK_MCP_X_CWD", "/bin/x"),
        ("PLURNK_MCP_X_SUMMARY", "/bin/x"),
        ("PLURNK_MCP_X_BEARER", "https://h"),
    ] {
        let fault = only_fault(&[("PLURNK_MCP_X", target), (companion, "")], companion);
        assert!(matches!(fault, ConfigError::Empty { .. }), "{fault}");
    }
}

#[test]
fn fault_url_that_is_not_absolute() {
    for target in [
        "http:/relative",
        "https://",
        "https:example.com",
        " https://h",
        "https://h/a b",
    ] {
        let fault = only_fault(&[("PLURNK_MCP_X", target)], "PLURNK_MCP_X");
        assert!(
            matches!(fault, ConfigError::NotAbsoluteUrl { .. }),
            "{target}"
        );
    }
}

#[test]
fn fault_bearer_with_authorization_header() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_X", "https://h/mcp"),
            ("PLURNK_MCP_X_BEARER", "${T}"),
            (
                "PLURNK_MCP_X_HEADERS",
                r#"{"authorization": "Bearer ${T}"}"#,
            ),
            ("T", "t"),
        ],
        "PLURNK_MCP_X_BEARER",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_X_BEARER and the \"authorization\" entry of PLURNK_MCP_X_HEADERS both set \
         authorization: keep only one of them"
    );
}

#[test]
fn fault_read_outside_tools() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "https://h/mcp"),
            ("PLURNK_MCP_GITHUB_TOOLS", r#"["get"]"#),
            ("PLURNK_MCP_GITHUB_READ", r#"["get", "push"]"#),
        ],
        "PLURNK_MCP_GITHUB_READ",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_GITHUB_READ names \"push\", which is not in PLURNK_MCP_GITHUB_TOOLS: add it \
         to _TOOLS or remove it from _READ"
    );
    // `[]` enables nothing, so nothing can be read-only.
    only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "https://h/mcp"),
            ("PLURNK_MCP_GITHUB_TOOLS", "[]"),
            ("PLURNK_MCP_GITHUB_READ", r#"["get"]"#),
        ],
        "PLURNK_MCP_GITHUB_READ",
    );
}

#[test]
fn fault_invalid_timeout() {
    for value in [
        "0",
        "-5",
        "1.5",
        "10s",
        "",
        " 10",
        "+10",
        "99999999999999999999999",
    ] {
        for variable in ["PLURNK_MCP_CONNECT_TIMEOUT", "PLURNK_MCP_REQUEST_TIMEOUT"] {
            let fault = only_fault(&[(variable, value)], variable);
            assert!(
                matches!(fault, ConfigError::InvalidTimeout { .. }),
                "{value:?}"
            );
        }
    }
}

#[test]
fn the_retired_discover_timeout_is_refused_with_what_replaced_it() {
    // Any value, even a valid one: the setting no longer does anything, and a configuration
    // that still sets it would wait for a timer that is gone.
    for value in ["10000", "x"] {
        let fault = only_fault(
            &[("PLURNK_MCP_DISCOVER_TIMEOUT", value)],
            "PLURNK_MCP_DISCOVER_TIMEOUT",
        );
        assert!(matches!(fault, ConfigError::Retired { .. }), "{fault}");
        let text = fault.to_string();
        assert!(text.contains("is no longer read"), "{text}");
        assert!(text.contains("raise PLURNK_MCP_CONNECT_TIMEOUT"), "{text}");
    }
}

#[test]
fn fault_enabled_names_an_unknown_server() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "https://h/mcp"),
            ("PLURNK_MCP_ENABLED", r#"["github", "figma"]"#),
        ],
        "PLURNK_MCP_ENABLED",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_ENABLED names \"figma\", which is not a configured server: declare it with \
         PLURNK_MCP_<NAME> or remove it from PLURNK_MCP_ENABLED"
    );
    // Names are exact: the folded alias, not the variable's spelling.
    only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "https://h/mcp"),
            ("PLURNK_MCP_ENABLED", r#"["GITHUB"]"#),
        ],
        "PLURNK_MCP_ENABLED",
    );
}

#[test]
fn fault_expanded_not_enabled() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_A", "/bin/a"),
            ("PLURNK_MCP_B", "/bin/b"),
            ("PLURNK_MCP_ENABLED", r#"["a"]"#),
            ("PLURNK_MCP_EXPANDED", r#"["a", "b"]"#),
        ],
        "PLURNK_MCP_EXPANDED",
    );
    assert!(matches!(fault, ConfigError::ExpandedNotEnabled { ref alias, .. } if alias == "b"));
    // With ENABLED absent nothing is enabled, so nothing may expand.
    only_fault(
        &[
            ("PLURNK_MCP_A", "/bin/a"),
            ("PLURNK_MCP_EXPANDED", r#"["a"]"#),
        ],
        "PLURNK_MCP_EXPANDED",
    );
}

#[test]
fn fault_headers() {
    let all = faults(&[
        ("PLURNK_MCP_X", "https://h/mcp"),
        (
            "PLURNK_MCP_X_HEADERS",
            r#"{"X-Key: abc": "v", "Mcp-Session-Id": "s", "X-A": "1", "x-a": "2", "X-Line": "a\r\nEvil: b"}"#,
        ),
    ]);
    assert!(all.iter().all(|f| f.variable() == "PLURNK_MCP_X_HEADERS"));
    let kinds: Vec<&str> = all
        .iter()
        .map(|f| match f {
            ConfigError::InvalidHeaderName { shown, .. } => {
                assert_eq!(shown, "X-Key");
                "name"
            }
            ConfigError::ReservedHeader { .. } => "reserved",
            ConfigError::DuplicateEntry { entry, .. } => {
                assert_eq!(entry, "x-a");
                "duplicate"
            }
            ConfigError::InvalidHeaderValue { .. } => "value",
            other => panic!("unexpected {other}"),
        })
        .collect();
    assert_eq!(kinds, ["reserved", "name", "value", "duplicate"]);
    assert!(!all.iter().any(|f| f.to_string().contains("abc")));
}

#[test]
fn fault_env_name() {
    let fault = only_fault(
        &[
            ("PLURNK_MCP_X", "/bin/x"),
            ("PLURNK_MCP_X_ENV", r#"{"KEY=hunter2": "v"}"#),
        ],
        "PLURNK_MCP_X_ENV",
    );
    assert!(matches!(fault, ConfigError::InvalidEnvName { ref shown, .. } if shown == "KEY"));
    assert!(!fault.to_string().contains("hunter2"));
}

#[test]
fn fault_name_ending_in_a_companion_word() {
    let errors = ServerDefinition::from_target("github-tools", "/bin/x").unwrap_err();
    assert!(matches!(
        errors.errors(),
        [ConfigError::NameEndsInCompanion {
            suffix: "_TOOLS",
            ..
        }]
    ));
    assert!(!is_valid_alias("github-tools"));
}

#[test]
fn fault_empty_expansion() {
    let config = load(&[("PLURNK_MCP_X", "${BIN}"), ("BIN", "")]).unwrap();
    let fault = config
        .server("x")
        .unwrap()
        .prepare(config.env())
        .unwrap_err();
    assert_eq!(
        fault,
        ConfigError::EmptyExpansion {
            variable: "PLURNK_MCP_X".into()
        }
    );
}

// === all at once ===

#[test]
fn every_fault_is_reported_at_once() {
    let errors = load(&[
        ("PLURNK_MCP_GitHub", "https://h/mcp"),
        ("PLURNK_MCP_GITHUB", "https://h/mcp"),
        ("PLURNK_MCP_GITHUB_ARGS", "[]"),
        ("PLURNK_MCP_GITHUB_READ", r#"["push"]"#),
        ("PLURNK_MCP_GITHUB_TOOLS", r#"["get"]"#),
        ("PLURNK_MCP_GITHUB_BEARER", "${GH_TOKEN}"),
        ("PLURNK_MCP_FS", "/bin/fs"),
        ("PLURNK_MCP_FS_ENV", "{"),
        ("PLURNK_MCP_ORPHAN_CWD", "/"),
        ("PLURNK_MCP_9LIVES", "/bin/cat"),
        ("PLURNK_MCP_ENABLED", r#"["github", "nope"]"#),
        ("PLURNK_MCP_REQUEST_TIMEOUT", "0"),
    ])
    .unwrap_err();
    let lines: Vec<String> = errors.to_string().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), errors.errors().len());
    let variables: Vec<&str> = errors.errors().iter().map(ConfigError::variable).collect();
    assert_eq!(
        variables,
        [
            "PLURNK_MCP_9LIVES",
            "PLURNK_MCP_ENABLED",
            "PLURNK_MCP_FS_ENV",
            "PLURNK_MCP_GITHUB",
            "PLURNK_MCP_GITHUB_ARGS",
            "PLURNK_MCP_GITHUB_BEARER",
            "PLURNK_MCP_GITHUB_READ",
            "PLURNK_MCP_ORPHAN_CWD",
            "PLURNK_MCP_REQUEST_TIMEOUT",
        ],
        "{errors}"
    );
    for (line, fault) in lines.iter().zip(&errors) {
        assert!(line.contains(fault.variable()), "{line}");
        assert_eq!(line, &fault.to_string());
    }
}

// === secrets ===

const SECRETS: [&str; 6] = [
    "ghp_LITERALBEARER",
    "HEADERSECRET",
    "ENVSECRET",
    "EXPANDEDTOKEN",
    "PATHKEY123",
    "USERPASS",
];

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} leaks {secret}: {text}");
    }
}

fn secret_vars() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PLURNK_MCP_LIT", "https://u:USERPASS@h/api/PATHKEY123/mcp"),
        ("PLURNK_MCP_LIT_BEARER", "ghp_LITERALBEARER"),
        ("PLURNK_MCP_LIT_HEADERS", r#"{"X-Key": "HEADERSECRET"}"#),
        ("PLURNK_MCP_REF", "https://h/mcp"),
        ("PLURNK_MCP_REF_BEARER", "${TOKEN}"),
        ("PLURNK_MCP_REF_HEADERS", r#"{"X-Key": "k-${TOKEN}"}"#),
        ("PLURNK_MCP_CLI", "/bin/cli"),
        ("PLURNK_MCP_CLI_ARGS", r#"["--token=${TOKEN}"]"#),
        (
            "PLURNK_MCP_CLI_ENV",
            r#"{"API_KEY": "ENVSECRET", "T": "${TOKEN}"}"#,
        ),
        ("PLURNK_MCP_CLI_SUMMARY", "uses ${TOKEN}"),
        ("PLURNK_MCP_CLI_RUN_SUMMARY", "runs ${TOKEN}"),
        ("TOKEN", "EXPANDEDTOKEN"),
    ]
}

#[test]
fn secrets_never_print_from_a_config() {
    let config = HostConfig::from_env(secret_vars()).unwrap();
    assert_no_secret("config debug", &format!("{config:?}"));
    assert_no_secret("config pretty debug", &format!("{config:#?}"));
    for (alias, definition) in config.servers() {
        assert_no_secret(alias, &format!("{definition:#?}"));
        assert_no_secret(alias, &serde_json::to_string(definition).unwrap());
        let prepared = definition.prepare(config.env()).unwrap();
        assert_no_secret(alias, &format!("{prepared:?}"));
        assert_no_secret(alias, &format!("{prepared:#?}"));
    }
}

#[test]
fn secrets_never_print_from_faults() {
    let mut vars = secret_vars();
    vars.retain(|(k, _)| *k != "TOKEN");
    vars.extend([
        // Wrong shapes and broken JSON around secrets.
        ("PLURNK_MCP_BAD", "https://h/mcp"),
        (
            "PLURNK_MCP_BAD_HEADERS",
            r#"{"X-A": ["HEADERSECRET"], "X-B": "HEADERSECRET"#,
        ),
        ("PLURNK_MCP_BAD_BEARER", "ghp_LITERALBEARER\r\n"),
        ("PLURNK_MCP_BAD2", "/bin/b"),
        ("PLURNK_MCP_BAD2_ENV", r#""ENVSECRET""#),
        ("PLURNK_MCP_BAD2_ARGS", r#"[{"ENVSECRET": 1}]"#),
        ("PLURNK_MCP_BAD2_CWD", "/${ENVSECRET"),
        ("PLURNK_MCP_BAD3", "http:/USERPASS"),
        ("PLURNK_MCP_BAD3_SUMMARY", "${EXPANDEDTOKEN x}"),
    ]);
    let errors = HostConfig::from_env(vars).unwrap_err();
    assert!(errors.errors().len() >= 10, "{errors}");
    assert_no_secret("errors display", &errors.to_string());
    assert_no_secret("errors debug", &format!("{errors:?}"));

    // Faults met while preparing name the setting, not its value.
    let config = HostConfig::from_env([
        ("PLURNK_MCP_X", "https://h/mcp"),
        ("PLURNK_MCP_X_HEADERS", r#"{"X-Key": "${INJECT}"}"#),
        ("INJECT", "EXPANDEDTOKEN\r\nX-Evil: 1"),
    ])
    .unwrap();
    let fault = config
        .server("x")
        .unwrap()
        .prepare(config.env())
        .unwrap_err();
    assert!(matches!(fault, ConfigError::InvalidHeaderValue { .. }));
    assert_no_secret("prepare fault", &fault.to_string());
    assert_no_secret("prepare fault", &format!("{fault:?}"));
}

// === preparing ===

#[test]
fn prepare_expands_every_field() {
    let config = HostConfig::from_env(secret_vars()).unwrap();
    let env = config.env();

    let cli = config.server("cli").unwrap().prepare(env).unwrap();
    assert_eq!(cli.alias, "cli");
    assert_eq!(cli.summary.as_deref(), Some("uses EXPANDEDTOKEN"));
    assert_eq!(cli.tool_summaries["run"], "runs EXPANDEDTOKEN");
    assert_eq!(
        cli.transport,
        PreparedTransport::Stdio {
            command: "/bin/cli".into(),
            args: vec!["--token=EXPANDEDTOKEN".into()],
            cwd: None,
            env: vec![
                ("API_KEY".into(), "ENVSECRET".into()),
                ("T".into(), "EXPANDEDTOKEN".into()),
            ],
            sandbox: None,
        }
    );

    let reference = config.server("ref").unwrap().prepare(env).unwrap();
    assert_eq!(
        reference.transport,
        PreparedTransport::Http {
            url: "https://h/mcp".into(),
            headers: vec![
                ("X-Key".into(), "k-EXPANDEDTOKEN".into()),
                ("Authorization".into(), "Bearer EXPANDEDTOKEN".into()),
            ],
        }
    );

    let config = load(&[
        ("PLURNK_MCP_X", "${HOME}/bin/my server"),
        ("PLURNK_MCP_X_CWD", "${HOME}/work dir"),
        ("HOME", "/home/me"),
    ])
    .unwrap();
    let PreparedTransport::Stdio { command, cwd, .. } = config
        .server("x")
        .unwrap()
        .prepare(config.env())
        .unwrap()
        .transport
    else {
        panic!("not stdio");
    };
    assert_eq!(command, "/home/me/bin/my server");
    assert_eq!(cwd, Some(PathBuf::from("/home/me/work dir")));
}

#[test]
fn prepare_against_another_environment_reports_missing_references() {
    let config = HostConfig::from_env(secret_vars()).unwrap();
    let definition = config.server("cli").unwrap();
    let empty = Environment::default();
    let fault = definition.prepare(&empty).unwrap_err();
    assert!(matches!(fault, ConfigError::MissingReference { ref name, .. } if name == "TOKEN"));
    let all = definition.check_references(&empty).unwrap_err();
    assert_eq!(all.errors().len(), 4, "{all}");
    assert!(definition.check_references(config.env()).is_ok());
}

// === the durable shape ===

#[test]
fn definitions_serialize_to_the_wire_shape_without_secrets() {
    let config = HostConfig::from_env(secret_vars()).unwrap();
    let json = |alias: &str| serde_json::to_value(config.server(alias).unwrap()).unwrap();
    assert_eq!(
        json("ref"),
        serde_json::json!({
            "name": "ref",
            "transport": "http",
            "url": "https://h/<redacted>",
            "authorization": {"type": "bearer", "token": "${TOKEN}"},
            "headers": {"X-Key": "<redacted>"},
        })
    );
    assert_eq!(json("lit")["authorization"]["token"], "<redacted>");
    assert_eq!(json("lit")["url"], "https://<redacted>@h/<redacted>");
    assert_eq!(
        json("cli"),
        serde_json::json!({
            "name": "cli",
            "transport": "stdio",
            "command": "/bin/cli",
            "args": ["--token=${TOKEN}"],
            "env": {"API_KEY": "<redacted>", "T": "<redacted>"},
            "summary": "uses ${TOKEN}",
            "toolSummaries": {"run": "runs ${TOKEN}"},
        })
    );
    let tools = load(&[("PLURNK_MCP_X", "/x"), ("PLURNK_MCP_X_TOOLS", "[]")]).unwrap();
    assert_eq!(
        serde_json::to_value(tools.server("x").unwrap()).unwrap()["tools"],
        serde_json::json!([])
    );
}
