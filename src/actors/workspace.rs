//! The workspace actor: the available and enabled sets, the attachments, and the snapshot.
//!
//! It is the only writer of its workspace's [`WorkspaceSnapshot`](crate::model::WorkspaceSnapshot). Attachments report their
//! state with `Publish`; each report replaces that server's entry whole, and the next commit
//! publishes every report since the last as one new immutable snapshot, so readers never see
//! a half-published server.
//! Disable and remove commit the reduced snapshot only when the attachment has drained
//! (invariant 4), and a re-enable that arrives meanwhile waits behind that commit.
//!
//! # Layout
//!
//! This file holds the state and the actor, whose `handle` gives each message to one method;
//! the rooms beside it import one way (lifecycle → successor; each may use this file):
//!
//! - `lifecycle.rs`: add, enable, disable, remove, the reports and detaches that settle them,
//!   an attachment's crash, the shutdown
//! - `successor.rs`: a definition replaced while the server runs, swapped at quiescence
//! - `gate.rs`: the install gate and what each definition may expand
//! - `commit.rs`: the one writer of the snapshot, a burst of reports committed as one
//! - `attachments.rs`: the live attachments and the routes to them, changed together
//! - `summary.rs`: what `list` shows
//! - `durable.rs`: the store: the state a workspace starts from, every write run in a task of
//!   its own (the server's messages wait behind it, in order), and the changes other hosts
//!   made, applied as if they were actions here

mod attachments;
mod commit;
mod durable;
mod gate;
mod lifecycle;
mod successor;
mod summary;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::{broadcast, watch};

use self::attachments::{Attached, Attachments, Routes};
use self::commit::Coalescing;
use self::durable::{Phase, Reload, Writing};
use self::lifecycle::Pending;
use super::attachment::{AttachmentActor, AttachmentArgs, AttachmentMsg, Origin, Settings};
use super::messages::{ActionReply, WorkspaceMsg};
use super::seed::{Provenance, Reseed, Seed};
use crate::config::ServerDefinition;
use crate::model::{CloseFailure, HostEvent};
use crate::model::{Problem, ServerSnapshot, ServerState, Servers};
use crate::protocol::Session;
use crate::store::{Change, ServerRecord, Store, StoreError, Version};

/// What readers of a workspace see: the snapshot, and the routes calls take (a persistent
/// map, shared from one commit to the next like the snapshot's servers).
#[derive(Debug)]
pub(crate) struct Published {
    pub snapshot: Arc<crate::model::WorkspaceSnapshot>,
    pub routes: Routes,
}

/// Where calls to one server go: its session (directly, in the caller's task), and the
/// attachment actor that owns it.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub session: Arc<Session>,
    pub actor: ActorRef<AttachmentMsg>,
}

/// What a disable does to the server's durable record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// A disable: the record stays, marked disabled.
    Keep,
    /// A removal of an added server: record and enabledness go.
    Forget,
    /// A removal of a specialization: the record goes, the service server stays disabled.
    Revert,
}

/// The start-up arguments.
pub(crate) struct WorkspaceArgs {
    pub name: String,
    /// The definitions it starts with, or `None` to read them from the store first (in a
    /// task: the mailbox does not wait on the store).
    pub definitions: Option<BTreeMap<String, Seed>>,
    /// The durable version of each alias the definitions were read at.
    pub versions: BTreeMap<String, Version>,
    /// Builds the definitions from the workspace's durable state.
    pub reseed: Reseed,
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
    provenance: Provenance,
    enabled: bool,
    /// What its next enable writes.
    stored: Stored,
}

/// What a server's enable writes to the store once its candidate is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Its state, over what the store holds (from the version last seen).
    Write,
    /// An added server the store does not hold yet: its first write must not overwrite a
    /// record another host wrote meanwhile.
    Fresh,
    /// Nothing: another host made this state durable, and this one follows it.
    Durable,
}

impl Entry {
    /// The candidate becomes the definition (it is ready): a service server whose
    /// definition now differs from the declared one is specialized, else it is as declared.
    fn adopt_candidate(&mut self) {
        if let Some(candidate) = self.candidate.take() {
            if self.provenance != Provenance::Added {
                let differs = self.service.as_deref() != Some(&*candidate);
                self.provenance = Provenance::from_service(differs);
            }
            self.definition = candidate;
        }
    }
}

