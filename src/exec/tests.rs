//! Tests of the EXEC bridge without a host: every op form and fault, validation against
//! built snapshots, statuses, telemetry, scrubbing and the catalog.

use std::sync::Arc;

use serde_json::json;

use super::quote::LISTED_TOOLS;
use super::validate::{FAILURE_CHARS, LISTED_FAILURES, tool_hint};
use super::*;
use crate::model::{
    Authored, CallError, Catalog, Effect, Problem, ServerState, ToolInfo, TransportKind,
    WorkspaceSnapshot,
};

fn call(server: &str, tool: &str, arguments: Value) -> Op {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    Op::Call {
        server: server.into(),
        tool: tool.into(),
        arguments,
    }
}

fn catalog_of(server: &str) -> Op {
    Op::Catalog {
        server: server.into(),
    }
}

/// The message of the error `op` fails to parse with.
fn refused(op: &str) -> (OpError, String) {
    match parse(op) {
        Ok(parsed) => panic!("{op:?} parsed as {parsed:?}"),
        Err(error) => {
            let message = error.to_string();
            (error, message)
        }
    }
}

fn assert_names(message: &str, words: &[&str]) {
    for word in words {
        assert!(message.contains(word), "{word:?} is not in: {message}");
    }
}

// === parse: every form ===

