//! [`PostgresStore`]: durable workspace state in a PostgreSQL database several hosts share,
//! every committed write announced to all of them with `NOTIFY`.
//!
//! - **Driver.** tokio-postgres (async; a notification arrives on its connection as a message)
//!   with a small deadpool-postgres pool for reads and writes, and one connection of its own
//!   that `LISTEN`s. TLS (rustls, with the system's roots and the URL's `sslrootcert`) when
//!   the URL's `sslmode` asks for it (`require`, `verify-ca`, `verify-full`; `prefer` tries it),
//!   and without `sslmode` for any host that is not loopback; `disable`, or no `sslmode` on
//!   loopback or a Unix socket, is plain. The certificate is always verified.
//! - **Trust.** Nothing that answers at the address is believed: every connection is dialled
//!   and read through `wire.rs`, which ends one whose message is longer than
//!   8 MiB (`wire::MAX_MESSAGE_BYTES`), or which asks for the password in clear or as MD5
//!   without TLS.
//! - **Schema.** The numbered steps of `migrations/postgres/`, applied under an advisory lock
//!   inside one transaction, the version kept in `plurnk_mcp_meta`. A database that holds
//!   tables but no `plurnk_mcp_meta`, or one whose meta names another application, is another
//!   program's; one whose version is newer than this build's is refused: neither is touched.
//! - **Writes.** Each is one transaction that takes an advisory lock of its (workspace, alias),
//!   checks the version it expects, writes, moves the version on and calls `pg_notify` (sent on
//!   commit, so a change is announced exactly when it is durable).
//! - **Loss.** The listening connection ends (or a heartbeat is not answered): the store is
//!   unreachable (every write would fail; the workspace refuses actions at once with `503`), a
//!   `Lost` is announced, and it connects again with backoff; once it listens again, `Restored`
//!   tells every workspace to read its state again, so a change made meanwhile is not missed.
//! - **Secrets.** The URL's password is registered with the redactor before anything can
//!   fail, and the store is named everywhere (errors, `Debug`, the `503`) without it. A URL
//!   without a password takes it from PostgreSQL's password file (`PGPASSFILE`, else
//!   `~/.pgpass`, as libpq reads it: `pgpass.rs`).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{AsyncMessage, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

mod pgpass;
mod sessions;
mod wire;

use wire::{Arrived, Dialer, Tls};

use super::{
    Announcement, Change, Expect, ServerRecord, Store, StoreError, StoreFuture, Version,
    WorkspaceRecord, check_definition,
};

/// The schema, one step a file, applied in order; step `i` leaves `plurnk_mcp_meta.version =
/// i`. A schema change is a new file and a new line here, never an edit of a shipped step.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_init.sql"),
    include_str!("../../migrations/postgres/0002_ended_sessions.sql"),
];

/// What `plurnk_mcp_meta.application` holds in a database of ours.
const APPLICATION: &str = "plurnk-mcp";

/// The channel every host listens on.
const CHANNEL: &str = "plurnk_mcp";

/// How long one read or write may take, connecting included, before the store counts as
/// unreachable for it.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the listening connection is asked whether it is alive, and how long it has to
/// answer: a connection cut off without a close (a partition) is noticed within both.
const HEARTBEAT: Duration = Duration::from_secs(2);

/// The first and the longest pause between attempts to listen again.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_LONGEST: Duration = Duration::from_secs(2);

/// A [`Store`] in a PostgreSQL database.
pub struct PostgresStore {
    /// `PostgreSQL postgres://user@host:port/db`: how every message names it.
    shown: Arc<str>,
    pool: Pool,
    announcements: broadcast::Sender<Announcement>,
    /// Why it cannot be reached now (`None` while the listener listens).
    lost: Arc<Mutex<Option<String>>>,
    /// The listener's task, stopped with the store.
    listener: tokio::task::JoinHandle<()>,
}

// === impl PostgresStore ===

