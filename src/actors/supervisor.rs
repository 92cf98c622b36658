//! The host supervisor: the root of the tree. It owns the workspace actors, restarts one that
//! fails (from the store and the service configuration, bounded by [`WorkspaceRestart`]),
//! forwards every management message to the workspace's current actor, and runs the
//! shutdown order. A daemon that is itself a ractor system links it under its own actor
//! (`HostOptions::parent`) and talks to it with [`HostMsg`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, SupervisionEvent};
use tokio::sync::{broadcast, watch};

use super::attachment::Settings;
use super::messages::WorkspaceMsg;
use super::restart::WorkspaceRestart;
use super::seed::{Reseed, Seed};
use super::workspace::{Published, WorkspaceActor, WorkspaceArgs};

use crate::config::ServerDefinition;
use crate::model::{
    CloseFailure, Customize, HostEvent, Problem, ServerSnapshot, ServerState, ServerSummary,
    Servers, WorkspaceSnapshot,
};
use crate::protocol::auth::{Asked, Replay};
use crate::store::Store;

/// A reply to a server action: the server's resulting snapshot, or why nothing changed.
pub type ActionAnswer = RpcReplyPort<Result<ServerSnapshot, Problem>>;

/// What a daemon actor sends the host (the root actor, [`crate::Host::actor`]) to manage its
/// workspaces; the handle methods of [`crate::Workspace`] send the same messages. Every
/// answer is scrubbed of every registered secret. A workspace that is not open yet is
/// opened (from the store and the service configuration) by the first message naming it.
///
/// ```no_run
/// # async fn demo(host: plurnk_mcp::Host) -> Result<(), Box<dyn std::error::Error>> {
/// use plurnk_mcp::HostMsg;
/// let answer = ractor::call!(host.actor(), |reply| HostMsg::Disable {
///     workspace: "default".into(),
///     alias: "github".into(),
///     reply,
/// })?;
/// # let _ = answer; Ok(()) }
/// ```
#[non_exhaustive]
pub enum HostMsg {
    /// [`crate::Workspace::enable_with`].
    Enable {
        /// The workspace.
        workspace: String,
        /// The server.
        alias: String,
        /// Customization through the configuration cascade (`Customize::default()`: none).
        customize: Box<Customize>,
        /// The answer.
        reply: ActionAnswer,
    },
    /// [`crate::Workspace::disable`].
    Disable {
        /// The workspace.
        workspace: String,
        /// The server.
        alias: String,
        /// The answer.
        reply: ActionAnswer,
    },
    /// [`crate::Workspace::add`].
    Add {
        /// The workspace.
        workspace: String,
        /// The new server's definition.
        definition: Box<ServerDefinition>,
        /// The answer.
        reply: ActionAnswer,
    },
    /// [`crate::Workspace::remove`].
    Remove {
        /// The workspace.
        workspace: String,
        /// The server.
        alias: String,
        /// The answer.
        reply: ActionAnswer,
    },
    /// [`crate::Workspace::list_with`]: `client` holds the definitions of a client's overlay
    /// (shown, never connected or kept).
    List {
        /// The workspace.
        workspace: String,
        /// A client overlay's definitions.
        client: Vec<ServerDefinition>,
        /// The answer.
        reply: RpcReplyPort<Result<Vec<ServerSummary>, Problem>>,
    },
    /// The workspace's current snapshot.
    Snapshot {
        /// The workspace.
        workspace: String,
        /// The answer.
        reply: RpcReplyPort<Result<Arc<WorkspaceSnapshot>, Problem>>,
    },
    /// A subscription to the workspace's snapshots: a [`SnapshotWatch`] that sees every
    /// commit, across restarts of the workspace's actor.
    Subscribe {
        /// The workspace.
        workspace: String,
        /// The answer.
        reply: RpcReplyPort<Result<SnapshotWatch, Problem>>,
    },
    #[doc(hidden)]
    Internal(Internal),
}

