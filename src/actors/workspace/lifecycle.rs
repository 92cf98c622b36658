//! What the workspace's actions do to a server over its life: add, enable, disable and
//! remove, the reports that settle them, the detach that ends an attachment and what follows
//! it, an attachment's crash, and the shutdown.

use std::sync::Arc;
use std::time::Instant;

use ractor::{ActorProcessingErr, ActorRef, RpcReplyPort};

use super::durable::AfterWrite;
use super::{By, Entry, Provenance, Removal, Stored, WorkspaceState};
use crate::actors::attachment::{AttachmentMsg, Origin};
use crate::actors::messages::{ActionReply, WorkspaceMsg};
use crate::config::ServerDefinition;
use crate::model::{CloseFailure, Customize, Problem, ServerSnapshot, ServerState};
use crate::protocol::CloseError;
use crate::store::Change;

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
pub(super) struct Pending {
    /// Enable/add waiters, answered when the server leaves `connecting`.
    settle: Vec<ActionReply>,
    /// Disable/remove waiters, answered when the attachment has detached.
    detach: Vec<ActionReply>,
    /// What follows the detach.
    then: Then,
}

// === impl WorkspaceState ===

impl WorkspaceState {
    pub(super) fn on_publish(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        instance: u64,
        mut server: ServerSnapshot,
        answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    ) {
        if self.successor(&alias, instance).is_some() {
            server.scrub();
            self.on_successor_report(myself, &alias, server);
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
            if let Some(entry) = self.entries.get_mut(&alias) {
                entry.adopt_candidate();
            }
            match self.enabled_change(&alias) {
                Err(problem) => {
                    // What the attachment would have answered "ready" never became visible.
                    for (reply, _) in answers {
                        let _ = reply.send(Err(problem.clone()));
                    }
                    self.abandon_candidate(&alias, problem);
                    return;
                }
                Ok(Some(change)) => {
                    let then = AfterWrite::Publish {
                        server: Box::new(server),
                        answers,
                    };
                    self.start_write(myself, &alias, change, then);
                    return;
                }
                Ok(None) => self.now_enabled(&alias),
            }
        }
        self.publish_report(myself, &alias, server, answers);
    }

    /// A ready candidate is durable (or needs no write): it is enabled now.
    pub(super) fn now_enabled(&mut self, alias: &str) {
        if let Some(entry) = self.entries.get_mut(alias) {
            entry.enabled = true;
            entry.stored = Stored::Write;
        }
    }

