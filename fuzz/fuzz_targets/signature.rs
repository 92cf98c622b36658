//! Input schemas from untrusted servers: the signature renderer and the tool document never
//! panic, whatever the JSON (cycles of `$ref`, huge nesting, wrong types), and the signature
//! stays one deterministic line.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::projection::{signature, tool_document};
use plurnk_mcp::{
    Catalog, Effect, ServerSnapshot, ServerState, ToolInfo, TransportKind, WorkspaceSnapshot,
};

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let line = signature(&schema);
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.starts_with('{') && line.ends_with('}'), "an object: {line}");
    assert_eq!(signature(&schema), line, "deterministic");
    let server = ServerSnapshot {
        alias: "fuzz".into(),
        transport: TransportKind::Stdio,
        state: ServerState::Ready,
        problem: None,
        connecting: None,
        phases: None,
        recovered: None,
        negotiated: None,
        tools: Arc::from([ToolInfo {
            name: "t".into(),
            title: None,
            description: None,
            input_schema: schema,
            output_schema: None,
            annotations: None,
            effect: Effect::Host,
        }]),
        catalog: Catalog::default(),
        generation: 1,
        authored: Arc::default(),
        authorization: None,
        sandbox: None,
    };
    let snapshot = WorkspaceSnapshot {
        workspace: "default".into(),
        version: 1,
        servers: [server].into_iter().collect(),
    };
    assert!(tool_document(&snapshot, "fuzz", "t").is_some());
});
