//! A server's session as its callers reach it: the admission gate in front of the live
//! connection's peer, and the count of the requests on it.
//!
//! A call runs in the caller's own task: it is admitted here (the server is ready, it offers
//! what is asked, the in-flight bounds hold), counted, run on the connection's [`CallPeer`],
//! and uncounted before its result is returned: no mailbox message, no spawned task, no
//! reply channel. The attachment actor owns the lifecycle and only moves the gate: it opens
//! it on a ready connection, holds it while a changed catalog waits for quiescence, closes it
//! for a drain or a loss, and hears once (not once per call) when the last active request
//! settles while it waits for quiet.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::auth;
use super::call::{CallContext, CallPeer, STOP_GRACE};
use super::catalog::ListError;
use super::connect::{ConnectError, ConnectOptions, Connection, Lister, OnUpdate, Target, connect};
use super::phases::{OnPhase, Phases};
use crate::config::{Environment, PreparedAuthorization, PreparedTransport, ServerDefinition};
use crate::model::{
    CallError, Catalog, ConnectPhase, InProcessConnector, Limits, Negotiated, Operation,
    PhaseTimes, Problem, PromptInfo, ServerState, ToolInfo, ToolResult, TransportKind,
};
use crate::telemetry::ClientCall;

/// What opening a server's session takes: the server as defined, what its `${NAME}`s
/// expand against, and the host's bounds.
pub(crate) struct Opening<'a> {
    /// The workspace it is opened for (whose OAuth state it uses).
    pub workspace: &'a str,
    pub alias: &'a str,
    /// How it is reached, as its Problems name it.
    pub kind: TransportKind,
    pub definition: &'a ServerDefinition,
    pub env: &'a Environment,
    /// The embedder's connector registered under the alias, if any: used only by an
    /// in-process definition.
    pub in_process: Option<InProcessConnector>,
    pub connect: &'a ConnectOptions,
    pub request_timeout: Duration,
    /// Told each resource update the server sends.
    pub on_update: Option<OnUpdate>,
    /// The authorization challenge the server refused the last connection's token with,
    /// if that is how it was lost: an OAuth server is authorized again from it.
    pub challenge: Option<String>,
    /// Told each phase the attempt enters after it starts.
    pub on_phase: Option<OnPhase>,
}

/// A session opened, negotiated and listed: everything a server needs before it publishes.
pub(crate) struct Opened {
    pub connection: Connection,
    pub peer: CallPeer,
    pub tools: Arc<[ToolInfo]>,
    pub catalog: Catalog,
    pub negotiated: Arc<Negotiated>,
    /// How long the tool list stays fresh by the server's `ttlMs` (positive only).
    pub freshness: Option<Duration>,
    /// How long each phase of the opening took.
    pub phases: PhaseTimes,
}

/// Why a session did not open.
#[derive(Debug)]
pub(crate) enum Refused {
    /// It could not be opened now; it is tried again by itself.
    Unavailable(Problem),
    /// A person has to authorize it first: `pending` says where (none when the authorization
    /// was settled or forgotten in the meantime). Tried again only when the authorization
    /// completes or the server is enabled again.
    AuthorizationRequired {
        problem: Problem,
        pending: Option<crate::model::PendingAuthorization>,
    },
}

impl From<Problem> for Refused {
    fn from(problem: Problem) -> Self {
        Self::Unavailable(problem)
    }
}

impl From<auth::Unauthorized> for Refused {
    fn from(unauthorized: auth::Unauthorized) -> Self {
        match unauthorized {
            auth::Unauthorized::Pending { problem, pending } => {
                Self::AuthorizationRequired { problem, pending }
            }
            auth::Unauthorized::Failed(problem) => Self::Unavailable(problem),
        }
    }
}

/// A catalog listed again on a live session.
pub(crate) struct Relisted {
    pub tools: Arc<[ToolInfo]>,
    pub catalog: Catalog,
    pub freshness: Option<Duration>,
    /// A modern server's new discover answer, when it said something new.
    pub negotiated: Option<Arc<Negotiated>>,
}

/// Opens a server's session: expands its definition, spawns or dials it and negotiates
/// within the connect timeout, then lists every family and applies the tool policy within
/// the request timeout (a server that lists slowly or forever is unavailable, not stuck
/// connecting; on timeout the half-made connection is dropped here, which closes it). No
/// other timer cuts a phase short. Any failure is one `502 server-unavailable` Problem that
/// names the server and transport and never a credential; one out of time says which phase
/// it was in and the setting that bounds it.
pub(crate) async fn open(mut opening: Opening<'_>) -> Result<Box<Opened>, Refused> {
    let phases = Phases::new(opening.on_phase.take());
    open_and_list(opening, &phases).await
}

