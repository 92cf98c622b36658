//! OAuth end to end: the host against a real, certified OpenID provider (npm `oidc-provider`)
//! in front of a real Streamable HTTP MCP server that accepts only that provider's tokens
//! (`tests/peers/oauth_world.mjs`, both on 127.0.0.1). The interactive flow is completed the
//! way a person's browser would (log in, consent, hand the callback URL to
//! `oauth_complete`); the client-credentials grant runs by itself. The provider advertises
//! DPoP and requires its nonce, and the MCP server accepts its DPoP-bound tokens only with
//! proofs of the key and its own nonce, so every flow here proves a key (and one provider
//! without DPoP shows bearer tokens still work). Every credential the provider handed out or
//! received is then looked for in what the host let out.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plurnk_mcp::config::OverlayServer;
use plurnk_mcp::{
    Accepted, CallOptions, Customize, Host, HostConfig, HostOptions, Problem, ServerDefinition,
    ServerSnapshot, ServerState, SqliteStore, Workspace,
};
use serde_json::{Value, json};

#[path = "support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "support/calls.rs"]
mod calls;
#[path = "support/wait.rs"]
mod wait;
use calls::shutdown_clean;

#[path = "support/logs.rs"]
mod logs;

#[path = "support/http.rs"]
mod http;
#[path = "support/pty.rs"]
mod pty;

/// Where the provider sends the person back; nothing listens there: the browser stops at it
/// and the URL goes to `oauth_complete`.
const REDIRECT: &str = "http://127.0.0.1:9/callback";
/// The pre-registered client-credentials client's secret.
const MACHINE_SECRET: &str = "machine-SECRET-client-4e1b9c";

/// The provider and the MCP server, for as long as this value lives.
struct World {
    child: Child,
    _stdin: ChildStdin,
    mcp: String,
    issuer: String,
    admin: String,
    /// Identity tokens of the world's workload platform: one for the provider, one for
    /// another audience.
    workload: (String, String),
}

impl World {
    fn start() -> World {
        Self::start_with(&[])
    }

    fn start_with(vars: &[(&str, &str)]) -> World {
        let peers = peers();
        let env = std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join(".cache/peers.env"),
        )
        .expect("peers.env");
        let prefix = env
            .lines()
            .find_map(|line| line.strip_prefix("TS_CLIENT_DIR="))
            .map(|v| v.trim_matches(['\'', '"']).to_owned())
            .expect("TS_CLIENT_DIR in peers.env");
        let mut child = Command::new(&peers.node)
            .arg(peer_script("oauth_world.mjs"))
            .arg(prefix)
            .env("OAUTH_WORLD_MACHINE_SECRET", MACHINE_SECRET)
            .envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node starts the OAuth world");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the world prints where it listens");
        let ports: Value = serde_json::from_str(&line).expect("a JSON line");
        let field = |key: &str| ports[key].as_str().expect("a URL").to_owned();
        World {
            mcp: field("mcp"),
            issuer: field("issuer"),
            admin: field("admin"),
            workload: (
                ports["workload"]["valid"]
                    .as_str()
                    .expect("a token")
                    .to_owned(),
                ports["workload"]["wrongAudience"]
                    .as_str()
                    .expect("a token")
                    .to_owned(),
            ),
            _stdin: stdin,
            child,
        }
    }

    /// Every credential the provider handed out or received so far.
    async fn issued(&self) -> Vec<String> {
        reqwest::get(format!("{}/issued", self.admin))
            .await
            .expect("the world answers")
            .json()
            .await
            .expect("a JSON list")
    }

    /// How the MCP server was shown tokens: `{dpop, bearer, nonceChallenges}`.
    async fn presented(&self) -> Value {
        reqwest::get(format!("{}/presented", self.admin))
            .await
            .expect("the world answers")
            .json()
            .await
            .expect("a JSON object")
    }

    /// Asserts every token the MCP server accepted was bound to the host's DPoP key and
    /// presented with a proof, the server's nonce challenge answered on the way.
    async fn assert_proved(&self) {
        let presented = self.presented().await;
        assert!(presented["dpop"].as_u64() >= Some(1), "{presented}");
        assert_eq!(presented["bearer"], 0, "{presented}");
        assert!(
            presented["nonceChallenges"].as_u64() >= Some(1),
            "{presented}"
        );
    }

    /// Destroys every refresh token and refuses every access token issued so far.
    async fn revoke(&self) {
        let status = reqwest::Client::new()
            .post(format!("{}/revoke", self.admin))
            .send()
            .await
            .expect("the world answers")
            .status();
        assert!(status.is_success(), "{status}");
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(pairs: &[(&str, String)]) -> HostConfig {
    let mut map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    map.insert("PLURNK_MCP_ALLOW_ADD".into(), "true".into());
    map.insert(
        "PLURNK_MCP_WORKSPACE_ENV".into(),
        json!(["MACHINE_SECRET", "WORKLOAD_JWT"]).to_string(),
    );
    map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "20000".into());
    HostConfig::from_env(map).expect("valid configuration")
}

/// A host whose workspaces live in `store`.
async fn host_on(store: SqliteStore) -> Host {
    Host::start_with(
        config(&[]),
        HostOptions::default().with_store(Some(Arc::new(store))),
    )
    .await
    .expect("host starts")
}

fn definition(alias: &str, url: &str, authorization: Value) -> ServerDefinition {
    let options = plurnk_mcp::config::McpServerOptions::from_json(
        &json!({ "authorization": authorization }).to_string(),
    )
    .expect("valid options");
    ServerDefinition::from_target(alias, url)
        .and_then(|d| d.with_options(&options))
        .expect("a valid definition")
}

async fn whoami(workspace: &Workspace, alias: &str) -> Result<String, String> {
    workspace
        .call_tool(
            alias,
            "whoami",
            json!({}),
            CallOptions::default().with_timeout(Some(Duration::from_secs(20))),
        )
        .await
        .map(|result| result.text())
        .map_err(|error| error.to_string())
}

