//! EXEC ops as a model writes them: any text is read without a panic; an op that is read is
//! validated against a small fixed snapshot before anything else (there is no call here),
//! classified consistently, and written out again to the same op.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::exec;
use plurnk_mcp::{
    Authored, Catalog, Effect, Problem, ServerSnapshot, ServerState, ToolInfo, TransportKind,
    WorkspaceSnapshot,
};
use serde_json::{Value, json};

fn tool(name: &str, input_schema: Value, effect: Effect) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        title: None,
        description: Some(format!("The {name} tool.")),
        input_schema,
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
        problem: (state == ServerState::Unavailable)
            .then(|| Problem::server_unavailable("could not be listed: fuzz")),
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

/// Servers in every state; tools whose schemas use types, required, patterns, enums,
/// nesting, a local `$ref`, a remote one (never fetched) and one that cannot compile.
fn snapshot() -> &'static WorkspaceSnapshot {
    static SNAPSHOT: OnceLock<WorkspaceSnapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let fx = server(
            "fx",
            ServerState::Ready,
            vec![
                tool(
                    "echo",
                    json!({"type": "object", "properties": {"text": {"type": "string", "maxLength": 64}},
                           "required": ["text"], "additionalProperties": false}),
                    Effect::Read,
                ),
                tool(
                    "add",
                    json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                           "required": ["a", "b"]}),
                    Effect::Host,
                ),
                tool("none", json!({"type": "object"}), Effect::Read),
                tool(
                    "shaped",
                    json!({
                        "type": "object",
                        "$defs": {"level": {"enum": ["low", "high", 3, null]}},
                        "properties": {
                            "level": {"$ref": "#/$defs/level"},
                            "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{1,4}$"},
                            "items": {"type": "array", "items": {"type": "object",
                                      "properties": {"n": {"type": "integer", "minimum": 0}}},
                                      "maxItems": 4, "uniqueItems": true},
                            "one": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
                        }
                    }),
                    Effect::Host,
                ),
                tool(
                    "remote",
                    json!({"type": "object", "properties": {"x": {"$ref": "https://schemas.invalid/x.json"}}}),
                    Effect::Host,
                ),
                tool("broken", json!({"type": 12}), Effect::Host),
            ],
        );
        let servers = [
            fx,
            server("off", ServerState::Disabled, vec![]),
            server("down", ServerState::Unavailable, vec![]),
            server("early", ServerState::Connecting, vec![]),
            server("looped", ServerState::CrashLoop, vec![]),
        ];
        WorkspaceSnapshot {
            workspace: "fuzz".into(),
            version: 1,
            servers: servers.into_iter().collect(),
        }
    })
}

/// The first byte picks a frame for the rest, so that most inputs reach past the op's head
/// into the names, the body and validation: raw text, a body for one of the tools, a tool
/// name and body, or a server and what follows it.
fn framed(data: &[u8]) -> Option<String> {
    let (&pick, rest) = data.split_first()?;
    let rest = std::str::from_utf8(rest).ok()?;
    const TOOLS: [&str; 6] = ["echo", "add", "none", "shaped", "remote", "broken"];
    Some(match pick % 4 {
        0 => rest.to_owned(),
        1 => format!(
            "<<EXEC[fx]({}):{rest}:EXEC",
            TOOLS[usize::from(pick / 4) % TOOLS.len()]
        ),
        2 => format!("<<EXEC[fx]({rest}:EXEC"),
        _ => format!("<<EXEC[{rest}:EXEC"),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(text) = framed(data) else {
        return;
    };
    let op = match exec::parse(&text) {
        Ok(op) => op,
        Err(error) => {
            let _ = (error.to_string(), error.server());
            return;
        }
    };
    let snapshot = snapshot();
    // Validation runs first and always returns.
    match exec::validate(&op, snapshot) {
        Ok(validated) => {
            assert_eq!(
                exec::effect(validated.op(), snapshot),
                Ok(validated.effect())
            );
        }
        Err(error) => {
            let _ = (
                error.to_string(),
                error.status(),
                error.telemetry(),
                error.problem(),
            );
        }
    }
    let _ = exec::effect(&op, snapshot);
    // What was read, written out again, reads the same.
    assert_eq!(exec::parse(&op.to_string()), Ok(op));
});