/// The story of an open: prepare the target, present its credentials, connect (a refusal
/// goes to the auth wing), then list; each within its phase's deadline.
async fn open_and_list(opening: Opening<'_>, phases: &Phases) -> Result<Box<Opened>, Refused> {
    let Opening {
        workspace,
        alias,
        kind,
        definition,
        env,
        in_process,
        connect: options,
        request_timeout,
        on_update,
        challenge: carried,
        on_phase: _,
    } = opening;
    let label = format!("server \"{alias}\" ({kind})");
    let unavailable = |detail: String| -> Refused {
        Problem::server_unavailable(format!("{label} {detail}")).into()
    };
    // The one wording of a phase that ran out of time (model/connecting.rs).
    let slow = |bound: Duration| -> Refused {
        unavailable(format!(
            "did not finish connecting: {}; raise it for a server this slow",
            phases.phase().describe(phases.elapsed(), bound)
        ))
    };
    let (mut target, authorization) = target(definition, env, in_process)
        .map_err(|detail| unavailable(format!("could not be prepared: {detail}")))?;
    let url = match &target {
        Target::Http { url, .. } => url.clone(),
        _ => String::new(),
    };
    let server = auth::Server {
        vault: &options.oauth,
        workspace,
        alias,
        label: &label,
        url: &url,
        definition,
        authorization: authorization.as_ref(),
        #[cfg(feature = "oauth")]
        http: &|| options.http_client(),
    };
    let connecting = async {
        if let Target::Http { oauth, grant, .. } = &mut target {
            let credentials = server.authorize().await?;
            *oauth = credentials.client;
            *grant = credentials.grant;
        }
        if let Some(challenge) = carried.filter(|_| server.interactive()) {
            return Err(server.reauthorize(challenge).await.into());
        }
        match connect(alias, &target, options, on_update, phases).await {
            Ok(connection) => Ok(connection),
            Err(ConnectError::AuthRequired(challenge)) => {
                Err(server.refused(challenge).await.into())
            }
            Err(error) => Err(unavailable(format!("could not be connected: {error}"))),
        }
    };
    let connection = tokio::time::timeout(options.connect_timeout, connecting)
        .await
        .map_err(|_| slow(options.connect_timeout))??;
    phases.enter(ConnectPhase::Listing);
    let listing = list(connection, &server, options.close_grace, request_timeout);
    let mut opened = tokio::time::timeout(request_timeout, listing)
        .await
        .map_err(|_| slow(request_timeout))??;
    opened.phases = phases.times();
    Ok(opened)
}

/// Lists every family on a new connection and applies the tool policy. A failure closes
/// the connection in the background; a listing refused with a challenge authorizes again.
async fn list(
    connection: Connection,
    server: &auth::Server<'_>,
    close_grace: Duration,
    request_timeout: Duration,
) -> Result<Box<Opened>, Refused> {
    let (alias, label, definition) = (server.alias, server.label, server.definition);
    // A listing the host itself ended (the server flooded it, or sent a message over the
    // bound) failed for that reason, whatever the list call saw after; each failure's
    // Problem kind says what failed (the EXEC bridge reports it by kind).
    let not_listed = |cut: Option<String>, detail: ListError| -> Refused {
        match cut {
            Some(cut) => Problem::server_unavailable(format!("{label} could not be listed: {cut}")),
            None => Problem::list_failed(format!("{label} could not be listed: {detail}")),
        }
        .into()
    };
    let lister = connection.lister();
    let (listed, ttl) = match lister.list_tools(request_timeout).await {
        Ok(listed) => listed,
        Err(detail) => {
            let challenge = connection.take_challenge();
            let cut = connection.cut_reason();
            connection.close_in_background(close_grace);
            if let Some(challenge) = challenge.filter(|_| server.interactive()) {
                return Err(server.reauthorize(challenge).await.into());
            }
            return Err(not_listed(cut, detail));
        }
    };
    let tools = match super::apply_policy(alias, listed, definition.tools(), definition.read()) {
        Ok(tools) => tools,
        Err(detail) => {
            connection.close_in_background(close_grace);
            return Err(Problem::server_unavailable(detail.to_string()).into());
        }
    };
    let (catalog, catalog_ttl) = match lister.list_catalog(request_timeout).await {
        Ok(listed) => listed,
        Err(detail) => {
            let cut = connection.cut_reason();
            connection.close_in_background(close_grace);
            return Err(not_listed(cut, detail));
        }
    };
    let negotiated = connection.negotiated().clone();
    let peer = connection.call_peer();
    tracing::info!(
        target: "plurnk_mcp::servers",
        server = alias,
        revision = %negotiated.revision,
        tools = tools.len(),
        pid = ?connection.pid(),
        "server ready"
    );
    Ok(Box::new(Opened {
        connection,
        peer,
        tools: tools.into(),
        catalog,
        freshness: freshness(ttl, catalog_ttl, &negotiated),
        negotiated,
        phases: PhaseTimes::default(),
    }))
}

