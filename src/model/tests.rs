use std::collections::BTreeMap;

use serde_json::Value;

use super::*;

#[test]
fn a_published_snapshot_shows_no_secret_a_server_reported() {
    crate::redact::register(["snapshot-secret-4242"]);
    let tool = |name: &str, description: &str| ToolInfo {
        name: name.to_owned(),
        title: None,
        description: Some(description.to_owned()),
        input_schema: serde_json::json!({"description": description}),
        output_schema: None,
        annotations: None,
        effect: Effect::Host,
    };
    let clean_tools: Arc<[ToolInfo]> = Arc::from([tool("plain", "nothing here")]);
    let mut snapshot = ServerSnapshot {
        alias: "leaky".into(),
        transport: TransportKind::Stdio,
        state: ServerState::Unavailable,
        problem: Some(Problem::server_unavailable("died: snapshot-secret-4242")),
        connecting: None,
        phases: None,
        recovered: None,
        negotiated: Some(Arc::new(Negotiated {
            revision: "2026-07-28".into(),
            modern: true,
            name: Some("snapshot-secret-4242".into()),
            version: None,
            title: None,
            description: None,
            instructions: Some("call with SNAPSHOT-SECRET-4242".into()),
            capabilities: Value::Null,
            discovery: None,
        })),
        tools: Arc::from([
            tool("leaks", "key snapshot-secret-4242"),
            tool("plain", "fine"),
        ]),
        catalog: Catalog {
            resources: Arc::from([ResourceInfo {
                uri: "memo://snapshot-secret-4242".into(),
                name: "r".into(),
                description: None,
                mime_type: Some("text/snapshot-secret-4242".into()),
                definition: Value::Null,
            }]),
            ..Catalog::default()
        },
        generation: 1,
        authored: Arc::new(Authored {
            summary: Some("orientation snapshot-secret-4242".into()),
            tools: BTreeMap::from([("leaks".into(), "uses snapshot-secret-4242".into())]),
            expanded: false,
        }),
        authorization: None,
        sandbox: None,
    };
    snapshot.scrub();
    let shown = format!(
        "{snapshot:?} {}",
        serde_json::to_string(&snapshot).unwrap_or_default()
    );
    assert!(
        !shown.to_ascii_lowercase().contains("snapshot-secret-4242"),
        "{shown}"
    );
    assert_eq!(snapshot.tools[1].description.as_deref(), Some("fine"));
    // A list with nothing to hide is left as it is, shared.
    let mut clean = snapshot.clone();
    clean.tools = clean_tools.clone();
    let clean_negotiated = clean.negotiated.clone();
    clean.scrub();
    assert!(Arc::ptr_eq(&clean_tools, &clean.tools));
    assert!(
        matches!((&clean_negotiated, &clean.negotiated), (Some(a), Some(b)) if Arc::ptr_eq(a, b)),
        "a negotiation with nothing to hide stays shared"
    );
}

#[test]
fn the_route_rule_admits_only_a_ready_server_that_lists_the_tool() {
    let server = |alias: &str, state: ServerState, problem: Option<Problem>| ServerSnapshot {
        alias: alias.into(),
        transport: TransportKind::Stdio,
        state,
        problem,
        connecting: None,
        phases: None,
        recovered: None,
        negotiated: None,
        tools: Arc::from([ToolInfo {
            name: "echo".into(),
            title: None,
            description: None,
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            effect: Effect::Host,
        }]),
        catalog: Catalog::default(),
        generation: 1,
        authored: Arc::new(Authored::default()),
        authorization: None,
        sandbox: None,
    };
    let down = Problem::server_unavailable("it exited");
    let snapshot = WorkspaceSnapshot {
        workspace: "default".into(),
        version: 3,
        servers: [
            server("up", ServerState::Ready, None),
            server("off", ServerState::Disabled, None),
            server("down", ServerState::Unavailable, Some(down.clone())),
            server("starting", ServerState::Connecting, None),
        ]
        .into_iter()
        .collect(),
    };
    let up = snapshot.server("up").map(|server| server.alias.as_str());
    assert_eq!(
        snapshot.admit("up", None).ok().map(|s| s.alias.as_str()),
        up
    );
    assert_eq!(
        snapshot
            .admit("up", Some("echo"))
            .ok()
            .map(|s| s.alias.as_str()),
        up
    );
    assert!(matches!(
        snapshot.admit("up", Some("missing")),
        Err(Refusal::UnknownTool { server, tool: "missing" }) if server.alias == "up"
    ));
    assert_eq!(
        snapshot.admit("nowhere", None).err(),
        Some(Refusal::UnknownServer)
    );
    assert_eq!(
        snapshot.admit("off", Some("echo")).err(),
        Some(Refusal::Disabled { problem: None })
    );
    assert_eq!(
        snapshot.admit("down", Some("echo")).err(),
        Some(Refusal::NotReady {
            state: ServerState::Unavailable,
            problem: Some(&down)
        })
    );
    assert_eq!(
        snapshot.admit("starting", None).err(),
        Some(Refusal::NotReady {
            state: ServerState::Connecting,
            problem: None
        })
    );
}

