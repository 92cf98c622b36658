//! Connection setup: spawn or dial, negotiate-and-degrade, and the [`Connection`] that owns it.
//!
//! Negotiation (§mcp-authority) is one exchange on one transport (`connect/negotiation.rs`):
//! `server/discover` at 2026-07-28, answered in the server's own time, then `initialize` on
//! the same transport when the answer says the server is a legacy peer. Nothing but the
//! caller's one deadline ends an attempt, and a server is never started twice for one.

use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use rmcp::model::DiscoverResult;
use rmcp::service::{ClientCacheConfig, ClientInitializeError, RoleClient, RunningService};
use std::collections::BTreeSet;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::HostClient;
#[cfg(feature = "oauth")]
use super::auth::Challenged;
use super::auth::{AuthorizedClient, ChallengeSlot};
use super::call::{CallPeer, ProgressRoutes};
use super::catalog::ListError;
use super::close::{CloseError, CloseFault};
use super::guard::{CutReason, Inbound, LineLimit};
#[cfg(feature = "http")]
use super::http;
use super::lines::Lines;
use super::phases::Phases;
use super::stdio::ChildProcess;
#[cfg(feature = "stdio")]
use super::stdio::StdioSpawn;
use crate::model::{
    Catalog, InProcessConnector, InteractionHandler, Limits, Negotiated, TransportKind,
};
use crate::redact::scrub;
use listen::{listen, listen_base};
pub(crate) use negotiation::RevisionDropped;
use negotiation::{negotiate, negotiated, rediscovered};
use watched::Signals;

mod listen;
mod negotiation;
#[cfg(test)]
mod tests;
mod watched;

/// An already expanded target: the only place expanded values live, and never printed.
// A build without a transport refuses its definitions before a target is made of one.
#[cfg_attr(not(all(feature = "stdio", feature = "http")), allow(dead_code))]
pub(crate) enum Target {
    /// A child process.
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<PathBuf>,
        env: Vec<(String, String)>,
        sandbox: Option<crate::config::SandboxPolicy>,
    },
    /// Streamable HTTP; `headers` include `Authorization` for a bearer; `oauth` attaches
    /// (and refreshes) an OAuth access token.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        oauth: Option<AuthorizedClient>,
        /// `oauth` comes from the client-credentials grant.
        grant: bool,
    },
    /// A server inside this process.
    InProcess(InProcessConnector),
    /// A tool source, opened now (by the host's [`SourceOpener`]) and served in-process.
    Source {
        kind: TransportKind,
        declaration: serde_json::Value,
        origin: String,
    },
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { .. } => f.write_str("Target::Stdio(<redacted>)"),
            Self::Http { .. } => f.write_str("Target::Http(<redacted>)"),
            Self::InProcess(_) => f.write_str("Target::InProcess"),
            Self::Source { kind, .. } => write!(f, "Target::Source({kind})"),
        }
    }
}

impl Target {
    fn kind(&self) -> TransportKind {
        match self {
            Self::Stdio { .. } => TransportKind::Stdio,
            Self::Http { .. } => TransportKind::Http,
            Self::InProcess(_) => TransportKind::InProcess,
            Self::Source { kind, .. } => *kind,
        }
    }
}

/// Bounds and settings for connecting.
#[derive(Clone)]
pub(crate) struct ConnectOptions {
    /// The whole setup, spawn to listed, must finish within this.
    pub connect_timeout: Duration,
    /// How long a closing stdio server may take to exit after stdin EOF.
    pub close_grace: Duration,
    /// One HTTP client shared by every HTTP connection of the host (pooled connections),
    /// built on first use: loading the system's CA certificates is a noticeable share of a
    /// start that has no HTTP server at all.
    #[cfg(feature = "http")]
    pub http_client: Arc<std::sync::OnceLock<reqwest::Client>>,
    /// Answers a legacy peer's server-initiated elicitation; `None` declines.
    pub interaction: Option<InteractionHandler>,
    /// Whether servers are told the host answers their questions (the `elicitation`
    /// capability).
    pub elicitation: bool,
    /// What a server may make the host hold and do.
    pub limits: Limits,
    /// Kills what this host started if it dies (see `protocol/reaper.rs`).
    pub reaper: Arc<super::reaper::Reaper>,
    /// What of the daemon's environment every child starts from.
    pub inherited: Arc<super::stdio::Inherited>,
    /// How every child is sandboxed.
    pub sandbox: Arc<crate::sandbox::Sandboxing>,
    /// Opens a tool source's declaration into an in-process server (the host gives
    /// [`crate::sources`]'s); `None` refuses every source.
    pub sources: Option<SourceOpener>,
    /// Every workspace's OAuth state, in process memory only.
    pub oauth: Arc<super::auth::Vault>,
}

