//! What comes back of a caller's names and of a server's words: names cut as every
//! caller-given name is quoted, and no bidirectional override or other format character,
//! which would make a table, a document, an error or the status page read otherwise.

use std::collections::BTreeMap;

use serde_json::json;

use crate::env::fixture;
use crate::http::{json_answer, raw_http};
use crate::served::{Served, raw_request};
use crate::{run, scratch_state, text};

/// Format characters a server writes: a right-to-left override, an isolate, a zero-width
/// space and a byte order mark.
const FORMAT: [char; 4] = ['\u{202E}', '\u{2067}', '\u{200B}', '\u{FEFF}'];

/// A server's words holding each of [`FORMAT`].
fn spoofed(word: &str) -> String {
    format!("{word} invoice\u{202E}fdp.exe \u{2067}isolated\u{2069} zero\u{200B}width \u{FEFF}bom")
}

fn vars(pairs: Vec<(String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}

#[test]
fn a_name_of_100000_characters_comes_back_cut_from_every_command() {
    let long = "a".repeat(100_000);
    let mut env = fixture("fx", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx"]).to_string()));
    env.push(("PLURNK_MCP_ALLOW_ADD".into(), "true".into()));
    let env = vars(env);
    let state = scratch_state("long-names");
    let commands: Vec<Vec<&str>> = vec![
        vec!["add", &long, "/bin/true"],
        vec!["tools", &long],
        vec!["docs", &long],
        vec!["docs", "fx", &long],
        vec!["resources", &long],
        vec!["read", &long, "fixture://counter"],
        vec!["prompt", &long, "greeting"],
        vec!["prompt", "fx", &long],
        vec!["--workspace", &long, "list"],
    ];
    for command in commands {
        let mut args = vec!["--state", state.as_str()];
        args.extend(command.iter().copied());
        let output = run(&args, &env);
        let said = text(&output.stderr) + &text(&output.stdout);
        let shown: Vec<&str> = command
            .iter()
            .map(|arg| &arg[..arg.len().min(12)])
            .collect();
        assert!(!output.status.success(), "{shown:?}: {said}");
        assert!(
            said.len() < 1_000 && said.contains("(100000 characters)"),
            "{shown:?} answers {} bytes: {}",
            said.len(),
            &said[..said.len().min(300)]
        );
    }
    // A resource read names the URI the host was asked for cut; what the server says of it
    // is its own text, bounded as every server's text is.
    let output = run(&["--state", &state, "read", "fx", &long], &env);
    let said = text(&output.stderr);
    assert!(
        said.contains("answered resources/read aaaa")
            && said.contains("… (100000 characters) with"),
        "{}",
        &said[..said.len().min(300)]
    );
    assert!(said.len() < 9_000, "{} bytes", said.len());
}

#[test]
fn format_characters_a_server_writes_never_reach_a_table_a_document_an_error_or_the_page() {
    let description = spoofed("described");
    let mut env = fixture("fx", &["--description", &description]);
    // A server that refuses to connect, saying why with format characters: its Problem is
    // in the status table.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let refusal = json!({"jsonrpc": "2.0", "id": 0,
                         "error": {"code": -32000, "message": spoofed("refused")}});
    let (broken, _) = runtime.block_on(raw_http(json_answer("400 Bad Request", &refusal)));
    env.push(("PLURNK_MCP_BROKEN".into(), format!("http://{broken}/mcp")));
    env.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["fx", "broken"]).to_string(),
    ));
    let env_map = vars(env.clone());
    let state = scratch_state("format-characters");
    let unshown = |said: &str| FORMAT.iter().find(|c| said.contains(**c)).copied();
    let check = |args: &[&str]| {
        let mut all = vec!["--state", state.as_str()];
        all.extend_from_slice(args);
        let output = run(&all, &env_map);
        let said = text(&output.stdout) + &text(&output.stderr);
        assert_eq!(
            unshown(&said),
            None,
            "{args:?} shows a format character: {said}"
        );
        said
    };
    // A table (the status table's Problem column).
    let table = check(&["status"]);
    assert!(table.contains("refused invoice?fdp.exe"), "{table}");
    // A document the model reads (the survey quotes the server's description).
    let survey = check(&["survey"]);
    assert!(survey.contains("described invoicefdp.exe"), "{survey}");
    // An error: the server's JSON-RPC error quotes the URI it was asked for.
    let error = check(&["read", "fx", &spoofed("uri")]);
    assert!(error.contains("uri invoice?fdp.exe"), "{error}");
    // A result, as JSON: each format character written as its escape.
    let result = check(&[
        "call",
        "fx",
        "echo",
        &json!({"text": spoofed("echo")}).to_string(),
    ]);
    assert!(result.contains("invoice\\u202efdp.exe"), "{result}");
    // The status page, with markup and all.
    let served = Served::start(&["--transport", "http"], &env, true);
    let url = served.url.clone().expect("a URL");
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .expect("http://HOST:PORT/mcp");
    let (status, page) = raw_request(authority, "GET", "/status", &[]);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("invoice\u{FFFD}fdp.exe"), "{page}");
    assert_eq!(
        unshown(&page),
        None,
        "the status page shows a format character"
    );
}
