//! `plurnk-mcp serve`: the workspace's enabled servers served as one MCP server.

use std::process::ExitCode;

use super::{Global, fail, finish, start_relaying};
use plurnk_mcp::{ServerState, Workspace};

/// The `serve` command's flags.
#[derive(clap::Args)]
pub(crate) struct ServeCommand {
    /// stdio or http.
    #[arg(long, default_value = "stdio", value_parser = ["stdio", "http"])]
    transport: String,
    /// With --transport http: the address to listen on (loopback unless told otherwise;
    /// port 0 picks a free port). The URL is printed to stderr.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Serve the workspace's one enabled server with its names as they are.
    #[arg(long)]
    unprefixed: bool,
    /// HTTP: every request must carry `Authorization: Bearer <the value of this
    /// variable>`; required to listen anywhere but loopback.
    #[arg(long, value_name = "NAME")]
    bearer_env: Option<String>,
    /// HTTP: the key 2025-11-25 session ids are sealed with is the value of this variable
    /// (at least 32 bytes): replicas given the same key serve each other's sessions, so a
    /// load balancer needs no affinity. Without it each process seals with a key of its own.
    #[arg(long, value_name = "NAME")]
    session_key_env: Option<String>,
    /// HTTP: a Host name accepted besides localhost, 127.0.0.1 and ::1 (repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// HTTP: a browser Origin accepted besides the loopback ones, as
    /// scheme://host:port or scheme://host:* (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    #[command(flatten)]
    limits: ServeLimits,
}

impl ServeCommand {
    /// Whether it serves Streamable HTTP (else stdio, whose stdout is the protocol).
    pub(crate) fn over_http(&self) -> bool {
        self.transport == "http"
    }

    /// Serves the workspace as these flags ask.
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        let args = ServeArgs {
            http: (self.transport == "http").then_some(self.listen),
            unprefixed: self.unprefixed,
            bearer_env: self.bearer_env,
            session_key_env: self.session_key_env,
            allowed_hosts: self.allowed_hosts,
            allowed_origins: self.allowed_origins,
            limits: self.limits,
        };
        serve(global, args).await
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
    /// The environment variable holding the replicas' shared session key.
    pub session_key_env: Option<String>,
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
    /// HTTP: client connections open at once from one client address; past it its own
    /// connection idle longest is closed, or, with every one of its own busy, the new one is
    /// answered 429 [default: 128]
    #[arg(long, value_name = "N")]
    max_connections_per_client: Option<usize>,
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
    /// HTTP: bytes the requests in flight and their answers hold at once, all clients
    /// together; past it, 503 [default: 268435456]
    #[arg(long, value_name = "BYTES")]
    max_bytes_in_flight: Option<usize>,
    /// HTTP: the same of one client address; past it, 429 [default: 67108864]
    #[arg(long, value_name = "BYTES")]
    max_bytes_in_flight_per_client: Option<usize>,
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
    /// HTTP: milliseconds a 2025-11-25 session's id opens at most, however active (sealed
    /// into the id, so every replica agrees); past it the client initializes again
    /// [default: 86400000]
    #[arg(long, value_name = "MS")]
    session_lifetime_ms: Option<u64>,
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
            self.max_connections_per_client,
            self.max_body_bytes,
            self.max_bytes_in_flight,
            self.max_bytes_in_flight_per_client,
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
            self.session_lifetime_ms,
        ];
        counts.iter().any(Option::is_some) || times.iter().any(Option::is_some)
    }

    /// The bounds, defaults where none was given.
    fn limits(&self) -> plurnk_mcp::gateway::ClientLimits {
        use std::time::Duration;
        let defaults = plurnk_mcp::gateway::ClientLimits::default();
        let ms =
            |given: Option<u64>, default: Duration| given.map_or(default, Duration::from_millis);
        plurnk_mcp::gateway::ClientLimits::default()
            .with_max_connections(self.max_connections.unwrap_or(defaults.max_connections))
            .with_max_connections_per_client(
                self.max_connections_per_client
                    .unwrap_or(defaults.max_connections_per_client),
            )
            .with_header_timeout(ms(self.header_timeout_ms, defaults.header_timeout))
            .with_body_timeout(ms(self.body_timeout_ms, defaults.body_timeout))
            .with_max_body_bytes(self.max_body_bytes.unwrap_or(defaults.max_body_bytes))
            .with_write_timeout(ms(self.write_timeout_ms, defaults.write_timeout))
            .with_max_bytes_in_flight(
                self.max_bytes_in_flight
                    .unwrap_or(defaults.max_bytes_in_flight),
            )
            .with_max_bytes_in_flight_per_client(
                self.max_bytes_in_flight_per_client
                    .unwrap_or(defaults.max_bytes_in_flight_per_client),
            )
            .with_max_sessions(self.max_sessions.unwrap_or(defaults.max_sessions))
            .with_max_sessions_per_client(
                self.max_sessions_per_client
                    .unwrap_or(defaults.max_sessions_per_client),
            )
            .with_session_idle(ms(self.session_idle_ms, defaults.session_idle))
            .with_session_lifetime(ms(self.session_lifetime_ms, defaults.session_lifetime))
            .with_max_listen_streams(
                self.max_listen_streams
                    .unwrap_or(defaults.max_listen_streams),
            )
            .with_max_listen_streams_per_client(
                self.max_listen_streams_per_client
                    .unwrap_or(defaults.max_listen_streams_per_client),
            )
    }
}

