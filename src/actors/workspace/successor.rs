//! A server's definition replaced while it runs: the successor connects beside the live
//! session, takes the new calls once ready and durable, and the swap commits when the live
//! session's own calls have settled (quiescence). Every report is matched to its attachment
//! by instance number, so a late report of the replaced one changes nothing.

use std::sync::Arc;

use ractor::{ActorProcessingErr, ActorRef};

use super::durable::AfterWrite;
use super::{Attached, WorkspaceState};
use crate::actors::attachment::{AttachmentMsg, Origin};
use crate::actors::messages::{ActionReply, WorkspaceMsg};
use crate::config::ServerDefinition;
use crate::model::{Problem, ServerSnapshot, ServerState};
use crate::protocol::Session;

/// A connected server's next definition, connecting beside the live session: the live one
/// stays authoritative until the successor is ready and the live one's calls have settled
/// (the host specification's setup section: the candidate is prepared while the old
/// snapshot is authoritative, and the swap commits at quiescence).
pub(super) struct Successor {
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
    /// Its attachment actor.
    pub(super) fn actor_id(&self) -> ractor::ActorId {
        self.actor.get_id()
    }

    /// Whether it may still become the server.
    pub(super) fn live(&self) -> bool {
        matches!(self.step, Step::Preparing | Step::Swapping(_))
    }

    /// An enable that asks for `requested` while this change is under way joins it when it
    /// asks for the same definition; otherwise its reply comes back, to be refused.
    pub(super) fn join(
        &mut self,
        requested: &ServerDefinition,
        reply: ActionReply,
    ) -> Result<(), ActionReply> {
        if *self.definition == *requested {
            self.settle.push(reply);
            Ok(())
        } else {
            Err(reply)
        }
    }

    /// It failed its first attempt: its waiters are answered with `problem`.
    pub(super) fn failed(&mut self, problem: &Problem) {
        for reply in self.settle.drain(..) {
            let _ = reply.send(Err(problem.clone()));
        }
    }

    /// Its attachment detached.
    pub(super) fn detached(&mut self) {
        self.step = Step::Stopped;
    }

    /// Stopped for a disable: its calls are cancelled while it is still preparing (it has
    /// none of the new calls yet); once swapping, they settle before the commit.
    pub(super) fn disable(&mut self, answer: &Problem) {
        let cancel = matches!(self.step, Step::Preparing);
        self.stop("it is being disabled", cancel, answer);
    }

    /// Stops it (letting its calls finish unless `cancel`) and answers its waiters.
    pub(super) fn stop(&mut self, reason: &str, cancel: bool, answer: &Problem) {
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

// === impl WorkspaceState ===

impl WorkspaceState {
    /// Prepares `alias`'s pending candidate beside its live attachment.
    pub(super) async fn prepare_successor(
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

    /// The successor `instance` of `alias`, if that is what it is.
    pub(super) fn successor(&mut self, alias: &str, instance: u64) -> Option<&mut Successor> {
        self.attachments
            .get_mut(alias)
            .and_then(|attached| attached.successor.as_mut())
            .filter(|successor| successor.instance == instance)
    }

    /// Whether the live attachment of `alias` is settling its last calls for a successor
    /// (what it reports now is no longer the server's state).
    pub(super) fn retiring(&self, alias: &str, instance: u64) -> bool {
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
    pub(super) fn on_successor_report(
        &mut self,
        myself: &ActorRef<WorkspaceMsg>,
        alias: &str,
        server: ServerSnapshot,
    ) {
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
                let previous = (entry.definition.clone(), entry.provenance);
                entry.adopt_candidate();
                match self.enabled_change(alias) {
                    Err(problem) => self.successor_not_saved(alias, previous, &problem),
                    Ok(Some(change)) => {
                        let then = AfterWrite::Successor {
                            server: Box::new(server),
                            previous,
                        };
                        self.start_write(myself, alias, change, then);
                    }
                    Ok(None) => self.swap_to_successor(alias, server),
                }
            }
            Step::Preparing | Step::Stopping | Step::Stopped => {}
        }
    }

    /// The successor's state could not be written: nothing changes, the live session stays
    /// under its definition.
    pub(super) fn successor_not_saved(
        &mut self,
        alias: &str,
        previous: (Arc<ServerDefinition>, super::Provenance),
        problem: &Problem,
    ) {
        if let Some(entry) = self.entries.get_mut(alias) {
            (entry.definition, entry.provenance) = previous;
        }
        if let Some(successor) = self
            .attachments
            .get_mut(alias)
            .and_then(|attached| attached.successor.as_mut())
        {
            successor.stop("its state could not be saved", true, problem);
        }
    }

    /// The successor is ready and durable: it takes every new call, and the live attachment
    /// settles its own and detaches; the swap commits then.
    pub(super) fn swap_to_successor(&mut self, alias: &str, server: ServerSnapshot) {
        if let Some(entry) = self.entries.get_mut(alias) {
            entry.stored = super::Stored::Write;
        }
        let Some(attached) = self.attachments.get_mut(alias) else {
            return;
        };
        let Some(successor) = attached.successor.as_mut() else {
            return;
        };
        if !matches!(successor.step, Step::Preparing) {
            return;
        }
        successor.step = Step::Swapping(Box::new(server));
        let next = successor.session.clone();
        attached.session().hand_over(next);
        attached.draining = true;
        let _ = attached.actor().cast(AttachmentMsg::Drain {
            reason: "its definition changed".into(),
            cancel: false,
        });
    }

    /// The live attachment of `alias` detached while a successor was under way: the
    /// successor is swapped in (it was ready), or becomes the attachment whose detach the
    /// pending actions wait for (it was stopped with it). Returns whether it was handled.
    pub(super) fn on_retired(&mut self, myself: &ActorRef<WorkspaceMsg>, alias: &str) -> bool {
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
        // The successor becomes the attachment, and its route the server's.
        let mut successor = Attached::new(actor, session, instance);
        let server = match step {
            Step::Swapping(server) => *server,
            Step::Stopping | Step::Preparing => {
                successor.draining = true;
                self.attachments.insert(alias, successor);
                return true;
            }
            Step::Stopped => return false,
        };
        self.attachments.insert(alias, successor);
        let answer = match &server.problem {
            Some(problem) => Err(problem.clone()),
            None => Ok(server.clone()),
        };
        self.after_commit
            .extend(settle.into_iter().map(|reply| (reply, answer.clone())));
        let previous = self.servers.insert(Arc::new(server.clone()));
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
    pub(super) async fn on_successor_failed(
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
}
