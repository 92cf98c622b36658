//! What `list` shows of each available server: its provenance, target, state and tools,
//! and the definitions a client carries, shown disabled.

use ractor::RpcReplyPort;

use super::{Provenance, WorkspaceState};
use crate::config::ServerDefinition;
use crate::model::{ServerState, ServerSummary};

// === impl WorkspaceState ===

impl WorkspaceState {
    /// Answers a `List` with every summary.
    pub(super) fn on_list(
        &self,
        client: &[ServerDefinition],
        reply: RpcReplyPort<Vec<ServerSummary>>,
    ) {
        let _ = reply.send(self.summaries(client));
    }

    fn summaries(&self, client: &[ServerDefinition]) -> Vec<ServerSummary> {
        let mut summaries: Vec<ServerSummary> = self
            .entries
            .iter()
            .map(|(alias, entry)| {
                let server = self
                    .servers
                    .get(alias.as_str())
                    .cloned()
                    .map(|server| (*server).clone())
                    .unwrap_or_else(|| self.placeholder(alias, entry.enabled));
                let definition = serde_json::to_value(&*entry.definition).unwrap_or_default();
                let target = shown_target(&definition);
                ServerSummary {
                    alias: alias.clone(),
                    source: entry.provenance.as_str(),
                    target,
                    transport: server.transport,
                    enabled: entry.enabled,
                    state: server.state,
                    problem: server.problem.clone(),
                    negotiated: server.negotiated.clone(),
                    tools: server.tools.iter().map(|tool| tool.name.clone()).collect(),
                    read: entry.definition.read().to_vec(),
                    definition,
                }
            })
            .collect();
        // A client-only definition is shown disabled with source `client`; carrying it
        // neither connects nor persists it.
        for definition in client {
            if self.entries.contains_key(definition.alias()) {
                continue;
            }
            let rendered = serde_json::to_value(definition).unwrap_or_default();
            summaries.push(ServerSummary {
                alias: definition.alias().to_owned(),
                source: Provenance::Client.as_str(),
                target: shown_target(&rendered),
                transport: definition.transport().kind(),
                enabled: false,
                state: ServerState::Disabled,
                problem: None,
                negotiated: None,
                tools: Vec::new(),
                read: definition.read().to_vec(),
                definition: rendered,
            });
        }
        summaries.sort_by(|a, b| a.alias.cmp(&b.alias));
        summaries
    }
}

/// What a definition runs or reaches, as a summary shows it: the command, the URL, or a tool
/// source's program, script or document.
fn shown_target(definition: &serde_json::Value) -> String {
    let declaration = definition.get("declaration");
    definition
        .get("command")
        .or_else(|| definition.get("url"))
        .or_else(|| declaration.and_then(|d| d.get("command")))
        .or_else(|| declaration.and_then(|d| d.get("path")))
        .or_else(|| declaration.and_then(|d| d.get("spec")))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