impl PostgresStore {
    /// Connects to the database `url` names (`postgres://user:password@host:port/db`, with
    /// `?sslmode=require` and optionally `&sslrootcert=/path/ca.pem` for TLS), checks its
    /// schema, brings it up to date, and starts listening for other hosts' changes.
    ///
    /// # Errors
    ///
    /// [`StoreError::Refused`] for a URL that cannot be read, a certificate file that cannot,
    /// or a database of another program; [`StoreError::NewerDatabase`] for one a newer build
    /// wrote (neither is changed); [`StoreError::Unavailable`] when it cannot be reached;
    /// [`StoreError::Database`] when a migration fails (the database stays as it was).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let Parsed {
            mut config,
            rootcert,
            tls_by_default,
        } = parse(url)?;
        if config.get_password().is_none() {
            // PostgreSQL's password file, as libpq reads it: a password need not be in the
            // URL (nor, through --state, in the process list).
            let vars = |name: &str| std::env::var(name).ok();
            match pgpass::password(&config, &vars) {
                Ok(Some(password)) => {
                    config.password(password);
                }
                Ok(None) => {}
                Err(reason) => {
                    return Err(StoreError::Refused {
                        store: shown(&config),
                        reason,
                    });
                }
            }
        }
        if let Some(password) = config.get_password() {
            crate::redact::register([String::from_utf8_lossy(password).into_owned()]);
        }
        let shown: Arc<str> = Arc::from(shown(&config).as_str());
        let dialer = Dialer {
            tls: tls(&config, rootcert.as_deref(), &shown)?,
            config: config.clone(),
            tls_by_default,
        };
        let manager = Manager::from_connect(config, dialer.clone(), manager_config());
        let pool = Pool::builder(manager)
            .max_size(4)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(OPERATION_TIMEOUT))
            .create_timeout(Some(OPERATION_TIMEOUT))
            .recycle_timeout(Some(OPERATION_TIMEOUT))
            .build()
            .map_err(|error| StoreError::Refused {
                store: shown.to_string(),
                reason: format!("cannot have a connection pool: {error}"),
            })?;
        prepare(&pool, &shown).await?;
        let first = timed(&shown, listen(&dialer))
            .await?
            .map_err(|error| unavailable(&shown, &error))?;
        let (announcements, _) = broadcast::channel(1024);
        let lost = Arc::new(Mutex::new(None));
        let listener = tokio::spawn(follow(
            dialer,
            first,
            announcements.clone(),
            lost.clone(),
            shown.clone(),
        ));
        Ok(Self {
            shown,
            pool,
            announcements,
            lost,
            listener,
        })
    }

    /// How the store is named: `PostgreSQL postgres://user@host:port/db`, no password.
    pub fn name(&self) -> &str {
        &self.shown
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|error| unavailable(&self.shown, &error))
    }

    async fn read(
        &self,
        only: Option<&str>,
    ) -> Result<BTreeMap<String, WorkspaceRecord>, StoreError> {
        let shown = &self.shown;
        let failed =
            |error: tokio_postgres::Error| database_error(shown, "read workspace state", &error);
        let mut client = self.client().await?;
        // One snapshot of the database: records, overrides and versions agree.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(failed)?;
        let mut workspaces = BTreeMap::<String, WorkspaceRecord>::new();
        let rows = tx
            .query(
                "SELECT workspace, alias, source, definition FROM plurnk_mcp_server
                 WHERE $1::text IS NULL OR workspace = $1",
                &[&only],
            )
            .await
            .map_err(failed)?;
        for row in rows {
            let (workspace, alias, source, definition): (String, String, String, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let unreadable = |what: &str| StoreError::Refused {
                store: shown.to_string(),
                reason: format!(
                    "holds server \"{alias}\" of workspace \"{workspace}\" with {what}: remove \
                     that row, or use a build that reads it"
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
        let rows = tx
            .query(
                "SELECT workspace, alias, enabled FROM plurnk_mcp_enabledness
                 WHERE $1::text IS NULL OR workspace = $1",
                &[&only],
            )
            .await
            .map_err(failed)?;
        for row in rows {
            workspaces
                .entry(row.get(0))
                .or_default()
                .enabled
                .insert(row.get(1), row.get(2));
        }
        let rows = tx
            .query(
                "SELECT workspace, alias, version FROM plurnk_mcp_revision
                 WHERE $1::text IS NULL OR workspace = $1",
                &[&only],
            )
            .await
            .map_err(failed)?;
        for row in rows {
            let workspace: String = row.get(0);
            let version = Version::try_from(row.get::<_, i64>(2)).unwrap_or(0);
            // A workspace with nothing left is not loaded, whatever versions it keeps.
            if only.is_some() || workspaces.contains_key(&workspace) {
                workspaces
                    .entry(workspace)
                    .or_default()
                    .versions
                    .insert(row.get(1), version);
            }
        }
        tx.commit().await.map_err(failed)?;
        Ok(workspaces)
    }

    async fn write_now(
        &self,
        workspace: &str,
        change: &Change,
        expect: Expect,
    ) -> Result<Version, StoreError> {
        if let Some(record) = change.record() {
            check_definition(workspace, record)?;
        }
        let alias = change.alias();
        let action = change.action(workspace);
        let shown = &self.shown;
        let failed = |error: tokio_postgres::Error| database_error(shown, &action, &error);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(failed)?;
        // Writers of one alias take turns; an alias never holds '/', so the key is one pair.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&format!("{workspace}/{alias}")],
        )
        .await
        .map_err(failed)?;
        let found = tx
            .query_opt(
                "SELECT version FROM plurnk_mcp_revision WHERE workspace = $1 AND alias = $2",
                &[&workspace, &alias],
            )
            .await
            .map_err(failed)?
            .map(|row| Version::try_from(row.get::<_, i64>(0)).unwrap_or(0))
            .unwrap_or(0);
        // Refused: the transaction rolls back when dropped, having written nothing. An add of
        // a taken alias is told so first: what to do about it is clearer.
        if matches!(change, Change::Add(..))
            && tx
                .query_opt(
                    "SELECT 1 FROM plurnk_mcp_server WHERE workspace = $1 AND alias = $2",
                    &[&workspace, &alias],
                )
                .await
                .map_err(failed)?
                .is_some()
        {
            return Err(StoreError::Exists {
                workspace: workspace.to_owned(),
                alias: alias.to_owned(),
            });
        }
        expect.check(workspace, alias, found)?;
        let definition = change.record().map(|record| record.definition.to_string());
        let source = change.record().map(|record| record.source.as_str());
        let changed = match change {
            Change::Put(_) => {
                tx.execute(UPSERT_SERVER, &[&workspace, &alias, &source, &definition])
                    .await
                    .map_err(failed)?;
                true
            }
            Change::PutEnabled(_, enabled) | Change::Add(_, enabled) => {
                tx.execute(UPSERT_SERVER, &[&workspace, &alias, &source, &definition])
                    .await
                    .map_err(failed)?;
                tx.execute(UPSERT_ENABLED, &[&workspace, &alias, enabled])
                    .await
                    .map_err(failed)?;
                true
            }
            Change::SetEnabled(_, enabled) => {
                tx.execute(UPSERT_ENABLED, &[&workspace, &alias, enabled])
                    .await
                    .map_err(failed)?;
                true
            }
            Change::Revert(_) => {
                tx.execute(DELETE_SERVER, &[&workspace, &alias])
                    .await
                    .map_err(failed)?;
                tx.execute(UPSERT_ENABLED, &[&workspace, &alias, &false])
                    .await
                    .map_err(failed)?;
                true
            }
            Change::Remove(_) => {
                let servers = tx
                    .execute(DELETE_SERVER, &[&workspace, &alias])
                    .await
                    .map_err(failed)?;
                let overrides = tx
                    .execute(
                        "DELETE FROM plurnk_mcp_enabledness WHERE workspace = $1 AND alias = $2",
                        &[&workspace, &alias],
                    )
                    .await
                    .map_err(failed)?;
                servers + overrides > 0
            }
        };
        if !changed {
            return Ok(found);
        }
        let version = found + 1;
        let stored = i64::try_from(version).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO plurnk_mcp_revision (workspace, alias, version) VALUES ($1, $2, $3)
             ON CONFLICT (workspace, alias) DO UPDATE SET version = excluded.version",
            &[&workspace, &alias, &stored],
        )
        .await
        .map_err(failed)?;
        let payload =
            serde_json::json!({"workspace": workspace, "alias": alias, "version": version});
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&CHANNEL, &payload.to_string()],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(version)
    }
}

