//! The command implementations: each hydrates the environment's configuration, does one
//! thing, shuts the host down and turns the outcome into an exit code.

/// Writes to stdout without panicking: a closed pipe (`plurnk-mcp status | head -1`) must
/// not panic the command before it shuts its servers down.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Writes a line to stderr without panicking when stderr is closed.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub(crate) mod demo;

use std::process::ExitCode;
use std::time::Duration;

use std::path::PathBuf;
use std::sync::Arc;

use plurnk_mcp::{
    CallOptions, Host, HostConfig, HostOptions, ServerState, SqliteStore, Workspace,
    WorkspaceSnapshot,
};

/// Logs go to stderr, filtered by `PLURNK_MCP_LOG` (else `default`).
pub(crate) fn init_logging(default: &str) {
    // rmcp's transport worker logs the full server URL when a connection fails, and URLs
    // can carry credentials: it stays quiet unless PLURNK_MCP_LOG asks for it.
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLURNK_MCP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},rmcp=off")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(plurnk_mcp::redact::Scrubbing::new(std::io::stderr))
        .try_init();
}

/// Text a server wrote, made safe for a terminal: no escape sequence gets through; line
/// breaks stay.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect()
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    // A message can quote a server (its stderr, its error).
    let message = printable(&message.to_string());
    errln!("plurnk-mcp: {message}");
    ExitCode::from(2)
}

/// Serves the Prometheus endpoint `--metrics` asks for, on the command's runtime. For port 0
/// the address picked goes to stderr (stdout carries only the command's output).
pub(crate) fn serve_metrics(address: std::net::SocketAddr) -> Result<(), ExitCode> {
    let bound = plurnk_mcp::prometheus::serve(address).map_err(fail)?;
    if address.port() == 0 {
        errln!("metrics: http://{bound}/metrics");
    }
    Ok(())
}

/// Options every command shares: where workspace state lives, and which workspace.
pub(crate) struct Global {
    /// The SQLite state file.
    pub state: PathBuf,
    /// The workspace to act in.
    pub workspace: String,
}

impl Global {
    /// `--state` if given, else `$XDG_DATA_HOME/plurnk-mcp/state.sqlite`, else
    /// `$HOME/.local/share/plurnk-mcp/state.sqlite`, else `./plurnk-mcp-state.sqlite`.
    pub(crate) fn new(state: Option<PathBuf>, workspace: String) -> Self {
        let state = state.unwrap_or_else(|| {
            let data = std::env::var_os("XDG_DATA_HOME")
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share"))
                });
            match data {
                Some(data) => data.join("plurnk-mcp").join("state.sqlite"),
                None => PathBuf::from("plurnk-mcp-state.sqlite"),
            }
        });
        Self { state, workspace }
    }
}

/// Starts the host on the environment's configuration and the state file, and opens the
/// chosen workspace.
async fn start(global: &Global) -> Result<(Host, Workspace), ExitCode> {
    // Non-UTF-8 variables cannot be PLURNK_MCP settings or `${NAME}` targets: skip them
    // rather than panic the way `std::env::vars` would.
    let vars = std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)));
    let config = HostConfig::from_env(vars).map_err(|errors| {
        errln!(
            "plurnk-mcp: the configuration has {} problem(s):",
            errors.errors().len()
        );
        for error in errors.errors() {
            errln!("  - {error}");
        }
        ExitCode::from(2)
    })?;
    let store = SqliteStore::open(&global.state).map_err(fail)?;
    let options = HostOptions {
        store: Some(Arc::new(store)),
        ..HostOptions::default()
    };
    let host = Host::start_with(config, options).await.map_err(fail)?;
    running(&host);
    match host.workspace(&global.workspace).await {
        Ok(workspace) => Ok((host, workspace)),
        Err(problem) => {
            finish(&host).await;
            Err(fail(problem))
        }
    }
}

/// The host the running command started, for a signal to shut down.
static RUNNING: std::sync::Mutex<Option<Host>> = std::sync::Mutex::new(None);

/// Records the host the command runs on.
pub(crate) fn running(host: &Host) {
    if let Ok(mut running) = RUNNING.lock() {
        *running = Some(host.clone());
    }
}

