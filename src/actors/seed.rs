//! What a workspace is opened from: the service definitions, overlaid by the workspace's
//! durable records, and in the default workspace the embedder's in-process servers. Read
//! once at start, where durable state is admitted whole or not at all, and again each time
//! the supervisor opens or restarts a workspace.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::workspace::{Seed, Source};
use crate::config::{HostConfig, McpServerDefinition, ServerDefinition, target_variable};
use crate::store::{RecordSource, Store, WorkspaceRecord};

/// The workspace every host opens at start.
pub const DEFAULT_WORKSPACE: &str = "default";

/// Builds a workspace's definitions, as at start: the service configuration, overlaid by the
/// workspace's durable records. Every fault is named in the error.
pub(crate) type Reseed = Arc<dyn Fn(&str) -> Result<Seeds, String> + Send + Sync>;

/// One workspace's definitions, by alias.
pub(crate) type Seeds = BTreeMap<String, Seed>;

/// Where every workspace's definitions come from.
#[derive(Clone)]
pub(crate) struct Seeder {
    config: Arc<HostConfig>,
    store: Option<Arc<dyn Store>>,
    /// The in-process servers, which join the default workspace enabled.
    in_process: BTreeMap<String, Seed>,
}

impl Seeder {
    /// A seeder over `config` and `store`, with the in-process servers named `in_process`;
    /// refused when one of them is also configured as a service server.
    pub(crate) fn new<'a>(
        config: Arc<HostConfig>,
        store: Option<Arc<dyn Store>>,
        in_process: impl IntoIterator<Item = &'a String>,
    ) -> Result<Self, String> {
        let mut seeds = BTreeMap::new();
        for alias in in_process {
            if config.servers().contains_key(alias) {
                return Err(format!(
                    "in-process server \"{alias}\" is also configured as {}: give one of them another alias",
                    target_variable(alias)
                ));
            }
            let definition = ServerDefinition::in_process(alias)
                .map_err(|errors| format!("in-process server \"{alias}\": {errors}"))?;
            seeds.insert(
                alias.clone(),
                Seed {
                    definition: Arc::new(definition),
                    service: None,
                    source: Source::Service,
                    enabled: true,
                    specialized: false,
                },
            );
        }
        Ok(Self {
            config,
            store,
            in_process: seeds,
        })
    }

    /// The workspaces to open at start, each with its definitions: every workspace the
    /// store knows, and the default one (first, when the store does not know it). Every
    /// fault of the durable state is reported at once, one a line.
    pub(crate) fn at_start(&self) -> Result<Vec<(String, Seeds)>, String> {
        let mut seeds = BTreeMap::new();
        if let Some(store) = &self.store {
            let records = store.load().map_err(|error| error.to_string())?;
            let mut faults = Vec::new();
            for (name, record) in records {
                match durable_seeds(&self.config, &name, &record) {
                    Ok(definitions) => {
                        seeds.insert(name, definitions);
                    }
                    Err(mut more) => faults.append(&mut more),
                }
            }
            if !faults.is_empty() {
                return Err(faults.join("\n"));
            }
        }
        let mut names: Vec<String> = seeds.keys().cloned().collect();
        if !names.iter().any(|name| name == DEFAULT_WORKSPACE) {
            names.insert(0, DEFAULT_WORKSPACE.to_owned());
        }
        Ok(names
            .into_iter()
            .map(|name| {
                let mut definitions = seeds
                    .remove(&name)
                    .unwrap_or_else(|| service_definitions(&self.config));
                if name == DEFAULT_WORKSPACE {
                    definitions.extend(self.in_process.clone());
                }
                (name, definitions)
            })
            .collect())
    }

    /// The definitions of workspace `name` now: its durable records read again.
    fn seeds(&self, name: &str) -> Result<BTreeMap<String, Seed>, String> {
        let mut seeds = match &self.store {
            Some(store) => {
                let records = store.load().map_err(|error| error.to_string())?;
                match records.get(name) {
                    Some(record) => durable_seeds(&self.config, name, record)
                        .map_err(|faults| faults.join("; "))?,
                    None => service_definitions(&self.config),
                }
            }
            None => service_definitions(&self.config),
        };
        if name == DEFAULT_WORKSPACE {
            seeds.extend(self.in_process.clone());
        }
        Ok(seeds)
    }

    /// What the supervisor opens (or restarts) a workspace from.
    pub(crate) fn reseed(self) -> Reseed {
        Arc::new(move |name: &str| self.seeds(name))
    }
}