const UPSERT_SERVER: &str = "INSERT INTO plurnk_mcp_server (workspace, alias, source, definition)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (workspace, alias)
     DO UPDATE SET source = excluded.source, definition = excluded.definition";

const UPSERT_ENABLED: &str = "INSERT INTO plurnk_mcp_enabledness (workspace, alias, enabled)
     VALUES ($1, $2, $3)
     ON CONFLICT (workspace, alias) DO UPDATE SET enabled = excluded.enabled";

const DELETE_SERVER: &str = "DELETE FROM plurnk_mcp_server WHERE workspace = $1 AND alias = $2";

impl Store for PostgresStore {
    fn load(&self) -> StoreFuture<'_, BTreeMap<String, WorkspaceRecord>> {
        Box::pin(async move { timed(&self.shown, self.read(None)).await? })
    }

    fn load_workspace<'a>(&'a self, workspace: &'a str) -> StoreFuture<'a, WorkspaceRecord> {
        Box::pin(async move {
            let mut read = timed(&self.shown, self.read(Some(workspace))).await??;
            Ok(read.remove(workspace).unwrap_or_default())
        })
    }

    fn write<'a>(
        &'a self,
        workspace: &'a str,
        change: &'a Change,
        expect: Expect,
    ) -> StoreFuture<'a, Version> {
        Box::pin(
            async move { timed(&self.shown, self.write_now(workspace, change, expect)).await? },
        )
    }

    fn announcements(&self) -> Option<broadcast::Receiver<Announcement>> {
        Some(self.announcements.subscribe())
    }

    fn unreachable(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn end_session<'a>(&'a self, key: &'a str, until: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move { timed(&self.shown, self.end_session_now(key, until)).await? })
    }

    fn session_ended<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed(&self.shown, self.session_ended_now(key)).await? })
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("store", &self.shown)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The listener holds its own connection: it goes with the store.
        self.listener.abort();
    }
}