/// How long a listing is fresh: the shortest positive `ttlMs` of the tool list, of the
/// other families and of the discover answer, each fetched again when it passes
/// (§mcp-core-matrix caching hints).
fn freshness(
    tools: Option<u64>,
    catalog: Option<u64>,
    negotiated: &Negotiated,
) -> Option<Duration> {
    let discover = negotiated
        .discovery
        .as_ref()
        .map(|discovery| discovery.ttl_ms);
    [tools, catalog, discover]
        .into_iter()
        .flatten()
        .filter(|ttl| *ttl > 0)
        .min()
        .map(Duration::from_millis)
}

/// Lists the catalog again on a live session and applies the tool policy.
pub(crate) async fn relist(
    alias: &str,
    definition: &ServerDefinition,
    lister: &Lister,
    timeout: Duration,
) -> Result<Box<Relisted>, Problem> {
    let kind = definition.transport().kind();
    let unavailable = |detail: ListError| {
        Problem::list_failed(format!(
            "server \"{alias}\" ({kind}) changed its lists and could not be listed again: {detail}"
        ))
    };
    // A modern server's discover answer first: it says which families to list.
    let negotiated = lister
        .rediscover(timeout)
        .await
        .map_err(|detail| {
            Problem::server_unavailable(format!(
                "server \"{alias}\" ({kind}) must be connected again: {detail}"
            ))
        })?
        .map(Arc::new);
    let renewed = negotiated
        .as_ref()
        .map(|negotiated| lister.renewed(negotiated.clone()));
    let lister = renewed.as_ref().unwrap_or(lister);
    let (listed, ttl) = lister.list_tools(timeout).await.map_err(unavailable)?;
    let tools = super::apply_policy(alias, listed, definition.tools(), definition.read())
        .map_err(|faults| Problem::server_unavailable(faults.to_string()))?;
    let (catalog, catalog_ttl) = lister.list_catalog(timeout).await.map_err(unavailable)?;
    Ok(Box::new(Relisted {
        tools: tools.into(),
        catalog,
        freshness: freshness(ttl, catalog_ttl, lister.negotiated()),
        negotiated,
    }))
}

/// Why a definition could not be made into a connection's target.
#[derive(Debug, thiserror::Error)]
enum Unprepared {
    /// Its `${NAME}` references or settings could not be expanded (the error names the
    /// variable, never a value).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An in-process definition with no server registered under its alias.
    #[error(
        "no in-process server is registered under this alias in this host (an embedder \
         registers one with HostOptions::in_process)"
    )]
    NoInProcessServer,
}

/// Expands `definition` against `env` into what a connection attempt needs. The error names
/// the variable, never a value.
fn target(
    definition: &ServerDefinition,
    env: &Environment,
    in_process: Option<InProcessConnector>,
) -> Result<(Target, Option<PreparedAuthorization>), Unprepared> {
    let prepared = definition.prepare(env)?;
    // Registered before anything is spawned or dialled: whatever comes back from here on
    // (stderr, transport errors, reflected headers) is scrubbed of them.
    crate::redact::register(&prepared.secrets);
    let authorization = prepared.authorization;
    let target = match prepared.transport {
        PreparedTransport::Stdio {
            command,
            args,
            cwd,
            env,
            sandbox,
        } => Target::Stdio {
            command,
            args,
            cwd,
            env,
            sandbox,
        },
        PreparedTransport::Http { url, headers } => Target::Http {
            url,
            headers,
            oauth: None,
            grant: false,
        },
        PreparedTransport::Source {
            kind,
            declaration,
            origin,
        } => Target::Source {
            kind,
            declaration,
            origin,
        },
        PreparedTransport::InProcess => {
            Target::InProcess(in_process.ok_or(Unprepared::NoInProcessServer)?)
        }
    };
    Ok((target, authorization))
}