/// A server of `state` with nothing else, for the map tests.
fn bare_server(alias: &str, state: ServerState) -> ServerSnapshot {
    ServerSnapshot {
        alias: alias.into(),
        transport: TransportKind::Stdio,
        state,
        problem: None,
        connecting: None,
        phases: None,
        recovered: None,
        negotiated: None,
        tools: Arc::from([]),
        catalog: Catalog::default(),
        generation: 0,
        authored: Arc::default(),
        authorization: None,
        sandbox: None,
    }
}

#[test]
fn the_servers_count_each_state_as_servers_come_change_and_go() {
    let mut servers: Servers = [
        bare_server("b", ServerState::Connecting),
        bare_server("a", ServerState::Connecting),
        bare_server("c", ServerState::Disabled),
    ]
    .into_iter()
    .collect();
    let counts = |servers: &Servers| ServerState::ALL.map(|state| servers.count(state));
    assert_eq!(counts(&servers), [1, 0, 2, 0, 0, 0, 0]);
    assert!(
        servers
            .insert(Arc::new(bare_server("a", ServerState::Ready)))
            .is_some_and(|previous| previous.state == ServerState::Connecting),
        "a server put again replaces the one there"
    );
    servers.insert(Arc::new(bare_server("b", ServerState::CrashLoop)));
    assert_eq!(counts(&servers), [1, 0, 0, 1, 0, 1, 0]);
    assert_eq!(servers.len(), 3);
    assert!(servers.remove("c").is_some());
    assert!(servers.remove("c").is_none(), "gone once");
    assert_eq!(counts(&servers), [0, 0, 0, 1, 0, 1, 0]);
    assert_eq!(
        servers.aliases().collect::<Vec<_>>(),
        ["a", "b"],
        "in alias order"
    );
    let snapshot = WorkspaceSnapshot {
        workspace: "default".into(),
        version: 1,
        servers,
    };
    assert!(snapshot.is_settled(), "nothing is connecting");
    // Serialized as it always was: an object of servers by alias.
    let json = serde_json::to_value(&snapshot).expect("a snapshot serializes");
    assert_eq!(json["servers"]["a"]["state"], "ready");
    assert_eq!(json["servers"]["b"]["state"], "crash-loop");
}

#[test]
fn a_changed_copy_of_the_servers_shares_every_other_entry() {
    let before: Servers = (0..200)
        .map(|i| bare_server(&format!("s{i:03}"), ServerState::Ready))
        .collect();
    let mut after = before.clone();
    after.insert(Arc::new(bare_server("s100", ServerState::Disabled)));
    assert_eq!(
        before.count(ServerState::Ready),
        200,
        "the original is whole"
    );
    assert_eq!(after.count(ServerState::Ready), 199);
    for (alias, server) in before.iter() {
        let same = after
            .get(alias)
            .is_some_and(|other| Arc::ptr_eq(server, other));
        assert_eq!(same, alias != "s100", "{alias}");
    }
}
