//! The `plurnk-mcp` command line: `demo`, `status`, `tools`, `call`, `exec`, and the hidden
//! `fixture` server the demo and the tests spawn.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// An MCP host: connect to many Model Context Protocol servers at once.
///
/// Servers come from `PLURNK_MCP_<server>` environment variables (see the README).
#[derive(Parser)]
#[command(name = "plurnk-mcp", version, about)]
struct Cli {
    /// Where workspace state lives: a SQLite file (default:
    /// $XDG_DATA_HOME/plurnk-mcp/state.sqlite), or a postgres:// URL that several hosts share
    /// (also PLURNK_MCP_STATE).
    #[arg(long, global = true, value_name = "PATH|URL")]
    state: Option<String>,
    /// The workspace to act in.
    #[arg(long, global = true, default_value = plurnk_mcp::DEFAULT_WORKSPACE)]
    workspace: String,
    /// Serve Prometheus metrics at http://ADDRESS/metrics while the command runs
    /// (IP:PORT; port 0 picks a free port and prints the URL to stderr).
    #[arg(long, global = true, value_name = "ADDRESS")]
    metrics: Option<std::net::SocketAddr>,
    /// A Host name (or name:port) a scrape of --metrics may give besides a loopback name
    /// or an address (repeatable).
    #[arg(long = "metrics-allow-host", global = true, value_name = "HOST")]
    metrics_allowed_hosts: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the host on three built-in fixture servers and show it working.
    Demo,
    List(cli::action::ListArgs),
    Add(cli::action::AddArgs),
    /// Import the servers of another client's configuration file into the workspace.
    ///
    /// Reads Claude Desktop's claude_desktop_config.json, Cursor's and VS Code's mcp.json
    /// and Codex's config.toml. Each server is added as `add` would add it; literal
    /// secrets become ${NAME} references (the variables to set are printed, never their
    /// values); entries that cannot be carried over are reported with the reason. Exits 0
    /// when every entry was imported, 1 when some were skipped or refused, 2 when the file
    /// cannot be read.
    Import(cli::import::ImportArgs),
    Enable(cli::action::EnableArgs),
    Disable(cli::action::DisableArgs),
    Remove(cli::action::RemoveArgs),
    Auth(cli::auth::AuthArgs),
    Status(cli::inspect::StatusArgs),
    Tools(cli::inspect::ToolsArgs),
    Call(cli::call::CallArgs),
    Exec(cli::call::ExecArgs),
    Resources(cli::inspect::ResourcesArgs),
    Read(cli::inspect::ReadArgs),
    Prompts(cli::inspect::PromptsArgs),
    Prompt(cli::inspect::PromptArgs),
    Docs(cli::inspect::DocsArgs),
    Survey(cli::inspect::SurveyArgs),
    Source(cli::source::SourceArgs),
    Sandbox(cli::sandbox::SandboxArgs),
    /// Serve the workspace's enabled servers as one MCP server: every tool and prompt as
    /// <server>_<name>, resources under their own URIs. Over stdio until stdin closes, or
    /// Streamable HTTP at http://ADDRESS/mcp until a signal.
    Serve(cli::serve::ServeCommand),
    /// Serve the fixture MCP server (used by the demo and the tests).
    #[command(hide = true)]
    Fixture(cli::fixture::FixtureArgs),
}

impl Command {
    /// Whether the command was asked for JSON.
    fn json(&self) -> bool {
        match self {
            Self::List(args) => args.json,
            Self::Add(args) => args.json,
            Self::Enable(args) => args.json,
            Self::Disable(args) => args.json,
            Self::Remove(args) => args.json,
            Self::Auth(args) => args.json,
            Self::Status(args) => args.json,
            Self::Tools(args) => args.json,
            Self::Resources(args) => args.json,
            Self::Prompts(args) => args.json,
            Self::Source(args) => args.json(),
            Self::Sandbox(args) => args.json(),
            _ => false,
        }
    }

