//! The store's behaviour: one suite run against both stores, then the state file's own cases
//! (reopen, WAL, refusal of newer, foreign and damaged files, migrations).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::sqlite::{APPLICATION_ID, MIGRATIONS, migrate, schema_version};
use super::*;

// === harness ===

/// A folder under the system temp dir, removed on drop (no `tempfile` dependency needed).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "plurnk-mcp-store-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A store under test and a way to see everything it has made durable.
trait Harness {
    fn store(&self) -> &dyn Store;
    /// Every durable byte: for SQLite the database file and its WAL, for memory a rendering
    /// of the whole state. Equal before and after means the operation changed nothing.
    fn durable_bytes(&self) -> Vec<u8>;
}

struct Memory(MemoryStore);

impl Harness for Memory {
    fn store(&self) -> &dyn Store {
        &self.0
    }
    fn durable_bytes(&self) -> Vec<u8> {
        render(&self.0.load().unwrap()).into_bytes()
    }
}

struct Sqlite {
    store: SqliteStore,
    _dir: TempDir,
}

impl Harness for Sqlite {
    fn store(&self) -> &dyn Store {
        &self.store
    }
    fn durable_bytes(&self) -> Vec<u8> {
        file_bytes(self.store.path())
    }
}

fn memory() -> Memory {
    Memory(MemoryStore::new())
}

fn sqlite() -> Sqlite {
    let dir = TempDir::new();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    Sqlite { store, _dir: dir }
}

/// The database file followed by its WAL (if any), each length-prefixed.
fn file_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = std::fs::read(PathBuf::from(name)).unwrap_or_default();
        bytes.extend_from_slice(&file.len().to_le_bytes());
        bytes.extend_from_slice(&file);
    }
    bytes
}

/// The complete state, definitions included (a `ServerRecord`'s `Debug` hides them).
fn render(state: &BTreeMap<String, WorkspaceRecord>) -> String {
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

fn record(alias: &str, source: RecordSource, definition: Value) -> ServerRecord {
    ServerRecord {
        alias: alias.to_owned(),
        definition,
        source,
    }
}

fn stdio(alias: &str) -> ServerRecord {
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

fn bearer(alias: &str, token: &str) -> ServerRecord {
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

fn workspace(
    servers: impl IntoIterator<Item = ServerRecord>,
    enabled: impl IntoIterator<Item = (&'static str, bool)>,
) -> WorkspaceRecord {
    WorkspaceRecord {
        servers: servers.into_iter().map(|r| (r.alias.clone(), r)).collect(),
        enabled: enabled
            .into_iter()
            .map(|(a, e)| (a.to_owned(), e))
            .collect(),
    }
}

/// Runs each behavioural case against a fresh `MemoryStore` and a fresh `SqliteStore`.
macro_rules! both_stores {
    ($($case:ident),* $(,)?) => {
        mod memory_store {
            $( #[test] fn $case() { super::$case(&super::memory()); } )*
        }
        mod sqlite_store {
            $( #[test] fn $case() { super::$case(&super::sqlite()); } )*
        }
    };
}

both_stores!(
    a_new_store_is_empty,
    put_then_load_round_trips,
    set_enabled_overrides_with_or_without_a_record,
    remove_clears_the_record_and_the_override,
    removing_what_is_not_there_changes_nothing,
    last_write_wins,
    put_keeps_the_enabled_override,
    workspaces_are_independent,
    literal_credentials_are_refused_and_change_nothing,
    display_forms_with_redacted_values_are_refused_and_change_nothing,
    references_are_stored_exactly_as_given,
    put_server_enabled_writes_both_or_neither,
    revert_drops_the_record_and_keeps_the_alias_disabled,
    adding_a_taken_alias_is_refused_and_changes_nothing,
);

// === the behavioural suite ===

fn put_server_enabled_writes_both_or_neither(h: &dyn Harness) {
    let s = h.store();
    s.put_server_enabled("a", &stdio("local"), true).unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
    // A refused record writes neither half.
    assert!(
        s.put_server_enabled("a", &bearer("github", "literal-token"), true)
            .is_err()
    );
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
}

fn a_new_store_is_empty(h: &dyn Harness) {
    assert!(h.store().load().unwrap().is_empty());
}

fn put_then_load_round_trips(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    s.put_server("a", &bearer("github", "${GH_TOKEN}")).unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local"), bearer("github", "${GH_TOKEN}")], [])
        )])
    );
}

fn set_enabled_overrides_with_or_without_a_record(h: &dyn Harness) {
    let s = h.store();
    // A service definition the workspace does not specialize: an override alone.
    s.set_enabled("b", "figma", false).unwrap();
    // An added one: record and override.
    s.put_server("b", &stdio("local")).unwrap();
    s.set_enabled("b", "local", true).unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "b".to_owned(),
            workspace([stdio("local")], [("figma", false), ("local", true)])
        )])
    );
}