/// What a ready session offers its callers.
pub(crate) struct Ready {
    peer: CallPeer,
    tools: Arc<[ToolInfo]>,
    prompts: Arc<[PromptInfo]>,
    resources: bool,
    completions: bool,
}

impl Ready {
    /// A ready connection's peer and what it published.
    pub(crate) fn new(
        peer: CallPeer,
        tools: Arc<[ToolInfo]>,
        prompts: Arc<[PromptInfo]>,
        capabilities: &serde_json::Value,
    ) -> Self {
        let offers = |surface: &str| {
            capabilities
                .get(surface)
                .is_some_and(|value| !value.is_null())
        };
        Self {
            peer,
            tools,
            prompts,
            resources: offers("resources"),
            completions: offers("completions"),
        }
    }

    /// Whether the server, as it is connected now, offers what `operation` asks for: the
    /// snapshot the caller was admitted by (`WorkspaceSnapshot::admit`) may be older than
    /// this connection's catalog and capabilities.
    fn admits(&self, alias: &str, operation: &Operation) -> Result<(), CallError> {
        let unsupported = |what: &str| CallError::Unsupported {
            alias: alias.to_owned(),
            operation: operation.label().into_owned(),
            what: what.to_owned(),
        };
        match operation {
            Operation::CallTool { name, .. } => {
                if self.tools.iter().any(|tool| &tool.name == name) {
                    Ok(())
                } else {
                    Err(CallError::UnknownTool {
                        alias: alias.to_owned(),
                        tool: name.clone(),
                    })
                }
            }
            Operation::ReadResource { .. } if !self.resources => Err(unsupported("resources")),
            Operation::ReadResource { .. } => Ok(()),
            Operation::GetPrompt { name, .. } => {
                if self.prompts.iter().any(|prompt| &prompt.name == name) {
                    Ok(())
                } else {
                    Err(CallError::UnknownPrompt {
                        alias: alias.to_owned(),
                        prompt: name.clone(),
                    })
                }
            }
            Operation::Complete { .. } if !self.completions => Err(unsupported("completion")),
            Operation::Complete { .. } => Ok(()),
        }
    }
}

/// Whether, and how, the gate lets a call in.
enum Admission {
    /// Not ready: calls are refused with the state and why.
    Down { state: ServerState, detail: String },
    /// Ready: calls run.
    Open(Arc<Ready>),
    /// A changed catalog waits for the active calls to settle: new calls wait behind it
    /// (the actor's refresh deadline bounds the wait), then run on the new catalog.
    Held,
    /// Disabling, removing or shutting down: new calls are refused, the active ones finish
    /// (or are cancelled), then the connection closes.
    Draining { reason: String },
    /// The attachment stopped: nothing runs here again.
    Gone { reason: String },
    /// The server's definition changed and its successor is ready: new calls run there,
    /// the active ones finish here, then this session closes.
    Replaced(Arc<Session>),
}

/// Where an admitted call runs.
enum Admitted<'a> {
    /// Here, on this session's connection, holding its places.
    Here(Arc<Ready>, CancellationToken, Place<'a>),
    /// On the session that replaced this one.
    Elsewhere(Arc<Session>),
}

struct Gate {
    admission: Admission,
    /// Requests admitted and not yet settled.
    active: usize,
    /// Cancels every active request (a drain past its bound, a shutdown).
    cancel: CancellationToken,
}

/// One attachment's session, shared by the actor that owns it and every handle that calls.
pub(crate) struct Session {
    alias: String,
    gate: Mutex<Gate>,
    /// Wakes calls waiting behind a held gate whenever the admission changes.
    changed: Notify,
    /// Told when the last active request settles while the gate is held or draining.
    on_quiet: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// The in-flight bounds (`max_in_flight_per_server`, `max_in_flight_per_workspace`).
    limits: Limits,
    /// Requests in flight in the whole workspace, shared by its sessions.
    workspace_in_flight: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("alias", &self.alias)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session that is still connecting.
    pub(crate) fn new(alias: &str, limits: Limits, workspace_in_flight: Arc<AtomicUsize>) -> Self {
        Self {
            alias: alias.to_owned(),
            gate: Mutex::new(Gate {
                admission: Admission::Down {
                    state: ServerState::Connecting,
                    detail: "it is still connecting".into(),
                },
                active: 0,
                cancel: CancellationToken::new(),
            }),
            changed: Notify::new(),
            on_quiet: OnceLock::new(),
            limits,
            workspace_in_flight,
        }
    }

