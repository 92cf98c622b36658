//! The embedding API: a cheap-to-clone [`Host`] handle over the actor tree.
//!
//! Everything the handle does is a message to an actor, except reading a snapshot, which is
//! a lock-free clone of an `Arc` the workspace actor published.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::actors::attachment::{Admission, Settings};
use crate::actors::messages::WorkspaceMsg;
use crate::actors::seed::{Opening, Seeder};
use crate::actors::supervisor::Given;
use crate::actors::supervisor::{HostSupervisor, Life, Opened, SupervisorArgs, SupervisorMsg};
use crate::actors::workspace::{Published, Route};
use crate::config::{HostConfig, ServerDefinition};
use crate::model::{
    CallError, CompletionRef, InteractionHandler, Operation, Problem, Refusal, ServerSnapshot,
    ServerState, ToolResult, WorkspaceSnapshot,
};
use crate::protocol::{self, CallContext, ConnectOptions};
use crate::store::Store;

pub use crate::actors::supervisor::{ActionAnswer, HostMsg, SnapshotWatch};
pub use crate::model::{CloseFailure, Customize, HostEvent, InputRelay, ServerSummary};

pub use crate::actors::seed::DEFAULT_WORKSPACE;
#[cfg(feature = "oauth")]
pub use authorization::Accepted;

#[cfg(feature = "oauth")]
mod authorization;
mod options;

pub use options::{CallOptions, HostOptions, OnOpen, ShutdownReport};

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The actor system could not start.
    #[error("the host could not start its actors: {0}")]
    Actors(String),
    /// The durable state could not be read or holds definitions that cannot be admitted.
    #[error("the workspace state cannot be used: {0}")]
    State(String),
    /// Tool-source declarations of the service configuration (`PLURNK_MCP_SOURCES`) that
    /// their readers refuse: every fault, each naming the file, the field and the fix.
    #[error("the tool-source declarations cannot be used: {0}")]
    Sources(crate::config::ConfigErrors),
}

/// What every workspace of a host is opened with, shared by every clone of the handle.
struct HostInner {
    /// The root actor: every workspace is opened, and every action goes, through it.
    supervisor: ActorRef<HostMsg>,
    settings: Arc<Settings>,
    closed: Arc<AtomicBool>,
    interaction: Option<InteractionHandler>,
    events: broadcast::Sender<HostEvent>,
    config: Arc<HostConfig>,
    /// The durable state's store, asked whether it can be reached (readiness).
    store: Option<Arc<dyn Store>>,
    on_open: Option<OnOpen>,
}

