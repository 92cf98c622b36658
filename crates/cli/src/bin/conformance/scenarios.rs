//! The scenarios: each drives the host through the public API as the suite's mock server
//! expects, and says what it saw.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use super::{all, call_answering, call_expecting, call_with, tool};
use anyhow::{anyhow, ensure};
use plurnk_mcp::{
    Elicitation, ElicitationAnswer, Interaction, InteractionHandler, ServerSnapshot, Workspace,
};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

/// `tools_call`: the mock lists `add_numbers(a: number, b: number)`; the check passes when a
/// `tools/call` arrives whose `a` and `b` are numbers.
pub(super) async fn tools_call(workspace: &Workspace) -> anyhow::Result<()> {
    call_expecting(
        workspace,
        "add_numbers",
        json!({"a": 5, "b": 3}),
        "The sum of 5 and 3 is 8",
    )
    .await
}

/// `request-metadata` (SEP-2575): the mock rejects the first request (`server/discover`) with
/// HTTP 400 / -32022 "Unsupported protocol version" (`supported: ["2026-07-28"]`) and checks
/// on every later POST: the `MCP-Protocol-Version` header, `_meta` protocolVersion +
/// clientCapabilities (+ clientInfo, else a warning), header == `_meta` version, well-formed
/// roots/sampling/elicitation capabilities, and that the retry uses 2026-07-28. It lists no
/// tools, so being ready (discover retried, tools/list answered) is the whole job.
pub(super) fn request_metadata(server: &ServerSnapshot) -> anyhow::Result<()> {
    ensure!(
        server.negotiated.as_ref().is_some_and(|n| n.modern),
        "the host did not negotiate through server/discover"
    );
    eprintln!(
        "conformance: ready after the rejected first discover; {} tools listed",
        server.tools.len()
    );
    Ok(())
}

/// `sep-2322-client-request-state` (MRTR): four tools.
///
/// - `test_mrtr_echo_state` answers `resultType: "input_required"` with an elicitation under
///   key `confirm` and an opaque `requestState`; the retry (a new JSON-RPC id) must carry
///   `inputResponses` and the exact `requestState`; then it answers `echo-state-ok`.
/// - `test_mrtr_no_state`: the same without `requestState`; the retry must not carry one.
/// - `test_mrtr_unrelated`: a plain tool; its call must carry neither `inputResponses` nor
///   `requestState` (isolation). It is called from inside the echo-state interaction, so
///   while that tool's MRTR round is open.
/// - `test_mrtr_no_result_type`: a result without `resultType`, which means complete; the
///   client must not retry it.
///
/// Elicitations reach this binary through the host's per-call interaction handler
/// ([`CallOptions::interaction`]) and are accepted with values that fit the requested
/// schema (`{"confirmed": true}` here).
pub(super) async fn request_state(workspace: &Workspace) -> anyhow::Result<()> {
    let unrelated: Slot = Arc::new(Mutex::new(None));
    let echo = call_with(
        workspace,
        "test_mrtr_echo_state",
        json!({}),
        "echo-state-ok",
        Some(accepting(Some((workspace.clone(), unrelated.clone())))),
    )
    .await;
    let unrelated = match unrelated.lock().await.take() {
        Some(outcome) => outcome,
        None => {
            // The interaction never ran (the echo-state call failed before it): still make
            // the unrelated call, so that the isolation check is scored.
            eprintln!(
                "conformance: the echo-state interaction never ran; calling test_mrtr_unrelated on its own"
            );
            call_expecting(workspace, "test_mrtr_unrelated", json!({}), "unrelated-ok").await
        }
    };
    let no_state = call_with(
        workspace,
        "test_mrtr_no_state",
        json!({}),
        "no-state-ok",
        Some(accepting(None)),
    )
    .await;
    let no_result_type = call_with(
        workspace,
        "test_mrtr_no_result_type",
        json!({}),
        "no-result-type-test-ok",
        Some(accepting(None)),
    )
    .await;
    all(vec![
        ("test_mrtr_echo_state", echo),
        (
            "test_mrtr_unrelated (during the echo-state round)",
            unrelated,
        ),
        ("test_mrtr_no_state", no_state),
        ("test_mrtr_no_result_type", no_result_type),
    ])
}