/// Resolves with the signal's number on `SIGINT`, `SIGTERM` or `SIGHUP`.
pub(crate) async fn signalled() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let kinds = [
        (SignalKind::interrupt(), libc::SIGINT),
        (SignalKind::terminate(), libc::SIGTERM),
        (SignalKind::hangup(), libc::SIGHUP),
    ];
    let mut streams = Vec::new();
    for (kind, number) in kinds {
        match signal(kind) {
            Ok(stream) => streams.push((stream, number)),
            Err(error) => errln!("plurnk-mcp: cannot watch signal {number}: {error}"),
        }
    }
    if streams.is_empty() {
        return std::future::pending().await;
    }
    let waits = streams.iter_mut().map(|(stream, number)| {
        let number = *number;
        Box::pin(async move {
            stream.recv().await;
            number
        })
    });
    futures::future::select_all(waits).await.0
}

/// A signal arrived: shut the host down (bounded; the reaper covers the rest) and exit as
/// a process killed by that signal would report.
pub(crate) async fn interrupted(number: i32) -> ExitCode {
    let host = RUNNING.lock().ok().and_then(|mut running| running.take());
    if let Some(host) = host {
        errln!("plurnk-mcp: signal {number}: closing every server");
        if tokio::time::timeout(Duration::from_secs(10), finish(&host))
            .await
            .is_err()
        {
            errln!("plurnk-mcp: the servers did not close within 10 s; the reaper kills them");
        }
    }
    ExitCode::from(u8::try_from(128 + number).unwrap_or(1))
}

async fn finish(host: &Host) {
    // From here a signal has nothing left to shut down (this does it), and exits at once.
    if let Ok(mut running) = RUNNING.lock() {
        running.take();
    }
    let report = host.shutdown().await;
    for failure in report.failures {
        errln!(
            "plurnk-mcp: server \"{}\" did not close cleanly: {}",
            failure.alias,
            failure.detail
        );
    }
}

/// How much of one server-provided text a table shows.
const CELL_CHARS: usize = 1000;

/// A table cell as the terminal may safely show it: a server's text can hold escape
/// sequences (which would drive the terminal) and megabytes; control characters become `?`,
/// line breaks `; `, and the rest is cut at [`CELL_CHARS`].
fn shown(cell: &str) -> String {
    let mut out = String::with_capacity(cell.len().min(CELL_CHARS * 4));
    let mut count = 0;
    let mut chars = cell.trim().chars().peekable();
    while let Some(c) = chars.next() {
        if count == CELL_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => {
                out.push_str("; ");
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
            }
            '\t' => out.push(' '),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
        count += 1;
    }
    out
}

/// Lays out rows as aligned columns; the last column (free text) is not padded. Every cell
/// goes through [`shown`].
fn render_table<const N: usize>(rows: &[[String; N]]) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.clone().map(|c| shown(&c)))
        .collect();
    let rows = rows.as_slice();
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
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
    render_table(&rows)
}

pub(crate) async fn status(global: &Global, json: bool) -> ExitCode {
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let snapshot = workspace.snapshot();
    if snapshot.servers.is_empty() {
        errln!(
            "plurnk-mcp: no servers are configured: set PLURNK_MCP_<name> to an executable or an http(s) URL, and PLURNK_MCP_ENABLED to the names to connect"
        );
    }
    if json {
        match serde_json::to_string_pretty(&*snapshot) {
            Ok(text) => outln!("{text}"),
            Err(error) => {
                finish(&host).await;
                return fail(error);
            }
        }
    } else {
        out!("{}", status_table(&snapshot));
    }
    finish(&host).await;
    ExitCode::SUCCESS
}

