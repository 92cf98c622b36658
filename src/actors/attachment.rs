//! The attachment actor: one per (workspace, enabled server); the one owner of its connection.
//!
//! It owns the [`Connection`] (and through it the child process group), the gate of its
//! [`Session`] (calls never pass through this actor: they run in their callers' tasks,
//! admitted at the gate), the generation number and the backoff state. Its mailbox never
//! awaits the network: opening, listing again and closing run as tasks that report back with
//! messages stamped by generation, so a result from a replaced connection is recognised and
//! dropped.
//!
//! Listing the catalog again and committing it at quiescence is `attachment/refresh.rs`.

mod refresh;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use self::refresh::Relisting;
use super::messages::{ActionReply, WorkspaceMsg};
use super::restart::{RestartPolicy, Verdict};
use crate::config::ServerDefinition;

use crate::model::{
    Catalog, ConnectPhase, Connecting, HostEvent, Negotiated, PhaseTimes, Problem, Recovered,
    ServerSnapshot, ServerState, ToolInfo, TransportKind,
};
use crate::protocol::{
    self, CallPeer, ConnectOptions, Connection, OnUpdate, Opened, Opening, Ready, Refused,
    Relisted, Session,
};

/// How many connection attempts of one host may run at once. An attempt past this waits for
/// a place before it starts (its connect timeout starts with it): thousands of attempts at
/// once would each take as long as all of them together, pass their timeout and retry, and
/// hydration would never end. Only this many servers that hang until their timeout could hold
/// up another's start, never by more than that timeout.
pub(crate) const ATTEMPTS_AT_ONCE: usize = 512;

