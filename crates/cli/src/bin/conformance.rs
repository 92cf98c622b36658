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
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use plurnk_mcp::{
    CallOptions, Host, HostConfig, HostOptions, InteractionHandler, ServerDefinition,
    ServerSnapshot, ServerState, ToolInfo, ToolResult, Workspace,
};
use serde_json::{Value, json};

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
                    CallOptions::default().with_timeout(Some(CALL_TIMEOUT)),
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
        (plurnk_mcp::config::target_variable(ALIAS), url.to_owned()),
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
    let options = HostOptions::default().with_interaction(interaction);
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
    let options = CallOptions::default()
        .with_timeout(Some(CALL_TIMEOUT))
        .with_interaction(interaction);
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

// A binary's root resolves modules beside itself, in src/bin/; its rooms live in
// src/bin/conformance/, where a directory of its own keeps them apart from other binaries.
#[path = "conformance/scenarios.rs"]
mod scenarios;

use scenarios::{
    call_every_tool, custom_headers, elicitation_defaults, invalid_tool_headers, prefilled,
    ref_no_deref, request_metadata, request_state, sample_arguments, schema_preservation,
    sse_retry, standard_headers, tools_call,
};

#[cfg(test)]
#[path = "conformance/tests.rs"]
mod tests;
