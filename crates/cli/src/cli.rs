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

pub(crate) mod action;
pub(crate) mod auth;
pub(crate) mod call;
pub(crate) mod demo;
pub(crate) mod fixture;
pub(crate) mod import;
pub(crate) mod inspect;
pub(crate) mod progress;
pub(crate) mod sandbox;
pub(crate) mod serve;
pub(crate) mod source;
pub(crate) mod watch;

use std::process::ExitCode;
use std::time::Duration;

use std::path::PathBuf;

use plurnk_mcp::telemetry::Telemetry;

use plurnk_mcp::{
    Host, HostConfig, HostOptions, Problem, Refusal, ServerSnapshot, ServerState, Workspace,
};

/// Logs go to stderr, filtered by `PLURNK_MCP_LOG` (else `default`).
pub(crate) fn init_logging(default: &str, telemetry: Option<&Telemetry>) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // rmcp's transport worker logs the full server URL when a connection fails, and URLs
    // can carry credentials: it stays quiet unless PLURNK_MCP_LOG asks for it.
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLURNK_MCP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},rmcp=off")));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(plurnk_mcp::redact::Scrubbing::new(std::io::stderr))
        .with_filter(filter);
    // The host's spans, and only those, go to the OTLP exporter (each layer its own filter,
    // so the log's level never decides what is traced).
    let traced = telemetry.map(|telemetry| {
        telemetry.layer().with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(plurnk_mcp::telemetry::TARGET, tracing::Level::TRACE),
        )
    });
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(traced)
        .try_init();
}

/// The OTLP export the standard `OTEL_*` variables ask for (`None` when they name no
/// endpoint), or every fault of them at once, reported as the configuration's are.
pub(crate) fn telemetry() -> Result<Option<Telemetry>, ExitCode> {
    Telemetry::from_env(environment()).map_err(|errors| {
        errln!(
            "plurnk-mcp: the OpenTelemetry variables have {} problem(s):",
            errors.errors().len()
        );
        for error in errors.errors() {
            errln!("  - {}", printable(&error.to_string()));
        }
        ExitCode::from(2)
    })
}

/// How long the exit waits for queued spans to reach the collector.
const FLUSH_BOUND: Duration = Duration::from_secs(5);

/// Flushes what the exporter holds, within [`FLUSH_BOUND`] (a dead collector is not waited
/// for past it), and says how many spans never reached it.
pub(crate) fn flush(telemetry: Telemetry) {
    let flushed = telemetry.shutdown(FLUSH_BOUND);
    if flushed.spans_dropped > 0 || !flushed.in_time {
        tracing::warn!(
            dropped = flushed.spans_dropped,
            in_time = flushed.in_time,
            "not every span reached the OpenTelemetry collector"
        );
    }
}

/// A message that may quote a server (its error, its stderr), a file or a caller, made safe
/// for a terminal: no control or format character gets through (an escape sequence would
/// drive the terminal, a carriage return would overwrite the line, a bidirectional override
/// would make it read otherwise: `plurnk_mcp::text`), and every line break is followed by an
/// indent, so nothing quoted can start a line of its own and pass for the command's own words.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\n  "),
            '\t' => out.push(' '),
            c if plurnk_mcp::text::is_unshown(c) => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    // A message can quote a server (its stderr, its error).
    let message = printable(&message.to_string());
    errln!("plurnk-mcp: {message}");
    ExitCode::from(2)
}

/// Serves the Prometheus endpoint `--metrics` asks for, on the command's runtime, to scrapes
/// that name a loopback host, an address or one of `allowed_hosts`. For port 0 the address
/// picked goes to stderr (stdout carries only the command's output).
pub(crate) fn serve_metrics(
    address: std::net::SocketAddr,
    allowed_hosts: Vec<String>,
) -> Result<(), ExitCode> {
    let bound = plurnk_mcp::prometheus::serve_allowing(address, allowed_hosts).map_err(fail)?;
    if address.port() == 0 {
        errln!("metrics: http://{bound}/metrics");
    }
    Ok(())
}

/// Whether `state` is a PostgreSQL URL with a password in it: after the user
/// (`postgres://user:password@host`) or as a `password` parameter.
pub(crate) fn password_in_url(state: &str) -> bool {
    if !plurnk_mcp::store::is_postgres_url(state) {
        return false;
    }
    let rest = state.split_once("://").map_or("", |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let in_userinfo = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.split_once(':').is_some_and(|(_, p)| !p.is_empty()));
    let in_query = rest.split_once('?').is_some_and(|(_, query)| {
        query.split('&').any(|pair| {
            pair.split_once('=')
                .is_some_and(|(key, _)| key == "password")
        })
    });
    in_userinfo || in_query
}

/// Warns that `--state` shows the database's password to every local user, and where to keep
/// it instead.
pub(crate) fn warn_password_in_argv() {
    errln!(
        "plurnk-mcp: warning: --state carries the database's password, which every local user \
         can read in the process list (ps): give the URL in PLURNK_MCP_STATE instead, or leave \
         the password out of it and keep it in PostgreSQL's password file (~/.pgpass, or the \
         file PGPASSFILE names, mode 0600)"
    );
}

/// Options every command shares: where workspace state lives, and which workspace.
pub(crate) struct Global {
    /// The SQLite state file's path, or a `postgres://` URL.
    pub state: String,
    /// The workspace to act in.
    pub workspace: String,
    /// Show progress on the terminal (see [`progress::wanted`]).
    pub progress: bool,
}