/// Where the unrelated call made inside an interaction leaves its outcome.
type Slot = Arc<Mutex<Option<anyhow::Result<()>>>>;

/// An interaction handler that accepts every form with values fitting its schema, declines
/// URL elicitations, and — when given a workspace — first calls `test_mrtr_unrelated` while
/// the round is open.
fn accepting(during: Option<(Workspace, Slot)>) -> InteractionHandler {
    Arc::new(move |interaction: Interaction| {
        let during = during.clone();
        let answer: Pin<Box<dyn Future<Output = BTreeMap<String, ElicitationAnswer>> + Send>> =
            Box::pin(async move {
                eprintln!(
                    "conformance: interaction from {} for {}: {}",
                    interaction.server,
                    interaction.operation,
                    serde_json::to_string(&interaction.requests).unwrap_or_default()
                );
                if let Some((workspace, slot)) = during {
                    let outcome = call_expecting(
                        &workspace,
                        "test_mrtr_unrelated",
                        json!({}),
                        "unrelated-ok",
                    )
                    .await;
                    *slot.lock().await = Some(outcome);
                }
                let answers: BTreeMap<String, ElicitationAnswer> = interaction
                    .requests
                    .iter()
                    .map(|(key, elicitation)| (key.clone(), fill(elicitation)))
                    .collect();
                eprintln!(
                    "conformance:   answered {}",
                    serde_json::to_string(&answers).unwrap_or_default()
                );
                answers
            });
        answer
    })
}

/// Accepts a form with a value for each property (booleans `true`, numbers 1, strings from
/// the enum or "yes"); declines a URL elicitation.
pub(super) fn fill(elicitation: &Elicitation) -> ElicitationAnswer {
    let Elicitation::Form { schema, .. } = elicitation else {
        return ElicitationAnswer::Decline;
    };
    let mut content = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let value = match property.get("type").and_then(Value::as_str) {
                Some("boolean") => json!(true),
                Some("integer" | "number") => json!(1),
                _ => property
                    .get("enum")
                    .and_then(Value::as_array)
                    .and_then(|values| values.first().cloned())
                    .unwrap_or_else(|| json!("yes")),
            };
            content.insert(name.clone(), value);
        }
    }
    ElicitationAnswer::Accept {
        content: Some(content),
    }
}

/// `initialize` (2025-11-25): the host negotiated through `initialize` (checked by
/// `ready_server`); every tool is called once.
pub(super) async fn call_every_tool(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    for tool in server.tools.iter() {
        let arguments = sample_arguments(&tool.input_schema);
        call_answering(workspace, &tool.name, arguments, None).await?;
    }
    Ok(())
}

/// `sse-retry` (2025-11-25): `test_reconnection` closes its response stream before the
/// result; the transport must reconnect (`Last-Event-ID`, honouring `retry`) to get it.
pub(super) async fn sse_retry(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    tool(server, "test_reconnection")?;
    call_answering(workspace, "test_reconnection", json!({}), None).await?;
    Ok(())
}

/// `elicitation-sep1034-client-defaults` (2025-11-25): the form's person accepts what the
/// form pre-fills, its schema's defaults.
pub(super) async fn elicitation_defaults(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    let name = [
        "test_client_elicitation_defaults",
        "test_elicitation_sep1034_defaults",
    ]
    .into_iter()
    .find(|name| server.tool(name).is_some())
    .ok_or_else(|| anyhow!("the snapshot publishes no elicitation-defaults tool"))?;
    call_answering(workspace, name, json!({}), Some(prefilled())).await?;
    Ok(())
}

