//! The address rule behind a proxy: a target a document chose is judged before the request
//! reaches the proxy the environment names, which would resolve it unjudged.

use std::collections::BTreeMap;

use serde_json::json;

use crate::http::{json_answer, routed_http};
use crate::{run, scratch, text};

#[test]
fn a_documents_loopback_server_never_reaches_the_proxy() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    // The proxy: it serves the document at a public name, and answers anything else it is
    // asked to fetch (as a proxy that reaches the host's loopback would).
    let document = json!({
        "openapi": "3.0.3",
        "info": {"title": "pets", "version": "1"},
        "servers": [{"url": "http://localhost:9/api"}],
        "paths": {"/pets": {"get": {"operationId": "listPets",
            "responses": {"200": {"description": "the pets"}}}}}
    });
    let (proxy, asked) = runtime.block_on(routed_http(move |_, target| {
        if target.ends_with("/openapi.json") {
            json_answer("200 OK", &document)
        } else {
            json_answer("200 OK", &json!({"pets": ["from the proxy's loopback"]}))
        }
    }));
    let dir = scratch("proxy");
    let declaration = dir.join("pets.json");
    std::fs::write(
        &declaration,
        json!({"kind": "openapi", "name": "pets",
               "spec": "http://spec.example/openapi.json"})
        .to_string(),
    )
    .expect("the declaration");
    let state = dir.join("state.sqlite").display().to_string();
    let vars: BTreeMap<String, String> = [
        ("PLURNK_MCP_ALLOW_ADD".to_owned(), "true".to_owned()),
        ("HTTP_PROXY".to_owned(), format!("http://{proxy}")),
    ]
    .into_iter()
    .collect();
    let added = run(
        &[
            "--state",
            &state,
            "add",
            "pets",
            "--source",
            &declaration.display().to_string(),
        ],
        &vars,
    );
    assert!(
        added.status.success(),
        "the document is fetched through the proxy: {}{}",
        text(&added.stdout),
        text(&added.stderr)
    );
    let called = run(
        &["--state", &state, "call", "pets", "listPets", "{}"],
        &vars,
    );
    let said = text(&called.stdout) + &text(&called.stderr);
    assert!(
        !called.status.success() && said.contains("`localhost` resolves to"),
        "{said}"
    );
    let asked = asked.lock().expect("recorded").clone();
    assert!(
        asked.iter().any(|request| request.contains("spec.example")),
        "the proxy served the document: {asked:?}"
    );
    assert!(
        !asked.iter().any(|request| request.contains("localhost")),
        "the document's loopback server reached the proxy: {asked:?}"
    );
}