#[cfg(feature = "http")]
impl ConnectOptions {
    /// The host's shared HTTP client, built on first use.
    pub(crate) fn http_client(&self) -> Result<reqwest::Client, http::ClientUnbuilt> {
        if let Some(client) = self.http_client.get() {
            return Ok(client.clone());
        }
        let built = reqwest::Client::builder()
            .redirect(http::same_origin_redirects())
            .build()
            .map_err(|error| http::ClientUnbuilt(error.to_string()))?;
        Ok(self.http_client.get_or_init(|| built).clone())
    }
}

/// Opens a tool source (its kind, its expanded declaration, where it was declared) into an
/// in-process server's connector, or says why it cannot: the source layer's faults, worded
/// (this layer may not name them), which are the final message of the Problem it becomes.
pub(crate) type SourceOpener = Arc<
    dyn Fn(
            TransportKind,
            serde_json::Value,
            String,
            super::stdio::Children,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<InProcessConnector, String>> + Send>,
        > + Send
        + Sync,
>;

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("connect_timeout", &self.connect_timeout)
            .field("close_grace", &self.close_grace)
            .field("interaction", &self.interaction.is_some())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Why a server could not be connected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The executable could not be started.
    #[error("could not start the executable: {0}")]
    Spawn(String),
    /// The HTTP transport could not be built from the configuration.
    #[cfg(feature = "http")]
    #[error("{0}")]
    Http(String),
    /// A configured header the transport cannot send (named, never its value).
    #[cfg(feature = "http")]
    #[error(transparent)]
    Header(http::HeaderError),
    /// A transport this build was compiled without.
    #[error("this build of plurnk-mcp has no `{0}` feature, which its transport needs")]
    NotBuilt(&'static str),
    /// A tool source could not be opened (its document, its program), said why.
    #[error("could not open the tool source: {0}")]
    Source(String),
    /// Negotiation failed.
    #[error("negotiation failed: {0}")]
    Negotiation(String),
    /// The server answered 401 (or 403 for a scope): its `WWW-Authenticate` challenge, which
    /// only seeds OAuth discovery and is never shown.
    #[error("the server requires authorization")]
    AuthRequired(String),
}

type Service = RunningService<RoleClient, HostClient>;

/// One live connection to one server: the rmcp service, its child process group (stdio),
/// and a token that fires when the transport stops delivering messages.
pub(crate) struct Connection {
    alias: String,
    kind: TransportKind,
    service: Service,
    negotiated: Arc<Negotiated>,
    lost: CancellationToken,
    child: Option<ChildProcess>,
    routes: Arc<ProgressRoutes>,
    /// Why the host cut this connection (a flood, an oversized message), if it did.
    cut: CutReason,
    limits: Limits,
    /// Told of list-change notifications (tools, resources, prompts); a burst that arrives
    /// while nobody waits leaves one permit, so none is missed and a burst is one refresh.
    changes: Arc<Notify>,
    /// Cancelled when the connection closes; ends the subscription listener (only a
    /// connection with one has it).
    closing: Option<CancellationToken>,
    /// The resource URIs the listen stream follows; `None` when the server offers no
    /// resource updates.
    subscribed: Option<Arc<watch::Sender<BTreeSet<String>>>>,
    /// The resource reads kept whole for their ttlMs, forgotten as the server updates them.
    reads: Arc<super::call::reads::Reads>,
    /// The last authorization challenge the server refused a token with (OAuth only).
    challenge: ChallengeSlot,
    /// The callers in flight, when the server may ask questions of its own (a legacy
    /// server's `elicitation/create`); `None` for a 2026-07-28 server, which asks in results.
    askers: Option<Arc<super::Askers>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("alias", &self.alias)
            .field("kind", &self.kind)
            .field("revision", &self.negotiated.revision)
            .finish_non_exhaustive()
    }
}

