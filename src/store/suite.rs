//! The store's behaviour as every [`Store`] must show it: one suite of cases, each against a
//! fresh store, run by the crate's unit tests against [`MemoryStore`](super::MemoryStore) and
//! [`SqliteStore`](super::SqliteStore) and by the end-to-end suite against a real PostgreSQL
//! (`crates/cli/tests/replicas.rs`). Built only for tests (`test-hooks`).

#![allow(missing_docs, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};

use super::{RecordSource, ServerRecord, Store, StoreError, WorkspaceRecord};

/// A store under test and a way to see everything it has made durable.
pub trait Harness: Sync {
    fn store(&self) -> &dyn Store;
    /// Every durable byte (for SQLite the database file and its WAL, for others a rendering
    /// of the whole state): equal before and after means the operation changed nothing.
    fn durable_bytes(&self) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>>;
}

/// Every case of the suite, by name, for a runner that runs them all.
pub const CASES: &[&str] = &[
    "a_new_store_is_empty",
    "put_then_load_round_trips",
    "set_enabled_overrides_with_or_without_a_record",
    "remove_clears_the_record_and_the_override",
    "removing_what_is_not_there_changes_nothing",
    "last_write_wins",
    "put_keeps_the_enabled_override",
    "workspaces_are_independent",
    "literal_credentials_are_refused_and_change_nothing",
    "display_forms_with_redacted_values_are_refused_and_change_nothing",
    "references_are_stored_exactly_as_given",
    "put_server_enabled_writes_both_or_neither",
    "revert_drops_the_record_and_keeps_the_alias_disabled",
    "adding_a_taken_alias_is_refused_and_changes_nothing",
    "versions_grow_with_every_write_and_survive_a_removal",
    "a_write_from_a_stale_version_is_refused_and_changes_nothing",
    "a_definition_past_its_bound_is_refused_and_one_within_reads_back_whole",
];

/// Runs the case named `name` against `h`.
pub async fn run(name: &str, h: &dyn Harness) {
    match name {
        "a_new_store_is_empty" => a_new_store_is_empty(h).await,
        "put_then_load_round_trips" => put_then_load_round_trips(h).await,
        "set_enabled_overrides_with_or_without_a_record" => {
            set_enabled_overrides_with_or_without_a_record(h).await
        }
        "remove_clears_the_record_and_the_override" => {
            remove_clears_the_record_and_the_override(h).await
        }
        "removing_what_is_not_there_changes_nothing" => {
            removing_what_is_not_there_changes_nothing(h).await
        }
        "last_write_wins" => last_write_wins(h).await,
        "put_keeps_the_enabled_override" => put_keeps_the_enabled_override(h).await,
        "workspaces_are_independent" => workspaces_are_independent(h).await,
        "literal_credentials_are_refused_and_change_nothing" => {
            literal_credentials_are_refused_and_change_nothing(h).await
        }
        "display_forms_with_redacted_values_are_refused_and_change_nothing" => {
            display_forms_with_redacted_values_are_refused_and_change_nothing(h).await
        }
        "references_are_stored_exactly_as_given" => references_are_stored_exactly_as_given(h).await,
        "put_server_enabled_writes_both_or_neither" => {
            put_server_enabled_writes_both_or_neither(h).await
        }
        "revert_drops_the_record_and_keeps_the_alias_disabled" => {
            revert_drops_the_record_and_keeps_the_alias_disabled(h).await
        }
        "adding_a_taken_alias_is_refused_and_changes_nothing" => {
            adding_a_taken_alias_is_refused_and_changes_nothing(h).await
        }
        "versions_grow_with_every_write_and_survive_a_removal" => {
            versions_grow_with_every_write_and_survive_a_removal(h).await
        }
        "a_definition_past_its_bound_is_refused_and_one_within_reads_back_whole" => {
            a_definition_past_its_bound_is_refused_and_one_within_reads_back_whole(h).await
        }
        "a_write_from_a_stale_version_is_refused_and_changes_nothing" => {
            a_write_from_a_stale_version_is_refused_and_changes_nothing(h).await
        }
        other => panic!("no store case named {other}"),
    }
}