/// `plurnk-mcp serve`: the workspace's merged namespace as one MCP server, on stdio (until
/// the client closes stdin) or Streamable HTTP at `/mcp` (until a signal). Over stdio,
/// stdout carries protocol messages only.
pub(crate) async fn serve(global: &Global, args: ServeArgs) -> ExitCode {
    use plurnk_mcp::gateway::Gateway;
    let (bearer, session_key) = match credentials(&args) {
        Ok(credentials) => credentials,
        Err(message) => return fail(message),
    };
    if args.http.is_none()
        && (bearer.is_some()
            || session_key.is_some()
            || !args.allowed_hosts.is_empty()
            || !args.allowed_origins.is_empty()
            || args.limits.any())
    {
        return fail(
            "--bearer-env, --session-key-env, --allow-host, --allow-origin and the connection, body, session and stream bounds apply to --transport http only",
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
    let (host, workspace) = match start_relaying(global).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let naming = match naming(args.unprefixed, &workspace) {
        Ok(naming) => naming,
        Err(message) => {
            finish(&host).await;
            return fail(message);
        }
    };
    let gateway = Gateway::new(workspace.clone(), naming);
    let result = match args.http {
        None => {
            gateway
                .serve_io(tokio::io::stdin(), tokio::io::stdout())
                .await
        }
        Some(address) => {
            let listener = match listen(address, workspace.name()).await {
                Ok(listener) => listener,
                Err(message) => {
                    finish(&host).await;
                    return fail(message);
                }
            };
            let options = plurnk_mcp::gateway::HttpOptions::default()
                .with_bearer(bearer)
                .with_allowed_hosts(args.allowed_hosts)
                .with_allowed_origins(args.allowed_origins)
                .with_limits(limits)
                .with_session_key(session_key);
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

/// The bearer token and the replicas' session key the arguments name by variable, each
/// registered as a secret; the message names the variable and the fix.
fn credentials(args: &ServeArgs) -> Result<(Option<String>, Option<Vec<u8>>), String> {
    let bearer = match &args.bearer_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.trim().is_empty() => Some(token),
            _ => {
                return Err(format!(
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
        return Err(format!(
            "--bearer-env {name}: the token is {} bytes; a gateway bearer token must be at least {} bytes: put a long random one in {name} (openssl rand -hex 32)",
            token.len(),
            plurnk_mcp::gateway::MIN_BEARER_BYTES
        ));
    }
    let session_key = match &args.session_key_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(key) if key.len() >= plurnk_mcp::gateway::MIN_SESSION_KEY_BYTES => {
                plurnk_mcp::redact::register([key.clone()]);
                Some(key.into_bytes())
            }
            Ok(key) if !key.is_empty() => {
                return Err(format!(
                    "--session-key-env {name}: the key is {} bytes; a session key must be at least {} bytes: put a long random one in {name} (openssl rand -hex 32), the same on every replica",
                    key.len(),
                    plurnk_mcp::gateway::MIN_SESSION_KEY_BYTES
                ));
            }
            _ => {
                return Err(format!(
                    "--session-key-env {name}: the variable is not set (or empty); export the replicas' shared key in it"
                ));
            }
        },
    };
    Ok((bearer, session_key))
}

/// How the gateway names what it serves: `<server>_<name>`, or, with `--unprefixed`, the
/// names of the workspace's one enabled server.
fn naming(unprefixed: bool, workspace: &Workspace) -> Result<plurnk_mcp::gateway::Naming, String> {
    use plurnk_mcp::gateway::Naming;
    if !unprefixed {
        return Ok(Naming::Prefixed);
    }
    let snapshot = workspace.snapshot();
    let enabled: Vec<&str> = snapshot
        .servers
        .values()
        .filter(|server| server.state != ServerState::Disabled)
        .map(|server| server.alias.as_str())
        .collect();
    match enabled.as_slice() {
        [only] => Ok(Naming::Unprefixed((*only).to_owned())),
        _ => Err(format!(
            "--unprefixed serves a workspace of exactly one enabled server; workspace \"{}\" has {} ({}): leave --unprefixed out to serve them as <server>_<tool>",
            workspace.name(),
            enabled.len(),
            enabled.join(", ")
        )),
    }
}

/// The gateway's listener on `address`, said on stderr where it serves `workspace`.
async fn listen(
    address: std::net::SocketAddr,
    workspace: &str,
) -> Result<tokio::net::TcpListener, String> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| {
            format!("could not listen on {address}: {error}; pick a free port (0 for any)")
        })?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    errln!("plurnk-mcp: serving workspace \"{workspace}\" at http://{bound}/mcp");
    Ok(listener)
}
