//! [`SqliteStore`]: durable workspace state in one SQLite file, WAL-journaled, its schema
//! built by the numbered migrations in `migrations/`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior, params};

use super::{
    Change, Expect, ServerRecord, Store, StoreError, StoreFuture, Version, WorkspaceRecord,
    check_definition,
};

/// The schema, one step a file, applied in order: step `i` (from 1) runs in one transaction
/// that also sets `PRAGMA user_version = i`. A schema change is a new file and a new line
/// here, never an edit of a step that has shipped.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_versions.sql"),
];

/// `PRAGMA application_id` of a plurnk-mcp state file (`"PLRK"`), so that a SQLite file
/// belonging to another program is refused instead of having tables added to it.
pub(super) const APPLICATION_ID: i32 = 0x504C_524B;

/// How long a write waits for another process holding the file's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`Store`] in a SQLite file.
///
/// One connection behind a mutex: the host's writes are few and small, and serializing them
/// here keeps every write one `BEGIN IMMEDIATE` transaction with no lock upgrade to fail.
/// WAL with `synchronous = FULL`: a write that returned `Ok` survives a crash of the process
/// or of the machine.
pub struct SqliteStore {
    /// The state file, named by every error.
    path: PathBuf,
    conn: Mutex<Connection>,
}

// === impl SqliteStore ===