fn remove_clears_the_record_and_the_override(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    s.set_enabled("a", "local", true).unwrap();
    s.put_server("a", &bearer("github", "${T}")).unwrap();
    s.set_enabled("a", "github", false).unwrap();

    s.remove_server("a", "local").unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "a".to_owned(),
            workspace([bearer("github", "${T}")], [("github", false)])
        )])
    );
    // A workspace left with nothing is not loaded at all.
    s.remove_server("a", "github").unwrap();
    assert!(s.load().unwrap().is_empty());
}

fn revert_drops_the_record_and_keeps_the_alias_disabled(h: &dyn Harness) {
    let s = h.store();
    s.put_server_enabled("a", &stdio("local"), true).unwrap();
    s.revert_server("a", "local").unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([("a".to_owned(), workspace([], [("local", false)]))])
    );
    // Reverting what was never stored records it disabled too.
    s.revert_server("b", "other").unwrap();
    assert_eq!(
        s.load().unwrap().get("b"),
        Some(&workspace([], [("other", false)]))
    );
}

fn adding_a_taken_alias_is_refused_and_changes_nothing(h: &dyn Harness) {
    let s = h.store();
    s.add_server("a", &stdio("local"), true).unwrap();
    let before = h.durable_bytes();
    let mut other = stdio("local");
    other.definition["args"] = json!(["--other"]);
    let err = s.add_server("a", &other, false).unwrap_err();
    assert!(
        matches!(&err, StoreError::Exists { workspace, alias } if workspace == "a" && alias == "local"),
        "{err:?}"
    );
    assert_eq!(h.durable_bytes(), before);
    // Another workspace is another namespace.
    s.add_server("b", &other, false).unwrap();
}

fn removing_what_is_not_there_changes_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    let before = h.durable_bytes();
    s.remove_server("a", "nope").unwrap();
    s.remove_server("nowhere", "local").unwrap();
    assert_eq!(h.durable_bytes(), before);
}

fn last_write_wins(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("x")).unwrap();
    s.set_enabled("a", "x", true).unwrap();
    let mut second = bearer("x", "${OTHER}");
    second.source = RecordSource::Specialized;
    s.put_server("a", &second).unwrap();
    s.set_enabled("a", "x", false).unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([("a".to_owned(), workspace([second], [("x", false)]))])
    );
}

fn put_keeps_the_enabled_override(h: &dyn Harness) {
    let s = h.store();
    s.set_enabled("a", "github", false).unwrap();
    s.put_server("a", &bearer("github", "${T}")).unwrap();
    assert!(!s.load().unwrap()["a"].enabled["github"]);
}

fn workspaces_are_independent(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    s.set_enabled("a", "local", true).unwrap();
    s.set_enabled("b", "local", false).unwrap();
    s.remove_server("b", "local").unwrap();
    assert_eq!(
        s.load().unwrap(),
        BTreeMap::from([(
            "a".to_owned(),
            workspace([stdio("local")], [("local", true)])
        )])
    );
}

fn literal_credentials_are_refused_and_change_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    s.set_enabled("a", "local", true).unwrap();
    let before = h.durable_bytes();

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
        let Err(err) = s.put_server("a", &candidate) else {
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
        assert_eq!(h.durable_bytes(), before, "{field}");
    }

    // References (after a scheme word in a header), and fields no credential name marks,
    // are accepted.
    s.put_server(
        "a",
        &http(
            json!({"Authorization": "Bearer ${TOKEN}", "X-Api-Key": "${KEY}", "Accept": "text/plain"}),
            "https://user:${PASS}@h/mcp?api_key=${KEY}&format=json",
        ),
    )
    .unwrap();
    s.put_server(
        "a",
        &with_env(json!({"GITHUB_TOKEN": "${GH}", "LOG_LEVEL": "debug"})),
    )
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
    .unwrap();
    // One reference, or no credential field at all (or null), is accepted.
    s.put_server("a", &bearer("github", "${_GH_TOKEN_2}"))
        .unwrap();
    let mut no_token = bearer("plain", "${T}");
    no_token.definition["authorization"]["token"] = Value::Null;
    s.put_server("a", &no_token).unwrap();
    assert_ne!(
        h.durable_bytes(),
        before,
        "a successful write shows in the durable bytes"
    );
}

