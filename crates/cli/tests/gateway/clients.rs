//! The official TypeScript and Python SDK clients through the gateway, at both revisions,
//! elicitation included.

#[allow(unused_imports)]
use super::*;

/// The upstreams of the real-client runs: the fixture (`fx`) and the Python SDK's surfaces
/// peer (`py`: prompts, resources, and `add_tool`, which changes its tool list).
fn real_client_upstreams() -> Vec<(String, String)> {
    let peers = peers();
    let mut env = fixture("fx", &[]);
    env.push(("PLURNK_MCP_PY".into(), peers.python.clone()));
    env.push((
        "PLURNK_MCP_PY_ARGS".into(),
        json!([peer_script("python_surfaces.py")]).to_string(),
    ));
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx", "py"]).to_string()));
    env.push(("PLURNK_MCP_CONNECT_TIMEOUT".into(), "30000".into()));
    env
}

/// What every client does through the gateway: list, call, read, get a prompt, and see a
/// tool appear when an upstream adds one.
fn real_client_plan(fresh: &str) -> Value {
    json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "fx_echo", "arguments": {"text": "through the gateway"}},
        {"op": "call", "tool": "fx_add", "arguments": {"a": 20, "b": 22}},
        {"op": "call", "tool": "nobody_here", "arguments": {}},
        {"op": "list_resources"},
        {"op": "read", "uri": "memo://greeting"},
        {"op": "list_prompts"},
        {"op": "get_prompt", "name": "py_greet", "arguments": {"name": "Ada"}},
        {"op": "call", "tool": "py_add_tool", "arguments": {"name": fresh}},
        {"op": "wait_tools_changed", "timeout_ms": 20000}
    ])
}

/// Runs one client driver (`program` with `args`) to its end; its output lines by op.
fn drive(program: &str, args: &[String], env: &[(String, String)]) -> Vec<Value> {
    let output = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .envs(
            ["PATH", "HOME"]
                .iter()
                .filter_map(|key| Some((*key, std::env::var(key).ok()?))),
        )
        .stdin(Stdio::null())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client ran its plan: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON line: {line}")))
        .collect()
}