impl SqliteStore {
    /// Opens the state file at `path`, creating it (0600) and its missing folders (0700) if
    /// missing, and brings its schema up to date.
    ///
    /// The file is inspected read-only before anything writes to it: a file that is not a
    /// SQLite database, belongs to another program or fails SQLite's quick integrity check is
    /// refused as [`StoreError::Corrupt`], and one whose schema is newer than this build's as
    /// [`StoreError::NewerSchema`]; either way its bytes are left exactly as they were. An
    /// empty (zero-byte) file is a new database and is initialized.
    ///
    /// # Errors
    ///
    /// Those refusals; the folder cannot be created ([`StoreError::CreateDir`]); SQLite cannot
    /// open, lock or write the file, or a migration fails ([`StoreError::Sqlite`]; a failed
    /// migration leaves the file at the previous version).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            // Folders the host creates are its owner's only (0700), like the file; one that
            // exists is the operator's choice and is left as it is.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::CreateDir {
                    path: path.clone(),
                    source,
                })?;
        }
        // Created readable by its owner only: definitions name no secret values, but which
        // servers a daemon reaches, and how, is nobody else's business.
        create_private(&path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn =
            Connection::open_with_flags(&path, flags).map_err(sqlite_error(&path, "open it"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sqlite_error(&path, "set the busy timeout"))?;

        // Everything up to here only read; journal_mode and the migrations write the header.
        let version = inspect(&path, &conn)?;

        // WAL persists in the file; SQLite keeps its current mode where the file system
        // cannot support WAL (no shared memory), which is still durable.
        switch_to_wal(&conn).map_err(sqlite_error(&path, "switch to WAL journaling"))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite_error(&path, "set synchronous writes"))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(sqlite_error(&path, "enable foreign keys"))?;
        migrate(&path, &mut conn, MIGRATIONS, version)?;
        // SQLite gives its -wal and -shm files the database's mode; a file made before (or
        // by hand) is tightened here, journal included.
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            restrict(Path::new(&name)).map_err(|source| StoreError::Private {
                path: PathBuf::from(&name),
                source,
            })?;
        }

        Ok(Self {
            path,
            conn: Mutex::new(conn),
        })
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A panic while the lock was held cannot have left a write half done: the open
    /// transaction rolled back when the panic dropped it.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, committed only if `f` succeeds.
    pub(super) fn transact(
        &self,
        action: String,
        f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<()>,
    ) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite_error(&self.path, action.clone()))?;
        f(&tx).map_err(sqlite_error(&self.path, action.clone()))?;
        tx.commit().map_err(sqlite_error(&self.path, action))
    }

    /// Reads every row (of `only` that workspace, when given) in one read transaction, so
    /// the result is one consistent state.
    fn read_all(
        &self,
        only: Option<&str>,
    ) -> Result<BTreeMap<String, WorkspaceRecord>, StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction()
            .map_err(sqlite_error(&self.path, "read workspace state"))?;
        let mut workspaces = BTreeMap::<String, WorkspaceRecord>::new();

        let mut servers = tx
            .prepare(
                "SELECT workspace, alias, source, definition FROM server
                 WHERE ?1 IS NULL OR workspace = ?1",
            )
            .map_err(sqlite_error(&self.path, "read server records"))?;
        let mut rows = servers
            .query([only])
            .map_err(sqlite_error(&self.path, "read server records"))?;
        while let Some(row) = rows
            .next()
            .map_err(sqlite_error(&self.path, "read server records"))?
        {
            let (workspace, alias, source, definition) =
                <(String, String, String, String)>::try_from(row)
                    .map_err(sqlite_error(&self.path, "read server records"))?;
            let unreadable = |what: &str| StoreError::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "holds server \"{alias}\" of workspace \"{workspace}\" with {what}"
                ),
            };
            let record =
                ServerRecord::from_row(&alias, &source, &definition).map_err(unreadable)?;
            workspaces
                .entry(workspace)
                .or_default()
                .servers
                .insert(alias, record);
        }
        drop(rows);
        drop(servers);

        let mut enabledness = tx
            .prepare(
                "SELECT workspace, alias, enabled FROM enabledness
                 WHERE ?1 IS NULL OR workspace = ?1",
            )
            .map_err(sqlite_error(&self.path, "read enabledness"))?;
        let rows = enabledness
            .query_map([only], |row| <(String, String, bool)>::try_from(row))
            .map_err(sqlite_error(&self.path, "read enabledness"))?;
        for row in rows {
            let (workspace, alias, enabled) =
                row.map_err(sqlite_error(&self.path, "read enabledness"))?;
            workspaces
                .entry(workspace)
                .or_default()
                .enabled
                .insert(alias, enabled);
        }
        drop(enabledness);

        // Versions of the workspaces loaded (a workspace with nothing left is not loaded,
        // whatever versions it keeps).
        let mut revisions = tx
            .prepare(
                "SELECT workspace, alias, version FROM revision
                 WHERE ?1 IS NULL OR workspace = ?1",
            )
            .map_err(sqlite_error(&self.path, "read versions"))?;
        let rows = revisions
            .query_map([only], |row| <(String, String, i64)>::try_from(row))
            .map_err(sqlite_error(&self.path, "read versions"))?;
        for row in rows {
            let (workspace, alias, version) =
                row.map_err(sqlite_error(&self.path, "read versions"))?;
            if let Some(record) = workspaces.get_mut(&workspace) {
                record
                    .versions
                    .insert(alias, Version::try_from(version).unwrap_or(0));
            } else if only.is_some() {
                workspaces
                    .entry(workspace)
                    .or_default()
                    .versions
                    .insert(alias, Version::try_from(version).unwrap_or(0));
            }
        }
        Ok(workspaces)
    }

    /// One write: the version checked, the change applied, the version moved on, in one
    /// `BEGIN IMMEDIATE` transaction.
    fn write_now(
        &self,
        workspace: &str,
        change: &Change,
        expect: Expect,
    ) -> Result<Version, StoreError> {
        if let Some(record) = change.record() {
            check_definition(workspace, record)?;
        }
        let definition = change.record().map(|record| record.definition.to_string());
        let alias = change.alias();
        let mut refusal = None;
        let mut version = 0;
        self.transact(change.action(workspace), |tx| {
            let found: Version = tx
                .query_row(
                    "SELECT version FROM revision WHERE workspace = ?1 AND alias = ?2",
                    params![workspace, alias],
                    |row| row.get::<_, i64>(0),
                )
                .map(|found| Version::try_from(found).unwrap_or(0))
                .or_else(|error| match error {
                    rusqlite::Error::QueryReturnedNoRows => Ok(0),
                    error => Err(error),
                })?;
            version = found;
            // An add of a taken alias is told so first: what to do about it is clearer.
            if matches!(change, Change::Add(..))
                && tx.query_row(
                    "SELECT count(*) FROM server WHERE workspace = ?1 AND alias = ?2",
                    params![workspace, alias],
                    |row| row.get::<_, i64>(0),
                )? > 0
            {
                refusal = Some(StoreError::Exists {
                    workspace: workspace.to_owned(),
                    alias: alias.to_owned(),
                });
                return Ok(());
            }
            if let Err(conflict) = expect.check(workspace, alias, found) {
                refusal = Some(conflict);
                return Ok(());
            }
            let changed = match change {
                Change::Put(record) => {
                    ensure_workspace(tx, workspace)?;
                    upsert_server(tx, workspace, record, definition.as_deref().unwrap_or("{}"))?;
                    true
                }
                Change::PutEnabled(record, enabled) | Change::Add(record, enabled) => {
                    ensure_workspace(tx, workspace)?;
                    upsert_server(tx, workspace, record, definition.as_deref().unwrap_or("{}"))?;
                    upsert_enabled(tx, workspace, alias, *enabled)?;
                    true
                }
                Change::SetEnabled(_, enabled) => {
                    ensure_workspace(tx, workspace)?;
                    upsert_enabled(tx, workspace, alias, *enabled)?;
                    true
                }
                Change::Revert(_) => {
                    ensure_workspace(tx, workspace)?;
                    tx.execute(
                        "DELETE FROM server WHERE workspace = ?1 AND alias = ?2",
                        params![workspace, alias],
                    )?;
                    upsert_enabled(tx, workspace, alias, false)?;
                    true
                }
                Change::Remove(_) => {
                    let servers = tx.execute(
                        "DELETE FROM server WHERE workspace = ?1 AND alias = ?2",
                        params![workspace, alias],
                    )?;
                    let overrides = tx.execute(
                        "DELETE FROM enabledness WHERE workspace = ?1 AND alias = ?2",
                        params![workspace, alias],
                    )?;
                    // A workspace with nothing left is not loaded, as in MemoryStore.
                    tx.execute(
                        "DELETE FROM workspace WHERE name = ?1
                         AND NOT EXISTS (SELECT 1 FROM server WHERE workspace = ?1)
                         AND NOT EXISTS (SELECT 1 FROM enabledness WHERE workspace = ?1)",
                        params![workspace],
                    )?;
                    servers + overrides > 0
                }
            };
            if changed {
                version = found + 1;
                tx.execute(
                    "INSERT INTO revision (workspace, alias, version) VALUES (?1, ?2, ?3)
                     ON CONFLICT (workspace, alias) DO UPDATE SET version = excluded.version",
                    params![workspace, alias, i64::try_from(version).unwrap_or(i64::MAX)],
                )?;
            }
            Ok(())
        })?;
        match refusal {
            Some(refusal) => Err(refusal),
            None => Ok(version),
        }
    }
}