/// Answers every form with what it pre-fills: its schema's defaults.
pub(super) fn prefilled() -> InteractionHandler {
    Arc::new(|interaction: Interaction| {
        let answers: BTreeMap<String, ElicitationAnswer> = interaction
            .requests
            .iter()
            .map(|(key, elicitation)| (key.clone(), defaults(elicitation)))
            .collect();
        Box::pin(async move { answers })
    })
}

/// Accepts a form with each property's schema `default` (and nothing for those without).
pub(super) fn defaults(elicitation: &Elicitation) -> ElicitationAnswer {
    let Elicitation::Form { schema, .. } = elicitation else {
        return ElicitationAnswer::Decline;
    };
    let content: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, property)| {
                    property
                        .get("default")
                        .map(|value| (name.clone(), value.clone()))
                })
                .collect()
        })
        .unwrap_or_default();
    ElicitationAnswer::Accept {
        content: Some(content),
    }
}

/// `http-standard-headers` (SEP-2243): every POST must carry `Mcp-Method` equal to the body's
/// method, and `tools/call` an `Mcp-Name` equal to the tool name (first of each is checked;
/// methods never sent are reported as skipped). The mock lists `test_headers` and
/// `my-hyphenated-tool`.
pub(super) async fn standard_headers(workspace: &Workspace) -> anyhow::Result<()> {
    let plain = call_expecting(
        workspace,
        "test_headers",
        json!({}),
        "Headers test completed",
    )
    .await;
    let hyphenated = call_expecting(
        workspace,
        "my-hyphenated-tool",
        json!({}),
        "Headers test completed",
    )
    .await;
    all(vec![
        ("test_headers", plain),
        ("my-hyphenated-tool", hyphenated),
    ])
}

/// `http-custom-headers` (SEP-2243): the context holds `toolCalls: [{name, arguments}]` for
/// `test_custom_headers` and `test_custom_headers_null`; properties annotated
/// `x-mcp-header: <Name>` must be mirrored as `Mcp-Param-<Name>` (numbers and booleans as
/// their JSON text, unsafe strings — non-ASCII, leading/trailing whitespace, control
/// characters — as `=?base64?…?=`), unannotated ones never, and a null value omitted.
pub(super) async fn custom_headers(workspace: &Workspace, context: &Value) -> anyhow::Result<()> {
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("MCP_CONFORMANCE_CONTEXT has no toolCalls array"))?;
    ensure!(
        !calls.is_empty(),
        "MCP_CONFORMANCE_CONTEXT.toolCalls is empty"
    );
    let mut steps = Vec::new();
    for entry in calls {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("a toolCalls entry has no name: {entry}"))?;
        let arguments = entry.get("arguments").cloned().unwrap_or(json!({}));
        let outcome =
            call_expecting(workspace, name, arguments, "Custom headers test completed").await;
        steps.push((name, outcome));
    }
    all(steps)
}

/// The tools `http-invalid-tool-headers` lists with a malformed `x-mcp-header`; a client
/// must exclude them (calling one fails the check).
const INVALID_HEADER_TOOLS: &[&str] = &[
    "invalid_empty_header",
    "invalid_object_header",
    "invalid_array_header",
    "invalid_null_header",
    "invalid_duplicate_same_case",
    "invalid_duplicate_diff_case",
    "invalid_space_in_name",
    "invalid_colon_in_name",
    "invalid_non_ascii_name",
    "invalid_control_char_name",
];

