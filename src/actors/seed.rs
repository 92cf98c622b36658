//! What a workspace is opened from: the service definitions, overlaid by the workspace's
//! durable records, and in the default workspace the embedder's in-process servers. Read
//! once at start, where durable state is admitted whole or not at all, and again each time
//! the supervisor opens or restarts a workspace.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{HostConfig, McpServerDefinition, ServerDefinition, target_variable};
use crate::store::{RecordSource, Store, WorkspaceRecord};

/// The workspace every host opens at start.
pub const DEFAULT_WORKSPACE: &str = "default";

/// Builds a workspace's definitions, as at start: the service configuration, overlaid by the
/// workspace's durable records (as read from the store; `None` when there is no store).
/// Every fault is named in the error. Pure: the caller reads the store.
pub(crate) type Reseed =
    Arc<dyn Fn(&str, Option<&WorkspaceRecord>) -> Result<Seeds, SeedError> + Send + Sync>;

/// Why a workspace's definitions cannot be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SeedError {
    /// An in-process server's alias is also a configured service server's.
    #[error(
        "in-process server \"{alias}\" is also configured as {variable}: give one of them another alias"
    )]
    InProcessConfigured { alias: String, variable: String },
    /// An in-process server's alias is not one a definition can have.
    #[error("in-process server \"{alias}\": {errors}")]
    InProcessInvalid {
        alias: String,
        errors: crate::config::ConfigErrors,
    },
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Stored records that cannot be admitted: every fault at once.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Durable(Vec<DurableFault>),
}

impl SeedError {
    /// The error as the start reports it: each fault of the durable state on a line of its
    /// own, since there may be one for every stored server.
    pub(crate) fn one_a_line(&self) -> String {
        match self {
            Self::Durable(faults) => faults
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    }
}

/// One stored record that cannot be admitted; each names the workspace, the alias and the
/// fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DurableFault {
    /// The record's definition names another alias than the one it is stored under.
    #[error(
        "workspace \"{workspace}\": the stored definition of \"{alias}\" names another alias: remove it with `plurnk-mcp --workspace {workspace} remove {alias}`"
    )]
    OtherAlias { workspace: String, alias: String },
    /// The record's definition does not read as a definition any more.
    #[error(
        "workspace \"{workspace}\": the stored definition of \"{alias}\" is not valid ({errors}): fix the environment it refers to, or remove it"
    )]
    Invalid {
        workspace: String,
        alias: String,
        errors: crate::config::ConfigErrors,
    },
    /// A specialization of a service definition that is no longer configured.
    #[error(
        "workspace \"{workspace}\": \"{alias}\" specializes a service definition that no longer exists: remove it, or configure {variable}"
    )]
    Orphaned {
        workspace: String,
        alias: String,
        variable: String,
    },
    /// An added server whose alias a service definition now has too.
    #[error(
        "workspace \"{workspace}\": the added server \"{alias}\" now collides with a service definition of the same name: remove one of them"
    )]
    Collides { workspace: String, alias: String },
}

/// Where a server's definition comes from: the one answer the entry, the store's record
/// (`RecordSource`) and the summary's `source` word each give in their own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// Declared by the service environment, as declared.
    Service,
    /// Declared by the service environment, replaced by a durable workspace definition.
    Specialized,
    /// Added in this workspace.
    Added,
    /// Carried by a client in its overlay: shown, never connected or kept.
    Client,
}

impl Provenance {
    /// How a stored record's definition stands to the service's.
    pub(crate) fn of_record(source: RecordSource) -> Self {
        match source {
            RecordSource::Added => Self::Added,
            RecordSource::Specialized => Self::Specialized,
        }
    }

    /// The service's definition, replaced or not.
    pub(crate) fn from_service(definition_differs: bool) -> Self {
        if definition_differs {
            Self::Specialized
        } else {
            Self::Service
        }
    }

    /// Whether the definition exists only because the install gate let it in (added, or
    /// customized), so it is kept in the store and closes with the gate.
    pub(crate) fn gated(self) -> bool {
        matches!(self, Self::Added | Self::Specialized)
    }

    /// How the store records it: only a workspace's own definitions are records.
    pub(crate) fn record(self) -> Option<RecordSource> {
        match self {
            Self::Added => Some(RecordSource::Added),
            Self::Specialized => Some(RecordSource::Specialized),
            Self::Service | Self::Client => None,
        }
    }

    /// The word a summary shows.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Specialized => "specialized",
            Self::Added => "workspace",
            Self::Client => "client",
        }
    }
}

