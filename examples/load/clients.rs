//! The in-process clients: plurnk-mcp's `Host`, raw rmcp, and the bare JSON-RPC line loop.
//! (The TypeScript client lives in its own Node process: `ts.rs`.)

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use plurnk_mcp::{CallError, CallOptions, Host, HostConfig, HostOptions, ServerState, Workspace};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{RwLock, oneshot};

/// The revision every client must negotiate.
pub const REVISION: &str = "2026-07-28";
/// The text every echo call sends.
pub const ECHO_TEXT: &str = "hello";

/// The alias of server `i` in the host's configuration (`PLURNK_MCP_S<i>`).
pub fn alias(i: usize) -> String {
    format!("s{i}")
}

/// The `PLURNK_MCP_*` environment of `servers` stdio fixture servers, all enabled.
pub fn host_env(fixture: &Path, servers: usize) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut enabled = Vec::with_capacity(servers);
    for i in 0..servers {
        env.insert(
            format!("PLURNK_MCP_S{i}"),
            fixture.to_string_lossy().into_owned(),
        );
        enabled.push(alias(i));
    }
    env.insert(
        "PLURNK_MCP_ENABLED".to_owned(),
        serde_json::to_string(&enabled).unwrap_or_default(),
    );
    env
}

/// One connected client of some kind, with `len()` servers.
pub enum Session {
    Host(HostSession),
    Rmcp(Vec<RmcpService>),
    /// Raw rmcp advertising the host's client identity and capabilities.
    RmcpIdentity(Vec<RunningService<RoleClient, ClientConfig>>),
    /// Raw rmcp with swappable slots, for churn: a slot is `None` while disabled.
    RmcpSlots(Vec<RwLock<Option<Arc<RmcpService>>>>),
    Bare(Vec<Arc<BareConn>>),
}

pub struct HostSession {
    pub host: Host,
    pub workspace: Workspace,
    pub aliases: Vec<String>,
}

/// A raw rmcp connection and the tool list it holds to route calls (as the host holds its
/// catalog, so memory per connection compares like with like).
pub struct RmcpService {
    pub service: RunningService<RoleClient, ()>,
    #[allow(dead_code, reason = "held, as the host holds its catalog")]
    pub tools: Vec<rmcp::model::Tool>,
}

/// What a connect established.
pub struct Connected {
    pub session: Session,
    pub revisions: Vec<String>,
    pub ready: usize,
}

impl Session {
    /// Connects `servers` stdio fixture servers at once and waits until every one is ready.
    pub async fn connect(
        client: &str,
        fixture: &Path,
        servers: usize,
    ) -> anyhow::Result<Connected> {
        match client {
            "host" => connect_host(fixture, servers).await,
            "rmcp" => {
                let services = connect_all(servers, {
                    let fixture = fixture.to_owned();
                    move |_| rmcp_connect_stdio(fixture.clone())
                })
                .await?;
                let revisions = rmcp_revisions(services.iter());
                Ok(Connected {
                    ready: services.len(),
                    session: Session::Rmcp(services),
                    revisions,
                })
            }
            "rmcp-identity" => {
                let services = connect_all(servers, {
                    let fixture = fixture.to_owned();
                    move |_| rmcp_connect_stdio_identity(fixture.clone())
                })
                .await?;
                let mut revisions: Vec<String> = services
                    .iter()
                    .filter_map(|service| service.peer().peer_info())
                    .map(|info| info.protocol_version.as_str().to_owned())
                    .collect();
                revisions.sort();
                revisions.dedup();
                Ok(Connected {
                    ready: services.len(),
                    session: Session::RmcpIdentity(services),
                    revisions,
                })
            }
            "rmcp-slots" => {
                let services = connect_all(servers, {
                    let fixture = fixture.to_owned();
                    move |_| rmcp_connect_stdio(fixture.clone())
                })
                .await?;
                let revisions = rmcp_revisions(services.iter());
                Ok(Connected {
                    ready: services.len(),
                    session: Session::RmcpSlots(
                        services
                            .into_iter()
                            .map(|service| RwLock::new(Some(Arc::new(service))))
                            .collect(),
                    ),
                    revisions,
                })
            }
            "bare" => {
                let conns = connect_all(servers, {
                    let fixture = fixture.to_owned();
                    move |_| BareConn::spawn(fixture.clone())
                })
                .await?;
                Ok(Connected {
                    ready: conns.len(),
                    session: Session::Bare(conns.into_iter().map(Arc::new).collect()),
                    revisions: vec![REVISION.to_owned()],
                })
            }
            other => bail!("no in-process client {other:?}"),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Session::Host(host) => host.aliases.len(),
            Session::Rmcp(services) => services.len(),
            Session::RmcpIdentity(services) => services.len(),
            Session::RmcpSlots(slots) => slots.len(),
            Session::Bare(conns) => conns.len(),
        }
    }

