//! A call that became a Task (§mcp-tasks), followed to its end under the operation's one
//! deadline: polled at the server's interval, its input asked of the caller, cancelled on
//! the server when the caller stops or the deadline passes.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::model::{
    CancelTaskParams, CustomResult, GetTaskParams, InputRequiredResult, ServerResult,
    UpdateTaskParams,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use super::deadline::{Courtesy, Owed, Owning, TASK_CANCEL_BOUND};
use super::{CallContext, CallPeer};
use crate::model::{CallError, Operation, ToolResult};

/// How many times one Task is polled before it is cancelled as non-converging.
pub(crate) const MAX_TASK_POLLS: usize = 10_000;

// === impl CallPeer ===

impl CallPeer {
    /// Follows the Task a call became to its end; a caller that stops waiting (drops the
    /// call) still has the Task cancelled.
    pub(super) async fn follow(
        &self,
        operation: &Operation,
        task: Value,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let mut owed = task["taskId"]
            .as_str()
            .map(|id| Courtesy::owe(&self.peer, Owed::Task(id.to_owned())));
        let result = self
            .drive_task(operation, task, context, owning, label)
            .await;
        if let Some(owed) = owed.as_mut() {
            owed.paid();
        }
        result
    }

    /// Follows an unsolicited Task to its end (§mcp-tasks): polls `tasks/get` at each
    /// current `pollIntervalMs` under the operation's one deadline, routes task input through
    /// the caller's interaction and `tasks/update`, and settles with the terminal result or
    /// error. Caller cancellation sends `tasks/cancel` before the call settles as cancelled.
    pub(super) async fn drive_task(
        &self,
        operation: &Operation,
        mut task: Value,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let Some(task_id) = task["taskId"].as_str().map(str::to_owned) else {
            return Err(self.protocol(label, "the Task carries no taskId"));
        };
        let mut answered = BTreeSet::new();
        crate::telemetry::task_created(&task_id);
        for _poll in 0..MAX_TASK_POLLS {
            match task["status"].as_str().unwrap_or("working") {
                "completed" => return self.completed(operation, &mut task, label),
                "failed" => return Err(self.failed(&task["error"], label)),
                "cancelled" => {
                    return Err(CallError::Cancelled {
                        alias: self.alias.clone(),
                        tool: label.to_owned(),
                    });
                }
                "input_required" => {
                    self.answer_input(&task, &task_id, &mut answered, context, owning, label)
                        .await?;
                }
                _ => {}
            }
            self.wait_to_poll(&task, &task_id, context, owning, label)
                .await?;
            task = self.poll(&task_id, context, owning, label).await?;
            crate::telemetry::task_polled(task["status"].as_str().unwrap_or("working"));
        }
        self.cancel_task(&task_id).await;
        Err(self.protocol(
            label,
            &format!("the Task did not finish within {MAX_TASK_POLLS} polls and was cancelled"),
        ))
    }

    /// A completed Task's outcome: the originating tool result, as the server wrote it.
    fn completed(
        &self,
        operation: &Operation,
        task: &mut Value,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let Some(result) = task.get_mut("result").map(Value::take) else {
            return Err(self.protocol(label, "the completed Task carries no result"));
        };
        self.complete(
            operation,
            ServerResult::CustomResult(CustomResult(result)),
            label,
        )
    }

    /// A failed Task's error, as the server gave it.
    fn failed(&self, error: &Value, label: &str) -> CallError {
        CallError::Remote {
            alias: self.alias.clone(),
            tool: label.to_owned(),
            code: error["code"]
                .as_i64()
                .and_then(|code| i32::try_from(code).ok())
                // A failure without a code is an internal error.
                .unwrap_or(rmcp::model::ErrorCode::INTERNAL_ERROR.0),
            message: error["message"]
                .as_str()
                .unwrap_or("the Task failed")
                .to_owned(),
            data: error.get("data").cloned(),
        }
    }