/// Settings every attachment of a host shares.
pub(crate) struct Settings {
    /// Bounds for connecting.
    pub connect: ConnectOptions,
    /// The default per-call deadline.
    pub request_timeout: Duration,
    /// How long a disable waits for in-flight calls before cancelling them.
    pub drain_timeout: Duration,
    /// Backoff and crash-loop policy.
    pub restart: RestartPolicy,
    /// The reference environment `${NAME}` expands from.
    pub env: Arc<crate::config::Environment>,
    /// Who may add servers at runtime, and what their definitions may expand.
    pub admission: Admission,
    /// Servers inside the embedding process, by alias.
    pub in_process: Arc<std::collections::BTreeMap<String, crate::model::InProcessConnector>>,
    /// The only servers to connect (`HostOptions::only`); every other enabled one is idle.
    pub only: Option<Arc<std::collections::BTreeSet<String>>>,
    /// `PLURNK_MCP_EXPANDED`: servers whose tool tree expands into the survey.
    pub expanded: Arc<std::collections::BTreeSet<String>>,
    /// The places of the connection attempts running at once ([`ATTEMPTS_AT_ONCE`]).
    pub attempts: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("connect", &self.connect)
            .field("request_timeout", &self.request_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .field("restart", &self.restart)
            .field("in_process", &self.in_process.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The operator's install gate (seed 000): whether workspaces may add and customize
/// servers, and which environment names such definitions may refer to.
pub(crate) struct Admission {
    /// `PLURNK_MCP_ALLOW_ADD`.
    pub allow: bool,
    /// `PLURNK_MCP_WORKSPACE_ENV`.
    pub names: std::collections::BTreeSet<String>,
    /// The environment holding only `names`: what an added definition expands against.
    pub env: Arc<crate::config::Environment>,
}

/// How the attachment came to be, which decides what a failed first attempt means.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Origin {
    /// Hydration or a reconnect: a failure leaves it `unavailable` and retrying.
    Hydrate,
    /// Restarted after the previous actor crashed: starts `unavailable`, then retries.
    Restarted(Problem),
    /// An interactive enable or add: a failure is reported and nothing is published.
    Candidate,
}

/// The start-up arguments.
pub(crate) struct AttachmentArgs {
    pub alias: String,
    pub definition: Arc<ServerDefinition>,
    pub settings: Arc<Settings>,
    pub workspace: ActorRef<WorkspaceMsg>,
    /// The workspace's name, for events.
    pub workspace_name: String,
    /// Where host events go.
    pub events: broadcast::Sender<HostEvent>,
    /// Identifies this actor instance to the workspace.
    pub instance: u64,
    pub origin: Origin,
    /// Crashes of earlier instances of this alias, for the crash-loop window.
    pub crashes: VecDeque<Instant>,
    /// The session callers reach this server through; the actor moves its gate.
    pub session: Arc<Session>,
    /// What the definition's `${NAME}`s expand against: the whole operator environment for
    /// service servers, only the names handed to workspaces for an added one.
    pub env: Arc<crate::config::Environment>,
    /// The hydration whose child the first attempt is, when it is part of one.
    pub hydration: Option<tracing::Span>,
}

/// The attachment's messages.
pub(crate) enum AttachmentMsg {
    /// Start a connection attempt (`retry` must match, so stale timers are ignored).
    Connect { retry: u64 },
    /// The attempt `retry` entered `phase` (`Starting`: it started, now).
    Phase { retry: u64, phase: ConnectPhase },
    /// A connection attempt settled.
    Connected {
        retry: u64,
        result: Result<Box<Live>, Refused>,
    },
    /// The connection of `generation` stopped delivering messages.
    Lost { generation: u64 },
    /// A server announced a list change.
    ListChanged,
    /// A catalog refresh of `generation` finished.
    Refreshed {
        generation: u64,
        result: Result<Box<Refresh>, Problem>,
    },
    /// The tool list of `generation` went stale (its `ttlMs` passed): list it again.
    Expired { generation: u64, epoch: u64 },
    /// The bound for committing a refresh passed: commit it even if calls are in flight.
    RefreshDeadline { epoch: u64 },
    /// The loss was examined (exit status, stderr) and the old connection closed.
    LostDetail { generation: u64, detail: String },
    /// An explicit reconnect (enable of an already-enabled alias); clears `crash-loop`.
    /// Answered when the attempt settles, or at once when already ready.
    Reconnect { reply: ActionReply },
    /// The last active request settled while the session was held or draining.
    Quiet,
    /// Stop taking calls, settle (`cancel`: cancel) in-flight ones, close, report, stop.
    Drain { reason: String, cancel: bool },
    /// The drain deadline passed: cancel whatever is still in flight.
    DrainDeadline,
    /// Panics inside the handler: a test hook for the supervision path.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    Panic,
}

/// A refreshed catalog, waiting for quiescence to be committed.
type Refresh = Relisted;

impl From<Opened> for Live {
    fn from(opened: Opened) -> Self {
        Self {
            connection: opened.connection,
            peer: opened.peer,
            tools: opened.tools,
            catalog: opened.catalog,
            negotiated: opened.negotiated,
            freshness: opened.freshness,
            phases: opened.phases,
            retire: None,
            retired: CancellationToken::new(),
        }
    }
}

/// A ready connection and what it publishes.
pub(crate) struct Live {
    connection: Connection,
    peer: CallPeer,
    tools: Arc<[ToolInfo]>,
    catalog: Catalog,
    negotiated: Arc<Negotiated>,
    /// How long the tool list stays fresh by the server's `ttlMs` (positive only).
    freshness: Option<Duration>,
    /// How long each phase of its opening took.
    phases: PhaseTimes,
    /// Stops this connection's watchers and its refresh when the actor lets it go (dropped
    /// with `Live`): a retired connection tells the actor nothing more, so its loss or its
    /// listing, noticed late while a newer connection is ready, is never taken for that one's.
    retire: Option<tokio_util::sync::DropGuard>,
    /// Cancelled when `retire` drops.
    retired: CancellationToken,
}

enum Lifecycle {
    Connecting,
    Ready(Box<Live>),
    Unavailable(Problem),
    CrashLoop(Problem),
    /// Waits for a person to authorize it (no retry by itself).
    AuthorizationRequired(Problem),
}

impl Lifecycle {
    /// The Problem the server has in this state, if any.
    fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Connecting | Self::Ready(_) => None,
            Self::Unavailable(problem)
            | Self::CrashLoop(problem)
            | Self::AuthorizationRequired(problem) => Some(problem),
        }
    }
}

struct Draining {
    reason: String,
}

