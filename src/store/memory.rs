//! [`MemoryStore`]: the [`Store`] semantics in a map, for unit tests of the layers above.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{
    Change, Expect, Store, StoreError, StoreFuture, Version, WorkspaceRecord, check_definition,
};

/// A [`Store`] that keeps everything in memory and forgets it on drop.
///
/// Same semantics as [`SqliteStore`](super::SqliteStore): writes validate before they
/// change anything, versions only grow, and a workspace left with no record and no override
/// is not loaded.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    workspaces: BTreeMap<String, WorkspaceRecord>,
    /// Every alias's version, by workspace, kept when the workspace has nothing else left.
    versions: BTreeMap<String, BTreeMap<String, Version>>,
}

// === impl MemoryStore ===

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write validates first and then mutates without a fallible step, so a panic
    /// elsewhere while the lock was held cannot have left a half-done write behind.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_now(
        &self,
        workspace: &str,
        change: &Change,
        expect: Expect,
    ) -> Result<Version, StoreError> {
        if let Some(record) = change.record() {
            check_definition(workspace, record)?;
        }
        let alias = change.alias();
        let mut state = self.lock();
        let found = state
            .versions
            .get(workspace)
            .and_then(|versions| versions.get(alias))
            .copied()
            .unwrap_or(0);
        // An add of a taken alias is told so first: what to do about it is clearer.
        if matches!(change, Change::Add(..))
            && state
                .workspaces
                .get(workspace)
                .is_some_and(|record| record.servers.contains_key(alias))
        {
            return Err(StoreError::Exists {
                workspace: workspace.to_owned(),
                alias: alias.to_owned(),
            });
        }
        expect.check(workspace, alias, found)?;
        let entry = state.workspaces.entry(workspace.to_owned()).or_default();
        let changed = match change {
            Change::Put(record) => {
                entry.servers.insert(alias.to_owned(), record.clone());
                true
            }
            Change::PutEnabled(record, enabled) => {
                entry.servers.insert(alias.to_owned(), record.clone());
                entry.enabled.insert(alias.to_owned(), *enabled);
                true
            }
            Change::Add(record, enabled) => {
                entry.servers.insert(alias.to_owned(), record.clone());
                entry.enabled.insert(alias.to_owned(), *enabled);
                true
            }
            Change::SetEnabled(_, enabled) => {
                entry.enabled.insert(alias.to_owned(), *enabled);
                true
            }
            Change::Remove(_) => {
                let server = entry.servers.remove(alias).is_some();
                let enabled = entry.enabled.remove(alias).is_some();
                server || enabled
            }
            Change::Revert(_) => {
                entry.servers.remove(alias);
                entry.enabled.insert(alias.to_owned(), false);
                true
            }
        };
        if entry.servers.is_empty() && entry.enabled.is_empty() {
            state.workspaces.remove(workspace);
        }
        if !changed {
            return Ok(found);
        }
        let version = found + 1;
        state
            .versions
            .entry(workspace.to_owned())
            .or_default()
            .insert(alias.to_owned(), version);
        Ok(version)
    }

    fn load_now(&self) -> BTreeMap<String, WorkspaceRecord> {
        let state = self.lock();
        let mut workspaces = state.workspaces.clone();
        for (name, record) in &mut workspaces {
            record.versions = state.versions.get(name).cloned().unwrap_or_default();
        }
        workspaces
    }
}

impl Store for MemoryStore {
    fn load(&self) -> StoreFuture<'_, BTreeMap<String, WorkspaceRecord>> {
        Box::pin(std::future::ready(Ok(self.load_now())))
    }

    fn load_workspace<'a>(&'a self, workspace: &'a str) -> StoreFuture<'a, WorkspaceRecord> {
        let state = self.lock();
        let mut record = state.workspaces.get(workspace).cloned().unwrap_or_default();
        record.versions = state.versions.get(workspace).cloned().unwrap_or_default();
        Box::pin(std::future::ready(Ok(record)))
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
