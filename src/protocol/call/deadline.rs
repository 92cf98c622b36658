//! An operation's one deadline and who may stop it (its caller, or its session closing),
//! and the courtesy owed to a server when a call is dropped before it settles: the server
//! is told (`notifications/cancelled`, `tasks/cancel`), briefly bounded.

use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{CancelTaskParams, CancelledNotificationParam};
use rmcp::service::RoleClient;
use tokio_util::sync::CancellationToken;

use super::CallContext;

/// How long a courtesy message (a cancellation) may take to hand over before it is dropped.
pub(super) const NOTIFY_BOUND: Duration = Duration::from_secs(1);

/// How long `tasks/cancel` may take to be answered before the host stops waiting.
pub(super) const TASK_CANCEL_BOUND: Duration = Duration::from_secs(2);

/// How long a call stopped by its session's closing may take to tell its server (a
/// cancellation, or a Task's cancel) before it is dropped.
pub(crate) const STOP_GRACE: Duration = NOTIFY_BOUND.saturating_add(TASK_CANCEL_BOUND);

/// What is owed to a server when its caller drops a call before it settles.
pub(super) enum Owed {
    /// `notifications/cancelled` for the request in flight.
    Request(rmcp::model::RequestId),
    /// `tasks/cancel` for the Task being followed.
    Task(String),
}

/// Sends what is owed if dropped unpaid: the call's future is the caller's own, so a caller
/// that stops waiting drops the request mid-flight, and the server must still be told. Sent
/// from a task of its own, briefly bounded.
pub(super) struct Courtesy {
    peer: Peer<RoleClient>,
    owed: Option<Owed>,
}

impl Courtesy {
    pub(super) fn owe(peer: &Peer<RoleClient>, owed: Owed) -> Self {
        Self {
            peer: peer.clone(),
            owed: Some(owed),
        }
    }

    /// The call settled: nothing is owed.
    pub(super) fn paid(&mut self) {
        self.owed = None;
    }
}

impl Drop for Courtesy {
    fn drop(&mut self) {
        let Some(owed) = self.owed.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            match owed {
                Owed::Request(id) => {
                    let notify = peer.notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the caller stopped waiting".into()),
                    ));
                    let _ = tokio::time::timeout(NOTIFY_BOUND, notify).await;
                }
                Owed::Task(task_id) => {
                    let cancel = peer.cancel_task(CancelTaskParams::new(task_id));
                    let _ = tokio::time::timeout(TASK_CANCEL_BOUND, cancel).await;
                }
            }
        });
    }
}

/// The one deadline of an operation (§mcp-host-composition: MRTR rounds, the request
/// timeout, cancellation and a Task's end are one lifecycle): every round, the creation of a
/// Task and its polling, and every interaction the operation waits on end by this instant.
/// Progress moves it only when the caller asked for that, and never past the caller's
/// maximum.
///
/// The session's closing is part of the same lifecycle: a drain past its bound, a disable,
/// a definition swap or a shutdown stops the operation as its caller would, so the server is
/// told (`notifications/cancelled`, `tasks/cancel`) before the connection closes.
#[derive(Clone, Copy)]
pub(super) struct Owning<'a> {
    pub(super) at: tokio::time::Instant,
    /// What the caller gave (or the default), for the error that says it passed.
    pub(super) budget: Duration,
    /// Cancelled when the session closes under the operation.
    pub(super) closing: &'a CancellationToken,
}

/// Who stopped an operation before it ended.
#[derive(Clone, Copy)]
pub(super) enum Stop {
    /// Its caller cancelled it.
    Caller,
    /// The session closes: a drain past its bound, a disable, a swap or a shutdown.
    Closing,
}

impl Stop {
    /// What the server is told.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Self::Caller => "cancelled by the caller",
            Self::Closing => "the client is closing the connection",
        }
    }
}

impl<'a> Owning<'a> {
    pub(super) fn of(context: &CallContext, closing: &'a CancellationToken) -> Self {
        let budget = context
            .reset_on_progress
            .map_or(context.timeout, |max_total| max_total.max(context.timeout));
        Self {
            at: tokio::time::Instant::now() + budget,
            budget,
            closing,
        }
    }

    pub(super) fn remaining(&self) -> Duration {
        self.at
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// Completes when the caller cancels or the session closes, saying which.
    pub(super) async fn stopped(&self, context: &CallContext) -> Stop {
        tokio::select! {
            () = context.cancelled() => Stop::Caller,
            () = self.closing.cancelled() => Stop::Closing,
        }
    }
}