/// Told the URI of each `notifications/resources/updated` a connection receives, in
/// arrival order, as it arrives (no queue of its own).
pub(crate) type OnUpdate = Arc<dyn Fn(&str) + Send + Sync>;

/// Connects `alias` to `target` and negotiates, on one transport (one process, for stdio):
/// however long the server takes, the caller's deadline is the only one (`phases` hears each
/// phase the attempt enters).
pub(crate) async fn connect(
    alias: &str,
    target: &Target,
    options: &ConnectOptions,
    on_update: Option<OnUpdate>,
    phases: &Phases,
) -> Result<Connection, ConnectError> {
    // What is kept of a resource read is forgotten as the server says it was updated, before
    // anyone else hears of the update.
    let reads = Arc::new(super::call::reads::Reads::default());
    let forgetting = reads.clone();
    let on_update: OnUpdate = Arc::new(move |uri: &str| {
        forgetting.forget(uri);
        if let Some(tell) = &on_update {
            tell(uri);
        }
    });
    let result = attempt(alias, target, options, Some(on_update), phases).await;
    let Parts {
        service,
        child,
        modern,
        lost,
        routes,
        changes,
        cut,
        challenge,
        askers,
        discovered,
    } = result.map_err(Failure::into_error)?;
    // rmcp's response cache honours ttlMs and cacheScope; resource reads do not use it (they
    // are kept whole in `reads`, which its typed results are not). It never serves a stale
    // entry after a failed re-fetch (rmcp's default would), and private entries are
    // partitioned by the connection's credentials. Catalog listings bypass it: the snapshot is
    // their cache, refreshed on list-change notifications.
    service
        .peer()
        .set_response_cache_config(
            ClientCacheConfig::default()
                .with_serve_stale_on_error(false)
                .with_private_partition(partition(target)),
        )
        .await;
    let discovered = discovered
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let negotiated = Arc::new(negotiated(&service, modern, discovered.as_ref()));
    let mut subscribed = None;
    let mut closing = None;
    if modern {
        // A modern peer tells list changes and resource updates only on a listen stream.
        if let Some((base, updates)) = listen_base(&negotiated.capabilities) {
            let listening = closing.insert(CancellationToken::new());
            let follows = updates.then(|| {
                let (sender, receiver) = watch::channel(BTreeSet::new());
                subscribed = Some(Arc::new(sender));
                receiver
            });
            tokio::spawn(listen(
                alias.to_owned(),
                service.peer().clone(),
                base,
                follows,
                lost.clone(),
                listening.clone(),
            ));
        }
    }
    Ok(Connection {
        alias: alias.to_owned(),
        kind: target.kind(),
        service,
        negotiated,
        lost,
        child,
        routes,
        cut,
        limits: options.limits,
        changes,
        closing,
        subscribed,
        reads,
        challenge,
        askers: (!modern).then_some(askers),
    })
}

/// An opaque key for the connection's authorization context: a hash of its credentials,
/// never the credentials themselves.
fn partition(target: &Target) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    match target {
        Target::Stdio { env, .. } => env.hash(&mut hasher),
        Target::Http { headers, .. } => headers.hash(&mut hasher),
        Target::InProcess(_) => {}
        Target::Source { declaration, .. } => declaration.to_string().hash(&mut hasher),
    }
    format!("auth-{:016x}", hasher.finish())
}