/// The host's own messages to its supervisor.
#[doc(hidden)]
pub struct Internal(pub(crate) SupervisorMsg);

impl From<SupervisorMsg> for HostMsg {
    fn from(message: SupervisorMsg) -> Self {
        HostMsg::Internal(Internal(message))
    }
}

/// A subscription to one workspace's snapshots. It outlives restarts of the workspace's
/// actor: the snapshot channel belongs to the supervisor, not to the actor.
#[derive(Clone)]
pub struct SnapshotWatch {
    published: watch::Receiver<Arc<Published>>,
}

impl std::fmt::Debug for SnapshotWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWatch")
            .field("version", &self.current().version)
            .finish()
    }
}

impl SnapshotWatch {
    pub(crate) fn new(published: watch::Receiver<Arc<Published>>) -> Self {
        Self { published }
    }

    /// The snapshot now.
    pub fn current(&self) -> Arc<WorkspaceSnapshot> {
        self.published.borrow().snapshot.clone()
    }

    /// Waits for the next commit and returns its snapshot; `None` once the host has shut
    /// down.
    pub async fn changed(&mut self) -> Option<Arc<WorkspaceSnapshot>> {
        self.published.changed().await.ok()?;
        Some(self.published.borrow_and_update().snapshot.clone())
    }
}

/// Where a workspace's actor is, as its handles see it.
#[derive(Clone, Debug)]
pub(crate) enum Life {
    /// This actor serves it.
    Running(ActorRef<WorkspaceMsg>),
    /// It failed too often (or could not be restarted) and stays down until opened again.
    Failed(Problem),
    /// The host shut it down.
    Stopped,
}

/// What a handle of a workspace holds.
pub(crate) struct Opened {
    pub published: watch::Receiver<Arc<Published>>,
    pub life: watch::Receiver<Life>,
    /// This open started the workspace (it hydrates now).
    pub fresh: bool,
}

/// The supervisor's own messages.
pub(crate) enum SupervisorMsg {
    /// Opens a workspace (or returns the one open): from `seeds`, or from the store (which
    /// the workspace reads itself) when `None`. A failed workspace is started again, its
    /// failures forgotten.
    Open {
        name: String,
        seeds: Option<Given>,
        reply: RpcReplyPort<Result<Opened, Problem>>,
    },
    /// The store announced something: a change goes to its workspace (if open), a loss or a
    /// return to every workspace.
    Announced(crate::store::Announcement),
    /// The names of the open workspaces.
    Names { reply: RpcReplyPort<Vec<String>> },
    /// Shut every workspace down and report every close failure.
    Shutdown {
        reply: RpcReplyPort<Vec<CloseFailure>>,
    },
    /// Test hook: panic, to exercise the parent's supervision of the host.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    Panic,
}

/// What a workspace opens with when its durable state was read already (at start).
pub(crate) struct Given {
    pub definitions: BTreeMap<String, Seed>,
    pub versions: BTreeMap<String, crate::store::Version>,
}

/// The start-up arguments.
pub(crate) struct SupervisorArgs {
    pub settings: Arc<Settings>,
    pub store: Option<Arc<dyn Store>>,
    pub events: broadcast::Sender<HostEvent>,
    pub reseed: Reseed,
    pub restart: WorkspaceRestart,
}

/// One workspace under the supervisor.
struct Child {
    /// Its running actor; `None` while failed or stopped.
    actor: Option<ActorRef<WorkspaceMsg>>,
    /// The snapshot channel every handle reads; kept across restarts.
    published: watch::Sender<Arc<Published>>,
    life: watch::Sender<Life>,
    /// When it failed, inside the restart window.
    failures: VecDeque<Instant>,
    /// Messages that arrived while its actor was stopping: delivered once it has been
    /// restarted (or has failed for good), in order.
    deferred: Vec<HostMsg>,
}

/// The supervisor's state.
pub(crate) struct SupervisorState {
    args: SupervisorArgs,
    workspaces: BTreeMap<String, Child>,
    shutting_down: bool,
}

