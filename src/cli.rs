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
    CallOptions, Host, HostConfig, HostOptions, Problem, Refusal, ServerState, SqliteStore,
    Workspace, WorkspaceSnapshot,
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

/// A message that may quote a server (its error, its stderr), a file or a caller, made safe
/// for a terminal: no control character gets through (an escape sequence would drive the
/// terminal, a carriage return would overwrite the line), and every line break is followed by
/// an indent, so nothing quoted can start a line of its own and pass for the command's own
/// words.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\n  "),
            '\t' => out.push(' '),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// A document the host rendered (what the model reads), for a terminal: its lines are its
/// own (the projection puts a server's text on one line), so line breaks stay; no other
/// control character gets through.
fn document_text(text: &str) -> String {
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
    let config = HostConfig::from_env(environment()).map_err(|errors| {
        errln!(
            "plurnk-mcp: the configuration has {} problem(s):",
            errors.errors().len()
        );
        for error in errors.errors() {
            errln!("  - {}", printable(&error.to_string()));
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

/// The process environment. Non-UTF-8 variables cannot be PLURNK_MCP settings or `${NAME}`
/// targets: they are skipped rather than panic the way `std::env::vars` would.
fn environment() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)))
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
            printable(&failure.detail)
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
        for server in snapshot.servers.values() {
            if server.state == plurnk_mcp::ServerState::AuthorizationRequired {
                errln!(
                    "plurnk-mcp: server \"{0}\" needs OAuth authorization: run `plurnk-mcp auth {0}` (or `plurnk-mcp auth {0} --device` on a machine without a browser)",
                    server.alias
                );
            }
        }
    }
    finish(&host).await;
    ExitCode::SUCCESS
}

/// `plurnk-mcp auth <server> [--device] [--scope S] [--json]`.
pub(crate) async fn auth(
    global: &Global,
    server: &str,
    device: bool,
    scope: Option<&str>,
    json: bool,
) -> ExitCode {
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let outcome = if device {
        authorize_by_device(&workspace, server, scope, json).await
    } else {
        authorize_by_browser(&workspace, server, json).await
    };
    let code = match outcome {
        Ok(_) if json => print_summaries(&workspace, Some(server), true).await,
        Ok(ready) => {
            outln!("server \"{server}\" is {}", ready.state);
            for tool in ready.tools.iter() {
                outln!("  {}", tool.name);
            }
            ExitCode::SUCCESS
        }
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

async fn authorize_by_browser(
    workspace: &Workspace,
    server: &str,
    json: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    let asked = workspace.enable(server).await?;
    authorized_interactively(workspace, asked, json).await
}

/// Prints an action's `202`: with `--json` the answer itself, on one line of stdout (what to
/// do goes to stderr); otherwise `lines`, the first of which says it is the 202.
fn print_accepted(accepted: &plurnk_mcp::Accepted, json: bool, todo: &str, lines: &[String]) {
    if json {
        match serde_json::to_string(accepted) {
            Ok(text) => outln!("{text}"),
            Err(error) => errln!("plurnk-mcp: {error}"),
        }
        errln!("plurnk-mcp: {todo}");
    } else {
        for line in lines {
            outln!("{line}");
        }
    }
}

/// An action's answer that waits for a person's authorization (the `202`): prints it, reads
/// the callback URL from standard input, and completes it (any other answer is returned as
/// is).
async fn authorized_interactively(
    workspace: &Workspace,
    asked: plurnk_mcp::ServerSnapshot,
    json: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    let server = asked.alias.clone();
    let Some(accepted) = plurnk_mcp::Accepted::of(&asked) else {
        return Ok(asked);
    };
    print_accepted(
        &accepted,
        json,
        "open the authorization's url, approve, and paste the URL your browser was sent back \
         to on standard input",
        &[
            format!(
                "server \"{server}\" waits for authorization ({}): open this URL, approve, and \
                 paste the URL your browser was sent back to:",
                accepted.status()
            ),
            accepted.authorization().url.clone(),
        ],
    );
    let mut line = String::new();
    let read =
        tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line).map(|_| line))
            .await;
    let callback = match read {
        Ok(Ok(line)) if !line.trim().is_empty() => line.trim().to_owned(),
        _ => {
            return Err(plurnk_mcp::Problem::invalid_definition(
                "no callback URL was given on standard input: run `plurnk-mcp auth` again and \
                 paste the whole URL the authorization server redirected to",
            ));
        }
    };
    workspace.oauth_complete(&server, &callback).await
}