    /// One echo call on server `server`: `Ok` for a result, `Err(kind)` for a typed failure.
    pub async fn call(&self, server: usize) -> Result<(), String> {
        match self {
            Session::Host(session) => {
                let result = session
                    .workspace
                    .call_tool(
                        &session.aliases[server],
                        "echo",
                        json!({ "text": ECHO_TEXT }),
                        CallOptions::default(),
                    )
                    .await;
                match result {
                    Ok(result) if !result.is_error => Ok(()),
                    Ok(_) => Err("tool-error".into()),
                    Err(CallError::ConnectionLost { detail, .. }) => {
                        Err(format!("connection-lost ({detail})"))
                    }
                    Err(error) => Err(error.kind().into()),
                }
            }
            Session::Rmcp(services) => rmcp_echo(&services[server].service).await,
            Session::RmcpIdentity(services) => rmcp_echo(&services[server]).await,
            Session::RmcpSlots(slots) => {
                let service = slots[server].read().await.clone();
                match service {
                    Some(service) => rmcp_echo(&service.service).await,
                    None => Err("disabled".into()),
                }
            }
            Session::Bare(conns) => conns[server].echo().await,
        }
    }

    /// Disables server `i` and waits for the commit; returns how long that took.
    pub async fn disable(&self, i: usize) -> anyhow::Result<Duration> {
        let started = Instant::now();
        match self {
            Session::Host(session) => {
                session
                    .workspace
                    .disable(&session.aliases[i])
                    .await
                    .map_err(|problem| anyhow!("disable: {}", problem.detail))?;
            }
            Session::RmcpSlots(slots) => {
                // Stop routing, let the calls in flight finish, then close.
                let Some(mut service) = slots[i].write().await.take() else {
                    bail!("server {i} is already disabled");
                };
                let service = loop {
                    match Arc::try_unwrap(service) {
                        Ok(service) => break service,
                        Err(shared) => {
                            service = shared;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                };
                let _ = service.service.cancel().await;
            }
            _ => bail!("this client has no disable"),
        }
        Ok(started.elapsed())
    }

    /// Enables server `i` again (spawn, negotiate, list) and waits until it is ready.
    pub async fn enable(&self, i: usize, fixture: &Path) -> anyhow::Result<Duration> {
        let started = Instant::now();
        match self {
            Session::Host(session) => {
                let snapshot = session
                    .workspace
                    .enable(&session.aliases[i])
                    .await
                    .map_err(|problem| anyhow!("enable: {}", problem.detail))?;
                if snapshot.state != ServerState::Ready {
                    bail!("enable left {} {}", session.aliases[i], snapshot.state);
                }
            }
            Session::RmcpSlots(slots) => {
                let service = rmcp_connect_stdio(fixture.to_owned()).await?;
                *slots[i].write().await = Some(Arc::new(service));
            }
            _ => bail!("this client has no enable"),
        }
        Ok(started.elapsed())
    }

    /// Closes every connection and waits for it; returns how long that took.
    pub async fn close(self) -> Duration {
        let started = Instant::now();
        match self {
            Session::Host(session) => {
                let report = session.host.shutdown().await;
                if !report.failures.is_empty() {
                    eprintln!(
                        "load: host shutdown reported {} close failure(s)",
                        report.failures.len()
                    );
                }
            }
            Session::Rmcp(services) => {
                futures::future::join_all(services.into_iter().map(|rmcp| rmcp.service.cancel()))
                    .await;
            }
            Session::RmcpIdentity(services) => {
                futures::future::join_all(services.into_iter().map(RunningService::cancel)).await;
            }
            Session::RmcpSlots(slots) => {
                let mut closing = Vec::new();
                for slot in slots {
                    if let Some(service) = slot.into_inner()
                        && let Ok(service) = Arc::try_unwrap(service)
                    {
                        closing.push(service.service.cancel());
                    }
                }
                futures::future::join_all(closing).await;
            }
            Session::Bare(conns) => {
                futures::future::join_all(conns.into_iter().map(|conn| async move {
                    if let Ok(conn) = Arc::try_unwrap(conn) {
                        conn.close().await;
                    }
                }))
                .await;
            }
        }
        started.elapsed()
    }
}

async fn connect_host(fixture: &Path, servers: usize) -> anyhow::Result<Connected> {
    let config = HostConfig::from_env(host_env(fixture, servers))
        .map_err(|errors| anyhow!("configuration: {errors}"))?;
    let host = Host::start_with(config, HostOptions::default()).await?;
    let workspace = host.default_workspace();
    let snapshot = workspace
        .wait_for(Duration::from_secs(300), |snapshot| {
            snapshot.servers.len() == servers && snapshot.is_settled()
        })
        .await;
    // Hydration has settled every server: one that is not ready failed its first attempt,
    // and the trial measures nothing worth reporting.
    if let Some(server) = snapshot
        .servers
        .values()
        .find(|server| server.state != ServerState::Ready)
    {
        bail!(
            "server {} is {}: {}",
            server.alias,
            server.state,
            server
                .problem
                .as_ref()
                .map(|p| p.detail.as_str())
                .unwrap_or_default()
        );
    }
    let ready = snapshot
        .servers
        .values()
        .filter(|server| server.state == ServerState::Ready)
        .count();
    let mut revisions: Vec<String> = snapshot
        .servers
        .values()
        .filter_map(|server| server.negotiated.as_ref().map(|n| n.revision.clone()))
        .collect();
    revisions.sort();
    revisions.dedup();
    Ok(Connected {
        session: Session::Host(HostSession {
            host,
            workspace,
            aliases: (0..servers).map(alias).collect(),
        }),
        revisions,
        ready,
    })
}

/// Runs `connect(i)` for every `i < servers` as its own task, all at once.
pub async fn connect_all<T, F, Fut>(servers: usize, connect: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let tasks: Vec<_> = (0..servers).map(|i| tokio::spawn(connect(i))).collect();
    let mut connected = Vec::with_capacity(servers);
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok(Ok(value)) => connected.push(value),
            Ok(Err(error)) => {
                first_error.get_or_insert(error);
            }
            Err(error) => {
                first_error.get_or_insert(anyhow!("connect task: {error}"));
            }
        }
    }
    match first_error {
        None => Ok(connected),
        Some(error) => Err(error.context(format!(
            "{} of {servers} connections failed",
            servers - connected.len()
        ))),
    }
}

