//! Multi-round-trip input: a server's input requests turned into one interaction with the
//! caller (elicitations only), and the caller's answers checked against what was asked.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses};
use serde_json::{Value, json};

use super::deadline::Owning;
use super::{CallContext, CallPeer};
use crate::model::{CallError, Elicitation, ElicitationAnswer, Interaction};

/// What the first request of a relayed operation carries: the answers and the
/// `requestState` the caller brings from the round it answered itself.
pub(super) fn relayed(context: &CallContext) -> (Option<InputResponses>, Option<String>) {
    match &context.relay {
        Some(relay) => (
            relay
                .input_responses
                .as_ref()
                .map(|answers| answers.clone().into_iter().collect()),
            relay.request_state.clone(),
        ),
        None => (None, None),
    }
}

// === impl CallPeer ===

impl CallPeer {
    /// Answers one `input_required` round: its input requests through the caller's
    /// interaction, or, when the server only wants its state back, after a gentle pause
    /// (50 ms, doubling to 250 ms over such rounds in a row). Returns what the next request
    /// carries: the answers (none when empty) and the server's `requestState`.
    pub(super) async fn next_round(
        &self,
        input: InputRequiredResult,
        state_only_rounds: &mut u32,
        context: &CallContext,
        deadline: Owning<'_>,
        label: &str,
    ) -> Result<(Option<InputResponses>, Option<String>), CallError> {
        let had_requests = input
            .input_requests
            .as_ref()
            .is_some_and(|requests| !requests.is_empty());
        if !had_requests && input.request_state.is_none() {
            return Err(self.protocol(
                label,
                "input_required carried neither input requests nor requestState",
            ));
        }
        let (answers, request_state) = self.fulfil(input, context, deadline, label).await?;
        if had_requests {
            *state_only_rounds = 0;
        } else {
            let millis = (50u64 << (*state_only_rounds).min(3)).min(250);
            *state_only_rounds += 1;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(millis)) => {}
                () = tokio::time::sleep_until(deadline.at) => {
                    return Err(self.timeout(label, deadline.budget));
                }
                stop = deadline.stopped(context) => {
                    return Err(self.stopped(label, stop));
                }
            }
        }
        Ok(((!answers.is_empty()).then_some(answers), request_state))
    }

    /// Turns every input request of one result into one interaction, and its answers into
    /// the `inputResponses` of the retry. Families this host does not support (sampling,
    /// roots) fail before any interaction.
    pub(super) async fn fulfil(
        &self,
        input: InputRequiredResult,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<(InputResponses, Option<String>), CallError> {
        let mut requests = BTreeMap::new();
        for (key, request) in input.input_requests.unwrap_or_default() {
            let elicitation = elicitation_of(&key, request)
                .map_err(|unaskable| self.protocol(label, &unaskable.to_string()))?;
            requests.insert(key, elicitation);
        }
        let mut answers = match (&context.interaction, requests.is_empty()) {
            (_, true) => BTreeMap::new(),
            (Some(handler), false) => {
                let interaction = Interaction {
                    server: self.alias.clone(),
                    operation: label.to_owned(),
                    requests: requests
                        .iter()
                        .map(|(key, request)| (key.clone(), request.shown()))
                        .collect(),
                };
                tokio::select! {
                    answers = handler(interaction) => answers,
                    () = tokio::time::sleep_until(owning.at) => {
                        return Err(self.timeout(label, owning.budget));
                    }
                    stop = owning.stopped(context) => {
                        return Err(self.stopped(label, stop));
                    }
                }
            }
            // No one to ask: decline, which the server treats as a standard answer.
            (None, false) => requests
                .keys()
                .map(|key| (key.clone(), ElicitationAnswer::Decline))
                .collect(),
        };
        let mut responses = InputResponses::new();
        for (key, elicitation) in &requests {
            let answer = answers.remove(key).unwrap_or(ElicitationAnswer::Cancel);
            validate(elicitation, &answer).map_err(|detail| CallError::Interaction {
                alias: self.alias.clone(),
                tool: label.to_owned(),
                detail: format!("the answer to {:?} {detail}", crate::config::shorten(key)),
            })?;
            responses.insert(key.clone(), json!(answer));
        }
        Ok((responses, input.request_state))
    }
}

