//! Durable workspace state: the definitions each workspace added or specialized and its
//! enabledness overrides, behind the [`Store`] trait.
//!
//! # What is stored, and what never is
//!
//! Per workspace: one [`ServerRecord`] per alias the workspace owns (an added server) or
//! specializes (a service definition it overrides), and one enabledness override per alias
//! whose enabledness differs from `PLURNK_MCP_ENABLED`. Nothing else: never a token, an
//! OAuth grant, a Task, or the expanded value of a `${NAME}` reference.
//!
//! **The store never sees a token.** Callers pass normalized, *unexpanded* definitions, and
//! the store writes exactly what it is given — it expands nothing. As a last guard behind the
//! actions' own refusal, [`Store::put_server`] refuses a definition that holds a credential
//! written literally ([`StoreError::LooksLikeSecret`], by
//! [`crate::config::literal_credentials`]: a credential field, a credential-named header or
//! environment entry, a URL's password, a credential flag's value or a token-shaped word that
//! is not one `${NAME}` reference), so a copied token cannot be written by mistake, and one
//! holding a `<redacted>` placeholder ([`StoreError::Redacted`]): that is the display form
//! `config` serializes for logs, and storing it would lose the values.
//!
//! # Layout
//!
//! - this file: the [`Store`] trait, its records, [`StoreError`] and the definition guard.
//! - `store/sqlite.rs`: [`SqliteStore`], the state file (WAL, numbered migrations from
//!   `migrations/NNNN_*.sql`, refusal of corrupt, foreign or newer-schema files).
//! - `store/memory.rs`: [`MemoryStore`], the same semantics in a map, for unit tests.
//! - `store/tests.rs`: one behavioural suite run against both, plus the file-level tests.

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub mod suite;
// The behavioural suite runs each case against the memory and SQLite stores, and the
// file-level tests need the SQLite one.
#[cfg(all(test, feature = "sqlite"))]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::broadcast;

pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// What a [`Store`] method returns: its work, to be awaited (in a task of its own when the
/// caller is an actor: see [`Store`]).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The version of one alias's durable state in one workspace: 0 before its first write, one
/// more with every write that changed it. A removal keeps the alias's version, so a version
/// never goes back.
pub type Version = u64;