fn display_forms_with_redacted_values_are_refused_and_change_nothing(h: &dyn Harness) {
    let s = h.store();
    s.put_server("a", &stdio("local")).unwrap();
    let before = h.durable_bytes();

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
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "workspace \"a\", server \"ref\": {field} holds a <redacted> placeholder, so \
                 this is a display form of the definition: store the unexpanded definition \
                 itself; nothing was stored"
            )
        );
        assert_eq!(h.durable_bytes(), before, "{field}");
    }
}

fn references_are_stored_exactly_as_given(h: &dyn Harness) {
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
    s.put_server("w", &given).unwrap();
    let loaded = s.load().unwrap();
    let stored = &loaded["w"].servers["refs"];
    assert_eq!(stored.definition, given.definition);
    assert_eq!(stored.definition["authorization"]["token"], "${HOME}");
    assert_eq!(stored.definition["headers"]["X-Path"], "${PATH}");
}

// === the state file ===

#[test]
fn reopening_the_file_reads_back_what_was_written() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_server("a", &stdio("local")).unwrap();
        store.set_enabled("a", "local", true).unwrap();
        store.set_enabled("b", "figma", false).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.load().unwrap(),
        BTreeMap::from([
            (
                "a".to_owned(),
                workspace([stdio("local")], [("local", true)])
            ),
            ("b".to_owned(), workspace([], [("figma", false)])),
        ])
    );
    assert_eq!(
        format!("{store:?}"),
        format!("SqliteStore {{ path: {path:?}, .. }}")
    );
}

#[test]
fn the_file_holds_references_never_their_values() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_server("a", &bearer("github", "${HOME}")).unwrap();
    }
    // Closing the last connection checkpoints the WAL into the file.
    let bytes = std::fs::read(&path).unwrap();
    let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains(r#""token":"${HOME}""#));
    if let Ok(home) = std::env::var("HOME").map(|h| format!("\"{h}\"")) {
        assert!(!contains(&home), "the file holds the value of HOME");
    }
}

#[test]
fn opening_creates_missing_folders_and_uses_wal() {
    let dir = TempDir::new();
    let path = dir.path().join("deep/er/state.db");
    let store = SqliteStore::open(&path).unwrap();
    store.set_enabled("a", "x", true).unwrap();

    let raw = Connection::open(&path).unwrap();
    let mode: String = raw
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = raw
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, schema_version(MIGRATIONS));
    let id: i32 = raw
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .unwrap();
    assert_eq!(id, APPLICATION_ID);
}

#[test]
fn foreign_keys_are_on_and_a_failed_statement_rolls_back_the_whole_write() {
    let h = sqlite();
    h.store.put_server("a", &stdio("local")).unwrap();
    let before = h.durable_bytes();

    // Foreign keys: a server row of a workspace that does not exist is refused.
    let err = h
        .store
        .write("test".to_owned(), |tx| {
            tx.execute(
                "INSERT INTO server VALUES ('ghost', 'x', 'added', '{}')",
                [],
            )
            .map(drop)
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("FOREIGN KEY constraint failed"),
        "{err}"
    );

    // A write whose second statement fails leaves nothing of its first.
    let err = h
        .store
        .write("test".to_owned(), |tx| {
            tx.execute("DELETE FROM server", [])?;
            tx.execute("INSERT INTO enabledness VALUES ('a', 'x', 7)", [])
                .map(drop)
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
    assert_eq!(h.durable_bytes(), before);
    assert_eq!(
        h.store.load().unwrap(),
        BTreeMap::from([("a".to_owned(), workspace([stdio("local")], []))])
    );
}

#[test]
fn a_newer_schema_is_refused_and_the_file_is_untouched() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_server("a", &stdio("local")).unwrap();
    }
    let newer = schema_version(MIGRATIONS) + 1;
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    let before = file_bytes(&path);

    let err = SqliteStore::open(&path).unwrap_err();
    let StoreError::NewerSchema {
        path: named,
        found,
        supported,
    } = &err
    else {
        panic!("expected NewerSchema, got {err:?}");
    };
    assert_eq!((named, *found, *supported), (&path, newer, newer - 1));
    assert_eq!(
        err.to_string(),
        format!(
            "state file {} has schema version {newer}, newer than the {} this build knows: run \
             a newer plurnk-mcp, or use another state file; the file was not changed",
            path.display(),
            newer - 1
        )
    );
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_untouched() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    let garbage = "this is a shopping list, not a database\n".repeat(200);
    std::fs::write(&path, &garbage).unwrap();

    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { path: p, .. } if p == &path),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "state file {} is not a SQLite database: move it aside (rename it) and start \
             again, which begins with empty workspace state; the file was not changed",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), garbage);
    assert!(!dir.path().join("state.db-wal").exists());
}

