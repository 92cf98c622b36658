//! The workspace and its store: the durable state it starts from, each write run in a task of
//! its own, and the changes other hosts made, applied as if they were actions here.
//!
//! The mailbox never waits on the store (a PostgreSQL store answers over the network): a
//! write runs in a spawned task that reports back with `Written`. Until it does, every message
//! about that server waits in its [`Writing`], and runs afterwards in the order it came, so a
//! server's messages see the write as if it had been made in place; other servers go on. A
//! shutdown waits for every write in flight. A workspace opened without its definitions reads
//! them first (`Seeded`), every message waiting meanwhile.
//!
//! Every write expects the version this workspace last saw of its alias; a write another host
//! made meanwhile refuses it (`409`, with the state the store holds now, which is applied
//! here at once). An announcement of another host's write (or of the store coming back)
//! reads the workspace's durable state again and applies what moved past the versions this
//! workspace knows: through the same enable, disable and removal paths as an action, drains
//! and quiescence included, only without writing again.

use std::collections::VecDeque;
use std::sync::Arc;

use ractor::{ActorProcessingErr, ActorRef, RpcReplyPort};

use super::Removal;
use super::{
    By, Entry, Provenance, Seed, Stored, WorkspaceState, state_problem, store_unavailable,
};
use crate::actors::messages::{ActionReply, WorkspaceMsg};
use crate::model::{Problem, ServerSnapshot};
use crate::store::{Announcement, Change, Expect, StoreError, Version, WorkspaceRecord};

/// Whether the workspace knows its definitions yet.
pub(crate) enum Phase {
    /// Reading them from the store: every message waits here.
    Seeding(VecDeque<WorkspaceMsg>),
    Running,
}

/// A read of the durable state after announcements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reload {
    Idle,
    Reading,
    /// Another announcement came while reading: read once more after.
    ReadingAgain,
}

/// A durable write in flight: what follows it, and the server's messages that wait for it.
pub(crate) struct Writing {
    then: AfterWrite,
    deferred: VecDeque<WorkspaceMsg>,
}

/// What a write was for, carried on once it is durable (or answered when it is not).
pub(crate) enum AfterWrite {
    /// A ready candidate's report, published once its state is durable.
    Publish {
        server: Box<ServerSnapshot>,
        answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    },
    /// A successor's ready report: it takes over once durable; until then the previous
    /// definition is what to go back to.
    Successor {
        server: Box<ServerSnapshot>,
        previous: (Arc<crate::config::ServerDefinition>, Provenance),
    },
    /// A disable or removal, carried out once durable.
    Disable {
        reply: ActionReply,
        removal: Removal,
    },
}

// === impl WorkspaceState ===

impl WorkspaceState {
    /// Handles `item` now, or queues it behind what it must wait for.
    pub(super) async fn dispatch(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        item: WorkspaceMsg,
    ) -> Result<(), ActorProcessingErr> {
        if let Phase::Seeding(waiting) = &mut self.phase {
            if matches!(item, WorkspaceMsg::Seeded(_)) {
                return self.run(myself, item).await;
            }
            waiting.push_back(item);
            return Ok(());
        }
        if matches!(item, WorkspaceMsg::Shutdown { .. }) && !self.writing.is_empty() {
            self.held.push_back(item);
            return Ok(());
        }
        let alias = match &item {
            WorkspaceMsg::ChildFailed { id, .. } => self.alias_of(*id),
            message => message.alias().map(str::to_owned),
        };
        if let Some(alias) = alias
            && let Some(writing) = self.writing.get_mut(&alias)
        {
            writing.deferred.push_back(item);
            return Ok(());
        }
        self.run(myself, item).await
    }

    /// Handles what a finished write (or the start) released, in order.
    pub(super) async fn replay(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
    ) -> Result<(), ActorProcessingErr> {
        while let Some(item) = self.replay.pop_front() {
            self.dispatch(myself, item).await?;
        }
        Ok(())
    }

