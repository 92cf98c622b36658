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
#[cfg(feature = "sqlite")]
mod sqlite;
// The behavioural suite runs each case against both stores, and the file-level tests need
// the SQLite one.
#[cfg(all(test, feature = "sqlite"))]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// Durable per-workspace state: server specializations and enabledness overrides.
///
/// Methods are synchronous and may block on disk (and, with two processes on one file, on
/// SQLite's busy wait, at most 5 s); the workspace actor calls them from its handler, where one
/// small local transaction is cheaper than a hop to a blocking thread. Every write is one
/// transaction: it happens whole or, when it returns an error, not at all.
pub trait Store: Send + Sync + 'static {
    /// Every workspace that holds durable state (at least one server record or enabledness
    /// override), by name.
    ///
    /// # Errors
    ///
    /// The backing file cannot be read, or holds a row this build cannot understand
    /// ([`StoreError::Corrupt`]).
    fn load(&self) -> Result<BTreeMap<String, WorkspaceRecord>, StoreError>;

    /// Inserts or replaces the durable definition of `record.alias` in `workspace`; its
    /// enabledness override, if any, is kept.
    ///
    /// # Errors
    ///
    /// [`StoreError::LooksLikeSecret`] when a credential field of the definition is not one
    /// `${NAME}` reference, [`StoreError::Redacted`] when it holds a `<redacted>`
    /// placeholder; otherwise the backing file cannot be written. Either way nothing changed.
    fn put_server(&self, workspace: &str, record: &ServerRecord) -> Result<(), StoreError>;

    /// Records that `alias` is `enabled` (or not) in `workspace`, overriding the service
    /// default for a service definition and recording an added one's enabledness. The alias
    /// need not have a server record.
    ///
    /// # Errors
    ///
    /// The backing file cannot be written; nothing changed.
    fn set_enabled(&self, workspace: &str, alias: &str, enabled: bool) -> Result<(), StoreError>;

    /// [`put_server`](Store::put_server) and [`set_enabled`](Store::set_enabled) as one
    /// write: an added or specialized server is never durable without its enabledness.
    fn put_server_enabled(
        &self,
        workspace: &str,
        record: &ServerRecord,
        enabled: bool,
    ) -> Result<(), StoreError>;

    /// Drops the server record *and* the enabledness override of `alias` in `workspace`, so
    /// the alias falls back to its service definition and default, or disappears. Removing an
    /// alias the workspace holds nothing for is not an error: deciding whether that is a
    /// `404` is the caller's business.
    ///
    /// # Errors
    ///
    /// The backing file cannot be written; nothing changed.
    fn remove_server(&self, workspace: &str, alias: &str) -> Result<(), StoreError>;

    /// [`put_server_enabled`](Store::put_server_enabled) for a server being added: refused
    /// with [`StoreError::Exists`] when `workspace` already holds a record of that alias (two
    /// hosts on one state file adding the same alias at once: one wins, the other is told).
    ///
    /// # Errors
    ///
    /// The alias is taken, or the backing file cannot be written; nothing changed.
    fn add_server(
        &self,
        workspace: &str,
        record: &ServerRecord,
        enabled: bool,
    ) -> Result<(), StoreError>;

    /// Drops the server record of `alias` and records it disabled, as one write: removing a
    /// workspace's specialization of a service server reveals the service definition
    /// disabled, also after a restart (not enabled again by the service default).
    ///
    /// # Errors
    ///
    /// The backing file cannot be written; nothing changed.
    fn revert_server(&self, workspace: &str, alias: &str) -> Result<(), StoreError>;
}

/// One workspace's durable state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceRecord {
    /// The workspace's own definitions (added or specialized), by alias.
    pub servers: BTreeMap<String, ServerRecord>,
    /// Enabledness overrides by alias; an alias absent here follows `PLURNK_MCP_ENABLED`.
    pub enabled: BTreeMap<String, bool>,
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

/// Refuses `record` when any string in it holds a `<redacted>` placeholder (a display form,
/// named as such first), or when it holds a credential written literally
/// ([`crate::config::literal_credentials`], the one refusal the actions run before this,
/// kept here as the last line).
fn check_definition(workspace: &str, record: &ServerRecord) -> Result<(), StoreError> {
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
