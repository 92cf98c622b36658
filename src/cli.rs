//! The command implementations: each hydrates the environment's configuration, does one
//! thing, shuts the host down and turns the outcome into an exit code.

pub(crate) mod demo;

use std::process::ExitCode;
use std::time::Duration;

use plurnk_mcp::{CallOptions, Host, HostConfig, ServerState, WorkspaceSnapshot};

/// Logs go to stderr, filtered by `PLURNK_MCP_LOG` (else `default`).
pub(crate) fn init_logging(default: &str) {
    // rmcp's transport worker logs the full server URL when a connection fails, and URLs
    // can carry credentials: it stays quiet unless PLURNK_MCP_LOG asks for it.
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLURNK_MCP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},rmcp=off")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("plurnk-mcp: {message}");
    ExitCode::from(2)
}

async fn start_from_env() -> Result<Host, ExitCode> {
    // Non-UTF-8 variables cannot be PLURNK_MCP settings or `${NAME}` targets: skip them
    // rather than panic the way `std::env::vars` would.
    let vars = std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)));
    let config = HostConfig::from_env(vars).map_err(|errors| {
        eprintln!(
            "plurnk-mcp: the configuration has {} problem(s):",
            errors.errors().len()
        );
        for error in errors.errors() {
            eprintln!("  - {error}");
        }
        ExitCode::from(2)
    })?;
    Host::start(config).await.map_err(fail)
}

async fn finish(host: &Host) {
    let report = host.shutdown().await;
    for failure in report.failures {
        eprintln!(
            "plurnk-mcp: server \"{}\" did not close cleanly: {}",
            failure.alias, failure.detail
        );
    }
}

/// Renders the status table.
pub(crate) fn status_table(snapshot: &WorkspaceSnapshot) -> String {
    let mut rows = vec![[
        "SERVER".to_owned(),
        "TRANSPORT".to_owned(),
        "STATE".to_owned(),
        "REVISION".to_owned(),
        "TOOLS".to_owned(),
        "PROBLEM".to_owned(),
    ]];
    for server in snapshot.servers.values() {
        rows.push([
            server.alias.clone(),
            server.transport.to_string(),
            server.state.to_string(),
            server
                .negotiated
                .as_ref()
                .map(|n| n.revision.clone())
                .unwrap_or_else(|| "-".into()),
            if server.state == ServerState::Ready {
                server.tools.len().to_string()
            } else {
                "-".into()
            },
            server
                .problem
                .as_ref()
                .map(|p| p.detail.lines().next().unwrap_or_default().to_owned())
                .unwrap_or_default(),
        ]);
    }
    let mut widths = [0usize; 6];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i == 5 {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(crate) async fn status(json: bool) -> ExitCode {
    let host = match start_from_env().await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let snapshot = host.default_workspace().snapshot();
    if snapshot.servers.is_empty() {
        eprintln!(
            "plurnk-mcp: no servers are configured: set PLURNK_MCP_<name> to an executable or an http(s) URL, and PLURNK_MCP_ENABLED to the names to connect"
        );
    }
    if json {
        match serde_json::to_string_pretty(&*snapshot) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                finish(&host).await;
                return fail(error);
            }
        }
    } else {
        print!("{}", status_table(&snapshot));
    }
    finish(&host).await;
    ExitCode::SUCCESS
}

pub(crate) async fn tools(server: &str, json: bool) -> ExitCode {
    let host = match start_from_env().await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let snapshot = host.default_workspace().snapshot();
    let code = match snapshot.server(server) {
        None => fail(format!(
            "server \"{server}\" is not configured: set PLURNK_MCP_{}",
            server.to_ascii_uppercase().replace('-', "_")
        )),
        Some(entry) if entry.state != ServerState::Ready => fail(format!(
            "server \"{server}\" is {}: {}",
            entry.state,
            entry
                .problem
                .as_ref()
                .map(|p| p.detail.clone())
                .unwrap_or_else(|| "enable it with PLURNK_MCP_ENABLED".into())
        )),
        Some(entry) if json => match serde_json::to_string_pretty(&*entry.tools) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => fail(error),
        },
        Some(entry) => {
            for tool in entry.tools.iter() {
                let effect = match tool.effect {
                    plurnk_mcp::Effect::Read => "read",
                    plurnk_mcp::Effect::Host => "host",
                };
                let description = tool
                    .description
                    .as_deref()
                    .and_then(|d| d.lines().next())
                    .unwrap_or("");
                println!("{:<32} {effect:<5} {description}", tool.name);
            }
            ExitCode::SUCCESS
        }
    };
    finish(&host).await;
    code
}