    /// The alias whose attachment (or successor) is the actor `id`.
    fn alias_of(&self, id: ractor::ActorId) -> Option<String> {
        self.attachments
            .iter()
            .find(|(_, attached)| {
                attached.actor().get_id() == id
                    || attached
                        .successor
                        .as_ref()
                        .is_some_and(|successor| successor.actor_id() == id)
            })
            .map(|(alias, _)| alias.clone())
    }

    /// Why the store cannot take a write now (it says so itself), as the action's Problem.
    pub(super) fn store_down(&self) -> Option<Problem> {
        let why = self.store.as_ref()?.unreachable()?;
        Some(store_unavailable(&why))
    }

    // --- the start ---

    /// Reads the workspace's durable state in a task; everything waits for `Seeded`. Without
    /// a store there is nothing to read: the service definitions are the workspace.
    pub(super) async fn seed(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(store) = self.store.clone() else {
            return self.on_seeded(myself, Ok(WorkspaceRecord::default())).await;
        };
        let name = self.name.clone();
        let myself = myself.clone();
        tokio::spawn(async move {
            let read = store.load_workspace(&name).await;
            let _ = myself.cast(WorkspaceMsg::Seeded(read));
        });
        Ok(())
    }

    /// The durable state arrived: the workspace is built from it and hydrates; what waited
    /// runs. A store that cannot be read, or a record that cannot be admitted, fails the
    /// workspace (its supervisor restarts it, within its bound).
    pub(super) async fn on_seeded(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        read: Result<WorkspaceRecord, StoreError>,
    ) -> Result<(), ActorProcessingErr> {
        let record = read.map_err(|error| {
            format!(
                "workspace \"{}\" cannot be opened: {}",
                self.name,
                crate::redact::scrub(&error.to_string())
            )
        })?;
        let seeds = (self.reseed)(&self.name, Some(&record)).map_err(|error| {
            format!(
                "workspace \"{}\" cannot be opened: {}",
                self.name,
                error.one_a_line()
            )
        })?;
        self.entries = seeds
            .into_iter()
            .map(|(alias, seed)| (alias, Entry::of(seed)))
            .collect();
        self.versions = record.versions.into_iter().collect();
        if let Phase::Seeding(waiting) = std::mem::replace(&mut self.phase, Phase::Running) {
            self.replay.extend(waiting);
        }
        self.hydrate(myself).await
    }

    // --- writes ---