// === the URL ===

/// What a URL says of how to reach the database.
struct Parsed {
    config: Config,
    /// The `sslrootcert` it names (which the driver does not read).
    rootcert: Option<String>,
    /// TLS is wanted because it gave no `sslmode` and a host is not loopback.
    tls_by_default: bool,
}

/// The driver's configuration from `url`. `verify-ca` and `verify-full` are read as
/// `require`: the certificate is always verified here. Without `sslmode`, TLS is required
/// unless every host is loopback (or a Unix socket): what crosses a network is encrypted
/// unless the URL says `sslmode=disable`.
fn parse(url: &str) -> Result<Parsed, StoreError> {
    let refused = |reason: &str| StoreError::Refused {
        store: "PostgreSQL (its URL)".into(),
        reason: reason.to_owned(),
    };
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut rootcert = None;
    let mut kept = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match (&*key, &*value) {
            ("sslrootcert", path) => rootcert = Some(path.to_owned()),
            ("sslmode", "verify-ca" | "verify-full") => {
                kept.append_pair("sslmode", "require");
            }
            (key, value) => {
                kept.append_pair(key, value);
            }
        }
    }
    let kept = kept.finish();
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{kept}")
    };
    // The driver's words could quote the URL, password and all: they are not passed on.
    let mut config = Config::from_str(&rest).map_err(|_| {
        refused(
            "cannot be read: write it as postgres://user:password@host:port/database, \
             optionally with ?sslmode=require&sslrootcert=/path/ca.pem",
        )
    })?;
    // Without an sslmode the driver would try TLS first ("prefer", and on in clear when the
    // server has none); here the host decides: loopback in clear, anything else TLS.
    let asked = query.is_some_and(|query| {
        form_urlencoded::parse(query.as_bytes()).any(|(key, _)| key == "sslmode")
    });
    let tls_by_default = !asked && !loopback(&config);
    if !asked {
        config.ssl_mode(if tls_by_default {
            SslMode::Require
        } else {
            SslMode::Disable
        });
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config.application_name("plurnk-mcp");
    Ok(Parsed {
        config,
        rootcert,
        tls_by_default,
    })
}