/// The attachment's mutable state.
pub(crate) struct AttachmentState {
    args: AttachmentArgs,
    lifecycle: Lifecycle,
    generation: u64,
    /// Stamps connection attempts and retry timers; only the newest counts.
    retry: u64,
    delays: Box<dyn Iterator<Item = Duration> + Send>,
    draining: Option<Draining>,
    first_attempt: bool,
    /// Explicit reconnects waiting for the attempt in progress to settle.
    reconnects: Vec<ActionReply>,
    /// The authorization challenge the lost connection's server refused its token with:
    /// the next attempt authorizes again from it.
    challenge: Option<String>,
    /// Whether the catalog is being listed again.
    relisting: Relisting,
    /// A refreshed catalog waiting for the in-flight calls to settle.
    pending_refresh: Option<Box<Refresh>>,
    /// Stamps freshness timers; only the newest counts.
    expiry: u64,
    /// Stamps the deadline of the refreshed catalog waiting to be committed.
    refresh_epoch: u64,
    /// The operator's summaries, shared by every snapshot of this attachment.
    authored: Arc<crate::model::Authored>,
    /// The attempt under way while `connecting`: its phase and when it started.
    attempt: Option<Connecting>,
    /// The last Problem it recovered from, and when.
    recovered: Option<Arc<Recovered>>,
    /// The last failed attempt's Problem that was logged as a warning: a server that fails
    /// the same way at every retry is logged once, not at every retry.
    warned: Option<String>,
}

impl Drop for AttachmentState {
    fn drop(&mut self) {
        // However the actor ends (a drain, a crash), a caller holding its session is told.
        self.args.session.end("its attachment stopped");
    }
}

/// The actor (no configuration lives here: it is all in the arguments).
pub(crate) struct AttachmentActor;

impl Actor for AttachmentActor {
    type Msg = AttachmentMsg;
    type State = AttachmentState;
    type Arguments = AttachmentArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AttachmentArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let lifecycle = match &args.origin {
            Origin::Restarted(problem) => Lifecycle::Unavailable(problem.clone()),
            _ => Lifecycle::Connecting,
        };
        let delays = Box::new(args.settings.restart.delays());
        let authored = Arc::new(crate::model::Authored::of(
            &args.definition,
            &args.env,
            args.settings.expanded.contains(&args.alias),
        ));
        Ok(AttachmentState {
            challenge: None,
            authored,
            args,
            lifecycle,
            generation: 0,
            retry: 0,
            delays,
            draining: None,
            first_attempt: true,
            reconnects: Vec::new(),
            relisting: Relisting::Idle,
            pending_refresh: None,
            expiry: 0,
            refresh_epoch: 0,
            attempt: None,
            recovered: None,
            warned: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Connecting starts here, not in pre_start: ractor reports no supervision event for
        // a failing pre_start, and the spawner must not wait for the network.
        // The session tells the actor when its calls went quiet while it waited for that.
        let quiet = myself.clone();
        state.args.session.on_quiet(move || {
            let _ = quiet.cast(AttachmentMsg::Quiet);
        });
        match state.args.origin.clone() {
            Origin::Restarted(_) => {
                state.close_gate();
                state.publish();
                state.schedule_retry(&myself);
            }
            _ => state.start_attempt(&myself),
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AttachmentMsg::Connect { retry } => state.on_connect(&myself, retry),
            AttachmentMsg::Phase { retry, phase } => state.on_phase(retry, phase),
            AttachmentMsg::Connected { retry, result } => {
                state.on_connected(&myself, retry, result)
            }
            AttachmentMsg::Lost { generation } => state.on_lost(&myself, generation),
            AttachmentMsg::LostDetail { generation, detail } => {
                state.on_lost_detail(generation, &detail)
            }
            AttachmentMsg::Reconnect { reply } => state.on_reconnect(&myself, reply),
            AttachmentMsg::Quiet => state.on_quiet(&myself),
            AttachmentMsg::ListChanged => state.on_list_changed(&myself),
            AttachmentMsg::Expired { generation, epoch } => {
                state.on_expired(&myself, generation, epoch)
            }
            AttachmentMsg::Refreshed { generation, result } => {
                state.on_refreshed(&myself, generation, result)
            }
            AttachmentMsg::RefreshDeadline { epoch } => state.on_refresh_deadline(&myself, epoch),
            AttachmentMsg::Drain { reason, cancel } => state.on_drain(&myself, reason, cancel),
            AttachmentMsg::DrainDeadline => state.cancel_active(),
            #[cfg(feature = "test-hooks")]
            AttachmentMsg::Panic => panic!("attachment panic requested by a test"),
        }
        Ok(())
    }
}

// === impl AttachmentState ===

impl AttachmentState {
    /// A retry timer fired: only the newest starts an attempt, and none once draining.
    fn on_connect(&mut self, myself: &ActorRef<AttachmentMsg>, retry: u64) {
        if retry == self.retry && self.draining.is_none() {
            self.start_attempt(myself);
        }
    }

