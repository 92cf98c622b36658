//! A legacy upstream's question, asked in the middle of a call, relayed to a 2026-07-28 client
//! as `input_required`.
//!
//! A 2025-11-25 server asks with `elicitation/create` while its call is in flight, and waits
//! for the answer; a 2026-07-28 client can only be asked in a result, and answers by sending
//! its request again with `inputResponses` and the `requestState` it was given. So the call
//! runs in a task of its own: when the upstream asks, the client's request is answered
//! `input_required` (the upstream's elicitations as `inputRequests`, a `requestState` naming
//! the call held here), the call waits, and the request that comes back with that state hands
//! the answers to the upstream and waits for what the call does next (another question, or
//! its result). A held call is the process's, like every call in flight: its state means
//! nothing to another replica. One that nobody answers within [`HELD`] is cancelled.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::host::{CallOptions, Workspace};
use crate::model::{
    CallError, Elicitation, ElicitationAnswer, Interaction, InteractionHandler, Operation,
    ToolResult,
};

/// How long a held call waits for its client to come back with the answers.
pub(super) const HELD: Duration = Duration::from_secs(600);

/// The prefix of the `requestState` of a call held here: an upstream's own states never start
/// so (they pass through untouched, and this prefix is looked for only among held calls).
const STATE_PREFIX: &str = "plurnk-held:";

/// What a held call does next.
enum Step {
    /// Its upstream asked; the answers go back on the sender.
    Asked(
        Interaction,
        oneshot::Sender<BTreeMap<String, ElicitationAnswer>>,
    ),
    /// It ended.
    Done(Result<ToolResult, CallError>),
}

/// A call waiting for its client's answers.
struct Held {
    answers: oneshot::Sender<BTreeMap<String, ElicitationAnswer>>,
    steps: mpsc::Receiver<Step>,
    /// Cancels the call when the held call is dropped unanswered.
    _stop: tokio_util::sync::DropGuard,
}

/// The calls held for their clients' answers, by the `requestState` each was given.
#[derive(Default)]
pub(super) struct Bridges {
    held: Arc<Mutex<HashMap<String, Held>>>,
}

/// What a bridged call answers its client's request.
pub(super) enum Bridged {
    /// A question for the client: the `input_required` result to send.
    Asked(Value),
    /// The call ended.
    Done(Result<ToolResult, CallError>),
}

impl Bridges {
    /// Runs `operation` on `alias` for a 2026-07-28 client, or carries on the held call its
    /// `requestState` names; `cancel` is the client's request, `options` the call's (its
    /// interaction is set here).
    pub(super) async fn run(
        &self,
        workspace: &Workspace,
        alias: &str,
        operation: Operation,
        mut options: CallOptions,
        cancel: CancellationToken,
    ) -> Bridged {
        let stopped = CallError::Cancelled {
            alias: alias.to_owned(),
            tool: operation.label().into_owned(),
        };
        let resumed = options
            .relay
            .as_ref()
            .and_then(|relay| relay.request_state.as_deref())
            .filter(|state| state.starts_with(STATE_PREFIX))
            .and_then(|state| self.take(state));
        let (steps, stop) = match resumed {
            Some(held) => {
                let given = options
                    .relay
                    .as_ref()
                    .and_then(|relay| relay.input_responses.clone())
                    .unwrap_or_default();
                let _ = held.answers.send(answers_of(&given));
                (held.steps, held._stop)
            }
            // A client that declared no elicitation is asked nothing: the host declines for it.
            None if !asks(&options) => {
                return Bridged::Done(workspace.run(alias, operation, options).await);
            }
            None => {
                let (sender, steps) = mpsc::channel(1);
                let stop = CancellationToken::new();
                let asking = sender.clone();
                let handler: InteractionHandler = Arc::new(move |interaction| {
                    let asking = asking.clone();
                    Box::pin(async move {
                        let (answer, answered) = oneshot::channel();
                        let keys: Vec<String> = interaction.requests.keys().cloned().collect();
                        if asking.send(Step::Asked(interaction, answer)).await.is_err() {
                            return cancelled(&keys);
                        }
                        answered.await.unwrap_or_else(|_| cancelled(&keys))
                    })
                });
                options.interaction = Some(handler);
                options.cancel = Some(stop.clone());
                let workspace = workspace.clone();
                let alias = alias.to_owned();
                tokio::spawn(async move {
                    let result = workspace.run(&alias, operation, options).await;
                    let _ = sender.send(Step::Done(result)).await;
                });
                (steps, stop.drop_guard())
            }
        };
        self.next(steps, stop, cancel)
            .await
            .unwrap_or(Bridged::Done(Err(stopped)))
    }