/// Durable per-workspace state: server specializations and enabledness overrides, each alias
/// with its [`Version`].
///
/// Every method returns a future: a store on another machine (PostgreSQL) answers over the
/// network, and the workspace actor, whose mailbox never waits on the network, runs each
/// write in a task of its own that reports back by message. A local store (SQLite) does its
/// small transaction when the future is first polled, in that task. Every write is one
/// transaction: it happens whole or, when it returns an error, not at all.
///
/// [`write`](Store::write) is the one write; the named writes (`put_server`, `set_enabled`,
/// …) are it with [`Expect::Any`].
///
/// A daemon hands the host one through [`HostOptions`](crate::HostOptions):
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use plurnk_mcp::{Host, HostConfig, HostOptions, Store};
/// // A state file with the `sqlite` feature, `postgres://…` with `postgres`.
/// let store: Arc<dyn Store> = plurnk_mcp::store::open("/var/lib/daemon/mcp.sqlite").await?;
/// let records = store.load().await?;
/// println!("{} workspaces hold durable state", records.len());
/// let options = HostOptions::default().with_store(Some(store));
/// let host = Host::start_with(HostConfig::from_env(std::env::vars())?, options).await?;
/// # let _ = host; Ok(()) }
/// ```
pub trait Store: Send + Sync + 'static {
    /// Every workspace that holds durable state (at least one server record or enabledness
    /// override), by name.
    ///
    /// # Errors
    ///
    /// The store cannot be read, or holds a row this build cannot understand
    /// ([`StoreError::Corrupt`]).
    fn load(&self) -> StoreFuture<'_, BTreeMap<String, WorkspaceRecord>>;

    /// One workspace's durable state (empty when it holds none), read in one transaction.
    ///
    /// # Errors
    ///
    /// As [`load`](Store::load).
    fn load_workspace<'a>(&'a self, workspace: &'a str) -> StoreFuture<'a, WorkspaceRecord> {
        Box::pin(async move { Ok(self.load().await?.remove(workspace).unwrap_or_default()) })
    }

    /// Applies `change` to `workspace` when the alias's version is what `expect` says, and
    /// returns the alias's version after it (unchanged when the change changed nothing, such
    /// as removing what is not there).
    ///
    /// # Errors
    ///
    /// [`StoreError::Conflict`] when the alias's version is not the one expected (another
    /// writer changed it meanwhile); [`StoreError::Exists`] for a [`Change::Add`] of an alias
    /// that has a record; [`StoreError::LooksLikeSecret`] or [`StoreError::Redacted`] for a
    /// record that holds a literal credential or a display form; otherwise the store cannot
    /// be written ([`StoreError::Unavailable`] when it cannot be reached). Either way nothing
    /// changed.
    fn write<'a>(
        &'a self,
        workspace: &'a str,
        change: &'a Change,
        expect: Expect,
    ) -> StoreFuture<'a, Version>;

    /// Announcements of changes other writers committed, for a store several hosts share
    /// (PostgreSQL); `None` for one only this process writes to.
    fn announcements(&self) -> Option<broadcast::Receiver<Announcement>> {
        None
    }

    /// Why the store cannot be reached now, naming it (never a password); `None` while it
    /// can, and always for a local store.
    fn unreachable(&self) -> Option<String> {
        None
    }

    /// Inserts or replaces the durable definition of `record.alias` in `workspace`; its
    /// enabledness override, if any, is kept.
    ///
    /// # Errors
    ///
    /// [`StoreError::LooksLikeSecret`] when a credential field of the definition is not one
    /// `${NAME}` reference, [`StoreError::Redacted`] when it holds a `<redacted>`
    /// placeholder; otherwise the store cannot be written. Either way nothing changed.
    fn put_server<'a>(&'a self, workspace: &'a str, record: &ServerRecord) -> StoreFuture<'a, ()> {
        let change = Change::Put(record.clone());
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }

    /// Records that `alias` is `enabled` (or not) in `workspace`, overriding the service
    /// default for a service definition and recording an added one's enabledness. The alias
    /// need not have a server record.
    ///
    /// # Errors
    ///
    /// The store cannot be written; nothing changed.
    fn set_enabled<'a>(
        &'a self,
        workspace: &'a str,
        alias: &str,
        enabled: bool,
    ) -> StoreFuture<'a, ()> {
        let change = Change::SetEnabled(alias.to_owned(), enabled);
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }

    /// [`put_server`](Store::put_server) and [`set_enabled`](Store::set_enabled) as one
    /// write: an added or specialized server is never durable without its enabledness.
    ///
    /// # Errors
    ///
    /// As [`put_server`](Store::put_server); nothing changed.
    fn put_server_enabled<'a>(
        &'a self,
        workspace: &'a str,
        record: &ServerRecord,
        enabled: bool,
    ) -> StoreFuture<'a, ()> {
        let change = Change::PutEnabled(record.clone(), enabled);
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }

    /// Records that the gateway session whose id hashes to `key` (hex SHA-256) has ended, until
    /// `until` (seconds since the Unix epoch, when its id stops opening anyway), and announces
    /// it to every host that watches ([`Announcement::SessionEnded`]). A store several hosts
    /// share keeps at most [`MAX_ENDED_SESSIONS`] at once, the ones nearest their end
    /// forgotten first; a store of one process keeps none (the gateway's own list does).
    ///
    /// # Errors
    ///
    /// The store cannot be written.
    fn end_session<'a>(&'a self, key: &'a str, until: u64) -> StoreFuture<'a, ()> {
        let _ = (key, until);
        Box::pin(async { Ok(()) })
    }

    /// Whether the gateway session whose id hashes to `key` ended on some host and its
    /// lifetime has not passed ([`end_session`](Store::end_session)).
    ///
    /// # Errors
    ///
    /// The store cannot be read.
    fn session_ended<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        let _ = key;
        Box::pin(async { Ok(false) })
    }

    /// Drops the server record *and* the enabledness override of `alias` in `workspace`, so
    /// the alias falls back to its service definition and default, or disappears. Removing an
    /// alias the workspace holds nothing for is not an error: deciding whether that is a
    /// `404` is the caller's business.
    ///
    /// # Errors
    ///
    /// The store cannot be written; nothing changed.
    fn remove_server<'a>(&'a self, workspace: &'a str, alias: &str) -> StoreFuture<'a, ()> {
        let change = Change::Remove(alias.to_owned());
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }

    /// [`put_server_enabled`](Store::put_server_enabled) for a server being added: refused
    /// with [`StoreError::Exists`] when `workspace` already holds a record of that alias (two
    /// hosts on one store adding the same alias at once: one wins, the other is told).
    ///
    /// # Errors
    ///
    /// The alias is taken, or the store cannot be written; nothing changed.
    fn add_server<'a>(
        &'a self,
        workspace: &'a str,
        record: &ServerRecord,
        enabled: bool,
    ) -> StoreFuture<'a, ()> {
        let change = Change::Add(record.clone(), enabled);
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }

    /// Drops the server record of `alias` and records it disabled, as one write: removing a
    /// workspace's specialization of a service server reveals the service definition
    /// disabled, also after a restart (not enabled again by the service default).
    ///
    /// # Errors
    ///
    /// The store cannot be written; nothing changed.
    fn revert_server<'a>(&'a self, workspace: &'a str, alias: &str) -> StoreFuture<'a, ()> {
        let change = Change::Revert(alias.to_owned());
        Box::pin(async move { self.write(workspace, &change, Expect::Any).await.map(drop) })
    }
}

