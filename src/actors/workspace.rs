//! The workspace actor: the available and enabled sets, the attachments, and the snapshot.
//!
//! It is the only writer of its workspace's [`WorkspaceSnapshot`]. Attachments report their
//! state with `Publish`; each report replaces that server's entry whole and commits a new
//! immutable snapshot in the same message, so readers never see a half-published server.
//! Disable and remove commit the reduced snapshot only when the attachment has drained
//! (invariant 4), and a re-enable that arrives meanwhile waits behind that commit.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::{broadcast, watch};

use super::attachment::{AttachmentActor, AttachmentArgs, AttachmentMsg, Origin, Settings};
use super::messages::{ActionReply, WorkspaceMsg};
use crate::config::{ServerDefinition, resolve};
use crate::model::{CloseFailure, Customize, HostEvent, ServerSummary};
use crate::model::{Problem, ServerSnapshot, ServerState, WorkspaceSnapshot};
use crate::protocol::Session;
use crate::store::{RecordSource, ServerRecord, Store, StoreError};

/// What readers of a workspace see: the snapshot, and the routes calls take.
#[derive(Debug)]
pub(crate) struct Published {
    pub snapshot: Arc<WorkspaceSnapshot>,
    pub routes: Arc<HashMap<String, Route>>,
}

/// Where calls to one server go: its session (directly, in the caller's task), and the
/// attachment actor that owns it.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub session: Arc<Session>,
    pub actor: ActorRef<AttachmentMsg>,
}

/// Who owns a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The service environment.
    Service,
    /// Added in this workspace.
    Workspace,
}

/// What a disable does to the server's durable record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// A disable: the record stays, marked disabled.
    Keep,
    /// A removal of an added server: record and enabledness go.
    Forget,
    /// A removal of a specialization: the record goes, the service server stays disabled.
    Revert,
}

/// One definition a workspace starts with.
#[derive(Clone)]
pub(crate) struct Seed {
    pub definition: Arc<ServerDefinition>,
    /// The service environment's definition of this alias, if it has one.
    pub service: Option<Arc<ServerDefinition>>,
    pub source: Source,
    pub enabled: bool,
    /// A service definition replaced by a durable workspace specialization.
    pub specialized: bool,
}

/// The start-up arguments.
pub(crate) struct WorkspaceArgs {
    pub name: String,
    pub definitions: BTreeMap<String, Seed>,
    /// Where enabledness and added definitions are kept, if anywhere.
    pub store: Option<Arc<dyn Store>>,
    pub settings: Arc<Settings>,
    pub published: watch::Sender<Arc<Published>>,
    pub events: broadcast::Sender<HostEvent>,
    /// The version of the last snapshot published on `published` (a restarted workspace
    /// goes on from there, so no reader sees versions go back).
    pub version: u64,
}

struct Entry {
    definition: Arc<ServerDefinition>,
    /// The service environment's definition, the baseline a specialization replaces.
    service: Option<Arc<ServerDefinition>>,
    /// A customized definition being prepared; it replaces `definition` only once ready.
    candidate: Option<Arc<ServerDefinition>>,
    source: Source,
    enabled: bool,
    /// A service definition replaced by a durable workspace specialization.
    specialized: bool,
    /// An added server that the store does not hold yet: its first write must not
    /// overwrite a record another process wrote meanwhile.
    fresh: bool,
}

struct Attached {
    actor: ActorRef<AttachmentMsg>,
    session: Arc<Session>,
    instance: u64,
    draining: bool,
    /// The same server under a changed definition, prepared beside this one.
    successor: Option<Successor>,
}

/// A connected server's next definition, connecting beside the live session: the live one
/// stays authoritative until the successor is ready and the live one's calls have settled
/// (the host specification's setup section: the candidate is prepared while the old
/// snapshot is authoritative, and the swap commits at quiescence).
struct Successor {
    actor: ActorRef<AttachmentMsg>,
    session: Arc<Session>,
    instance: u64,
    definition: Arc<ServerDefinition>,
    /// Enable waiters, answered once it is swapped in (or fails, or is stopped).
    settle: Vec<ActionReply>,
    step: Step,
}

/// Where a successor is.
enum Step {
    /// Connecting and listing, while the live session serves.
    Preparing,
    /// Ready, its definition durable, and given every new call; the live session settles
    /// the calls it had, then the swap commits this report.
    Swapping(Box<ServerSnapshot>),
    /// Told to stop (a disable, a removal, a shutdown): it detaches by itself.
    Stopping,
    /// Stopped and detached.
    Stopped,
}

impl Successor {
    /// Whether it may still become the server.
    fn live(&self) -> bool {
        matches!(self.step, Step::Preparing | Step::Swapping(_))
    }

    /// Stops it (letting its calls finish unless `cancel`) and answers its waiters.
    fn stop(&mut self, reason: &str, cancel: bool, answer: &Problem) {
        if !self.live() {
            return;
        }
        let _ = self.actor.cast(AttachmentMsg::Drain {
            reason: reason.to_owned(),
            cancel,
        });
        self.step = Step::Stopping;
        for reply in self.settle.drain(..) {
            let _ = reply.send(Err(answer.clone()));
        }
    }
}

/// What happens to a server's definition once its attachment has detached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Then {
    /// Nothing: it stays, disabled.
    #[default]
    Stay,
    /// Enable it again (an enable arrived while it was closing).
    Enable,
    /// Drop the definition (a removal).
    Forget,
    /// Go back to the service definition (removal of a specialization), then enable it
    /// again if asked meanwhile.
    Revert { enable: bool },
}

impl Then {
    /// An enable arrived while the server closes.
    fn enable(self) -> Self {
        match self {
            Self::Revert { .. } => Self::Revert { enable: true },
            _ => Self::Enable,
        }
    }

    /// A disable (or removal) arrived while the server closes.
    fn disable(self, removal: Removal) -> Self {
        match (self, removal) {
            (Self::Revert { .. }, _) | (_, Removal::Revert) => Self::Revert { enable: false },
            (Self::Forget, _) | (_, Removal::Forget) => Self::Forget,
            (Self::Stay | Self::Enable, Removal::Keep) => Self::Stay,
        }
    }
}

