//! The client under test for the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, client leg).
//!
//! ```text
//! conformance client --command "<this binary>" --scenario <name> --spec-version 2026-07-28
//! ```
//!
//! The suite starts a mock HTTP server per scenario and runs `<this binary> <server-url>` with
//! `MCP_CONFORMANCE_SCENARIO` (the scenario name), `MCP_CONFORMANCE_PROTOCOL_VERSION` (the
//! revision the run targets) and, for some scenarios, `MCP_CONFORMANCE_CONTEXT` (a JSON
//! object `{"name": <scenario>, ...}` with scenario data such as the tool calls to make).
//!
//! Everything goes through the crate's public embedding API — `Host`, `Workspace`,
//! `call_tool`, the snapshot — exactly as a daemon would use it, so the suite scores the host
//! and not rmcp used directly. What the binary does is written to stderr (the suite keeps it
//! in `stderr.txt`); it exits 0 when the scenario ran as expected, 1 when the host failed at
//! something the scenario needs, 2 for a usage error or an unknown scenario.
//!
//! `scripts/conformance.sh` runs the scenarios this binary knows one at a time and checks
//! every `checks.json`.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use plurnk_mcp::{
    CallOptions, Elicitation, ElicitationAnswer, Host, HostConfig, HostOptions, Interaction,
    InteractionHandler, ServerDefinition, ServerSnapshot, ServerState, ToolInfo, ToolResult,
    Workspace,
};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

/// The alias the scenario's server gets in the host configuration.
const ALIAS: &str = "conformance";

/// The scenarios this client drives, in the order `scripts/conformance.sh` runs them.
const SCENARIOS: &[&str] = &[
    "tools_call",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "initialize",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
];

/// The authorization scenarios: the host authorizes through OAuth (interactive, or the
/// client-credentials grant) before it can list and call.
const AUTH_SCENARIOS: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-basic",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
];

/// Where the authorization server sends the person back; the mock authorization server
/// redirects there at once, and the client hands the whole URL to `oauth_complete`.
const REDIRECT_URL: &str = "http://localhost:3000/callback";

/// The client ID metadata document the suite's authorization servers accept.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The variable the scenario's client secret is handed to the host in.
const SECRET_VARIABLE: &str = "CONFORMANCE_CLIENT_SECRET";

/// How many authorizations one scenario may need (a scope step-up asks for a second).
const MAX_AUTHORIZATIONS: usize = 3;