/// One write of one alias's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The record, its enabledness override (if any) kept.
    Put(ServerRecord),
    /// The record and its enabledness, as one write.
    PutEnabled(ServerRecord, bool),
    /// The record of an alias being added, with its enabledness: refused with
    /// [`StoreError::Exists`] when the alias has a record.
    Add(ServerRecord, bool),
    /// The alias's enabledness override.
    SetEnabled(String, bool),
    /// The record and the override go: the alias falls back to the service's, or goes.
    Remove(String),
    /// The record goes and the alias is recorded disabled (a removed specialization).
    Revert(String),
}

impl Change {
    /// The alias it writes.
    pub fn alias(&self) -> &str {
        match self {
            Self::Put(record) | Self::PutEnabled(record, _) | Self::Add(record, _) => &record.alias,
            Self::SetEnabled(alias, _) | Self::Remove(alias) | Self::Revert(alias) => alias,
        }
    }

    /// The record it writes, if any (checked for literal credentials before anything is).
    pub fn record(&self) -> Option<&ServerRecord> {
        match self {
            Self::Put(record) | Self::PutEnabled(record, _) | Self::Add(record, _) => Some(record),
            Self::SetEnabled(..) | Self::Remove(_) | Self::Revert(_) => None,
        }
    }

    /// What the write does, as an error names it: `save server "x" of workspace "w"`.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn action(&self, workspace: &str) -> String {
        let verb = match self {
            Self::Put(_) => "save",
            Self::PutEnabled(_, true) => "save and enable",
            Self::PutEnabled(_, false) => "save and disable",
            Self::Add(..) => "add",
            Self::SetEnabled(_, true) => "enable",
            Self::SetEnabled(_, false) => "disable",
            Self::Remove(_) => "remove",
            Self::Revert(_) => "revert",
        };
        format!(
            "{verb} server \"{}\" of workspace \"{workspace}\"",
            self.alias()
        )
    }
}

/// What a write expects of the alias's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Whatever it is: the last write wins.
    Any,
    /// Exactly this version (0: the alias was never written): a writer that acts on what it
    /// last saw, so a change made meanwhile by another is never overwritten unseen.
    Version(Version),
}

impl Expect {
    /// Whether `found` is what this expects; the [`StoreError::Conflict`] when not.
    pub(crate) fn check(
        self,
        workspace: &str,
        alias: &str,
        found: Version,
    ) -> Result<(), StoreError> {
        match self {
            Self::Version(expected) if expected != found => Err(StoreError::Conflict {
                workspace: workspace.to_owned(),
                alias: alias.to_owned(),
                expected,
                found,
            }),
            _ => Ok(()),
        }
    }
}