/// The handle a daemon embeds. Cheap to clone; every clone talks to the same actors.
#[derive(Clone)]
pub struct Host {
    inner: Arc<HostInner>,
    /// The default workspace, kept apart so reaching it needs no message.
    default: Arc<Workspace>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("default", &self.default.name)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Starts the host and hydrates the default workspace from `config`: every enabled server
    /// connects in parallel, each bounded by the connect timeout. Returns once every enabled
    /// server is ready or unavailable; one that cannot connect never delays the others
    /// beyond its own timeout, and never fails the start.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use plurnk_mcp::{Host, HostConfig};
    /// // PLURNK_MCP_GITHUB=https://…/mcp, PLURNK_MCP_FILES=/usr/bin/files-server, …
    /// let host = Host::start(HostConfig::from_env(std::env::vars())?).await?;
    /// for server in host.default_workspace().snapshot().servers.values() {
    ///     println!("{} is {}", server.alias, server.state);
    /// }
    /// let report = host.shutdown().await;
    /// assert!(report.failures.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn start(config: HostConfig) -> Result<Host, StartError> {
        Self::start_with(config, HostOptions::default()).await
    }

    /// [`Host::start`] with explicit [`HostOptions`].
    pub async fn start_with(config: HostConfig, options: HostOptions) -> Result<Host, StartError> {
        #[cfg(feature = "sources")]
        crate::sources::admit(config.servers().values()).map_err(StartError::Sources)?;
        // A declared server's credentials are secrets from the start, enabled or not: a value
        // that reaches a child some other way (an allow-listed variable) is scrubbed all the
        // same. `from_env` checked every reference, so each one prepares.
        for definition in config.servers().values() {
            if let Ok(prepared) = definition.prepare(config.env()) {
                crate::redact::register(&prepared.secrets);
            }
        }
        let settings = settings(&config, &options);
        let config = Arc::new(config);
        let seeder = Seeder::new(
            config.clone(),
            options.store.clone(),
            options.in_process.keys(),
        )
        .map_err(|error| StartError::State(error.to_string()))?;
        let workspaces = seeder
            .at_start()
            .await
            .map_err(|error| StartError::State(error.one_a_line()))?;
        let args = SupervisorArgs {
            settings: settings.clone(),
            store: options.store.clone(),
            events: broadcast::channel(1024).0,
            reseed: seeder.reseed(),
            restart: options.workspace_restart,
        };
        let events = args.events.clone();
        let spawned = match options.parent.clone() {
            Some(parent) => Actor::spawn_linked(None, HostSupervisor, args, parent).await,
            None => Actor::spawn(None, HostSupervisor, args).await,
        };
        let (supervisor, _) = spawned.map_err(|error| StartError::Actors(error.to_string()))?;
        if let Some(announcements) = options
            .store
            .as_ref()
            .and_then(|store| store.announcements())
        {
            follow(announcements, supervisor.clone());
        }
        let inner = Arc::new(HostInner {
            supervisor,
            settings,
            closed: Arc::new(AtomicBool::new(false)),
            interaction: options.interaction.clone(),
            events,
            config,
            store: options.store.clone(),
            on_open: options.on_open.clone(),
        });
        let opened = match inner.open_at_start(workspaces).await {
            Ok(opened) => opened,
            Err(error) => {
                inner.supervisor.stop(None);
                return Err(error);
            }
        };
        let Some(default) = opened.get(DEFAULT_WORKSPACE).cloned() else {
            inner.supervisor.stop(None);
            return Err(StartError::Actors(
                "the default workspace did not open".into(),
            ));
        };
        let host = Host {
            inner,
            default: Arc::new(default),
        };
        if let Some(on_open) = &host.inner.on_open {
            opened.values().for_each(|workspace| on_open(workspace));
        }
        // Workspaces hydrate in parallel, each bounded on its own.
        let bound = host.hydration_bound();
        futures::future::join_all(
            opened
                .values()
                .map(|workspace| workspace.wait_settled(bound)),
        )
        .await;
        Ok(host)
    }

    /// How long hydration may take: each attachment bounds its first attempt's start and
    /// negotiation by the connect timeout and its listing by the request timeout; the margin
    /// covers reporting and committing. Waiting never fails: a server still connecting then
    /// is shown as connecting.
    fn hydration_bound(&self) -> Duration {
        self.inner.config.connect_timeout()
            + self.inner.config.request_timeout()
            + Duration::from_secs(2)
    }

    /// The default workspace.
    pub fn default_workspace(&self) -> Workspace {
        Workspace::clone(&self.default)
    }

    /// The workspace `name`, opened (and hydrated from the service configuration) on first
    /// use. Workspaces are independent: each has its own actor, enabled set and attachments,
    /// so a slow server in one never delays another.
    pub async fn workspace(&self, name: &str) -> Result<Workspace, Problem> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        if !crate::config::valid_workspace_name(name) {
            return Err(Problem::invalid_definition(format!(
                "workspace name {:?} is not valid: use 1 to 128 characters of letters, digits, '.', '_' and '-'",
                crate::config::shorten(name)
            )));
        }
        // The supervisor opens it once, from the store and the service configuration; a
        // workspace that failed for good is started again by this explicit ask.
        let (workspace, fresh) = self.inner.open(name, None).await?;
        if fresh {
            if let Some(on_open) = &self.inner.on_open {
                on_open(&workspace);
            }
            workspace.wait_settled(self.hydration_bound()).await;
        }
        Ok(workspace)
    }

    /// The names of the open workspaces.
    pub async fn workspace_names(&self) -> Vec<String> {
        match self
            .inner
            .supervisor
            .call(|reply| SupervisorMsg::Names { reply }.into(), None)
            .await
        {
            Ok(ractor::rpc::CallResult::Success(names)) => names,
            _ => Vec::new(),
        }
    }

    /// The host's root actor: link supervision to it, compare its id in a
    /// `SupervisionEvent`, or send it [`HostMsg`] from a daemon actor's own `handle`.
    pub fn actor(&self) -> ActorRef<HostMsg> {
        self.inner.supervisor.clone()
    }

    /// Test hook: makes the host's root actor panic, to exercise the parent's supervision.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn crash_root_for_test(&self) -> bool {
        self.inner
            .supervisor
            .send_message(SupervisorMsg::Panic.into())
            .is_ok()
    }

    /// Subscribes to state changes and snapshot commits.
    pub fn events(&self) -> broadcast::Receiver<HostEvent> {
        self.inner.events.subscribe()
    }

    /// Delivers every host event to `actor` as the message `map` makes of it (`None` skips
    /// the event), in order, until the actor stops or the host has shut down. An actor that
    /// falls behind by more than the event buffer is sent [`HostEvent::EventsMissed`]
    /// (mapped like any other) instead of the events it missed.
    pub fn events_to<M>(
        &self,
        actor: ActorRef<M>,
        map: impl Fn(HostEvent) -> Option<M> + Send + 'static,
    ) where
        M: ractor::Message,
    {
        let mut events = self.inner.events.subscribe();
        tokio::spawn(async move {
            let cell = actor.get_cell();
            loop {
                let event = tokio::select! {
                    event = events.recv() => event,
                    _ = cell.wait(None) => return,
                };
                let event = match event {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(count)) => {
                        HostEvent::EventsMissed { count }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if let Some(message) = map(event)
                    && actor.send_message(message).is_err()
                {
                    return;
                }
            }
        });
    }

    /// Shuts down in order: refuse new work, cancel and settle every in-flight call, close
    /// every connection (stdio: stdin EOF, bounded wait, `SIGKILL` to the process group),
    /// and report every close failure. Calling it again returns an empty report.
    pub async fn shutdown(&self) -> ShutdownReport {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return ShutdownReport::default();
        }
        let result = self
            .inner
            .supervisor
            .call(|reply| SupervisorMsg::Shutdown { reply }.into(), None)
            .await;
        let failures = match result {
            Ok(ractor::rpc::CallResult::Success(mut failures)) => {
                for failure in &mut failures {
                    crate::redact::scrub_in_place(&mut failure.detail);
                }
                failures
            }
            _ => vec![CloseFailure {
                workspace: String::new(),
                alias: String::new(),
                detail: "the supervisor stopped before it reported its shutdown".into(),
            }],
        };
        self.inner.supervisor.stop(None);
        // Last, whatever a server started that left its process group (a new session, a
        // double fork): the reaper finds it by the mark every server's descendants inherit.
        let mut failures = failures;
        if let Err(error) = self
            .inner
            .settings
            .connect
            .reaper
            .finish(Duration::from_secs(5))
            .await
        {
            failures.push(CloseFailure {
                workspace: String::new(),
                alias: String::new(),
                detail: error.to_string(),
            });
        }
        ShutdownReport { failures }
    }
}