enum Failure {
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    Spawn(std::io::Error),
    #[cfg(feature = "http")]
    Http(String),
    #[cfg(feature = "http")]
    Header(http::HeaderError),
    /// A transport this build was compiled without (the configuration refuses such a
    /// definition first).
    #[allow(dead_code)] // constructed only in builds that leave a transport out
    NotBuilt(&'static str),
    Negotiation(Box<ClientInitializeError>),
    /// A negotiation failure already described with what the process left behind.
    #[cfg(feature = "stdio")]
    Described(String),
    /// A tool source that could not be opened (its document, its program), said why.
    Source(String),
}

impl Failure {
    fn into_error(self) -> ConnectError {
        match self {
            Self::Spawn(error) => ConnectError::Spawn(scrub(&error.to_string()).into_owned()),
            #[cfg(feature = "http")]
            Self::Http(detail) => ConnectError::Http(scrub(&detail).into_owned()),
            #[cfg(feature = "http")]
            Self::Header(error) => ConnectError::Header(error),
            Self::NotBuilt(feature) => ConnectError::NotBuilt(feature),
            #[cfg(feature = "stdio")]
            Self::Described(detail) => ConnectError::Negotiation(scrub(&detail).into_owned()),
            Self::Source(detail) => ConnectError::Source(scrub(&detail).into_owned()),
            Self::Negotiation(error) => match auth_challenge(&error) {
                Some(challenge) => ConnectError::AuthRequired(challenge.to_owned()),
                None => ConnectError::Negotiation(scrub(&describe_init_error(&error)).into_owned()),
            },
        }
    }
}

/// The `WWW-Authenticate` challenge a refused negotiation carried: only an HTTP server gives
/// one.
fn auth_challenge(error: &ClientInitializeError) -> Option<&str> {
    #[cfg(feature = "http")]
    return error.auth_challenge();
    #[cfg(not(feature = "http"))]
    {
        let _ = error;
        None
    }
}

fn describe_init_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => format!(
            "server/discover failed ({}) and initialize failed ({})",
            describe_init_error(discover),
            describe_init_error(fallback)
        ),
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "the server answered with JSON-RPC error {}: {}",
                data.code.0, data.message
            )
        }
        ClientInitializeError::ConnectionClosed(context) => {
            format!("the connection closed while waiting for the {context}")
        }
        ClientInitializeError::TransportError { error, context } => {
            // The outer layers name rmcp's transport types; the innermost cause is the news.
            let mut inner: &dyn std::error::Error = error;
            while let Some(cause) = inner.source() {
                inner = cause;
            }
            format!("could not {context} ({inner})")
        }
        other => other.to_string(),
    }
}

/// What one successful attempt hands over: the service, its child (stdio), and the
/// receiving ends of what the transport wrapper reports.
struct Parts {
    service: Service,
    child: Option<ChildProcess>,
    modern: bool,
    lost: CancellationToken,
    routes: Arc<ProgressRoutes>,
    changes: Arc<Notify>,
    cut: CutReason,
    challenge: ChallengeSlot,
    askers: Arc<super::Askers>,
    discovered: Discovered,
}

/// The last `server/discover` answer the connection read, whole: rmcp keeps its identity,
/// capabilities and instructions, and this keeps the rest (supported versions, `ttlMs`,
/// `cacheScope`).
type Discovered = Arc<std::sync::Mutex<Option<DiscoverResult>>>;

/// One try at a connection: wire the client half and its signals, open the target's
/// transport and negotiate over it, then hand on the parts a [`Connection`] is made of.
async fn attempt(
    alias: &str,
    target: &Target,
    options: &ConnectOptions,
    on_update: Option<OnUpdate>,
    phases: &Phases,
) -> Result<Parts, Failure> {
    let lost = CancellationToken::new();
    let routes = Arc::new(ProgressRoutes::default());
    let changes = Arc::new(Notify::new());
    let askers = Arc::new(super::Askers::default());
    let client = HostClient {
        alias: alias.to_owned(),
        interaction: options.interaction.clone(),
        askers: askers.clone(),
        // Negotiation decides, once the server has answered discover.
        legacy: false,
        elicitation: options.elicitation,
        grant: matches!(target, Target::Http { grant: true, .. }),
    };
    let cut = CutReason::default();
    let challenge = ChallengeSlot::default();
    let discovered = Discovered::default();
    let wired = Wired {
        client,
        signals: Signals {
            discovered: discovered.clone(),
            lost: lost.clone(),
            routes: routes.clone(),
            changed: changes.clone(),
            updated: on_update,
            inbound: Inbound::new(options.limits, cut.clone()),
        },
        phases,
        max_message: options.limits.max_message_bytes,
        cut: cut.clone(),
    };
    let (service, modern, child) = match target {
        #[cfg(feature = "stdio")]
        Target::Stdio {
            command,
            args,
            cwd,
            env,
            sandbox,
        } => {
            let spec = StdioSpawn {
                command,
                args,
                cwd: cwd.as_ref(),
                inherited: &options.inherited,
                env,
                reaper: &options.reaper,
                sandbox: &options.sandbox,
                policy: sandbox.as_ref(),
                // The server's exit is its connection's loss, even when a process it
                // started still holds its stdout open (no end of file would ever come).
                exited: lost.clone(),
            };
            let (service, modern, child) = wired.over_stdio(&spec).await?;
            (service, modern, Some(child))
        }
        // The configuration refuses a command in a build without the feature.
        #[cfg(not(feature = "stdio"))]
        Target::Stdio { .. } => return Err(Failure::NotBuilt("stdio")),
        #[cfg(feature = "http")]
        Target::Http {
            url,
            headers,
            oauth,
            ..
        } => {
            let (service, modern) = wired
                .over_http(options, url, headers, oauth.as_ref(), &challenge)
                .await?;
            (service, modern, None)
        }
        // The configuration refuses an http(s) target in a build without the feature.
        #[cfg(not(feature = "http"))]
        Target::Http { .. } => return Err(Failure::NotBuilt("http")),
        Target::Source {
            kind,
            declaration,
            origin,
        } => {
            let connector = open_source(options, *kind, declaration, origin).await?;
            let (service, modern) = wired.over_connector(&connector).await?;
            (service, modern, None)
        }
        Target::InProcess(connector) => {
            let (service, modern) = wired.over_connector(connector).await?;
            (service, modern, None)
        }
    };
    Ok(Parts {
        service,
        child,
        modern,
        lost,
        routes,
        changes,
        cut,
        challenge,
        askers,
        discovered,
    })
}

