//! [`MemoryStore`]: the [`Store`] semantics in a map, for unit tests of the layers above.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{ServerRecord, Store, StoreError, WorkspaceRecord, check_definition};

/// A [`Store`] that keeps everything in memory and forgets it on drop.
///
/// Same semantics as [`SqliteStore`](super::SqliteStore): writes validate before they
/// change anything, and a workspace left with no record and no override is not loaded.
#[derive(Debug, Default)]
pub struct MemoryStore {
    workspaces: Mutex<BTreeMap<String, WorkspaceRecord>>,
}

// === impl MemoryStore ===

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write validates first and then mutates without a fallible step, so a panic
    /// elsewhere while the lock was held cannot have left a half-done write behind.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, WorkspaceRecord>> {
        self.workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn load(&self) -> Result<BTreeMap<String, WorkspaceRecord>, StoreError> {
        Ok(self.lock().clone())
    }

    fn put_server(&self, workspace: &str, record: &ServerRecord) -> Result<(), StoreError> {
        check_definition(workspace, record)?;
        self.lock()
            .entry(workspace.to_owned())
            .or_default()
            .servers
            .insert(record.alias.clone(), record.clone());
        Ok(())
    }

    fn put_server_enabled(
        &self,
        workspace: &str,
        record: &ServerRecord,
        enabled: bool,
    ) -> Result<(), StoreError> {
        check_definition(workspace, record)?;
        let mut workspaces = self.lock();
        let entry = workspaces.entry(workspace.to_owned()).or_default();
        entry.servers.insert(record.alias.clone(), record.clone());
        entry.enabled.insert(record.alias.clone(), enabled);
        Ok(())
    }

    fn set_enabled(&self, workspace: &str, alias: &str, enabled: bool) -> Result<(), StoreError> {
        self.lock()
            .entry(workspace.to_owned())
            .or_default()
            .enabled
            .insert(alias.to_owned(), enabled);
        Ok(())
    }

    fn add_server(
        &self,
        workspace: &str,
        record: &ServerRecord,
        enabled: bool,
    ) -> Result<(), StoreError> {
        let taken = self
            .lock()
            .get(workspace)
            .is_some_and(|stored| stored.servers.contains_key(&record.alias));
        if taken {
            return Err(StoreError::Exists {
                workspace: workspace.to_owned(),
                alias: record.alias.clone(),
            });
        }
        self.put_server_enabled(workspace, record, enabled)
    }

    fn revert_server(&self, workspace: &str, alias: &str) -> Result<(), StoreError> {
        let mut workspaces = self.lock();
        let record = workspaces.entry(workspace.to_owned()).or_default();
        record.servers.remove(alias);
        record.enabled.insert(alias.to_owned(), false);
        Ok(())
    }

    fn remove_server(&self, workspace: &str, alias: &str) -> Result<(), StoreError> {
        let mut workspaces = self.lock();
        if let Some(record) = workspaces.get_mut(workspace) {
            record.servers.remove(alias);
            record.enabled.remove(alias);
            if record.servers.is_empty() && record.enabled.is_empty() {
                workspaces.remove(workspace);
            }
        }
        Ok(())
    }
}