/// The state as loaded, without the versions (the cases written before versions compare
/// records and overrides; the version cases read them on their own).
pub async fn loaded(s: &dyn Store) -> BTreeMap<String, WorkspaceRecord> {
    let mut state = s.load().await.unwrap();
    for record in state.values_mut() {
        record.versions.clear();
    }
    state
}

pub fn render(state: &BTreeMap<String, WorkspaceRecord>) -> String {
    let mut out = String::new();
    for (name, workspace) in state {
        for (alias, record) in &workspace.servers {
            out += &format!("{name} {alias} {} {}\n", record.source, record.definition);
        }
        for (alias, enabled) in &workspace.enabled {
            out += &format!("{name} {alias} enabled={enabled}\n");
        }
    }
    out
}

pub fn record(alias: &str, source: RecordSource, definition: Value) -> ServerRecord {
    ServerRecord {
        alias: alias.to_owned(),
        definition,
        source,
    }
}

pub fn stdio(alias: &str) -> ServerRecord {
    record(
        alias,
        RecordSource::Added,
        json!({
            "name": alias,
            "transport": "stdio",
            "command": "/usr/bin/server",
            "args": ["--token=${TOKEN}", "--verbose"],
            "env": {"API_KEY": "${API_KEY}"},
            "tools": ["a", "b"],
            "read": ["a"],
        }),
    )
}

pub fn bearer(alias: &str, token: &str) -> ServerRecord {
    record(
        alias,
        RecordSource::Specialized,
        json!({
            "name": alias,
            "transport": "http",
            "url": "https://example.test/mcp",
            "authorization": {"type": "bearer", "token": token},
        }),
    )
}

pub fn workspace(
    servers: impl IntoIterator<Item = ServerRecord>,
    enabled: impl IntoIterator<Item = (&'static str, bool)>,
) -> WorkspaceRecord {
    WorkspaceRecord {
        servers: servers.into_iter().map(|r| (r.alias.clone(), r)).collect(),
        enabled: enabled
            .into_iter()
            .map(|(a, e)| (a.to_owned(), e))
            .collect(),
        versions: BTreeMap::new(),
    }
}

// === the cases ===

pub async fn put_server_enabled_writes_both_or_neither(h: &dyn Harness) {
    let s = h.store();
    s.put_server_enabled("a", &stdio("local"), true)
        .await
        .unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
    // A refused record writes neither half.
    assert!(
        s.put_server_enabled("a", &bearer("github", "literal-token"), true)
            .await
            .is_err()
    );
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
}

pub async fn a_new_store_is_empty(h: &dyn Harness) {
    assert!(loaded(h.store()).await.is_empty());
}

pub async fn put_then_load_round_trips(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    s.put_server("a", &bearer("github", "${GH_TOKEN}"))
        .await
        .unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local"), bearer("github", "${GH_TOKEN}")], [])
        )])
    );
}

pub async fn set_enabled_overrides_with_or_without_a_record(h: &dyn Harness) {
    let s = h.store();
    // A service definition the workspace does not specialize: an override alone.
    s.set_enabled("b", "figma", false).await.unwrap();
    // An added one: record and override.
    s.put_server("b", &stdio("local")).await.unwrap();
    s.set_enabled("b", "local", true).await.unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "b".to_owned(),
            workspace([stdio("local")], [("figma", false), ("local", true)])
        )])
    );
}