impl Global {
    /// `--state` (or `PLURNK_MCP_STATE`) if given, else
    /// `$XDG_DATA_HOME/plurnk-mcp/state.sqlite`, else
    /// `$HOME/.local/share/plurnk-mcp/state.sqlite`, else `./plurnk-mcp-state.sqlite`.
    pub(crate) fn new(state: Option<String>, workspace: String, progress: bool) -> Self {
        let state = state.unwrap_or_else(|| {
            let data = std::env::var_os("XDG_DATA_HOME")
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share"))
                });
            let path = match data {
                Some(data) => data.join("plurnk-mcp").join("state.sqlite"),
                None => PathBuf::from("plurnk-mcp-state.sqlite"),
            };
            path.to_string_lossy().into_owned()
        });
        Self {
            state,
            workspace,
            progress,
        }
    }
}

/// Which servers a command connects: a command that touches one server starts only that one,
/// so an unrelated slow or broken server neither delays nor fails it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Needs<'a> {
    /// Every enabled server: `status`, `survey`, `list`, `serve`, `import`, `source check`.
    All,
    /// Only the server a one-shot command names (`call`, `exec`, `tools`, `resources`,
    /// `read`, `prompts`, `prompt`, `docs`, and the actions on one server); the others are
    /// `idle`.
    One(&'a str),
}

/// Starts the host on the environment's configuration and the state file, connecting what
/// `needs` asks for, and opens the chosen workspace. Nobody answers a server's questions for
/// the command line, so its host declares no elicitation: servers then offer nothing that
/// could only be declined (`serve` relays its clients' answers and uses [`start_relaying`]).
async fn start(global: &Global, needs: Needs<'_>) -> Result<(Host, Workspace), ExitCode> {
    start_as(global, needs, false).await
}

/// [`start`] for `serve`, whose clients answer what servers ask: it declares elicitation.
async fn start_relaying(global: &Global) -> Result<(Host, Workspace), ExitCode> {
    start_as(global, Needs::All, true).await
}

async fn start_as(
    global: &Global,
    needs: Needs<'_>,
    elicitation: bool,
) -> Result<(Host, Workspace), ExitCode> {
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
    let store = plurnk_mcp::store::open(&global.state).await.map_err(fail)?;
    let hydration = progress::Hydration::default();
    let only = match needs {
        Needs::All => None,
        Needs::One(server) => Some([server.to_owned()].into()),
    };
    // The state file's folder is the host's own: no sandboxed process may reach it.
    let protected = (!global.state.starts_with("postgres"))
        .then(|| std::path::absolute(&global.state).ok())
        .flatten()
        .and_then(|state| state.parent().map(Into::into))
        .into_iter()
        .collect();
    let options = HostOptions::default()
        .with_store(Some(store))
        .with_only(only)
        .with_elicitation(elicitation)
        .with_on_open(global.progress.then(|| hydration.on_open()))
        .with_sandbox(plurnk_mcp::sandbox::SandboxOptions::default().with_protected(protected));
    let started = Host::start_with(config, options).await;
    let host = started.inspect_err(|_| hydration.finish()).map_err(fail)?;
    running(&host);
    let opened = host.workspace(&global.workspace).await;
    hydration.finish();
    match opened {
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
/// sequences (which would drive the terminal), bidirectional overrides and megabytes; control
/// and format characters become `?`, line breaks `; `, and the rest is cut at
/// [`CELL_CHARS`].
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
            c if plurnk_mcp::text::is_unshown(c) => out.push('?'),
            c => out.push(c),
        }
        count += 1;
    }
    out
}

/// A server's row of the status table (and of `status --watch`): alias, transport, state,
/// revision, tools (once ready), and the problem column as given.
fn server_row(server: &ServerSnapshot, problem: String) -> [String; 6] {
    [
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
        problem,
    ]
}

/// A Problem's first line, as the tables show it.
fn first_line(problem: &Problem) -> String {
    problem.detail.lines().next().unwrap_or_default().to_owned()
}

/// What the status table says of a server beside its state: its Problem's first line, or,
/// while it connects, the attempt's phase in the wording its Problem would use if the attempt
/// ran out of time (how long, what it waits for, the setting that bounds it).
fn server_note(server: &ServerSnapshot) -> String {
    match (&server.problem, &server.connecting) {
        (Some(problem), _) => first_line(problem),
        (None, Some(connecting)) if server.state == ServerState::Connecting => {
            connecting.describe(std::time::SystemTime::now())
        }
        (None, _) => String::new(),
    }
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
    let (host, workspace) = match start(global, Needs::One(server)).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let snapshot = workspace.snapshot();
    // The name is the caller's: quoted cut, as every caller-given name is.
    let quoted = plurnk_mcp::config::shorten(server);
    let unready = |state: ServerState, problem: Option<&Problem>| {
        let detail = match (problem, snapshot.server(server)) {
            (Some(problem), _) => problem.detail.clone(),
            (None, Some(entry)) if entry.connecting.is_some() => server_note(entry),
            (None, _) if state == ServerState::Disabled => {
                format!("enable it with `plurnk-mcp enable {quoted}` or PLURNK_MCP_ENABLED")
            }
            (None, _) => state.unready_detail(),
        };
        fail(format!("server \"{quoted}\" is {state}: {detail}"))
    };
    let code = match snapshot.admit(server, None) {
        Err(Refusal::UnknownServer) => fail(format!(
            "server \"{quoted}\" is not configured: set {}",
            plurnk_mcp::config::shorten(&plurnk_mcp::config::target_variable(server))
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
            // What servers wrote is in it: format characters escaped as JSON allows.
            outln!("{}", plurnk_mcp::text::escape_json_unshown(&text));
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
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
            summary.problem.as_ref().map(first_line).unwrap_or_default(),
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