#[derive(Default)]
struct Pending {
    /// Enable/add waiters, answered when the server leaves `connecting`.
    settle: Vec<ActionReply>,
    /// Disable/remove waiters, answered when the attachment has detached.
    detach: Vec<ActionReply>,
    /// What follows the detach.
    then: Then,
}

/// The workspace's mutable state.
pub(crate) struct WorkspaceState {
    name: String,
    settings: Arc<Settings>,
    entries: BTreeMap<String, Entry>,
    attachments: HashMap<String, Attached>,
    /// Every server's current view, by alias; cloned into each snapshot (keys and values
    /// are shared, so a commit copies pointers).
    servers: BTreeMap<Arc<str>, Arc<ServerSnapshot>>,
    /// The routes of the last commit, reused while the attachments are the same ones.
    routes: Arc<HashMap<String, Route>>,
    version: u64,
    next_instance: u64,
    pending: HashMap<String, Pending>,
    crashes: HashMap<String, VecDeque<Instant>>,
    published: watch::Sender<Arc<Published>>,
    events: broadcast::Sender<HostEvent>,
    shutdown: Option<(RpcReplyPort<Vec<CloseFailure>>, Vec<CloseFailure>)>,
    store: Option<Arc<dyn Store>>,
    /// A `Commit` message is queued.
    commit_scheduled: bool,
    /// Answers that wait for the next commit.
    after_commit: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    /// Calls in flight on every attachment of this workspace, for its overload bound.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// The actor.
pub(crate) struct WorkspaceActor;

impl Actor for WorkspaceActor {
    type Msg = WorkspaceMsg;
    type State = WorkspaceState;
    type Arguments = WorkspaceArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: WorkspaceArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let entries = args
            .definitions
            .into_iter()
            .map(|(alias, seed)| {
                (
                    alias,
                    Entry {
                        definition: seed.definition,
                        service: seed.service,
                        candidate: None,
                        source: seed.source,
                        enabled: seed.enabled,
                        specialized: seed.specialized,
                        fresh: false,
                    },
                )
            })
            .collect();
        Ok(WorkspaceState {
            name: args.name,
            settings: args.settings,
            entries,
            attachments: HashMap::new(),
            servers: BTreeMap::new(),
            routes: Arc::default(),
            version: args.version,
            next_instance: 0,
            pending: HashMap::new(),
            crashes: HashMap::new(),
            published: args.published,
            events: args.events,
            shutdown: None,
            store: args.store,
            commit_scheduled: false,
            after_commit: Vec::new(),
            in_flight: Arc::default(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Hydration: every enabled server connects in parallel, each in its own attachment.
        let aliases: Vec<String> = state.entries.keys().cloned().collect();
        for alias in aliases {
            let enabled = state.entries.get(&alias).is_some_and(|entry| entry.enabled);
            let mut placeholder = state.placeholder(&alias, enabled);
            let closed = enabled.then(|| state.closed_gate(&alias)).flatten();
            if let Some(problem) = closed {
                // Kept as it is, not connected: it comes back when the gate opens again.
                placeholder.state = ServerState::Unavailable;
                placeholder.problem = Some(problem);
            }
            let attach = enabled && placeholder.problem.is_none();
            state.set_server(&alias, Arc::new(placeholder));
            if attach {
                state.attach(&myself, &alias, Origin::Hydrate).await?;
            }
        }
        state.commit();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkspaceMsg::Publish {
                alias,
                instance,
                server,
                answers,
            } => state.on_publish(&myself, alias, instance, server, answers),
            WorkspaceMsg::Commit => {
                state.commit_scheduled = false;
                state.commit();
            }
            WorkspaceMsg::CandidateFailed {
                alias,
                instance,
                problem,
                pending,
            } => state.on_candidate_failed(&alias, instance, problem, pending),
            WorkspaceMsg::Detached {
                alias,
                instance,
                result,
            } => state.on_detached(&myself, alias, instance, result).await?,
            WorkspaceMsg::Enable {
                alias,
                customize,
                reply,
            } => state.enable(&myself, alias, *customize, reply).await?,
            WorkspaceMsg::Disable { alias, reply } => state.disable(alias, reply, Removal::Keep),
            WorkspaceMsg::Remove { alias, reply } => {
                match state.entries.get(&alias).map(|entry| entry.source) {
                    None => {
                        let _ = reply.send(Err(Problem::unknown_server(&alias)));
                    }
                    Some(Source::Service)
                        if state
                            .entries
                            .get(&alias)
                            .is_some_and(|entry| entry.specialized) =>
                    {
                        // Removing the specialization reveals the service definition, disabled
                        // (and durably so: the service default must not enable it again).
                        state.disable(alias, reply, Removal::Revert);
                    }
                    Some(Source::Service) => {
                        let _ = reply.send(Err(Problem::conflict(format!(
                            "server \"{alias}\" comes from the service environment and cannot be removed: disable it instead"
                        ))));
                    }
                    Some(Source::Workspace) => state.disable(alias, reply, Removal::Forget),
                }
            }
            WorkspaceMsg::Add { definition, reply } => {
                let alias = definition.alias().to_owned();
                if state.shutdown.is_some() {
                    let _ = reply.send(Err(Problem::shutting_down()));
                } else if let Err(problem) = state.admit(&alias, &definition, None) {
                    let _ = reply.send(Err(problem));
                } else if state.entries.contains_key(&alias) {
                    let _ = reply.send(Err(Problem::conflict(format!(
                        "server \"{alias}\" already exists in this workspace: choose another alias, or enable it"
                    ))));
                } else {
                    state.entries.insert(
                        alias.clone(),
                        Entry {
                            definition: Arc::new(definition),
                            service: None,
                            candidate: None,
                            source: Source::Workspace,
                            enabled: false,
                            specialized: false,
                            fresh: true,
                        },
                    );
                    state
                        .pending
                        .entry(alias.clone())
                        .or_default()
                        .settle
                        .push(reply);
                    state.attach(&myself, &alias, Origin::Candidate).await?;
                }
            }
            WorkspaceMsg::List { client, reply } => {
                let _ = reply.send(state.summaries(&client));
            }
            WorkspaceMsg::Shutdown { reply } => {
                state.shutdown = Some((reply, Vec::new()));
                for attached in state.attachments.values_mut() {
                    attached.draining = true;
                    let _ = attached.actor.cast(AttachmentMsg::Drain {
                        reason: "the host is shutting down".into(),
                        cancel: true,
                    });
                    if let Some(successor) = &mut attached.successor {
                        successor.stop(
                            "the host is shutting down",
                            true,
                            &Problem::shutting_down(),
                        );
                    }
                }
                state.finish_shutdown_if_done();
            }
            #[cfg(feature = "test-hooks")]
            WorkspaceMsg::Panic => panic!("workspace panic requested by a test"),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // ractor's default would stop the workspace when a child exits: never do that.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            if state
                .on_successor_failed(&myself, cell.get_id(), &error.to_string())
                .await?
            {
                return Ok(());
            }
            let found = state
                .attachments
                .iter()
                .find(|(_, attached)| attached.actor.get_id() == cell.get_id())
                .map(|(alias, attached)| (alias.clone(), attached.draining));
            let Some((alias, draining)) = found else {
                return Ok(());
            };
            if draining || state.shutdown.is_some() {
                tracing::error!(server = %alias, %error, "attachment crashed while closing");
                metrics::counter!("plurnk_mcp_restarts_total").increment(1);
                // It was closing anyway; its connection was dropped with it.
                state
                    .on_detached(
                        &myself,
                        alias,
                        u64::MAX,
                        Err("the attachment crashed while closing".into()),
                    )
                    .await?;
                return Ok(());
            }
            let successor = state
                .attachments
                .remove(&alias)
                .and_then(|attached| attached.successor);
            tracing::error!(server = %alias, %error, "attachment crashed; restarting it as unavailable");
            metrics::counter!("plurnk_mcp_restarts_total").increment(1);
            state
                .crashes
                .entry(alias.clone())
                .or_default()
                .push_back(Instant::now());
            let problem = Problem::server_unavailable(format!(
                "server \"{alias}\" had an internal failure and is reconnecting"
            ));
            state
                .attach(&myself, &alias, Origin::Restarted(problem))
                .await?;
            // A change being prepared goes on beside the restarted attachment.
            if let Some(attached) = state.attachments.get_mut(&alias) {
                attached.successor = successor;
            }
        }
        Ok(())
    }
}

// === impl WorkspaceState ===

impl WorkspaceState {
    fn placeholder(&self, alias: &str, enabled: bool) -> ServerSnapshot {
        let kind = self
            .entries
            .get(alias)
            .map(|entry| entry.definition.transport().kind())
            .unwrap_or(crate::model::TransportKind::Stdio);
        ServerSnapshot {
            alias: alias.to_owned(),
            transport: kind,
            state: if enabled {
                ServerState::Connecting
            } else {
                ServerState::Disabled
            },
            problem: None,
            negotiated: None,
            tools: Arc::from([]),
            catalog: Default::default(),
            generation: 0,
            authored: self
                .entries
                .get(alias)
                .map(|entry| {
                    Arc::new(crate::model::Authored::of(
                        &entry.definition,
                        &self.expansion_env(entry),
                        self.settings.expanded.contains(alias),
                    ))
                })
                .unwrap_or_default(),
            authorization: None,
        }
    }