impl HostInner {
    /// Opens every workspace of the start with its definitions, in order.
    async fn open_at_start(
        self: &Arc<Self>,
        workspaces: Vec<Opening>,
    ) -> Result<BTreeMap<String, Workspace>, StartError> {
        let mut opened = BTreeMap::new();
        for Opening {
            name,
            definitions,
            versions,
        } in workspaces
        {
            let given = Given {
                definitions,
                versions,
            };
            let (workspace, _) = self
                .open(&name, Some(given))
                .await
                .map_err(|problem| StartError::Actors(problem.detail))?;
            opened.insert(name, workspace);
        }
        Ok(opened)
    }

    /// Opens `name` through the supervisor (or finds it open) and returns its handle, and
    /// whether this open started it.
    async fn open(
        self: &Arc<Self>,
        name: &str,
        seeds: Option<Given>,
    ) -> Result<(Workspace, bool), Problem> {
        let result = self
            .supervisor
            .call(
                |reply| {
                    SupervisorMsg::Open {
                        name: name.to_owned(),
                        seeds,
                        reply,
                    }
                    .into()
                },
                None,
            )
            .await;
        let Opened {
            published,
            life,
            fresh,
        } = match result {
            Ok(ractor::rpc::CallResult::Success(answer)) => answer.map_err(Problem::scrubbed)?,
            _ => return Err(Problem::shutting_down()),
        };
        let workspace = Workspace {
            name: name.to_owned(),
            host: self.clone(),
            published,
            life,
        };
        Ok((workspace, fresh))
    }
}

