//! What a daemon tunes: the host's options ([`HostOptions`], made from its `Default` and its
//! `with_*` setters), one call's ([`CallOptions`]), and what shutdown reports.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Workspace;
use crate::actors::restart::{RestartPolicy, WorkspaceRestart};
use crate::model::{
    CloseFailure, InProcessConnector, InputRelay, InteractionHandler, Limits, ProgressSink,
};
use crate::sandbox::SandboxOptions;
use crate::store::Store;

/// Options of one call.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// The deadline; the host's `PLURNK_MCP_REQUEST_TIMEOUT` when `None`.
    pub timeout: Option<Duration>,
    /// With `Some(max)`, every progress report restarts the deadline, and `max` bounds the
    /// whole request.
    pub reset_timeout_on_progress: Option<Duration>,
    /// Cancel the call (on the wire, too) by cancelling this token. Dropping the call's
    /// future cancels it as well.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress reports for this call.
    pub progress: Option<ProgressSink>,
    /// Answers the server's input requests (elicitation) for this call; the host's
    /// [`HostOptions::interaction`] when `None`, and a decline when neither is set.
    pub interaction: Option<InteractionHandler>,
    /// Relays `input_required` rounds to the caller instead of answering them: the request
    /// carries these answers and state, and an `input_required` answer settles the call as
    /// a [`ToolResult`] holding that answer ([`ToolResult::is_input_required`]). For a
    /// caller whose own client answers, such as the gateway.
    ///
    /// [`ToolResult`]: crate::ToolResult
    /// [`ToolResult::is_input_required`]: crate::ToolResult::is_input_required
    pub relay: Option<InputRelay>,
    /// The client capabilities sent to a 2026-07-28 server in this request's `_meta` in
    /// place of the host's own, so it asks only for input the caller's own client can give
    /// (the gateway forwards its client's).
    pub client_capabilities: Option<serde_json::Map<String, Value>>,
    /// The trace context the call's span is a child of (feature `otel`), in place of the
    /// `tracing` span current where the call is made; the server is sent the call's own
    /// (or, when the host exports no spans, this one as it is).
    #[cfg(feature = "otel")]
    pub parent: Option<opentelemetry::Context>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("timeout", &self.timeout)
            .field("reset_timeout_on_progress", &self.reset_timeout_on_progress)
            .field("cancel", &self.cancel.is_some())
            .field("progress", &self.progress.is_some())
            .field("interaction", &self.interaction.is_some())
            .field("relay", &self.relay.is_some())
            .field("client_capabilities", &self.client_capabilities.is_some())
            .finish_non_exhaustive()
    }
}

/// What shutdown did: every connection that did not close cleanly.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[must_use = "a shutdown report lists every connection that did not close cleanly"]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Each close failure; empty when everything closed.
    pub failures: Vec<CloseFailure>,
}