impl Store for SqliteStore {
    fn load(&self) -> StoreFuture<'_, BTreeMap<String, WorkspaceRecord>> {
        Box::pin(async move { self.read_all(None) })
    }

    fn load_workspace<'a>(&'a self, workspace: &'a str) -> StoreFuture<'a, WorkspaceRecord> {
        Box::pin(async move {
            Ok(self
                .read_all(Some(workspace))?
                .remove(workspace)
                .unwrap_or_default())
        })
    }

    fn write<'a>(
        &'a self,
        workspace: &'a str,
        change: &'a Change,
        expect: Expect,
    ) -> StoreFuture<'a, Version> {
        Box::pin(async move { self.write_now(workspace, change, expect) })
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

// === opening ===

/// Switches to WAL. Changing the journal mode does not wait on SQLite's busy handler, so a
/// second process opening a new file at the same moment is told "locked" at once: it waits
/// (bounded by [`BUSY_TIMEOUT`]) and is done when the other one switched the file already.
fn switch_to_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn
            .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get::<_, String>(0))
        {
            Ok(_) => return Ok(()),
            Err(error)
                if error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                let mode: String =
                    conn.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
                if mode.eq_ignore_ascii_case("wal") {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Creates `path` empty with mode 0600 unless it exists (whoever creates it first wins).
fn create_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Private {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Makes an existing file readable and writable by its owner only; a missing one is fine.
fn restrict(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.permissions().mode() & 0o077 != 0 => {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        }
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Reads the file's identity and schema version without writing, and refuses what this
/// build must not touch. Returns the schema version.
fn inspect(path: &Path, conn: &Connection) -> Result<i64, StoreError> {
    // One read transaction: another process may be creating the same new file, and three
    // separate reads could see its header before and its tables after (a "foreign" file).
    let read = |conn: &Connection| -> rusqlite::Result<(i32, i64, i64)> {
        let tx = conn.unchecked_transaction()?;
        let application_id = tx.pragma_query_value(None, "application_id", |row| row.get(0))?;
        let version = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        let objects = tx.query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))?;
        tx.commit()?;
        Ok((application_id, version, objects))
    };
    let (application_id, version, objects) =
        read(conn).map_err(sqlite_error(path, "read its schema version"))?;
    let corrupt = |reason: &str| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };

    let fresh = application_id == 0 && version == 0 && objects == 0;
    if application_id != APPLICATION_ID && !fresh {
        return Err(corrupt(
            "is a SQLite database of another program, not a plurnk-mcp state file",
        ));
    }
    let supported = schema_version(MIGRATIONS);
    if version > supported {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported,
        });
    }
    if version < 0 {
        return Err(corrupt("records a negative schema version"));
    }

    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(sqlite_error(path, "check its integrity"))?;
    if check != "ok" {
        // SQLite's report names pages and tables, never row contents; keep its last line
        // (the first is a "*** in database main ***" banner).
        let detail = check.lines().last().unwrap_or_default().trim();
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("fails SQLite's integrity check ({detail})"),
        });
    }
    Ok(version)
}

