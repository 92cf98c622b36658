//! What did not go away when a connection closed: the faults a close reports, every one at
//! once, which reach the operator as a shutdown report's close failures.

/// What did not go away when a connection closed: every fault at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub(crate) struct CloseError(pub(super) Vec<CloseFault>);

/// One thing that did not go away when a connection closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CloseFault {
    /// The transport did not stop within the grace.
    #[error("the transport did not close within {ms} ms")]
    TransportTimeout { ms: u128 },
    /// The transport's task ended in a panic or was cancelled (its error, scrubbed).
    #[error("the transport task failed: {0}")]
    TransportTask(String),
    /// The attachment that owned the connection panicked while it was closing it (the
    /// connection's owner dropped it, which kills a stdio group).
    #[error("the attachment crashed while closing")]
    Crashed,
    /// A stdio server's process outlived `SIGKILL` to its group.
    #[error("process {pgid} did not exit after SIGKILL to its group")]
    Survived { pgid: i32 },
}

impl CloseError {
    /// The close of an attachment that crashed while closing.
    pub(crate) fn crashed() -> Self {
        Self(vec![CloseFault::Crashed])
    }
}