pub async fn remove_clears_the_record_and_the_override(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    s.set_enabled("a", "local", true).await.unwrap();
    s.put_server("a", &bearer("github", "${T}")).await.unwrap();
    s.set_enabled("a", "github", false).await.unwrap();

    s.remove_server("a", "local").await.unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "a".to_owned(),
            workspace([bearer("github", "${T}")], [("github", false)])
        )])
    );
    // A workspace left with nothing is not loaded at all.
    s.remove_server("a", "github").await.unwrap();
    assert!(loaded(s).await.is_empty());
}

pub async fn revert_drops_the_record_and_keeps_the_alias_disabled(h: &dyn Harness) {
    let s = h.store();
    s.put_server_enabled("a", &stdio("local"), true)
        .await
        .unwrap();
    s.revert_server("a", "local").await.unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([("a".to_owned(), workspace([], [("local", false)]))])
    );
    // Reverting what was never stored records it disabled too.
    s.revert_server("b", "other").await.unwrap();
    assert_eq!(
        loaded(s).await.get("b"),
        Some(&workspace([], [("other", false)]))
    );
}

pub async fn adding_a_taken_alias_is_refused_and_changes_nothing(h: &dyn Harness) {
    let s = h.store();
    s.add_server("a", &stdio("local"), true).await.unwrap();
    let before = h.durable_bytes().await;
    let mut other = stdio("local");
    other.definition["args"] = json!(["--other"]);
    let err = s.add_server("a", &other, false).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Exists { workspace, alias } if workspace == "a" && alias == "local"),
        "{err:?}"
    );
    assert_eq!(h.durable_bytes().await, before);
    // Another workspace is another namespace.
    s.add_server("b", &other, false).await.unwrap();
}

pub async fn removing_what_is_not_there_changes_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    let before = h.durable_bytes().await;
    s.remove_server("a", "nope").await.unwrap();
    s.remove_server("nowhere", "local").await.unwrap();
    assert_eq!(h.durable_bytes().await, before);
}

pub async fn last_write_wins(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("x")).await.unwrap();
    s.set_enabled("a", "x", true).await.unwrap();
    let mut second = bearer("x", "${OTHER}");
    second.source = RecordSource::Specialized;
    s.put_server("a", &second).await.unwrap();
    s.set_enabled("a", "x", false).await.unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([("a".to_owned(), workspace([second], [("x", false)]))])
    );
}

pub async fn put_keeps_the_enabled_override(h: &dyn Harness) {
    let s = h.store();
    s.set_enabled("a", "github", false).await.unwrap();
    s.put_server("a", &bearer("github", "${T}")).await.unwrap();
    assert!(!loaded(s).await["a"].enabled["github"]);
}

