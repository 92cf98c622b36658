//! The workspace actor's mailbox, apart from the actor: the attachments it spawns answer it
//! through these, so the actors import one way (workspace → attachment → messages).

use ractor::RpcReplyPort;

use crate::config::ServerDefinition;
use crate::model::{CloseFailure, Customize, Problem, ServerSnapshot, ServerSummary};

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
        result: Result<(), String>,
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
    /// Test hook: panic, to exercise the supervisor.
    #[cfg(feature = "test-hooks")]
    Panic,
}