    async fn attach(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        origin: Origin,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((actor, session, instance)) = self.spawn(myself, alias, origin).await? {
            self.attachments.insert(
                alias.to_owned(),
                Attached {
                    actor,
                    session,
                    instance,
                    draining: false,
                    successor: None,
                },
            );
        }
        Ok(())
    }

    /// Prepares `alias`'s pending candidate beside its live attachment.
    async fn prepare_successor(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        definition: Arc<ServerDefinition>,
        reply: ActionReply,
    ) -> Result<(), ActorProcessingErr> {
        let Some((actor, session, instance)) = self.spawn(myself, alias, Origin::Candidate).await?
        else {
            return Ok(());
        };
        if let Some(attached) = self.attachments.get_mut(alias) {
            attached.successor = Some(Successor {
                actor,
                session,
                instance,
                definition,
                settle: vec![reply],
                step: Step::Preparing,
            });
        }
        Ok(())
    }

    /// Spawns an attachment of `alias` (with its candidate definition, if it has one).
    async fn spawn(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        origin: Origin,
    ) -> Result<Option<(ActorRef<AttachmentMsg>, Arc<Session>, u64)>, ActorProcessingErr> {
        let Some(entry) = self.entries.get(alias) else {
            return Ok(None);
        };
        self.next_instance += 1;
        let instance = self.next_instance;
        let session = Arc::new(Session::new(
            alias,
            self.settings.connect.limits,
            self.in_flight.clone(),
        ));
        let args = AttachmentArgs {
            alias: alias.to_owned(),
            definition: entry
                .candidate
                .clone()
                .unwrap_or_else(|| entry.definition.clone()),
            settings: self.settings.clone(),
            workspace: myself.clone(),
            workspace_name: self.name.clone(),
            events: self.events.clone(),
            instance,
            origin,
            crashes: self.crashes.get(alias).cloned().unwrap_or_default(),
            session: session.clone(),
            env: self.expansion_env(entry),
        };
        let (actor, _) =
            Actor::spawn_linked(None, AttachmentActor, args, myself.get_cell()).await?;
        Ok(Some((actor, session, instance)))
    }

    fn is_current(&self, alias: &str, instance: u64) -> bool {
        self.attachments
            .get(alias)
            .is_some_and(|attached| attached.instance == instance)
    }

    /// The successor `instance` of `alias`, if that is what it is.
    fn successor(&mut self, alias: &str, instance: u64) -> Option<&mut Successor> {
        self.attachments
            .get_mut(alias)
            .and_then(|attached| attached.successor.as_mut())
            .filter(|successor| successor.instance == instance)
    }

    /// Whether the live attachment of `alias` is settling its last calls for a successor
    /// (what it reports now is no longer the server's state).
    fn retiring(&self, alias: &str, instance: u64) -> bool {
        self.attachments.get(alias).is_some_and(|attached| {
            attached.instance == instance
                && attached
                    .successor
                    .as_ref()
                    .is_some_and(|successor| matches!(successor.step, Step::Swapping(_)))
        })
    }