/// The actor.
pub(crate) struct HostSupervisor;

impl Actor for HostSupervisor {
    type Msg = HostMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            args,
            workspaces: BTreeMap::new(),
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::Internal(Internal(message)) => state.internal(&myself, message).await,
            HostMsg::Snapshot { workspace, reply } => {
                let answer = state
                    .child(&myself, &workspace)
                    .await
                    .map(|child| child.published.borrow().snapshot.clone());
                let _ = reply.send(answer);
            }
            HostMsg::Subscribe { workspace, reply } => {
                let answer = state
                    .child(&myself, &workspace)
                    .await
                    .map(|child| SnapshotWatch {
                        published: child.published.subscribe(),
                    });
                let _ = reply.send(answer);
            }
            command => state.forward(&myself, command).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never stop the host because a workspace ended: restart it, or mark it failed.
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                state
                    .on_failed(&myself, cell.get_id(), &error.to_string())
                    .await;
            }
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                if let Some(child) = state.by_id(cell.get_id()) {
                    child.actor = None;
                    child.life.send_replace(Life::Stopped);
                    let deferred = std::mem::take(&mut child.deferred);
                    for message in deferred {
                        let _ = myself.send_message(message);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl SupervisorState {
    /// Hands an announcement of the store to the workspaces it concerns; a workspace not open
    /// reads its state afresh when it opens.
    fn announced(&self, announcement: crate::store::Announcement) {
        use crate::store::Announcement;
        let concerned: Vec<&ActorRef<WorkspaceMsg>> = match &announcement {
            Announcement::Changed { workspace, .. } => self
                .workspaces
                .get(workspace)
                .and_then(|child| child.actor.as_ref())
                .into_iter()
                .collect(),
            Announcement::Lost(_) | Announcement::Restored => self
                .workspaces
                .values()
                .filter_map(|child| child.actor.as_ref())
                .collect(),
            // The gateways follow the store for these themselves.
            Announcement::SessionEnded { .. } => Vec::new(),
        };
        for actor in concerned {
            let _ = actor.cast(WorkspaceMsg::Announced(announcement.clone()));
        }
    }

    fn by_id(&mut self, id: ractor::ActorId) -> Option<&mut Child> {
        self.workspaces.values_mut().find(|child| {
            child
                .actor
                .as_ref()
                .is_some_and(|actor| actor.get_id() == id)
        })
    }

    async fn internal(&mut self, myself: &ActorRef<HostMsg>, message: SupervisorMsg) {
        match message {
            SupervisorMsg::Open { name, seeds, reply } => {
                let answer = self.open(myself, &name, seeds).await;
                let _ = reply.send(answer);
            }
            #[cfg(feature = "test-hooks")]
            SupervisorMsg::Panic => panic!("host supervisor panic requested by a test"),
            SupervisorMsg::Announced(announcement) => self.announced(announcement),
            SupervisorMsg::Names { reply } => {
                let _ = reply.send(self.workspaces.keys().cloned().collect());
            }
            SupervisorMsg::Shutdown { reply } => {
                self.shutting_down = true;
                // Workspaces shut down concurrently; the reply waits for all in a task so
                // the supervisor's mailbox stays free.
                let workspaces: Vec<(String, ActorRef<WorkspaceMsg>)> = self
                    .workspaces
                    .iter()
                    .filter_map(|(name, child)| Some((name.clone(), child.actor.clone()?)))
                    .collect();
                tokio::spawn(async move {
                    let mut failures = Vec::new();
                    let calls = workspaces.into_iter().map(|(name, actor)| async move {
                        let result = actor
                            .call(|reply| WorkspaceMsg::Shutdown { reply }, None)
                            .await;
                        let failures = match result {
                            Ok(ractor::rpc::CallResult::Success(failures)) => failures,
                            _ => vec![CloseFailure {
                                workspace: name.clone(),
                                alias: String::new(),
                                detail: "the workspace stopped before it reported its shutdown"
                                    .into(),
                            }],
                        };
                        actor.stop(None);
                        failures
                    });
                    for batch in futures::future::join_all(calls).await {
                        failures.extend(batch);
                    }
                    let _ = reply.send(failures);
                });
            }
        }
    }

    /// Opens `name`, or returns it open. A workspace whose actor is stopping (its failure
    /// not yet reported here) is returned as it is: its handles follow the restart.
    async fn open(
        &mut self,
        myself: &ActorRef<HostMsg>,
        name: &str,
        seeds: Option<Given>,
    ) -> Result<Opened, Problem> {
        if self.shutting_down {
            return Err(Problem::shutting_down());
        }
        if let Some(child) = self.workspaces.get_mut(name) {
            let failed = matches!(&*child.life.borrow(), Life::Failed(_));
            if !failed {
                return Ok(Opened {
                    published: child.published.subscribe(),
                    life: child.life.subscribe(),
                    fresh: false,
                });
            }
            // Opened again by name after it failed for good: a fresh start.
            child.failures.clear();
            let version = child.published.borrow().snapshot.version;
            let published = child.published.clone();
            let actor = spawn(myself, &self.args, name, seeds, published, version)
                .await
                .map_err(|error| Problem::server_unavailable(error.to_string()))?;
            let child = self
                .workspaces
                .get_mut(name)
                .ok_or_else(|| Problem::server_unavailable("the workspace vanished"))?;
            child.actor = Some(actor.clone());
            child.life.send_replace(Life::Running(actor));
            return Ok(Opened {
                published: child.published.subscribe(),
                life: child.life.subscribe(),
                fresh: true,
            });
        }
        let (published, _) = watch::channel(Arc::new(Published {
            snapshot: Arc::new(WorkspaceSnapshot {
                workspace: name.to_owned(),
                version: 0,
                servers: Servers::new(),
            }),
            routes: Default::default(),
        }));
        let actor = spawn(myself, &self.args, name, seeds, published.clone(), 0)
            .await
            .map_err(|error| Problem::server_unavailable(error.to_string()))?;
        let (life, _) = watch::channel(Life::Running(actor.clone()));
        let opened = Opened {
            published: published.subscribe(),
            life: life.subscribe(),
            fresh: true,
        };
        self.workspaces.insert(
            name.to_owned(),
            Child {
                actor: Some(actor),
                published,
                life,
                failures: VecDeque::new(),
                deferred: Vec::new(),
            },
        );
        Ok(opened)
    }

    /// The workspace `name`, opened if it is not yet.
    async fn child(&mut self, myself: &ActorRef<HostMsg>, name: &str) -> Result<&Child, Problem> {
        if !self.workspaces.contains_key(name) {
            if !crate::config::valid_workspace_name(name) {
                return Err(Problem::invalid_definition(format!(
                    "workspace name {:?} is not valid: use 1 to 128 characters of letters, digits, '.', '_' and '-'",
                    crate::config::shorten(name)
                )));
            }
            self.open(myself, name, None).await?;
        }
        self.workspaces
            .get(name)
            .ok_or_else(|| Problem::server_unavailable(format!("workspace \"{name}\" is gone")))
    }

    /// Hands a server action to the workspace's current actor; a task waits for its answer
    /// and scrubs it, so the supervisor never waits on a workspace.
    async fn forward(&mut self, myself: &ActorRef<HostMsg>, command: HostMsg) {
        let workspace = match &command {
            HostMsg::Enable { workspace, .. }
            | HostMsg::Disable { workspace, .. }
            | HostMsg::Add { workspace, .. }
            | HostMsg::Remove { workspace, .. }
            | HostMsg::List { workspace, .. }
            | HostMsg::Snapshot { workspace, .. }
            | HostMsg::Subscribe { workspace, .. } => workspace.clone(),
            HostMsg::Internal(_) => return,
        };
        let actor = match self.current(myself, &workspace).await {
            Some(actor) => actor,
            None => {
                if let Some(child) = self.workspaces.get_mut(&workspace) {
                    child.deferred.push(command);
                }
                return;
            }
        };
        self.dispatch(actor, workspace, command);
    }

    /// The workspace's current actor (opened on first use), or why there is none; `None`
    /// while it is stopping, when its failure is on the way here and the action waits for
    /// the restart.
    async fn current(
        &mut self,
        myself: &ActorRef<HostMsg>,
        workspace: &str,
    ) -> Option<Result<ActorRef<WorkspaceMsg>, Problem>> {
        if self.shutting_down {
            return Some(Err(Problem::shutting_down()));
        }
        if let Err(problem) = self.child(myself, workspace).await {
            return Some(Err(problem));
        }
        let child = self.workspaces.get(workspace)?;
        match (&child.actor, &*child.life.borrow()) {
            (Some(actor), _) if alive(actor) => Some(Ok(actor.clone())),
            (Some(_), _) => None,
            (None, Life::Failed(problem)) => Some(Err(problem.clone())),
            (None, _) => Some(Err(Problem::shutting_down())),
        }
    }

    /// Runs `command` on `actor` (or answers why it cannot) in a task of its own.
    fn dispatch(
        &self,
        actor: Result<ActorRef<WorkspaceMsg>, Problem>,
        workspace: String,
        command: HostMsg,
    ) {
        let refused = |problem: Problem| problem.scrubbed();
        match command {
            HostMsg::Enable {
                alias,
                customize,
                reply,
                ..
            } => {
                let asked = Asked::new(
                    &self.args.settings.connect.oauth,
                    Replay::Enable(customize.clone()),
                );
                act(
                    actor.map_err(refused),
                    workspace,
                    alias.clone(),
                    reply,
                    Some(asked),
                    |reply| WorkspaceMsg::Enable {
                        alias,
                        customize,
                        reply,
                    },
                )
            }
            HostMsg::Disable { alias, reply, .. } => act(
                actor.map_err(refused),
                workspace,
                alias.clone(),
                reply,
                None,
                |reply| WorkspaceMsg::Disable { alias, reply },
            ),
            HostMsg::Remove { alias, reply, .. } => act(
                actor.map_err(refused),
                workspace,
                alias.clone(),
                reply,
                None,
                |reply| WorkspaceMsg::Remove { alias, reply },
            ),
            HostMsg::Add {
                definition, reply, ..
            } => {
                let alias = definition.alias().to_owned();
                let asked = Asked::new(
                    &self.args.settings.connect.oauth,
                    Replay::Add(definition.clone()),
                );
                act(
                    actor.map_err(refused),
                    workspace,
                    alias,
                    reply,
                    Some(asked),
                    |reply| WorkspaceMsg::Add {
                        definition: *definition,
                        reply,
                    },
                )
            }
            HostMsg::List { client, reply, .. } => {
                let actor = match actor {
                    Ok(actor) => actor,
                    Err(problem) => {
                        let _ = reply.send(Err(refused(problem)));
                        return;
                    }
                };
                tokio::spawn(async move {
                    let answer = match actor
                        .call(|reply| WorkspaceMsg::List { client, reply }, None)
                        .await
                    {
                        Ok(ractor::rpc::CallResult::Success(mut summaries)) => {
                            for summary in &mut summaries {
                                summary.problem = summary.problem.take().map(Problem::scrubbed);
                            }
                            Ok(summaries)
                        }
                        _ => Err(stopped_before_answering(&workspace, "the list")),
                    };
                    let _ = reply.send(answer);
                });
            }
            HostMsg::Snapshot { .. } | HostMsg::Subscribe { .. } | HostMsg::Internal(_) => {}
        }
    }

    /// A workspace actor failed: restart it from the store and the service configuration,
    /// unless it failed too often inside the window (then it stays failed, reported once).
    async fn on_failed(&mut self, myself: &ActorRef<HostMsg>, id: ractor::ActorId, error: &str) {
        let Some(name) = self
            .workspaces
            .iter()
            .find(|(_, child)| child.actor.as_ref().is_some_and(|a| a.get_id() == id))
            .map(|(name, _)| name.clone())
        else {
            return;
        };
        // An actor's failure text is the host's own, but bound it all the same.
        let error: String = crate::redact::scrub(error).chars().take(500).collect();
        tracing::error!(workspace = %name, %error, "a workspace actor failed; its servers' connections were dropped with it");
        metrics::counter!("plurnk_mcp_workspace_failures_total").increment(1);
        let restart = self.args.restart;
        let shutting_down = self.shutting_down;
        let Some(child) = self.workspaces.get_mut(&name) else {
            return;
        };
        child.actor = None;
        let deferred = std::mem::take(&mut child.deferred);
        if shutting_down {
            child.life.send_replace(Life::Stopped);
        } else if restart.restart_after(&mut child.failures, Instant::now()) {
            let failures = child.failures.len();
            let problem = workspace_failed(
                &name,
                &format!("its actor failed and is restarted: {error}"),
            );
            self.publish_down(&name, &problem);
            let Some(child) = self.workspaces.get(&name) else {
                return;
            };
            let version = child.published.borrow().snapshot.version;
            let published = child.published.clone();
            // The restarted actor reads its durable state again itself.
            let restarted = spawn(myself, &self.args, &name, None, published, version).await;
            match restarted {
                Ok(actor) => {
                    if let Some(child) = self.workspaces.get_mut(&name) {
                        child.actor = Some(actor.clone());
                        child.life.send_replace(Life::Running(actor));
                    }
                    let _ = self.args.events.send(HostEvent::WorkspaceRestarted {
                        workspace: name.clone(),
                        failures,
                        problem,
                    });
                }
                Err(detail) => self.give_up(
                    &name,
                    workspace_failed(
                        &name,
                        &format!(
                            "its actor failed ({error}) and could not be started again: {detail}; fix the cause and open it again by name"
                        ),
                    ),
                ),
            }
        } else {
            let failures = child.failures.len();
            self.give_up(
                &name,
                workspace_failed(
                    &name,
                    &format!(
                        "its actor failed {failures} times within {} s and is not restarted again (last: {error}); fix the cause and open it again by name",
                        restart.window.as_secs()
                    ),
                ),
            );
        }
        for message in deferred {
            let _ = myself.send_message(message);
        }
    }

    /// Marks `name` failed: every server it had enabled shows `unavailable` with `problem`,
    /// no call is routed, and the failure is reported once.
    fn give_up(&mut self, name: &str, problem: Problem) {
        tracing::error!(workspace = %name, problem = %problem, "a workspace failed for good");
        self.publish_down(name, &problem);
        let Some(child) = self.workspaces.get_mut(name) else {
            return;
        };
        child.life.send_replace(Life::Failed(problem.clone()));
        let _ = self.args.events.send(HostEvent::WorkspaceFailed {
            workspace: name.to_owned(),
            problem,
        });
    }

    /// Publishes what is left of `name` once its actor has failed: every server it had
    /// enabled `unavailable` with `problem`, and no route, so no reader takes the dead
    /// generation's snapshot for a live one.
    fn publish_down(&mut self, name: &str, problem: &Problem) {
        let Some(child) = self.workspaces.get_mut(name) else {
            return;
        };
        let last = child.published.borrow().snapshot.clone();
        let servers = last
            .servers
            .values()
            .map(|server| {
                if server.state == ServerState::Disabled {
                    server.clone()
                } else {
                    Arc::new(ServerSnapshot {
                        alias: server.alias.clone(),
                        transport: server.transport,
                        state: ServerState::Unavailable,
                        problem: Some(problem.clone()),
                        connecting: None,
                        phases: None,
                        recovered: server.recovered.clone(),
                        negotiated: None,
                        tools: Arc::from([]),
                        catalog: Default::default(),
                        generation: server.generation,
                        authored: server.authored.clone(),
                        authorization: None,
                        sandbox: None,
                    })
                }
            })
            .collect();
        let version = last.version + 1;
        child.published.send_replace(Arc::new(Published {
            snapshot: Arc::new(WorkspaceSnapshot {
                workspace: name.to_owned(),
                version,
                servers,
            }),
            routes: Default::default(),
        }));
        let _ = self.args.events.send(HostEvent::SnapshotCommitted {
            workspace: name.to_owned(),
            version,
        });
    }
}

fn alive(actor: &ActorRef<WorkspaceMsg>) -> bool {
    !matches!(
        actor.get_status(),
        ActorStatus::Stopping | ActorStatus::Stopped
    )
}

/// Starts a workspace actor linked under the supervisor, publishing on `published` from
/// `version` on.
async fn spawn(
    myself: &ActorRef<HostMsg>,
    args: &SupervisorArgs,
    name: &str,
    given: Option<Given>,
    published: watch::Sender<Arc<Published>>,
    version: u64,
) -> Result<ActorRef<WorkspaceMsg>, Unopened> {
    let (definitions, versions) = match given {
        Some(given) => (Some(given.definitions), given.versions),
        None => (None, BTreeMap::new()),
    };
    let workspace = WorkspaceArgs {
        name: name.to_owned(),
        definitions,
        versions,
        reseed: args.reseed.clone(),
        store: args.store.clone(),
        settings: args.settings.clone(),
        published,
        events: args.events.clone(),
        version,
    };
    Actor::spawn_linked(None, WorkspaceActor, workspace, myself.get_cell())
        .await
        .map(|(actor, _)| actor)
        .map_err(|error| Unopened::Actor {
            name: name.to_owned(),
            error: error.to_string(),
        })
}

/// Why a workspace's actor could not be started (again).
#[derive(Debug, thiserror::Error)]
enum Unopened {
    /// ractor refused to spawn it.
    #[error("workspace \"{name}\" could not start: {error}")]
    Actor { name: String, error: String },
}

/// Runs one action on the workspace's actor in a task, and answers it scrubbed. An answer
/// that waits for OAuth authorization is handed to `asked`, so completing that
/// authorization performs the action again: every action passes here, a daemon actor's
/// `HostMsg` as well as the handle's, and only here is its answer seen.
fn act(
    actor: Result<ActorRef<WorkspaceMsg>, Problem>,
    workspace: String,
    alias: String,
    reply: ActionAnswer,
    asked: Option<Asked>,
    message: impl FnOnce(ActionAnswer) -> WorkspaceMsg + Send + 'static,
) {
    let actor = match actor {
        Ok(actor) => actor,
        Err(problem) => {
            let _ = reply.send(Err(problem));
            return;
        }
    };
    tokio::spawn(async move {
        let answer = match actor.call(message, None).await {
            Ok(ractor::rpc::CallResult::Success(answer)) => {
                if let (Ok(snapshot), Some(asked)) = (&answer, asked) {
                    asked.answered(&workspace, &alias, snapshot);
                }
                answer
            }
            _ => Err(stopped_before_answering(
                &workspace,
                &format!("the action on \"{alias}\""),
            )),
        };
        let answer = answer
            .map(|mut snapshot| {
                snapshot.scrub();
                snapshot
            })
            .map_err(Problem::scrubbed);
        let _ = reply.send(answer);
    });
}

fn stopped_before_answering(workspace: &str, what: &str) -> Problem {
    Problem::server_unavailable(format!(
        "workspace \"{workspace}\" stopped before it answered {what}; it is restarted by itself: read its snapshot, then try again"
    ))
}

/// `503 workspace-failed`, naming the workspace.
fn workspace_failed(name: &str, why: &str) -> Problem {
    Problem {
        listing: false,
        status: 503,
        kind: "workspace-failed".into(),
        detail: crate::redact::scrub(&format!("workspace \"{name}\": {why}")).into_owned(),
        retryable: true,
    }
}