/// The workspace's mutable state.
pub(crate) struct WorkspaceState {
    name: String,
    settings: Arc<Settings>,
    entries: BTreeMap<String, Entry>,
    /// The live attachments, with the routes to them.
    attachments: Attachments,
    /// Every server's current view, by alias, with the count in each state; each snapshot
    /// is a clone, which shares all of it (a commit copies nothing of the map).
    servers: Servers,
    version: u64,
    next_instance: u64,
    pending: HashMap<String, Pending>,
    crashes: HashMap<String, VecDeque<Instant>>,
    published: watch::Sender<Arc<Published>>,
    events: broadcast::Sender<HostEvent>,
    shutdown: Option<(RpcReplyPort<Vec<CloseFailure>>, Vec<CloseFailure>)>,
    store: Option<Arc<dyn Store>>,
    /// Whether a commit is queued, and when the last one was.
    coalescing: Coalescing,
    /// Answers that wait for the next commit.
    after_commit: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    /// Calls in flight on every attachment of this workspace, for its overload bound.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Builds definitions from durable state (at start, and for changes other hosts made).
    reseed: Reseed,
    /// The durable version of each alias as this workspace last wrote or read it: what its
    /// next write expects, and how an announcement of its own write is told from another's.
    versions: HashMap<String, Version>,
    /// Durable writes in flight, by alias; the alias's messages wait behind each.
    writing: HashMap<String, Writing>,
    /// Messages that wait for every write in flight to finish (a shutdown).
    held: VecDeque<WorkspaceMsg>,
    /// Messages released by a finished write (or by the start), handled next, in order.
    replay: VecDeque<WorkspaceMsg>,
    /// Whether the definitions are known yet.
    phase: Phase,
    /// A read of the durable state after an announcement.
    reload: Reload,
    /// The hydration under way, while its attachments are spawned: each one's first
    /// attempt is a child of it (a span; feature `otel`).
    hydrating: Option<tracing::Span>,
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
        let phase = match &args.definitions {
            Some(_) => Phase::Running,
            None => Phase::Seeding(VecDeque::new()),
        };
        let entries = args
            .definitions
            .unwrap_or_default()
            .into_iter()
            .map(|(alias, seed)| (alias, Entry::of(seed)))
            .collect();
        Ok(WorkspaceState {
            name: args.name,
            settings: args.settings,
            entries,
            attachments: Attachments::default(),
            servers: Servers::new(),
            version: args.version,
            next_instance: 0,
            pending: HashMap::new(),
            crashes: HashMap::new(),
            published: args.published,
            events: args.events,
            shutdown: None,
            hydrating: None,
            store: args.store,
            coalescing: Coalescing::default(),
            after_commit: Vec::new(),
            in_flight: Arc::default(),
            reseed: args.reseed,
            versions: args.versions.into_iter().collect(),
            writing: HashMap::new(),
            held: VecDeque::new(),
            replay: VecDeque::new(),
            phase,
            reload: Reload::Idle,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match state.phase {
            Phase::Running => state.hydrate(&myself).await,
            Phase::Seeding(_) => state.seed(&myself).await,
        }
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.dispatch(&myself, message).await?;
        state.replay(&myself).await
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // ractor's default would stop the workspace when a child exits: never do that.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            let failed = WorkspaceMsg::ChildFailed {
                id: cell.get_id(),
                error: error.to_string(),
            };
            state.dispatch(&myself, failed).await?;
            state.replay(&myself).await?;
        }
        Ok(())
    }
}

// === impl Entry ===

impl Entry {
    /// A definition as the workspace starts with it (or reads it from the store).
    fn of(seed: Seed) -> Self {
        Entry {
            definition: seed.definition,
            service: seed.service,
            candidate: None,
            provenance: seed.provenance,
            enabled: seed.enabled,
            stored: Stored::Write,
        }
    }
}

// === impl WorkspaceState ===