    /// A successor reported: once ready it becomes durable and takes the new calls, and
    /// the live attachment settles its own and detaches; the swap commits then.
    fn on_successor_report(&mut self, alias: &str, server: ServerSnapshot) {
        let Some(attached) = self.attachments.get_mut(alias) else {
            return;
        };
        let Some(successor) = attached.successor.as_mut() else {
            return;
        };
        match &mut successor.step {
            Step::Swapping(latest) => **latest = server,
            Step::Preparing if server.state == ServerState::Ready => {
                let Some(entry) = self.entries.get_mut(alias) else {
                    return;
                };
                let previous = (entry.definition.clone(), entry.specialized);
                if let Some(candidate) = entry.candidate.take() {
                    entry.specialized = entry.source == Source::Service
                        && entry.service.as_deref() != Some(&*candidate);
                    entry.definition = candidate;
                }
                if let Err(problem) = self.persist_enabled(alias) {
                    // Nothing changes: the live session stays, under its definition.
                    if let Some(entry) = self.entries.get_mut(alias) {
                        (entry.definition, entry.specialized) = previous;
                    }
                    if let Some(successor) = self
                        .attachments
                        .get_mut(alias)
                        .and_then(|attached| attached.successor.as_mut())
                    {
                        successor.stop("its state could not be saved", true, &problem);
                    }
                    return;
                }
                if let Some(entry) = self.entries.get_mut(alias) {
                    entry.fresh = false;
                }
                let Some(attached) = self.attachments.get_mut(alias) else {
                    return;
                };
                let Some(successor) = attached.successor.as_mut() else {
                    return;
                };
                successor.step = Step::Swapping(Box::new(server));
                attached.session.hand_over(successor.session.clone());
                attached.draining = true;
                let _ = attached.actor.cast(AttachmentMsg::Drain {
                    reason: "its definition changed".into(),
                    cancel: false,
                });
            }
            Step::Preparing | Step::Stopping | Step::Stopped => {}
        }
    }

    /// The live attachment of `alias` detached while a successor was under way: the
    /// successor is swapped in (it was ready), or becomes the attachment whose detach the
    /// pending actions wait for (it was stopped with it). Returns whether it was handled.
    fn on_retired(&mut self, myself: &ActorRef<WorkspaceMsg>, alias: &str) -> bool {
        let Some(attached) = self.attachments.get_mut(alias) else {
            return false;
        };
        let Some(mut successor) = attached.successor.take() else {
            return false;
        };
        if matches!(successor.step, Step::Preparing) {
            successor.stop(
                "the server closed before its new definition was ready",
                true,
                &Problem::conflict(format!(
                    "server \"{alias}\" closed before its new definition was ready"
                )),
            );
        }
        let Successor {
            actor,
            session,
            instance,
            settle,
            step,
            ..
        } = successor;
        let server = match step {
            Step::Swapping(server) => *server,
            Step::Stopping | Step::Preparing => {
                *attached = Attached {
                    actor,
                    session,
                    instance,
                    draining: true,
                    successor: None,
                };
                return true;
            }
            Step::Stopped => return false,
        };
        *attached = Attached {
            actor,
            session,
            instance,
            draining: false,
            successor: None,
        };
        let answer = match &server.problem {
            Some(problem) => Err(problem.clone()),
            None => Ok(server.clone()),
        };
        self.after_commit
            .extend(settle.into_iter().map(|reply| (reply, answer.clone())));
        let previous = self.set_server(alias, Arc::new(server.clone()));
        if previous.as_ref().map(|p| p.state) != Some(server.state) {
            self.state_changed(
                alias,
                previous.map(|p| p.state),
                server.state,
                server.problem.clone(),
            );
        }
        self.schedule_commit(myself);
        true
    }

    /// A successor's actor failed. Returns whether `id` was a successor.
    async fn on_successor_failed(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        id: ractor::ActorId,
        error: &str,
    ) -> Result<bool, ActorProcessingErr> {
        let Some((alias, attached)) = self.attachments.iter_mut().find(|(_, attached)| {
            attached
                .successor
                .as_ref()
                .is_some_and(|successor| successor.actor.get_id() == id)
        }) else {
            return Ok(false);
        };
        let alias = alias.clone();
        tracing::error!(server = %alias, %error, "the attachment of a changed definition crashed");
        metrics::counter!("plurnk_mcp_restarts_total").increment(1);
        let problem = Problem::server_unavailable(format!(
            "server \"{alias}\" had an internal failure while changing its definition"
        ));
        let Some(successor) = attached.successor.as_mut() else {
            return Ok(true);
        };
        match successor.step {
            Step::Preparing => {
                for reply in successor.settle.drain(..) {
                    let _ = reply.send(Err(problem.clone()));
                }
                attached.successor = None;
                if let Some(entry) = self.entries.get_mut(&alias) {
                    entry.candidate = None;
                }
            }
            Step::Swapping(_) => {
                // It had the calls and the durable definition: the server restarts under
                // it, unavailable and reconnecting; the old attachment closes by itself.
                for reply in successor.settle.drain(..) {
                    let _ = reply.send(Err(problem.clone()));
                }
                self.attach(myself, &alias, Origin::Restarted(problem))
                    .await?;
            }
            Step::Stopping | Step::Stopped => successor.step = Step::Stopped,
        }
        Ok(true)
    }