    fn gate(&self) -> MutexGuard<'_, Gate> {
        // The gate holds no invariant a panicking holder could break half-way.
        self.gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets who hears that the session went quiet (once; later calls are ignored).
    pub(crate) fn on_quiet(&self, tell: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_quiet.set(Box::new(tell));
    }

    /// Requests admitted and not yet settled.
    pub(crate) fn active(&self) -> usize {
        self.gate().active
    }

    /// Changes the admission, unless the session is draining, replaced or gone (which only
    /// end).
    fn admit_as(&self, admission: Admission) {
        let mut gate = self.gate();
        if matches!(
            gate.admission,
            Admission::Draining { .. } | Admission::Gone { .. } | Admission::Replaced(_)
        ) {
            return;
        }
        gate.admission = admission;
        drop(gate);
        self.changed.notify_waiters();
    }

    /// Calls run on `ready` from now on (and those waiting behind a held gate go).
    pub(crate) fn open(&self, ready: Ready) {
        self.admit_as(Admission::Open(Arc::new(ready)));
    }

    /// Calls are refused as not ready.
    pub(crate) fn down(&self, state: ServerState, detail: String) {
        self.admit_as(Admission::Down { state, detail });
    }

    /// New calls wait for the next `open`; returns whether nothing is active now (if not,
    /// the quiet hook is told when the last active request settles).
    pub(crate) fn hold(&self) -> bool {
        let mut gate = self.gate();
        if matches!(gate.admission, Admission::Open(_)) {
            gate.admission = Admission::Held;
        }
        gate.active == 0
    }

    /// New calls go to `successor` from now on (those waiting behind a held gate too); the
    /// active ones finish here, and the quiet hook is told when the last one settles.
    /// Returns whether nothing is active now.
    pub(crate) fn hand_over(&self, successor: Arc<Session>) -> bool {
        let mut gate = self.gate();
        if !matches!(gate.admission, Admission::Gone { .. }) {
            gate.admission = Admission::Replaced(successor);
        }
        let quiet = gate.active == 0;
        drop(gate);
        self.changed.notify_waiters();
        quiet
    }

    /// New calls are refused as closing for `reason` (or, once handed over, still go to the
    /// successor); from now on the quiet hook is told when the last active request settles.
    pub(crate) fn drain(&self, reason: &str) {
        let mut gate = self.gate();
        if !matches!(
            gate.admission,
            Admission::Gone { .. } | Admission::Replaced(_)
        ) {
            gate.admission = Admission::Draining {
                reason: reason.to_owned(),
            };
        }
        drop(gate);
        self.changed.notify_waiters();
    }

    /// Cancels every active request; each settles as closing.
    pub(crate) fn cancel_active(&self) {
        self.gate().cancel.cancel();
    }

    /// Nothing runs here again (a call that still finds a replaced session goes on to its
    /// successor).
    pub(crate) fn end(&self, reason: &str) {
        let mut gate = self.gate();
        if matches!(gate.admission, Admission::Replaced(_)) {
            return;
        }
        gate.admission = Admission::Gone {
            reason: reason.to_owned(),
        };
        drop(gate);
        self.changed.notify_waiters();
    }

    /// Runs `operation` on the session in the caller's task: admitted, counted, and
    /// uncounted before the result is returned.
    pub(crate) async fn call(
        &self,
        operation: &Operation,
        context: &CallContext,
    ) -> Result<ToolResult, CallError> {
        // The call's span (with feature `otel`) holds everything below: the wait at the
        // gate, the request and its rounds, a successor's session.
        let call = ClientCall::start(&self.alias, operation, context.parent.as_ref());
        let result = call.within(self.call_here(operation, context, &call)).await;
        call.settled(result.as_ref());
        result
    }