/// Host-wide tuning that does not come from the environment.
#[derive(Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// Servers inside this process, by alias: each joins the default workspace enabled, with
    /// transport `in-process`, beside the configured ones (an alias the configuration also
    /// declares is a start error), and connects like stdio over the connector's streams — no
    /// child process; closing is stream EOF.
    pub in_process: BTreeMap<String, InProcessConnector>,
    /// Where workspaces keep what they add and enable; `None` keeps nothing.
    pub store: Option<Arc<dyn Store>>,
    /// Answers input requests (elicitation) of calls that bring no handler of their own;
    /// `None` declines them.
    pub interaction: Option<InteractionHandler>,
    /// Whether the host tells servers it can answer their questions (the `elicitation` client
    /// capability). On by default: a call's or the host's [`interaction`](Self::interaction)
    /// answers, and the gateway relays to its own client. A host nobody answers for (the
    /// command line's) turns it off, so servers offer nothing that could only be declined.
    pub elicitation: bool,
    /// Connect only these servers: every other enabled server of every workspace is `idle`
    /// (enabled, not connected, publishing nothing) until it is enabled again. `None` (the
    /// default) connects every enabled server. The command line's one-shot commands connect
    /// only the server they name.
    pub only: Option<BTreeSet<String>>,
    /// Backoff and crash-loop policy for reconnects.
    pub restart: RestartPolicy,
    /// How long a closing stdio server may take to exit after stdin EOF before `SIGKILL`.
    pub close_grace: Duration,
    /// How long a disable waits for in-flight calls before cancelling them; the request
    /// timeout when `None`.
    pub drain_timeout: Option<Duration>,
    /// What a server may make the host hold and do (catalog size, floods, calls in flight).
    pub limits: Limits,
    /// The actor the host's root (its supervisor) is linked under: it receives the root's
    /// `SupervisionEvent`s (`ActorTerminated` when the host shuts down, `ActorFailed` if the
    /// root itself fails). `None` (the default, and the command line's) starts it unlinked.
    /// A parent that keeps ractor's default `handle_supervisor_evt` stops when the host
    /// does.
    pub parent: Option<ractor::ActorCell>,
    /// How often a failed workspace actor is restarted before it is left failed.
    pub workspace_restart: WorkspaceRestart,
    /// Called with each workspace the host opens, before it waits for that workspace to
    /// hydrate: [`Host::start`] (and [`Host::workspace`] for a workspace it opens afresh)
    /// returns only once hydration is over, so a caller that shows its progress (the
    /// command line's progress line) follows [`Workspace::watch`] from here.
    ///
    /// [`Host::start`]: crate::Host::start
    /// [`Host::workspace`]: crate::Host::workspace
    pub on_open: Option<OnOpen>,
    /// How the processes the host starts are sandboxed beyond the configuration: the
    /// host-wide policy (over `PLURNK_MCP_SANDBOX`) and the paths none may reach. Without the
    /// `sandbox` feature no process is sandboxed.
    pub sandbox: SandboxOptions,
}

setters!(HostOptions {
    with_in_process => in_process: BTreeMap<String, InProcessConnector>,
    with_store => store: Option<Arc<dyn Store>>,
    with_interaction => interaction: Option<InteractionHandler>,
    with_elicitation => elicitation: bool,
    with_only => only: Option<BTreeSet<String>>,
    with_restart => restart: RestartPolicy,
    with_close_grace => close_grace: Duration,
    with_drain_timeout => drain_timeout: Option<Duration>,
    with_limits => limits: Limits,
    with_parent => parent: Option<ractor::ActorCell>,
    with_workspace_restart => workspace_restart: WorkspaceRestart,
    with_on_open => on_open: Option<OnOpen>,
    with_sandbox => sandbox: SandboxOptions,
});

setters!(CallOptions {
    with_timeout => timeout: Option<Duration>,
    with_reset_timeout_on_progress => reset_timeout_on_progress: Option<Duration>,
    with_cancel => cancel: Option<CancellationToken>,
    with_progress => progress: Option<ProgressSink>,
    with_interaction => interaction: Option<InteractionHandler>,
    with_relay => relay: Option<InputRelay>,
    with_client_capabilities => client_capabilities: Option<serde_json::Map<String, Value>>,
});

#[cfg(feature = "otel")]
impl CallOptions {
    /// Sets [`parent`](Self::parent).
    #[must_use]
    pub fn with_parent(mut self, parent: Option<opentelemetry::Context>) -> Self {
        self.parent = parent;
        self
    }
}

/// What [`HostOptions::on_open`] calls.
pub type OnOpen = Arc<dyn Fn(&Workspace) + Send + Sync>;

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("in_process", &self.in_process.len())
            .field("store", &self.store.is_some())
            .field("interaction", &self.interaction.is_some())
            .field("elicitation", &self.elicitation)
            .field("only", &self.only)
            .field("restart", &self.restart)
            .field("close_grace", &self.close_grace)
            .field("drain_timeout", &self.drain_timeout)
            .field("limits", &self.limits)
            .field(
                "parent",
                &self.parent.as_ref().map(ractor::ActorCell::get_id),
            )
            .field("workspace_restart", &self.workspace_restart)
            .field("on_open", &self.on_open.is_some())
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            in_process: BTreeMap::new(),
            store: None,
            interaction: None,
            elicitation: true,
            only: None,
            restart: RestartPolicy::default(),
            close_grace: Duration::from_secs(2),
            drain_timeout: None,
            limits: Limits::default(),
            parent: None,
            workspace_restart: WorkspaceRestart::default(),
            on_open: None,
            sandbox: SandboxOptions::default(),
        }
    }
}