pub async fn workspaces_are_independent(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    s.set_enabled("a", "local", true).await.unwrap();
    s.set_enabled("b", "local", false).await.unwrap();
    s.remove_server("b", "local").await.unwrap();
    assert_eq!(
        loaded(s).await,
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
}

pub async fn literal_credentials_are_refused_and_change_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    s.set_enabled("a", "local", true).await.unwrap();
    let before = h.durable_bytes().await;

    let secret = "ghp_s3cr3tTOKEN";
    let http = |headers: Value, url: &str| {
        record(
            "web",
            RecordSource::Added,
            json!({"name": "web", "transport": "http", "url": url, "headers": headers}),
        )
    };
    let with_env = |env: Value| {
        record(
            "cli",
            RecordSource::Added,
            json!({"name": "cli", "transport": "stdio", "command": "/bin/x", "env": env}),
        )
    };
    let cases = [
        (
            "headers.\"X-Api-Key\"",
            http(json!({"X-Api-Key": secret}), "https://h/"),
        ),
        (
            "headers.\"Authorization\"",
            http(
                json!({"Authorization": format!("Bearer {secret}")}),
                "https://h/",
            ),
        ),
        (
            "headers.\"x-session-token\"",
            http(json!({"x-session-token": "${A}${B}"}), "https://h/"),
        ),
        (
            "env.\"GITHUB_TOKEN\"",
            with_env(json!({"GITHUB_TOKEN": secret})),
        ),
        (
            "env.\"DB_PASSWORD\"",
            with_env(json!({"DB_PASSWORD": secret})),
        ),
        (
            "url (its query value \"api_key\")",
            http(json!({}), &format!("https://h/mcp?v=1&api_key={secret}")),
        ),
        (
            "url (its password)",
            http(json!({}), &format!("https://user:{secret}@h/mcp")),
        ),
        ("authorization.token", bearer("github", secret)),
        ("authorization.token", bearer("github", "Bearer ${T}")),
        ("authorization.token", bearer("github", "${T}${U}")),
        ("authorization.token", bearer("github", "${1T}")),
        (
            "authorization.clientSecret",
            record(
                "cc",
                RecordSource::Added,
                json!({"name": "cc", "transport": "http", "url": "https://h/",
                    "authorization": {"type": "client-credentials", "clientId": "id",
                        "clientSecret": secret}}),
            ),
        ),
        (
            "authorization.clientSecret",
            record(
                "cc",
                RecordSource::Added,
                json!({"authorization": {"type": "oauth", "clientSecret": 42}}),
            ),
        ),
        (
            "bearer",
            record("b", RecordSource::Added, json!({"bearer": secret})),
        ),
        (
            "authorization.assertion",
            record(
                "wi",
                RecordSource::Added,
                json!({"name": "wi", "transport": "http", "url": "https://h/",
                    "authorization": {"type": "workload-identity", "assertion": secret}}),
            ),
        ),
        // A credential-named entry whose value holds a `$` but no reference.
        (
            "env.\"DB_PASSWORD\"",
            with_env(json!({"DB_PASSWORD": "pa$$w0rd"})),
        ),
        ("env.\"GH_PAT\"", with_env(json!({"GH_PAT": "x"}))),
        (
            "headers.\"X-Auth\"",
            http(json!({"X-Auth": "user:pa55"}), "https://h/"),
        ),
        (
            "env.\"DATABASE_URL\" (its password)",
            with_env(json!({"DATABASE_URL": "postgres://app:pa55w0rd@db:5432/app"})),
        ),
        (
            "env.\"SETTINGS\" (a token-shaped value)",
            with_env(json!({"SETTINGS": "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o"})),
        ),
        // Shapes the names and the token test once missed.
        ("env.\"SESSION\"", with_env(json!({"SESSION": "s3ss"}))),
        (
            "headers.\"X-Session\"",
            http(json!({"X-Session": "abc"}), "https://h/"),
        ),
        (
            "headers.\"X-Trace\" (a token-shaped value)",
            http(
                json!({"X-Trace": "3f9a0c4e1b7d2a6f8e5c9b0d4a1f7e3c2b6d8a90"}),
                "https://h/",
            ),
        ),
        (
            "env.\"NOTIFY\" (a webhook URL, whose path is its secret)",
            with_env(json!({"NOTIFY":
                "https://hooks.slack.com/services/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"})),
        ),
        (
            "args[2] (the value of --api-key)",
            record(
                "cli",
                RecordSource::Added,
                json!({"name": "cli", "transport": "stdio", "command": "/bin/x",
                    "args": ["serve", "--api-key", "plain-words"]}),
            ),
        ),
        (
            "args[0] (the value of --token)",
            record(
                "cli",
                RecordSource::Added,
                json!({"name": "cli", "transport": "stdio", "command": "/bin/x",
                    "args": ["--token=plain-words"]}),
            ),
        ),
        // A tool source's declaration is kept too.
        (
            "declaration.env.\"CLIENT_SECRET\"",
            record(
                "tool",
                RecordSource::Added,
                json!({"name": "tool", "transport": "cli",
                    "declaration": {"name": "tool", "command": "x", "tools": [],
                        "env": {"CLIENT_SECRET": "abc"}}}),
            ),
        ),
        (
            "declaration.headers.\"X-Api-Key\"",
            record(
                "api",
                RecordSource::Added,
                json!({"name": "api", "transport": "openapi",
                    "declaration": {"name": "api", "spec": "/s.json",
                        "headers": {"X-Api-Key": "abc"}}}),
            ),
        ),
        (
            "declaration.bearer",
            record(
                "api",
                RecordSource::Added,
                json!({"name": "api", "transport": "openapi",
                    "declaration": {"name": "api", "spec": "/s.json", "bearer": "abc"}}),
            ),
        ),
        (
            "bearer",
            record(
                "b",
                RecordSource::Added,
                json!({"bearer": {"token": "${T}"}}),
            ),
        ),
    ];
    for (field, candidate) in cases {
        let Err(err) = s.put_server("a", &candidate).await else {
            panic!("{field}: stored");
        };
        let StoreError::LooksLikeSecret {
            workspace,
            alias,
            field: reported,
        } = &err
        else {
            panic!("{field}: expected LooksLikeSecret, got {err:?}");
        };
        assert_eq!(
            (workspace.as_str(), alias.as_str()),
            ("a", candidate.alias.as_str())
        );
        assert_eq!(reported, field);
        for shown in [
            err.to_string(),
            format!("{err:?}"),
            format!("{candidate:?}"),
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert_eq!(
            err.to_string(),
            format!(
                "workspace \"a\", server \"{}\": {field} is not one ${{NAME}} reference, so it \
                 may be a copied secret: keep the value in an environment variable and write \
                 ${{NAME}} instead; nothing was stored",
                candidate.alias
            )
        );
        assert_eq!(h.durable_bytes().await, before, "{field}");
    }

    // References (after a scheme word in a header), and fields no credential name marks,
    // are accepted.
    s.put_server(
        "a",
        &http(
            json!({"Authorization": "Bearer ${TOKEN}", "X-Api-Key": "${KEY}", "Accept": "text/plain"}),
            "https://user:${PASS}@h/mcp?api_key=${KEY}&format=json",
        ),
    ).await
    .unwrap();
    s.put_server(
        "a",
        &with_env(json!({"GITHUB_TOKEN": "${GH}", "LOG_LEVEL": "debug"})),
    )
    .await
    .unwrap();
    // What only resembles a credential: paths, digests, identifiers, a URL with a user and
    // no password, flags that name where a credential is, and values after a reference.
    s.put_server(
        "a",
        &record(
            "plain",
            RecordSource::Added,
            json!({"name": "plain", "transport": "stdio", "command": "/bin/x",
                "args": ["--token-file", "/run/secrets/token", "--key-path", "/k",
                    "--token", "${T}", "--api-key=${K}", "-y", "sk-learn",
                    "@modelcontextprotocol/server-github", "/Users/You/Projects/MyServer2024/build",
                    "3f786850e387550fdab836ed7e6dc881de23001b",
                    "123e4567-e89b-12d3-a456-426614174000", "https://user@h/mcp"],
                "env": {"AUTH_URL": "https://auth.example.test/", "PWD": "/srv",
                    "DATABASE_URL": "postgres://app:${DB_PASSWORD}@db/app",
                    "NODE_OPTIONS": "--max-old-space-size=4096",
                    "GREETING": "ThisIsAVeryLongCamelCaseIdentifierName"}}),
        ),
    )
    .await
    .unwrap();
    // One reference, or no credential field at all (or null), is accepted.
    s.put_server("a", &bearer("github", "${_GH_TOKEN_2}"))
        .await
        .unwrap();
    let mut no_token = bearer("plain", "${T}");
    no_token.definition["authorization"]["token"] = Value::Null;
    s.put_server("a", &no_token).await.unwrap();
    assert_ne!(
        h.durable_bytes().await,
        before,
        "a successful write shows in the durable bytes"
    );
}

pub async fn display_forms_with_redacted_values_are_refused_and_change_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).await.unwrap();
    let before = h.durable_bytes().await;

    // The shape `config`'s `Serialize` gives: fine to show, wrong to store.
    let shown = json!({
        "name": "ref",
        "transport": "http",
        "url": "https://h/<redacted>",
        "authorization": {"type": "bearer", "token": "${TOKEN}"},
        "headers": {"X-Key": "<redacted>"},
    });
    let cases = [
        ("headers.X-Key", shown),
        ("url", json!({"url": "https://<redacted>@h/"})),
        ("args[1]", json!({"args": ["-v", "--key=<redacted>"]})),
        // A placeholder where a credential belongs is still a display form.
        (
            "authorization.token",
            json!({"authorization": {"type": "bearer", "token": "<redacted>"}}),
        ),
        ("env.A.B[0]", json!({"env": {"A": {"B": ["<redacted>"]}}})),
    ];
    for (field, definition) in cases {
        let err = s
            .put_server("a", &record("ref", RecordSource::Specialized, definition))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "workspace \"a\", server \"ref\": {field} holds a <redacted> placeholder, so \
                 this is a display form of the definition: store the unexpanded definition \
                 itself; nothing was stored"
            )
        );
        assert_eq!(h.durable_bytes().await, before, "{field}");
    }
}