    /// Asks the caller for the input a Task waits on and hands the answers over with
    /// `tasks/update`: each input key is answered once, in one interaction per observed set.
    /// A failure cancels the Task (it is the server's work in flight).
    async fn answer_input(
        &self,
        task: &Value,
        task_id: &str,
        answered: &mut BTreeSet<String>,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<(), CallError> {
        let requests: InputRequiredResult = serde_json::from_value(json!({
            "resultType": "input_required",
            "inputRequests": task["inputRequests"].clone(),
        }))
        .map_err(|error| {
            self.protocol(
                label,
                &format!("the Task's input requests are invalid: {error}"),
            )
        })?;
        let mut fresh = requests.clone();
        if let Some(pending) = fresh.input_requests.as_mut() {
            pending.retain(|key, _| !answered.contains(key));
        }
        if fresh.input_requests.as_ref().is_none_or(|r| r.is_empty()) {
            return Ok(());
        }
        let (responses, _) = match self.fulfil(fresh, context, owning, label).await {
            Ok(answered) => answered,
            Err(error) => {
                self.cancel_task(task_id).await;
                return Err(error);
            }
        };
        answered.extend(responses.keys().cloned());
        let update: UpdateTaskParams = serde_json::from_value(json!({
            "taskId": task_id,
            "inputResponses": responses,
        }))
        .map_err(|error| self.protocol(label, &error.to_string()))?;
        if let Err(error) = self
            .bounded(owning, label, self.peer.update_task(update))
            .await
        {
            if matches!(error, CallError::Timeout { .. }) {
                self.cancel_task(task_id).await;
            }
            return Err(error);
        }
        Ok(())
    }

    /// Waits the Task's current `pollIntervalMs` (10 ms to 30 s, 500 when it names none);
    /// the caller stopping or the deadline passing cancels the Task, a lost connection ends
    /// the call.
    async fn wait_to_poll(
        &self,
        task: &Value,
        task_id: &str,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<(), CallError> {
        let interval = task["pollIntervalMs"]
            .as_u64()
            .unwrap_or(500)
            .clamp(10, 30_000);
        let sleep = tokio::time::sleep(Duration::from_millis(interval));
        tokio::select! {
            () = sleep => Ok(()),
            stop = owning.stopped(context) => {
                self.cancel_task(task_id).await;
                Err(self.stopped(label, stop))
            }
            // The operation's deadline, not a fresh one: the request that created the Task
            // has already spent part of it.
            () = tokio::time::sleep_until(owning.at) => {
                self.cancel_task(task_id).await;
                Err(self.timeout(label, owning.budget))
            }
            () = self.lost.cancelled() => Err(CallError::ConnectionLost {
                alias: self.alias.clone(),
                tool: label.to_owned(),
                detail: self.closed("the transport closed while a Task was running"),
            }),
        }
    }

    /// The Task as `tasks/get` tells it now; a poll past the deadline, or one its caller
    /// stopped, cancels the Task.
    async fn poll(
        &self,
        task_id: &str,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<Value, CallError> {
        // Each poll carries the call's trace context, as every request the host sends does.
        let mut params = GetTaskParams::new(task_id.to_owned());
        let mut meta = serde_json::Map::new();
        crate::telemetry::inject(&mut meta, context.parent.as_ref());
        if !meta.is_empty() {
            params.meta = Some(meta.into());
        }
        let polled = tokio::select! {
            polled = self.bounded(owning, label, self.peer.get_task(params)) => match polled {
                Ok(polled) => polled,
                Err(error) => {
                    if matches!(error, CallError::Timeout { .. }) {
                        self.cancel_task(task_id).await;
                    }
                    return Err(error);
                }
            },
            stop = owning.stopped(context) => {
                self.cancel_task(task_id).await;
                return Err(self.stopped(label, stop));
            }
        };
        Ok(serde_json::to_value(&polled).unwrap_or_default())
    }

    /// Runs one Task request, bounded by the operation's deadline.
    pub(super) async fn bounded<T>(
        &self,
        deadline: Owning<'_>,
        label: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout_at(deadline.at, request).await {
            Ok(result) => result.map_err(|error| self.map_error(label, error)),
            Err(_) => Err(self.timeout(label, deadline.budget)),
        }
    }

    /// Best effort, briefly bounded: the caller is leaving either way.
    pub(super) async fn cancel_task(&self, task_id: &str) {
        let cancel = self
            .peer
            .cancel_task(CancelTaskParams::new(task_id.to_owned()));
        let _ = tokio::time::timeout(TASK_CANCEL_BOUND, cancel).await;
    }
}
