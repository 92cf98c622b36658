//! The store's behaviour: one suite run against both stores, then the state file's own cases
//! (reopen, WAL, refusal of newer, foreign and damaged files, migrations).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;

use std::future::Future;
use std::pin::Pin;

use super::sqlite::{APPLICATION_ID, MIGRATIONS, migrate, schema_version};
use super::suite::{self, Harness, bearer, render, stdio, workspace};
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

struct Memory(MemoryStore);

impl Harness for Memory {
    fn store(&self) -> &dyn Store {
        &self.0
    }
    fn durable_bytes(&self) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>> {
        Box::pin(async move { render(&self.0.load().await.unwrap()).into_bytes() })
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
    fn durable_bytes(&self) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>> {
        Box::pin(std::future::ready(file_bytes(self.store.path())))
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

/// Runs each case of the shared suite against a fresh `MemoryStore` and a fresh `SqliteStore`.
macro_rules! both_stores {
    ($($case:ident),* $(,)?) => {
        mod memory_store {
            $( #[test] fn $case() {
                futures::executor::block_on(super::suite::$case(&super::memory()));
            } )*
        }
        mod sqlite_store {
            $( #[test] fn $case() {
                futures::executor::block_on(super::suite::$case(&super::sqlite()));
            } )*
        }
        #[test]
        fn every_case_of_the_suite_runs_against_both() {
            let mut names = [$(stringify!($case)),*];
            let mut cases = suite::CASES.to_vec();
            names.sort_unstable();
            cases.sort_unstable();
            assert_eq!(names.to_vec(), cases);
        }
    };
}

both_stores!(
    a_definition_past_its_bound_is_refused_and_one_within_reads_back_whole,
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
    versions_grow_with_every_write_and_survive_a_removal,
    a_write_from_a_stale_version_is_refused_and_changes_nothing,
);

/// A store future awaited here: SQLite's and memory's are done on their first poll.
fn now<T>(future: StoreFuture<'_, T>) -> Result<T, StoreError> {
    futures::executor::block_on(future)
}

// === the state file ===

#[test]
fn reopening_the_file_reads_back_what_was_written() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        now(store.put_server("a", &stdio("local"))).unwrap();
        now(store.set_enabled("a", "local", true)).unwrap();
        now(store.set_enabled("b", "figma", false)).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        futures::executor::block_on(suite::loaded(&store)),
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
        now(store.put_server("a", &bearer("github", "${HOME}"))).unwrap();
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
    now(store.set_enabled("a", "x", true)).unwrap();

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
    now(h.store.put_server("a", &stdio("local"))).unwrap();
    let before = file_bytes(h.store.path());

    // Foreign keys: a server row of a workspace that does not exist is refused.
    let err = h
        .store
        .transact("test".to_owned(), |tx| {
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
        .transact("test".to_owned(), |tx| {
            tx.execute("DELETE FROM server", [])?;
            tx.execute("INSERT INTO enabledness VALUES ('a', 'x', 7)", [])
                .map(drop)
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
    assert_eq!(file_bytes(h.store.path()), before);
    assert_eq!(
        futures::executor::block_on(suite::loaded(&h.store)),
        BTreeMap::from([("a".to_owned(), workspace([stdio("local")], []))])
    );
}

#[test]
fn a_newer_schema_is_refused_and_the_file_is_untouched() {
    let dir = TempDir::new();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        now(store.put_server("a", &stdio("local"))).unwrap();
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
            now(store.put_server("a", &stdio(&format!("server-{i}")))).unwrap();
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
    now(store.set_enabled("a", "x", true)).unwrap();
    assert!(now(store.load()).unwrap()["a"].enabled["x"]);
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
                    now(store.put_server("w", &stdio(&alias))).unwrap();
                    now(store.set_enabled("w", &alias, i % 2 == 0)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for store in [&first, &second] {
        let state = now(store.load()).unwrap();
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
    now(store.put_server("a", &given)).unwrap();
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
    now(store.put_server("a", &stdio("local"))).unwrap();
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

/// A build without the `postgres` feature (the library's default) refuses a `postgres://`
/// state naming the feature, and never takes the URL for a file name.
#[cfg(not(feature = "postgres"))]
#[tokio::test]
async fn a_postgres_state_without_the_feature_is_refused_naming_it() {
    let Err(error) = super::open("postgres://app:pw@127.0.0.1:1/mcp").await else {
        panic!("a postgres:// state opened in a build without the feature");
    };
    assert!(
        matches!(
            error,
            StoreError::FeatureOff {
                feature: "postgres",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("needs the `postgres` feature of plurnk-mcp"),
        "{error}"
    );
    assert!(!error.to_string().contains("pw"), "{error}");
}