    /// The attempt under way entered `phase`: a server still connecting shows it.
    fn on_phase(&mut self, retry: u64, phase: ConnectPhase) {
        // An interactive candidate publishes nothing until it is ready: its first attempt
        // is the action's, answered with its outcome.
        let candidate = self.first_attempt && self.args.origin == Origin::Candidate;
        if retry != self.retry || candidate || !matches!(self.lifecycle, Lifecycle::Connecting) {
            return;
        }
        // A phase under the same deadline as the one before goes on counting from its start.
        let since = match self.attempt {
            Some(attempt)
                if phase != ConnectPhase::Starting
                    && attempt.phase.bound_by() == phase.bound_by() =>
            {
                attempt.since()
            }
            _ => std::time::SystemTime::now(),
        };
        let bound = match phase {
            ConnectPhase::Listing => self.args.settings.request_timeout,
            _ => self.args.settings.connect.connect_timeout,
        };
        self.attempt = Some(Connecting::new(phase, since, bound));
        self.publish();
    }

    /// The lost connection was examined: its exit and stderr become the problem shown, if
    /// that connection is still the latest and nothing newer replaced what it left.
    fn on_lost_detail(&mut self, generation: u64, detail: &str) {
        if generation != self.generation {
            return;
        }
        let detail = format!(
            "server \"{}\" ({}) lost its connection: {detail}",
            self.args.alias,
            self.kind()
        );
        match &mut self.lifecycle {
            Lifecycle::Unavailable(problem) => problem.detail = detail,
            Lifecycle::CrashLoop(problem) => {
                problem.detail = format!("{}; last failure: {detail}", problem.detail);
            }
            Lifecycle::Connecting | Lifecycle::Ready(_) | Lifecycle::AuthorizationRequired(_) => {
                return;
            }
        }
        self.close_gate();
        self.publish();
    }

    /// An explicit reconnect: a ready server answers at once, a connecting one when its
    /// attempt settles, a failed one after a fresh attempt with its crash history cleared.
    fn on_reconnect(&mut self, myself: &ActorRef<AttachmentMsg>, reply: ActionReply) {
        if let Some(draining) = &self.draining {
            let _ = reply.send(Err(Problem::conflict(format!(
                "server \"{}\" is closing ({}); enable it again once it is disabled",
                self.args.alias, draining.reason
            ))));
            return;
        }
        match self.lifecycle {
            // Already connected with the same definition: a no-op.
            Lifecycle::Ready(_) => {
                let _ = reply.send(Ok(self.snapshot()));
            }
            // The first attempt is under way; answer when it settles.
            Lifecycle::Connecting => self.reconnects.push(reply),
            Lifecycle::Unavailable(_)
            | Lifecycle::CrashLoop(_)
            | Lifecycle::AuthorizationRequired(_) => {
                self.reconnects.push(reply);
                self.args.crashes.clear();
                self.delays = Box::new(self.args.settings.restart.delays());
                self.start_attempt(myself);
            }
        }
    }

    /// The session's calls settled while it was held or draining: what waited for that goes.
    fn on_quiet(&mut self, myself: &ActorRef<AttachmentMsg>) {
        self.commit_refresh_if_quiet(myself);
        self.finish_drain_if_quiet(myself);
    }