/// What the caller is asked for one input request of a server, or why the host cannot
/// ask it: only elicitations are offered (no sampling, no roots).
pub(super) fn elicitation_of(key: &str, request: InputRequest) -> Result<Elicitation, Unaskable> {
    let key = || format!("{:?}", crate::config::shorten(key));
    match request {
        InputRequest::Elicitation(request) => {
            let params = serde_json::to_value(&request)
                .ok()
                .and_then(|value| value.get("params").cloned())
                .unwrap_or(Value::Null);
            elicitation_from(&params).ok_or_else(|| Unaskable::Unreadable { key: key() })
        }
        InputRequest::CreateMessage(_) => Err(Unaskable::Sampling { key: key() }),
        InputRequest::ListRoots(_) => Err(Unaskable::Roots { key: key() }),
        _ => Err(Unaskable::Unknown { key: key() }),
    }
}

/// An input request of a server that the host cannot put to its caller. The key is the
/// server's, quoted and cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unaskable {
    /// An elicitation without a message, or of a mode this host does not know.
    #[error("input request {key} is an elicitation this host cannot read")]
    Unreadable { key: String },
    /// Sampling, which the host does not advertise.
    #[error("input request {key} asks for sampling, which this host does not offer")]
    Sampling { key: String },
    /// Roots, which the host does not advertise.
    #[error("input request {key} asks for roots, which this host does not offer")]
    Roots { key: String },
    /// A kind of request newer than this host.
    #[error("input request {key} is of a kind this host does not know")]
    Unknown { key: String },
}

/// Why an answer does not fit the elicitation it answers. Field names are quoted and cut,
/// since an answer may come from a remote client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AnswerFault {
    /// An accepted URL elicitation carries content.
    #[error("accepts a URL elicitation with content, which it must not carry")]
    UrlWithContent,
    /// A field the form requires is absent.
    #[error("lacks the required field {0}")]
    Missing(String),
    /// A field the form does not ask for.
    #[error("has the field {0}, which the form does not ask for")]
    Unasked(String),
    /// A field's value is not of the type the form gives it.
    #[error("gives {name} a value that is not a {kind}")]
    WrongType { name: String, kind: String },
    /// A field's value is not one of its enum's.
    #[error("gives {0} a value outside its enum")]
    OutsideEnum(String),
}

/// Reads an elicitation's params (`mode`, `message`, `requestedSchema`, `url`, …).
pub(crate) fn elicitation_from(params: &Value) -> Option<Elicitation> {
    let message = params.get("message")?.as_str()?.to_owned();
    match params.get("mode").and_then(Value::as_str).unwrap_or("form") {
        "form" => Some(Elicitation::Form {
            message,
            schema: params
                .get("requestedSchema")
                .cloned()
                .unwrap_or(Value::Null),
        }),
        "url" => Some(Elicitation::Url {
            message,
            url: params.get("url")?.as_str()?.to_owned(),
            elicitation_id: params
                .get("elicitationId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }),
        _ => None,
    }
}

/// Checks an answer against what was asked: a form's content against its flat schema
/// (required properties, primitive types, enums), and no content for a URL.
pub(crate) fn validate(
    elicitation: &Elicitation,
    answer: &ElicitationAnswer,
) -> Result<(), AnswerFault> {
    let quoted = |name: &str| format!("{:?}", crate::config::shorten(name));
    let ElicitationAnswer::Accept { content } = answer else {
        return Ok(());
    };
    match elicitation {
        Elicitation::Url { .. } => match content {
            None => Ok(()),
            Some(_) => Err(AnswerFault::UrlWithContent),
        },
        Elicitation::Form { schema, .. } => {
            let empty = serde_json::Map::new();
            let content = content.as_ref().unwrap_or(&empty);
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if !content.contains_key(name) {
                        return Err(AnswerFault::Missing(quoted(name)));
                    }
                }
            }
            for (name, value) in content {
                let Some(property) = properties.and_then(|p| p.get(name)) else {
                    return Err(AnswerFault::Unasked(quoted(name)));
                };
                let kind = property
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string");
                let fits = match kind {
                    "string" => value.is_string(),
                    "number" => value.is_number(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "boolean" => value.is_boolean(),
                    "array" => value.is_array(),
                    _ => true,
                };
                if !fits {
                    return Err(AnswerFault::WrongType {
                        name: quoted(name),
                        kind: crate::config::shorten(kind),
                    });
                }
                if let Some(options) = property.get("enum").and_then(Value::as_array)
                    && !options.contains(value)
                {
                    return Err(AnswerFault::OutsideEnum(quoted(name)));
                }
            }
            Ok(())
        }
    }
}