    async fn call_here(
        &self,
        operation: &Operation,
        context: &CallContext,
        call: &ClientCall,
    ) -> Result<ToolResult, CallError> {
        let (ready, cancel, place) = match self.admit(operation, context).await? {
            Admitted::Here(ready, cancel, place) => (ready, cancel, place),
            // A call that read the route before the swap follows the server.
            Admitted::Elsewhere(successor) => {
                return Box::pin(successor.call_here(operation, context, call)).await;
            }
        };
        call.admitted(ready.peer.telemetry());
        let started = Instant::now();
        // A closing session stops the call the way its caller would, so the server is told
        // before the count reaches zero and the connection closes; a call that cannot hand
        // its notice over within the courtesy bound is dropped all the same.
        let run = ready.peer.run(operation, context, &cancel);
        tokio::pin!(run);
        let result = tokio::select! {
            biased;
            result = &mut run => result,
            () = cancel.cancelled() => match tokio::time::timeout(STOP_GRACE, &mut run).await {
                Ok(result) => result,
                Err(_) => Err(CallError::Closing {
                    alias: self.alias.clone(),
                    reason: "the server is closing".into(),
                }),
            },
        };
        // The places are given back before the caller has the answer, so a caller that
        // calls again at once finds them free.
        drop(place);
        // Time on the server, from admission to answer; the caller counts the call itself
        // (`count`), refusals included.
        let elapsed = started.elapsed();
        metrics::histogram!("plurnk_mcp_call_seconds").record(elapsed.as_secs_f64());
        call.sent(elapsed, result.as_ref());
        result
    }

    async fn admit(
        &self,
        operation: &Operation,
        context: &CallContext,
    ) -> Result<Admitted<'_>, CallError> {
        // The common case takes the gate once and never touches the `Notify`: only a call
        // that finds the gate held registers to be woken, and reads the gate again after
        // registering, so an `open` in between is not missed.
        if let Some(admitted) = self.try_admit(operation)? {
            return Ok(admitted);
        }
        crate::telemetry::waiting_for_ready(self.wait_admission(operation, context)).await
    }

    /// Waits behind a held gate until it admits the call (or refuses it), or the caller
    /// cancels.
    async fn wait_admission(
        &self,
        operation: &Operation,
        context: &CallContext,
    ) -> Result<Admitted<'_>, CallError> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(admitted) = self.try_admit(operation)? {
                return Ok(admitted);
            }
            tokio::select! {
                () = changed => {}
                () = context.cancelled() => {
                    return Err(CallError::Cancelled {
                        alias: self.alias.clone(),
                        tool: operation.label().into_owned(),
                    });
                }
            }
        }
    }

    /// Reads the gate once: where the call runs, an error, or `None` while it is held.
    fn try_admit(&self, operation: &Operation) -> Result<Option<Admitted<'_>>, CallError> {
        let alias = &self.alias;
        let mut gate = self.gate();
        match &gate.admission {
            Admission::Open(ready) => {
                let ready = Arc::clone(ready);
                ready.admits(alias, operation)?;
                // Bounded, not queued: beyond the bound a call fails at once, so a flood of
                // callers cannot make the host hold an unbounded number of requests for a
                // slow server.
                let overloaded = |limit: usize, scope: &str| CallError::Overloaded {
                    alias: alias.clone(),
                    limit,
                    scope: scope.to_owned(),
                };
                if gate.active >= self.limits.max_in_flight_per_server {
                    return Err(overloaded(
                        self.limits.max_in_flight_per_server,
                        "on this server",
                    ));
                }
                if self
                    .workspace_in_flight
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                        (taken < self.limits.max_in_flight_per_workspace).then_some(taken + 1)
                    })
                    .is_err()
                {
                    return Err(overloaded(
                        self.limits.max_in_flight_per_workspace,
                        "in this workspace",
                    ));
                }
                gate.active += 1;
                Ok(Some(Admitted::Here(
                    ready,
                    gate.cancel.clone(),
                    Place { session: self },
                )))
            }
            Admission::Held => Ok(None),
            Admission::Replaced(successor) => Ok(Some(Admitted::Elsewhere(Arc::clone(successor)))),
            Admission::Down { state, detail } => Err(CallError::NotReady {
                alias: alias.clone(),
                state: *state,
                detail: detail.clone(),
            }),
            Admission::Draining { reason } | Admission::Gone { reason } => {
                Err(CallError::Closing {
                    alias: alias.clone(),
                    reason: reason.clone(),
                })
            }
        }
    }
}