    fn on_publish(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        instance: u64,
        mut server: ServerSnapshot,
        answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    ) {
        if self.successor(&alias, instance).is_some() {
            server.scrub();
            self.on_successor_report(&alias, server);
            if !answers.is_empty() {
                self.after_commit.extend(answers);
                self.schedule_commit(myself);
            }
            return;
        }
        if !self.is_current(&alias, instance) || self.retiring(&alias, instance) {
            for (reply, answer) in answers {
                let _ = reply.send(answer);
            }
            return;
        }
        // Everything published (snapshots and events) passes here: no secret in it.
        server.scrub();
        // A successful candidate becomes enabled only now that it is ready, and durable
        // before it is visible: if the state cannot be written, nothing is published.
        if server.state == ServerState::Ready
            && self.entries.get(&alias).is_some_and(|entry| !entry.enabled)
        {
            if let Some(entry) = self.entries.get_mut(&alias)
                && let Some(candidate) = entry.candidate.take()
            {
                entry.specialized = entry.source == Source::Service
                    && entry.service.as_deref() != Some(&*candidate);
                entry.definition = candidate;
            }
            if let Err(problem) = self.persist_enabled(&alias) {
                // What the attachment would have answered "ready" never became visible.
                for (reply, _) in answers {
                    let _ = reply.send(Err(problem.clone()));
                }
                self.abandon_candidate(&alias, problem);
                return;
            }
            if let Some(entry) = self.entries.get_mut(&alias) {
                entry.enabled = true;
                entry.fresh = false;
            }
        }
        // Actions the attachment settled with this state are answered once it is committed.
        if !answers.is_empty() {
            self.after_commit.extend(answers);
            self.schedule_commit(myself);
        }
        let previous = self.set_server(&alias, Arc::new(server.clone()));
        if previous.as_ref().map(|p| p.state) != Some(server.state) {
            self.state_changed(
                &alias,
                previous.map(|p| p.state),
                server.state,
                server.problem.clone(),
            );
        }
        // Reports arriving in a burst (hydration of many servers) become one snapshot: the
        // commit is a message queued behind them. Waiters are answered only once the
        // snapshot that shows their server is published.
        if server.state != ServerState::Connecting
            && let Some(pending) = self.pending.get_mut(&alias)
        {
            for reply in pending.settle.drain(..) {
                // Only a server that failed carries a Problem (a ready one has none).
                let answer = match &server.problem {
                    Some(problem) => Err(problem.clone()),
                    None => Ok(server.clone()),
                };
                self.after_commit.push((reply, answer));
            }
        }
        self.schedule_commit(myself);
    }

    /// Queues one `Commit` behind whatever the mailbox already holds, unless one is queued.
    fn schedule_commit(&mut self, myself: &ActorRef<WorkspaceMsg>) {
        if !self.commit_scheduled {
            self.commit_scheduled = true;
            let _ = myself.cast(WorkspaceMsg::Commit);
        }
    }

    /// Writes that `alias` is enabled (and, for an added server, its definition).
    fn persist_enabled(&self, alias: &str) -> Result<(), Problem> {
        let (Some(store), Some(entry)) = (&self.store, self.entries.get(alias)) else {
            return Ok(());
        };
        if entry.source == Source::Workspace || entry.specialized {
            let durable = entry.definition.to_durable().map_err(|errors| {
                Problem::invalid_definition(format!(
                    "server \"{alias}\" cannot be stored: {errors}"
                ))
            })?;
            let definition = serde_json::to_value(&durable).map_err(|error| {
                Problem::invalid_definition(format!("server \"{alias}\" cannot be stored: {error}"))
            })?;
            let record = ServerRecord {
                alias: alias.to_owned(),
                definition,
                source: if entry.source == Source::Workspace {
                    RecordSource::Added
                } else {
                    RecordSource::Specialized
                },
            };
            let written = if entry.fresh {
                store.add_server(&self.name, &record, true)
            } else {
                store.put_server_enabled(&self.name, &record, true)
            };
            return written.map_err(|error| match error {
                StoreError::Exists { .. } => Problem::conflict(error.to_string()),
                error => state_problem(alias, &error),
            });
        }
        store
            .set_enabled(&self.name, alias, true)
            .map_err(|error| state_problem(alias, &error))
    }

    /// A ready candidate whose state could not be written: stop it, publish nothing, and
    /// answer its waiters with the Problem.
    fn abandon_candidate(&mut self, alias: &str, problem: Problem) {
        if let Some(attached) = self.attachments.get_mut(alias) {
            attached.draining = true;
            let _ = attached.actor.cast(AttachmentMsg::Drain {
                reason: "its state could not be saved".into(),
                cancel: true,
            });
        }
        let pending = self.pending.entry(alias.to_owned()).or_default();
        for reply in pending.settle.drain(..) {
            let _ = reply.send(Err(problem.clone()));
        }
        // A failed add leaves no trace once its attachment is gone.
        if self
            .entries
            .get(alias)
            .is_some_and(|entry| entry.source == Source::Workspace)
        {
            pending.then = Then::Forget;
        }
    }

    fn on_candidate_failed(
        &mut self,
        alias: &str,
        instance: u64,
        problem: Problem,
        pending: Option<crate::model::PendingAuthorization>,
    ) {
        if let Some(successor) = self.successor(alias, instance) {
            // The live session stays, under its definition.
            for reply in successor.settle.drain(..) {
                let _ = reply.send(Err(problem.clone()));
            }
            if let Some(attached) = self.attachments.get_mut(alias) {
                attached.successor = None;
            }
            if let Some(entry) = self.entries.get_mut(alias) {
                entry.candidate = None;
            }
            return;
        }
        if !self.is_current(alias, instance) {
            return;
        }
        // A candidate waiting for authorization publishes nothing, and its action answers
        // with where to authorize it (the 202).
        let waiting = pending.map(|pending| {
            let mut snapshot = self.placeholder(alias, true);
            snapshot.state = ServerState::AuthorizationRequired;
            snapshot.problem = Some(problem.clone());
            snapshot.authorization = Some(pending);
            snapshot
        });
        self.attachments.remove(alias);
        if let Some(entry) = self.entries.get_mut(alias) {
            entry.candidate = None;
        }
        // A failed add leaves no trace; a failed enable leaves the server disabled.
        if let Some(entry) = self.entries.get(alias)
            && entry.source == Source::Workspace
            && !entry.enabled
            && !self.servers.contains_key(alias)
        {
            self.entries.remove(alias);
        }
        if let Some(pending) = self.pending.get_mut(alias) {
            for reply in pending.settle.drain(..) {
                let _ = reply.send(match &waiting {
                    Some(snapshot) => Ok(snapshot.clone()),
                    None => Err(problem.clone()),
                });
            }
        }
    }