/// One attempt's client half and the signals its transport's wrapper raises, before a
/// transport is chosen: each way of reaching a server negotiates over them once.
struct Wired<'a> {
    client: HostClient,
    signals: Signals,
    /// The attempt's phases, which negotiation moves on.
    phases: &'a Phases,
    max_message: usize,
    /// Why the host itself ended a read, shared with the connection.
    cut: CutReason,
}

impl Wired<'_> {
    /// Spawns the child and negotiates over its stdio; on failure the child drops here and
    /// takes its process group with it.
    #[cfg(feature = "stdio")]
    async fn over_stdio(
        self,
        spec: &StdioSpawn<'_>,
    ) -> Result<(Service, bool, ChildProcess), Failure> {
        let (child, stdout, stdin) = ChildProcess::spawn(spec).await.map_err(Failure::Spawn)?;
        let stdout = LineLimit::new(stdout, self.max_message, self.cut.clone());
        // A line transport would drop an oversized line and keep going (the request behind
        // it then waits out its deadline); the host's bound comes first and says why.
        let transport = self.signals.wrap(Lines::new(
            stdout,
            stdin,
            self.max_message.saturating_add(1),
        ));
        match negotiate(self.client, transport, self.phases).await {
            Ok((service, modern)) => Ok((service, modern, child)),
            Err(error) => {
                child.settle(Duration::from_millis(500)).await;
                Err(with_stderr(error, &child))
            }
        }
    }

    /// Dials Streamable HTTP, through `oauth`'s token when the server is authorized.
    #[cfg(feature = "http")]
    async fn over_http(
        self,
        options: &ConnectOptions,
        url: &str,
        headers: &[(String, String)],
        oauth: Option<&AuthorizedClient>,
        challenge: &ChallengeSlot,
    ) -> Result<(Service, bool), Failure> {
        let http_client = options
            .http_client()
            .map_err(|error| Failure::Http(error.to_string()))?;
        let Self {
            client,
            signals,
            phases,
            max_message,
            ..
        } = self;
        match oauth {
            None => {
                let inner =
                    http::transport(url, headers, http::kept::Kept(http_client), max_message)
                        .map_err(Failure::Header)?;
                negotiate(client, signals.wrap(inner), phases).await
            }
            #[cfg(feature = "oauth")]
            Some(oauth) => {
                // What the server refuses a token with, after rmcp's own refresh, is kept:
                // a new authorization starts from it.
                let http_client = Challenged::new(oauth.clone(), challenge.clone());
                let inner = http::transport(url, headers, http_client, max_message)
                    .map_err(Failure::Header)?;
                negotiate(client, signals.wrap(inner), phases).await
            }
            // No OAuth client exists in a build without the feature.
            #[cfg(not(feature = "oauth"))]
            Some(never) => {
                let _ = challenge;
                match *never {}
            }
        }
        .map_err(|error| Failure::Negotiation(Box::new(error)))
    }

    /// Negotiates over an in-process server's stream (the embedder's, or a tool source's).
    async fn over_connector(
        self,
        connector: &InProcessConnector,
    ) -> Result<(Service, bool), Failure> {
        let (read, write) = tokio::io::split(connector());
        let read = LineLimit::new(read, self.max_message, self.cut.clone());
        let transport =
            self.signals
                .wrap(Lines::new(read, write, self.max_message.saturating_add(1)));
        negotiate(self.client, transport, self.phases)
            .await
            .map_err(|error| Failure::Negotiation(Box::new(error)))
    }
}