/// Checks what a client saw against what the gateway serves.
fn check_client_run(lines: &[Value], revision: &str, fresh: &str, label: &str) {
    let connected = &lines[0];
    assert_eq!(connected["op"], "connected", "{label}: {connected}");
    assert_eq!(
        connected["protocolVersion"], revision,
        "{label}: {connected}"
    );
    assert_eq!(
        connected["serverInfo"]["name"], "plurnk-mcp",
        "{label}: {connected}"
    );
    let step = |index: usize| &lines[index + 1];
    for index in [0, 1, 2, 4, 5, 6, 7, 8, 9] {
        assert_eq!(
            step(index)["ok"],
            true,
            "{label}: step {index}: {}",
            step(index)
        );
    }
    let names: Vec<&str> = step(0)["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for expected in ["fx_echo", "fx_add", "py_add_tool", "py_greet"] {
        if expected != "py_greet" {
            assert!(
                names.contains(&expected),
                "{label}: {expected} in {names:?}"
            );
        }
    }
    let text = |index: usize| step(index)["result"]["content"][0]["text"].clone();
    assert_eq!(text(1), "through the gateway", "{label}");
    assert_eq!(text(2), "42", "{label}");
    // A tool that is not served is the client's JSON-RPC error, naming it.
    assert_eq!(step(3)["ok"], false, "{label}: {}", step(3));
    assert_eq!(step(3)["error"]["code"], -32602, "{label}: {}", step(3));
    assert!(
        step(3)["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nobody_here")),
        "{label}: {}",
        step(3)
    );
    let uris: Vec<&str> = step(4)["result"]["resources"]
        .as_array()
        .map(|resources| resources.iter().filter_map(|r| r["uri"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        uris.contains(&"memo://greeting") && uris.contains(&"fixture://counter"),
        "{label}: {uris:?}"
    );
    assert!(
        step(5)["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{label}: {}",
        step(5)
    );
    let prompts: Vec<&str> = step(6)["result"]["prompts"]
        .as_array()
        .map(|prompts| prompts.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(prompts.contains(&"py_greet"), "{label}: {prompts:?}");
    assert!(
        step(7)["result"]["messages"].to_string().contains("Ada"),
        "{label}: {}",
        step(7)
    );
    let changed: Vec<&str> = step(9)["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let fresh = format!("py_{fresh}");
    assert!(
        changed.contains(&fresh.as_str()),
        "{label}: {fresh} in {changed:?}"
    );
}

/// The gateway a client drives: over HTTP a running `plurnk-mcp serve`, over stdio the
/// command line the client starts itself.
fn transports(env: &[(String, String)]) -> Vec<(&'static str, Option<Served>, Vec<String>)> {
    let served = Served::start(&["--transport", "http"], env, true);
    let url = served.url.clone().expect("url");
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-stdio-{}.sqlite", std::process::id()));
    vec![
        ("http", Some(served), vec!["--http".into(), url]),
        (
            "stdio",
            None,
            vec![
                "--stdio".into(),
                EXE.into(),
                "--state".into(),
                state.to_string_lossy().into_owned(),
                "serve".into(),
            ],
        ),
    ]
}

#[test]
fn the_official_typescript_client_lists_calls_reads_and_gets_prompts_through_the_gateway() {
    let peers = peers();
    let env = real_client_upstreams();
    let script = peer_script("gateway_client.mjs");
    for (run, (transport, served, target)) in transports(&env).into_iter().enumerate() {
        let fresh = format!("ts_fresh_{run}");
        let mut args = vec![
            script.clone(),
            "--plan".into(),
            real_client_plan(&fresh).to_string(),
        ];
        args.extend(target);
        let lines = drive(&peers.node, &args, &env);
        check_client_run(
            &lines,
            "2026-07-28",
            &fresh,
            &format!("typescript over {transport}"),
        );
        drop(served);
    }
}

#[test]
fn the_python_sdk_client_uses_the_gateway_at_both_revisions() {
    let peers = peers();
    let env = real_client_upstreams();
    let script = peer_script("gateway_client.py");
    for revision in ["2026-07-28", "2025-11-25"] {
        for (run, (transport, served, target)) in transports(&env).into_iter().enumerate() {
            let fresh = format!("py_fresh_{}_{run}", revision.replace('-', "_"));
            let mut args = vec![
                script.clone(),
                "--revision".into(),
                revision.into(),
                "--plan".into(),
                real_client_plan(&fresh).to_string(),
            ];
            args.extend(target);
            let lines = drive(&peers.python, &args, &env);
            check_client_run(
                &lines,
                revision,
                &fresh,
                &format!("python {revision} over {transport}"),
            );
            drop(served);
        }
    }
}

#[test]
fn elicitation_crosses_the_gateway_to_the_client_at_both_revisions() {
    let peers = peers();
    let mut env = vec![
        ("PLURNK_MCP_PY".to_owned(), peers.python.clone()),
        (
            "PLURNK_MCP_PY_ARGS".to_owned(),
            json!([peer_script("python_surfaces.py")]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED".to_owned(), json!(["py"]).to_string()),
    ];
    env.push(("PLURNK_MCP_CONNECT_TIMEOUT".into(), "30000".into()));
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-elicit-{}.sqlite", std::process::id()));
    let plan = json!([
        {"op": "call", "tool": "py_ask_name"},
        {"op": "call", "tool": "py_ask_name_raw"}
    ])
    .to_string();
    for revision in ["2026-07-28", "2025-11-25"] {
        for answer in [true, false] {
            let mut args = vec![
                peer_script("gateway_client.py"),
                "--revision".into(),
                revision.into(),
                "--plan".into(),
                plan.clone(),
            ];
            if answer {
                args.extend(["--elicit".into(), json!({"name": "Ada"}).to_string()]);
            }
            args.extend([
                "--stdio".into(),
                EXE.into(),
                "--state".into(),
                state.to_string_lossy().into_owned(),
                "serve".into(),
            ]);
            let lines = drive(&peers.python, &args, &env);
            let label = format!("{revision}, answering: {answer}");
            assert_eq!(lines[0]["protocolVersion"], revision, "{label}");
            for (index, step) in lines[1..].iter().enumerate() {
                if answer {
                    // The upstream's question reached the client, and its answer the upstream.
                    assert_eq!(step["ok"], true, "{label}: {step}");
                    assert_eq!(
                        step["result"]["content"][0]["text"], "hello, Ada",
                        "{label}: {step}"
                    );
                    assert_eq!(
                        step["elicited"],
                        json!(["What is your name?"]),
                        "{label}: {step}"
                    );
                } else if index == 0 {
                    // A client that declared no elicitation: the upstream sees its capabilities
                    // (not the host's) and refuses, as it does when asked directly.
                    assert_eq!(step["ok"], false, "{label}: {step}");
                    assert_eq!(step["error"]["code"], -32021, "{label}: {step}");
                } else if revision == "2026-07-28" {
                    // A raw input request reaches the client itself, which cannot answer it.
                    assert_eq!(step["ok"], false, "{label}: {step}");
                } else {
                    // A session that cannot be asked is declined for: the upstream completes
                    // with what a declined question gives.
                    assert_eq!(step["ok"], true, "{label}: {step}");
                    assert_eq!(
                        step["result"]["content"][0]["text"], "no name given",
                        "{label}: {step}"
                    );
                }
            }
        }
    }
}

/// A 2026-07-28 client of the gateway calls a tool of a 2025-11-25 upstream (server-everything)
/// that asks a question mid-call: the client is answered `input_required` with the question,
/// sends the call again with its answer and the `requestState` it was given, and gets the
/// upstream's result, which saw the answer. A client that declared no elicitation is asked
/// nothing: the upstream hears a decline.
#[test]
fn a_legacy_upstreams_question_reaches_a_2026_client_as_input_required() {
    let peers = peers();
    let env = vec![
        ("PLURNK_MCP_EVERYTHING".to_owned(), peers.node.clone()),
        (
            "PLURNK_MCP_EVERYTHING_ARGS".to_owned(),
            json!([peers.everything, "stdio"]).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED".to_owned(),
            json!(["everything"]).to_string(),
        ),
    ];
    let served = Served::start(&["--transport", "http", "--unprefixed"], &env, true);
    let url = served.url.clone().expect("url");
    let call = |meta: Value, extra: Value| {
        let mut params = json!({"name": "trigger-elicitation-request", "arguments": {},
                                "_meta": meta});
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        post_json(
            &url,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
        )
    };
    let mut asking = modern_meta();
    asking["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"form": {}}});
    // The upstream is ready once the gateway lists its tool.
    assert!(
        wait::until_blocking(BOUND, || {
            call(modern_meta(), json!({}))["result"].is_object()
        }),
        "the upstream never served the tool"
    );
    let asked = call(asking.clone(), json!({}));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let state = result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{asked}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert!(request["params"]["requestedSchema"].is_object(), "{asked}");
    let answered = call(
        asking,
        json!({"requestState": state, "inputResponses": {
            key.clone(): {"action": "accept", "content": {"name": "Ada", "check": true, "integer": 7}}}}),
    );
    let texts = |answer: &Value| -> String {
        answer["result"]["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|block| block["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let text = texts(&answered);
    assert!(
        text.contains("- Name: Ada") && text.contains("Favorite Integer: 7"),
        "{answered}"
    );
    // No elicitation declared: nothing asked, the upstream declined.
    let declined = call(modern_meta(), json!({}));
    assert!(texts(&declined).contains("declined"), "{declined}");
}