/// Whether every host `config` names is this machine: `localhost`, a loopback address or a
/// Unix socket (and every `hostaddr` loopback).
fn loopback(config: &Config) -> bool {
    let hosts = config.get_hosts().iter().all(|host| match host {
        Host::Tcp(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost"
                || name.ends_with(".localhost")
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|address| address.is_loopback())
        }
        Host::Unix(_) => true,
    });
    hosts
        && config
            .get_hostaddrs()
            .iter()
            .all(|address| address.is_loopback())
}

/// `PostgreSQL postgres://user@host:port/db`: the store as messages name it.
fn shown(config: &Config) -> String {
    let user = config.get_user().unwrap_or("");
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(host, port)| match host {
            Host::Tcp(name) => format!("{name}:{port}"),
            Host::Unix(path) => format!("{}:{port}", path.display()),
        })
        .collect();
    let database = config.get_dbname().unwrap_or(user);
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    format!("PostgreSQL postgres://{at}{}/{database}", hosts.join(","))
}

fn manager_config() -> ManagerConfig {
    // `Fast` reuses a connection whose socket is still open; a connection that died with its
    // server is seen closed and replaced.
    ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    }
}

/// The TLS the URL asks for: rustls over the system's roots and the `sslrootcert` file.
fn tls(config: &Config, rootcert: Option<&str>, shown: &str) -> Result<Tls, StoreError> {
    if config.get_ssl_mode() == SslMode::Disable {
        return Ok(Tls::Plain);
    }
    let refused = |reason: String| StoreError::Refused {
        store: shown.to_owned(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(certificate);
    }
    if let Some(path) = rootcert {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|certificates| certificates.collect::<Result<_, _>>())
            .map_err(|error| refused(format!("cannot read its sslrootcert {path}: {error}")))?;
        if certificates.is_empty() {
            return Err(refused(format!(
                "finds no certificate in its sslrootcert {path}"
            )));
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|error| refused(format!("cannot use its sslrootcert {path}: {error}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| refused(format!("cannot set up TLS: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Tls::Rustls(MakeRustlsConnect::new(client)))
}

// === the schema ===

/// Checks the database is ours (or empty) and not newer, and applies the missing steps, all
/// in one transaction under an advisory lock: two hosts starting at once apply each step once,
/// and a refusal or a failed step leaves the database as it was.
async fn prepare(pool: &Pool, shown: &str) -> Result<(), StoreError> {
    let work = async {
        let mut client = pool
            .get()
            .await
            .map_err(|error| unavailable(shown, &error))?;
        let failed = |action: &str| {
            let action = action.to_owned();
            move |error: tokio_postgres::Error| database_error(shown, &action, &error)
        };
        let tx = client
            .transaction()
            .await
            .map_err(failed("open a transaction"))?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('plurnk_mcp_meta', 0))",
            &[],
        )
        .await
        .map_err(failed("lock its schema"))?;
        let ours = tx
            .query_one("SELECT to_regclass('plurnk_mcp_meta') IS NOT NULL", &[])
            .await
            .map_err(failed("read its schema"))?
            .get::<_, bool>(0);
        let version = if ours {
            let row = tx
                .query_opt(
                    "SELECT application, version FROM plurnk_mcp_meta LIMIT 1",
                    &[],
                )
                .await
                .map_err(failed("read its schema version"))?;
            let Some(row) = row else {
                return Err(foreign(shown));
            };
            let (application, version): (String, i32) = (row.get(0), row.get(1));
            let version = i64::from(version);
            if application != APPLICATION {
                return Err(foreign(shown));
            }
            version
        } else {
            let tables: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()",
                    &[],
                )
                .await
                .map_err(failed("read its tables"))?
                .get(0);
            if tables > 0 {
                return Err(foreign(shown));
            }
            0
        };
        let supported = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
        if version > supported {
            return Err(StoreError::NewerDatabase {
                store: shown.to_owned(),
                found: version,
                supported,
            });
        }
        for (step, sql) in (1..)
            .zip(MIGRATIONS)
            .skip_while(|(step, _)| *step <= version)
        {
            let action = format!("apply schema migration {step:04}");
            tx.batch_execute(sql).await.map_err(failed(&action))?;
            let step = i32::try_from(step).unwrap_or(i32::MAX);
            tx.execute("UPDATE plurnk_mcp_meta SET version = $1", &[&step])
                .await
                .map_err(failed(&action))?;
        }
        tx.commit().await.map_err(failed("commit its schema"))
    };
    timed(shown, work).await?
}