/// Opens a tool source's declaration into an in-process server, by the host's opener.
async fn open_source(
    options: &ConnectOptions,
    kind: TransportKind,
    declaration: &serde_json::Value,
    origin: &str,
) -> Result<InProcessConnector, Failure> {
    let opener = options
        .sources
        .as_ref()
        .ok_or_else(|| Failure::Source("this host opens no tool sources".to_owned()))?;
    opener(
        kind,
        declaration.clone(),
        origin.to_owned(),
        super::stdio::Children {
            reaper: options.reaper.clone(),
            inherited: options.inherited.clone(),
            sandbox: options.sandbox.clone(),
        },
    )
    .await
    .map_err(Failure::Source)
}

#[cfg(feature = "stdio")]
fn with_stderr(error: ClientInitializeError, child: &ChildProcess) -> Failure {
    // The interesting part of a failed stdio negotiation is usually what the server said on
    // stderr before it died: fold it into the error that becomes the Problem.
    let status = child.exit_status();
    let stderr = child.stderr().text();
    if status.is_none() && stderr.is_none() {
        return Failure::Negotiation(Box::new(error));
    }
    let mut context = describe_init_error(&error);
    if let Some(status) = status {
        context.push_str(&format!("; the process {status} during negotiation"));
    }
    if let Some(stderr) = stderr {
        context.push_str(&format!("; its last stderr lines:\n{stderr}"));
    }
    Failure::Described(context)
}

impl Connection {
    /// Closes the connection from a task of its own: the caller is done with it either way.
    pub(crate) fn close_in_background(self, grace: Duration) {
        tokio::spawn(async move {
            let _ = self.close(grace).await;
        });
    }

    /// What negotiation established.
    pub(crate) fn negotiated(&self) -> &Arc<Negotiated> {
        &self.negotiated
    }

    /// Notified (with a stored permit) on list-change notifications.
    pub(crate) fn changes(&self) -> Arc<Notify> {
        self.changes.clone()
    }

    /// The last authorization challenge the server refused this connection's token with,
    /// taken (an OAuth connection only).
    pub(crate) fn take_challenge(&self) -> Option<String> {
        self.challenge
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// A token that fires when the transport stops delivering messages (EOF, crash, drop).
    pub(crate) fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// The server process id, for stdio servers.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(ChildProcess::pid)
    }

    /// What a stdio server's sandbox holds.
    pub(crate) fn sandbox(&self) -> Option<Arc<crate::model::SandboxReport>> {
        self.child.as_ref().map(|child| child.sandbox().clone())
    }

    /// A cheap handle that runs calls concurrently on this connection.
    pub(crate) fn call_peer(&self) -> CallPeer {
        CallPeer::new(
            self.alias.clone(),
            self.service.peer().clone(),
            self.lost.clone(),
            self.routes.clone(),
            self.subscribed.clone(),
            self.cut.clone(),
            self.askers.clone(),
        )
        .with_reads(self.reads.clone())
        .with_telemetry(crate::telemetry::Peer::new(
            self.kind,
            &self.negotiated.revision,
        ))
    }

    /// Describes why the connection was lost: the exit status and stderr of a stdio server.
    /// Why the host cut the connection, if it did (a flood, a message over the bound).
    pub(crate) fn cut_reason(&self) -> Option<String> {
        self.cut.get()
    }

    pub(crate) async fn loss_detail(&self) -> String {
        // When the host cut the connection, that is the news; the process is closed next.
        match self.cut.get() {
            Some(reason) => reason,
            None => self.transport_detail().await,
        }
    }