fn auto_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Raw rmcp, as its docs show it: `TokioChildProcess`, `Auto` lifecycle, then `tools/list`.
pub async fn rmcp_connect_stdio(fixture: std::path::PathBuf) -> anyhow::Result<RmcpService> {
    let transport = TokioChildProcess::new(tokio::process::Command::new(&fixture))
        .with_context(|| format!("spawn {}", fixture.display()))?;
    let service = ().serve_with_lifecycle(transport, auto_lifecycle()).await?;
    let tools = service.peer().list_all_tools().await?;
    Ok(RmcpService { service, tools })
}

/// Raw rmcp as above, advertising what the host advertises: its client identity and the
/// client capabilities its capability matrix derives (elicitation, the Tasks extension).
pub async fn rmcp_connect_stdio_identity(
    fixture: std::path::PathBuf,
) -> anyhow::Result<RunningService<RoleClient, ClientConfig>> {
    let transport = TokioChildProcess::new(tokio::process::Command::new(&fixture))
        .with_context(|| format!("spawn {}", fixture.display()))?;
    let capabilities: ClientCapabilities =
        serde_json::from_value(plurnk_mcp::capabilities::client_capabilities(false))?;
    let mut info = Implementation::new("plurnk-mcp", env!("CARGO_PKG_VERSION"));
    info.title = Some("plurnk MCP host".into());
    let service = ClientConfig::new(capabilities, info)
        .serve_with_lifecycle(transport, auto_lifecycle())
        .await?;
    service.peer().list_all_tools().await?;
    Ok(service)
}

/// Raw rmcp over any byte stream pair (in-process servers).
pub async fn rmcp_connect_io<R, W>(reader: R, writer: W) -> anyhow::Result<RmcpService>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let service = ().serve_with_lifecycle((reader, writer), auto_lifecycle()).await?;
    let tools = service.peer().list_all_tools().await?;
    Ok(RmcpService { service, tools })
}

pub fn rmcp_revisions<'a>(services: impl Iterator<Item = &'a RmcpService>) -> Vec<String> {
    let mut revisions: Vec<String> = services
        .filter_map(|rmcp| rmcp.service.peer().peer_info())
        .map(|info| info.protocol_version.as_str().to_owned())
        .collect();
    revisions.sort();
    revisions.dedup();
    revisions
}

async fn rmcp_echo<H: ClientHandler>(
    service: &RunningService<RoleClient, H>,
) -> Result<(), String> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), ECHO_TEXT.into());
    let params = CallToolRequestParams::new("echo").with_arguments(arguments);
    match service.call_tool(params).await {
        Ok(result) if result.is_error != Some(true) => Ok(()),
        Ok(_) => Err("tool-error".into()),
        Err(error) => Err(format!("rmcp: {error}")),
    }
}