    async fn on_detached(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        instance: u64,
        result: Result<(), String>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(successor) = self.successor(&alias, instance) {
            successor.step = Step::Stopped;
            return Ok(());
        }
        if instance != u64::MAX && !self.is_current(&alias, instance) {
            return Ok(());
        }
        if let Err(detail) = result {
            tracing::warn!(server = %alias, %detail, "server did not close cleanly");
            if let Some((_, failures)) = self.shutdown.as_mut() {
                failures.push(CloseFailure {
                    workspace: self.name.clone(),
                    alias: alias.clone(),
                    detail,
                });
            }
        }
        if self.on_retired(myself, &alias) {
            return Ok(());
        }
        self.attachments.remove(&alias);
        let pending = self.pending.remove(&alias).unwrap_or_default();
        if let Then::Revert { .. } = pending.then {
            self.revert(&alias);
        }
        // What the disable/remove answers: the server as it now is, disabled (a removed
        // server's last view, since it is gone from the snapshot).
        let mut answer = self.placeholder(&alias, false);
        if pending.then == Then::Forget {
            self.entries.remove(&alias);
            if let Some(last) = self.servers.remove(alias.as_str()) {
                answer.transport = last.transport;
            }
        } else if self.entries.contains_key(&alias) {
            let placeholder = self.placeholder(&alias, false);
            let previous = self.set_server(&alias, Arc::new(placeholder.clone()));
            self.state_changed(
                &alias,
                previous.map(|p| p.state),
                ServerState::Disabled,
                None,
            );
        }
        for reply in pending.detach {
            self.after_commit.push((reply, Ok(answer.clone())));
        }
        // Detaching many servers at once (shutdown) becomes one snapshot, like hydration.
        self.schedule_commit(myself);
        if self.shutdown.is_some() {
            for reply in pending.settle {
                let _ = reply.send(Err(Problem::shutting_down()));
            }
            self.finish_shutdown_if_done();
        } else if let Then::Enable | Then::Revert { enable: true } = pending.then {
            self.pending.entry(alias.clone()).or_default().settle = pending.settle;
            // The re-enable is an interactive enable: prepared as a candidate, it becomes
            // enabled (and durable) only once ready.
            self.attach(myself, &alias, Origin::Candidate).await?;
        }
        Ok(())
    }

    /// Goes back to the service definition of `alias`, disabled (a removed specialization).
    fn revert(&mut self, alias: &str) {
        if let Some(entry) = self.entries.get_mut(alias)
            && let Some(service) = entry.service.clone()
        {
            entry.definition = service;
            entry.candidate = None;
            entry.specialized = false;
            entry.enabled = false;
        }
    }

    /// The definition an enable asks for: the current one, or the cascade's result.
    /// What an entry's definition may expand: all of the operator's environment for a
    /// declared server; for an added one only the names handed to workspaces; for a
    /// customized one those and what the declared definition itself refers to. Applied at
    /// every connection, so a definition that comes back from the state file is held to
    /// today's list, not the one it was admitted under.
    fn expansion_env(&self, entry: &Entry) -> Arc<crate::config::Environment> {
        let admission = &self.settings.admission;
        match (&entry.source, entry.specialized, &entry.candidate) {
            (Source::Workspace, _, _) => admission.env.clone(),
            (Source::Service, false, None) => self.settings.env.clone(),
            (Source::Service, _, _) => {
                let mut names = admission.names.clone();
                if let Some(service) = &entry.service {
                    names.extend(service.referenced_names());
                }
                Arc::new(self.settings.env.only(&names))
            }
        }
    }

    /// Why `alias` may not connect now that the install gate is closed: a server a workspace
    /// added, or a declared one it customized, exists only by the gate, which closes behind
    /// it (`403 install-gate-closed`). It is kept, and connects again once the operator
    /// opens the gate.
    fn closed_gate(&self, alias: &str) -> Option<Problem> {
        let entry = self.entries.get(alias)?;
        let gated = entry.source == Source::Workspace || entry.specialized;
        (gated && !self.settings.admission.allow).then(|| Problem {
            status: 403,
            kind: "install-gate-closed".into(),
            detail: format!(
                "server \"{alias}\" was {} at runtime, which the operator no longer allows \
                 (PLURNK_MCP_ALLOW_ADD is off): it is kept as it is and connects again when \
                 they allow it; remove it, or disable it, to stop seeing this",
                if entry.source == Source::Workspace {
                    "added"
                } else {
                    "customized"
                }
            ),
            retryable: false,
        })
    }