    /// Writes `change` in a task, expecting the version last seen of `alias`; `then` carries
    /// on when it reports back, and the alias's messages wait until then.
    pub(super) fn start_write(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        change: Change,
        then: AfterWrite,
    ) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let expect = Expect::Version(self.versions.get(alias).copied().unwrap_or(0));
        let name = self.name.clone();
        let reported = alias.to_owned();
        let myself = myself.clone();
        tokio::spawn(async move {
            let result = store.write(&name, &change, expect).await;
            // Another host was first: read what it made, for the answer and to follow it.
            let current = match &result {
                Err(StoreError::Conflict { .. } | StoreError::Exists { .. }) => {
                    store.load_workspace(&name).await.ok()
                }
                _ => None,
            };
            let _ = myself.cast(WorkspaceMsg::Written {
                alias: reported,
                result,
                current,
            });
        });
        self.writing.insert(
            alias.to_owned(),
            Writing {
                then,
                deferred: VecDeque::new(),
            },
        );
    }

    /// A write reported: what it was for carries on (or is answered with why not), and the
    /// messages that waited for it run next.
    pub(super) async fn on_written(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        result: Result<Version, StoreError>,
        current: Option<WorkspaceRecord>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(writing) = self.writing.remove(&alias) else {
            return Ok(());
        };
        self.replay.extend(writing.deferred);
        if self.writing.is_empty() {
            self.replay.extend(self.held.drain(..));
        }
        let outcome = match result {
            Ok(version) => {
                self.versions.insert(alias.clone(), version);
                Ok(())
            }
            Err(error) => {
                let mut problem = state_problem(&alias, &error);
                if let Some(current) = &current {
                    problem.detail = format!(
                        "{}: {}; read the snapshot, then decide again",
                        problem.detail,
                        describe(current, &alias)
                    );
                }
                Err(problem)
            }
        };
        match (writing.then, outcome) {
            (
                AfterWrite::Publish {
                    server, answers, ..
                },
                Ok(()),
            ) => {
                self.now_enabled(&alias);
                self.publish_report(myself, &alias, *server, answers);
            }
            (AfterWrite::Publish { answers, .. }, Err(problem)) => {
                // What the attachment would have answered "ready" never became visible.
                for (reply, _) in answers {
                    let _ = reply.send(Err(problem.clone()));
                }
                self.abandon_candidate(&alias, problem);
            }
            (AfterWrite::Successor { server, .. }, Ok(())) => {
                self.swap_to_successor(&alias, *server);
            }
            (AfterWrite::Successor { previous, .. }, Err(problem)) => {
                self.successor_not_saved(&alias, previous, &problem);
            }
            (AfterWrite::Disable { reply, removal }, Ok(())) => {
                self.disable_now(alias.clone(), reply, removal);
            }
            (AfterWrite::Disable { reply, .. }, Err(problem)) => {
                let _ = reply.send(Err(problem));
            }
        }
        // The state another host made is followed here too.
        if let Some(current) = current {
            self.apply_record(myself, current).await?;
        }
        Ok(())
    }

    // --- changes other hosts made ---

    /// The store announced a change: one this workspace has not seen is read and applied;
    /// after a loss, everything is read again.
    pub(super) fn on_announced(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        announcement: Announcement,
    ) {
        match announcement {
            Announcement::Changed { alias, version, .. } => {
                if self.versions.get(&alias).copied().unwrap_or(0) < version {
                    self.start_reload(myself);
                }
            }
            Announcement::Restored => self.start_reload(myself),
            Announcement::Lost(why) => {
                tracing::warn!(workspace = %self.name, %why, "the state store is lost; calls go on from the last snapshot");
            }
            // A gateway's, not a workspace's.
            Announcement::SessionEnded { .. } => {}
        }
    }

    fn start_reload(&mut self, myself: &ActorRef<WorkspaceMsg>) {
        match self.reload {
            Reload::Reading | Reload::ReadingAgain => {
                self.reload = Reload::ReadingAgain;
                return;
            }
            Reload::Idle => self.reload = Reload::Reading,
        }
        let Some(store) = self.store.clone() else {
            self.reload = Reload::Idle;
            return;
        };
        let name = self.name.clone();
        let myself = myself.clone();
        tokio::spawn(async move {
            let read = store.load_workspace(&name).await;
            let _ = myself.cast(WorkspaceMsg::Reloaded(read));
        });
    }

    pub(super) async fn on_reloaded(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        read: Result<WorkspaceRecord, StoreError>,
    ) -> Result<(), ActorProcessingErr> {
        let again = self.reload == Reload::ReadingAgain;
        self.reload = Reload::Idle;
        match read {
            Ok(record) => self.apply_record(myself, record).await?,
            // The store is gone again: its return announces itself, and reads again.
            Err(error) => {
                tracing::warn!(workspace = %self.name, %error, "the state store could not be read again")
            }
        }
        if again {
            self.start_reload(myself);
        }
        Ok(())
    }

    /// Applies every alias of `record` whose version moved past the one this workspace knows
    /// (and that no write of its own is in flight for: that write learns of it itself).
    async fn apply_record(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        record: WorkspaceRecord,
    ) -> Result<(), ActorProcessingErr> {
        if self.shutdown.is_some() {
            return Ok(());
        }
        let mut seeds = match (self.reseed)(&self.name, Some(&record)) {
            Ok(seeds) => seeds,
            Err(error) => {
                tracing::warn!(workspace = %self.name, error = %error.one_a_line(), "another host stored a state this one cannot admit; keeping its own");
                return Ok(());
            }
        };
        let moved: Vec<(String, Version)> = record
            .versions
            .iter()
            .filter(|(alias, version)| {
                **version > self.versions.get(*alias).copied().unwrap_or(0)
                    && !self.writing.contains_key(*alias)
            })
            .map(|(alias, version)| (alias.clone(), *version))
            .collect();
        for (alias, version) in moved {
            self.versions.insert(alias.clone(), version);
            let seed = seeds.remove(&alias);
            self.apply_stored(myself, alias, seed).await?;
        }
        Ok(())
    }

    /// Makes `alias` what the store holds (`seed`, or nothing): an enable, a disable, a
    /// removal or a change of definition, each as the action would make it, without writing.
    async fn apply_stored(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        seed: Option<Seed>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(seed) = seed else {
            // Gone from the store, and no service definition: an added server was removed.
            if self.entries.contains_key(&alias) {
                self.disable(myself, alias, unanswered(), Removal::Forget, By::Store);
            }
            return Ok(());
        };
        let Some(entry) = self.entries.get_mut(&alias) else {
            // Added by another host: it joins disabled, and is enabled like theirs.
            let enabled = seed.enabled;
            let mut entry = Entry::of(seed);
            entry.enabled = false;
            let definition = entry.definition.clone();
            self.entries.insert(alias.clone(), entry);
            let mut placeholder = self.placeholder(&alias, false);
            let held = enabled.then(|| self.closed_gate(&alias)).flatten();
            if let Some(problem) = held {
                // This host's install gate is closed: the server is enabled, held by the gate
                // as at hydration (shown so, not as disabled), and connects when it opens.
                if let Some(entry) = self.entries.get_mut(&alias) {
                    entry.enabled = true;
                }
                placeholder.state = crate::model::ServerState::Unavailable;
                placeholder.problem = Some(problem);
            }
            self.servers.insert(Arc::new(placeholder));
            self.schedule_commit(myself);
            if enabled && self.closed_gate(&alias).is_none() {
                self.follow_enable(myself, alias, definition).await?;
            }
            return Ok(());
        };
        let same = *entry.definition == *seed.definition;
        entry.service = seed.service.clone();
        if !same && !seed.enabled {
            // A new definition kept disabled (a removed specialization reverts to the
            // service's): the server stops, then rests under it.
            entry.definition = seed.definition.clone();
            entry.provenance = seed.provenance;
            entry.candidate = None;
            if entry.enabled || self.attachments.get(&alias).is_some() {
                self.disable(myself, alias, unanswered(), Removal::Keep, By::Store);
            } else {
                let placeholder = self.placeholder(&alias, false);
                self.servers.insert(Arc::new(placeholder));
                self.schedule_commit(myself);
            }
            return Ok(());
        }
        if seed.enabled && (!same || !entry.enabled) {
            // Ready, the candidate is adopted as an action's would be (its provenance too).
            return self.follow_enable(myself, alias, seed.definition).await;
        }
        if !seed.enabled && (entry.enabled || self.attachments.get(&alias).is_some()) {
            self.disable(myself, alias, unanswered(), Removal::Keep, By::Store);
        }
        Ok(())
    }

    /// Enables `alias` with `definition` because the store holds it so: the candidate (or
    /// successor) writes nothing once ready.
    async fn follow_enable(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        definition: Arc<crate::config::ServerDefinition>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(entry) = self.entries.get_mut(&alias) {
            entry.stored = Stored::Durable;
        }
        self.enable_definition(myself, alias, definition, unanswered(), By::Store)
            .await
    }
}

/// A reply port nobody waits on: a change the store announced has no caller to answer.
fn unanswered() -> ActionReply {
    let (sender, _) = tokio::sync::oneshot::channel();
    RpcReplyPort::from(sender)
}

/// What the store holds now for `alias`, in words for a `409`.
fn describe(current: &WorkspaceRecord, alias: &str) -> String {
    let version = current.versions.get(alias).copied().unwrap_or(0);
    let enabled = match current.enabled.get(alias) {
        Some(true) => "enabled",
        Some(false) => "disabled",
        None => "as the service configures it",
    };
    match current.servers.get(alias) {
        Some(record) => format!(
            "the store now holds it {} ({enabled}, version {version})",
            match record.source {
                crate::store::RecordSource::Added => "added in this workspace",
                crate::store::RecordSource::Specialized => "specialized in this workspace",
            }
        ),
        None if current.enabled.contains_key(alias) => {
            format!("the store now holds it {enabled} (version {version})")
        }
        None => format!("the store now holds nothing of it (version {version})"),
    }
}