async fn authorize_by_device(
    workspace: &Workspace,
    server: &str,
    scope: Option<&str>,
    json: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    use plurnk_mcp::DevicePoll;
    let device = workspace.authorize_device(server, scope).await?;
    let (expires_in, interval, handle) =
        (device.expires_in, device.interval, device.device.clone());
    let waits = format!(
        "server \"{server}\" waits for authorization ({})",
        plurnk_mcp::Accepted::STATUS
    );
    let open = match &device.verification_uri_complete {
        Some(complete) => vec![
            format!("{waits}: on any device, open {complete}"),
            format!(
                "(or {} and enter the code {})",
                device.verification_uri, device.user_code
            ),
        ],
        None => vec![format!(
            "{waits}: on any device, open {} and enter the code {}",
            device.verification_uri, device.user_code
        )],
    };
    print_accepted(
        &plurnk_mcp::Accepted::device(device),
        json,
        "on any device, open the authorization's url and enter its device.userCode; polling \
         until it is approved",
        &open,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(expires_in);
    let mut interval = Duration::from_secs(interval);
    while std::time::Instant::now() < deadline {
        tokio::time::sleep(interval).await;
        match workspace.poll_device(server, &handle).await? {
            DevicePoll::Pending => {}
            DevicePoll::SlowDown => interval += Duration::from_secs(5),
            DevicePoll::Authorized { server } => return Ok(*server),
            DevicePoll::Denied => {
                return Err(plurnk_mcp::Problem::forbidden(format!(
                    "the authorization of server \"{server}\" was refused on the device"
                )));
            }
            DevicePoll::Expired => break,
        }
    }
    Err(plurnk_mcp::Problem::oauth_not_pending(server))
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
            out!("{}", document_text(&text));
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
        document_text(&plurnk_mcp::projection::survey(&workspace.snapshot()))
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
    let unready = |state: ServerState, problem: Option<&Problem>| {
        fail(format!(
            "server \"{server}\" is {state}: {}",
            problem
                .map(|p| p.detail.clone())
                .unwrap_or_else(|| "enable it with PLURNK_MCP_ENABLED".into())
        ))
    };
    let code = match snapshot.admit(server, None) {
        Err(Refusal::UnknownServer) => fail(format!(
            "server \"{server}\" is not configured: set PLURNK_MCP_{}",
            server.to_ascii_uppercase().replace('-', "_")
        )),
        Err(Refusal::Disabled { problem }) => unready(ServerState::Disabled, problem),
        Err(Refusal::NotReady { state, problem }) => unready(state, problem),
        // No tool is named, so a tool refusal never comes: the server is ready either way.
        Ok(entry) | Err(Refusal::UnknownTool { server: entry, .. }) => {
            body(workspace.clone(), entry.clone()).await
        }
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
    match http {
        None => finished(plurnk_mcp_fixture::serve_stdio(options).await),
        Some(address) => {
            serve_fixture_http(address, |listener, shutdown| {
                plurnk_mcp_fixture::serve_http(listener, options, shutdown)
            })
            .await
        }
    }
}

/// `plurnk-mcp fixture --conformance [--http ADDR]`: the conformance fixture on stdio, or on
/// `address` (printing the one `listening` line the fixture prints) until ctrl-c.
pub(crate) async fn conformance_fixture(http: Option<std::net::SocketAddr>) -> ExitCode {
    match http {
        None => finished(plurnk_mcp_fixture::conformance::serve_stdio().await),
        Some(address) => {
            serve_fixture_http(address, plurnk_mcp_fixture::conformance::serve_http).await
        }
    }
}

/// Binds `address`, prints the one `listening http://ADDRESS/mcp` line the tests read, and
/// serves with `serve` until ctrl-c.
async fn serve_fixture_http<F, Fut>(address: std::net::SocketAddr, serve: F) -> ExitCode
where
    F: FnOnce(tokio::net::TcpListener, tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
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
    finished(serve(listener, shutdown).await)
}

/// A fixture's end as an exit code.
fn finished(result: anyhow::Result<()>) -> ExitCode {
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
        /// A tool source's declaration file, instead of a target.
        source: Option<std::path::PathBuf>,
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

/// The definition of tool source `alias` from its declaration `file`; the message names the
/// file, the field and the fix.
fn source_definition(
    alias: &str,
    file: &std::path::Path,
) -> Result<plurnk_mcp::ServerDefinition, String> {
    let origin = file.display().to_string();
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("{origin} cannot be read ({error}): name a declaration file"))?;
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(|error| {
        format!(
            "{origin}: line {} column {}: not valid JSON: write one JSON object with \"kind\" and the fields of its kind",
            error.line(),
            error.column()
        )
    })?;
    let kind = value.get("kind").and_then(serde_json::Value::as_str);
    let kind = kind
        .and_then(plurnk_mcp::sources::SourceKind::from_name)
        .ok_or_else(|| {
            format!("{origin}: kind: missing or unknown: write \"kind\": \"cli\", \"script\" or \"openapi\"")
        })?;
    if let Some(object) = value.as_object_mut() {
        match object.get("name").and_then(serde_json::Value::as_str) {
            Some(name) if name != alias => {
                return Err(format!(
                    "{origin}: name: declares \"{name}\", but it is being added as \"{alias}\": add it as \"{name}\" or change its name"
                ));
            }
            Some(_) => {}
            None => {
                object.insert("name".into(), serde_json::Value::String(alias.to_owned()));
            }
        }
    }
    plurnk_mcp::sources::definition(alias, kind, value, &origin)
        .map_err(|errors| format!("tool source \"{alias}\" cannot be added: {errors}"))
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
            source: Some(file),
            ..
        } => match source_definition(alias, file) {
            Ok(definition) => Some(definition),
            Err(message) => return fail(message),
        },
        Action::Add {
            alias,
            target,
            options,
            ..
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
        // A server that needs a person's OAuth authorization is authorized here and now:
        // this process is where its tokens live.
        Action::Add { .. } => match prepared {
            Some(definition) => match workspace.add(definition).await {
                Ok(asked) => authorized_interactively(&workspace, asked, json)
                    .await
                    .map(|s| Some(s.alias)),
                Err(problem) => Err(problem),
            },
            None => Ok(None),
        },
        Action::Enable { alias, .. } => match workspace.enable_with(alias, customize).await {
            Ok(asked) => authorized_interactively(&workspace, asked, json)
                .await
                .map(|s| Some(s.alias)),
            Err(problem) => Err(problem),
        },
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

// === import ===

/// What became of one planned server.
enum Imported {
    /// `--dry-run`: nothing was tried.
    Would,
    /// Added, and enabled or disabled as the file had it.
    Done,
    /// The action's Problem.
    Refused(plurnk_mcp::Problem),
    /// Added, but the disable the file asked for was refused.
    NotDisabled(plurnk_mcp::Problem),
}

/// The bounds of one `import`: `--max-bytes` and `--concurrency`.
pub(crate) struct ImportBounds {
    /// The largest file read.
    pub(crate) max_bytes: u64,
    /// How many entries connect at once (at least 1).
    pub(crate) concurrency: usize,
}

/// `plurnk-mcp import <file> [--format F] [--dry-run] [--max-bytes B] [--concurrency N]`:
/// every server of another client's file added through `Workspace::add`, as `add` adds one,
/// at most N at once; a disabled entry is disabled right after. Exit 0 when all were
/// imported, 1 when some were skipped or refused, 2 when the file cannot be read or the host
/// cannot start.
pub(crate) async fn import(
    global: &Global,
    file: &std::path::Path,
    format: Option<&str>,
    dry_run: bool,
    bounds: ImportBounds,
) -> ExitCode {
    use futures::StreamExt;
    use plurnk_mcp::config::shorten;
    use plurnk_mcp::import::Format;
    let path = printable(&file.display().to_string());
    let text = match plurnk_mcp::import::read(file, &path, bounds.max_bytes) {
        Ok(text) => text,
        Err(error) => return fail(error),
    };
    let format = match format {
        None => Format::detect(&file.to_string_lossy(), &text),
        Some(name) => match Format::from_name(name) {
            Some(format) => format,
            None => {
                return fail(format!(
                    "--format {:?} is not a format: use claude-desktop, cursor, vscode or codex",
                    printable(&shorten(name))
                ));
            }
        },
    };
    let plan = match plurnk_mcp::import::plan(&text, format) {
        Ok(plan) => plan,
        Err(error) => return fail(format!("cannot import {path} as {format}: {error}")),
    };
    let outcomes = if dry_run || plan.servers.is_empty() {
        plan.servers.iter().map(|_| Imported::Would).collect()
    } else {
        let (host, workspace) = match start(global).await {
            Ok(started) => started,
            Err(code) => return code,
        };
        // Each add connects its candidate (within the connect timeout), a few at once: a
        // file of hundreds of entries must not spawn hundreds of servers together.
        let adds = plan.servers.iter().map(|server| {
            let workspace = workspace.clone();
            async move {
                if let Err(problem) = workspace.add(server.definition.clone()).await {
                    return Imported::Refused(problem);
                }
                if server.enabled {
                    return Imported::Done;
                }
                match workspace.disable(server.alias()).await {
                    Ok(_) => Imported::Done,
                    Err(problem) => Imported::NotDisabled(problem),
                }
            }
        });
        let outcomes: Vec<Imported> = futures::stream::iter(adds)
            .buffered(bounds.concurrency.max(1))
            .collect()
            .await;
        finish(&host).await;
        outcomes
    };
    let verb = if dry_run {
        "would add"
    } else {
        "added what connects of"
    };
    outln!(
        "{path}: read as {format}; {verb} {} server(s) into workspace \"{}\", {} skipped",
        plan.servers.len(),
        global.workspace,
        plan.skipped.len()
    );
    out!("{}", import_table(&plan, &outcomes));
    for skipped in &plan.skipped {
        outln!(
            "{}",
            printable(&format!(
                "skipped {:?}: {}",
                shorten(&skipped.source),
                skipped.reason
            ))
        );
    }
    for server in &plan.servers {
        for note in &server.notes {
            outln!(
                "{}",
                printable(&format!("note {:?}: {note}", shorten(&server.source)))
            );
        }
    }
    print_variables(&plan, dry_run);
    let failed = plan.skipped.len()
        + outcomes
            .iter()
            .filter(|outcome| matches!(outcome, Imported::Refused(_) | Imported::NotDisabled(_)))
            .count();
    if failed == 0 {
        return ExitCode::SUCCESS;
    }
    let total = plan.skipped.len() + plan.servers.len();
    let was = if dry_run { "would not be" } else { "were not" };
    errln!(
        "plurnk-mcp: {failed} of {total} entries of {path} {was} imported as they are: see the reasons above"
    );
    ExitCode::from(1)
}

fn import_table(plan: &plurnk_mcp::import::Plan, outcomes: &[Imported]) -> String {
    let mut rows = vec![
        [
            "SERVER",
            "FROM",
            "TRANSPORT",
            "ENABLED",
            "TARGET",
            "REFERENCES",
            "RESULT",
        ]
        .map(str::to_owned),
    ];
    for (server, outcome) in plan.servers.iter().zip(outcomes) {
        let references: Vec<String> = server
            .introduced
            .iter()
            .map(|introduced| format!("${{{}}}", introduced.variable))
            .collect();
        let result = match outcome {
            Imported::Would => "would be added".to_owned(),
            Imported::Done => "added".to_owned(),
            Imported::Refused(problem) => format!("refused: {problem}"),
            Imported::NotDisabled(problem) => {
                format!("added, but still enabled: the disable was refused: {problem}")
            }
        };
        rows.push([
            server.alias().to_owned(),
            plurnk_mcp::config::shorten(&server.source),
            server.transport().to_string(),
            if server.enabled { "yes" } else { "no" }.to_owned(),
            server.target(),
            if references.is_empty() {
                "-".to_owned()
            } else {
                references.join(", ")
            },
            result,
        ]);
    }
    if rows.len() == 1 {
        return String::new();
    }
    render_table(&rows)
}

/// The variables the planned servers refer to: names, whether each is set and handed to
/// workspaces, and where a moved secret came from. Never a value.
fn print_variables(plan: &plurnk_mcp::import::Plan, dry_run: bool) {
    let variables = plan.variables();
    if variables.is_empty() {
        return;
    }
    let config = HostConfig::from_env(environment()).ok();
    let handed = |name: &str| {
        config
            .as_ref()
            .is_some_and(|config| config.workspace_env().contains(name))
    };
    // Where each moved value was, gathered once: a file of thousands of entries is read in
    // one pass, not once per variable.
    let mut origins: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for server in &plan.servers {
        for introduced in &server.introduced {
            origins
                .entry(introduced.variable.as_str())
                .or_default()
                .push(format!(
                    "moved out of {}'s {}",
                    server.alias(),
                    introduced.from
                ));
        }
    }
    let mut rows = vec![["VARIABLE", "SET", "IN WORKSPACE_ENV", "FROM"].map(str::to_owned)];
    let mut missing = false;
    for name in &variables {
        let set = std::env::var_os(name).is_some();
        missing |= !set || !handed(name);
        let from = match origins.get(name.as_str()) {
            None => "a reference in the file".to_owned(),
            Some(moved) => moved.join("; "),
        };
        rows.push([
            name.clone(),
            if set { "yes" } else { "no" }.to_owned(),
            if handed(name) { "yes" } else { "no" }.to_owned(),
            from,
        ]);
    }
    outln!("variables the servers refer to (their values are never shown):");
    out!("{}", render_table(&rows));
    let allowed = config
        .as_ref()
        .is_some_and(HostConfig::allows_runtime_servers);
    if missing || !allowed {
        let when = if dry_run {
            "before importing"
        } else {
            "and import again"
        };
        outln!(
            "set each variable, list it in PLURNK_MCP_WORKSPACE_ENV and set PLURNK_MCP_ALLOW_ADD=true {when}: a server is added only once it connects"
        );
    }
}

/// `plurnk-mcp source check`: every tool source of the workspace (service and added), what
/// it needs on this machine and whether it is there. Exit 0 when all are ready, 1 otherwise.
pub(crate) async fn source_check(global: &Global, json: bool) -> ExitCode {
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let summaries = match workspace.list().await {
        Ok(summaries) => summaries,
        Err(problem) => {
            finish(&host).await;
            return fail(problem);
        }
    };
    finish(&host).await;
    let mut rows = Vec::new();
    let mut ready = true;
    for summary in summaries
        .iter()
        .filter(|summary| summary.transport.is_source())
    {
        let kind = plurnk_mcp::sources::SourceKind::from_name(&summary.transport.to_string());
        let declaration = summary
            .definition
            .get("declaration")
            .cloned()
            .unwrap_or_default();
        let found = match kind {
            Some(kind) => {
                Some(plurnk_mcp::sources::check(kind, &declaration, &summary.alias).await)
            }
            None => None,
        };
        let (status, detail) = match found {
            Some(Ok(plurnk_mcp::sources::Finding::Ready(what))) => ("ready", what),
            Some(Ok(plurnk_mcp::sources::Finding::Missing(what))) => ("missing", what),
            Some(Ok(plurnk_mcp::sources::Finding::VersionDrift {
                declared,
                installed,
            })) => (
                "version-drift",
                format!(
                    "written against {declared:?}, installed {installed:?}: check the declaration still fits, then record the new version"
                ),
            ),
            Some(Err(faults)) => (
                "invalid",
                faults
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            None => ("invalid", "not a tool source".to_owned()),
        };
        ready &= status == "ready";
        rows.push((
            summary.alias.clone(),
            summary.transport.to_string(),
            status,
            detail,
        ));
    }
    if json {
        let value: Vec<serde_json::Value> = rows
            .iter()
            .map(|(alias, kind, status, detail)| {
                serde_json::json!({"alias": alias, "kind": kind, "status": status, "detail": detail})
            })
            .collect();
        let code = print_json(&value);
        if code != ExitCode::SUCCESS {
            return code;
        }
    } else if rows.is_empty() {
        errln!(
            "plurnk-mcp: the workspace has no tool sources (PLURNK_MCP_SOURCES, or add --source FILE)"
        );
    } else {
        let mut table = vec![[
            "SOURCE".to_owned(),
            "KIND".to_owned(),
            "STATUS".to_owned(),
            "DETAIL".to_owned(),
        ]];
        for (alias, kind, status, detail) in &rows {
            table.push([
                alias.clone(),
                kind.clone(),
                (*status).to_owned(),
                detail.clone(),
            ]);
        }
        out!("{}", render_table(&table));
    }
    if ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// How `plurnk-mcp serve` is asked to serve.
pub(crate) struct ServeArgs {
    /// Streamable HTTP on this address, instead of stdio.
    pub http: Option<std::net::SocketAddr>,
    /// Serve the one enabled server's names as they are.
    pub unprefixed: bool,
    /// The environment variable holding the bearer token HTTP requests must carry.
    pub bearer_env: Option<String>,
    /// `Host` names accepted besides the loopback ones.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// The HTTP gateway's bounds, as given.
    pub limits: ServeLimits,
}

/// The HTTP gateway's bounds on its clients (`plurnk_mcp::gateway::ClientLimits`); each left
/// out keeps its default, stated in its help and in RELIABILITY.md.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ServeLimits {
    /// HTTP: client connections open at once; past it the one idle longest is closed, or,
    /// with every one busy, the new one is answered 503 [default: 512]
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// HTTP: milliseconds a connection has to send a request head (an idle keep-alive
    /// connection is closed after it too) [default: 10000]
    #[arg(long, value_name = "MS")]
    header_timeout_ms: Option<u64>,
    /// HTTP: milliseconds a request has to deliver its body; past it, 408 [default: 10000]
    #[arg(long, value_name = "MS")]
    body_timeout_ms: Option<u64>,
    /// HTTP: bytes a request body may have; past it, 413 [default: 4194304]
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<usize>,
    /// HTTP: milliseconds a client may leave its answer unread before it is cut off
    /// [default: 10000]
    #[arg(long, value_name = "MS")]
    write_timeout_ms: Option<u64>,
    /// HTTP: 2025-11-25 sessions at once, all clients together [default: 1024]
    #[arg(long, value_name = "N")]
    max_sessions: Option<usize>,
    /// HTTP: 2025-11-25 sessions at once from one client address [default: 256]
    #[arg(long, value_name = "N")]
    max_sessions_per_client: Option<usize>,
    /// HTTP: milliseconds a 2025-11-25 session may go without a request before it ends
    /// [default: 300000]
    #[arg(long, value_name = "MS")]
    session_idle_ms: Option<u64>,
    /// HTTP: listen streams (subscriptions/listen, GET) open at once, all clients together
    /// [default: 256]
    #[arg(long, value_name = "N")]
    max_listen_streams: Option<usize>,
    /// HTTP: listen streams open at once from one client address [default: 64]
    #[arg(long, value_name = "N")]
    max_listen_streams_per_client: Option<usize>,
}

impl ServeLimits {
    /// Whether any bound was given.
    fn any(&self) -> bool {
        let counts = [
            self.max_connections,
            self.max_body_bytes,
            self.max_sessions,
            self.max_sessions_per_client,
            self.max_listen_streams,
            self.max_listen_streams_per_client,
        ];
        let times = [
            self.header_timeout_ms,
            self.body_timeout_ms,
            self.write_timeout_ms,
            self.session_idle_ms,
        ];
        counts.iter().any(Option::is_some) || times.iter().any(Option::is_some)
    }

    /// The bounds, defaults where none was given.
    fn limits(&self) -> plurnk_mcp::gateway::ClientLimits {
        use std::time::Duration;
        let defaults = plurnk_mcp::gateway::ClientLimits::default();
        let ms =
            |given: Option<u64>, default: Duration| given.map_or(default, Duration::from_millis);
        plurnk_mcp::gateway::ClientLimits {
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            header_timeout: ms(self.header_timeout_ms, defaults.header_timeout),
            body_timeout: ms(self.body_timeout_ms, defaults.body_timeout),
            max_body_bytes: self.max_body_bytes.unwrap_or(defaults.max_body_bytes),
            write_timeout: ms(self.write_timeout_ms, defaults.write_timeout),
            max_sessions: self.max_sessions.unwrap_or(defaults.max_sessions),
            max_sessions_per_client: self
                .max_sessions_per_client
                .unwrap_or(defaults.max_sessions_per_client),
            session_idle: ms(self.session_idle_ms, defaults.session_idle),
            max_listen_streams: self
                .max_listen_streams
                .unwrap_or(defaults.max_listen_streams),
            max_listen_streams_per_client: self
                .max_listen_streams_per_client
                .unwrap_or(defaults.max_listen_streams_per_client),
        }
    }
}

/// `plurnk-mcp serve`: the workspace's merged namespace as one MCP server, on stdio (until
/// the client closes stdin) or Streamable HTTP at `/mcp` (until a signal). Over stdio,
/// stdout carries protocol messages only.
pub(crate) async fn serve(global: &Global, args: ServeArgs) -> ExitCode {
    use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
    let bearer = match &args.bearer_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.trim().is_empty() => Some(token),
            _ => {
                return fail(format!(
                    "--bearer-env {name}: the variable is not set (or empty); export the token in it"
                ));
            }
        },
    };
    if let Some(token) = &bearer {
        // Registered before any server starts, so nothing the host says can carry it.
        plurnk_mcp::redact::register([token.clone()]);
    }
    if let (Some(name), Some(token)) = (&args.bearer_env, &bearer)
        && token.len() < plurnk_mcp::gateway::MIN_BEARER_BYTES
    {
        return fail(format!(
            "--bearer-env {name}: the token is {} bytes; a gateway bearer token must be at least {} bytes: put a long random one in {name} (openssl rand -hex 32)",
            token.len(),
            plurnk_mcp::gateway::MIN_BEARER_BYTES
        ));
    }
    if args.http.is_none()
        && (bearer.is_some()
            || !args.allowed_hosts.is_empty()
            || !args.allowed_origins.is_empty()
            || args.limits.any())
    {
        return fail(
            "--bearer-env, --allow-host, --allow-origin and the connection, body, session and stream bounds apply to --transport http only",
        );
    }
    let limits = args.limits.limits();
    if let Err(faults) = limits.check() {
        for fault in &faults[..faults.len().saturating_sub(1)] {
            errln!("plurnk-mcp: {fault}");
        }
        if let Some(last) = faults.last() {
            return fail(last);
        }
    }
    let (host, workspace) = match start(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let naming = if args.unprefixed {
        let snapshot = workspace.snapshot();
        let enabled: Vec<&str> = snapshot
            .servers
            .values()
            .filter(|server| server.state != ServerState::Disabled)
            .map(|server| server.alias.as_str())
            .collect();
        match enabled.as_slice() {
            [only] => Naming::Unprefixed((*only).to_owned()),
            _ => {
                finish(&host).await;
                return fail(format!(
                    "--unprefixed serves a workspace of exactly one enabled server; workspace \"{}\" has {} ({}): leave --unprefixed out to serve them as <server>_<tool>",
                    workspace.name(),
                    enabled.len(),
                    enabled.join(", ")
                ));
            }
        }
    } else {
        Naming::Prefixed
    };
    let gateway = Gateway::new(workspace.clone(), naming);
    let result = match args.http {
        None => {
            gateway
                .serve_io(tokio::io::stdin(), tokio::io::stdout())
                .await
        }
        Some(address) => {
            let listener = match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => listener,
                Err(error) => {
                    finish(&host).await;
                    return fail(format!(
                        "could not listen on {address}: {error}; pick a free port (0 for any)"
                    ));
                }
            };
            match listener.local_addr() {
                Ok(bound) => errln!(
                    "plurnk-mcp: serving workspace \"{}\" at http://{bound}/mcp",
                    workspace.name()
                ),
                Err(error) => {
                    finish(&host).await;
                    return fail(error);
                }
            }
            let options = HttpOptions {
                bearer,
                allowed_hosts: args.allowed_hosts,
                allowed_origins: args.allowed_origins,
                limits,
            };
            let shutdown = tokio_util::sync::CancellationToken::new();
            plurnk_mcp::gateway::serve_http(gateway, listener, options, shutdown).await
        }
    };
    finish(&host).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
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

    #[test]
    fn a_quoted_text_never_starts_a_line_of_its_own() {
        let forged = "refused\nplurnk-mcp: all servers ready\r\n\u{1b}[2Kdone\tok";
        assert_eq!(
            printable(forged),
            "refused\n  plurnk-mcp: all servers ready?\n  ?[2Kdone ok"
        );
        for line in printable(forged).lines().skip(1) {
            assert!(line.starts_with("  "), "{line:?}");
        }
    }
}