/// Per-call deadline; well inside the suite's client timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLURNK_MCP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url] = args.as_slice() else {
        eprintln!(
            "usage: conformance <server-url>\n\
             run by the MCP conformance suite with MCP_CONFORMANCE_SCENARIO set; \
             scenarios: {}",
            SCENARIOS.join(", ")
        );
        return ExitCode::from(2);
    };
    let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") else {
        eprintln!("conformance: MCP_CONFORMANCE_SCENARIO is not set: run me through the suite");
        return ExitCode::from(2);
    };
    if !SCENARIOS.contains(&scenario.as_str()) && !AUTH_SCENARIOS.contains(&scenario.as_str()) {
        eprintln!(
            "conformance: unknown scenario {scenario:?}: this client drives only {}",
            SCENARIOS.join(", ")
        );
        return ExitCode::from(2);
    }
    let context = match read_context() {
        Ok(context) => context,
        Err(error) => {
            eprintln!("conformance: {error:#}");
            return ExitCode::from(2);
        }
    };
    let revision = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("conformance: could not start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "conformance: scenario {scenario}, server {url}, revision {}",
        revision.as_deref().unwrap_or("(not given)")
    );
    let outcome = if AUTH_SCENARIOS.contains(&scenario.as_str()) {
        runtime.block_on(run_auth(url, &scenario, &context))
    } else {
        runtime.block_on(run(url, &scenario, revision.as_deref(), &context))
    };
    match outcome {
        Ok(()) => {
            eprintln!("conformance: scenario {scenario} done");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("conformance: scenario {scenario} FAILED: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Starts a host that may add servers, adds the scenario's server with the authorization it
/// asks for, authorizes like a person with a browser would (follows the authorization URL,
/// which the mock approves at once, and hands the callback URL to `oauth_complete`), then
/// lists and calls every tool.
async fn run_auth(url: &str, scenario: &str, context: &Value) -> anyhow::Result<()> {
    let mut env = BTreeMap::from([
        ("PLURNK_MCP_ALLOW_ADD".to_owned(), "true".to_owned()),
        (
            "PLURNK_MCP_WORKSPACE_ENV".to_owned(),
            format!(r#"["{SECRET_VARIABLE}"]"#),
        ),
        ("PLURNK_MCP_CONNECT_TIMEOUT".to_owned(), "20000".to_owned()),
        ("PLURNK_MCP_REQUEST_TIMEOUT".to_owned(), "20000".to_owned()),
    ]);
    if let Some(secret) = context["client_secret"].as_str() {
        env.insert(SECRET_VARIABLE.to_owned(), secret.to_owned());
    }
    // The workload's identity token (the scenario also gives a wrong-audience and an expired
    // one, for clients that probe their own error paths; the host's are unit-tested).
    if let Some(token) = context["valid_jwt"].as_str() {
        env.insert(SECRET_VARIABLE.to_owned(), token.to_owned());
    }
    let host = start_host(env, None).await?;
    let outcome = authorize_and_call(&host, url, scenario, context).await;
    finish(host, outcome).await
}

async fn authorize_and_call(
    host: &Host,
    url: &str,
    scenario: &str,
    context: &Value,
) -> anyhow::Result<()> {
    let client_id = context["client_id"].as_str();
    let secret = format!("${{{SECRET_VARIABLE}}}");
    let authorization = match (scenario, client_id) {
        ("auth/client-credentials-basic", Some(client_id)) => {
            json!({"type": "client-credentials", "clientId": client_id, "clientSecret": secret})
        }
        ("auth/wif-jwt-bearer", Some(client_id)) => {
            json!({"type": "workload-identity", "clientId": client_id, "assertion": secret})
        }
        ("auth/pre-registration", Some(client_id)) => json!({
            "type": "oauth", "redirectUrl": REDIRECT_URL,
            "clientId": client_id, "clientSecret": secret,
        }),
        _ => json!({
            "type": "oauth", "redirectUrl": REDIRECT_URL, "clientMetadataUrl": CLIENT_METADATA_URL,
        }),
    };
    let wire: plurnk_mcp::config::McpServerDefinition = serde_json::from_value(json!({
        "name": ALIAS, "transport": "http", "url": url, "authorization": authorization,
    }))
    .context("the scenario's definition")?;
    let definition = ServerDefinition::try_from(wire).map_err(|errors| {
        let faults: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
        anyhow!(
            "the scenario's definition was refused: {}",
            faults.join("; ")
        )
    })?;
    let workspace = host.default_workspace();
    let mut answer = workspace.add(definition).await;
    for _ in 0..MAX_AUTHORIZATIONS {
        let snapshot = answer.map_err(|problem| anyhow!("{problem}"))?;
        let Some(pending) = &snapshot.authorization else {
            break;
        };
        let callback = follow_authorization(&pending.url).await?;
        eprintln!("conformance: authorized; completing with the callback");
        answer = workspace.oauth_complete(ALIAS, &callback).await;
    }
    let server = ready_server(&workspace, None)?;
    for tool in server.tools.iter() {
        let arguments = sample_arguments(&tool.input_schema);
        // A call refused for its token (a step-up, a migrated authorization server) takes
        // the server to authorization-required with a new URL: authorize, then call again.
        for _ in 0..=MAX_AUTHORIZATIONS {
            let result = workspace
                .call_tool(
                    ALIAS,
                    &tool.name,
                    arguments.clone(),
                    CallOptions {
                        timeout: Some(CALL_TIMEOUT),
                        ..CallOptions::default()
                    },
                )
                .await;
            let error = match result {
                Ok(result) => {
                    eprintln!(
                        "conformance: call {} -> isError {}",
                        tool.name, result.is_error
                    );
                    break;
                }
                Err(error) => error,
            };
            eprintln!("conformance: call {} failed: {error}", tool.name);
            let Some(url) = authorization_asked(&workspace).await else {
                break;
            };
            let callback = follow_authorization(&url).await?;
            eprintln!("conformance: authorized again; completing with the callback");
            if let Err(problem) = workspace.oauth_complete(ALIAS, &callback).await {
                eprintln!("conformance: the authorization was not completed: {problem}");
                break;
            }
        }
    }
    Ok(())
}

/// Waits (bounded) for the server to ask for authorization again, and gives its URL; `None`
/// when it settles otherwise.
async fn authorization_asked(workspace: &Workspace) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::time::Instant::now() < deadline {
        let snapshot = workspace.snapshot();
        let server = snapshot.server(ALIAS)?;
        match (&server.state, &server.authorization) {
            (ServerState::AuthorizationRequired, Some(pending)) => {
                return Some(pending.url.clone());
            }
            (ServerState::AuthorizationRequired, None) => return None,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    None
}

/// What a browser does with the authorization URL when the person approves: the mock
/// authorization server answers with a redirect to the callback at once.
async fn follow_authorization(url: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let response = client
        .get(url)
        .send()
        .await
        .context("the authorization URL")?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| {
            anyhow!(
                "the authorization URL answered {} without a redirect",
                response.status()
            )
        })?;
    Ok(location.to_owned())
}

/// `MCP_CONFORMANCE_CONTEXT`, or an empty object when the scenario has none.
fn read_context() -> anyhow::Result<Value> {
    match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => {
            let value: Value =
                serde_json::from_str(&text).context("MCP_CONFORMANCE_CONTEXT is not JSON")?;
            ensure!(
                value.is_object(),
                "MCP_CONFORMANCE_CONTEXT is not a JSON object"
            );
            Ok(value)
        }
        Err(_) => Ok(json!({})),
    }
}

/// Starts the host on the scenario's server, runs the scenario, and always shuts down.
async fn run(
    url: &str,
    scenario: &str,
    revision: Option<&str>,
    context: &Value,
) -> anyhow::Result<()> {
    let env = BTreeMap::from([
        (
            format!("PLURNK_MCP_{}", ALIAS.to_uppercase()),
            url.to_owned(),
        ),
        ("PLURNK_MCP_ENABLED".to_owned(), format!(r#"["{ALIAS}"]"#)),
        ("PLURNK_MCP_CONNECT_TIMEOUT".to_owned(), "20000".to_owned()),
        ("PLURNK_MCP_REQUEST_TIMEOUT".to_owned(), "20000".to_owned()),
    ]);
    // A 2025-11-25 server asks during the call, through the host's own handler.
    let interaction = (scenario == "elicitation-sep1034-client-defaults").then(prefilled);
    let host = start_host(env, interaction).await?;
    let outcome = drive(&host, scenario, revision, context).await;
    finish(host, outcome).await
}

/// Starts a host on `env`, as its operator would configure it, answering input requests
/// of calls that bring no handler with `interaction`.
async fn start_host(
    env: BTreeMap<String, String>,
    interaction: Option<InteractionHandler>,
) -> anyhow::Result<Host> {
    let config = HostConfig::from_env(env).map_err(|errors| {
        let faults: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
        anyhow!("the host configuration was refused: {}", faults.join("; "))
    })?;
    let options = HostOptions {
        interaction,
        ..HostOptions::default()
    };
    Host::start_with(config, options)
        .await
        .context("the host did not start")
}

/// Always shuts `host` down; the scenario's outcome first, then a clean close.
async fn finish(host: Host, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
    let report = host.shutdown().await;
    for failure in &report.failures {
        eprintln!(
            "conformance: server {:?} did not close cleanly: {}",
            failure.alias, failure.detail
        );
    }
    outcome?;
    ensure!(
        report.failures.is_empty(),
        "shutdown reported {} close failure(s)",
        report.failures.len()
    );
    Ok(())
}

async fn drive(
    host: &Host,
    scenario: &str,
    revision: Option<&str>,
    context: &Value,
) -> anyhow::Result<()> {
    let workspace = host.default_workspace();
    // The sse-retry mock answers initialize with 2025-03-26 whatever is offered: the server
    // chooses, and the host speaks it.
    let revision = revision.filter(|_| scenario != "sse-retry");
    let server = ready_server(&workspace, revision)?;
    match scenario {
        "tools_call" => tools_call(&workspace).await,
        "request-metadata" => request_metadata(&server),
        "sep-2322-client-request-state" => request_state(&workspace).await,
        "http-standard-headers" => standard_headers(&workspace).await,
        "http-custom-headers" => custom_headers(&workspace, context).await,
        "http-invalid-tool-headers" => invalid_tool_headers(&workspace, &server).await,
        "json-schema-ref-no-deref" => ref_no_deref(&server),
        "json-schema-2020-12-preservation" => schema_preservation(&workspace, &server).await,
        "initialize" => call_every_tool(&workspace, &server).await,
        "sse-retry" => sse_retry(&workspace, &server).await,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(&workspace, &server).await,
        other => bail!("no driver for scenario {other:?}"),
    }
}

/// The scenario server's snapshot, which must be ready at the revision the run targets.
fn ready_server(workspace: &Workspace, revision: Option<&str>) -> anyhow::Result<ServerSnapshot> {
    let snapshot = workspace.snapshot();
    let server = snapshot
        .server(ALIAS)
        .cloned()
        .ok_or_else(|| anyhow!("the snapshot has no server {ALIAS:?}"))?;
    if server.state != ServerState::Ready {
        let problem = server
            .problem
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| "no problem given".into());
        bail!("the server is {} after start: {problem}", server.state);
    }
    let negotiated = server
        .negotiated
        .as_ref()
        .ok_or_else(|| anyhow!("the server is ready but has no negotiated revision"))?;
    let names: Vec<&str> = server.tools.iter().map(|tool| tool.name.as_str()).collect();
    eprintln!(
        "conformance: ready at {} ({}), tools: [{}]",
        negotiated.revision,
        if negotiated.modern {
            "server/discover"
        } else {
            "initialize"
        },
        names.join(", ")
    );
    if let Some(revision) = revision {
        ensure!(
            negotiated.revision == revision,
            "the run targets revision {revision} but the host negotiated {}",
            negotiated.revision
        );
    }
    Ok(server)
}

/// Calls `tool` with `arguments`, answering the server's input requests with `interaction`,
/// and insists on a result that is not a tool-level error.
async fn call_answering(
    workspace: &Workspace,
    tool: &str,
    arguments: Value,
    interaction: Option<InteractionHandler>,
) -> anyhow::Result<ToolResult> {
    eprintln!("conformance: call {tool} {arguments}");
    let options = CallOptions {
        timeout: Some(CALL_TIMEOUT),
        interaction,
        ..CallOptions::default()
    };
    let result = workspace
        .call_tool(ALIAS, tool, arguments, options)
        .await
        .with_context(|| format!("tools/call {tool}"))?;
    eprintln!(
        "conformance:   {tool} -> {}{}",
        if result.is_error { "isError: " } else { "" },
        result.result
    );
    ensure!(!result.is_error, "{tool} answered with isError");
    Ok(result)
}

/// Like [`call_answering`] without an interaction handler, and the result's text must be `expected`.
async fn call_expecting(
    workspace: &Workspace,
    tool: &str,
    arguments: Value,
    expected: &str,
) -> anyhow::Result<()> {
    call_with(workspace, tool, arguments, expected, None).await
}

/// [`call_expecting`] with an interaction handler.
async fn call_with(
    workspace: &Workspace,
    tool: &str,
    arguments: Value,
    expected: &str,
    interaction: Option<InteractionHandler>,
) -> anyhow::Result<()> {
    let result = call_answering(workspace, tool, arguments, interaction).await?;
    let text = result.text();
    ensure!(
        text == expected,
        "{tool} answered {text:?}, expected {expected:?}"
    );
    Ok(())
}

fn tool<'a>(server: &'a ServerSnapshot, name: &str) -> anyhow::Result<&'a ToolInfo> {
    server
        .tool(name)
        .ok_or_else(|| anyhow!("the snapshot does not publish tool {name:?}"))
}

/// Runs every step, reports each failure, and fails with all of them at the end: a scenario
/// scores each call on its own, so one failing call must not hide the others.
fn all(steps: Vec<(&str, anyhow::Result<()>)>) -> anyhow::Result<()> {
    let failures: Vec<String> = steps
        .into_iter()
        .filter_map(|(step, outcome)| outcome.err().map(|error| format!("{step}: {error:#}")))
        .collect();
    for failure in &failures {
        eprintln!("conformance: step failed: {failure}");
    }
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The scenarios.

/// `tools_call`: the mock lists `add_numbers(a: number, b: number)`; the check passes when a
/// `tools/call` arrives whose `a` and `b` are numbers.
async fn tools_call(workspace: &Workspace) -> anyhow::Result<()> {
    call_expecting(
        workspace,
        "add_numbers",
        json!({"a": 5, "b": 3}),
        "The sum of 5 and 3 is 8",
    )
    .await
}

/// `request-metadata` (SEP-2575): the mock rejects the first request (`server/discover`) with
/// HTTP 400 / -32022 "Unsupported protocol version" (`supported: ["2026-07-28"]`) and checks
/// on every later POST: the `MCP-Protocol-Version` header, `_meta` protocolVersion +
/// clientCapabilities (+ clientInfo, else a warning), header == `_meta` version, well-formed
/// roots/sampling/elicitation capabilities, and that the retry uses 2026-07-28. It lists no
/// tools, so being ready (discover retried, tools/list answered) is the whole job.
fn request_metadata(server: &ServerSnapshot) -> anyhow::Result<()> {
    ensure!(
        server.negotiated.as_ref().is_some_and(|n| n.modern),
        "the host did not negotiate through server/discover"
    );
    eprintln!(
        "conformance: ready after the rejected first discover; {} tools listed",
        server.tools.len()
    );
    Ok(())
}

/// `sep-2322-client-request-state` (MRTR): four tools.
///
/// - `test_mrtr_echo_state` answers `resultType: "input_required"` with an elicitation under
///   key `confirm` and an opaque `requestState`; the retry (a new JSON-RPC id) must carry
///   `inputResponses` and the exact `requestState`; then it answers `echo-state-ok`.
/// - `test_mrtr_no_state`: the same without `requestState`; the retry must not carry one.
/// - `test_mrtr_unrelated`: a plain tool; its call must carry neither `inputResponses` nor
///   `requestState` (isolation). It is called from inside the echo-state interaction, so
///   while that tool's MRTR round is open.
/// - `test_mrtr_no_result_type`: a result without `resultType`, which means complete; the
///   client must not retry it.
///
/// Elicitations reach this binary through the host's per-call interaction handler
/// ([`CallOptions::interaction`]) and are accepted with values that fit the requested
/// schema (`{"confirmed": true}` here).
async fn request_state(workspace: &Workspace) -> anyhow::Result<()> {
    let unrelated: Slot = Arc::new(Mutex::new(None));
    let echo = call_with(
        workspace,
        "test_mrtr_echo_state",
        json!({}),
        "echo-state-ok",
        Some(accepting(Some((workspace.clone(), unrelated.clone())))),
    )
    .await;
    let unrelated = match unrelated.lock().await.take() {
        Some(outcome) => outcome,
        None => {
            // The interaction never ran (the echo-state call failed before it): still make
            // the unrelated call, so that the isolation check is scored.
            eprintln!(
                "conformance: the echo-state interaction never ran; calling test_mrtr_unrelated on its own"
            );
            call_expecting(workspace, "test_mrtr_unrelated", json!({}), "unrelated-ok").await
        }
    };
    let no_state = call_with(
        workspace,
        "test_mrtr_no_state",
        json!({}),
        "no-state-ok",
        Some(accepting(None)),
    )
    .await;
    let no_result_type = call_with(
        workspace,
        "test_mrtr_no_result_type",
        json!({}),
        "no-result-type-test-ok",
        Some(accepting(None)),
    )
    .await;
    all(vec![
        ("test_mrtr_echo_state", echo),
        (
            "test_mrtr_unrelated (during the echo-state round)",
            unrelated,
        ),
        ("test_mrtr_no_state", no_state),
        ("test_mrtr_no_result_type", no_result_type),
    ])
}

/// Where the unrelated call made inside an interaction leaves its outcome.
type Slot = Arc<Mutex<Option<anyhow::Result<()>>>>;

/// An interaction handler that accepts every form with values fitting its schema, declines
/// URL elicitations, and — when given a workspace — first calls `test_mrtr_unrelated` while
/// the round is open.
fn accepting(during: Option<(Workspace, Slot)>) -> InteractionHandler {
    Arc::new(move |interaction: Interaction| {
        let during = during.clone();
        let answer: Pin<Box<dyn Future<Output = BTreeMap<String, ElicitationAnswer>> + Send>> =
            Box::pin(async move {
                eprintln!(
                    "conformance: interaction from {} for {}: {}",
                    interaction.server,
                    interaction.operation,
                    serde_json::to_string(&interaction.requests).unwrap_or_default()
                );
                if let Some((workspace, slot)) = during {
                    let outcome = call_expecting(
                        &workspace,
                        "test_mrtr_unrelated",
                        json!({}),
                        "unrelated-ok",
                    )
                    .await;
                    *slot.lock().await = Some(outcome);
                }
                let answers: BTreeMap<String, ElicitationAnswer> = interaction
                    .requests
                    .iter()
                    .map(|(key, elicitation)| (key.clone(), fill(elicitation)))
                    .collect();
                eprintln!(
                    "conformance:   answered {}",
                    serde_json::to_string(&answers).unwrap_or_default()
                );
                answers
            });
        answer
    })
}

/// Accepts a form with a value for each property (booleans `true`, numbers 1, strings from
/// the enum or "yes"); declines a URL elicitation.
fn fill(elicitation: &Elicitation) -> ElicitationAnswer {
    let Elicitation::Form { schema, .. } = elicitation else {
        return ElicitationAnswer::Decline;
    };
    let mut content = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let value = match property.get("type").and_then(Value::as_str) {
                Some("boolean") => json!(true),
                Some("integer" | "number") => json!(1),
                _ => property
                    .get("enum")
                    .and_then(Value::as_array)
                    .and_then(|values| values.first().cloned())
                    .unwrap_or_else(|| json!("yes")),
            };
            content.insert(name.clone(), value);
        }
    }
    ElicitationAnswer::Accept {
        content: Some(content),
    }
}

/// `initialize` (2025-11-25): the host negotiated through `initialize` (checked by
/// `ready_server`); every tool is called once.
async fn call_every_tool(workspace: &Workspace, server: &ServerSnapshot) -> anyhow::Result<()> {
    for tool in server.tools.iter() {
        let arguments = sample_arguments(&tool.input_schema);
        call_answering(workspace, &tool.name, arguments, None).await?;
    }
    Ok(())
}

/// `sse-retry` (2025-11-25): `test_reconnection` closes its response stream before the
/// result; the transport must reconnect (`Last-Event-ID`, honouring `retry`) to get it.
async fn sse_retry(workspace: &Workspace, server: &ServerSnapshot) -> anyhow::Result<()> {
    tool(server, "test_reconnection")?;
    call_answering(workspace, "test_reconnection", json!({}), None).await?;
    Ok(())
}

/// `elicitation-sep1034-client-defaults` (2025-11-25): the form's person accepts what the
/// form pre-fills, its schema's defaults.
async fn elicitation_defaults(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    let name = [
        "test_client_elicitation_defaults",
        "test_elicitation_sep1034_defaults",
    ]
    .into_iter()
    .find(|name| server.tool(name).is_some())
    .ok_or_else(|| anyhow!("the snapshot publishes no elicitation-defaults tool"))?;
    call_answering(workspace, name, json!({}), Some(prefilled())).await?;
    Ok(())
}

/// Answers every form with what it pre-fills: its schema's defaults.
fn prefilled() -> InteractionHandler {
    Arc::new(|interaction: Interaction| {
        let answers: BTreeMap<String, ElicitationAnswer> = interaction
            .requests
            .iter()
            .map(|(key, elicitation)| (key.clone(), defaults(elicitation)))
            .collect();
        Box::pin(async move { answers })
    })
}

/// Accepts a form with each property's schema `default` (and nothing for those without).
fn defaults(elicitation: &Elicitation) -> ElicitationAnswer {
    let Elicitation::Form { schema, .. } = elicitation else {
        return ElicitationAnswer::Decline;
    };
    let content: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, property)| {
                    property
                        .get("default")
                        .map(|value| (name.clone(), value.clone()))
                })
                .collect()
        })
        .unwrap_or_default();
    ElicitationAnswer::Accept {
        content: Some(content),
    }
}