/// What a shared store tells every host that watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Announcement {
    /// A write committed: `alias` of `workspace` is at `version` now.
    Changed {
        /// The workspace.
        workspace: String,
        /// The alias.
        alias: String,
        /// Its version after the write.
        version: Version,
    },
    /// The store cannot be reached (the reason names the store, never a password): changes
    /// made meanwhile are not announced.
    Lost(String),
    /// The store is reached again: whatever changed while it was lost must be read again.
    Restored,
    /// A gateway session ended on some host ([`Store::end_session`]): every host's gateway
    /// ends its own copy.
    SessionEnded {
        /// Its id's hex SHA-256.
        key: String,
        /// When its lifetime ends, in seconds since the Unix epoch.
        until: u64,
    },
}

/// The ended gateway sessions a shared store keeps at once ([`Store::end_session`]): 65,536,
/// about 6 MiB of rows; past it the ones nearest the end of their lifetime are forgotten.
pub const MAX_ENDED_SESSIONS: usize = 1 << 16;

/// A store named by where it is: a path is a SQLite state file, a `postgres://` or
/// `postgresql://` URL a PostgreSQL database (with the `postgres` feature; without it the
/// URL is refused naming the feature).
///
/// # Errors
///
/// What [`SqliteStore::open`] or `PostgresStore::connect` refuse, or
/// [`StoreError::FeatureOff`].
pub async fn open(location: &str) -> Result<Arc<dyn Store>, StoreError> {
    if is_postgres_url(location) {
        #[cfg(feature = "postgres")]
        {
            return Ok(Arc::new(PostgresStore::connect(location).await?));
        }
        #[cfg(not(feature = "postgres"))]
        {
            return Err(StoreError::FeatureOff {
                feature: "postgres",
                what: "a postgres:// state".into(),
            });
        }
    }
    #[cfg(feature = "sqlite")]
    return Ok(Arc::new(SqliteStore::open(location)?));
    #[cfg(not(feature = "sqlite"))]
    Err(StoreError::FeatureOff {
        feature: "sqlite",
        what: "a state file".into(),
    })
}

/// Whether `location` names a PostgreSQL database rather than a file.
pub fn is_postgres_url(location: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| {
        location
            .get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
    })
}

/// One workspace's durable state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceRecord {
    /// The workspace's own definitions (added or specialized), by alias.
    pub servers: BTreeMap<String, ServerRecord>,
    /// Enabledness overrides by alias; an alias absent here follows `PLURNK_MCP_ENABLED`.
    pub enabled: BTreeMap<String, bool>,
    /// The [`Version`] of every alias this workspace ever wrote, removed ones included; an
    /// alias absent here was never written (version 0).
    pub versions: BTreeMap<String, Version>,
}

/// The durable definition of one alias in one workspace.
///
/// `Debug` shows the alias and source, never the definition: the store treats it as opaque
/// and it may hold values (header, environment) an operator would not want in a log.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerRecord {
    /// The server alias the record belongs to.
    pub alias: String,
    /// The normalized, unexpanded `McpServerDefinition` as JSON; the store keeps it verbatim
    /// and never looks inside, except to refuse a literal credential.
    pub definition: serde_json::Value,
    /// Whether the workspace owns the alias or specializes a service definition.
    pub source: RecordSource,
}

/// Where a [`ServerRecord`]'s alias comes from, which decides what removing it reveals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordSource {
    /// A workspace-owned alias absent from the service configuration; removing it makes the
    /// alias disappear.
    Added,
    /// A workspace specialization of a service definition; removing it reveals the service
    /// definition again.
    Specialized,
}