/// `http-invalid-tool-headers` (SEP-2243): the mock lists `valid_tool` and ten tools whose
/// `x-mcp-header` annotations are invalid (empty, on object/array/null, duplicated in any
/// case, space/colon/non-ASCII/control characters). The client must call `valid_tool` and
/// none of the others. Like an embedder, this calls every tool the host publishes, so a
/// tool the host failed to exclude is called and scored as a failure.
pub(super) async fn invalid_tool_headers(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    let leaked: Vec<&str> = server
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .filter(|name| INVALID_HEADER_TOOLS.contains(name))
        .collect();
    tool(server, "valid_tool")?;
    let mut steps = Vec::new();
    for published in server.tools.iter() {
        let arguments = sample_arguments(&published.input_schema);
        let outcome =
            call_expecting(workspace, &published.name, arguments, "Tool call received").await;
        steps.push((published.name.as_str(), outcome));
    }
    let steps_outcome = all(steps);
    ensure!(
        leaked.is_empty(),
        "the host published tools with invalid x-mcp-header annotations: {}",
        leaked.join(", ")
    );
    steps_outcome
}

/// Arguments for every required property of an object schema, by its declared type.
pub(super) fn sample_arguments(schema: &Value) -> Value {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for name in required {
        let kind = properties
            .and_then(|properties| properties.get(name))
            .and_then(|property| property.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match kind {
            "integer" | "number" => json!(1),
            "boolean" => json!(true),
            "object" => json!({}),
            "array" => json!([]),
            "null" => Value::Null,
            _ => json!("us-west1"),
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// `json-schema-ref-no-deref` (SEP-2106): the mock lists `lookup_user`, whose inputSchema has
/// a same-document `$ref` (`#/$defs/userId`) and a network `$ref` to
/// `<server>/canary/profile-schema.json`. The check passes when tools/list was called and the
/// canary URL was never fetched. Here the published schema must also be untouched: both
/// `$ref`s and `$defs` exactly as sent.
pub(super) fn ref_no_deref(server: &ServerSnapshot) -> anyhow::Result<()> {
    let schema = &tool(server, "lookup_user")?.input_schema;
    eprintln!("conformance: lookup_user inputSchema as published: {schema}");
    let id_ref = schema
        .pointer("/properties/id/$ref")
        .and_then(Value::as_str);
    ensure!(
        id_ref == Some("#/$defs/userId"),
        "properties.id.$ref was altered: {id_ref:?}"
    );
    let profile_ref = schema
        .pointer("/properties/profile/$ref")
        .and_then(Value::as_str);
    ensure!(
        profile_ref.is_some_and(|r| r.ends_with("/canary/profile-schema.json")),
        "properties.profile.$ref (a network URI) was altered or resolved: {profile_ref:?}"
    );
    ensure!(
        schema
            .pointer("/$defs/userId/pattern")
            .and_then(Value::as_str)
            == Some("^[a-z0-9-]+$"),
        "$defs.userId was altered"
    );
    Ok(())
}

/// The inputSchema the `json-schema-2020-12-preservation` mock sends for its focal tool.
fn focal_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// `json-schema-2020-12-preservation` (SEP-1613, SEP-2106): the mock lists
/// `json_schema_2020_12_tool` (the focal schema above) and `json_schema_echo`. The client
/// passes the focal inputSchema it holds, verbatim, as `schema` to `json_schema_echo`; the
/// checks compare it with the original: `$schema`, `$defs.address`, `additionalProperties:
/// false`, `allOf`/`anyOf`, `if`/`then`/`else` and `$anchor` must survive.
pub(super) async fn schema_preservation(
    workspace: &Workspace,
    server: &ServerSnapshot,
) -> anyhow::Result<()> {
    let schema = tool(server, "json_schema_2020_12_tool")?
        .input_schema
        .clone();
    tool(server, "json_schema_echo")?;
    let echoed = call_expecting(
        workspace,
        "json_schema_echo",
        json!({"schema": schema}),
        "echoed",
    )
    .await;
    let expected = focal_schema();
    let preserved = if schema == expected {
        Ok(())
    } else {
        Err(anyhow!(
            "the published inputSchema differs from what the server sent:\n  sent:      {expected}\n  published: {schema}"
        ))
    };
    all(vec![
        ("json_schema_echo", echoed),
        ("inputSchema preserved", preserved),
    ])
}