/// `http-standard-headers` (SEP-2243): every POST must carry `Mcp-Method` equal to the body's
/// method, and `tools/call` an `Mcp-Name` equal to the tool name (first of each is checked;
/// methods never sent are reported as skipped). The mock lists `test_headers` and
/// `my-hyphenated-tool`.
async fn standard_headers(workspace: &Workspace) -> anyhow::Result<()> {
    let plain = call_expecting(
        workspace,
        "test_headers",
        json!({}),
        "Headers test completed",
    )
    .await;
    let hyphenated = call_expecting(
        workspace,
        "my-hyphenated-tool",
        json!({}),
        "Headers test completed",
    )
    .await;
    all(vec![
        ("test_headers", plain),
        ("my-hyphenated-tool", hyphenated),
    ])
}

/// `http-custom-headers` (SEP-2243): the context holds `toolCalls: [{name, arguments}]` for
/// `test_custom_headers` and `test_custom_headers_null`; properties annotated
/// `x-mcp-header: <Name>` must be mirrored as `Mcp-Param-<Name>` (numbers and booleans as
/// their JSON text, unsafe strings — non-ASCII, leading/trailing whitespace, control
/// characters — as `=?base64?…?=`), unannotated ones never, and a null value omitted.
async fn custom_headers(workspace: &Workspace, context: &Value) -> anyhow::Result<()> {
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("MCP_CONFORMANCE_CONTEXT has no toolCalls array"))?;
    ensure!(
        !calls.is_empty(),
        "MCP_CONFORMANCE_CONTEXT.toolCalls is empty"
    );
    let mut steps = Vec::new();
    for entry in calls {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("a toolCalls entry has no name: {entry}"))?;
        let arguments = entry.get("arguments").cloned().unwrap_or(json!({}));
        let outcome =
            call_expecting(workspace, name, arguments, "Custom headers test completed").await;
        steps.push((name, outcome));
    }
    all(steps)
}