fn foreign(shown: &str) -> StoreError {
    StoreError::Refused {
        store: shown.to_owned(),
        reason: "holds tables of another program (it has no plurnk_mcp_meta of plurnk-mcp): \
                 give plurnk-mcp a database (or a schema, with options=-csearch_path=NAME) of \
                 its own"
            .to_owned(),
    }
}

// === listening ===

/// One listening connection: its client (which keeps it open) and what arrives on it.
struct Listening {
    client: tokio_postgres::Client,
    messages: mpsc::UnboundedReceiver<Arrived>,
}

async fn listen(dialer: &Dialer) -> Result<Listening, tokio_postgres::Error> {
    let (sender, messages) = mpsc::unbounded_channel();
    // The connection is driven by its own task; it ends when the client is dropped or the
    // server goes.
    let (client, _driven) = dialer.open(Some(sender)).await?;
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    Ok(Listening { client, messages })
}

/// Announces what arrives on the listening connection; when it ends, says the store is lost,
/// listens again with backoff, and announces its return.
async fn follow(
    dialer: Dialer,
    mut listening: Listening,
    announcements: broadcast::Sender<Announcement>,
    lost: Arc<Mutex<Option<String>>>,
    shown: Arc<str>,
) {
    loop {
        let why = relay(&mut listening, &announcements).await;
        let why = format!("the state store {shown} cannot be reached: {}", told(&why));
        tracing::warn!(%why, "the state store is lost");
        *lost.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
        let _ = announcements.send(Announcement::Lost(why));
        let mut pause = BACKOFF_FIRST;
        listening = loop {
            tokio::time::sleep(pause).await;
            match tokio::time::timeout(OPERATION_TIMEOUT, listen(&dialer)).await {
                Ok(Ok(listening)) => break listening,
                Ok(Err(error)) => {
                    let error = told(&chain(&error));
                    tracing::debug!(%error, "the state store is still lost");
                }
                Err(_) => tracing::debug!("the state store did not answer"),
            }
            pause = (pause * 2).min(BACKOFF_LONGEST);
        };
        *lost.lock().unwrap_or_else(PoisonError::into_inner) = None;
        tracing::info!(store = %shown, "the state store is back");
        let _ = announcements.send(Announcement::Restored);
    }
}

/// Relays notifications until the connection ends or misses a heartbeat; returns why.
async fn relay(
    listening: &mut Listening,
    announcements: &broadcast::Sender<Announcement>,
) -> String {
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            message = listening.messages.recv() => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if let Some(announcement) = announced(notification.payload()) {
                        let _ = announcements.send(announcement);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return chain(&error),
                None => return "its connection closed".to_owned(),
            },
            _ = heartbeat.tick() => {
                let asked = tokio::time::timeout(HEARTBEAT, listening.client.simple_query("")).await;
                match asked {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => return chain(&error),
                    Err(_) => return format!("it did not answer within {} s", HEARTBEAT.as_secs()),
                }
            }
        }
    }
}

/// A notification's payload as the write made it: a change, or a gateway session that ended.
fn announced(payload: &str) -> Option<Announcement> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Payload {
        Changed {
            workspace: String,
            alias: String,
            version: Version,
        },
        Ended {
            ended: String,
            until: u64,
        },
    }
    Some(match serde_json::from_str(payload).ok()? {
        Payload::Changed {
            workspace,
            alias,
            version,
        } => Announcement::Changed {
            workspace,
            alias,
            version,
        },
        Payload::Ended { ended, until } => Announcement::SessionEnded { key: ended, until },
    })
}

// === errors ===

/// `work`, bounded by [`OPERATION_TIMEOUT`]: past it the store counts as unreachable.
async fn timed<T>(shown: &str, work: impl Future<Output = T>) -> Result<T, StoreError> {
    tokio::time::timeout(OPERATION_TIMEOUT, work)
        .await
        .map_err(|_| StoreError::Unavailable {
            store: shown.to_owned(),
            reason: format!("it did not answer within {} s", OPERATION_TIMEOUT.as_secs()),
        })
}