    /// Publishes an attachment's report: its server replaced whole, its waiters answered
    /// once the commit that shows it is out.
    pub(super) fn publish_report(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        server: ServerSnapshot,
        answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    ) {
        let alias = alias.to_owned();
        // Actions the attachment settled with this state are answered once it is committed.
        if !answers.is_empty() {
            self.after_commit.extend(answers);
            self.schedule_commit(myself);
        }
        let previous = self.servers.insert(Arc::new(server.clone()));
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

    /// A ready candidate whose state could not be written: stop it, publish nothing, and
    /// answer its waiters with the Problem.
    pub(super) fn abandon_candidate(&mut self, alias: &str, problem: Problem) {
        if let Some(attached) = self.attachments.get_mut(alias) {
            attached.draining = true;
            let _ = attached.actor().cast(AttachmentMsg::Drain {
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
            .is_some_and(|entry| entry.provenance == Provenance::Added)
        {
            pending.then = Then::Forget;
        }
    }

    pub(super) fn on_candidate_failed(
        &mut self,
        alias: &str,
        instance: u64,
        problem: Problem,
        pending: Option<crate::model::PendingAuthorization>,
    ) {
        if let Some(successor) = self.successor(alias, instance) {
            // The live session stays, under its definition.
            successor.failed(&problem);
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
            if entry.stored == Stored::Durable {
                entry.stored = Stored::Write;
            }
        }
        // A failed add leaves no trace; a failed enable leaves the server disabled.
        if let Some(entry) = self.entries.get(alias)
            && entry.provenance == Provenance::Added
            && !entry.enabled
            && !self.servers.contains(alias)
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

    pub(super) async fn on_detached(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        instance: u64,
        result: Result<(), CloseError>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(successor) = self.successor(&alias, instance) {
            successor.detached();
            return Ok(());
        }
        if !self.is_current(&alias, instance) {
            return Ok(());
        }
        self.detached(myself, alias, result).await
    }

    /// The current attachment of `alias` is gone (it closed, or crashed while closing):
    /// what its pending actions asked for follows.
    async fn detached(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        result: Result<(), CloseError>,
    ) -> Result<(), ActorProcessingErr> {
        if let Err(error) = result {
            tracing::warn!(server = %alias, %error, "server did not close cleanly");
            if let Some((_, failures)) = self.shutdown.as_mut() {
                failures.push(CloseFailure {
                    workspace: self.name.clone(),
                    alias: alias.clone(),
                    detail: error.to_string(),
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
            let previous = self.servers.insert(Arc::new(placeholder));
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
    pub(super) fn revert(&mut self, alias: &str) {
        if let Some(entry) = self.entries.get_mut(alias)
            && let Some(service) = entry.service.clone()
        {
            entry.definition = service;
            entry.candidate = None;
            entry.provenance = Provenance::Service;
            entry.enabled = false;
        }
    }

    pub(super) async fn enable(
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
        if let Some(problem) = self.store_down() {
            let _ = reply.send(Err(problem));
            return Ok(());
        }
        let requested = match self.requested(&alias, &customize) {
            Ok(requested) => requested,
            Err(problem) => {
                let _ = reply.send(Err(problem));
                return Ok(());
            }
        };
        if let Some(entry) = self.entries.get_mut(&alias)
            && entry.stored == Stored::Durable
        {
            entry.stored = Stored::Write;
        }
        self.enable_definition(myself, alias, requested, reply, By::Action)
            .await
    }

    /// Enables `alias` with `requested`: an action's (past the install gate), or the
    /// definition the store holds now (another host enabled it so).
    pub(super) async fn enable_definition(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        requested: Arc<ServerDefinition>,
        reply: ActionReply,
        by: By,
    ) -> Result<(), ActorProcessingErr> {
        // A change under way is joined when it asks for the same, refused when not.
        if let Some(successor) = self
            .attachments
            .get_mut(&alias)
            .and_then(|attached| attached.successor.as_mut())
            .filter(|successor| successor.live())
        {
            if let Err(reply) = successor.join(&requested, reply) {
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
            // server as far as the install gate goes; one another host made durable passed
            // that host's gate, which is this one's (the replicas share their operator).
            let declared = self
                .entries
                .get(&alias)
                .map(|entry| entry.definition.clone());
            if by == By::Action
                && let Err(problem) = self.admit(&alias, &requested, declared.as_deref())
            {
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
                let _ = attached.actor().cast(AttachmentMsg::Reconnect { reply });
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

    pub(super) fn disable(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        reply: ActionReply,
        removal: Removal,
        by: By,
    ) {
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
        if by == By::Action && self.store.is_some() {
            if let Some(problem) = self.store_down() {
                let _ = reply.send(Err(problem));
                return;
            }
            let change = match removal {
                Removal::Keep => Change::SetEnabled(alias.clone(), false),
                Removal::Forget => Change::Remove(alias.clone()),
                Removal::Revert => Change::Revert(alias.clone()),
            };
            let then = AfterWrite::Disable { reply, removal };
            self.start_write(myself, &alias.clone(), change, then);
            return;
        }
        self.disable_now(alias, reply, removal);
    }

    /// A disable or removal whose durable state is written: the server drains, and the
    /// reduced snapshot commits once it has.
    pub(super) fn disable_now(&mut self, alias: String, reply: ActionReply, removal: Removal) {
        let remove = removal != Removal::Keep;
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
                    successor.disable(&superseded);
                }
                if !attached.draining {
                    attached.draining = true;
                    let _ = attached.actor().cast(AttachmentMsg::Drain {
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
                        self.servers.insert(placeholder);
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

    pub(super) fn finish_shutdown_if_done(&mut self) {
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

    /// A removal: an added server goes, a specialization gives way to the service's
    /// definition, and a server the service declared stays (it can only be disabled).
    pub(super) fn on_remove(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: String,
        reply: ActionReply,
    ) {
        match self.entries.get(&alias).map(|entry| entry.provenance) {
            None => {
                let _ = reply.send(Err(Problem::unknown_server(&alias)));
            }
            // Removing the specialization reveals the service definition, disabled (and
            // durably so: the service default must not enable it again).
            Some(Provenance::Specialized) => {
                self.disable(myself, alias, reply, Removal::Revert, By::Action)
            }
            Some(Provenance::Service | Provenance::Client) => {
                let _ = reply.send(Err(Problem::conflict(format!(
                    "server \"{alias}\" comes from the service environment and cannot be removed: disable it instead"
                ))));
            }
            Some(Provenance::Added) => {
                self.disable(myself, alias, reply, Removal::Forget, By::Action)
            }
        }
    }

    /// An add: past the install gate, a new alias connects as a candidate, enabled and kept
    /// only once ready.
    pub(super) async fn on_add(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        definition: ServerDefinition,
        reply: ActionReply,
    ) -> Result<(), ActorProcessingErr> {
        let alias = definition.alias().to_owned();
        if self.shutdown.is_some() {
            let _ = reply.send(Err(Problem::shutting_down()));
            return Ok(());
        }
        if let Some(problem) = self.store_down() {
            let _ = reply.send(Err(problem));
            return Ok(());
        }
        if let Err(problem) = self.admit(&alias, &definition, None) {
            let _ = reply.send(Err(problem));
            return Ok(());
        }
        if self.entries.contains_key(&alias) {
            let _ = reply.send(Err(Problem::conflict(format!(
                "server \"{alias}\" already exists in this workspace: choose another alias, or enable it"
            ))));
            return Ok(());
        }
        self.entries.insert(
            alias.clone(),
            Entry {
                definition: Arc::new(definition),
                service: None,
                candidate: None,
                provenance: Provenance::Added,
                enabled: false,
                stored: Stored::Fresh,
            },
        );
        self.pending
            .entry(alias.clone())
            .or_default()
            .settle
            .push(reply);
        self.attach(myself, &alias, Origin::Candidate).await
    }

    /// The shutdown: every attachment (and successor) drains, cancelling its calls; the
    /// answer goes once the last has detached.
    pub(super) fn on_shutdown(&mut self, reply: RpcReplyPort<Vec<CloseFailure>>) {
        self.shutdown = Some((reply, Vec::new()));
        for attached in self.attachments.values_mut() {
            attached.draining = true;
            let _ = attached.actor().cast(AttachmentMsg::Drain {
                reason: "the host is shutting down".into(),
                cancel: true,
            });
            if let Some(successor) = &mut attached.successor {
                successor.stop("the host is shutting down", true, &Problem::shutting_down());
            }
        }
        self.finish_shutdown_if_done();
    }

    /// A child actor failed: a successor's failure is the swap's to handle; an attachment
    /// that was closing counts as detached; any other restarts as unavailable, keeping the
    /// change being prepared beside it.
    pub(super) async fn on_child_failed(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        id: ractor::ActorId,
        error: &str,
    ) -> Result<(), ActorProcessingErr> {
        if self.on_successor_failed(myself, id, error).await? {
            return Ok(());
        }
        let found = self
            .attachments
            .iter()
            .find(|(_, attached)| attached.actor().get_id() == id)
            .map(|(alias, attached)| (alias.clone(), attached.draining));
        let Some((alias, draining)) = found else {
            return Ok(());
        };
        metrics::counter!("plurnk_mcp_restarts_total").increment(1);
        if draining || self.shutdown.is_some() {
            tracing::error!(server = %alias, %error, "attachment crashed while closing");
            // It was closing anyway; its connection was dropped with it.
            return self
                .detached(myself, alias, Err(CloseError::crashed()))
                .await;
        }
        let successor = self
            .attachments
            .remove(&alias)
            .and_then(|attached| attached.successor);
        tracing::error!(server = %alias, %error, "attachment crashed; restarting it as unavailable");
        self.crashes
            .entry(alias.clone())
            .or_default()
            .push_back(Instant::now());
        let problem = Problem::server_unavailable(format!(
            "server \"{alias}\" had an internal failure and is reconnecting"
        ));
        self.attach(myself, &alias, Origin::Restarted(problem))
            .await?;
        // A change being prepared goes on beside the restarted attachment.
        if let Some(attached) = self.attachments.get_mut(&alias) {
            attached.successor = successor;
        }
        Ok(())
    }
}