/// Applies every step of `migrations` past `version`, each in its own `BEGIN IMMEDIATE`
/// transaction. The version is read again inside the transaction, so two processes opening a
/// new file at once apply each step once.
pub(super) fn migrate(
    path: &Path,
    conn: &mut Connection,
    migrations: &[&str],
    version: i64,
) -> Result<(), StoreError> {
    for (step, sql) in (1..)
        .zip(migrations)
        .skip_while(|(step, _)| *step <= version)
    {
        let action = format!("apply schema migration {step:04}");
        let apply = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let current: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
            if current >= step {
                return Ok(());
            }
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
            tx.pragma_update(None, "user_version", step)?;
            tx.commit()
        };
        apply(conn).map_err(sqlite_error(path, action))?;
    }
    Ok(())
}

/// The schema version the last of `migrations` leaves.
pub(super) fn schema_version(migrations: &[&str]) -> i64 {
    i64::try_from(migrations.len()).unwrap_or(i64::MAX)
}

fn ensure_workspace(tx: &Transaction<'_>, workspace: &str) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO workspace (name) VALUES (?1) ON CONFLICT (name) DO NOTHING",
        [workspace],
    )?;
    Ok(())
}

/// Turns a SQLite error into a [`StoreError`]: a file SQLite finds is not a database, or is
/// damaged, is [`StoreError::Corrupt`]; anything else names what was being done.
fn sqlite_error(
    path: &Path,
    action: impl Into<String>,
) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    let action = action.into();
    move |source| {
        let reason = match source.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => "is not a SQLite database",
            Some(ErrorCode::DatabaseCorrupt) => "is damaged (SQLite reports it corrupt)",
            _ => {
                return StoreError::Sqlite {
                    path,
                    action,
                    source: Box::new(source),
                };
            }
        };
        StoreError::Corrupt {
            path,
            reason: reason.to_owned(),
        }
    }
}

fn upsert_server(
    tx: &rusqlite::Transaction<'_>,
    workspace: &str,
    record: &ServerRecord,
    definition: &str,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO server (workspace, alias, source, definition) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workspace, alias)
         DO UPDATE SET source = excluded.source, definition = excluded.definition",
        params![workspace, record.alias, record.source.as_str(), definition],
    )?;
    Ok(())
}

fn upsert_enabled(
    tx: &rusqlite::Transaction<'_>,
    workspace: &str,
    alias: &str,
    enabled: bool,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO enabledness (workspace, alias, enabled) VALUES (?1, ?2, ?3)
         ON CONFLICT (workspace, alias) DO UPDATE SET enabled = excluded.enabled",
        params![workspace, alias, enabled],
    )?;
    Ok(())
}