/// A driver error: PostgreSQL's refusal (it answered) is [`StoreError::Database`], anything
/// else (no connection, a closed one) [`StoreError::Unavailable`].
fn database_error(shown: &str, action: &str, error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(refusal) => StoreError::Database {
            store: shown.to_owned(),
            action: action.to_owned(),
            reason: told(refusal.message()),
        },
        None => unavailable(shown, error),
    }
}

/// The store cannot be reached: the driver's or the pool's words, told.
fn unavailable(shown: &str, error: &dyn std::error::Error) -> StoreError {
    StoreError::Unavailable {
        store: shown.to_owned(),
        reason: told(&chain(error)),
    }
}

/// An error and its causes, each once: the driver words a failure by its kind alone
/// ("error communicating with the server") and keeps why (a refused connection, a message
/// past its bound) as the cause.
fn chain(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let next_said = next.to_string();
        if !said.contains(&next_said) {
            said.push_str(": ");
            said.push_str(&next_said);
        }
        cause = next.source();
    }
    said
}

/// What PostgreSQL or its driver said, as it may leave the host (in a Problem, a 503, a log
/// line, `/readyz`): secrets scrubbed, and cut to the bound of any text a peer chose.
fn told(text: &str) -> String {
    crate::redact::scrub_capped(text, crate::redact::SHOWN_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_read_and_shown_without_its_password() {
        let parsed = parse(
            "postgres://app:s3cret-pa55@db.example:6543/mcp?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .expect("a URL");
        assert_eq!(parsed.config.get_ssl_mode(), SslMode::Require);
        assert!(!parsed.tls_by_default);
        assert_eq!(parsed.rootcert.as_deref(), Some("/etc/ca.pem"));
        let named = shown(&parsed.config);
        assert_eq!(named, "PostgreSQL postgres://app@db.example:6543/mcp");
        let Err(refused) = parse("postgres://app:s3cret-pa55@[bad") else {
            panic!("unreadable");
        };
        assert!(!refused.to_string().contains("s3cret"), "{refused}");
        assert!(
            refused
                .to_string()
                .contains("postgres://user:password@host"),
            "{refused}"
        );
    }

    #[test]
    fn without_sslmode_a_host_that_is_not_loopback_is_reached_over_tls() {
        let mode = |url: &str| {
            let parsed = parse(url).expect("a URL");
            (parsed.config.get_ssl_mode(), parsed.tls_by_default)
        };
        for url in [
            "postgres://app@db.example/mcp",
            "postgres://app@10.0.0.5:5432/mcp",
            "postgres://app@127.0.0.1,db.example/mcp",
            "postgres://app@localhost/mcp?hostaddr=10.0.0.5",
        ] {
            assert_eq!(mode(url), (SslMode::Require, true), "{url}");
        }
        for url in [
            "postgres://app@127.0.0.1/mcp",
            "postgres://app@localhost:6543/mcp",
            "postgres://app@[::1]/mcp",
            "postgres://app@%2Fvar%2Frun%2Fpostgresql/mcp",
        ] {
            assert_eq!(mode(url), (SslMode::Disable, false), "{url}");
        }
        // The URL decides when it says.
        assert_eq!(
            mode("postgres://app@db.example/mcp?sslmode=disable"),
            (SslMode::Disable, false)
        );
        assert_eq!(
            mode("postgres://app@127.0.0.1/mcp?sslmode=require"),
            (SslMode::Require, false)
        );
    }

    #[test]
    fn a_notification_is_read_back_as_written() {
        assert_eq!(
            announced(r#"{"workspace":"w","alias":"a","version":3}"#),
            Some(Announcement::Changed {
                workspace: "w".into(),
                alias: "a".into(),
                version: 3
            })
        );
        assert_eq!(
            announced(r#"{"ended":"ab12","until":9}"#),
            Some(Announcement::SessionEnded {
                key: "ab12".into(),
                until: 9
            })
        );
        assert_eq!(announced("not json"), None);
    }
}