#[test]
fn a_call_with_a_json_object_body() {
    assert_eq!(
        parse(r#"<<EXEC[github](create_issue):{"title":"Bug","body":"…"}:EXEC"#),
        Ok(call(
            "github",
            "create_issue",
            json!({"title": "Bug", "body": "…"})
        ))
    );
}

#[test]
fn a_call_with_an_empty_body_has_no_arguments() {
    for op in [
        "<<EXEC[github](list_repos):EXEC",
        "<<EXEC[github](list_repos)::EXEC",
        "<<EXEC[github](list_repos):  \n\t :EXEC",
    ] {
        assert_eq!(
            parse(op),
            Ok(call("github", "list_repos", json!({}))),
            "{op:?}"
        );
    }
}

#[test]
fn every_catalog_form_reads_as_the_catalog() {
    for op in [
        "<<EXEC[github]:?:EXEC",
        "<<EXEC[github]:help:EXEC",
        "<<EXEC[github]::EXEC",
        "<<EXEC[github]:EXEC",
        "<<EXEC[github]: ? :EXEC",
        "<<EXEC[github]:\nhelp\n:EXEC",
    ] {
        assert_eq!(parse(op), Ok(catalog_of("github")), "{op:?}");
    }
}

#[test]
fn whitespace_around_the_op_is_allowed() {
    assert_eq!(
        parse("\n  <<EXEC[fx](echo):{\"text\":\"hi\"}:EXEC \n\t"),
        Ok(call("fx", "echo", json!({"text": "hi"})))
    );
    assert_eq!(parse("  <<EXEC[fx]:?:EXEC\n"), Ok(catalog_of("fx")));
}

#[test]
fn a_body_may_hold_exec_terminators_in_its_strings() {
    assert_eq!(
        parse(r#"<<EXEC[fx](echo):{"text":"a:EXEC b :EXEC"}:EXEC"#),
        Ok(call("fx", "echo", json!({"text": "a:EXEC b :EXEC"})))
    );
}

#[test]
fn a_body_may_span_lines_and_nest() {
    let op = "<<EXEC[fx](deep):{\n  \"a\": {\"b\": [1, 2.5, null, true]},\n  \"c\": \"d\"\n}:EXEC";
    assert_eq!(
        parse(op),
        Ok(call(
            "fx",
            "deep",
            json!({"a": {"b": [1, 2.5, null, true]}, "c": "d"})
        ))
    );
}

#[test]
fn names_are_taken_exactly_as_written() {
    assert_eq!(
        parse("<<EXEC[my-server.v2](ns:tool/with.parts):EXEC"),
        Ok(call("my-server.v2", "ns:tool/with.parts", json!({})))
    );
    assert_eq!(
        parse("<<EXEC[ünï](çødé):EXEC"),
        Ok(call("ünï", "çødé", json!({})))
    );
}

#[test]
fn an_op_written_out_again_reads_the_same() {
    for op in [
        call("fx", "echo", json!({"text": "a:EXEC b", "n": [1, -0.5]})),
        call("fx", "list", json!({})),
        catalog_of("fx"),
    ] {
        assert_eq!(parse(&op.to_string()), Ok(op.clone()), "{op}");
    }
}

// === parse: every bad op ===

#[test]
fn an_op_over_the_bound_is_refused_before_it_is_read() {
    let op = format!(
        "<<EXEC[fx](echo):{{\"text\":\"{}\"}}:EXEC",
        "x".repeat(MAX_OP_BYTES)
    );
    let (error, message) = refused(&op);
    assert_eq!(error, OpError::TooLarge { bytes: op.len() });
    assert_names(&message, &[&op.len().to_string(), "1048576", "limit"]);
}

#[test]
fn an_op_must_start_with_exec() {
    let (error, message) = refused("EXEC[fx](echo):{}:EXEC");
    assert!(matches!(error, OpError::NotAnOp { .. }));
    assert_names(
        &message,
        &[
            "starts with `<<EXEC`",
            "\"EXEC[fx](echo):{}:EXEC\"",
            "<<EXEC[server](tool)",
        ],
    );
    let (_, message) = refused("");
    assert_names(&message, &["found nothing"]);
}

#[test]
fn an_unclosed_op_says_it_must_end_with_exec_and_keeps_its_server() {
    let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":"hi"}"#);
    assert_eq!(
        error,
        OpError::Unclosed {
            server: Some("fx".into())
        }
    );
    assert_names(
        &message,
        &["not closed", "end with `:EXEC`", "<<EXEC[server](tool)"],
    );
    for op in ["<<EXEC", "<<EXEC[fx", "<<EXEC(echo):{}"] {
        let (error, _) = refused(op);
        assert_eq!(error, OpError::Unclosed { server: None }, "{op:?}");
    }
    // `:EXEC` inside a string does not close an op that does not end with one.
    let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":"a:EXEC b"}"#);
    assert!(
        matches!(&error, OpError::TrailingGarbage { server: Some(s), .. } if s == "fx"),
        "{error:?}"
    );
    assert_names(&message, &["closing `:EXEC`", "\" b\\\"}\""]);
}

#[test]
fn text_after_the_closing_exec_is_refused_and_quoted() {
    let (error, message) = refused("<<EXEC[fx](echo):{}:EXEC and then some");
    assert_eq!(
        error,
        OpError::TrailingGarbage {
            server: Some("fx".into()),
            found: " and then some".into()
        }
    );
    assert_names(&message, &["nothing may follow", "\" and then some\""]);
    // A long tail is quoted in part.
    let (_, message) = refused(&format!("<<EXEC[fx]:?:EXEC{}", "y".repeat(10_000)));
    assert!(message.len() < 600, "{message}");
    assert_names(&message, &["yyyy\"…"]);
}

#[test]
fn a_missing_server_is_named() {
    let (error, message) = refused("<<EXEC(echo):{}:EXEC");
    assert!(matches!(error, OpError::MissingServer { .. }));
    assert_names(&message, &["followed by `[server]`", "\"(echo):{}:EXEC\""]);
    let (error, _) = refused("<<EXEC:EXEC");
    assert!(matches!(error, OpError::MissingServer { .. }));
}

#[test]
fn an_unclosed_or_empty_server_is_named() {
    let (error, message) = refused("<<EXEC[fx(echo):{}:EXEC");
    assert_eq!(error, OpError::UnclosedServer);
    assert_names(&message, &["`[server]`", "no closing `]`"]);
    let (error, message) = refused("<<EXEC[](echo):{}:EXEC");
    assert_eq!(error, OpError::EmptyServer);
    assert_names(&message, &["server name", "empty"]);
    assert_eq!(error.server(), None);
}

#[test]
fn an_unclosed_or_empty_tool_is_named_with_its_server() {
    let (error, message) = refused("<<EXEC[fx](echo:{}:EXEC");
    assert_eq!(
        error,
        OpError::UnclosedTool {
            server: "fx".into()
        }
    );
    assert_names(
        &message,
        &[
            "`(tool)` after `[fx]`",
            "no closing `)`",
            "<<EXEC[fx](tool)",
        ],
    );
    let (error, message) = refused("<<EXEC[fx]():{}:EXEC");
    assert_eq!(
        error,
        OpError::EmptyTool {
            server: "fx".into()
        }
    );
    assert_names(&message, &["tool name", "empty", "<<EXEC[fx]:?:EXEC"]);
}

#[test]
fn what_follows_the_server_or_tool_must_be_a_colon() {
    let (error, message) = refused("<<EXEC[fx]echo:{}:EXEC");
    assert!(matches!(error, OpError::AfterServer { .. }), "{error:?}");
    assert_names(
        &message,
        &["`[fx]` must be followed by `(tool)` or `:`", "\"echo:{}\""],
    );
    let (error, message) = refused("<<EXEC[fx](echo){}:EXEC");
    assert!(matches!(error, OpError::AfterTool { .. }), "{error:?}");
    assert_names(
        &message,
        &["`(echo)` must be followed by `:`", "found \"{}\""],
    );
    // Whitespace is not a colon.
    let (error, _) = refused("<<EXEC[fx] (echo):{}:EXEC");
    assert!(matches!(error, OpError::AfterServer { .. }), "{error:?}");
}

#[test]
fn a_catalog_op_takes_no_arguments() {
    let (error, message) = refused(r#"<<EXEC[fx]:{"text":"hi"}:EXEC"#);
    assert!(matches!(error, OpError::CatalogBody { .. }), "{error:?}");
    assert_names(
        &message,
        &[
            "without a `(tool)`",
            "`?`, `help` or nothing",
            "<<EXEC[fx](tool)",
        ],
    );
}

#[test]
fn a_body_that_is_not_json_says_where_reading_stopped() {
    let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":}:EXEC"#);
    let OpError::NotJson { line, column, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!((*line, *column), (1, 9));
    assert_names(
        &message,
        &[
            "fx/echo",
            "not valid JSON",
            "line 1 column 9",
            "one JSON object",
        ],
    );
    let (error, message) = refused("<<EXEC[fx](echo):{\n  \"a\": 1,\n  oops\n}:EXEC");
    assert!(
        matches!(error, OpError::NotJson { line: 3, .. }),
        "{error:?}"
    );
    assert_names(&message, &["line 3 column 3"]);
    // Trailing text after the object is not JSON either.
    let (error, _) = refused(r#"<<EXEC[fx](echo):{"a":1} {"b":2}:EXEC"#);
    assert!(matches!(error, OpError::NotJson { .. }), "{error:?}");
    // Nesting past serde_json's depth is an error, not a stack overflow.
    let deep = format!(
        "<<EXEC[fx](echo):{{\"a\":{}{}}}:EXEC",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (error, message) = refused(&deep);
    assert!(matches!(error, OpError::NotJson { .. }), "{error:?}");
    assert_names(&message, &["recursion limit"]);
}

#[test]
fn a_body_that_is_json_but_not_an_object_names_what_it_is() {
    for (body, kind) in [
        ("[1,2]", "array"),
        ("\"hi\"", "string"),
        ("42", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ] {
        let (error, message) = refused(&format!("<<EXEC[fx](echo):{body}:EXEC"));
        assert!(
            matches!(&error, OpError::NotAnObject { found, .. } if *found == kind),
            "{error:?}"
        );
        assert_names(
            &message,
            &["fx/echo", &format!("a JSON {kind}, not an object")],
        );
    }
}

#[test]
fn no_input_panics_the_parser() {
    for op in [
        "<<EXEC[",
        "<<EXEC[a",
        "<<EXEC[a]",
        "<<EXEC[a](",
        "<<EXEC[a](b",
        "<<EXEC[a](b)",
        "<<EXEC[a](b):",
        "<<EXEC[a]é:EXEC",
        "<<EXEC[a](b)é:EXEC",
        "<<EXEC[é]:é:EXEC",
        "<<EXEC]:EXEC",
        "<<EXEC[]:EXEC",
        "<<EXEC[:EXEC",
        "<<EXEC[a]:EXEC:EXEC",
        ":EXEC",
        "<<EXE:EXEC",
        "<<EXEC\u{0}[a]:EXEC",
    ] {
        let _ = parse(op);
    }
}

// === validate, effect ===

fn tool(name: &str, schema: Value, effect: Effect) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        title: None,
        description: Some(format!("The {name} tool. It does things.")),
        input_schema: schema,
        output_schema: None,
        annotations: None,
        effect,
    }
}

fn server(alias: &str, state: ServerState, tools: Vec<ToolInfo>) -> ServerSnapshot {
    ServerSnapshot {
        alias: alias.into(),
        transport: TransportKind::Stdio,
        state,
        problem: None,
        connecting: None,
        phases: None,
        recovered: None,
        negotiated: None,
        tools: tools.into(),
        catalog: Catalog::default(),
        generation: 1,
        authored: Arc::new(Authored::default()),
        authorization: None,
        sandbox: None,
    }
}

fn add_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"]
    })
}

fn snapshot() -> WorkspaceSnapshot {
    let fx = server(
        "fx",
        ServerState::Ready,
        vec![
            tool(
                "echo",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                Effect::Read,
            ),
            tool("add", add_schema(), Effect::Host),
            tool("ping", json!({"type": "object"}), Effect::Host),
            tool("broken", json!({"type": 12}), Effect::Host),
            tool(
                "remote",
                json!({"type": "object", "properties": {"x": {"$ref": "https://schemas.invalid/x.json"}}}),
                Effect::Host,
            ),
            tool(
                "local",
                json!({
                    "type": "object",
                    "$defs": {"level": {"enum": ["low", "high"]}},
                    "properties": {"level": {"$ref": "#/$defs/level"}}
                }),
                Effect::Host,
            ),
            tool(
                "legacy",
                json!({
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"]
                }),
                Effect::Host,
            ),
        ],
    );
    let mut down = server("down", ServerState::Unavailable, vec![]);
    down.problem = Some(Problem::server_unavailable(
        "server \"down\" (stdio) could not be connected: no such file",
    ));
    let servers = [
        fx,
        server("off", ServerState::Disabled, vec![]),
        down,
        server("early", ServerState::Connecting, vec![]),
    ];
    WorkspaceSnapshot {
        workspace: "default".into(),
        version: 7,
        servers: servers.into_iter().collect(),
    }
}

fn rejected(op: Op) -> (ExecError, String) {
    match validate(&op, &snapshot()) {
        Ok(validated) => panic!("{op} was validated: {validated:?}"),
        Err(error) => {
            let message = error.to_string();
            (error, message)
        }
    }
}

#[test]
fn a_valid_op_is_validated_with_its_effect_and_snapshot_version() {
    let snapshot = snapshot();
    let validated = validate(&call("fx", "echo", json!({"text": "hi"})), &snapshot).expect("valid");
    assert_eq!((validated.effect(), validated.version()), (Effect::Read, 7));
    assert_eq!(validated.op(), &call("fx", "echo", json!({"text": "hi"})));
    let validated = validate(&catalog_of("fx"), &snapshot).expect("valid");
    assert_eq!(validated.effect(), Effect::Read);
    let validated =
        validate(&call("fx", "add", json!({"a": 1, "b": 2.5})), &snapshot).expect("valid");
    assert_eq!(validated.effect(), Effect::Host);
    validate(&call("fx", "ping", json!({})), &snapshot).expect("no arguments");
    validate(&call("fx", "local", json!({"level": "low"})), &snapshot)
        .expect("a local $ref resolves");
    validate(&call("fx", "legacy", json!({"n": 3})), &snapshot)
        .expect("a draft-07 schema compiles offline");
}

#[test]
fn an_unknown_server_names_the_enabled_ones() {
    let (error, message) = rejected(call("nope", "echo", json!({})));
    assert_eq!(error.status(), 404);
    assert_names(
        &message,
        &[
            "no server \"nope\"",
            "the enabled servers are down, early, fx",
        ],
    );
    assert!(
        !message.contains("off"),
        "a disabled server is not offered: {message}"
    );
    assert_eq!(error.telemetry(), Some(TelemetryEvent::NotConfigured));
}

#[test]
fn a_disabled_server_says_how_to_enable_it() {
    let (error, message) = rejected(catalog_of("off"));
    assert_eq!(
        error,
        ExecError::Disabled {
            server: "off".into()
        }
    );
    assert_eq!(error.status(), 409);
    assert_names(&message, &["\"off\" is disabled", "plurnk-mcp enable off"]);
}

#[test]
fn a_server_not_ready_gives_its_state_and_problem() {
    let (error, message) = rejected(call("down", "echo", json!({})));
    assert_eq!(error.status(), 503);
    assert_names(
        &message,
        &[
            "\"down\" is unavailable",
            "could not be connected: no such file",
        ],
    );
    assert_eq!(error.telemetry(), Some(TelemetryEvent::Unreachable));
    let (error, message) = rejected(catalog_of("early"));
    assert_eq!(error.status(), 503);
    assert_names(&message, &["\"early\" is connecting", "still connecting"]);
    assert!(error.problem().retryable);
}

#[test]
fn an_unknown_tool_suggests_close_names_or_lists_the_tools() {
    let (error, message) = rejected(call("fx", "ecko", json!({})));
    assert_eq!(error.status(), 404);
    assert_names(
        &message,
        &[
            "no enabled tool \"ecko\"",
            "the closest is \"echo\"",
            "<<EXEC[fx]:?:EXEC",
            "worker://plurnk/tools/fx.md",
        ],
    );
    for near in ["Echo", "ehco", "eco", "echoo"] {
        let (_, message) = rejected(call("fx", near, json!({})));
        assert_names(&message, &["the closest is \"echo\""]);
    }
    let (_, message) = rejected(call("fx", "zzzzzzzz", json!({})));
    assert_names(
        &message,
        &["its enabled tools are echo, add, ping, broken, remote, local, legacy"],
    );
    assert!(!message.contains("more"), "all seven are listed: {message}");
    // A long list is cut, and says by how much.
    let many: Vec<ToolInfo> = (0..LISTED_TOOLS + 5)
        .map(|n| tool(&format!("t{n:02}"), json!({"type": "object"}), Effect::Host))
        .collect();
    let hint = tool_hint(&server("big", ServerState::Ready, many), "zzzzzzzz");
    assert!(
        hint.starts_with("its enabled tools are t00, t01,"),
        "{hint}"
    );
    assert!(hint.ends_with(" and 5 more"), "{hint}");
    assert_eq!(
        rejected(call("fx", "zz", json!({}))).0.telemetry(),
        Some(TelemetryEvent::NotConfigured)
    );
}

#[test]
fn arguments_that_fail_the_schema_list_each_path_and_expectation() {
    let (error, message) = rejected(call("fx", "add", json!({"a": "one"})));
    assert_eq!(error.status(), 422);
    assert_eq!(error.telemetry(), Some(TelemetryEvent::BadArguments));
    assert_names(
        &message,
        &[
            "arguments of fx/add do not match its input schema",
            "/a: \"one\" is not of type \"number\"",
            "(the arguments): \"b\" is a required property",
            "worker://plurnk/tools/fx/add.md",
        ],
    );
    let (error, _) = rejected(call("fx", "local", json!({"level": "medium"})));
    assert!(matches!(error, ExecError::BadArguments { .. }), "{error:?}");
}

#[test]
fn schema_failures_are_bounded_in_count_and_length() {
    let names: Vec<String> = (0..20).map(|i| format!("p{i:02}")).collect();
    let schema = json!({"type": "object", "required": names});
    let mut snapshot = snapshot();
    let many = server(
        "many",
        ServerState::Ready,
        vec![
            tool("strict", schema, Effect::Host),
            tool(
                "short",
                json!({"properties": {"s": {"maxLength": 1}}}),
                Effect::Host,
            ),
        ],
    );
    snapshot.servers.insert(Arc::new(many));
    let Err(ExecError::BadArguments { failures, more, .. }) =
        validate(&call("many", "strict", json!({})), &snapshot)
    else {
        panic!("twenty missing properties fail");
    };
    assert_eq!(
        (failures.len(), more),
        (LISTED_FAILURES, 20 - LISTED_FAILURES)
    );
    let error = validate(&call("many", "strict", json!({})), &snapshot).unwrap_err();
    assert_names(&error.to_string(), &["and 12 more"]);
    let long = "x".repeat(10_000);
    let Err(ExecError::BadArguments { failures, .. }) =
        validate(&call("many", "short", json!({ "s": long })), &snapshot)
    else {
        panic!("a long string fails maxLength");
    };
    assert!(
        failures[0].chars().count() <= FAILURE_CHARS + 1,
        "{failures:?}"
    );
    assert!(failures[0].ends_with('…'));
}

#[test]
fn a_schema_that_cannot_be_compiled_is_the_servers_fault() {
    let (error, message) = rejected(call("fx", "broken", json!({})));
    assert_eq!(error.status(), 502);
    assert_names(
        &message,
        &[
            "server \"fx\" sent an input schema for its tool \"broken\"",
            "server's fault",
        ],
    );
    assert_eq!(error.telemetry(), Some(TelemetryEvent::ListFailed));
}

#[test]
fn a_remote_ref_is_never_fetched() {
    let (error, message) = rejected(call("fx", "remote", json!({"x": 1})));
    assert!(matches!(error, ExecError::BadSchema { .. }), "{error:?}");
    assert_names(&message, &["\"remote\"", "schemas.invalid"]);
}

#[test]
fn effects_come_from_the_snapshot_and_unregistered_targets_are_a_contract_error() {
    let snapshot = snapshot();
    assert_eq!(effect(&catalog_of("fx"), &snapshot), Ok(Effect::Read));
    assert_eq!(effect(&catalog_of("off"), &snapshot), Ok(Effect::Read));
    assert_eq!(
        effect(&call("fx", "echo", json!({})), &snapshot),
        Ok(Effect::Read)
    );
    assert_eq!(
        effect(&call("fx", "add", json!({})), &snapshot),
        Ok(Effect::Host)
    );
    for (op, tool) in [
        (call("fx", "nope", json!({})), Some("nope")),
        (call("ghost", "echo", json!({})), None),
        (catalog_of("ghost"), None),
    ] {
        let error = effect(&op, &snapshot).expect_err("unregistered");
        assert_eq!(
            error,
            ExecError::Unregistered {
                server: op.server().into(),
                tool: tool.map(str::to_owned)
            }
        );
        assert_eq!((error.status(), error.telemetry()), (500, None));
        assert_names(
            &error.to_string(),
            &["internal contract", "validate the op"],
        );
    }
}

// === statuses, telemetry, scrubbing ===

#[test]
fn every_error_has_its_status_and_telemetry_event() {
    let bad_op = ExecError::from(refused("<<EXEC[fx](echo):[1]:EXEC").0);
    assert_eq!((bad_op.status(), bad_op.kind()), (400, "bad-op"));
    assert_eq!(bad_op.telemetry(), Some(TelemetryEvent::BadArguments));
    assert_eq!(bad_op.server(), Some("fx"));
    // No server, no source: nothing to report.
    let serverless = ExecError::from(OpError::EmptyServer);
    assert_eq!((serverless.status(), serverless.telemetry()), (400, None));
    let tool_error = ExecError::ToolError {
        server: "fx".into(),
        tool: "fail".into(),
        status: 500,
        result: json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
    };
    assert_eq!(tool_error.status(), 500);
    assert_eq!(tool_error.telemetry(), Some(TelemetryEvent::ToolError));
    assert_names(
        &tool_error.to_string(),
        &["fx/fail reported a tool error", "it broke"],
    );
    let call_error = |error: CallError| ExecError::Call {
        server: "fx".into(),
        tool: "t".into(),
        error: Box::new(error),
    };
    let cases = [
        (
            CallError::Remote {
                alias: "fx".into(),
                tool: "t".into(),
                code: -32603,
                message: "boom".into(),
                data: None,
            },
            500,
            Some(TelemetryEvent::ToolError),
        ),
        (
            CallError::ConnectionLost {
                alias: "fx".into(),
                tool: "t".into(),
                detail: "eof".into(),
            },
            503,
            Some(TelemetryEvent::Unreachable),
        ),
        (
            CallError::Timeout {
                alias: "fx".into(),
                tool: "t".into(),
                timeout_ms: 5,
            },
            504,
            Some(TelemetryEvent::Unreachable),
        ),
        (
            CallError::Cancelled {
                alias: "fx".into(),
                tool: "t".into(),
            },
            499,
            None,
        ),
        (
            CallError::UnknownServer("fx".into()),
            404,
            Some(TelemetryEvent::NotConfigured),
        ),
        (CallError::ShuttingDown, 503, None),
    ];
    for (error, status, event) in cases {
        let error = call_error(error);
        assert_eq!(
            (error.status(), error.telemetry()),
            (status, event),
            "{error}"
        );
        assert_eq!(error.problem().status, status);
    }
}

#[test]
fn a_server_not_ready_is_reported_by_its_state_and_problem_kind_never_its_text() {
    let not_ready = |state: ServerState, kind: Option<&str>, detail: &str| ExecError::NotReady {
        server: "gh".into(),
        state,
        kind: kind.map(str::to_owned),
        cause: kind.map(crate::Cause::of_kind),
        detail: detail.into(),
    };
    let unavailable = ServerState::Unavailable;
    let cases = [
        (
            ServerState::AuthorizationRequired,
            Some("authorization-required"),
            "anything",
            TelemetryEvent::AuthRequired,
        ),
        (
            unavailable,
            Some("server-unauthorized"),
            "anything",
            TelemetryEvent::AuthRequired,
        ),
        (
            unavailable,
            Some("authorization-failed"),
            "anything",
            TelemetryEvent::AuthRequired,
        ),
        (
            unavailable,
            Some("oauth-client-credentials-failed"),
            "anything",
            TelemetryEvent::AuthRequired,
        ),
        (
            unavailable,
            Some("oauth-workload-identity-failed"),
            "anything",
            TelemetryEvent::AuthRequired,
        ),
        // The words a Problem's detail holds decide nothing.
        (
            unavailable,
            Some("server-unavailable"),
            "could not be connected: authorization required (HTTP 401); could not be listed",
            TelemetryEvent::Unreachable,
        ),
        (
            ServerState::CrashLoop,
            Some("server-crash-loop"),
            "crashed",
            TelemetryEvent::Unreachable,
        ),
        (
            unavailable,
            None,
            "insufficient scope",
            TelemetryEvent::Unreachable,
        ),
    ];
    for (state, kind, detail, event) in cases {
        let error = not_ready(state, kind, detail);
        assert_eq!(error.telemetry(), Some(event), "{kind:?}");
        let status = if event == TelemetryEvent::AuthRequired {
            401
        } else {
            503
        };
        assert_eq!(error.status(), status, "{kind:?}");
        assert_eq!(error.problem().status, status, "{kind:?}");
    }
    // A catalog that could not be listed is the specification's `server-unavailable`, and
    // still counted as a listing failure.
    let listing = crate::Problem::list_failed("its tools could not be listed");
    assert_eq!(
        (listing.status, listing.kind.as_str()),
        (502, "server-unavailable")
    );
    let error = ExecError::NotReady {
        server: "gh".into(),
        state: unavailable,
        kind: Some(listing.kind.clone()),
        cause: Some(listing.cause()),
        detail: listing.detail.clone(),
    };
    assert_eq!(error.telemetry(), Some(TelemetryEvent::ListFailed));
    // A call refused at the gate of a server waiting for authorization says so too.
    let refused = ExecError::Call {
        server: "gh".into(),
        tool: "t".into(),
        error: Box::new(CallError::NotReady {
            alias: "gh".into(),
            state: ServerState::AuthorizationRequired,
            detail: "open the URL".into(),
        }),
    };
    assert_eq!(
        (refused.telemetry(), refused.status()),
        (Some(TelemetryEvent::AuthRequired), 401)
    );
}

#[test]
fn a_protected_resource_is_named_by_its_servers_origin_alone() {
    for (url, origin) in [
        ("https://api.example.com/mcp", "https://api.example.com"),
        (
            "https://user:pa55@api.example.com:8443/k3y/mcp?key=v#x",
            "https://api.example.com:8443",
        ),
        ("http://127.0.0.1:4010", "http://127.0.0.1:4010"),
        (
            "https://<redacted>@host.example/<redacted>",
            "https://host.example",
        ),
        ("no scheme", ""),
    ] {
        assert_eq!(origin_of(url), origin, "{url}");
    }
}

#[test]
fn telemetry_events_have_their_wire_names() {
    for (event, word) in [
        (TelemetryEvent::NotConfigured, "mcp_not_configured"),
        (TelemetryEvent::Unreachable, "mcp_unreachable"),
        (TelemetryEvent::ListFailed, "mcp_list_failed"),
        (TelemetryEvent::BadArguments, "mcp_bad_arguments"),
        (TelemetryEvent::ToolError, "mcp_tool_error"),
        (TelemetryEvent::AuthRequired, "mcp_auth_required"),
    ] {
        assert_eq!(event.to_string(), word);
        assert_eq!(serde_json::to_value(event).ok(), Some(json!(word)));
    }
}

#[test]
fn what_an_error_and_its_event_show_is_scrubbed() {
    crate::redact::register(["exec-secret-31337"]);
    let (error, _) = refused("<<EXEC[exec-secret-31337](t):[1]:EXEC");
    let error = ExecError::from(error).scrubbed();
    let event = telemetry(
        error.server().unwrap_or_default(),
        TelemetryEvent::BadArguments,
        error.status(),
        &error.to_string(),
        None,
    );
    let shown = format!("{error} {error:?} {event:?}");
    assert!(!shown.contains("exec-secret-31337"), "{shown}");
    let tool_error = ExecError::ToolError {
        server: "fx".into(),
        tool: "t".into(),
        status: 500,
        result: json!({"content": [{"type": "text", "text": "key exec-secret-31337"}]}),
    }
    .scrubbed();
    assert!(!format!("{tool_error:?}").contains("exec-secret-31337"));
}

#[test]
fn the_catalog_has_each_tools_name_summary_effect_and_schema() {
    let snapshot = snapshot();
    let Some(fx) = snapshot.server("fx") else {
        panic!("fx is in the snapshot");
    };
    let value = catalog(fx);
    assert_eq!(value["server"], json!("fx"));
    assert!(
        value["summary"]
            .as_str()
            .is_some_and(|s| s.contains("echo"))
    );
    assert_eq!(
        value["tools"][0],
        json!({
            "name": "echo",
            "summary": "The echo tool",
            "effect": "read",
            "inputSchema": fx.tools[0].input_schema,
        })
    );
    assert_eq!(value["tools"][1]["effect"], json!("host"));
    assert!(value.get("problems").is_none());
}