impl WorkspaceState {
    /// Gives a message (or a child's failure) to the method that handles it.
    async fn run(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        message: WorkspaceMsg,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkspaceMsg::ChildFailed { id, error } => {
                self.on_child_failed(myself, id, &error).await?
            }
            WorkspaceMsg::Publish {
                alias,
                instance,
                server,
                answers,
            } => self.on_publish(myself, alias, instance, server, answers),
            WorkspaceMsg::Commit { ticket } => self.on_commit(ticket),
            WorkspaceMsg::CandidateFailed {
                alias,
                instance,
                problem,
                pending,
            } => self.on_candidate_failed(&alias, instance, problem, pending),
            WorkspaceMsg::Detached {
                alias,
                instance,
                result,
            } => self.on_detached(myself, alias, instance, result).await?,
            WorkspaceMsg::Enable {
                alias,
                customize,
                reply,
            } => self.enable(myself, alias, *customize, reply).await?,
            WorkspaceMsg::Disable { alias, reply } => {
                self.disable(myself, alias, reply, Removal::Keep, By::Action)
            }
            WorkspaceMsg::Remove { alias, reply } => self.on_remove(myself, alias, reply),
            WorkspaceMsg::Add { definition, reply } => {
                self.on_add(myself, definition, reply).await?
            }
            WorkspaceMsg::List { client, reply } => self.on_list(&client, reply),
            WorkspaceMsg::Shutdown { reply } => self.on_shutdown(reply),
            WorkspaceMsg::Seeded(read) => self.on_seeded(myself, read).await?,
            WorkspaceMsg::Written {
                alias,
                result,
                current,
            } => self.on_written(myself, alias, result, current).await?,
            WorkspaceMsg::Announced(announcement) => self.on_announced(myself, announcement),
            WorkspaceMsg::Reloaded(read) => self.on_reloaded(myself, read).await?,
            #[cfg(feature = "test-hooks")]
            WorkspaceMsg::Panic => panic!("workspace panic requested by a test"),
            #[cfg(feature = "test-hooks")]
            WorkspaceMsg::Stall { held, release } => {
                let _ = held.send(());
                let _ = release.await;
            }
        }
        Ok(())
    }

    /// Hydration: every enabled server connects in parallel, each in its own attachment.
    async fn hydrate(&mut self, myself: &ActorRef<WorkspaceMsg>) -> Result<(), ActorProcessingErr> {
        let aliases: Vec<String> = self.entries.keys().cloned().collect();
        let enabled = self.entries.values().filter(|entry| entry.enabled).count();
        // Ends when the last attempt holding it settles.
        self.hydrating = Some(crate::telemetry::hydration(&self.name, enabled));
        for alias in aliases {
            let enabled = self.entries.get(&alias).is_some_and(|entry| entry.enabled);
            let mut placeholder = self.placeholder(&alias, enabled);
            let closed = enabled.then(|| self.closed_gate(&alias)).flatten();
            if let Some(problem) = closed {
                // Kept as it is, not connected: it comes back when the gate opens again.
                placeholder.state = ServerState::Unavailable;
                placeholder.problem = Some(problem);
            }
            let idle =
                enabled && (self.settings.only.as_ref()).is_some_and(|only| !only.contains(&alias));
            if idle && placeholder.problem.is_none() {
                // This host connects only some servers; enabling this one connects it.
                placeholder.state = ServerState::Idle;
            }
            let attach = enabled && !idle && placeholder.problem.is_none();
            self.servers.insert(Arc::new(placeholder));
            if attach {
                self.attach(myself, &alias, Origin::Hydrate).await?;
            }
        }
        self.hydrating = None;
        self.commit();
        Ok(())
    }

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
            connecting: None,
            phases: None,
            recovered: None,
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
            sandbox: None,
        }
    }

    async fn attach(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        origin: Origin,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((actor, session, instance)) = self.spawn(myself, alias, origin).await? {
            self.attachments
                .insert(alias, Attached::new(actor, session, instance));
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
            hydration: self.hydrating.clone(),
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

    /// The write that makes `alias` durably enabled (and, for a workspace's own definition,
    /// its definition), if any: none without a store, or when another host wrote it.
    fn enabled_change(&self, alias: &str) -> Result<Option<Change>, Problem> {
        let (Some(_), Some(entry)) = (&self.store, self.entries.get(alias)) else {
            return Ok(None);
        };
        if entry.stored == Stored::Durable {
            return Ok(None);
        }
        let Some(source) = entry.provenance.record() else {
            return Ok(Some(Change::SetEnabled(alias.to_owned(), true)));
        };
        let durable = entry.definition.to_durable().map_err(|errors| {
            Problem::invalid_definition(format!("server \"{alias}\" cannot be stored: {errors}"))
        })?;
        let definition = serde_json::to_value(&durable).map_err(|error| {
            Problem::invalid_definition(format!("server \"{alias}\" cannot be stored: {error}"))
        })?;
        let record = ServerRecord {
            alias: alias.to_owned(),
            definition,
            source,
        };
        Ok(Some(if entry.stored == Stored::Fresh {
            Change::Add(record, true)
        } else {
            Change::PutEnabled(record, true)
        }))
    }
}

/// A durable-state failure as the action's Problem; it names the alias, never a value: `409`
/// when another host changed the server meanwhile, `503` when the store cannot be reached.
fn state_problem(alias: &str, error: &StoreError) -> Problem {
    match error {
        StoreError::Exists { .. } | StoreError::Conflict { .. } => {
            return Problem::conflict(error.to_string());
        }
        StoreError::Unavailable { .. } => return store_unavailable(&error.to_string()),
        _ => {}
    }
    Problem {
        listing: false,
        status: 500,
        kind: "state-write-failed".into(),
        detail: format!(
            "the state of server \"{alias}\" could not be saved, so nothing changed: {error}"
        ),
        retryable: true,
    }
}

/// `503 state-unavailable`: the store cannot be reached, so no management action can be made
/// durable; calls go on from the last snapshot.
fn store_unavailable(why: &str) -> Problem {
    Problem {
        listing: false,
        status: 503,
        kind: "state-unavailable".into(),
        detail: format!(
            "{why}: nothing was changed; calls go on from the last snapshot; try the action \
             again once the store is back"
        ),
        retryable: true,
    }
}

/// Who asks for a change: an action here, whose change must be made durable first, or the
/// store, which announced a change another host made durable already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    Action,
    Store,
}
