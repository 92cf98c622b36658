//! The environment parser: any set of variables is either a configuration or a list of
//! faults, never a panic, and no fault quotes a value (every value carries a marker that must
//! not appear in any message, unless a variable's name carries it too).
#![no_main]

use libfuzzer_sys::fuzz_target;

const MARK: &str = "zqxSECRETxqz";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Lines of `KEY=VALUE`; keys are mostly in our namespace so the parser is reached.
    let vars: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| {
            let key = if key.starts_with('!') {
                key[1..].to_owned()
            } else {
                format!("PLURNK_MCP_{key}")
            };
            (key, format!("{value}{MARK}"))
        })
        .collect();
    let names_marked = vars.iter().any(|(key, _)| key.contains(MARK));
    if let Err(errors) = plurnk_mcp::HostConfig::from_env(vars) {
        let shown = format!("{errors} {errors:?}");
        assert!(
            names_marked || !shown.contains(MARK),
            "a value leaked into a configuration fault: {shown}"
        );
    }
});