pub async fn references_are_stored_exactly_as_given(h: &dyn Harness) {
    let s = h.store();
    // `HOME` and `PATH` are set in any test process: were anything to expand references,
    // their values would show up here.
    let given = record(
        "refs",
        RecordSource::Specialized,
        json!({
            "name": "refs",
            "transport": "http",
            "url": "https://${HOST}/mcp?k=${HOME}",
            "headers": {"X-Path": "${PATH}", "X-Lit": "$${A} $B ${"},
            "authorization": {"type": "bearer", "token": "${HOME}"},
            "unicode": "héllo ✓", "number": 1.5, "nested": [{"deep": null}],
        }),
    );
    s.put_server("w", &given).await.unwrap();
    let loaded = loaded(s).await;
    let stored = &loaded["w"].servers["refs"];
    assert_eq!(stored.definition, given.definition);
    assert_eq!(stored.definition["authorization"]["token"], "${HOME}");
    assert_eq!(stored.definition["headers"]["X-Path"], "${PATH}");
}

pub async fn versions_grow_with_every_write_and_survive_a_removal(h: &dyn Harness) {
    use super::{Change, Expect};
    let s = h.store();
    let version = |w: &'static str, a: &'static str| async move {
        s.load_workspace(w)
            .await
            .unwrap()
            .versions
            .get(a)
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(version("a", "local").await, 0);
    let first = s
        .write("a", &Change::Add(stdio("local"), true), Expect::Version(0))
        .await
        .unwrap();
    assert_eq!((first, version("a", "local").await), (1, 1));
    let second = s
        .write(
            "a",
            &Change::SetEnabled("local".into(), false),
            Expect::Version(1),
        )
        .await
        .unwrap();
    assert_eq!(second, 2);
    assert_eq!(s.load().await.unwrap()["a"].versions["local"], 2);
    // A removal moves the version on, and the workspace, now empty, is not loaded, but the
    // alias keeps its version: a later add starts from it.
    let removed = s
        .write("a", &Change::Remove("local".into()), Expect::Version(2))
        .await
        .unwrap();
    assert_eq!(removed, 3);
    assert!(s.load().await.unwrap().is_empty());
    assert_eq!(version("a", "local").await, 3);
    // Removing what is not there changes nothing, its version included.
    let nothing = s
        .write("a", &Change::Remove("local".into()), Expect::Any)
        .await
        .unwrap();
    assert_eq!(nothing, 3);
    // Versions are per alias and per workspace.
    s.set_enabled("a", "other", true).await.unwrap();
    s.set_enabled("b", "local", true).await.unwrap();
    assert_eq!(
        (
            version("a", "other").await,
            version("b", "local").await,
            version("a", "local").await
        ),
        (1, 1, 3)
    );
}

pub async fn a_write_from_a_stale_version_is_refused_and_changes_nothing(h: &dyn Harness) {
    use super::{Change, Expect};
    let s = h.store();
    s.write("a", &Change::Add(stdio("local"), true), Expect::Version(0))
        .await
        .unwrap();
    // Two hosts read version 1; one disables, then the other's enable from version 1 is late.
    s.write(
        "a",
        &Change::SetEnabled("local".into(), false),
        Expect::Version(1),
    )
    .await
    .unwrap();
    let before = h.durable_bytes().await;
    for stale in [
        Change::SetEnabled("local".into(), true),
        Change::PutEnabled(bearer("local", "${T}"), true),
        Change::Remove("local".into()),
        Change::Revert("local".into()),
    ] {
        let err = s
            .write("a", &stale, Expect::Version(1))
            .await
            .expect_err("a stale write is refused");
        assert!(
            matches!(&err, StoreError::Conflict { workspace, alias, expected: 1, found: 2 }
                if workspace == "a" && alias == "local"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "workspace \"a\", server \"local\" was changed by another host meanwhile (version 2, \
             this change was made from version 1); nothing was stored"
        );
        assert_eq!(h.durable_bytes().await, before);
    }
    // An add that expects a never-written alias meets one that was.
    let err = s
        .write("a", &Change::Add(stdio("other"), true), Expect::Version(0))
        .await
        .unwrap();
    assert_eq!(err, 1);
    let late = s
        .write("a", &Change::Add(stdio("other"), true), Expect::Version(0))
        .await
        .expect_err("the second add from version 0 is late");
    // An add meets the record first: the alias is taken.
    assert!(matches!(late, StoreError::Exists { .. }), "{late:?}");
    // A stale add of an alias that was written and removed meets the version.
    s.write("a", &Change::Remove("other".into()), Expect::Version(1))
        .await
        .unwrap();
    let stale = s
        .write("a", &Change::Add(stdio("other"), true), Expect::Version(1))
        .await
        .expect_err("the add was decided before the removal");
    assert!(
        matches!(
            stale,
            StoreError::Conflict {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{stale:?}"
    );
    s.write("a", &Change::Add(stdio("other"), true), Expect::Version(2))
        .await
        .unwrap();
    assert_eq!(
        loaded(s).await["a"].enabled,
        BTreeMap::from([("local".to_owned(), false), ("other".to_owned(), true)])
    );
}

/// A definition longer than a store keeps is refused before anything is written, so every row
/// a store holds is one it reads back (a PostgreSQL store refuses a message past 8 MiB from
/// its database); one of a mebibyte goes in and comes back whole.
pub async fn a_definition_past_its_bound_is_refused_and_one_within_reads_back_whole(
    h: &dyn Harness,
) {
    let s = h.store();
    let with_arg = |length: usize| {
        record(
            "big",
            RecordSource::Added,
            json!({"name": "big", "transport": "stdio", "command": "/bin/x",
                "args": ["x".repeat(length)]}),
        )
    };
    let before = h.durable_bytes().await;
    let refused = s
        .put_server("a", &with_arg(super::MAX_DEFINITION_BYTES))
        .await
        .expect_err("past the bound");
    assert!(
        matches!(refused, StoreError::DefinitionTooLarge { .. }),
        "{refused}"
    );
    let said = refused.to_string();
    assert!(
        said.contains("server \"big\"") && said.contains("4194304"),
        "{said}"
    );
    assert_eq!(
        h.durable_bytes().await,
        before,
        "a refused write changed nothing"
    );
    let within = with_arg(1 << 20);
    s.put_server("a", &within).await.expect("a mebibyte fits");
    let loaded = s.load().await.expect("loads");
    assert_eq!(loaded["a"].servers["big"].definition, within.definition);
}