pub(crate) async fn call(server: &str, tool: &str, arguments: Option<&str>) -> ExitCode {
    let arguments = match self::arguments(arguments) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    let host = match start_from_env().await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let result = host
        .default_workspace()
        .call_tool(server, tool, arguments, CallOptions::default())
        .await;
    let code = match result {
        Ok(result) => match serde_json::to_string_pretty(&result.result) {
            Ok(text) => {
                println!("{text}");
                if result.is_error {
                    eprintln!("plurnk-mcp: {server}/{tool} reported a tool error (isError)");
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(error) => fail(error),
        },
        Err(error) => fail(error),
    };
    finish(&host).await;
    code
}

/// Parses optional JSON arguments that must form an object.
fn arguments(text: Option<&str>) -> Result<serde_json::Value, ExitCode> {
    match text {
        None => Ok(serde_json::Value::Null),
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value @ serde_json::Value::Object(_)) => Ok(value),
            Ok(_) => Err(fail(
                "the arguments must be a JSON object, such as '{\"text\":\"hi\"}'",
            )),
            Err(error) => Err(fail(format!("the arguments are not valid JSON: {error}"))),
        },
    }
}

/// Starts the host, finds `server` ready, runs `body` on it, shuts down.
async fn with_ready_server<F, Fut>(server: &str, body: F) -> ExitCode
where
    F: FnOnce(plurnk_mcp::Workspace, plurnk_mcp::ServerSnapshot) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    let host = match start_from_env().await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let code = match snapshot.server(server) {
        None => fail(format!(
            "server \"{server}\" is not configured: set PLURNK_MCP_{}",
            server.to_ascii_uppercase().replace('-', "_")
        )),
        Some(entry) if entry.state != ServerState::Ready => fail(format!(
            "server \"{server}\" is {}: {}",
            entry.state,
            entry
                .problem
                .as_ref()
                .map(|p| p.detail.clone())
                .unwrap_or_else(|| "enable it with PLURNK_MCP_ENABLED".into())
        )),
        Some(entry) => body(workspace.clone(), entry.clone()).await,
    };
    finish(&host).await;
    code
}

fn print_json<T: serde::Serialize + ?Sized>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

pub(crate) async fn resources(server: &str, json: bool) -> ExitCode {
    with_ready_server(server, |_, entry| async move {
        if json {
            return print_json(&serde_json::json!({
                "resources": &*entry.catalog.resources,
                "templates": &*entry.catalog.templates,
            }));
        }
        for resource in entry.catalog.resources.iter() {
            println!(
                "{:<40} {:<24} {}",
                resource.uri,
                resource.mime_type.as_deref().unwrap_or("-"),
                resource.name
            );
        }
        for template in entry.catalog.templates.iter() {
            println!(
                "{:<40} {:<24} {}",
                template.uri_template, "(template)", template.name
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

pub(crate) async fn read(server: &str, uri: &str) -> ExitCode {
    with_ready_server(server, |workspace, _| async move {
        match workspace
            .read_resource(server, uri, CallOptions::default())
            .await
        {
            Ok(result) => print_json(&result),
            Err(error) => fail(error),
        }
    })
    .await
}

pub(crate) async fn prompts(server: &str, json: bool) -> ExitCode {
    with_ready_server(server, |_, entry| async move {
        if json {
            return print_json(&*entry.catalog.prompts);
        }
        for prompt in entry.catalog.prompts.iter() {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        a.name.clone()
                    } else {
                        format!("{}?", a.name)
                    }
                })
                .collect();
            println!(
                "{:<32} ({}) {}",
                prompt.name,
                arguments.join(", "),
                prompt.description.as_deref().unwrap_or("")
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

pub(crate) async fn prompt(server: &str, name: &str, text: Option<&str>) -> ExitCode {
    let arguments = match arguments(text) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    with_ready_server(server, |workspace, _| async move {
        match workspace
            .get_prompt(server, name, arguments, CallOptions::default())
            .await
        {
            Ok(result) => print_json(&result),
            Err(error) => fail(error),
        }
    })
    .await
}

pub(crate) async fn fixture(
    options: plurnk_mcp_fixture::FixtureOptions,
    http: Option<std::net::SocketAddr>,
) -> ExitCode {
    let result = match http {
        None => plurnk_mcp_fixture::serve_stdio(options).await,
        Some(address) => {
            let listener = match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => listener,
                Err(error) => return fail(format!("could not bind {address}: {error}")),
            };
            match listener.local_addr() {
                Ok(bound) => println!("listening http://{bound}/mcp"),
                Err(error) => return fail(error),
            }
            let shutdown = tokio_util::sync::CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                stop.cancel();
            });
            plurnk_mcp_fixture::serve_http(listener, options, shutdown).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format!("fixture: {error:#}")),
    }
}

/// Polls `check` every 20 ms until it holds or `bound` passes.
pub(crate) async fn eventually(bound: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
