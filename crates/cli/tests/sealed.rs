//! What the host promises against a server that leaks, floods, hangs or outlives it: secrets
//! never leave the host, in any spelling, whatever a server echoes back. Every test here
//! runs real misbehaving processes or HTTP servers on 127.0.0.1:0.

use std::collections::BTreeMap;

use plurnk_mcp::{CallError, CallOptions, Host, HostConfig, ServerState};
use serde_json::json;

#[path = "support/calls.rs"]
mod calls;
#[path = "support/env.rs"]
mod env;
#[path = "support/wait.rs"]
mod wait;

#[path = "support/processes.rs"]
mod processes;

#[path = "support/logs.rs"]
mod logs;

#[path = "support/http.rs"]
mod http;
use calls::{BOUND, shutdown_clean};
use http::{json_answer, raw_http, routed_http};
use logs::logged;
use processes::marked;

use env::EXE;

/// The configuration of these variables, connecting within 10 s.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::connecting_within(10_000, pairs)
}

/// Whether `text` holds `secret` in any case.
fn holds(text: &str, secret: &str) -> bool {
    text.to_ascii_lowercase()
        .contains(&secret.to_ascii_lowercase())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_a_server_echoes_never_reach_a_problem_a_call_error_or_a_log_line() {
    logs::capture();
    const URL_SECRET: &str = "query-SECRET-5150";
    const ENV_SECRET: &str = "env-SECRET-8086";
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let host = Host::start(config(&[
        ("URL_TOKEN", URL_SECRET.into()),
        ("API_TOKEN", ENV_SECRET.into()),
        // reqwest prints this URL in its connect error, normalised (lower-case scheme, the
        // dot segment gone): the token rides in the query either way.
        (
            "PLURNK_MCP_REMOTE",
            format!("HTTP://127.0.0.1:{closed_port}/./mcp?token=${{URL_TOKEN}}"),
        ),
        ("PLURNK_MCP_LEAKY", EXE.into()),
        (
            "PLURNK_MCP_LEAKY_ARGS",
            json!(["fixture", "--name", "leaky"]).to_string(),
        ),
        (
            "PLURNK_MCP_LEAKY_ENV",
            json!({"API_KEY": "${API_TOKEN}"}).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["remote", "leaky"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let remote = snapshot.server("remote").expect("configured");
    assert_eq!(remote.state, ServerState::Unavailable);
    let detail = remote
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains("server \"remote\" (http)"),
        "the Problem still says what failed: {detail}"
    );
    assert!(
        !holds(&detail, URL_SECRET),
        "URL query in a Problem: {detail}"
    );
    let refused = workspace
        .call_tool("remote", "echo", json!({}), CallOptions::default())
        .await;
    assert!(
        matches!(refused, Err(CallError::NotReady { .. })),
        "{refused:?}"
    );
    assert!(!holds(&format!("{refused:?}"), URL_SECRET));

    // The server answers with a JSON-RPC error that reflects its credential.
    let reflected = workspace
        .call_tool(
            "leaky",
            "reveal",
            json!({"name": "API_KEY", "to": "error"}),
            CallOptions::default(),
        )
        .await;
    let Err(error @ CallError::Remote { .. }) = &reflected else {
        panic!("a JSON-RPC error: {reflected:?}");
    };
    assert!(!holds(&error.to_string(), ENV_SECRET), "{error}");
    assert!(!holds(&format!("{error:?}"), ENV_SECRET), "{error:?}");
    // ...in its result...
    let text = workspace
        .call_tool(
            "leaky",
            "reveal",
            json!({"name": "API_KEY", "to": "text"}),
            CallOptions::default(),
        )
        .await
        .expect("a result");
    assert_eq!(text.text(), "API_KEY=<redacted>");
    // (The log names the server's process, for an operator to find it.)
    let pid = workspace
        .call_tool("leaky", "pid", json!({}), CallOptions::default())
        .await
        .expect("a pid")
        .text();
    let ready = logged()
        .lines()
        .find(|line| line.contains("server ready") && line.contains("server=\"leaky\""))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(ready.contains(&format!("pid=Some({pid})")), "{ready}");
    // ...on stderr, which the host logs...
    workspace
        .call_tool(
            "leaky",
            "reveal",
            json!({"name": "API_KEY", "to": "stderr"}),
            CallOptions::default(),
        )
        .await
        .expect("written");
    // ...and on stderr as it dies, which becomes its Problem.
    let died = workspace
        .call_tool(
            "leaky",
            "reveal",
            json!({"name": "API_KEY", "to": "crash"}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(died, Err(CallError::ConnectionLost { .. })),
        "{died:?}"
    );
    assert!(!holds(&format!("{died:?}"), ENV_SECRET));
    let down = workspace
        .wait_for(BOUND, |s| {
            s.server("leaky")
                .and_then(|s| s.problem.as_ref())
                .is_some_and(|p| p.detail.contains("dying with"))
        })
        .await;
    let detail = down
        .server("leaky")
        .and_then(|s| s.problem.as_ref())
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains("dying with API_KEY=<redacted>"),
        "the server's last words, scrubbed: {detail}"
    );
    shutdown_clean(host).await;

    let logs = logged();
    assert!(
        logs.contains("API_KEY=<redacted>"),
        "the server's stderr was logged (scrubbed)"
    );
    for secret in [URL_SECRET, ENV_SECRET] {
        assert!(!holds(&logs, secret), "{secret} in a log line");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let (elsewhere, reached) = raw_http(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            .into(),
    )
    .await;
    let (redirector, asked) = raw_http(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{elsewhere}/mcp\r\n\
         content-length: 0\r\nconnection: close\r\n\r\n"
    ))
    .await;
    let host = Host::start(config(&[
        ("HOP_TOKEN", "hop-bearer-SECRET-1212".into()),
        ("HOP_KEY", "hop-key-SECRET-3434".into()),
        ("PLURNK_MCP_HOP", format!("http://{redirector}/mcp")),
        ("PLURNK_MCP_HOP_BEARER", "${HOP_TOKEN}".into()),
        (
            "PLURNK_MCP_HOP_HEADERS",
            json!({"X-Api-Key": "${HOP_KEY}"}).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["hop"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let hop = snapshot.server("hop").expect("configured");
    assert_eq!(hop.state, ServerState::Unavailable);
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(
        asked
            .iter()
            .any(|head| head.contains("hop-bearer-SECRET-1212")),
        "the configured origin got the credentials: {asked:?}"
    );
    let reached = reached.lock().map(|r| r.clone()).unwrap_or_default();
    assert!(
        reached.is_empty(),
        "the other origin was sent a request: {reached:?}"
    );
    shutdown_clean(host).await;
}

/// The client secret of a client-credentials grant goes to the token endpoint the server
/// published, and nowhere that endpoint redirects to: a 307 keeps a POST's body, so
/// following it to another origin would hand the secret over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_redirected_to_another_origin_takes_no_secret_there() {
    let (elsewhere, reached) = routed_http(|_, _| {
        json_answer(
            "200 OK",
            &json!({"access_token": "stolen-access-token", "token_type": "Bearer"}),
        )
    })
    .await;
    let (origin, asked) = routed_http(move |me, path| match path {
        "/mcp" => "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\n\
                   content-length: 0\r\nconnection: close\r\n\r\n"
            .to_owned(),
        p if p.starts_with("/.well-known/oauth-protected-resource") => json_answer(
            "200 OK",
            &json!({"resource": format!("http://{me}/mcp"),
                    "authorization_servers": [format!("http://{me}")]}),
        ),
        p if p.starts_with("/.well-known/oauth-authorization-server")
            || p.starts_with("/.well-known/openid-configuration") =>
        {
            json_answer(
                "200 OK",
                &json!({"issuer": format!("http://{me}"),
                        "authorization_endpoint": format!("http://{me}/authorize"),
                        "token_endpoint": format!("http://{me}/token"),
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported":
                            ["client_secret_post", "client_secret_basic"],
                        "response_types_supported": ["code"]}),
            )
        }
        "/token" => format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{elsewhere}/token\r\n\
             content-length: 0\r\nconnection: close\r\n\r\n"
        ),
        _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
    })
    .await;
    let host = Host::start(config(&[
        ("CLIENT_SECRET", "cc-redirect-SECRET-4242".into()),
        ("PLURNK_MCP_ALLOW_ADD", "true".into()),
        (
            "PLURNK_MCP_WORKSPACE_ENV",
            json!(["CLIENT_SECRET"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let options = plurnk_mcp::config::McpServerOptions::from_json(
        &json!({"authorization": {"type": "client-credentials", "clientId": "machine-id",
                                  "clientSecret": "${CLIENT_SECRET}"}})
        .to_string(),
    )
    .expect("valid options");
    let definition =
        plurnk_mcp::ServerDefinition::from_target("machine", &format!("http://{origin}/mcp"))
            .and_then(|d| d.with_options(&options))
            .expect("a valid definition");
    let problem = workspace
        .add(definition)
        .await
        .expect_err("the grant cannot complete");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "oauth-client-credentials-failed"),
        "{problem:?}"
    );
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(
        asked
            .iter()
            .any(|request| request.starts_with("POST /token")),
        "the published token endpoint was asked: {asked:?}"
    );
    let reached = reached.lock().map(|r| r.clone()).unwrap_or_default();
    assert!(
        reached.is_empty(),
        "the redirect's origin was sent a request: {reached:?}"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_server_that_cannot_be_authorized_fails_clearly_and_gets_no_secret() {
    // Every request is refused with a challenge naming no usable metadata, and a body of
    // attacker text that must never reach a Problem.
    let (origin, reached) = raw_http(
        "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer error=\"invalid_token\", \
         error_description=\"EVIL-TEXT-7878\"\r\ncontent-length: 14\r\nconnection: close\r\n\r\n\
         EVIL-TEXT-7878"
            .into(),
    )
    .await;
    let host = Host::start(config(&[
        ("CLIENT_SECRET", "cc-SECRET-5656".into()),
        ("WORKLOAD_JWT", "wi-SECRET-identity-9090".into()),
        ("PLURNK_MCP_ALLOW_ADD", "true".into()),
        (
            "PLURNK_MCP_WORKSPACE_ENV",
            json!(["CLIENT_SECRET", "WORKLOAD_JWT"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    for (alias, authorization, kind, named) in [
        (
            "interactive",
            json!({"type": "oauth", "redirectUrl": "http://127.0.0.1:9/callback"}),
            "authorization-failed",
            "could not be authorized",
        ),
        (
            "machine",
            json!({"type": "client-credentials", "clientId": "machine-id",
                   "clientSecret": "${CLIENT_SECRET}"}),
            "oauth-client-credentials-failed",
            "client \"machine-id\"",
        ),
        (
            "workload",
            json!({"type": "workload-identity", "assertion": "${WORKLOAD_JWT}"}),
            "oauth-workload-identity-failed",
            "no token endpoint to send the identity token to",
        ),
    ] {
        let options = plurnk_mcp::config::McpServerOptions::from_json(
            &json!({ "authorization": authorization }).to_string(),
        )
        .expect("valid options");
        let definition =
            plurnk_mcp::ServerDefinition::from_target(alias, &format!("http://{origin}/mcp"))
                .and_then(|d| d.with_options(&options))
                .expect("a valid definition");
        let problem = workspace
            .add(definition)
            .await
            .expect_err("no authorization can be had");
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (502, kind),
            "{alias}: {problem:?}"
        );
        assert!(
            problem.detail.contains(named),
            "{alias}: {}",
            problem.detail
        );
        assert!(
            problem.detail.contains(alias),
            "{alias}: {}",
            problem.detail
        );
        assert!(
            !holds(&problem.detail, "cc-SECRET-5656"),
            "{}",
            problem.detail
        );
        assert!(
            !holds(&problem.detail, "wi-SECRET-identity-9090"),
            "{}",
            problem.detail
        );
        assert!(!problem.detail.contains("EVIL-TEXT"), "{}", problem.detail);
        assert!(
            workspace.snapshot().server(alias).is_none(),
            "a failed add publishes nothing"
        );
    }
    // Discovery failed before any token request: the secrets went nowhere, in no spelling.
    let reached = reached.lock().map(|r| r.clone()).unwrap_or_default();
    assert!(!reached.is_empty(), "the server was asked");
    for request in &reached {
        assert!(
            !holds(request, "cc-SECRET-5656"),
            "the secret was sent: {request}"
        );
        assert!(
            !request.contains("bWFjaGluZS1pZDpjYy1TRUNSRVQtNTY1Ng"),
            "{request}"
        );
        assert!(
            !holds(request, "wi-SECRET-identity-9090"),
            "the identity token was sent: {request}"
        );
    }
    // Nothing is pending: a callback completes nothing.
    let problem = workspace
        .oauth_complete("interactive", "http://127.0.0.1:9/callback?code=c&state=s")
        .await
        .expect_err("nothing is pending");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (404, "oauth-not-pending")
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reaches_descendants_that_left_their_group() {
    let mark = format!("escape-{}", std::process::id());
    let host = Host::start(config(&[
        ("PLURNK_MCP_RUNAWAY", EXE.into()),
        (
            "PLURNK_MCP_RUNAWAY_ARGS",
            json!(["fixture", "--hostile", "escape"]).to_string(),
        ),
        (
            "PLURNK_MCP_RUNAWAY_ENV",
            json!({ "TEST_MARK": mark }).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["runaway"]).to_string()),
    ]))
    .await
    .expect("host starts");
    assert_eq!(
        host.default_workspace()
            .snapshot()
            .server("runaway")
            .map(|s| s.state),
        Some(ServerState::Ready)
    );
    // The server and its grandchild in a session of its own.
    wait::until(BOUND, || marked(&mark).len() >= 2).await;
    assert!(marked(&mark).len() >= 2, "{:?}", marked(&mark));
    shutdown_clean(host).await;
    wait::until(BOUND, || marked(&mark).is_empty()).await;
    assert!(
        marked(&mark).is_empty(),
        "outlived the host: {:?}",
        marked(&mark)
    );
}

/// What every child inherits of the daemon's environment unless the operator names more.
const INHERITED_BY_DEFAULT: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NUMERIC",
    "LC_TIME",
];

/// `NAME=value` lines, as a map.
fn variables(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// The names in `seen` beyond the defaults, `also` and the host's own marks.
fn beyond(seen: &BTreeMap<String, String>, also: &[&str]) -> Vec<String> {
    seen.keys()
        .filter(|name| {
            !INHERITED_BY_DEFAULT.contains(&name.as_str())
                && !also.contains(&name.as_str())
                && !name.starts_with("_PLURNK_MCP_")
                // The sandbox's private temporary directory.
                && name.as_str() != "TMPDIR"
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_gets_the_default_the_declared_and_the_allowed_environment_and_nothing_else() {
    const DORMANT_SECRET: &str = "dormant-SECRET-6502";
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sealed-environment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sources = dir.join("sources");
    std::fs::create_dir_all(&sources).expect("sources dir");
    // A script and a program that print exactly the environment they were started with. The
    // script reads its own `/proc/$$/environ`, and in a sandbox's PID namespace `$$` is 1: it
    // runs unsandboxed.
    let script = dir.join("environment.sh");
    std::fs::write(
        &script,
        "#!/usr/bin/env bash\n# @description Prints its environment.\ntr '\\0' '\\n' < /proc/$$/environ\n",
    )
    .expect("script");
    let declare = |name: &str, declaration: serde_json::Value| {
        std::fs::write(sources.join(name), declaration.to_string()).expect("declaration");
    };
    // The script lives beside the declarations' folder, as the declaration says.
    declare(
        "script.json",
        json!({"kind": "script", "name": "printed", "path": script, "runtime": "bash",
               "outsideFolder": true, "env": {"DECLARED_VAR": "declared-by-the-script"},
               "sandbox": {"mode": "off"}}),
    );
    declare(
        "cli.json",
        json!({"kind": "cli", "name": "program", "command": "env",
               "env": {"DECLARED_VAR": "declared-by-the-program"},
               "tools": [{"name": "show"}]}),
    );
    let host = Host::start(config(&[
        ("PLURNK_MCP_ENVY", EXE.into()),
        (
            "PLURNK_MCP_ENVY_ARGS",
            json!(["fixture", "--name", "envy"]).to_string(),
        ),
        (
            "PLURNK_MCP_ENVY_ENV",
            json!({"DECLARED_VAR": "declared-by-the-server"}).to_string(),
        ),
        // Declared, never enabled: its credential is a secret all the same.
        ("PLURNK_MCP_DORMANT", EXE.into()),
        (
            "PLURNK_MCP_DORMANT_ENV",
            json!({"TOKEN": "${DORMANT_SECRET}"}).to_string(),
        ),
        ("DORMANT_SECRET", DORMANT_SECRET.into()),
        ("ALLOWED_VAR", "allowed-value".into()),
        ("SENTINEL_VAR", "sentinel-value".into()),
        (
            "PLURNK_MCP_INHERIT_ENV",
            json!(["ALLOWED_VAR", "DORMANT_SECRET"]).to_string(),
        ),
        ("PLURNK_MCP_SOURCES", sources.display().to_string()),
        (
            "PLURNK_MCP_ENABLED",
            json!(["envy", "printed", "program"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    for (alias, tool, arguments, declared) in [
        (
            "envy",
            "reveal",
            json!({"name": "*", "to": "text"}),
            "declared-by-the-server",
        ),
        ("printed", "printed", json!({}), "declared-by-the-script"),
        ("program", "show", json!({}), "declared-by-the-program"),
    ] {
        let result = workspace
            .call_tool(alias, tool, arguments, CallOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{alias}: {error}"));
        let seen = variables(&result.text());
        assert_eq!(
            seen.get("DECLARED_VAR").map(String::as_str),
            Some(declared),
            "{alias}: {seen:?}"
        );
        assert_eq!(
            seen.get("ALLOWED_VAR").map(String::as_str),
            Some("allowed-value"),
            "{alias}"
        );
        // The host's configuration and its own process hold more (the test runner's
        // CARGO_* variables, SENTINEL_VAR): none of it reaches a child.
        assert!(!seen.contains_key("SENTINEL_VAR"), "{alias}: {seen:?}");
        assert_eq!(
            beyond(&seen, &["DECLARED_VAR", "ALLOWED_VAR", "DORMANT_SECRET"]),
            Vec::<String>::new(),
            "{alias}"
        );
        assert_eq!(
            seen.get("PATH").cloned(),
            std::env::var("PATH").ok(),
            "{alias}: the default keeps its value"
        );
        // A credential of a server that was never enabled is scrubbed like any other.
        assert_eq!(
            seen.get("DORMANT_SECRET").map(String::as_str),
            Some("<redacted>"),
            "{alias}"
        );
        assert!(!holds(&result.text(), DORMANT_SECRET), "{alias}");
    }
    shutdown_clean(host).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `plurnk-mcp` with the test's own environment (less any `PLURNK_MCP_` setting) plus
/// `vars`, on a fresh state file.
fn command_line(args: &[&str], vars: &[(&str, String)]) -> std::process::Output {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "sealed-{}-{}.sqlite",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_file(&state);
    let mut command = std::process::Command::new(EXE);
    // The caller's own settings, if any, would configure it too.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PLURNK_MCP_") {
            command.env_remove(key);
        }
    }
    let output = command
        .arg("--state")
        .arg(&state)
        .args(args)
        .envs(vars.iter().map(|(key, value)| (*key, value)))
        .output()
        .expect("plurnk-mcp runs");
    let _ = std::fs::remove_file(&state);
    output
}

#[test]
fn the_command_lines_own_environment_never_reaches_a_server_or_a_version_probe() {
    // As a daemon would hold it: the gateway's bearer in the process environment.
    const SENTINEL: &str = "gateway-bearer-SENTINEL-2718";
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sealed-process-environment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    // A version probe that prints its environment instead of a version.
    std::fs::write(
        dir.join("env.json"),
        json!({"kind": "cli", "name": "probe", "command": "env", "versionArgs": [],
               "version": "env 0.0", "tools": [{"name": "show"}]})
        .to_string(),
    )
    .expect("declaration");
    let vars = [
        ("PLURNK_MCP_ENVY", EXE.to_owned()),
        (
            "PLURNK_MCP_ENVY_ARGS",
            json!(["fixture", "--name", "envy"]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["envy", "probe"]).to_string()),
        ("PLURNK_MCP_SOURCES", dir.display().to_string()),
        ("PLURNK_MCP_INHERIT_ENV", json!(["ALLOWED_VAR"]).to_string()),
        ("ALLOWED_VAR", "allowed-value".to_owned()),
        ("GATEWAY_BEARER", SENTINEL.to_owned()),
    ];
    let called = command_line(
        &["call", "envy", "reveal", r#"{"name": "*", "to": "text"}"#],
        &vars,
    );
    assert!(called.status.success(), "{called:?}");
    let result: serde_json::Value = serde_json::from_slice(&called.stdout).expect("JSON");
    let seen = variables(result["content"][0]["text"].as_str().unwrap_or_default());
    assert_eq!(
        seen.get("ALLOWED_VAR").map(String::as_str),
        Some("allowed-value")
    );
    assert!(!seen.contains_key("GATEWAY_BEARER"), "{seen:?}");
    assert_eq!(beyond(&seen, &["ALLOWED_VAR"]), Vec::<String>::new());

    // `source check` shows what the probe printed: the default environment alone.
    let checked = command_line(&["source", "check", "--json"], &vars);
    let found: serde_json::Value = serde_json::from_slice(&checked.stdout).expect("JSON");
    let detail = found[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("PATH="), "{found}");
    assert!(!detail.contains("GATEWAY_BEARER"), "{detail}");
    assert!(!detail.contains(SENTINEL), "{detail}");
    assert!(!detail.contains("ALLOWED_VAR"), "{detail}");
    let _ = std::fs::remove_dir_all(&dir);
}