    /// Stops taking calls and settles the active ones (cancelled, or given the drain
    /// timeout), then closes; a second drain changes nothing.
    fn on_drain(&mut self, myself: &ActorRef<AttachmentMsg>, reason: String, cancel: bool) {
        if self.draining.is_some() {
            return;
        }
        // Attempts and timers in flight see `draining` and stand down.
        // New calls are refused from here on; the active ones finish.
        self.args.session.drain(&reason);
        self.draining = Some(Draining { reason });
        if cancel {
            self.cancel_active();
        } else {
            myself.send_after(self.args.settings.drain_timeout, || {
                AttachmentMsg::DrainDeadline
            });
        }
        self.finish_drain_if_quiet(myself);
    }

    fn kind(&self) -> TransportKind {
        self.args.definition.transport().kind()
    }

    fn snapshot(&self) -> ServerSnapshot {
        let (state, problem) = match &self.lifecycle {
            Lifecycle::Connecting => (ServerState::Connecting, None),
            Lifecycle::Ready(_) => (ServerState::Ready, None),
            Lifecycle::Unavailable(problem) => (ServerState::Unavailable, Some(problem.clone())),
            Lifecycle::CrashLoop(problem) => (ServerState::CrashLoop, Some(problem.clone())),
            Lifecycle::AuthorizationRequired(problem) => {
                (ServerState::AuthorizationRequired, Some(problem.clone()))
            }
        };
        let authorization = matches!(self.lifecycle, Lifecycle::AuthorizationRequired(_))
            .then(|| {
                self.args
                    .settings
                    .connect
                    .oauth
                    .pending(&self.args.workspace_name, &self.args.alias)
            })
            .flatten();
        // Only a ready server publishes anything: all of it, or nothing.
        let (negotiated, tools, catalog, sandbox) = match &self.lifecycle {
            Lifecycle::Ready(live) => (
                Some(live.negotiated.clone()),
                live.tools.clone(),
                live.catalog.clone(),
                live.connection.sandbox(),
            ),
            _ => (None, Arc::from([]), Catalog::default(), None),
        };
        let connecting = match self.lifecycle {
            Lifecycle::Connecting => self.attempt,
            _ => None,
        };
        let phases = match &self.lifecycle {
            Lifecycle::Ready(live) => Some(live.phases),
            _ => None,
        };
        ServerSnapshot {
            alias: self.args.alias.clone(),
            transport: self.kind(),
            state,
            problem,
            connecting,
            phases,
            recovered: self.recovered.clone(),
            negotiated,
            tools,
            catalog,
            generation: self.generation,
            authored: self.authored.clone(),
            authorization,
            sandbox,
        }
    }

    fn publish(&self) {
        self.publish_answering(Vec::new());
    }

    /// Publishes the current state; `answers` go out only once the workspace has committed
    /// it, so whoever is answered already sees it in the snapshot.
    fn publish_answering(&self, answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>) {
        let _ = self.args.workspace.cast(WorkspaceMsg::Publish {
            alias: self.args.alias.clone(),
            instance: self.args.instance,
            server: self.snapshot(),
            answers,
        });
    }