/// What a person's browser does with the authorization URL: follows redirects, logs in
/// (any login, any password), consents, and stops at the redirect to `REDIRECT`.
async fn approve(url: &str) -> String {
    browse(url)
        .await
        .unwrap_or_else(|page| panic!("the authorization did not come back: {page:.400}"))
}

/// Follows `url` like a browser whose person approves everything: redirects (with cookies),
/// the login, consent and device-confirmation forms. `Ok` with the URL of the redirect to
/// `REDIRECT`; `Err` with the page it ended on when it ended on a page without a form (the
/// device flow's success page).
async fn browse(url: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let mut cookies: BTreeMap<String, String> = BTreeMap::new();
    let mut next: (reqwest::Method, reqwest::Url, Option<String>) =
        (reqwest::Method::GET, url.parse().expect("a URL"), None);
    for _ in 0..20 {
        let (method, at, form) = next.clone();
        let mut request = client.request(method, at.clone());
        if !cookies.is_empty() {
            let jar: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header(reqwest::header::COOKIE, jar.join("; "));
        }
        if let Some(form) = form {
            request = request
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(form);
        }
        let response = request.send().await.expect("the provider answers");
        for cookie in response.headers().get_all(reqwest::header::SET_COOKIE) {
            if let Some((name, value)) = cookie
                .to_str()
                .ok()
                .and_then(|c| c.split(';').next())
                .and_then(|pair| pair.split_once('='))
            {
                cookies.insert(name.trim().to_owned(), value.to_owned());
            }
        }
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .expect("a redirect has a location");
            let target = at.join(location).expect("a resolvable location");
            if target.as_str().starts_with(REDIRECT) {
                return Ok(target.to_string());
            }
            next = (reqwest::Method::GET, target, None);
            continue;
        }
        let page = response.text().await.unwrap_or_default();
        let Some(form) = page
            .split("<form")
            .nth(1)
            .and_then(|f| f.split("</form>").next())
        else {
            return Err(page);
        };
        let attribute = |tag: &str, name: &str| {
            tag.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_owned)
        };
        let action = attribute(form, "action").expect("a form action");
        let fields: Vec<String> = form
            .split("<input")
            .skip(1)
            .filter_map(|tag| {
                let name = attribute(tag, "name")?;
                let value = match name.as_str() {
                    "login" => "ada".to_owned(),
                    "password" => "any".to_owned(),
                    _ => attribute(tag, "value").unwrap_or_default(),
                };
                Some(format!(
                    "{name}={}",
                    value.replace('+', "%2B").replace('&', "%26")
                ))
            })
            .collect();
        next = (
            reqwest::Method::POST,
            at.join(&action).expect("a form action"),
            Some(fields.join("&")),
        );
    }
    panic!("the browser went round in circles");
}