// ---------------------------------------------------------------------------------------
// The bare JSON-RPC line loop: the floor. One writer behind a mutex, one reader task that
// hands each answer line to the caller waiting on its id. The request lines are exactly what
// a 2026-07-28 client sends (the per-request `_meta` client context), pre-formatted.

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"plurnk-bench","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

type Pending = Mutex<HashMap<u64, oneshot::Sender<(bool, String)>>>;

pub struct BareConn {
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
    child: Option<tokio::process::Child>,
    /// The `tools/list` answer as received: what this client routes by.
    #[allow(dead_code, reason = "held, as the host holds its catalog")]
    tools: String,
}

#[derive(Deserialize)]
struct Head {
    id: Option<u64>,
    error: Option<serde::de::IgnoredAny>,
}

impl BareConn {
    /// Spawns the fixture and runs discover + tools/list over its pipes.
    pub async fn spawn(fixture: std::path::PathBuf) -> anyhow::Result<BareConn> {
        let mut child = tokio::process::Command::new(&fixture)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {}", fixture.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut conn = BareConn::open(stdout, stdin);
        conn.child = Some(child);
        conn.handshake().await?;
        Ok(conn)
    }

    /// A connection over any byte stream pair, handshake included.
    pub async fn over<R, W>(reader: R, writer: W) -> anyhow::Result<BareConn>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let mut conn = BareConn::open(reader, writer);
        conn.handshake().await?;
        Ok(conn)
    }

    fn open<R, W>(reader: R, writer: W) -> BareConn
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let pending: Arc<Pending> = Arc::default();
        let reader = tokio::spawn(read_loop(BufReader::new(reader), pending.clone()));
        BareConn {
            writer: tokio::sync::Mutex::new(Box::new(writer)),
            pending,
            next_id: AtomicU64::new(1),
            reader,
            child: None,
            tools: String::new(),
        }
    }

    async fn handshake(&mut self) -> anyhow::Result<()> {
        let discover = self
            .request(&format!(
                r#""method":"server/discover","params":{{{META}}}}}"#
            ))
            .await?;
        if !discover.contains(REVISION) {
            bail!("server/discover does not offer {REVISION}: {discover}");
        }
        let tools = self
            .request(&format!(r#""method":"tools/list","params":{{{META}}}}}"#))
            .await?;
        if !tools.contains(r#""name":"echo""#) {
            bail!("tools/list has no echo: {tools}");
        }
        self.tools = tools;
        Ok(())
    }

    /// Sends `{"jsonrpc":"2.0","id":<next>,<rest>` and returns the answer line.
    async fn request(&self, rest: &str) -> anyhow::Result<String> {
        let (failed, line) = self.round_trip(rest).await.map_err(|e| anyhow!(e))?;
        if failed {
            bail!("error answer: {line}");
        }
        Ok(line)
    }

    async fn round_trip(&self, rest: &str) -> Result<(bool, String), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| "poisoned".to_owned())?
            .insert(id, tx);
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},{rest}\n");
        {
            let mut writer = self.writer.lock().await;
            let written = async {
                writer.write_all(line.as_bytes()).await?;
                writer.flush().await
            }
            .await;
            if let Err(error) = written {
                if let Ok(mut pending) = self.pending.lock() {
                    pending.remove(&id);
                }
                return Err(format!("write: {error}"));
            }
        }
        rx.await.map_err(|_| "connection closed".to_owned())
    }

    pub async fn echo(&self) -> Result<(), String> {
        const CALL: &str = concat!(
            r#""method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"#,
            r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"plurnk-bench","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#
        );
        match self.round_trip(CALL).await {
            Ok((false, _)) => Ok(()),
            Ok((true, _)) => Err("json-rpc-error".into()),
            Err(error) => Err(error),
        }
    }

    pub async fn close(mut self) {
        let _ = self.writer.get_mut().shutdown().await;
        drop(self.writer);
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
        self.reader.abort();
    }
}

async fn read_loop<R: AsyncRead + Unpin>(mut reader: BufReader<R>, pending: Arc<Pending>) {
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(head) = serde_json::from_str::<Head>(&line) else {
            continue;
        };
        let Some(id) = head.id else { continue };
        let waiter = pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send((head.error.is_some(), line));
        }
    }
    // Whoever still waits learns the connection is gone.
    if let Ok(mut pending) = pending.lock() {
        pending.clear();
    }
}