    /// The install gate: a workspace may add a server, or enable one with a definition other
    /// than `declared`, only when the operator allows it (`PLURNK_MCP_ALLOW_ADD`), and the
    /// definition may refer only to the names the operator hands to workspaces
    /// (`PLURNK_MCP_WORKSPACE_ENV`) beyond those `declared` already refers to. Such a
    /// definition is kept, so it may hold no credential written literally (`400
    /// literal-credential`, before anything connects).
    fn admit(
        &self,
        alias: &str,
        definition: &ServerDefinition,
        declared: Option<&ServerDefinition>,
    ) -> Result<(), Problem> {
        let admission = &self.settings.admission;
        if !admission.allow {
            return Err(Problem::forbidden(format!(
                "server \"{alias}\" cannot be added or customized here: the operator has not \
                 allowed servers at runtime (PLURNK_MCP_ALLOW_ADD=true); ask them, or use a \
                 server they declared"
            )));
        }
        definition
            .refuse_literal_credentials()
            .map_err(|refused| Problem::literal_credential(&refused))?;
        let known = declared
            .map(ServerDefinition::referenced_names)
            .unwrap_or_default();
        let refused: Vec<String> = definition
            .referenced_names()
            .into_iter()
            .filter(|name| !known.contains(name) && !admission.names.contains(name))
            .collect();
        if refused.is_empty() {
            return Ok(());
        }
        Err(Problem::forbidden(format!(
            "server \"{alias}\" refers to {}, which the operator does not hand to workspaces: \
             ask them to list it in PLURNK_MCP_WORKSPACE_ENV",
            refused
                .iter()
                .map(|name| format!("${{{name}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    fn requested(
        &self,
        alias: &str,
        customize: &Customize,
    ) -> Result<Arc<ServerDefinition>, Problem> {
        let Some(entry) = self.entries.get(alias) else {
            return Err(Problem::unknown_server(alias));
        };
        if customize.is_empty() {
            return Ok(entry.definition.clone());
        }
        let workspace =
            (entry.source == Source::Workspace || entry.specialized).then(|| &*entry.definition);
        let resolved = resolve(
            entry.service.as_deref(),
            workspace,
            customize.overlay.as_ref(),
            customize.options.as_ref(),
        )
        .and_then(|definition| {
            definition
                .check_references(&self.settings.env)
                .map(|()| definition)
        })
        .map_err(|errors| {
            Problem::invalid_definition(format!(
                "server \"{alias}\" cannot be enabled with that configuration: {errors}"
            ))
        })?;
        Ok(Arc::new(resolved))
    }

    async fn enable(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        customize: Customize,
        reply: ActionReply,
    ) -> Result<(), ActorProcessingErr> {
        if self.shutdown.is_some() {
            let _ = reply.send(Err(Problem::shutting_down()));
            return Ok(());
        }
        let requested = match self.requested(&alias, &customize) {
            Ok(requested) => requested,
            Err(problem) => {
                let _ = reply.send(Err(problem));
                return Ok(());
            }
        };
        // A change under way is joined when it asks for the same, refused when not.
        if let Some(successor) = self
            .attachments
            .get_mut(&alias)
            .and_then(|attached| attached.successor.as_mut())
            .filter(|successor| successor.live())
        {
            if *successor.definition == *requested {
                successor.settle.push(reply);
            } else {
                let _ = reply.send(Err(Problem::conflict(format!(
                    "server \"{alias}\" is already changing to another definition: enable it \
                     again once that change has finished"
                ))));
            }
            return Ok(());
        }
        let same = self
            .entries
            .get(&alias)
            .is_some_and(|entry| *entry.definition == *requested);
        if same && let Some(problem) = self.closed_gate(&alias) {
            let _ = reply.send(Err(problem));
            return Ok(());
        }
        if !same {
            // A definition other than the one the operator declared (or admitted) is a new
            // server as far as the install gate goes.
            let declared = self
                .entries
                .get(&alias)
                .map(|entry| entry.definition.clone());
            if let Err(problem) = self.admit(&alias, &requested, declared.as_deref()) {
                let _ = reply.send(Err(problem));
                return Ok(());
            }
            if let Some(entry) = self.entries.get_mut(&alias) {
                entry.candidate = Some(requested.clone());
            }
            if self
                .attachments
                .get(&alias)
                .is_some_and(|attached| !attached.draining)
            {
                // Connected: the new definition is prepared beside the live session, which
                // serves until the swap.
                return self
                    .prepare_successor(myself, &alias, requested, reply)
                    .await;
            }
        }
        match self.attachments.get(&alias) {
            Some(attached) if attached.draining => {
                // Re-enable behind the pending disable commit, never beside it.
                let pending = self.pending.entry(alias).or_default();
                pending.then = pending.then.enable();
                pending.settle.push(reply);
            }
            Some(attached) => {
                // The attachment answers itself: only it knows which attempt is the
                // reconnect, so a late report of the old connection cannot answer it.
                let _ = attached.actor.cast(AttachmentMsg::Reconnect { reply });
            }
            None => {
                self.pending
                    .entry(alias.clone())
                    .or_default()
                    .settle
                    .push(reply);
                self.attach(myself, &alias, Origin::Candidate).await?;
            }
        }
        Ok(())
    }

    fn disable(&mut self, alias: String, reply: ActionReply, removal: Removal) {
        let remove = removal != Removal::Keep;
        if self.shutdown.is_some() {
            let _ = reply.send(Err(Problem::shutting_down()));
            return;
        }
        if !self.entries.contains_key(&alias) {
            let _ = reply.send(Err(Problem::unknown_server(&alias)));
            return;
        }
        // A disable or removal ends its authorization: the pending one and the tokens.
        self.settings.connect.oauth.clear(&self.name, &alias);
        // Durable first: if the state cannot be written, nothing else changes.
        if let Some(store) = &self.store {
            let written = match removal {
                Removal::Keep => store.set_enabled(&self.name, &alias, false),
                Removal::Forget => store.remove_server(&self.name, &alias),
                Removal::Revert => store.revert_server(&self.name, &alias),
            };
            if let Err(error) = written {
                let _ = reply.send(Err(state_problem(&alias, &error)));
                return;
            }
        }
        let Some(entry) = self.entries.get_mut(&alias) else {
            let _ = reply.send(Err(Problem::unknown_server(&alias)));
            return;
        };
        entry.enabled = false;
        match self.attachments.get_mut(&alias) {
            Some(attached) => {
                let pending = self.pending.entry(alias.clone()).or_default();
                pending.detach.push(reply);
                pending.then = pending.then.disable(removal);
                // Waiters of an enable that is now superseded get the disable's outcome.
                let superseded = Problem::conflict(format!(
                    "server \"{alias}\" was disabled before it finished connecting"
                ));
                for waiting in pending.settle.drain(..) {
                    let _ = waiting.send(Err(superseded.clone()));
                }
                if let Some(successor) = &mut attached.successor {
                    // Its calls (if it already had the new ones) settle before the commit.
                    let cancel = matches!(successor.step, Step::Preparing);
                    successor.stop("it is being disabled", cancel, &superseded);
                }
                if !attached.draining {
                    attached.draining = true;
                    let _ = attached.actor.cast(AttachmentMsg::Drain {
                        reason: if remove {
                            "it is being removed".into()
                        } else {
                            "it is being disabled".into()
                        },
                        cancel: false,
                    });
                }
            }
            None => {
                // Already disabled: a no-op, a plain removal, or a revert to the service
                // definition.
                match removal {
                    Removal::Keep => {}
                    Removal::Forget => {
                        self.entries.remove(&alias);
                        self.servers.remove(alias.as_str());
                        self.commit();
                    }
                    Removal::Revert => {
                        self.revert(&alias);
                        let placeholder = Arc::new(self.placeholder(&alias, false));
                        self.set_server(&alias, placeholder);
                        self.commit();
                    }
                }
                let answer = self
                    .servers
                    .get(alias.as_str())
                    .cloned()
                    .map(|server| (*server).clone())
                    .unwrap_or_else(|| self.placeholder(&alias, false));
                let _ = reply.send(Ok(answer));
            }
        }
    }

    fn finish_shutdown_if_done(&mut self) {
        if self.attachments.is_empty()
            && let Some((reply, failures)) = self.shutdown.take()
        {
            let _ = reply.send(failures);
            // Keep refusing new work after the reply.
            self.shutdown = None;
            self.entries
                .values_mut()
                .for_each(|entry| entry.enabled = false);
        }
    }

    fn summaries(&self, client: &[ServerDefinition]) -> Vec<ServerSummary> {
        let mut summaries: Vec<ServerSummary> = self
            .entries
            .iter()
            .map(|(alias, entry)| {
                let server = self
                    .servers
                    .get(alias.as_str())
                    .cloned()
                    .map(|server| (*server).clone())
                    .unwrap_or_else(|| self.placeholder(alias, entry.enabled));
                let definition = serde_json::to_value(&*entry.definition).unwrap_or_default();
                let target = shown_target(&definition);
                ServerSummary {
                    alias: alias.clone(),
                    source: match (entry.source, entry.specialized) {
                        (Source::Workspace, _) => "workspace",
                        (Source::Service, true) => "specialized",
                        (Source::Service, false) => "service",
                    },
                    target,
                    transport: server.transport,
                    enabled: entry.enabled,
                    state: server.state,
                    problem: server.problem.clone(),
                    negotiated: server.negotiated.clone(),
                    tools: server.tools.iter().map(|tool| tool.name.clone()).collect(),
                    read: entry.definition.read().to_vec(),
                    definition,
                }
            })
            .collect();
        // A client-only definition is shown disabled with source `client`; carrying it
        // neither connects nor persists it.
        for definition in client {
            if self.entries.contains_key(definition.alias()) {
                continue;
            }
            let rendered = serde_json::to_value(definition).unwrap_or_default();
            summaries.push(ServerSummary {
                alias: definition.alias().to_owned(),
                source: "client",
                target: shown_target(&rendered),
                transport: definition.transport().kind(),
                enabled: false,
                state: ServerState::Disabled,
                problem: None,
                negotiated: None,
                tools: Vec::new(),
                read: definition.read().to_vec(),
                definition: rendered,
            });
        }
        summaries.sort_by(|a, b| a.alias.cmp(&b.alias));
        summaries
    }

    /// Puts `server` in the map under `alias`, keeping the key it had: a state change
    /// allocates no key, and a commit's copy of the map shares every one.
    fn set_server(
        &mut self,
        alias: &str,
        server: Arc<ServerSnapshot>,
    ) -> Option<Arc<ServerSnapshot>> {
        match self.servers.get_mut(alias) {
            Some(slot) => Some(std::mem::replace(slot, server)),
            None => {
                self.servers.insert(Arc::from(alias), server);
                None
            }
        }
    }

    /// Tells subscribers that `alias` moved from `from` to `to`, and counts the move.
    fn state_changed(
        &self,
        alias: &str,
        from: Option<ServerState>,
        to: ServerState,
        problem: Option<Problem>,
    ) {
        metrics::counter!("plurnk_mcp_state_changes_total", "to" => to.as_str()).increment(1);
        let _ = self.events.send(HostEvent::StateChanged {
            workspace: self.name.clone(),
            alias: alias.to_owned(),
            from,
            to,
            problem,
        });
    }

    /// Builds and swaps in a new snapshot: the one place a workspace's view changes.
    fn commit(&mut self) {
        self.version += 1;
        metrics::counter!("plurnk_mcp_commits_total").increment(1);
        let snapshot = Arc::new(WorkspaceSnapshot {
            workspace: self.name.clone(),
            version: self.version,
            servers: self.servers.clone(),
        });
        // Most commits change a server's state, not who serves it: the last routes are
        // reused unless an attachment came, went or was replaced.
        let same = self.routes.len() == self.attachments.len()
            && self.attachments.iter().all(|(alias, attached)| {
                self.routes.get(alias).is_some_and(|route| {
                    Arc::ptr_eq(&route.session, &attached.session)
                        && route.actor.get_id() == attached.actor.get_id()
                })
            });
        if !same {
            self.routes = Arc::new(
                self.attachments
                    .iter()
                    .map(|(alias, attached)| {
                        let route = Route {
                            session: attached.session.clone(),
                            actor: attached.actor.clone(),
                        };
                        (alias.clone(), route)
                    })
                    .collect(),
            );
        }
        let routes = self.routes.clone();
        for (state, count) in state_counts(snapshot.servers.values().map(|s| s.state)) {
            metrics::gauge!("plurnk_mcp_attachments", "workspace" => self.name.clone(), "state" => state.as_str())
                .set(count as f64);
        }
        self.published
            .send_replace(Arc::new(Published { snapshot, routes }));
        let _ = self.events.send(HostEvent::SnapshotCommitted {
            workspace: self.name.clone(),
            version: self.version,
        });
        for (reply, answer) in self.after_commit.drain(..) {
            let _ = reply.send(answer);
        }
    }
}
/// A durable-state failure as the action's Problem; it names the alias, never a value.
fn state_problem(alias: &str, error: &StoreError) -> Problem {
    Problem {
        status: 500,
        kind: "state-write-failed".into(),
        detail: format!(
            "the state of server \"{alias}\" could not be saved, so nothing changed: {error}"
        ),
        retryable: true,
    }
}

/// How many servers are in each state (every state named, zero included): the
/// `plurnk_mcp_attachments` gauge.
fn state_counts(states: impl Iterator<Item = ServerState>) -> [(ServerState, usize); 6] {
    let mut counts = [
        ServerState::Disabled,
        ServerState::Connecting,
        ServerState::Ready,
        ServerState::Unavailable,
        ServerState::CrashLoop,
        ServerState::AuthorizationRequired,
    ]
    .map(|state| (state, 0));
    for state in states {
        if let Some((_, count)) = counts.iter_mut().find(|(known, _)| *known == state) {
            *count += 1;
        }
    }
    counts
}

/// What a definition runs or reaches, as a summary shows it: the command, the URL, or a tool
/// source's program, script or document.
fn shown_target(definition: &serde_json::Value) -> String {
    let declaration = definition.get("declaration");
    definition
        .get("command")
        .or_else(|| definition.get("url"))
        .or_else(|| declaration.and_then(|d| d.get("command")))
        .or_else(|| declaration.and_then(|d| d.get("path")))
        .or_else(|| declaration.and_then(|d| d.get("spec")))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_counts_servers_in_every_state() {
        let states = [
            ServerState::Ready,
            ServerState::Disabled,
            ServerState::Ready,
            ServerState::CrashLoop,
        ];
        assert_eq!(
            state_counts(states.into_iter()),
            [
                (ServerState::Disabled, 1),
                (ServerState::Connecting, 0),
                (ServerState::Ready, 2),
                (ServerState::Unavailable, 0),
                (ServerState::CrashLoop, 1),
                (ServerState::AuthorizationRequired, 0),
            ]
        );
    }
}