/// One definition a workspace starts with.
#[derive(Clone)]
pub(crate) struct Seed {
    pub definition: Arc<ServerDefinition>,
    /// The service environment's definition of this alias, if it has one.
    pub service: Option<Arc<ServerDefinition>>,
    /// Service, specialized or added (a seed is never a client's).
    pub provenance: Provenance,
    pub enabled: bool,
}

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
    ) -> Result<Self, SeedError> {
        let mut seeds = BTreeMap::new();
        for alias in in_process {
            if config.servers().contains_key(alias) {
                return Err(SeedError::InProcessConfigured {
                    alias: alias.clone(),
                    variable: target_variable(alias),
                });
            }
            let definition = ServerDefinition::in_process(alias).map_err(|errors| {
                SeedError::InProcessInvalid {
                    alias: alias.clone(),
                    errors,
                }
            })?;
            seeds.insert(
                alias.clone(),
                Seed {
                    definition: Arc::new(definition),
                    service: None,
                    provenance: Provenance::Service,
                    enabled: true,
                },
            );
        }
        Ok(Self {
            config,
            store,
            in_process: seeds,
        })
    }

    /// The workspaces to open at start, each with its definitions and the durable version of
    /// each alias: every workspace the store knows, and the default one (first, when the
    /// store does not know it). Every fault of the durable state is reported at once, one a
    /// line.
    pub(crate) async fn at_start(&self) -> Result<Vec<Opening>, SeedError> {
        let mut seeds = BTreeMap::new();
        let mut versions = BTreeMap::new();
        if let Some(store) = &self.store {
            let records = store.load().await?;
            let mut faults = Vec::new();
            for (name, record) in records {
                match durable_seeds(&self.config, &name, &record) {
                    Ok(definitions) => {
                        versions.insert(name.clone(), record.versions);
                        seeds.insert(name, definitions);
                    }
                    Err(mut more) => faults.append(&mut more),
                }
            }
            if !faults.is_empty() {
                return Err(SeedError::Durable(faults));
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
                let versions = versions.remove(&name).unwrap_or_default();
                Opening {
                    name,
                    definitions,
                    versions,
                }
            })
            .collect())
    }

    /// The definitions of workspace `name` from its durable state `record` (`None`: no
    /// store).
    fn seeds(
        &self,
        name: &str,
        record: Option<&WorkspaceRecord>,
    ) -> Result<BTreeMap<String, Seed>, SeedError> {
        let mut seeds = match record {
            Some(record) => {
                durable_seeds(&self.config, name, record).map_err(SeedError::Durable)?
            }
            None => service_definitions(&self.config),
        };
        if name == DEFAULT_WORKSPACE {
            seeds.extend(self.in_process.clone());
        }
        Ok(seeds)
    }

    /// What the workspaces build their definitions with, from the durable state they read.
    pub(crate) fn reseed(self) -> Reseed {
        Arc::new(move |name: &str, record: Option<&WorkspaceRecord>| self.seeds(name, record))
    }
}

/// A workspace to open at start.
pub(crate) struct Opening {
    pub name: String,
    pub definitions: Seeds,
    pub versions: BTreeMap<String, crate::store::Version>,
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
                    provenance: Provenance::Service,
                    enabled: config.enabled().contains(alias),
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
) -> Result<BTreeMap<String, Seed>, Vec<DurableFault>> {
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
                faults.push(DurableFault::OtherAlias {
                    workspace: workspace.to_owned(),
                    alias: alias.clone(),
                });
                continue;
            }
            Err(errors) => {
                faults.push(DurableFault::Invalid {
                    workspace: workspace.to_owned(),
                    alias: alias.clone(),
                    errors,
                });
                continue;
            }
        };
        match (server.source, seeds.get(alias)) {
            (RecordSource::Specialized, None) => {
                faults.push(DurableFault::Orphaned {
                    workspace: workspace.to_owned(),
                    alias: alias.clone(),
                    variable: target_variable(alias),
                });
                continue;
            }
            (RecordSource::Added, Some(_)) => {
                faults.push(DurableFault::Collides {
                    workspace: workspace.to_owned(),
                    alias: alias.clone(),
                });
                continue;
            }
            _ => {}
        }
        if server.source == RecordSource::Specialized && !config.allows_runtime_servers() {
            // Declared servers are always honoured: the customization exists only by the
            // install gate, so with the gate closed it rests in the store (untouched, back
            // when the gate opens) and the server runs as the operator declared it.
            continue;
        }
        let enabled = seeds.get(alias).is_some_and(|seed| seed.enabled);
        seeds.insert(
            alias.clone(),
            Seed {
                definition: Arc::new(definition),
                service: seeds.get(alias).and_then(|seed| seed.service.clone()),
                provenance: Provenance::of_record(server.source),
                enabled,
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
