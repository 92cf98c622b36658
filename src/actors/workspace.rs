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

mod attachments;
mod commit;
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
use self::lifecycle::{Pending, Removal};
use super::attachment::{AttachmentActor, AttachmentArgs, AttachmentMsg, Origin, Settings};
use super::messages::{ActionReply, WorkspaceMsg};
use crate::config::ServerDefinition;
use crate::model::{CloseFailure, HostEvent};
use crate::model::{Problem, ServerSnapshot, ServerState, Servers};
use crate::protocol::Session;
use crate::store::{RecordSource, ServerRecord, Store, StoreError};

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

/// Who owns a definition, as a seed names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The service environment.
    Service,
    /// Added in this workspace.
    Workspace,
}

/// Where a server's definition comes from: the one answer the entry, the store's record
/// (`RecordSource`) and the summary's `source` word each give in their own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// Declared by the service environment, as declared.
    Service,
    /// Declared by the service environment, replaced by a durable workspace definition.
    Specialized,
    /// Added in this workspace.
    Added,
    /// Carried by a client in its overlay: shown, never connected or kept.
    Client,
}

impl Provenance {
    /// What a seed says, as one answer.
    pub(crate) fn of(source: Source, specialized: bool) -> Self {
        match (source, specialized) {
            (Source::Workspace, _) => Self::Added,
            (Source::Service, true) => Self::Specialized,
            (Source::Service, false) => Self::Service,
        }
    }

    /// The service's definition, replaced or not.
    fn from_service(definition_differs: bool) -> Self {
        if definition_differs {
            Self::Specialized
        } else {
            Self::Service
        }
    }

    /// Whether the definition exists only because the install gate let it in (added, or
    /// customized), so it is kept in the store and closes with the gate.
    fn gated(self) -> bool {
        matches!(self, Self::Added | Self::Specialized)
    }

    /// How the store records it: only a workspace's own definitions are records.
    fn record(self) -> Option<RecordSource> {
        match self {
            Self::Added => Some(RecordSource::Added),
            Self::Specialized => Some(RecordSource::Specialized),
            Self::Service | Self::Client => None,
        }
    }

    /// The word a summary shows.
    fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Specialized => "specialized",
            Self::Added => "workspace",
            Self::Client => "client",
        }
    }
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
    provenance: Provenance,
    enabled: bool,
    /// An added server that the store does not hold yet: its first write must not
    /// overwrite a record another process wrote meanwhile.
    fresh: bool,
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
                        provenance: Provenance::of(seed.source, seed.specialized),
                        enabled: seed.enabled,
                        fresh: false,
                    },
                )
            })
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
            store: args.store,
            coalescing: Coalescing::default(),
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
            state.servers.insert(Arc::new(placeholder));
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
            WorkspaceMsg::Commit { ticket } => state.on_commit(ticket),
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
            WorkspaceMsg::Remove { alias, reply } => state.on_remove(alias, reply),
            WorkspaceMsg::Add { definition, reply } => {
                state.on_add(&myself, definition, reply).await?
            }
            WorkspaceMsg::List { client, reply } => state.on_list(&client, reply),
            WorkspaceMsg::Shutdown { reply } => state.on_shutdown(reply),
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
            state
                .on_child_failed(&myself, cell.get_id(), &error.to_string())
                .await?;
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

    /// Writes that `alias` is enabled (and, for an added server, its definition).
    fn persist_enabled(&self, alias: &str) -> Result<(), Problem> {
        let (Some(store), Some(entry)) = (&self.store, self.entries.get(alias)) else {
            return Ok(());
        };
        if let Some(source) = entry.provenance.record() {
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
                source,
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