pub(crate) async fn tools(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
        if json {
            return print_json(&*entry.tools);
        }
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
            outln!(
                "{:<32} {effect:<5} {}",
                shown(&tool.name),
                shown(description)
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

/// `docs <server> [tool]` or `docs <address>`: the document, as the model reads it.
pub(crate) async fn docs(global: &Global, server: &str, tool: Option<&str>) -> ExitCode {
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let snapshot = workspace.snapshot();
    let is_address = server.contains("://");
    let document = match (is_address, tool) {
        (true, None) => plurnk_mcp::projection::document(&snapshot, server),
        (true, Some(_)) => {
            finish(&host).await;
            return fail(format!(
                "{server:?} is a document address: give it alone, or give a server alias and a tool"
            ));
        }
        (false, None) => plurnk_mcp::projection::family_document(&snapshot, server),
        (false, Some(tool)) => plurnk_mcp::projection::tool_document(&snapshot, server, tool),
    };
    let code = match document {
        Some(text) => {
            out!("{}", printable(&text));
            ExitCode::SUCCESS
        }
        None => fail(missing_document(&snapshot, server, tool, is_address)),
    };
    finish(&host).await;
    code
}

/// Why there is no document: the server is unknown or disabled, or the tool is not enabled.
fn missing_document(
    snapshot: &WorkspaceSnapshot,
    server: &str,
    tool: Option<&str>,
    is_address: bool,
) -> String {
    if is_address {
        return format!(
            "no document at {server:?}: addresses are worker://plurnk/tools/<server>.md, worker://plurnk/tools/<server>/<tool>.md, <server>:///resources and <server>:///prompts, of an enabled server"
        );
    }
    let enabled: Vec<&str> = snapshot
        .servers
        .values()
        .filter(|entry| entry.state != ServerState::Disabled)
        .map(|entry| entry.alias.as_str())
        .collect();
    match (snapshot.server(server), tool) {
        (None, _) => format!(
            "no server \"{server}\" is configured (enabled: {}): see `plurnk-mcp survey`",
            if enabled.is_empty() {
                "none".to_owned()
            } else {
                enabled.join(", ")
            }
        ),
        (Some(entry), _) if entry.state == ServerState::Disabled => {
            format!("server \"{server}\" is disabled: enable it with `plurnk-mcp enable {server}`")
        }
        (Some(entry), Some(tool)) => {
            let tools: Vec<&str> = entry.tools.iter().map(|t| t.name.as_str()).collect();
            format!(
                "server \"{server}\" has no enabled tool \"{tool}\" (its tools: {}): see `plurnk-mcp docs {server}`",
                if tools.is_empty() {
                    format!("none while it is {}", entry.state)
                } else {
                    tools.join(", ")
                }
            )
        }
        (Some(_), None) => format!("server \"{server}\" has no document"),
    }
}

/// `survey`: the tools survey, as the model reads it.
pub(crate) async fn survey(global: &Global) -> ExitCode {
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    out!(
        "{}",
        printable(&plurnk_mcp::projection::survey(&workspace.snapshot()))
    );
    finish(&host).await;
    ExitCode::SUCCESS
}

pub(crate) async fn call(
    global: &Global,
    server: &str,
    tool: &str,
    arguments: Option<&str>,
) -> ExitCode {
    let arguments = match self::arguments(arguments) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let result = workspace
        .call_tool(server, tool, arguments, CallOptions::default())
        .await;
    let code = match result {
        Ok(result) => match serde_json::to_string_pretty(&result.result) {
            Ok(text) => {
                outln!("{text}");
                if result.is_error {
                    errln!("plurnk-mcp: {server}/{tool} reported a tool error (isError)");
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

/// `plurnk-mcp exec '<op>'`: the op's result as JSON, exiting as [`call`] does. An op that
/// cannot be read is refused before any server is started.
pub(crate) async fn exec(global: &Global, op: &str) -> ExitCode {
    if let Err(error) = plurnk_mcp::exec::parse(op) {
        return fail(error);
    }
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = match plurnk_mcp::exec::run(&workspace, op, CallOptions::default()).await {
        Ok(value) => print_json(&value),
        Err(plurnk_mcp::exec::ExecError::ToolError {
            server,
            tool,
            result,
            ..
        }) => match serde_json::to_string_pretty(&result) {
            Ok(text) => {
                outln!("{text}");
                errln!("plurnk-mcp: {server}/{tool} reported a tool error (isError)");
                ExitCode::from(1)
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
async fn with_ready_server<F, Fut>(global: &Global, server: &str, body: F) -> ExitCode
where
    F: FnOnce(plurnk_mcp::Workspace, plurnk_mcp::ServerSnapshot) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
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
            outln!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

pub(crate) async fn resources(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
        if json {
            return print_json(&serde_json::json!({
                "resources": &*entry.catalog.resources,
                "templates": &*entry.catalog.templates,
            }));
        }
        for resource in entry.catalog.resources.iter() {
            outln!(
                "{:<40} {:<24} {}",
                shown(&resource.uri),
                shown(resource.mime_type.as_deref().unwrap_or("-")),
                shown(&resource.name)
            );
        }
        for template in entry.catalog.templates.iter() {
            outln!(
                "{:<40} {:<24} {}",
                shown(&template.uri_template),
                "(template)",
                shown(&template.name)
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

pub(crate) async fn read(global: &Global, server: &str, uri: &str) -> ExitCode {
    with_ready_server(global, server, |workspace, _| async move {
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

pub(crate) async fn prompts(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
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
            outln!(
                "{:<32} ({}) {}",
                shown(&prompt.name),
                shown(&arguments.join(", ")),
                shown(prompt.description.as_deref().unwrap_or(""))
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

pub(crate) async fn prompt(
    global: &Global,
    server: &str,
    name: &str,
    text: Option<&str>,
) -> ExitCode {
    let arguments = match arguments(text) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    with_ready_server(global, server, |workspace, _| async move {
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
                Ok(bound) => outln!("listening http://{bound}/mcp"),
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

/// `plurnk-mcp fixture --conformance [--http ADDR]`: the conformance fixture on stdio, or on
/// `address` (printing the one `listening` line the fixture prints) until ctrl-c.
pub(crate) async fn conformance_fixture(http: Option<std::net::SocketAddr>) -> ExitCode {
    let result = match http {
        None => plurnk_mcp_fixture::conformance::serve_stdio().await,
        Some(address) => {
            let listener = match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => listener,
                Err(error) => return fail(format!("could not bind {address}: {error}")),
            };
            match listener.local_addr() {
                Ok(bound) => outln!("listening http://{bound}/mcp"),
                Err(error) => return fail(error),
            }
            let shutdown = tokio_util::sync::CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                stop.cancel();
            });
            plurnk_mcp_fixture::conformance::serve_http(listener, shutdown).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format!("fixture: {error:#}")),
    }
}

/// `plurnk-mcp fixture --hostile MODE --http ADDR`: a hostile HTTP server on `address`, which
/// prints the one `listening` line the good one prints and serves until it is killed.
pub(crate) fn hostile_http(
    mode: plurnk_mcp_fixture::hostile_http::HttpMode,
    address: std::net::SocketAddr,
) -> ExitCode {
    let listener = match std::net::TcpListener::bind(address) {
        Ok(listener) => listener,
        Err(error) => return fail(format!("could not bind {address}: {error}")),
    };
    match listener.local_addr() {
        Ok(bound) => outln!("listening http://{bound}/mcp"),
        Err(error) => return fail(error),
    }
    match plurnk_mcp_fixture::hostile_http::serve(mode, listener) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format!("fixture: {error}")),
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

// === workspace actions ===

fn summary_table(summaries: &[plurnk_mcp::ServerSummary]) -> String {
    let mut rows = vec![
        [
            "SERVER",
            "SOURCE",
            "TRANSPORT",
            "ENABLED",
            "STATE",
            "TOOLS",
            "TARGET",
            "PROBLEM",
        ]
        .map(str::to_owned),
    ];
    for summary in summaries {
        rows.push([
            summary.alias.clone(),
            summary.source.to_owned(),
            summary.transport.to_string(),
            if summary.enabled { "yes" } else { "no" }.to_owned(),
            summary.state.to_string(),
            if summary.state == ServerState::Ready {
                summary.tools.len().to_string()
            } else {
                "-".into()
            },
            summary.target.clone(),
            summary
                .problem
                .as_ref()
                .map(|p| p.detail.lines().next().unwrap_or_default().to_owned())
                .unwrap_or_default(),
        ]);
    }
    render_table(&rows)
}

/// Prints the workspace's summaries (all, or just `only`), as a table or JSON.
async fn print_summaries(workspace: &Workspace, only: Option<&str>, json: bool) -> ExitCode {
    let summaries = match workspace.list().await {
        Ok(summaries) => summaries,
        Err(problem) => return fail(problem),
    };
    let summaries: Vec<_> = summaries
        .into_iter()
        .filter(|s| only.is_none_or(|alias| s.alias == alias))
        .collect();
    if json {
        match only {
            Some(_) => match summaries.first() {
                Some(summary) => print_json(summary),
                None => print_json(&serde_json::Value::Null),
            },
            None => print_json(&summaries),
        }
    } else {
        out!("{}", summary_table(&summaries));
        ExitCode::SUCCESS
    }
}

/// A workspace action as a user runs it: what changed, or the Problem and exit 2.
pub(crate) enum Action {
    List,
    Add {
        alias: String,
        target: String,
        options: Option<String>,
    },
    Enable {
        alias: String,
        options: Option<String>,
        overlay: Option<String>,
    },
    Disable {
        alias: String,
    },
    Remove {
        alias: String,
    },
}

fn parse_options(
    text: Option<&str>,
) -> Result<Option<plurnk_mcp::config::McpServerOptions>, ExitCode> {
    match text {
        None => Ok(None),
        Some(text) => plurnk_mcp::config::McpServerOptions::from_json(text)
            .map(Some)
            .map_err(|errors| fail(format!("--options is not valid: {errors}"))),
    }
}

pub(crate) async fn action(global: &Global, action: Action, json: bool) -> ExitCode {
    // Everything that can be refused before starting the host is refused first.
    let prepared = match &action {
        Action::Add {
            alias,
            target,
            options,
        } => {
            let options = match parse_options(options.as_deref()) {
                Ok(options) => options,
                Err(code) => return code,
            };
            let definition =
                plurnk_mcp::ServerDefinition::from_target(alias, target).and_then(|definition| {
                    match &options {
                        Some(options) => definition.with_options(options),
                        None => Ok(definition),
                    }
                });
            match definition {
                Ok(definition) => Some(definition),
                Err(errors) => {
                    return fail(format!("server \"{alias}\" cannot be added: {errors}"));
                }
            }
        }
        _ => None,
    };
    let customize = match &action {
        Action::Enable {
            alias,
            options,
            overlay,
        } => {
            let options = match parse_options(options.as_deref()) {
                Ok(options) => options,
                Err(code) => return code,
            };
            let overlay = match overlay {
                None => None,
                Some(text) => {
                    let map: std::collections::BTreeMap<String, String> = match serde_json::from_str(
                        text,
                    ) {
                        Ok(map) => map,
                        Err(error) => {
                            return fail(format!(
                                "--overlay must be a JSON object of PLURNK_MCP_* variables: {error}"
                            ));
                        }
                    };
                    match plurnk_mcp::config::Overlay::from_env_map(map) {
                        Ok(overlay) => overlay.server(alias),
                        Err(errors) => return fail(format!("--overlay is not valid: {errors}")),
                    }
                }
            };
            plurnk_mcp::Customize { overlay, options }
        }
        _ => plurnk_mcp::Customize::default(),
    };
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let outcome = match &action {
        Action::List => Ok(None),
        Action::Add { .. } => match prepared {
            Some(definition) => workspace.add(definition).await.map(|s| Some(s.alias)),
            None => Ok(None),
        },
        Action::Enable { alias, .. } => workspace
            .enable_with(alias, customize)
            .await
            .map(|s| Some(s.alias)),
        Action::Disable { alias } => workspace.disable(alias).await.map(|s| Some(s.alias)),
        Action::Remove { alias } => workspace.remove(alias).await.map(|_| None),
    };
    let code = match outcome {
        Ok(alias) => print_summaries(&workspace, alias.as_deref(), json).await,
        Err(problem) => {
            if json {
                let _ = print_json(&problem);
            }
            fail(problem)
        }
    };
    finish(&host).await;
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_in_a_table_is_made_safe_for_a_terminal() {
        // An escape sequence (clear screen, set title) and a bell become visible `?`s.
        assert_eq!(shown("a\u{1b}[2J\u{1b}]0;pwned\u{7}b"), "a?[2J?]0;pwned?b");
        // Lines join into one.
        assert_eq!(shown("first\n  second\r\nthird"), "first; second?; third");
        // Megabytes are cut.
        let long = shown(&"x".repeat(5_000_000));
        assert_eq!(long.chars().count(), CELL_CHARS + 1);
        assert!(long.ends_with('…'));
        let table = render_table(&[["name".to_owned(), "bad\u{1b}[31mred".to_owned()]]);
        assert_eq!(table, "name  bad?[31mred\n");
    }
}