    fn start_attempt(&mut self, myself: &ActorRef<AttachmentMsg>) {
        self.retry += 1;
        let retry = self.retry;
        // The hydration's handle goes with the attempt: the hydration ends when the last of
        // its attempts settles.
        let hydration = self.args.hydration.take();
        let span = crate::telemetry::attempt(
            &self.args.alias,
            self.args.definition.transport().kind(),
            hydration.as_ref(),
            retry > 1,
        );
        let alias = self.args.alias.clone();
        let definition = self.args.definition.clone();
        let settings = self.args.settings.clone();
        let env = self.args.env.clone();
        let workspace_name = self.args.workspace_name.clone();
        let challenge = self.challenge.take();
        let myself = myself.clone();
        // Resource updates go straight out as host events, in arrival order.
        let (events, workspace, updated) = (
            self.args.events.clone(),
            self.args.workspace_name.clone(),
            alias.clone(),
        );
        let on_update: OnUpdate = Arc::new(move |uri: &str| {
            // A URI is the server's text: scrubbed and bounded like any.
            let uri = crate::redact::scrub_capped(uri, crate::redact::SHOWN_CHARS);
            let _ = events.send(HostEvent::ResourceUpdated {
                workspace: workspace.clone(),
                alias: updated.clone(),
                uri,
            });
        });
        let phases = myself.clone();
        let on_phase: protocol::OnPhase = Arc::new(move |phase| {
            let _ = phases.cast(AttachmentMsg::Phase { retry, phase });
        });
        tokio::spawn(async move {
            // Waiting for a place is not part of the attempt: its timeout starts after.
            let Ok(place) = settings.attempts.clone().acquire_owned().await else {
                return;
            };
            on_phase(ConnectPhase::Starting);
            let opening = Opening {
                workspace: &workspace_name,
                alias: &alias,
                kind: definition.transport().kind(),
                definition: &definition,
                env: &env,
                in_process: settings.in_process.get(&alias).cloned(),
                connect: &settings.connect,
                request_timeout: settings.request_timeout,
                on_update: Some(on_update),
                challenge,
                on_phase: Some(on_phase),
            };
            let result = crate::telemetry::attempting(&span, protocol::open(opening))
                .await
                .map(|opened| Box::new(Live::from(*opened)));
            let failed = result.as_ref().err().map(|refused| match refused {
                Refused::Unavailable(problem) | Refused::AuthorizationRequired { problem, .. } => {
                    problem.kind.as_str()
                }
            });
            crate::telemetry::attempt_settled(&span, failed);
            drop((span, hydration));
            drop(place);
            // The last attempt of a burst (a hydration) settled: what the attempts freed goes
            // back to the system rather than staying in fragmented arenas.
            if settings.attempts.available_permits() == ATTEMPTS_AT_ONCE {
                crate::memory::give_back();
            }
            // If the actor is gone the message (and the connection in it) is dropped here,
            // which closes the connection: nothing leaks.
            let _ = myself.cast(AttachmentMsg::Connected { retry, result });
        });
    }

    fn schedule_retry(&mut self, myself: &ActorRef<AttachmentMsg>) {
        let now = Instant::now();
        let next = self.delays.next();
        let verdict = self
            .args
            .settings
            .restart
            .decide(&mut self.args.crashes, now, next);
        match verdict {
            Verdict::RetryAfter(delay) => {
                // The timer holds while no attempt starts before it fires: every start
                // (this timer's, or an enable's) moves `retry` on, which retires it.
                let retry = self.retry;
                myself.send_after(delay, move || AttachmentMsg::Connect { retry });
            }
            Verdict::GiveUp => {
                let policy = &self.args.settings.restart;
                let detail = format!(
                    "server \"{}\" crashed {} times within {} s and is left down: fix it, then enable it again",
                    self.args.alias,
                    policy.crash_limit,
                    policy.window.as_secs()
                );
                // Only a loss counts as a crash, so this follows one whose examination is
                // under way: its detail is added as the last failure when it arrives.
                self.lifecycle = Lifecycle::CrashLoop(Problem::crash_loop(detail));
                self.close_gate();
                self.publish();
            }
        }
    }