#[test]
fn a_damaged_database_is_refused_and_untouched() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..50 {
            store
                .put_server("a", &stdio(&format!("server-{i}")))
                .unwrap();
        }
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    assert!(
        bytes.len() > 2 * page,
        "the database should span several pages"
    );
    bytes[page..2 * page].fill(0xA5);
    std::fs::write(&path, &bytes).unwrap();

    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "state file {} fails SQLite's integrity check (",
            path.display()
        )),
        "{err}"
    );
    assert!(
        err.to_string().ends_with(
            "): move it aside (rename it) and start again, which begins with empty workspace \
             state; the file was not changed"
        ),
        "{err}"
    );
    assert!(!err.to_string().contains('\n'), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn another_programs_database_is_refused_and_untouched() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE recipes (name TEXT)")
        .unwrap();
    let before = file_bytes(&path);

    let err = SqliteStore::open(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "state file {} is a SQLite database of another program, not a plurnk-mcp state \
             file: move it aside (rename it) and start again, which begins with empty \
             workspace state; the file was not changed",
            path.display()
        )
    );
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn an_empty_file_becomes_a_new_database() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    std::fs::write(&path, b"").unwrap();
    let store = SqliteStore::open(&path).unwrap();
    store.set_enabled("a", "x", true).unwrap();
    assert!(store.load().unwrap()["a"].enabled["x"]);
}

#[test]
fn a_failed_migration_leaves_the_previous_version() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    let mut conn = Connection::open(&path).unwrap();
    migrate(&path, &mut conn, &MIGRATIONS[..1], 0).unwrap();

    let broken = [
        MIGRATIONS[0],
        "CREATE TABLE half (a TEXT); THIS IS NOT SQL;",
    ];
    let err = migrate(&path, &mut conn, &broken, 1).unwrap_err();
    assert!(
        err.to_string()
            .contains("could not apply schema migration 0002"),
        "{err}"
    );
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    let half: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'half'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!((version, half), (1, 0));

    // Applying again from the start skips what is applied (the version is re-read).
    migrate(&path, &mut conn, &MIGRATIONS[..1], 0).unwrap();
}

#[test]
fn every_migration_file_is_registered_in_order() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    assert_eq!(files.len(), MIGRATIONS.len(), "{files:?}");
    for ((step, name), sql) in (1..).zip(&files).zip(MIGRATIONS) {
        assert!(
            name.starts_with(&format!("{step:04}_")),
            "{name} is not step {step}"
        );
        assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), *sql);
    }
}

#[test]
fn two_handles_and_many_threads_share_one_file() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    let first: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let second: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = if t % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            std::thread::spawn(move || {
                for i in 0..10 {
                    let alias = format!("t{t}-{i}");
                    store.put_server("w", &stdio(&alias)).unwrap();
                    store.set_enabled("w", &alias, i % 2 == 0).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for store in [&first, &second] {
        let state = store.load().unwrap();
        assert_eq!(
            (state["w"].servers.len(), state["w"].enabled.len()),
            (40, 40)
        );
    }
}

#[test]
fn debug_never_shows_a_definition() {
    let given = stdio("local");
    assert_eq!(
        format!("{given:?}"),
        r#"ServerRecord { alias: "local", definition: <opaque>, source: Added }"#
    );
    let store = MemoryStore::new();
    store.put_server("a", &given).unwrap();
    assert!(!format!("{store:?}").contains("/usr/bin/server"));
}

#[test]
fn concurrent_first_opens_of_a_new_file_all_succeed() {
    for round in 0..20 {
        let dir = TempDir::new();
        let path = dir.path().join("state.db");
        let opened: Vec<Result<SqliteStore, StoreError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..6)
                .map(|_| scope.spawn(|| SqliteStore::open(&path)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("no panic"))
                .collect()
        });
        for result in opened {
            if let Err(error) = result {
                panic!("round {round}: a concurrent first open was refused: {error}");
            }
        }
    }
}

#[test]
fn folders_the_store_creates_are_its_owners_only_and_others_are_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    // An existing folder keeps its mode, open to others or not.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _store = SqliteStore::open(dir.path().join("new/er/state.db")).unwrap();
    assert_eq!(mode(dir.path()), 0o755);
    for created in ["new", "new/er"] {
        let created = dir.path().join(created);
        assert_eq!(
            mode(&created),
            0o700,
            "{created:?} has mode {:o}",
            mode(&created)
        );
    }
}

#[test]
fn the_state_file_and_its_journal_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path).unwrap();
    store.put_server("a", &stdio("local")).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let mode = std::fs::metadata(PathBuf::from(&name))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_else(|error| panic!("{name:?}: {error}"));
        assert_eq!(mode, 0o600, "{name:?} has mode {mode:o}");
    }
    // A file made readable to others before is tightened when it is opened.
    drop(store);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _store = SqliteStore::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}