    async fn transport_detail(&self) -> String {
        match &self.child {
            Some(child) => {
                let status = child
                    .wait_exit(Duration::from_millis(200))
                    .await
                    .unwrap_or_else(|| "closed its output".into());
                match child.stderr().text() {
                    Some(stderr) => {
                        format!("the process {status}; its last stderr lines:\n{stderr}")
                    }
                    None => format!("the process {status}"),
                }
            }
            None => "the HTTP transport closed".into(),
        }
    }

    /// A handle that lists this connection's catalogs from a task.
    pub(crate) fn lister(&self) -> Lister {
        Lister {
            peer: self.service.peer().clone(),
            limits: self.limits,
            negotiated: self.negotiated.clone(),
        }
    }

    /// Closes the connection: the transport closes stdin (stdio) and stops; a stdio group
    /// gets `grace` to exit before `SIGKILL`. The error names everything that failed.
    pub(crate) async fn close(mut self, grace: Duration) -> Result<(), CloseError> {
        // The whole connection goes: its transport closes first, which retires the listen
        // stream with it, rather than cancelling that stream on its own first.
        let closed = self.service.close_with_timeout(grace).await;
        if let Some(closing) = &self.closing {
            closing.cancel();
        }
        let mut failures = Vec::new();
        match closed {
            Ok(Some(_)) => {}
            Ok(None) => failures.push(CloseFault::TransportTimeout {
                ms: grace.as_millis(),
            }),
            Err(error) => failures.push(CloseFault::TransportTask(
                scrub(&error.to_string()).into_owned(),
            )),
        }
        if let Some(child) = self.child.take()
            && let Err(error) = child.close(grace).await
        {
            failures.push(error);
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(CloseError(failures))
        }
    }
}

/// Lists one connection's catalogs; cheap to clone into a task.
#[derive(Clone)]
pub(crate) struct Lister {
    peer: rmcp::Peer<RoleClient>,
    limits: Limits,
    /// What the connection negotiated (its capabilities say which families to list).
    negotiated: Arc<Negotiated>,
}

impl Lister {
    /// Lists every remote tool, draining pages under the non-convergence guard, with the
    /// list's freshness (`ttlMs`) when the server gives one.
    pub(crate) async fn list_tools(
        &self,
        timeout: Duration,
    ) -> Result<(Vec<rmcp::model::Tool>, Option<u64>), ListError> {
        super::catalog::list_all_tools(&self.peer, timeout, &self.limits).await
    }

    /// Lists resources, templates and prompts the server advertises, with the shortest
    /// `ttlMs` they gave; a family that cannot be listed whole is the error, naming it
    /// (scrubbed).
    pub(crate) async fn list_catalog(
        &self,
        timeout: Duration,
    ) -> Result<(Catalog, Option<u64>), ListError> {
        super::catalog::list_catalog(
            &self.peer,
            timeout,
            &self.limits,
            &self.negotiated.capabilities,
        )
        .await
    }

    /// A modern server's discover answer asked again (rmcp serves it from its cache while
    /// the last answer's `ttlMs` holds), when it says something new: `Ok(None)` for a legacy
    /// server, an unchanged answer, or a server that could not answer (it keeps what it
    /// said); the error is a server that no longer speaks the negotiated revision.
    pub(crate) async fn rediscover(
        &self,
        timeout: Duration,
    ) -> Result<Option<Negotiated>, RevisionDropped> {
        if !self.negotiated.modern {
            return Ok(None);
        }
        let asked = tokio::time::timeout(
            timeout,
            self.peer
                .discover(rmcp::model::RequestMetaObject::default()),
        )
        .await;
        let result = match asked {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                tracing::debug!(%error, "server/discover asked again failed; keeping the last answer");
                return Ok(None);
            }
            Err(_) => {
                tracing::debug!("server/discover asked again timed out; keeping the last answer");
                return Ok(None);
            }
        };
        let renewed = rediscovered(&self.negotiated, &result)?;
        Ok((renewed != *self.negotiated).then_some(renewed))
    }

    /// What this lister reads the server's families by.
    pub(crate) fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// This lister, reading the families `negotiated` says the server offers.
    pub(crate) fn renewed(&self, negotiated: Arc<Negotiated>) -> Lister {
        Lister {
            peer: self.peer.clone(),
            limits: self.limits,
            negotiated,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // However the connection ends, its listener ends with it.
        if let Some(closing) = &self.closing {
            closing.cancel();
        }
    }
}