/// The tools `http-invalid-tool-headers` lists with a malformed `x-mcp-header`; a client
/// must exclude them (calling one fails the check).
const INVALID_HEADER_TOOLS: &[&str] = &[
    "invalid_empty_header",
    "invalid_object_header",
    "invalid_array_header",
    "invalid_null_header",
    "invalid_duplicate_same_case",
    "invalid_duplicate_diff_case",
    "invalid_space_in_name",
    "invalid_colon_in_name",
    "invalid_non_ascii_name",
    "invalid_control_char_name",
];

/// `http-invalid-tool-headers` (SEP-2243): the mock lists `valid_tool` and ten tools whose
/// `x-mcp-header` annotations are invalid (empty, on object/array/null, duplicated in any
/// case, space/colon/non-ASCII/control characters). The client must call `valid_tool` and
/// none of the others. Like an embedder, this calls every tool the host publishes, so a
/// tool the host failed to exclude is called and scored as a failure.
async fn invalid_tool_headers(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    let leaked: Vec<&str> = server
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .filter(|name| INVALID_HEADER_TOOLS.contains(name))
        .collect();
    tool(server, "valid_tool")?;
    let mut steps = Vec::new();
    for published in server.tools.iter() {
        let arguments = sample_arguments(&published.input_schema);
        let outcome =
            call_expecting(workspace, &published.name, arguments, "Tool call received").await;
        steps.push((published.name.as_str(), outcome));
    }
    let steps_outcome = all(steps);
    ensure!(
        leaked.is_empty(),
        "the host published tools with invalid x-mcp-header annotations: {}",
        leaked.join(", ")
    );
    steps_outcome
}