/// Why a store operation failed. No message carries a definition or any part of one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The state file was written by a newer build with a schema this build does not know.
    #[error(
        "state file {} has schema version {found}, newer than the {supported} this build \
         knows: run a newer plurnk-mcp, or use another state file; the file was not changed",
        path.display()
    )]
    NewerSchema {
        /// The state file.
        path: PathBuf,
        /// The schema version the file records.
        found: i64,
        /// The newest schema version this build can read and write.
        supported: i64,
    },

    /// The file is not a SQLite database, not a plurnk-mcp state database, or is damaged.
    #[error(
        "state file {} {reason}: move it aside (rename it) and start again, which begins with \
         empty workspace state; the file was not changed",
        path.display()
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it, such as `is not a SQLite database`; never file contents.
        reason: String,
    },

    /// A credential field held something other than one `${NAME}` reference.
    #[error(
        "workspace \"{workspace}\", server \"{alias}\": {field} is not one ${{NAME}} reference, \
         so it may be a copied secret: keep the value in an environment variable and write \
         ${{NAME}} instead; nothing was stored"
    )]
    LooksLikeSecret {
        /// The workspace the write was for.
        workspace: String,
        /// The alias the write was for.
        alias: String,
        /// The offending field, such as `authorization.token` or `headers."X-Api-Key"`.
        field: String,
    },

    /// The definition holds a `<redacted>` placeholder: it is a display form (the `Serialize`
    /// or `Debug` of a definition), and storing it would lose the values it stands for.
    #[error(
        "workspace \"{workspace}\", server \"{alias}\": {field} holds a <redacted> \
         placeholder, so this is a display form of the definition: store the unexpanded \
         definition itself; nothing was stored"
    )]
    Redacted {
        /// The workspace the write was for.
        workspace: String,
        /// The alias the write was for.
        alias: String,
        /// Where the placeholder is, such as `headers.X-Key` or `args[2]`.
        field: String,
    },

    /// The definition is longer than a store keeps: [`MAX_DEFINITION_BYTES`].
    #[error(
        "workspace \"{workspace}\", server \"{alias}\": its definition is {bytes} bytes as \
         JSON, over the {max} a store keeps: keep long values out of it (in a file its server \
         reads, or a variable); nothing was stored",
        max = MAX_DEFINITION_BYTES
    )]
    DefinitionTooLarge {
        /// The workspace the write was for.
        workspace: String,
        /// The alias the write was for.
        alias: String,
        /// Its length as JSON.
        bytes: usize,
    },

    /// A server being added has a record already: another process added it meanwhile.
    #[error(
        "workspace \"{workspace}\" already stores a server \"{alias}\" (another process added \
         it meanwhile): list the servers again, then choose another alias or enable that one; \
         nothing was stored"
    )]
    Exists {
        /// The workspace.
        workspace: String,
        /// The alias.
        alias: String,
    },

    /// The state file (or its journal) could not be created or made private to its owner.
    #[error(
        "cannot make state file {} readable by its owner only (mode 0600): {source}: check \
         who owns it, or choose another state path",
        path.display()
    )]
    Private {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// The state file's folder could not be created.
    #[error(
        "cannot create the folder of state file {}: {source}: create it or choose another \
         state path",
        path.display()
    )]
    CreateDir {
        /// The state file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// Another writer changed the alias since the version this write was based on: nothing
    /// was written, and the caller reads the current state before it decides again.
    #[error(
        "workspace \"{workspace}\", server \"{alias}\" was changed by another host meanwhile \
         (version {found}, this change was made from version {expected}); nothing was stored"
    )]
    Conflict {
        /// The workspace.
        workspace: String,
        /// The alias.
        alias: String,
        /// The version the write was based on.
        expected: Version,
        /// The version the store holds.
        found: Version,
    },

    /// The store cannot be reached (a shared store whose server is down or cut off): nothing
    /// was read or written. `store` names it without a password.
    #[error("the state store {store} cannot be reached: {reason}")]
    Unavailable {
        /// The store, such as `PostgreSQL postgres://app@db:5432/mcp`.
        store: String,
        /// Why, in the driver's words (never a password).
        reason: String,
    },

    /// The store's location needs a cargo feature this build was made without.
    #[error(
        "{what} needs the `{feature}` feature of plurnk-mcp, which this build was made without: \
         build the host with that feature, or keep the state another way"
    )]
    FeatureOff {
        /// The feature, such as `postgres`.
        feature: &'static str,
        /// What asked for it.
        what: String,
    },

    /// The PostgreSQL database holds what this build must not touch, or its location cannot
    /// be used: a schema of another program, an unreadable URL, a certificate that cannot be
    /// read. `store` names it without a password.
    #[error("the state store {store} {reason}; it was not changed")]
    Refused {
        /// The store.
        store: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// The PostgreSQL database was written by a newer build.
    #[error(
        "the state store {store} has schema version {found}, newer than the {supported} this \
         build knows: run a newer plurnk-mcp, or use another database; it was not changed"
    )]
    NewerDatabase {
        /// The store.
        store: String,
        /// The schema version the database records.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },

    /// PostgreSQL refused an operation other than for being unreachable.
    #[error("the state store {store}: could not {action}: {reason}")]
    Database {
        /// The store.
        store: String,
        /// What was being done.
        action: String,
        /// PostgreSQL's words (its messages name tables and constraints, never values).
        reason: String,
    },

    /// SQLite refused an operation (locked, read-only, disk full, …).
    #[error("state file {}: could not {action}: {source}", path.display())]
    Sqlite {
        /// The state file.
        path: PathBuf,
        /// What was being done, such as `save server "github" of workspace "a"`.
        action: String,
        /// SQLite's error (a `rusqlite::Error`, boxed to keep it out of the API); its
        /// messages name tables and constraints, never values.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

// === impl ServerRecord ===

impl ServerRecord {
    /// A record read back from a store's row: its source word and its definition's JSON
    /// text, or what about the row cannot be read (for the store's own error).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn from_row(
        alias: &str,
        source: &str,
        definition: &str,
    ) -> Result<Self, &'static str> {
        let source = RecordSource::parse(source).ok_or("an unknown source")?;
        let definition =
            serde_json::from_str(definition).map_err(|_| "a definition that is not JSON")?;
        Ok(Self {
            alias: alias.to_owned(),
            definition,
            source,
        })
    }
}