    /// Waits for what the call does next: a question holds it, with a fresh state; `None`
    /// when the client gave up first.
    async fn next(
        &self,
        mut steps: mpsc::Receiver<Step>,
        stop: tokio_util::sync::DropGuard,
        cancel: CancellationToken,
    ) -> Option<Bridged> {
        let step = tokio::select! {
            step = steps.recv() => step,
            // The client gave up on its request: the call goes with it (`stop` dropped).
            () = cancel.cancelled() => None,
        };
        match step {
            Some(Step::Asked(interaction, answers)) => {
                let state = format!("{STATE_PREFIX}{:032x}", rand_u128());
                let asked = input_required(&interaction, &state);
                if let Ok(mut held) = self.held.lock() {
                    held.insert(
                        state.clone(),
                        Held {
                            answers,
                            steps,
                            _stop: stop,
                        },
                    );
                }
                let held = self.held.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(HELD).await;
                    // Nobody came back: the call is cancelled as the entry drops.
                    let expired = held.lock().ok().and_then(|mut held| held.remove(&state));
                    drop(expired);
                });
                Some(Bridged::Asked(asked))
            }
            Some(Step::Done(result)) => Some(Bridged::Done(result)),
            None => None,
        }
    }

    fn take(&self, state: &str) -> Option<Held> {
        self.held.lock().ok()?.remove(state)
    }
}

/// Whether the client declared elicitation, so an upstream's question may be put to it.
fn asks(options: &CallOptions) -> bool {
    options
        .client_capabilities
        .as_ref()
        .is_some_and(|capabilities| capabilities.contains_key("elicitation"))
}

/// The `input_required` result that asks the client what the upstream asked.
fn input_required(interaction: &Interaction, state: &str) -> Value {
    let requests: serde_json::Map<String, Value> = interaction
        .requests
        .iter()
        .map(|(key, elicitation)| {
            let params = match elicitation {
                Elicitation::Form { message, schema } => {
                    json!({"mode": "form", "message": message, "requestedSchema": schema})
                }
                Elicitation::Url {
                    message,
                    url,
                    elicitation_id,
                } => json!({"mode": "url", "message": message, "url": url,
                            "elicitationId": elicitation_id}),
            };
            (
                key.clone(),
                json!({"method": "elicitation/create", "params": params}),
            )
        })
        .collect();
    json!({"resultType": "input_required", "inputRequests": requests, "requestState": state})
}

/// The client's `inputResponses` as answers: an answer it did not give, or gave in no shape
/// this host reads, is a cancellation.
fn answers_of(given: &serde_json::Map<String, Value>) -> BTreeMap<String, ElicitationAnswer> {
    given
        .iter()
        .map(|(key, answer)| {
            let answer = match answer.get("action").and_then(Value::as_str) {
                Some("accept") => ElicitationAnswer::Accept {
                    content: answer.get("content").and_then(Value::as_object).cloned(),
                },
                Some("decline") => ElicitationAnswer::Decline,
                _ => ElicitationAnswer::Cancel,
            };
            (key.clone(), answer)
        })
        .collect()
}

/// Every key cancelled.
fn cancelled(keys: &[String]) -> BTreeMap<String, ElicitationAnswer> {
    keys.iter()
        .map(|key| (key.clone(), ElicitationAnswer::Cancel))
        .collect()
}

/// A random number from the system's source (the held call's name).
fn rand_u128() -> u128 {
    let mut bytes = [0u8; 16];
    // Without randomness a state could be guessed; the system's source does not fail here.
    let _ = aws_lc_rs::rand::fill(&mut bytes);
    u128::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_asked_as_input_required_and_its_answers_read_back() {
        let mut requests = BTreeMap::new();
        requests.insert(
            "q".to_owned(),
            Elicitation::Form {
                message: "Name?".into(),
                schema: json!({"type": "object"}),
            },
        );
        let interaction = Interaction {
            server: "old".into(),
            operation: "elicitation/create".into(),
            requests,
        };
        let asked = input_required(&interaction, "plurnk-held:1");
        assert_eq!(asked["resultType"], "input_required");
        assert_eq!(asked["requestState"], "plurnk-held:1");
        assert_eq!(asked["inputRequests"]["q"]["method"], "elicitation/create");
        assert_eq!(
            asked["inputRequests"]["q"]["params"]["requestedSchema"],
            json!({"type": "object"})
        );
        let given = json!({"q": {"action": "accept", "content": {"name": "Ada"}},
                           "r": {"action": "decline"}, "s": {"oops": 1}});
        let answers = answers_of(given.as_object().expect("an object"));
        assert!(
            matches!(&answers["q"], ElicitationAnswer::Accept { content: Some(c) } if c["name"] == "Ada")
        );
        assert_eq!(answers["r"], ElicitationAnswer::Decline);
        assert_eq!(answers["s"], ElicitationAnswer::Cancel);
    }
}
