//! Definition and options JSON from untrusted callers: parsed, validated and converted to
//! the stored form without a panic, whatever the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::ServerDefinition;
use plurnk_mcp::config::{McpServerDefinition, McpServerOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(wire) = McpServerDefinition::from_json(text)
        && let Ok(definition) = ServerDefinition::try_from(wire)
    {
        let _ = definition.to_durable();
        let _ = format!("{definition:?}");
        let _ = definition.referenced_names();
    }
    if let Ok(options) = McpServerOptions::from_json(text)
        && let Ok(base) = ServerDefinition::from_target("fuzz", "/bin/true")
    {
        let _ = base.with_options(&options);
    }
});
