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
    /// The workspace state file (default: $XDG_DATA_HOME/plurnk-mcp/state.sqlite).
    #[arg(long, global = true)]
    state: Option<std::path::PathBuf>,
    /// The workspace to act in.
    #[arg(long, global = true, default_value = plurnk_mcp::DEFAULT_WORKSPACE)]
    workspace: String,
    /// Serve Prometheus metrics at http://ADDRESS/metrics while the command runs
    /// (IP:PORT; port 0 picks a free port and prints the URL to stderr).
    #[arg(long, global = true, value_name = "ADDRESS")]
    metrics: Option<std::net::SocketAddr>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the host on three built-in fixture servers and show it working.
    Demo,
    /// Every available server of the workspace: source, target, enabledness, state.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Add a server to the workspace and enable it; it is kept only if it connects.
    Add {
        /// The new alias.
        alias: String,
        /// An absolute http(s) URL, or one exact executable (not with --source).
        #[arg(required_unless_present = "source")]
        target: Option<String>,
        /// A tool source instead of an MCP server: its declaration file (JSON with "kind":
        /// cli, script or openapi; see the README's "Tool sources").
        #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "options"])]
        source: Option<std::path::PathBuf>,
        /// McpServerOptions as JSON: args, cwd, env, headers, authorization, tools, read.
        #[arg(long)]
        options: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Import the servers of another client's configuration file into the workspace.
    ///
    /// Reads Claude Desktop's claude_desktop_config.json, Cursor's and VS Code's mcp.json
    /// and Codex's config.toml. Each server is added as `add` would add it; literal
    /// secrets become ${NAME} references (the variables to set are printed, never their
    /// values); entries that cannot be carried over are reported with the reason. Exits 0
    /// when every entry was imported, 1 when some were skipped or refused, 2 when the file
    /// cannot be read.
    Import(cli::import::ImportArgs),
    /// Enable a server in the workspace (optionally customized).
    Enable {
        /// The alias.
        alias: String,
        /// McpServerOptions as JSON, the highest layer of the cascade.
        #[arg(long)]
        options: Option<String>,
        /// A client configuration overlay: a JSON object of PLURNK_MCP_* variables.
        #[arg(long)]
        overlay: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Disable a server in the workspace; it stays listed.
    Disable {
        /// The alias.
        alias: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove a server added (or specialized) in the workspace.
    Remove {
        /// The alias.
        alias: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Authorize an OAuth server in this process, as a person would, and show its tools.
    ///
    /// Prints the authorization URL and reads the callback URL you were sent back to from
    /// standard input; with `--device`, shows a user code to enter on any device and polls
    /// until it is approved. Tokens live in this process only: a daemon (or `serve`)
    /// authorizes its own servers the same way, through its embedding API.
    Auth {
        /// The server alias.
        server: String,
        /// Use the device authorization grant (no browser on this machine).
        #[arg(long)]
        device: bool,
        /// The scope to ask for (device grant only; otherwise the definition's).
        #[arg(long)]
        scope: Option<String>,
        /// Print JSON: the 202 while it waits, then the server's summary.
        #[arg(long)]
        json: bool,
    },
    /// Connect every enabled server and print its state.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Keep watching: a live table redrawn on every state change, each change
        /// highlighted and every server's last Problem kept, until Ctrl-C. Piped, a line per
        /// change; with --json, a JSON object per change.
        #[arg(long)]
        watch: bool,
    },
    /// List a server's enabled tools.
    Tools {
        /// The server alias.
        server: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool and print its result as JSON.
    ///
    /// Exits 0 for a result, 1 for a result the tool flagged `isError`, 2 for a failure.
    Call {
        /// The server alias.
        server: String,
        /// The tool name.
        tool: String,
        /// The arguments, a JSON object.
        arguments: Option<String>,
    },
    /// Run one EXEC op and print its result as JSON.
    ///
    /// `<<EXEC[server](tool):{"name":"value"}:EXEC` calls a tool; `<<EXEC[server]:?:EXEC`
    /// prints the server's tools. Exits like `call`: 0 for a result, 1 for a result the tool
    /// flagged `isError`, 2 for a failure.
    Exec {
        /// The op.
        op: String,
    },
    /// List a server's resources and resource templates.
    Resources {
        /// The server alias.
        server: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Read a resource and print the server's answer as JSON.
    Read {
        /// The server alias.
        server: String,
        /// The resource URI.
        uri: String,
    },
    /// List a server's prompts.
    Prompts {
        /// The server alias.
        server: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Get a prompt and print its messages as JSON.
    Prompt {
        /// The server alias.
        server: String,
        /// The prompt name.
        name: String,
        /// The prompt arguments, a JSON object.
        arguments: Option<String>,
    },
    /// Print what the model reads of a server: its family document, a tool's document, or
    /// (given `<server>:///resources` or `<server>:///prompts`) a facet.
    Docs {
        /// The server alias, or a document address (`worker://plurnk/tools/...`,
        /// `<server>:///resources`, `<server>:///prompts`).
        server: String,
        /// A tool of the server: print its document.
        tool: Option<String>,
    },
    /// Print the tools survey: one row per enabled server, and the tool tree of each
    /// PLURNK_MCP_EXPANDED server.
    Survey,
    /// Tool sources (CLI adapters, scripts, OpenAPI documents).
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// Serve the workspace's enabled servers as one MCP server: every tool and prompt as
    /// <server>_<name>, resources under their own URIs. Over stdio until stdin closes, or
    /// Streamable HTTP at http://ADDRESS/mcp until a signal.
    Serve(cli::serve::ServeCommand),
    /// Serve the fixture MCP server (used by the demo and the tests).
    #[command(hide = true)]
    Fixture(cli::fixture::FixtureArgs),
}

#[derive(Subcommand)]
enum SourceCommand {
    /// Check every tool source of the workspace on this machine: missing binaries, runtimes
    /// that are not installed, declarations written against another version than the one
    /// installed. Exits 1 when any needs attention.
    Check {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// Whether the command was asked for JSON.
    fn json(&self) -> bool {
        match self {
            Self::List { json }
            | Self::Add { json, .. }
            | Self::Enable { json, .. }
            | Self::Disable { json, .. }
            | Self::Remove { json, .. }
            | Self::Auth { json, .. }
            | Self::Status { json, .. }
            | Self::Tools { json, .. }
            | Self::Resources { json, .. }
            | Self::Prompts { json, .. }
            | Self::Source {
                command: SourceCommand::Check { json },
            } => *json,
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
    match cli.command {
        Command::Fixture { .. } => {}
        // The demo provokes failures on purpose; their warnings would only clutter it.
        Command::Demo => cli::init_logging("error"),
        _ => cli::init_logging("warn"),
    }
    let progress = cli.command.may_show_progress() && cli::progress::wanted(cli.command.json());
    let global = cli::Global::new(cli.state, cli.workspace, progress);
    let global = &global;
    let metrics = cli.metrics;
    runtime.block_on(async move {
        // The fixture is a server, not a host: signals keep their ordinary meaning for it
        // (and a hostile mode, which blocks this thread, decides for itself).
        if matches!(cli.command, Command::Fixture { .. }) {
            return run(cli.command, global).await;
        }
        // Before the host starts, so its first state changes and commits are counted.
        if let Some(address) = metrics
            && let Err(code) = cli::serve_metrics(address)
        {
            return code;
        }
        let command = async move { run(cli.command, global).await };
        // A signal shuts the host down cleanly (and the reaper covers a harder death).
        tokio::select! {
            code = command => code,
            number = cli::signalled() => cli::interrupted(number).await,
        }
    })
}

async fn run(command: Command, global: &cli::Global) -> ExitCode {
    {
        match command {
            Command::List { json } => {
                cli::action::action(global, cli::action::Action::List, json).await
            }
            Command::Add {
                alias,
                target,
                source,
                options,
                json,
            } => {
                let action = cli::action::Action::Add {
                    alias,
                    target: target.unwrap_or_default(),
                    source,
                    options,
                };
                cli::action::action(global, action, json).await
            }
            Command::Enable {
                alias,
                options,
                overlay,
                json,
            } => {
                let action = cli::action::Action::Enable {
                    alias,
                    options,
                    overlay,
                };
                cli::action::action(global, action, json).await
            }
            Command::Import(args) => args.run(global).await,
            Command::Disable { alias, json } => {
                cli::action::action(global, cli::action::Action::Disable { alias }, json).await
            }
            Command::Remove { alias, json } => {
                cli::action::action(global, cli::action::Action::Remove { alias }, json).await
            }
            Command::Demo => cli::demo::run().await,
            Command::Status { json, watch: false } => cli::inspect::status(global, json).await,
            Command::Status { json, watch: true } => cli::watch::watch(global, json).await,
            Command::Auth {
                server,
                device,
                scope,
                json,
            } => cli::auth::auth(global, &server, device, scope.as_deref(), json).await,
            Command::Tools { server, json } => cli::inspect::tools(global, &server, json).await,
            Command::Resources { server, json } => {
                cli::inspect::resources(global, &server, json).await
            }
            Command::Read { server, uri } => cli::inspect::read(global, &server, &uri).await,
            Command::Prompts { server, json } => cli::inspect::prompts(global, &server, json).await,
            Command::Docs { server, tool } => {
                cli::inspect::docs(global, &server, tool.as_deref()).await
            }
            Command::Survey => cli::inspect::survey(global).await,
            Command::Prompt {
                server,
                name,
                arguments,
            } => cli::inspect::prompt(global, &server, &name, arguments.as_deref()).await,
            Command::Call {
                server,
                tool,
                arguments,
            } => cli::call::call(global, &server, &tool, arguments.as_deref()).await,
            Command::Exec { op } => cli::call::exec(global, &op).await,
            Command::Source {
                command: SourceCommand::Check { json },
            } => cli::source::source_check(global, json).await,
            Command::Serve(args) => args.run(global).await,
            Command::Fixture(args) => args.run().await,
        }
    }
}