/// Waits (bounded) until `check` holds for the server's snapshot.
async fn wait_server(
    workspace: &Workspace,
    alias: &str,
    check: impl Fn(&ServerSnapshot) -> bool,
) -> ServerSnapshot {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot = workspace.snapshot();
        if let Some(server) = snapshot.server(alias)
            && check(server)
        {
            return server.clone();
        }
        assert!(
            Instant::now() < deadline,
            "server {alias} never got there: {:?}",
            snapshot.server(alias).map(|s| (s.state, s.problem.clone()))
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until an access token the provider issued before `issued` has expired. The wait is
/// the scenario: a credential's lifetime is time itself, and nothing the test can see
/// without reading the token ends it sooner. The provider's tokens live 4 s, counted in whole
/// seconds, so one second more.
async fn outlive_the_access_token(issued: Instant) {
    tokio::time::sleep_until((issued + Duration::from_secs(5)).into()).await;
}

/// Asserts none of `secrets` appears in `text` (named `what`).
fn holds_none(what: &str, text: &str, secrets: &[String]) {
    for secret in secrets.iter().filter(|secret| secret.len() >= 8) {
        // Where it leaked, with the credential itself masked.
        if let Some(line) = text.lines().find(|line| line.contains(secret.as_str())) {
            let masked: String = line.replace(secret.as_str(), "<credential>");
            eprintln!("{what}: {}", masked.chars().take(600).collect::<String>());
        }
        assert!(
            !text.contains(secret.as_str()),
            "{what} holds a credential the provider issued ({}…)",
            &secret[..6]
        );
    }
}

fn problem_text(problem: &Problem) -> String {
    format!("{problem:?} {problem}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_authorizes_through_oauth_complete_and_the_token_is_refreshed_until_revoked() {
    logs::capture();
    let world = World::start();
    let dir = std::env::temp_dir().join(format!("plurnk-oauth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a state directory");
    let state = dir.join("state.db");
    let store = SqliteStore::open(&state).expect("the state file opens");
    let host = host_on(store).await;
    let workspace = host.default_workspace();
    let mut shown = Vec::new();

    // The add answers where to authorize, and publishes nothing yet.
    let pending = workspace
        .add(definition(
            "world",
            &world.mcp,
            json!({"type": "oauth", "redirectUrl": REDIRECT}),
        ))
        .await
        .expect("a pending authorization, not a failure");
    assert_eq!(pending.state, ServerState::AuthorizationRequired);
    let url = pending
        .authorization
        .clone()
        .expect("an authorization URL")
        .url;
    assert!(url.starts_with(&world.issuer), "{url}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert_eq!(
        serde_json::to_value(Accepted::of(&pending).expect("the add's 202")).ok(),
        Some(json!({"status": 202, "authorization": {"url": url}}))
    );
    assert!(
        workspace.snapshot().server("world").is_none(),
        "nothing is published while authorization is pending"
    );
    shown.push(format!("{pending:?}"));

    // A forged callback is refused and leaves the real one pending.
    let forged = workspace
        .oauth_complete("world", &format!("{REDIRECT}?code=forged&state=forged"))
        .await
        .expect_err("a forged callback");
    assert_eq!(
        (forged.status, forged.kind.as_str()),
        (400, "oauth-callback-refused")
    );
    shown.push(problem_text(&forged));

    // The person approves; the callback completes the add.
    let callback = approve(&url).await;
    let ready = workspace
        .oauth_complete("world", &callback)
        .await
        .expect("the authorization completes the add");
    let issued = Instant::now();
    assert_eq!(ready.state, ServerState::Ready, "{:?}", ready.problem);
    let text = whoami(&workspace, "world")
        .await
        .expect("the call is authorized");
    assert!(text.starts_with("ada "), "{text}");

    // An overlay that points the alias at another URL is another server: the tokens of this
    // authorization are never presented there, and the server keeps its own.
    let (elsewhere, reached) = http::raw_http(
        "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\ncontent-length: 0\r\n\
         connection: close\r\n\r\n"
            .into(),
    )
    .await;
    let moved = Customize::default()
        .with_overlay(Some(OverlayServer::Definition(definition(
            "world",
            &format!("http://{elsewhere}/mcp"),
            json!({"type": "oauth", "redirectUrl": REDIRECT}),
        ))))
        .with_options(None);
    let answer = workspace.enable_with("world", moved).await;
    shown.push(format!("{answer:?}"));
    let reached = reached.lock().map(|r| r.join("\n")).unwrap_or_default();
    assert!(!reached.is_empty(), "the overlay's URL was dialled");
    holds_none("the overlay's URL", &reached, &world.issued().await);
    assert!(
        !reached.to_ascii_lowercase().contains("authorization: dpop"),
        "{reached}"
    );
    let text = whoami(&workspace, "world")
        .await
        .expect("the server keeps its own authorization");
    assert!(text.starts_with("ada "), "{text}");

    // A replayed callback completes nothing.
    let replayed = workspace
        .oauth_complete("world", &callback)
        .await
        .expect_err("a replay");
    assert_eq!(
        (replayed.status, replayed.kind.as_str()),
        (404, "oauth-not-pending")
    );
    shown.push(problem_text(&replayed));

    // After the access token expires the refresh token gets a new one.
    outlive_the_access_token(issued).await;
    let text = whoami(&workspace, "world")
        .await
        .expect("refreshed behind the call");
    assert!(text.starts_with("ada "), "{text}");
    // The refresh answered a new refresh token, which the host has not sent anywhere yet:
    // it is a secret from the moment it arrived, so a server that echoes it shows nothing.
    let leaked = workspace
        .call_tool("world", "leak", json!({}), CallOptions::default())
        .await
        .expect("leak answers")
        .text();
    assert_eq!(
        leaked, "refresh <redacted>",
        "the rotated refresh token showed"
    );

    // Revoked refresh token: the server becomes authorization-required with a new URL.
    world.revoke().await;
    let refused = whoami(&workspace, "world").await;
    assert!(refused.is_err(), "{refused:?}");
    shown.push(format!("{refused:?}"));
    let again = wait_server(&workspace, "world", |s| {
        s.state == ServerState::AuthorizationRequired && s.authorization.is_some()
    })
    .await;
    assert_ne!(again.authorization.as_ref().map(|a| &a.url), Some(&url));
    shown.push(format!("{again:?}"));
    let callback = approve(&again.authorization.expect("a URL").url).await;
    let ready = workspace
        .oauth_complete("world", &callback)
        .await
        .expect("the second authorization completes the enable");
    assert_eq!(ready.state, ServerState::Ready, "{:?}", ready.problem);
    assert!(whoami(&workspace, "world").await.is_ok());
    world.assert_proved().await;
    shown.push(format!("{:?}", workspace.snapshot()));
    shown.push(format!("{:?}", workspace.list().await));
    shutdown_clean(host).await;

    // After a restart the tokens are gone: authorization-required, and enable starts anew.
    let store = SqliteStore::open(&state).expect("the state file opens again");
    let host = host_on(store).await;
    let workspace = host.default_workspace();
    let restarted = wait_server(&workspace, "world", |s| {
        s.state == ServerState::AuthorizationRequired
    })
    .await;
    assert!(restarted.tools.is_empty());
    let fresh = workspace.enable("world").await.expect("a fresh 202");
    assert_eq!(fresh.state, ServerState::AuthorizationRequired);
    assert!(fresh.authorization.is_some());
    let lost = workspace.disable("world").await.expect("disabled");
    assert_eq!(lost.state, ServerState::Disabled);
    let cleared = workspace
        .oauth_complete("world", &callback)
        .await
        .expect_err("a disable clears the pending authorization");
    assert_eq!(cleared.kind, "oauth-not-pending");
    shutdown_clean(host).await;

    // No credential the provider issued or received is in anything the host let out.
    let issued = world.issued().await;
    assert!(
        issued.len() >= 6,
        "the provider saw codes, verifiers and tokens: {}",
        issued.len()
    );
    let log = logs::logged();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the log is captured"
    );
    holds_none("the trace log", &log, &issued);
    holds_none("what the host answered", &shown.join("\n"), &issued);
    let bytes = std::fs::read_dir(&dir)
        .expect("the state directory")
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    holds_none("the state file", &bytes, &issued);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that answers every call of one tool with 403 `insufficient_scope` gets a new
/// authorization asked of its person three times in a row, and then no more: it is
/// unavailable, saying why and what to do, instead of asking for approval forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_asking_for_more_scope_is_stepped_up_at_most_three_times() {
    let world = World::start();
    let host = Host::start(config(&[])).await.expect("host starts");
    let workspace = host.default_workspace();
    let pending = workspace
        .add(definition(
            "world",
            &world.mcp,
            json!({"type": "oauth", "redirectUrl": REDIRECT}),
        ))
        .await
        .expect("a pending authorization");
    let url = pending.authorization.expect("an authorization URL").url;
    let ready = workspace
        .oauth_complete("world", &approve(&url).await)
        .await
        .expect("authorized");
    assert_eq!(ready.state, ServerState::Ready, "{:?}", ready.problem);
    let escalate = || async {
        workspace
            .call_tool("world", "escalate", json!({}), CallOptions::default())
            .await
    };
    let mut approvals = Vec::new();
    for round in 1..=3 {
        assert!(escalate().await.is_err(), "round {round}");
        let again = wait_server(&workspace, "world", |s| {
            s.state == ServerState::AuthorizationRequired && s.authorization.is_some()
        })
        .await;
        let url = again.authorization.expect("a URL").url;
        assert!(
            !approvals.contains(&url),
            "round {round}: a new authorization"
        );
        let ready = workspace
            .oauth_complete("world", &approve(&url).await)
            .await
            .expect("the step-up completes");
        assert_eq!(ready.state, ServerState::Ready, "round {round}");
        approvals.push(url);
    }
    assert!(escalate().await.is_err());
    // The lost connection reconnects, and its authorization decides: a fourth request for
    // approval, or the refusal.
    let refused = wait_server(&workspace, "world", |s| {
        s.state == ServerState::AuthorizationRequired
            || s.problem
                .as_ref()
                .is_some_and(|p| p.detail.contains("scope"))
    })
    .await;
    assert_eq!(
        refused.state,
        ServerState::Unavailable,
        "no fourth approval is asked for: {:?}",
        refused.authorization
    );
    let detail = refused.problem.map(|p| p.detail).unwrap_or_default();
    assert!(
        detail.contains("asked for more scope 3 times in a row"),
        "{detail}"
    );
    let presented = world.presented().await;
    assert_eq!(presented["escalations"], 4, "{presented}");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_authorizes_with_client_credentials_bound_to_its_issuer() {
    logs::capture();
    let world = World::start();
    let host = Host::start(config(&[("MACHINE_SECRET", MACHINE_SECRET.into())]))
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let grant = |issuer: &str| {
        json!({"type": "client-credentials", "clientId": "machine",
               "clientSecret": "${MACHINE_SECRET}", "issuer": issuer})
    };

    let ready = workspace
        .add(definition("machine", &world.mcp, grant(&world.issuer)))
        .await
        .expect("the grant runs while the connection is prepared");
    assert_eq!(ready.state, ServerState::Ready);
    let text = whoami(&workspace, "machine").await.expect("authorized");
    assert!(text.starts_with("machine"), "{text}");
    world.assert_proved().await;

    // A provider without DPoP: the same grant gives a bearer token, presented as one.
    let plain = World::start_with(&[("OAUTH_WORLD_NO_DPOP", "1")]);
    let bearer = workspace
        .add(definition("plain", &plain.mcp, grant(&plain.issuer)))
        .await
        .expect("the grant runs without DPoP");
    assert_eq!(bearer.state, ServerState::Ready, "{:?}", bearer.problem);
    let text = whoami(&workspace, "plain").await.expect("authorized");
    assert!(text.starts_with("machine"), "{text}");
    let presented = plain.presented().await;
    assert_eq!(
        (
            presented["dpop"].as_u64(),
            presented["bearer"].as_u64() >= Some(1)
        ),
        (Some(0), true),
        "{presented}"
    );

    // An authorization that waits while its alias is added otherwise: completing it would
    // replace that server, so it is refused, and consumed.
    let waiting = workspace
        .add(definition(
            "race",
            &world.mcp,
            json!({"type": "oauth", "redirectUrl": REDIRECT}),
        ))
        .await
        .expect("a pending authorization");
    let url = waiting.authorization.expect("an authorization URL").url;
    let other = workspace
        .add(definition("race", &world.mcp, grant(&world.issuer)))
        .await
        .expect("the alias is added with the grant meanwhile");
    assert_eq!(other.state, ServerState::Ready, "{:?}", other.problem);
    let callback = approve(&url).await;
    let conflict = workspace
        .oauth_complete("race", &callback)
        .await
        .expect_err("the alias changed meanwhile");
    assert_eq!(
        (conflict.status, conflict.kind.as_str()),
        (409, "oauth-target-conflict")
    );
    let again = workspace
        .oauth_complete("race", &callback)
        .await
        .expect_err("the conflict consumed it");
    assert_eq!(again.kind, "oauth-not-pending");
    let unknown = workspace
        .oauth_complete("nobody", &callback)
        .await
        .expect_err("no such server");
    assert_eq!(
        (unknown.status, unknown.kind.as_str()),
        (404, "oauth-not-pending")
    );
    assert!(
        whoami(&workspace, "race").await.is_ok(),
        "the added server stays"
    );

    // Bound to another issuer, the secret is not sent at all.
    let refused = workspace
        .add(definition(
            "elsewhere",
            &world.mcp,
            grant("https://issuer.invalid"),
        ))
        .await
        .expect_err("another issuer");
    assert_eq!(
        (refused.status, refused.kind.as_str()),
        (502, "oauth-client-credentials-failed")
    );
    assert!(refused.detail.contains("\"machine\""), "{}", refused.detail);
    // A wrong secret: refused by the provider, named by client id only.
    let host2 = Host::start(config(&[(
        "MACHINE_SECRET",
        "wrong-SECRET-value-77".into(),
    )]))
    .await
    .expect("host starts");
    let wrong = host2
        .default_workspace()
        .add(definition("machine", &world.mcp, grant(&world.issuer)))
        .await
        .expect_err("a wrong secret");
    assert_eq!(wrong.kind, "oauth-client-credentials-failed");
    assert!(!wrong.detail.contains("wrong-SECRET-value-77"));
    shutdown_clean(host2).await;
    let shown = format!(
        "{} {} {} {:?}",
        problem_text(&refused),
        problem_text(&wrong),
        problem_text(&conflict),
        workspace.snapshot()
    );
    shutdown_clean(host).await;

    let mut secrets = world.issued().await;
    secrets.push(MACHINE_SECRET.to_owned());
    let log = logs::logged();
    holds_none("the trace log", &log, &secrets);
    holds_none("what the host answered", &shown, &secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_exchanges_its_identity_token_and_again_once_the_token_expires() {
    logs::capture();
    let world = World::start();
    let (valid, wrong_audience) = world.workload.clone();
    let grant = |issuer: &str| {
        json!({"type": "workload-identity", "clientId": "workload",
               "assertion": "${WORKLOAD_JWT}", "issuer": issuer})
    };
    let host = Host::start(config(&[("WORKLOAD_JWT", valid.clone())]))
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let ready = workspace
        .add(definition("runner", &world.mcp, grant(&world.issuer)))
        .await
        .expect("the grant runs while the connection is prepared");
    let issued = Instant::now();
    assert_eq!(ready.state, ServerState::Ready, "{:?}", ready.problem);
    let text = whoami(&workspace, "runner").await.expect("authorized");
    assert!(text.starts_with("workload"), "{text}");
    // The grant gives no refresh token: once the token expires the grant runs again.
    outlive_the_access_token(issued).await;
    let text = whoami(&workspace, "runner")
        .await
        .expect("a new grant behind the call");
    assert!(text.starts_with("workload"), "{text}");
    let presented = world.presented().await;
    assert!(presented["bearer"].as_u64() >= Some(2), "{presented}");

    // Bound to another issuer, the identity token is not sent.
    let elsewhere = workspace
        .add(definition(
            "elsewhere",
            &world.mcp,
            grant("https://issuer.invalid"),
        ))
        .await
        .expect_err("another issuer");
    assert_eq!(
        (elsewhere.status, elsewhere.kind.as_str()),
        (502, "oauth-workload-identity-failed")
    );
    shutdown_clean(host).await;

    // A token for another audience: refused by the provider, its OAuth error named.
    let host = Host::start(config(&[("WORKLOAD_JWT", wrong_audience.clone())]))
        .await
        .expect("host starts");
    let refused = host
        .default_workspace()
        .add(definition("runner", &world.mcp, grant(&world.issuer)))
        .await
        .expect_err("a token for another audience");
    assert_eq!(
        (refused.status, refused.kind.as_str()),
        (502, "oauth-workload-identity-failed")
    );
    assert!(
        refused.detail.contains("invalid_grant"),
        "{}",
        refused.detail
    );
    assert!(refused.detail.contains("\"runner\""), "{}", refused.detail);
    shutdown_clean(host).await;

    let shown = format!(
        "{} {} {:?}",
        problem_text(&elsewhere),
        problem_text(&refused),
        ready
    );
    let mut secrets = world.issued().await;
    secrets.extend([valid, wrong_audience]);
    let log = logs::logged();
    holds_none("the trace log", &log, &secrets);
    holds_none("what the host answered", &shown, &secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_a_browser_authorizes_with_the_device_grant() {
    logs::capture();
    let world = World::start();
    let host = Host::start(config(&[])).await.expect("host starts");
    let workspace = host.default_workspace();
    let oauth = json!({"type": "oauth", "redirectUrl": REDIRECT});
    let first = workspace
        .add(definition("world", &world.mcp, oauth.clone()))
        .await
        .expect("a pending authorization");
    assert_eq!(first.state, ServerState::AuthorizationRequired);

    let device = workspace
        .authorize_device("world", Some("mcp"))
        .await
        .expect("a device authorization");
    assert!(
        device.verification_uri.starts_with(&world.issuer),
        "{device:?}"
    );
    assert!(!device.user_code.is_empty());
    assert!(device.interval >= 1 && device.expires_in > 0, "{device:?}");
    let shown = format!("{device:?} {:?}", workspace.snapshot());
    assert_eq!(
        workspace.poll_device("world", &device.device).await,
        Ok(plurnk_mcp::DevicePoll::Pending)
    );
    let unknown = workspace
        .poll_device("world", "device-unknown")
        .await
        .expect_err("an unknown handle");
    assert_eq!(unknown.kind, "oauth-not-pending");

    // The person, on another device, enters the code, logs in and consents.
    let complete = device
        .verification_uri_complete
        .clone()
        .expect("the provider gives the complete URI");
    let ended = browse(&complete)
        .await
        .expect_err("the device flow ends on a page");
    assert!(
        ended.contains("Success") || ended.contains("success"),
        "{ended:.400}"
    );

    let server = match workspace.poll_device("world", &device.device).await {
        Ok(plurnk_mcp::DevicePoll::Authorized { server }) => server,
        other => panic!("not authorized: {other:?}"),
    };
    assert_eq!(server.state, ServerState::Ready, "{:?}", server.problem);
    let text = whoami(&workspace, "world").await.expect("authorized");
    assert!(text.starts_with("ada"), "{text}");
    world.assert_proved().await;
    shutdown_clean(host).await;

    // A provider without the device grant: a clear refusal, nothing else.
    let plain = World::start_with(&[("OAUTH_WORLD_NO_DEVICE", "1")]);
    let host = Host::start(config(&[])).await.expect("host starts");
    let workspace = host.default_workspace();
    let _ = workspace
        .add(definition("plain", &plain.mcp, oauth))
        .await
        .expect("a pending authorization");
    let refused = workspace
        .authorize_device("plain", None)
        .await
        .expect_err("no device endpoint");
    assert!(
        refused.detail.contains("device_authorization_endpoint"),
        "{}",
        refused.detail
    );
    shutdown_clean(host).await;

    let issued = world.issued().await;
    let log = logs::logged();
    holds_none("the trace log", &log, &issued);
    holds_none("what the host answered", &shown, &issued);
}

/// The device grant needs no redirect URL: a server declared by its URL alone (no
/// `_AUTHORIZATION`) that answers 401 naming its authorization server, and one declared with
/// an `oauth` authorization that gives no `redirectUrl`, are each authorized with it (a
/// client registered for it, the person's code entered elsewhere, the token used from then
/// on). Without the device grant the first is `server-unauthorized`, the second says a
/// browser authorization needs the redirect URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_device_grant_needs_no_redirect_url() {
    let world = World::start();
    let host = Host::start(config(&[
        ("PLURNK_MCP_BARE", world.mcp.clone()),
        ("PLURNK_MCP_NOREDIRECT", world.mcp.clone()),
        (
            "PLURNK_MCP_NOREDIRECT_AUTHORIZATION",
            json!({"type": "oauth"}).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED",
            json!(["bare", "noredirect"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let problem = |alias: &str| {
        snapshot
            .server(alias)
            .and_then(|server| server.problem.clone())
            .expect("a Problem")
    };
    assert_eq!(problem("bare").kind, "server-unauthorized");
    let noredirect = problem("noredirect");
    assert!(
        noredirect.detail.contains("redirectUrl") && noredirect.detail.contains("device grant"),
        "{noredirect:?}"
    );
    for alias in ["bare", "noredirect"] {
        let device = workspace
            .authorize_device(alias, Some("mcp"))
            .await
            .unwrap_or_else(|problem| panic!("{alias}: {problem:?}"));
        assert!(
            device.verification_uri.starts_with(&world.issuer),
            "{device:?}"
        );
        let complete = device
            .verification_uri_complete
            .clone()
            .expect("the provider gives the complete URI");
        let ended = browse(&complete)
            .await
            .expect_err("the device flow ends on a page");
        assert!(
            ended.contains("Success") || ended.contains("success"),
            "{ended:.400}"
        );
        let server = match workspace.poll_device(alias, &device.device).await {
            Ok(plurnk_mcp::DevicePoll::Authorized { server }) => server,
            other => panic!("{alias} not authorized: {other:?}"),
        };
        assert_eq!(server.state, ServerState::Ready, "{:?}", server.problem);
        let text = whoami(&workspace, alias).await.expect("authorized");
        assert!(text.starts_with("ada"), "{alias}: {text}");
    }
    shutdown_clean(host).await;
}

/// Reads `child`'s stdout lines until one holds `marker`; that line. Every line read is
/// kept in `seen`.
async fn line_with(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    marker: &str,
    seen: &mut Vec<String>,
) -> String {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line.clone());
            if line.contains(marker) {
                return Some(line);
            }
        }
        None
    })
    .await;
    found
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no line with {marker:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_authorizes_through_a_browser_and_with_a_device_code() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let world = World::start();
    let dir = std::env::temp_dir().join(format!("plurnk-oauth-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a state directory");
    let state = dir.join("state.db").to_string_lossy().into_owned();
    let exe = env!("CARGO_BIN_EXE_plurnk-mcp");
    let command = |args: &[&str]| {
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("--state")
            .arg(&state)
            .args(args)
            .env("PLURNK_MCP_ALLOW_ADD", "true")
            .env("PLURNK_MCP_LOG", "trace")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    };

    // Everything the commands printed, on either stream, at the most verbose log level.
    let mut seen = Vec::new();
    let keep = |output: &std::process::Output, seen: &mut Vec<String>| {
        seen.push(String::from_utf8_lossy(&output.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&output.stderr).into_owned());
    };

    // `add` of an OAuth server: the URL is printed, the callback URL read from stdin.
    let options = json!({"authorization": {"type": "oauth", "redirectUrl": REDIRECT}}).to_string();
    let mut add = command(&["add", "world", &world.mcp, "--options", &options])
        .spawn()
        .expect("plurnk-mcp add starts");
    let mut lines = tokio::io::BufReader::new(add.stdout.take().expect("stdout")).lines();
    let said = line_with(&mut lines, "waits for authorization", &mut seen).await;
    assert!(
        said.contains("server \"world\" waits for authorization (202)"),
        "{said}"
    );
    let url = line_with(&mut lines, &world.issuer, &mut seen).await;
    let callback = approve(url.trim()).await;
    let mut stdin = add.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{callback}\n").as_bytes())
        .await
        .expect("the callback is written");
    drop(stdin);
    let ready = line_with(&mut lines, "world", &mut seen).await;
    assert!(ready.contains("ready"), "{ready}");
    let added = tokio::time::timeout(Duration::from_secs(30), add.wait_with_output())
        .await
        .expect("add ends")
        .expect("add's output");
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    keep(&added, &mut seen);

    // A new process has no tokens: status says how to authorize it.
    let status = tokio::time::timeout(Duration::from_secs(30), command(&["status"]).output())
        .await
        .expect("status ends")
        .expect("status runs");
    keep(&status, &mut seen);
    let said = String::from_utf8_lossy(&status.stderr);
    assert!(said.contains("plurnk-mcp auth world"), "{said}");
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("authorization-required"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );

    // `auth --device` on a terminal, as a person runs it: a code to enter elsewhere, kept
    // in view with the time left while it is polled until approved.
    let mut device = Command::new(exe);
    device
        .arg("--state")
        .arg(&state)
        .args(["auth", "world", "--device"])
        .env("PLURNK_MCP_ALLOW_ADD", "true")
        .env("PLURNK_MCP_LOG", "trace")
        .env("TERM", "xterm");
    let mut auth = pty::Terminal::spawn(device, 200, 50);
    let bound = Duration::from_secs(30);
    let shown = |auth: &pty::Terminal, marker: &str| {
        auth.text()
            .lines()
            .find(|line| line.contains(marker))
            .map(str::to_owned)
    };
    assert!(
        wait::until(bound, || shown(&auth, "on any device, open").is_some()).await,
        "{}",
        auth.text()
    );
    let open = shown(&auth, "on any device, open").unwrap_or_default();
    assert!(open.contains("waits for authorization (202)"), "{open}");
    let complete = open
        .split_whitespace()
        .find(|word| word.starts_with("http"))
        .expect("a URL on the line")
        .to_owned();
    let code = shown(&auth, "enter the code")
        .and_then(|line| {
            line.split_whitespace()
                .last()
                .map(|code| code.trim_end_matches(')').to_owned())
        })
        .expect("the code is printed");
    // The countdown names the code and ticks: two different times left are drawn.
    let countdown = |auth: &pty::Terminal| -> std::collections::BTreeSet<String> {
        auth.text()
            .split(&format!("waiting for approval of code {code} at "))
            .skip(1)
            .filter_map(|rest| {
                rest.split(" left")
                    .next()?
                    .rsplit(": ")
                    .next()
                    .map(str::to_owned)
            })
            .collect()
    };
    assert!(
        wait::until(bound, || countdown(&auth).len() >= 2).await,
        "no countdown: {}",
        auth.text()
    );
    browse(&complete)
        .await
        .expect_err("the device flow ends on a page");
    let status = tokio::task::block_in_place(|| auth.wait(bound)).expect("auth ends");
    let printed = auth.text();
    assert!(status.success(), "{printed}");
    assert!(
        printed.contains("server \"world\" is ready") && printed.contains("whoami"),
        "{printed}"
    );
    seen.push(printed);

    // No credential the provider issued or received is in anything the commands printed.
    let printed = seen.join("\n");
    assert!(
        printed.contains("TRACE") || printed.contains("DEBUG"),
        "the commands logged at trace level"
    );
    holds_none("the command line's output", &printed, &world.issued().await);
    world.assert_proved().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command-line process: its stdout read by line, its stderr drained as it is written (a
/// trace log would otherwise fill the pipe and stop the process).
struct Running {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
}

impl Running {
    fn start(mut command: tokio::process::Command) -> Running {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let mut child = command.spawn().expect("plurnk-mcp starts");
        let lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        Running {
            child,
            lines,
            stderr,
        }
    }

    /// Waits (bounded) for the process to end successfully; the JSON it printed after what
    /// was read. Everything it printed goes to `seen`.
    async fn finish(mut self, seen: &mut Vec<String>) -> Value {
        let ended = tokio::time::timeout(Duration::from_secs(60), async {
            let mut rest = String::new();
            while let Ok(Some(line)) = self.lines.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            (rest, self.child.wait().await)
        })
        .await;
        let (rest, status) = ended.expect("the command ends");
        let stderr = self.stderr.await.unwrap_or_default();
        seen.push(rest.clone());
        seen.push(stderr.clone());
        assert!(status.is_ok_and(|status| status.success()), "{stderr}");
        serde_json::from_str(&rest).expect("the summary, as JSON")
    }
}

/// The operator's environment declaring one server for each flow: `person` and `device`
/// (interactive OAuth), `machine` (client credentials) and `runner` (workload identity), the
/// last two enabled; no `PLURNK_MCP_ALLOW_ADD`, no `PLURNK_MCP_WORKSPACE_ENV`.
fn declared(world: &World, workload_jwt: &str) -> Vec<(String, String)> {
    let oauth = json!({"type": "oauth", "redirectUrl": REDIRECT});
    let servers = [
        ("PERSON", oauth.clone()),
        ("DEVICE", oauth),
        (
            "MACHINE",
            json!({"type": "client-credentials", "clientId": "machine",
                   "clientSecret": "${MACHINE_SECRET}", "issuer": world.issuer}),
        ),
        (
            "RUNNER",
            json!({"type": "workload-identity", "clientId": "workload",
                   "assertion": "${WORKLOAD_JWT}", "issuer": world.issuer}),
        ),
    ];
    let mut vars = Vec::new();
    for (name, authorization) in servers {
        vars.push((format!("PLURNK_MCP_{name}"), world.mcp.clone()));
        vars.push((
            format!("PLURNK_MCP_{name}_AUTHORIZATION"),
            authorization.to_string(),
        ));
    }
    vars.extend([
        (
            "PLURNK_MCP_ENABLED".to_owned(),
            json!(["machine", "runner"]).to_string(),
        ),
        ("PLURNK_MCP_CONNECT_TIMEOUT".to_owned(), "20000".to_owned()),
        ("MACHINE_SECRET".to_owned(), MACHINE_SECRET.to_owned()),
        ("WORKLOAD_JWT".to_owned(), workload_jwt.to_owned()),
    ]);
    vars
}

/// Servers the operator declares are always honoured: with the install gate closed (the
/// default), each flow authorizes a server declared with `PLURNK_MCP_<server>_AUTHORIZATION`,
/// through the embedding API and through the command line, nothing added or customized; the
/// answers that wait for a person are the specification's `202 { authorization: { url } }`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flow_authorizes_servers_the_operator_declares_with_the_install_gate_closed() {
    use tokio::io::AsyncWriteExt;
    logs::capture();
    let world = World::start();
    let (workload_jwt, _) = world.workload.clone();
    let vars = declared(&world, &workload_jwt);
    let config = HostConfig::from_env(vars.clone()).expect("a valid configuration");
    assert!(
        !config.allows_runtime_servers(),
        "the install gate is closed"
    );
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let mut shown = Vec::new();

    // An application and a workload: their grants run as the host starts.
    for (alias, subject) in [("machine", "machine"), ("runner", "workload")] {
        let server = wait_server(&workspace, alias, |s| {
            !matches!(s.state, ServerState::Connecting | ServerState::Disabled)
        })
        .await;
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
        let text = whoami(&workspace, alias).await.expect("authorized");
        assert!(text.starts_with(subject), "{alias}: {text}");
    }
    // The gate is closed indeed: nothing can be added.
    let refused = workspace
        .add(definition(
            "extra",
            &world.mcp,
            json!({"type": "oauth", "redirectUrl": REDIRECT}),
        ))
        .await
        .expect_err("the install gate is closed");
    assert_eq!(refused.status, 403, "{refused}");

    // A person: the enable is accepted (202) and publishes nothing; the callback finishes it.
    let asked = workspace
        .enable("person")
        .await
        .expect("a 202, not a failure");
    let accepted = Accepted::of(&asked).expect("the enable waits for a person");
    let url = accepted.authorization().url.clone();
    assert!(url.starts_with(&world.issuer), "{url}");
    assert_eq!(
        serde_json::to_value(&accepted).ok(),
        Some(json!({"status": 202, "authorization": {"url": url}}))
    );
    let unpublished = workspace.snapshot();
    let person = unpublished.server("person");
    assert!(
        person.is_none_or(|s| s.state != ServerState::Ready && s.tools.is_empty()),
        "{person:?}"
    );
    shown.push(format!("{asked:?}"));
    let ready = workspace
        .oauth_complete("person", &approve(&url).await)
        .await
        .expect("the callback completes the enable");
    assert_eq!(ready.state, ServerState::Ready, "{:?}", ready.problem);
    assert!(
        Accepted::of(&ready).is_none(),
        "a finished action is no 202"
    );
    let text = whoami(&workspace, "person").await.expect("authorized");
    assert!(text.starts_with("ada"), "{text}");

    // A daemon without a browser: the device grant.
    let device = workspace
        .authorize_device("device", Some("mcp"))
        .await
        .expect("a device authorization");
    assert!(
        device.verification_uri.starts_with(&world.issuer),
        "{device:?}"
    );
    assert_eq!(
        workspace.poll_device("device", &device.device).await,
        Ok(plurnk_mcp::DevicePoll::Pending)
    );
    let complete = device
        .verification_uri_complete
        .clone()
        .expect("the provider gives the complete URI");
    browse(&complete)
        .await
        .expect_err("the device flow ends on a page");
    let server = match workspace.poll_device("device", &device.device).await {
        Ok(plurnk_mcp::DevicePoll::Authorized { server }) => server,
        other => panic!("not authorized: {other:?}"),
    };
    assert_eq!(server.state, ServerState::Ready, "{:?}", server.problem);
    let text = whoami(&workspace, "device").await.expect("authorized");
    assert!(text.starts_with("ada"), "{text}");
    // Every flow but the workload's (whose grant answers bearer tokens) proved its key.
    let presented = world.presented().await;
    assert!(presented["dpop"].as_u64() >= Some(3), "{presented}");
    assert!(
        presented["nonceChallenges"].as_u64() >= Some(1),
        "{presented}"
    );
    shown.push(format!("{device:?} {server:?} {:?}", workspace.snapshot()));
    shown.push(format!("{:?}", workspace.list().await));
    shutdown_clean(host).await;

    // The command line, a process of its own with the same environment: `enable --json`
    // prints the 202 and finishes with the callback; `auth --device --json` prints the
    // device's 202 and polls until it is approved.
    let dir = std::env::temp_dir().join(format!("plurnk-oauth-declared-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a state directory");
    let state = dir.join("state.db").to_string_lossy().into_owned();
    let command = |args: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_plurnk-mcp"));
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("PLURNK_MCP_")) {
            command.env_remove(name);
        }
        command
            .arg("--state")
            .arg(&state)
            .args(args)
            .envs(vars.iter().cloned())
            .env("PLURNK_MCP_LOG", "trace")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    };
    let mut seen = Vec::new();

    let mut enable = Running::start(command(&["enable", "person", "--json"]));
    let first = line_with(&mut enable.lines, "\"status\"", &mut seen).await;
    let accepted: Value = serde_json::from_str(&first).expect("the 202 on one line");
    let url = accepted["authorization"]["url"]
        .as_str()
        .expect("a URL")
        .to_owned();
    assert_eq!(
        accepted,
        json!({"status": 202, "authorization": {"url": url}})
    );
    let callback = approve(&url).await;
    let mut stdin = enable.child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{callback}\n").as_bytes())
        .await
        .expect("the callback is written");
    drop(stdin);
    let summary = enable.finish(&mut seen).await;
    assert_eq!(
        (summary["alias"].as_str(), summary["state"].as_str()),
        (Some("person"), Some("ready")),
        "{summary}"
    );

    let mut auth = Running::start(command(&["auth", "device", "--device", "--json"]));
    let first = line_with(&mut auth.lines, "\"status\"", &mut seen).await;
    let accepted: Value = serde_json::from_str(&first).expect("the 202 on one line");
    assert_eq!(accepted["status"], 202, "{accepted}");
    let code = &accepted["authorization"]["device"];
    assert_eq!(
        accepted["authorization"]["url"], code["verificationUri"],
        "{accepted}"
    );
    browse(
        code["verificationUriComplete"]
            .as_str()
            .expect("the complete URI"),
    )
    .await
    .expect_err("the device flow ends on a page");
    let summary = auth.finish(&mut seen).await;
    assert_eq!(
        (summary["alias"].as_str(), summary["state"].as_str()),
        (Some("device"), Some("ready")),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    // No credential the provider issued or received, nor the operator's, is in anything the
    // host let out.
    let mut secrets = world.issued().await;
    secrets.extend([MACHINE_SECRET.to_owned(), workload_jwt]);
    let printed = seen.join("\n");
    assert!(
        printed.contains("TRACE") || printed.contains("DEBUG"),
        "the commands logged at trace level"
    );
    holds_none("the trace log", &logs::logged(), &secrets);
    holds_none("what the host answered", &shown.join("\n"), &secrets);
    holds_none("the command line's output", &printed, &secrets);
}