impl fmt::Debug for ServerRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerRecord")
            .field("alias", &self.alias)
            .field("definition", &format_args!("<opaque>"))
            .field("source", &self.source)
            .finish()
    }
}

// === impl RecordSource ===

impl RecordSource {
    /// The word the state file stores: `added` or `specialized`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Specialized => "specialized",
        }
    }

    /// The source a stored word names, if any.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "added" => Some(Self::Added),
            "specialized" => Some(Self::Specialized),
            _ => None,
        }
    }
}

impl fmt::Display for RecordSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === the definition guard ===

/// What `config` writes in place of a value it will not show.
const REDACTED: &str = "<redacted>";

/// The longest definition a store keeps, as JSON: 4 MiB. A definition is a command, its
/// arguments, environment and headers, or a tool source's declaration: kilobytes. Bounded so
/// that every row a store writes is one it can read back (a PostgreSQL store refuses a
/// message past 8 MiB from its database, `MAX_MESSAGE_BYTES` of `store/postgres/wire.rs`).
pub const MAX_DEFINITION_BYTES: usize = 4 << 20;

/// Refuses `record` when its definition is longer than [`MAX_DEFINITION_BYTES`], when any
/// string in it holds a `<redacted>` placeholder (a display form, named as such first), or
/// when it holds a credential written literally ([`crate::config::literal_credentials`], the
/// one refusal the actions run before this, kept here as the last line).
fn check_definition(workspace: &str, record: &ServerRecord) -> Result<(), StoreError> {
    let bytes = record.definition.to_string().len();
    if bytes > MAX_DEFINITION_BYTES {
        return Err(StoreError::DefinitionTooLarge {
            workspace: workspace.to_owned(),
            alias: record.alias.clone(),
            bytes,
        });
    }
    if let Some(field) = find_redacted(&record.definition, "") {
        return Err(StoreError::Redacted {
            workspace: workspace.to_owned(),
            alias: record.alias.clone(),
            field: if field.is_empty() {
                "the definition".to_owned()
            } else {
                field
            },
        });
    }
    match crate::config::literal_credentials(&record.definition)
        .into_iter()
        .next()
    {
        Some(field) => Err(StoreError::LooksLikeSecret {
            workspace: workspace.to_owned(),
            alias: record.alias.clone(),
            field,
        }),
        None => Ok(()),
    }
}

/// The path (keys and indexes, never values) below `at` of the first string holding
/// [`REDACTED`].
fn find_redacted(value: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains(REDACTED) => Some(at.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_redacted(item, &format!("{at}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            find_redacted(item, &path)
        }),
        _ => None,
    }
}