/// Hands every announcement of a shared store to the supervisor, until the host is gone. An
/// announcement missed (the receiver lagged) is a reason to read everything again.
fn follow(
    mut announcements: broadcast::Receiver<crate::store::Announcement>,
    supervisor: ActorRef<HostMsg>,
) {
    use crate::store::Announcement;
    tokio::spawn(async move {
        loop {
            let announcement = match announcements.recv().await {
                Ok(announcement) => announcement,
                Err(broadcast::error::RecvError::Lagged(_)) => Announcement::Restored,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if supervisor
                .cast(SupervisorMsg::Announced(announcement).into())
                .is_err()
            {
                return;
            }
        }
    });
}

/// The actors' settings from the configuration and the embedder's options: the one place
/// a [`HostOptions`] field becomes what the actors read.
fn settings(config: &HostConfig, options: &HostOptions) -> Arc<Settings> {
    Arc::new(Settings {
        connect: ConnectOptions {
            connect_timeout: config.connect_timeout(),
            close_grace: options.close_grace,
            #[cfg(feature = "http")]
            http_client: Arc::default(),
            interaction: options.interaction.clone(),
            elicitation: options.elicitation,
            #[cfg(feature = "sources")]
            sources: Some(crate::sources::opener()),
            // Without the feature no definition can name a source: the configuration refuses
            // one, naming the feature.
            #[cfg(not(feature = "sources"))]
            sources: None,
            limits: options.limits,
            reaper: crate::protocol::Reaper::new(),
            inherited: Arc::new(crate::protocol::Inherited::new(config.inherited())),
            sandbox: Arc::new(crate::sandbox::Sandboxing::new(
                config.sandbox(),
                &options.sandbox,
            )),
            oauth: Arc::default(),
        },
        request_timeout: config.request_timeout(),
        drain_timeout: options.drain_timeout.unwrap_or(config.request_timeout()),
        restart: options.restart,
        env: Arc::new(config.env().clone()),
        admission: Admission {
            allow: config.allows_runtime_servers(),
            names: config.workspace_env().clone(),
            env: Arc::new(config.env().only(config.workspace_env())),
        },
        in_process: Arc::new(options.in_process.clone()),
        only: options.only.clone().map(Arc::new),
        expanded: Arc::new(config.expanded().clone()),
        attempts: Arc::new(tokio::sync::Semaphore::new(
            crate::actors::attachment::ATTEMPTS_AT_ONCE,
        )),
    })
}

/// One workspace: its snapshot, its calls and its management actions.
#[derive(Clone)]
pub struct Workspace {
    name: String,
    /// What every workspace of the host shares: the root actor every management action
    /// goes through (it knows the workspace's current actor across restarts), the
    /// settings, the closed flag, the interaction handler and the event stream.
    host: Arc<HostInner>,
    published: watch::Receiver<Arc<Published>>,
    life: watch::Receiver<Life>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// The workspace name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends `event` on the host's event stream; nobody listening is not a failure. The
    /// caller scrubs what it puts in the event.
    #[cfg(feature = "exec")]
    pub(crate) fn emit(&self, event: HostEvent) {
        let _ = self.host.events.send(event);
    }

    /// The host's event stream, for a part of the crate that follows this workspace's.
    #[cfg(feature = "gateway")]
    pub(crate) fn events(&self) -> broadcast::Receiver<HostEvent> {
        self.host.events.subscribe()
    }

    /// The current snapshot: every server, its state and its enabled tools with effects.
    pub fn snapshot(&self) -> Arc<WorkspaceSnapshot> {
        self.published.borrow().snapshot.clone()
    }

    /// Waits until no server is `connecting`, or `bound` passes; returns the snapshot then.
    pub async fn wait_settled(&self, bound: Duration) -> Arc<WorkspaceSnapshot> {
        self.wait_for(bound, |snapshot| {
            snapshot.is_settled() && snapshot.version > 0
        })
        .await
    }

    /// Waits until `predicate` holds for the snapshot, or `bound` passes; returns the latest.
    pub async fn wait_for(
        &self,
        bound: Duration,
        predicate: impl Fn(&WorkspaceSnapshot) -> bool,
    ) -> Arc<WorkspaceSnapshot> {
        let mut published = self.published.clone();
        let _ = tokio::time::timeout(
            bound,
            published.wait_for(|published| predicate(&published.snapshot)),
        )
        .await;
        self.snapshot()
    }

    /// Calls `tool` on `server` with `arguments` (a JSON object, or `null` for none).
    ///
    /// Routed only to enabled tools of the current snapshot. Settles with the result (a
    /// tool-level `isError` is a result) or a typed [`CallError`]; it never hangs past the
    /// deadline, and a dead connection fails it at once.
    ///
    /// ```no_run
    /// # async fn run(workspace: plurnk_mcp::Workspace) -> Result<(), plurnk_mcp::CallError> {
    /// use std::time::Duration;
    /// use plurnk_mcp::CallOptions;
    /// let options = CallOptions::default().with_timeout(Some(Duration::from_secs(30)));
    /// let result = workspace
    ///     .call_tool("github", "create_issue", serde_json::json!({"title": "hi"}), options)
    ///     .await?;
    /// if result.is_error {
    ///     eprintln!("the tool said no: {}", result.text());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<ToolResult, CallError> {
        let arguments = object(arguments, server, tool)?;
        let operation = Operation::CallTool {
            name: tool.to_owned(),
            arguments,
        };
        // `run`'s body, not a call to it: the most common call is one future layer less.
        let (route, context) = self.route(server, &operation, options).map_err(refused)?;
        settled(route.session.call(&operation, &context).await)
    }

    /// Reads a resource of `server` (`resources/read`); the result is the server's
    /// `{ contents: [...] }` object.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let operation = Operation::ReadResource {
            uri: uri.to_owned(),
        };
        Ok(self.run(server, operation, options).await?.result)
    }

    /// Gets a prompt of `server` with `arguments` (`prompts/get`); the result is the
    /// server's `{ description?, messages: [...] }` object.
    pub async fn get_prompt(
        &self,
        server: &str,
        prompt: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let arguments = object(arguments, server, prompt)?;
        let operation = Operation::GetPrompt {
            name: prompt.to_owned(),
            arguments,
        };
        Ok(self.run(server, operation, options).await?.result)
    }

    /// Asks `server` to complete `argument` of a prompt or resource template
    /// (`completion/complete`); returns the suggested values.
    pub async fn complete(
        &self,
        server: &str,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<Vec<String>, CallError> {
        let operation = Operation::Complete {
            reference,
            argument: argument.to_owned(),
            value: value.to_owned(),
            context,
        };
        let result = self.run(server, operation, CallOptions::default()).await?;
        Ok(result.result["completion"]["values"]
            .as_array()
            .map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Runs any [`Operation`] on `server` through its attachment.
    ///
    /// Whatever comes back is scrubbed of every registered secret (see [`crate::redact`]),
    /// errors and results alike.
    pub async fn run(
        &self,
        server: &str,
        operation: Operation,
        options: CallOptions,
    ) -> Result<ToolResult, CallError> {
        let (route, context) = self.route(server, &operation, options).map_err(refused)?;
        // Straight to the server's session, in this task: dropping this future cancels the
        // request on the wire.
        settled(route.session.call(&operation, &context).await)
    }

    /// Where `operation` on `server` runs, and with what deadline, cancellation, progress
    /// and interaction; or why it cannot run (scrubbed).
    fn route(
        &self,
        server: &str,
        operation: &Operation,
        options: CallOptions,
    ) -> Result<(Route, CallContext), CallError> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(CallError::ShuttingDown);
        }
        let route = {
            let published = self.published.borrow();
            if let Err(refusal) = published.snapshot.admit(server, operation.tool()) {
                return Err(refused_route(server, refusal).scrubbed());
            }
            published.routes.get(server).cloned()
        };
        let Some(route) = route else {
            return Err(CallError::Closing {
                alias: server.to_owned(),
                reason: "its attachment is gone".into(),
            });
        };
        let context = CallContext {
            timeout: options
                .timeout
                .unwrap_or(self.host.settings.request_timeout),
            reset_on_progress: options.reset_timeout_on_progress,
            cancel: options.cancel,
            progress: options.progress,
            interaction: options
                .interaction
                .or_else(|| self.host.interaction.clone()),
            relay: options.relay,
            client_capabilities: options.client_capabilities,
            #[cfg(feature = "otel")]
            parent: options.parent,
            #[cfg(not(feature = "otel"))]
            parent: None,
        };
        Ok((route, context))
    }

    async fn action(
        &self,
        message: impl FnOnce(ActionAnswer) -> HostMsg,
    ) -> Result<ServerSnapshot, Problem> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        // The answer comes scrubbed from the supervisor.
        match self.host.supervisor.call(message, None).await {
            Ok(ractor::rpc::CallResult::Success(answer)) => answer,
            _ => Err(self.root_gone()),
        }
    }

    /// Why an action found no host root to answer it.
    fn root_gone(&self) -> Problem {
        if self.host.closed.load(Ordering::Acquire) {
            Problem::shutting_down()
        } else {
            Problem::server_unavailable(
                "the host's root actor has stopped (it failed): start the host again",
            )
        }
    }

    /// Enables `alias`. A disabled server is prepared first and stays disabled if it cannot
    /// connect (the Problem says why); an enabled but unavailable one reconnects now; a
    /// ready one is left as it is. An OAuth server that needs a person's authorization
    /// answers `Ok` in state `authorization-required`: the action's `202`, [`Accepted::of`].
    pub async fn enable(&self, alias: &str) -> Result<ServerSnapshot, Problem> {
        self.enable_with(alias, Customize::default()).await
    }

    /// Enables `alias` with its definition resolved through the configuration cascade:
    /// the service environment, this workspace's durable specialization, the client's
    /// overlay entry, then explicit options — field by field, arrays and maps replaced.
    /// A definition that differs from the service one becomes this workspace's durable
    /// specialization once it connects; a failure changes nothing.
    pub async fn enable_with(
        &self,
        alias: &str,
        customize: Customize,
    ) -> Result<ServerSnapshot, Problem> {
        self.action(|reply| HostMsg::Enable {
            workspace: self.name.clone(),
            alias: alias.to_owned(),
            customize: Box::new(customize),
            reply,
        })
        .await
    }

    /// Disables `alias`: new calls are refused, in-flight calls settle (bounded), the
    /// connection closes, then the reduced snapshot commits. Disabled servers stay visible.
    pub async fn disable(&self, alias: &str) -> Result<ServerSnapshot, Problem> {
        self.action(|reply| HostMsg::Disable {
            workspace: self.name.clone(),
            alias: alias.to_owned(),
            reply,
        })
        .await
    }

    /// Adds a workspace-owned server and enables it; it is published only if it connects. An
    /// OAuth server that needs a person's authorization answers `Ok` in state
    /// `authorization-required` and is published once authorized: the action's `202`,
    /// [`Accepted::of`].
    pub async fn add(&self, definition: ServerDefinition) -> Result<ServerSnapshot, Problem> {
        self.action(|reply| HostMsg::Add {
            workspace: self.name.clone(),
            definition: Box::new(definition),
            reply,
        })
        .await
    }

    /// Removes a workspace-owned server (after draining it). Service servers refuse: disable
    /// them instead.
    pub async fn remove(&self, alias: &str) -> Result<ServerSnapshot, Problem> {
        self.action(|reply| HostMsg::Remove {
            workspace: self.name.clone(),
            alias: alias.to_owned(),
            reply,
        })
        .await
    }

    /// Every available server of this workspace — service, specialized and added, enabled or
    /// not — sorted by alias, with its state and what it publishes. No credential value.
    pub async fn list(&self) -> Result<Vec<ServerSummary>, Problem> {
        self.list_with(None).await
    }

    /// [`list`](Self::list), with a client's configuration overlay: servers only the overlay
    /// defines are shown too, disabled, with source `client` (neither connected nor kept).
    pub async fn list_with(
        &self,
        overlay: Option<&crate::config::Overlay>,
    ) -> Result<Vec<ServerSummary>, Problem> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        let client: Vec<ServerDefinition> = overlay
            .map(|overlay| overlay.definitions().values().cloned().collect())
            .unwrap_or_default();
        let message = |reply| HostMsg::List {
            workspace: self.name.clone(),
            client,
            reply,
        };
        // The summaries come scrubbed from the supervisor.
        match self.host.supervisor.call(message, None).await {
            Ok(ractor::rpc::CallResult::Success(answer)) => answer,
            _ => Err(self.root_gone()),
        }
    }

    /// Whether an actor serves this workspace now: `false` between a failure and its
    /// restart, once it failed for good, and after shutdown. The handle itself keeps
    /// working across restarts.
    pub fn is_running(&self) -> bool {
        self.current_actor().is_some()
    }

    /// Why this workspace is down for good, when it is: it failed more often than the
    /// host's [`HostOptions::workspace_restart`] allows, or could not be started again.
    /// [`Host::workspace`] with its name starts it again.
    pub fn failure(&self) -> Option<Problem> {
        match &*self.life.borrow() {
            Life::Failed(problem) => Some(problem.clone()),
            _ => None,
        }
    }

    /// Whether this workspace can serve a load balancer's traffic: its host is running, its
    /// actor too, its durable state was read and its servers hydrated (a first snapshot is
    /// committed), and its store can be reached. `Err` says what is missing (the store named
    /// without a password). Calls are served from the last snapshot either way.
    pub fn readiness(&self) -> Result<(), String> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err("the host is shutting down".into());
        }
        if let Some(problem) = self.failure() {
            return Err(problem.detail);
        }
        if !self.is_running() {
            return Err(format!("workspace \"{}\" is restarting", self.name));
        }
        if self.published.borrow().snapshot.version == 0 {
            return Err(format!("workspace \"{}\" is not hydrated yet", self.name));
        }
        match self
            .host
            .store
            .as_ref()
            .and_then(|store| store.unreachable())
        {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// The host's durable store, for what the gateway keeps beside workspace state (the
    /// sessions that ended).
    #[cfg(feature = "gateway")]
    pub(crate) fn store(&self) -> Option<Arc<dyn Store>> {
        self.host.store.clone()
    }

    /// Subscribes to this workspace's snapshots, across restarts of its actor.
    pub fn watch(&self) -> SnapshotWatch {
        SnapshotWatch::new(self.published.clone())
    }

    fn current_actor(&self) -> Option<ActorRef<WorkspaceMsg>> {
        match &*self.life.borrow() {
            Life::Running(actor)
                if !matches!(
                    actor.get_status(),
                    ractor::ActorStatus::Stopping | ractor::ActorStatus::Stopped
                ) =>
            {
                Some(actor.clone())
            }
            _ => None,
        }
    }

    /// Test hook: makes this workspace's actor panic, to exercise supervision.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn crash_for_test(&self) -> bool {
        self.current_actor()
            .is_some_and(|actor| actor.cast(WorkspaceMsg::Panic).is_ok())
    }

    /// Test hook: holds the workspace actor busy (its mailbox waits) until `release` is sent
    /// or dropped, as a long handler would; returns once it is held.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub async fn stall_for_test(&self, release: tokio::sync::oneshot::Receiver<()>) -> bool {
        let (held, is_held) = tokio::sync::oneshot::channel();
        let Some(actor) = self.current_actor() else {
            return false;
        };
        actor.cast(WorkspaceMsg::Stall { held, release }).is_ok() && is_held.await.is_ok()
    }

    /// Test hook: makes the server's attachment actor panic, to exercise supervision.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn crash_attachment_for_test(&self, alias: &str) -> bool {
        let route = self.published.borrow().routes.get(alias).cloned();
        route.is_some_and(|route| {
            route
                .actor
                .cast(crate::actors::attachment::AttachmentMsg::Panic)
                .is_ok()
        })
    }
}