/// One admitted request's places (on the server and in the workspace); given back when
/// dropped, however the request ends (a dropped call future included).
struct Place<'a> {
    session: &'a Session,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let session = self.session;
        session.workspace_in_flight.fetch_sub(1, Ordering::AcqRel);
        let mut gate = session.gate();
        gate.active -= 1;
        let quiet = gate.active == 0
            && matches!(
                gate.admission,
                Admission::Held | Admission::Draining { .. } | Admission::Replaced(_)
            );
        drop(gate);
        if quiet && let Some(tell) = session.on_quiet.get() {
            tell();
        }
    }
}

/// Counts a call as its caller sees it settle: `plurnk_mcp_calls_total{outcome}`, and for
/// a failure `plurnk_mcp_call_errors_total{kind}` (the [`CallError::kind`]). Every call the
/// host answers passes here once, refused or run: a refusal at the route or at the gate
/// (unknown tool, not ready, overloaded) is counted like a failure on the wire.
pub(crate) fn count(result: Result<&ToolResult, &CallError>) {
    use metrics::counter;
    // One arm per outcome with literal labels: the macro keeps each key in a static, so a
    // call that succeeds allocates nothing here.
    let calls = match result {
        Ok(result) if result.is_error => {
            counter!("plurnk_mcp_calls_total", "outcome" => "tool-error")
        }
        Ok(_) => counter!("plurnk_mcp_calls_total", "outcome" => "ok"),
        Err(CallError::Timeout { .. }) => {
            counter!("plurnk_mcp_calls_total", "outcome" => "timeout")
        }
        Err(CallError::Cancelled { .. }) => {
            counter!("plurnk_mcp_calls_total", "outcome" => "cancelled")
        }
        Err(CallError::Overloaded { .. }) => {
            counter!("plurnk_mcp_calls_total", "outcome" => "overloaded")
        }
        Err(_) => counter!("plurnk_mcp_calls_total", "outcome" => "error"),
    };
    calls.increment(1);
    if let Err(error) = result {
        // The label's value is a `&'static str`, but a computed one, so the key takes a
        // small vector: only a failing call pays it, beside the strings its error holds.
        counter!("plurnk_mcp_call_errors_total", "kind" => error.kind()).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// The counters `count` touched, as (name, label value, count).
    fn counted(result: &Result<ToolResult, CallError>) -> Vec<(String, String, u64)> {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || count(result.as_ref()));
        let mut seen: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter_map(|(key, _, _, value)| {
                let DebugValue::Counter(value) = value else {
                    return None;
                };
                let key = key.key();
                let labels: Vec<_> = key.labels().map(|label| label.value().to_owned()).collect();
                Some((key.name().to_owned(), labels.join(","), value))
            })
            .collect();
        seen.sort();
        seen
    }

    #[test]
    fn a_call_is_counted_under_the_outcome_the_caller_saw_and_its_error_kind() {
        let result = |is_error| {
            Ok(ToolResult {
                is_error,
                result: serde_json::json!({"content": []}),
            })
        };
        let (alias, tool) = (String::from("s"), String::from("t"));
        let cases = [
            (result(false), "ok", None),
            (result(true), "tool-error", None),
            (
                Err(CallError::Timeout {
                    alias: alias.clone(),
                    tool: tool.clone(),
                    timeout_ms: 1,
                }),
                "timeout",
                Some("timeout"),
            ),
            (
                Err(CallError::Cancelled {
                    alias: alias.clone(),
                    tool: tool.clone(),
                }),
                "cancelled",
                Some("cancelled"),
            ),
            (
                Err(CallError::Overloaded {
                    alias: alias.clone(),
                    limit: 1,
                    scope: "on this server".into(),
                }),
                "overloaded",
                Some("overloaded"),
            ),
            (
                Err(CallError::Closing {
                    alias: alias.clone(),
                    reason: "closing".into(),
                }),
                "error",
                Some("closing"),
            ),
            (
                Err(CallError::UnknownTool { alias, tool }),
                "error",
                Some("unknown-tool"),
            ),
        ];
        for (result, outcome, kind) in cases {
            let mut expected = vec![("plurnk_mcp_calls_total".to_owned(), outcome.to_owned(), 1)];
            if let Some(kind) = kind {
                expected.push((
                    "plurnk_mcp_call_errors_total".to_owned(),
                    kind.to_owned(),
                    1,
                ));
            }
            expected.sort();
            assert_eq!(counted(&result), expected, "{result:?}");
        }
    }
}