    fn on_connected(
        &mut self,
        myself: &ActorRef<AttachmentMsg>,
        retry: u64,
        result: Result<Box<Live>, Refused>,
    ) {
        if retry != self.retry || self.draining.is_some() {
            if let Ok(live) = result {
                live.connection
                    .close_in_background(self.args.settings.connect.close_grace);
            }
            return;
        }
        let first = std::mem::replace(&mut self.first_attempt, false);
        match result {
            Ok(mut live) => {
                // A connection after one this actor let go, or the first of an actor
                // restarted after a crash, is the server coming back.
                if self.generation > 0 || matches!(self.args.origin, Origin::Restarted(_)) {
                    metrics::counter!("plurnk_mcp_reconnects_total").increment(1);
                }
                self.generation += 1;
                let generation = self.generation;
                let retired = live.retired.clone();
                live.retire = Some(retired.clone().drop_guard());
                // One watcher per connection, for as long as the actor keeps it: its loss
                // and its list changes.
                let watch = Watch {
                    generation,
                    retired,
                    lost: live.connection.lost(),
                    changes: live.connection.changes(),
                    actor: myself.clone(),
                };
                tokio::spawn(watch.run());
                self.delays = Box::new(self.args.settings.restart.delays());
                self.warned = None;
                let before = std::mem::replace(&mut self.lifecycle, Lifecycle::Ready(live));
                if let Some(problem) = before.problem() {
                    self.recovered = Some(Arc::new(Recovered::now(problem.clone())));
                }
                self.open_gate();
                self.publish_and_answer_reconnects();
                self.schedule_expiry(myself);
            }
            Err(refused) if first && self.args.origin == Origin::Candidate => {
                // An interactive candidate that fails publishes nothing: the workspace
                // reports the Problem (and where to authorize, if that is why) and stops us.
                let (problem, pending) = match refused {
                    Refused::Unavailable(problem) => (problem, None),
                    Refused::AuthorizationRequired { problem, pending } => (problem, pending),
                };
                let _ = self.args.workspace.cast(WorkspaceMsg::CandidateFailed {
                    alias: self.args.alias.clone(),
                    instance: self.args.instance,
                    problem,
                    pending,
                });
                myself.stop(None);
            }
            Err(Refused::AuthorizationRequired { problem, .. }) => {
                // A person has to act: no retry until an enable or a completed
                // authorization.
                self.warn_failed(&problem);
                self.lifecycle = Lifecycle::AuthorizationRequired(problem);
                self.close_gate();
                self.publish_and_answer_reconnects();
            }
            Err(Refused::Unavailable(problem)) => {
                self.warn_failed(&problem);
                self.lifecycle = Lifecycle::Unavailable(problem);
                self.close_gate();
                self.publish_and_answer_reconnects();
                self.schedule_retry(myself);
            }
        }
    }

    /// Logs a failed attempt as a warning (target `plurnk_mcp::servers`), unless it failed
    /// the same way as the last one logged.
    fn warn_failed(&mut self, problem: &Problem) {
        if self.warned.as_deref() == Some(problem.detail.as_str()) {
            tracing::debug!(target: "plurnk_mcp::servers", server = %self.args.alias, "failed again the same way");
            return;
        }
        let detail = crate::redact::scrub_capped(&problem.detail, crate::redact::SHOWN_CHARS);
        tracing::warn!(target: "plurnk_mcp::servers", server = %self.args.alias, "{detail}");
        self.warned = Some(problem.detail.clone());
    }

    fn on_lost(&mut self, myself: &ActorRef<AttachmentMsg>, generation: u64) {
        // Only a ready connection can be lost, and a loss is only ever the current
        // connection's: one the actor lets go is retired first (its watchers stop with its
        // `Live`), and a loss sent before that is handled before any newer connection can be
        // ready, since both go through this one mailbox in order.
        if !matches!(self.lifecycle, Lifecycle::Ready(_)) {
            return;
        }
        debug_assert_eq!(
            generation, self.generation,
            "a retired connection reported its loss"
        );
        let problem = Problem::server_unavailable(format!(
            "server \"{}\" ({}) lost its connection; reconnecting",
            self.args.alias,
            self.kind()
        ));
        let Lifecycle::Ready(live) =
            std::mem::replace(&mut self.lifecycle, Lifecycle::Unavailable(problem))
        else {
            return;
        };
        metrics::counter!("plurnk_mcp_restarts_total").increment(1);
        tracing::warn!(server = %self.args.alias, "connection lost; reconnecting with backoff");
        // Lost to a refused token (a revoked one, or one without the scope a call needs):
        // the reconnect authorizes again from the server's challenge.
        self.challenge = live.connection.take_challenge();
        self.forget_refresh();
        // In-flight calls fail by themselves: their `CallPeer` watches the same token.
        let myself_for_detail = myself.clone();
        let grace = self.args.settings.connect.close_grace;
        tokio::spawn(async move {
            let detail = live.connection.loss_detail().await;
            let _ = live.connection.close(grace).await;
            let _ = myself_for_detail.cast(AttachmentMsg::LostDetail { generation, detail });
        });
        self.args.crashes.push_back(Instant::now());
        self.publish();
        if self.draining.is_none() {
            self.schedule_retry(myself);
        } else {
            self.finish_drain_if_quiet(myself);
        }
    }

