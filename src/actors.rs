//! The actor tree: a supervisor, one workspace actor per workspace, and one attachment actor
//! per (workspace, enabled server).
//!
//! ```text
//! HostSupervisor          owns the workspaces and the shutdown order
//!  └─ WorkspaceActor      owns the entries, the attachments and the snapshot it commits
//!     └─ AttachmentActor  owns one connection, its in-flight calls and its backoff
//! ```

pub(crate) mod attachment;
pub(crate) mod messages;
pub mod restart;
pub(crate) mod seed;
pub(crate) mod supervisor;
pub(crate) mod workspace;
