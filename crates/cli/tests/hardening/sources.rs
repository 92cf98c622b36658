//! A model's values for a tool source: never options of its choosing.

use plurnk_mcp::sources::SourceKind;
use plurnk_mcp::{CallError, CallOptions};
use serde_json::json;

use crate::calls::shutdown_clean;
use crate::{host_on, scratch, source};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_naming_a_response_file_never_reaches_gcc() {
    let dir = scratch("response-file");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    std::fs::write(work.join("a.c"), "int x;\n").expect("a source file");
    // What gcc reads from `@notes.txt`: a wrapper that runs a command of the file's choosing.
    std::fs::write(
        work.join("notes.txt"),
        "-wrapper \"/bin/sh,-c,touch PWNED\"\n",
    )
    .expect("a response file");
    let host = host_on(&dir.join("state.sqlite")).await;
    let workspace = host.workspace("team").await.expect("workspace");
    let declaration = json!({
        "kind": "cli", "name": "cc", "command": "gcc", "cwd": work,
        "tools": [{"name": "compile", "args": ["-c", "-o", "/dev/null"],
                   "params": [{"name": "files", "type": "array", "required": true}]}]
    });
    workspace
        .add(source(
            "cc",
            SourceKind::Cli,
            declaration,
            &dir.join("cc.json"),
        ))
        .await
        .expect("gcc is added");
    let refused = workspace
        .call_tool(
            "cc",
            "compile",
            json!({"files": ["@notes.txt", "a.c"]}),
            CallOptions::default(),
        )
        .await;
    match refused {
        Err(CallError::Remote { code, message, .. }) => {
            assert_eq!(code, -32602, "{message}");
            assert!(
                message
                    .contains("argument \"files\" item 1 is \"@notes.txt\", which starts with '@'"),
                "{message}"
            );
        }
        other => panic!("the response file is refused: {other:?}"),
    }
    assert!(!work.join("PWNED").exists(), "gcc ran the wrapper");
    // The same file compiled as a file: gcc runs.
    let compiled = workspace
        .call_tool(
            "cc",
            "compile",
            json!({"files": ["a.c"]}),
            CallOptions::default(),
        )
        .await
        .expect("gcc runs");
    assert!(!compiled.is_error, "{}", compiled.text());
    shutdown_clean(host).await;
}