    /// Whether a progress line may accompany it: not the fixture (a server), not the demo
    /// (a show of its own), not `serve` over stdio (whose stdout is the protocol).
    fn may_show_progress(&self) -> bool {
        match self {
            Self::Fixture(_) | Self::Demo => false,
            Self::Serve(serve) => serve.over_http(),
            _ => true,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("plurnk-mcp: could not start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    // The fixture is a server of the tests, not a host: it exports nothing.
    let telemetry = match &cli.command {
        Command::Fixture { .. } => None,
        _ => match cli::telemetry() {
            Ok(telemetry) => telemetry,
            Err(code) => return code,
        },
    };
    match cli.command {
        Command::Fixture { .. } => {}
        // The demo provokes failures on purpose; their warnings would only clutter it.
        Command::Demo => cli::init_logging("error", telemetry.as_ref()),
        // A server's failed connection is a warning a gateway's operator must see; the other
        // commands print each server's Problem in their own output, so it is not said twice.
        Command::Serve(_) => cli::init_logging("warn", telemetry.as_ref()),
        _ => cli::init_logging("warn,plurnk_mcp::servers=error", telemetry.as_ref()),
    }
    if let Some(state) = &cli.state
        && cli::password_in_url(state)
    {
        cli::warn_password_in_argv();
    }
    // The state from the environment when the flag does not name it: replicas of one
    // deployment are started alike, with the database URL (and its password) out of argv.
    let state = cli.state.or_else(|| {
        std::env::var("PLURNK_MCP_STATE")
            .ok()
            .filter(|s| !s.is_empty())
    });
    let progress = cli.command.may_show_progress() && cli::progress::wanted(cli.command.json());
    let global = cli::Global::new(state, cli.workspace, progress);
    let global = &global;
    let metrics = cli.metrics;
    let metrics_allowed_hosts = cli.metrics_allowed_hosts;
    let code = runtime.block_on(async move {
        // The fixture is a server, not a host: signals keep their ordinary meaning for it
        // (and a hostile mode, which blocks this thread, decides for itself).
        if matches!(cli.command, Command::Fixture { .. }) {
            return run(cli.command, global).await;
        }
        // Before the host starts, so its first state changes and commits are counted.
        if let Some(address) = metrics
            && let Err(code) = cli::serve_metrics(address, metrics_allowed_hosts)
        {
            return code;
        }
        let command = async move { run(cli.command, global).await };
        tokio::pin!(command);
        // A signal shuts the host down cleanly (and the reaper covers a harder death). The
        // command stays polled while its host closes: a call it has in flight is stopped by
        // the closing session, which tells the server, rather than dropped with the command,
        // whose own notice would race the connection's close.
        tokio::select! {
            code = &mut command => code,
            number = cli::signalled() => {
                let closing = cli::interrupted(number);
                tokio::pin!(closing);
                tokio::select! {
                    code = &mut closing => code,
                    _ = &mut command => closing.await,
                }
            }
        }
    });
    // Whatever ended the command (its own end, a signal), what is queued for the collector
    // goes before the process does, within a bound.
    if let Some(telemetry) = telemetry {
        cli::flush(telemetry);
    }
    code
}

async fn run(command: Command, global: &cli::Global) -> ExitCode {
    match command {
        Command::Demo => cli::demo::run().await,
        Command::List(args) => args.run(global).await,
        Command::Add(args) => args.run(global).await,
        Command::Import(args) => args.run(global).await,
        Command::Enable(args) => args.run(global).await,
        Command::Disable(args) => args.run(global).await,
        Command::Remove(args) => args.run(global).await,
        Command::Auth(args) => args.run(global).await,
        Command::Status(args) => args.run(global).await,
        Command::Tools(args) => args.run(global).await,
        Command::Call(args) => args.run(global).await,
        Command::Exec(args) => args.run(global).await,
        Command::Resources(args) => args.run(global).await,
        Command::Read(args) => args.run(global).await,
        Command::Prompts(args) => args.run(global).await,
        Command::Prompt(args) => args.run(global).await,
        Command::Docs(args) => args.run(global).await,
        Command::Survey(args) => args.run(global).await,
        Command::Source(args) => args.run(global).await,
        Command::Sandbox(args) => args.run().await,
        Command::Serve(args) => args.run(global).await,
        Command::Fixture(args) => args.run().await,
    }
}