/// What leaves the host of a settled call: scrubbed of every registered secret.
/// A call's answer as the caller gets it: counted, then scrubbed.
fn settled(result: Result<ToolResult, CallError>) -> Result<ToolResult, CallError> {
    protocol::count(result.as_ref());
    result
        .map(ToolResult::scrubbed)
        .map_err(CallError::scrubbed)
}

/// A call refused before it reached a server's session, counted like any answer.
fn refused(error: CallError) -> CallError {
    protocol::count(Err(&error));
    error
}

/// The handle's words for a refusal of the route rule.
fn refused_route(server: &str, refusal: Refusal<'_>) -> CallError {
    let not_ready = |state: ServerState, problem: Option<&Problem>| CallError::NotReady {
        alias: server.to_owned(),
        state,
        detail: problem
            .map(|problem| problem.detail.clone())
            .unwrap_or_else(|| state.unready_detail()),
    };
    match refusal {
        Refusal::UnknownServer => CallError::UnknownServer(server.to_owned()),
        Refusal::Disabled { problem } => not_ready(ServerState::Disabled, problem),
        Refusal::NotReady { state, problem } => not_ready(state, problem),
        Refusal::UnknownTool { tool, .. } => CallError::UnknownTool {
            alias: server.to_owned(),
            tool: tool.to_owned(),
        },
    }
}

fn object(
    value: Value,
    server: &str,
    what: &str,
) -> Result<serde_json::Map<String, Value>, CallError> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(serde_json::Map::new()),
        _ => Err(refused(CallError::InvalidArguments {
            alias: server.to_owned(),
            tool: what.to_owned(),
        })),
    }
}
