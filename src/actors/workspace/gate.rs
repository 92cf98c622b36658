//! The install gate: what a workspace may add or customize, what each definition may
//! expand, and the definition an enable asks for.

use std::sync::Arc;

use super::{Entry, Provenance, WorkspaceState};
use crate::config::{ServerDefinition, resolve};
use crate::model::{Customize, Problem};

// === impl WorkspaceState ===

impl WorkspaceState {
    /// What an entry's definition may expand: all of the operator's environment for a
    /// declared server; for an added one only the names handed to workspaces; for a
    /// customized one those and what the declared definition itself refers to. Applied at
    /// every connection, so a definition that comes back from the state file is held to
    /// today's list, not the one it was admitted under.
    pub(super) fn expansion_env(&self, entry: &Entry) -> Arc<crate::config::Environment> {
        let admission = &self.settings.admission;
        match (entry.provenance, &entry.candidate) {
            (Provenance::Added | Provenance::Client, _) => admission.env.clone(),
            (Provenance::Service, None) => self.settings.env.clone(),
            (Provenance::Service | Provenance::Specialized, _) => {
                let mut names = admission.names.clone();
                if let Some(service) = &entry.service {
                    names.extend(service.referenced_names());
                }
                Arc::new(self.settings.env.only(&names))
            }
        }
    }

    /// Why `alias` may not connect now that the install gate is closed: a server a workspace
    /// added exists only by the gate, which closes behind it (`403 install-gate-closed`). It
    /// is kept, and connects again once the operator opens the gate. (A declared server's
    /// customization is not even seeded while the gate is closed: the server runs as
    /// declared, `seed.rs`.)
    pub(super) fn closed_gate(&self, alias: &str) -> Option<Problem> {
        let entry = self.entries.get(alias)?;
        (entry.provenance.gated() && !self.settings.admission.allow).then(|| Problem {
            listing: false,
            status: 403,
            kind: "install-gate-closed".into(),
            detail: format!(
                "server \"{alias}\" was {} at runtime, which the operator no longer allows \
                 (PLURNK_MCP_ALLOW_ADD is off): it is kept as it is and connects again when \
                 they allow it; remove it, or disable it, to stop seeing this",
                if entry.provenance == Provenance::Added {
                    "added"
                } else {
                    "customized"
                }
            ),
            retryable: false,
        })
    }

    /// The install gate: a workspace may add a server, or enable one with a definition other
    /// than `declared`, only when the operator allows it (`PLURNK_MCP_ALLOW_ADD`), and the
    /// definition may refer only to the names the operator hands to workspaces
    /// (`PLURNK_MCP_WORKSPACE_ENV`) beyond those `declared` already refers to. Such a
    /// definition is kept, so it may hold no credential written literally (`400
    /// literal-credential`, before anything connects).
    pub(super) fn admit(
        &self,
        alias: &str,
        definition: &ServerDefinition,
        declared: Option<&ServerDefinition>,
    ) -> Result<(), Problem> {
        let admission = &self.settings.admission;
        if !admission.allow {
            return Err(Problem::forbidden(format!(
                "server \"{alias}\" cannot be added or customized here: the operator has not \
                 allowed servers at runtime (PLURNK_MCP_ALLOW_ADD=true); ask them, or use a \
                 server they declared"
            )));
        }
        definition
            .refuse_literal_credentials()
            .map_err(|refused| Problem::literal_credential(&refused))?;
        let known = declared
            .map(ServerDefinition::referenced_names)
            .unwrap_or_default();
        let refused: Vec<String> = definition
            .referenced_names()
            .into_iter()
            .filter(|name| !known.contains(name) && !admission.names.contains(name))
            .collect();
        if refused.is_empty() {
            return Ok(());
        }
        Err(Problem::forbidden(format!(
            "server \"{alias}\" refers to {}, which the operator does not hand to workspaces: \
             ask them to list it in PLURNK_MCP_WORKSPACE_ENV",
            refused
                .iter()
                .map(|name| format!("${{{name}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The definition an enable asks for: the current one, or the cascade's result.
    pub(super) fn requested(
        &self,
        alias: &str,
        customize: &Customize,
    ) -> Result<Arc<ServerDefinition>, Problem> {
        let Some(entry) = self.entries.get(alias) else {
            return Err(Problem::unknown_server(alias));
        };
        if customize.is_empty() {
            return Ok(entry.definition.clone());
        }
        let workspace = entry.provenance.gated().then(|| &*entry.definition);
        let resolved = resolve(
            entry.service.as_deref(),
            workspace,
            customize.overlay.as_ref(),
            customize.options.as_ref(),
        )
        .and_then(|definition| {
            definition
                .check_references(&self.settings.env)
                .map(|()| definition)
        })
        .map_err(|errors| {
            Problem::invalid_definition(format!(
                "server \"{alias}\" cannot be enabled with that configuration: {errors}"
            ))
        })?;
        Ok(Arc::new(resolved))
    }
}