/// Every service definition with its default enabledness (`PLURNK_MCP_ENABLED`).
fn service_definitions(config: &HostConfig) -> BTreeMap<String, Seed> {
    config
        .servers()
        .iter()
        .map(|(alias, definition)| {
            // One copy of the definition, shared as the one in use and the service baseline.
            let definition = Arc::new(definition.clone());
            (
                alias.clone(),
                Seed {
                    definition: definition.clone(),
                    service: Some(definition),
                    source: Source::Service,
                    enabled: config.enabled().contains(alias),
                    specialized: false,
                },
            )
        })
        .collect()
}

/// A stored workspace's definitions: the service ones, specialized or extended by its
/// records, with its enabledness overrides. Every fault names the workspace and alias.
fn durable_seeds(
    config: &HostConfig,
    workspace: &str,
    record: &WorkspaceRecord,
) -> Result<BTreeMap<String, Seed>, Vec<String>> {
    let mut seeds = service_definitions(config);
    let mut faults = Vec::new();
    for (alias, server) in &record.servers {
        // A `${NAME}` the environment no longer sets is not a reason to refuse the whole
        // state: the server is admitted and shows `unavailable` with the missing name, and
        // can be fixed or removed like any other.
        let definition = McpServerDefinition::from_value(&server.definition)
            .and_then(ServerDefinition::try_from);
        let definition = match definition {
            Ok(definition) if definition.alias() == alias => definition,
            Ok(_) => {
                faults.push(format!(
                    "workspace \"{workspace}\": the stored definition of \"{alias}\" names another alias: remove it with `plurnk-mcp --workspace {workspace} remove {alias}`"
                ));
                continue;
            }
            Err(errors) => {
                faults.push(format!(
                    "workspace \"{workspace}\": the stored definition of \"{alias}\" is not valid ({errors}): fix the environment it refers to, or remove it"
                ));
                continue;
            }
        };
        match (server.source, seeds.get(alias)) {
            (RecordSource::Specialized, None) => {
                faults.push(format!(
                    "workspace \"{workspace}\": \"{alias}\" specializes a service definition that no longer exists: remove it, or configure {}",
                    target_variable(alias)
                ));
                continue;
            }
            (RecordSource::Added, Some(_)) => {
                faults.push(format!(
                    "workspace \"{workspace}\": the added server \"{alias}\" now collides with a service definition of the same name: remove one of them"
                ));
                continue;
            }
            _ => {}
        }
        let enabled = seeds.get(alias).is_some_and(|seed| seed.enabled);
        seeds.insert(
            alias.clone(),
            Seed {
                definition: Arc::new(definition),
                service: seeds.get(alias).and_then(|seed| seed.service.clone()),
                source: match server.source {
                    RecordSource::Added => Source::Workspace,
                    RecordSource::Specialized => Source::Service,
                },
                enabled,
                specialized: server.source == RecordSource::Specialized,
            },
        );
    }
    for (alias, enabled) in &record.enabled {
        match seeds.get_mut(alias) {
            Some(seed) => seed.enabled = *enabled,
            // An override of a service definition that is gone is harmless: it is dropped.
            None => {
                tracing::warn!(workspace, alias = %alias, "ignoring the enabledness of an unknown server")
            }
        }
    }
    if faults.is_empty() {
        Ok(seeds)
    } else {
        Err(faults)
    }
}
