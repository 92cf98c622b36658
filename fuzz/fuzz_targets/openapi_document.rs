//! OpenAPI documents from untrusted servers: read into tools without a panic, whatever the
//! JSON, and never past the bounds — each tool, and all of them together, written out within
//! their bytes — even when references fan out. `scripts/fuzz.sh` runs this target with
//! `-rss_limit_mb`, so resolving that holds more than the bounds allow fails the run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::sources::openapi::{
    Bounds, DEFAULT_MAX_CATALOG_BYTES, DEFAULT_MAX_TOOL_BYTES, document_tools,
};

/// Small bounds, which short inputs reach.
const SMALL: Bounds = Bounds {
    tool_bytes: 4 * 1024,
    catalog_bytes: 16 * 1024,
};

/// The declaration's defaults, which a fan-out reaches from a few bytes.
const DEFAULTS: Bounds = Bounds {
    tool_bytes: DEFAULT_MAX_TOOL_BYTES,
    catalog_bytes: DEFAULT_MAX_CATALOG_BYTES,
};

fuzz_target!(|data: &[u8]| {
    within(data, SMALL);
    // The same bytes as the shape of a fan-out: how deep, how wide, how long a leaf; at the
    // defaults when the first byte's high bit is set (each such run resolves about 1 MiB, so
    // the others keep the small bounds and the run count up).
    if let [depth, width, rest @ ..] = data {
        let document = fan_out(usize::from(depth % 48), usize::from(width % 4) + 1, rest);
        let bounds = if depth & 0x80 == 0 { SMALL } else { DEFAULTS };
        within(document.as_bytes(), bounds);
    }
});

/// Reads `bytes` under `bounds`; whatever it offers fits them, written out.
fn within(bytes: &[u8], bounds: Bounds) {
    let Ok(tools) = document_tools(bytes, bounds) else {
        return;
    };
    let mut total = 0;
    for tool in &tools {
        let written = json_len(&tool.name)
            + tool.description.as_deref().map_or(0, json_len)
            + serde_json::to_string(&tool.input_schema)
                .map(|s| s.len())
                .unwrap_or(0);
        assert!(written <= bounds.tool_bytes, "{} is {written} bytes", tool.name);
        total += written;
    }
    assert!(total <= bounds.catalog_bytes, "the tools are {total} bytes");
}

fn json_len(text: &str) -> usize {
    serde_json::to_string(text).map(|s| s.len()).unwrap_or(0)
}

/// A document whose operation's body refers to `depth` levels of schemas, each referring
/// `width` times to the next, with `leaf` (as text) at the bottom.
fn fan_out(depth: usize, width: usize, leaf: &[u8]) -> String {
    let mut schemas = serde_json::Map::new();
    for level in 0..depth {
        let properties: serde_json::Map<String, serde_json::Value> = (0..width)
            .map(|i| {
                let below = format!("#/components/schemas/L{}", level + 1);
                (format!("p{i}"), serde_json::json!({"$ref": below}))
            })
            .collect();
        schemas.insert(
            format!("L{level}"),
            serde_json::json!({"type": "object", "properties": properties}),
        );
    }
    schemas.insert(
        format!("L{depth}"),
        serde_json::json!({"type": "string", "description": String::from_utf8_lossy(leaf)}),
    );
    serde_json::json!({
        "openapi": "3.1.0",
        "paths": {"/deep": {"post": {
            "operationId": "deep",
            "requestBody": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/L0"}}}}
        }}},
        "components": {"schemas": schemas}
    })
    .to_string()
}