    /// Opens the session's gate on the ready connection (its current catalog).
    fn open_gate(&self) {
        if let Lifecycle::Ready(live) = &self.lifecycle {
            self.args.session.open(Ready::new(
                live.peer.clone(),
                live.tools.clone(),
                live.catalog.prompts.clone(),
                &live.negotiated.capabilities,
            ));
        }
    }

    /// Closes the session's gate as the lifecycle says (calls are refused as not ready).
    fn close_gate(&self) {
        let (state, detail) = match &self.lifecycle {
            Lifecycle::Ready(_) => return,
            Lifecycle::Connecting => (ServerState::Connecting, "it is still connecting".to_owned()),
            Lifecycle::Unavailable(problem) => (ServerState::Unavailable, problem.detail.clone()),
            Lifecycle::CrashLoop(problem) => (ServerState::CrashLoop, problem.detail.clone()),
            Lifecycle::AuthorizationRequired(problem) => {
                (ServerState::AuthorizationRequired, problem.detail.clone())
            }
        };
        self.args.session.down(state, detail);
    }

    /// Publishes the settled attempt and answers the explicit reconnects that waited for it,
    /// after the workspace committed it.
    fn publish_and_answer_reconnects(&mut self) {
        let snapshot = self.snapshot();
        let answers = self
            .reconnects
            .drain(..)
            .map(|reply| {
                // Only an attempt that failed leaves a Problem (a ready server has none); one
                // waiting for authorization answers with where to authorize it (the 202).
                let answer = match &snapshot.problem {
                    Some(_) if snapshot.authorization.is_some() => Ok(snapshot.clone()),
                    Some(problem) => Err(problem.clone()),
                    None => Ok(snapshot.clone()),
                };
                (reply, answer)
            })
            .collect();
        self.publish_answering(answers);
    }

    fn cancel_active(&self) {
        self.args.session.cancel_active();
    }

    fn finish_drain_if_quiet(&mut self, myself: &ActorRef<AttachmentMsg>) {
        if self.draining.is_none() || self.args.session.active() != 0 {
            return;
        }
        for reply in self.reconnects.drain(..) {
            let _ = reply.send(Err(Problem::conflict(format!(
                "server \"{}\" was disabled before it reconnected",
                self.args.alias
            ))));
        }
        let connection = match std::mem::replace(&mut self.lifecycle, Lifecycle::Connecting) {
            Lifecycle::Ready(live) => Some(live.connection),
            _ => None,
        };
        let workspace = self.args.workspace.clone();
        let alias = self.args.alias.clone();
        let instance = self.args.instance;
        let grace = self.args.settings.connect.close_grace;
        let myself = myself.clone();
        tokio::spawn(async move {
            let result = match connection {
                Some(connection) => connection.close(grace).await,
                None => Ok(()),
            };
            let _ = workspace.cast(WorkspaceMsg::Detached {
                alias,
                instance,
                result,
            });
            myself.stop(None);
        });
    }
}

/// What a ready connection tells its actor, watched by one task until the actor lets the
/// connection go (`retired`) or the connection is lost.
struct Watch {
    generation: u64,
    retired: CancellationToken,
    lost: CancellationToken,
    changes: Arc<tokio::sync::Notify>,
    actor: ActorRef<AttachmentMsg>,
}

impl Watch {
    async fn run(self) {
        loop {
            tokio::select! {
                // Retirement first: once the actor has let the connection go, its loss and
                // its changes are no news, even when they happened together.
                biased;
                () = self.retired.cancelled() => return,
                () = self.lost.cancelled() => {
                    let _ = self.actor.cast(AttachmentMsg::Lost {
                        generation: self.generation,
                    });
                    return;
                }
                () = self.changes.notified() => {
                    if self.actor.cast(AttachmentMsg::ListChanged).is_err() {
                        return;
                    }
                }
            }
        }
    }
}
