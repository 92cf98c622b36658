//! The workspace actor's mailbox, apart from the actor: the attachments it spawns answer it
//! through these, so the actors import one way (workspace → attachment → messages).

use ractor::RpcReplyPort;

use crate::config::ServerDefinition;
use crate::model::{CloseFailure, Customize, Problem, ServerSnapshot, ServerSummary};
use crate::store::{Announcement, StoreError, Version, WorkspaceRecord};

/// A reply carrying a server's resulting snapshot or the Problem that prevented it.
pub(crate) type ActionReply = RpcReplyPort<Result<ServerSnapshot, Problem>>;

/// The workspace's messages.
pub(crate) enum WorkspaceMsg {
    /// An attachment's current state.
    Publish {
        alias: String,
        instance: u64,
        server: ServerSnapshot,
        /// Actions the attachment settled with this state, answered after its commit.
        answers: Vec<(ActionReply, Result<ServerSnapshot, Problem>)>,
    },
    /// An interactive candidate failed its first attempt and stopped.
    CandidateFailed {
        alias: String,
        instance: u64,
        problem: Problem,
        /// Where to authorize it, when that is why it failed.
        pending: Option<crate::model::PendingAuthorization>,
    },
    /// An attachment finished draining and closed.
    Detached {
        alias: String,
        instance: u64,
        result: Result<(), crate::protocol::CloseError>,
    },
    Enable {
        alias: String,
        customize: Box<Customize>,
        reply: ActionReply,
    },
    Disable {
        alias: String,
        reply: ActionReply,
    },
    Add {
        definition: ServerDefinition,
        reply: ActionReply,
    },
    Remove {
        alias: String,
        reply: ActionReply,
    },
    /// Commit the reports that arrived since the last commit, as one snapshot, unless a
    /// later `Commit` overtook this one (`ticket` is not the last sent).
    Commit {
        ticket: u64,
    },
    /// Summaries of every available server, sorted by alias.
    List {
        /// Definitions a client carries in its overlay; shown, never connected or kept.
        client: Vec<ServerDefinition>,
        reply: RpcReplyPort<Vec<ServerSummary>>,
    },
    /// Drain everything and report close failures.
    Shutdown {
        reply: RpcReplyPort<Vec<CloseFailure>>,
    },
    /// The workspace's durable state, read at its start (it waits for it before anything).
    Seeded(Result<WorkspaceRecord, StoreError>),
    /// A durable write of `alias` finished: the version it left, or why nothing was written
    /// (with the workspace's current durable state when another host changed it meanwhile).
    Written {
        alias: String,
        result: Result<Version, StoreError>,
        current: Option<WorkspaceRecord>,
    },
    /// The store announced a change another host made, or that it is back after a loss.
    Announced(Announcement),
    /// The workspace's durable state, read again after an announcement.
    Reloaded(Result<WorkspaceRecord, StoreError>),
    /// A child actor failed (its supervision event, handled in order with the messages).
    ChildFailed {
        id: ractor::ActorId,
        error: String,
    },
    /// Test hook: panic, to exercise the supervisor.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    Panic,
    /// Test hook: say `held`, then wait (the mailbox with it) until `release` ends.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    Stall {
        held: tokio::sync::oneshot::Sender<()>,
        release: tokio::sync::oneshot::Receiver<()>,
    },
}

impl WorkspaceMsg {
    /// The server a message is about, when it is about one: such a message waits behind a
    /// durable write of that server, so every server's messages keep their order.
    pub(crate) fn alias(&self) -> Option<&str> {
        match self {
            Self::Publish { alias, .. }
            | Self::CandidateFailed { alias, .. }
            | Self::Detached { alias, .. }
            | Self::Enable { alias, .. }
            | Self::Disable { alias, .. }
            | Self::Remove { alias, .. }
            | Self::Announced(Announcement::Changed { alias, .. }) => Some(alias),
            Self::Add { definition, .. } => Some(definition.alias()),
            _ => None,
        }
    }
}