/// Arguments for every required property of an object schema, by its declared type.
fn sample_arguments(schema: &Value) -> Value {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for name in required {
        let kind = properties
            .and_then(|properties| properties.get(name))
            .and_then(|property| property.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match kind {
            "integer" | "number" => json!(1),
            "boolean" => json!(true),
            "object" => json!({}),
            "array" => json!([]),
            "null" => Value::Null,
            _ => json!("us-west1"),
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// `json-schema-ref-no-deref` (SEP-2106): the mock lists `lookup_user`, whose inputSchema has
/// a same-document `$ref` (`#/$defs/userId`) and a network `$ref` to
/// `<server>/canary/profile-schema.json`. The check passes when tools/list was called and the
/// canary URL was never fetched. Here the published schema must also be untouched: both
/// `$ref`s and `$defs` exactly as sent.
fn ref_no_deref(server: &ServerSnapshot) -> anyhow::Result<()> {
    let schema = &tool(server, "lookup_user")?.input_schema;
    eprintln!("conformance: lookup_user inputSchema as published: {schema}");
    let id_ref = schema
        .pointer("/properties/id/$ref")
        .and_then(Value::as_str);
    ensure!(
        id_ref == Some("#/$defs/userId"),
        "properties.id.$ref was altered: {id_ref:?}"
    );
    let profile_ref = schema
        .pointer("/properties/profile/$ref")
        .and_then(Value::as_str);
    ensure!(
        profile_ref.is_some_and(|r| r.ends_with("/canary/profile-schema.json")),
        "properties.profile.$ref (a network URI) was altered or resolved: {profile_ref:?}"
    );
    ensure!(
        schema
            .pointer("/$defs/userId/pattern")
            .and_then(Value::as_str)
            == Some("^[a-z0-9-]+$"),
        "$defs.userId was altered"
    );
    Ok(())
}

/// The inputSchema the `json-schema-2020-12-preservation` mock sends for its focal tool.
fn focal_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// `json-schema-2020-12-preservation` (SEP-1613, SEP-2106): the mock lists
/// `json_schema_2020_12_tool` (the focal schema above) and `json_schema_echo`. The client
/// passes the focal inputSchema it holds, verbatim, as `schema` to `json_schema_echo`; the
/// checks compare it with the original: `$schema`, `$defs.address`, `additionalProperties:
/// false`, `allOf`/`anyOf`, `if`/`then`/`else` and `$anchor` must survive.
async fn schema_preservation(workspace: &Workspace, server: &ServerSnapshot) -> anyhow::Result<()> {
    let schema = tool(server, "json_schema_2020_12_tool")?
        .input_schema
        .clone();
    tool(server, "json_schema_echo")?;
    let echoed = call_expecting(
        workspace,
        "json_schema_echo",
        json!({"schema": schema}),
        "echoed",
    )
    .await;
    let expected = focal_schema();
    let preserved = if schema == expected {
        Ok(())
    } else {
        Err(anyhow!(
            "the published inputSchema differs from what the server sent:\n  sent:      {expected}\n  published: {schema}"
        ))
    };
    all(vec![
        ("json_schema_echo", echoed),
        ("inputSchema preserved", preserved),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_arguments_fill_required_properties_by_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string"},
                "count": {"type": "integer"},
                "flag": {"type": "boolean"},
                "data": {"type": "object"},
                "items": {"type": "array"},
                "nil": {"type": "null"},
                "optional": {"type": "string"}
            },
            "required": ["region", "count", "flag", "data", "items", "nil"]
        });
        assert_eq!(
            sample_arguments(&schema),
            json!({
                "region": "us-west1", "count": 1, "flag": true,
                "data": {}, "items": [], "nil": null
            })
        );
        assert_eq!(sample_arguments(&json!({"type": "object"})), json!({}));
    }

    #[test]
    fn forms_are_accepted_with_fitting_values_and_urls_declined() {
        let form = Elicitation::Form {
            message: "Please confirm".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "confirmed": {"type": "boolean"},
                    "count": {"type": "integer"},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "name": {"type": "string"}
                }
            }),
        };
        let ElicitationAnswer::Accept {
            content: Some(content),
        } = fill(&form)
        else {
            panic!("a form is accepted with content");
        };
        assert_eq!(
            Value::Object(content),
            json!({"confirmed": true, "count": 1, "color": "red", "name": "yes"})
        );
        let url = Elicitation::Url {
            message: "Go".into(),
            url: "https://example.com".into(),
            elicitation_id: "e1".into(),
        };
        assert_eq!(fill(&url), ElicitationAnswer::Decline);
    }

    #[test]
    fn every_scenario_has_a_distinct_name() {
        let mut names = SCENARIOS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
    }
}
