//! The published views: a server's state and snapshot (what it negotiated, what the
//! operator authored, scrubbed of secrets), the workspace's immutable snapshot with its
//! servers (a persistent map, shared from one commit to the next), and the route rule
//! `admit` with its Refusal.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::config::TransportKind;

use super::authorization::PendingAuthorization;
use super::catalog::{Catalog, PromptInfo, ToolInfo};
use super::connecting::{Connecting, PhaseTimes, Recovered};
use super::problem::Problem;

/// Where a server's attachment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ServerState {
    /// Configured but not enabled in this workspace: visible, contributes nothing.
    Disabled,
    /// Enabled, but left unconnected by a host told to connect only some servers (a one-shot
    /// command connects only the server it names; `HostOptions::with_only`): it contributes
    /// nothing until it is enabled again, which connects it.
    Idle,
    /// The first connection attempt is under way.
    Connecting,
    /// Connected, discovered and listed: its tools are published.
    Ready,
    /// Could not connect, or lost its connection; it retries by itself with backoff.
    Unavailable,
    /// Crashed too often in a short window; it stays down until enabled again.
    CrashLoop,
    /// Needs OAuth authorization by a person: its snapshot's `authorization` has the URL.
    /// It does not retry by itself; enabling it starts a fresh authorization.
    AuthorizationRequired,
}

impl ServerState {
    /// Every state, in the order [`Servers::count`] keeps them.
    pub(crate) const ALL: [ServerState; 7] = [
        Self::Disabled,
        Self::Idle,
        Self::Connecting,
        Self::Ready,
        Self::Unavailable,
        Self::CrashLoop,
        Self::AuthorizationRequired,
    ];

    /// Where the state is in [`ALL`](Self::ALL), and so in a count per state.
    const fn index(self) -> usize {
        match self {
            Self::Disabled => 0,
            Self::Idle => 1,
            Self::Connecting => 2,
            Self::Ready => 3,
            Self::Unavailable => 4,
            Self::CrashLoop => 5,
            Self::AuthorizationRequired => 6,
        }
    }

    /// The state's name as it is shown and serialized: `disabled`, `idle`, `connecting`,
    /// `ready`, `unavailable`, `crash-loop`, `authorization-required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Idle => "idle",
            Self::Connecting => "connecting",
            Self::Ready => "ready",
            Self::Unavailable => "unavailable",
            Self::CrashLoop => "crash-loop",
            Self::AuthorizationRequired => "authorization-required",
        }
    }
}

impl ServerState {
    /// Why a server in this state takes no call, when its snapshot carries no Problem to say
    /// so: the one wording the handle, EXEC ops and the command line give.
    pub fn unready_detail(self) -> String {
        match self {
            Self::Connecting => "it is still connecting".to_owned(),
            Self::Idle => "this host was started to connect other servers only: enable it to \
                           connect it"
                .to_owned(),
            Self::Disabled => "enable it first (a workspace's `enable`, or `PLURNK_MCP_ENABLED` in the environment)".to_owned(),
            state => format!("it is {state}"),
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What negotiation told us about a server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Negotiated {
    /// The negotiated protocol revision, such as `2026-07-28`.
    pub revision: String,
    /// `true` when the server answered `server/discover` (a modern peer).
    pub modern: bool,
    /// The server's name, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The server's version, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The server's display title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's one-line description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Usage instructions the server sent, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The server's capabilities, as JSON.
    pub capabilities: Value,
    /// What a modern server's discover answer said beside the above; `None` for a legacy
    /// server (negotiated through `initialize`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
}

/// The hints of a `server/discover` answer (§mcp-core-matrix Discovery): which revisions the
/// server speaks, and how long its answer stays fresh and for whom. The host asks again once
/// `ttl_ms` passes (with the catalog's own freshness), taking the new identity, capabilities
/// and instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Discovery {
    /// Every revision the server said it implements.
    pub supported_versions: Vec<String>,
    /// How long the answer stays fresh, in milliseconds (0: not to be reused).
    pub ttl_ms: u64,
    /// `public` or `private`: whether the answer may be shared across authorizations.
    pub cache_scope: String,
}

/// One server in a workspace snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSnapshot {
    /// The configured alias.
    pub alias: String,
    /// How it is reached.
    pub transport: TransportKind,
    /// Its state.
    pub state: ServerState,
    /// Why it is not ready, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// While `connecting`: the attempt's phase and when it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connecting: Option<Connecting>,
    /// While `ready`: how long each phase of its connection took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseTimes>,
    /// The last Problem it recovered from (at start-up, after a crash), and when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Arc<Recovered>>,
    /// What negotiation established (present while ready); shared, not copied, by every
    /// snapshot and the connection it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<Arc<Negotiated>>,
    /// The enabled tools (empty unless ready).
    pub tools: Arc<[ToolInfo]>,
    /// Its resources, resource templates and prompts (empty unless ready).
    pub catalog: Catalog,
    /// Counts connections of this attachment; a reconnect raises it.
    pub generation: u64,
    /// What the operator wrote for the model about this server and its tools.
    #[serde(skip_serializing_if = "Authored::is_empty")]
    pub authored: Arc<Authored>,
    /// While `authorization-required`: where a person authorizes it (the action's `202
    /// { authorization: { url } }`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<PendingAuthorization>,
    /// What its sandbox holds (a ready stdio server): held, partly or off, part by part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Arc<super::SandboxReport>>,
}

/// What the operator authored for a server's orientation: the `PLURNK_MCP_<server>_SUMMARY`
/// and `PLURNK_MCP_<server>_<tool>_SUMMARY` companions (with `${NAME}` expanded), and
/// whether `PLURNK_MCP_EXPANDED` names it. [`crate::projection`] derives every one-liner from
/// these first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Authored {
    /// The server's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Tool summaries, keyed by [`crate::config::tool_summary_key`] of the tool name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
    /// Its whole tool tree expands into the survey.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expanded: bool,
}

impl Authored {
    /// Nothing authored.
    pub fn is_empty(&self) -> bool {
        self.summary.is_none() && self.tools.is_empty() && !self.expanded
    }

    /// The authored summaries of `definition`, `${NAME}` expanded against `env`. A summary
    /// whose reference cannot be expanded is left out (the next source of its one-liner
    /// applies) and logged with the variable's name.
    pub(crate) fn of(
        definition: &crate::config::ServerDefinition,
        env: &crate::config::Environment,
        expanded: bool,
    ) -> Self {
        let alias = definition.alias();
        let expand = |what: &str, text: &str| match env.expand_setting(what, text) {
            Ok(text) if !text.trim().is_empty() => Some(text),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(server = alias, %error, "a summary is left out");
                None
            }
        };
        Self {
            summary: definition
                .summary()
                .and_then(|text| expand("the server summary", text)),
            tools: definition
                .tool_summaries()
                .iter()
                .filter_map(|(tool, text)| Some((tool.clone(), expand("a tool summary", text)?)))
                .collect(),
            expanded,
        }
    }
}

impl ServerSnapshot {
    /// Scrubs every registered secret from what the snapshot shows — its Problem, what the
    /// server said about itself, its tools, resources and prompts — so a server that echoes
    /// a credential it was given does not publish it. A no-op while no secret is registered.
    pub(crate) fn scrub(&mut self) {
        use crate::redact::{scrub_in_place, scrub_json};
        if !crate::redact::active() {
            return;
        }
        self.problem = self.problem.take().map(Problem::scrubbed);
        if let Some(recovered) = &mut self.recovered
            && crate::redact::holds_secret(&recovered.problem.detail)
        {
            let recovered = Arc::make_mut(recovered);
            recovered.problem = recovered.problem.clone().scrubbed();
        }
        // Copied only when something in it holds a secret: otherwise it stays shared.
        if let Some(negotiated) = &mut self.negotiated
            && serde_json::to_string(&**negotiated)
                .is_ok_and(|json| crate::redact::holds_secret(&json))
        {
            let negotiated = Arc::make_mut(negotiated);
            scrub_in_place(&mut negotiated.revision);
            for text in [
                &mut negotiated.name,
                &mut negotiated.version,
                &mut negotiated.title,
                &mut negotiated.description,
                &mut negotiated.instructions,
            ]
            .into_iter()
            .flatten()
            {
                scrub_in_place(text);
            }
            scrub_json(&mut negotiated.capabilities);
        }
        // A summary that names a credential (`${TOKEN}` in a `_SUMMARY`) shows its name only.
        if serde_json::to_string(&*self.authored)
            .is_ok_and(|json| crate::redact::holds_secret(&json))
        {
            let authored = Arc::make_mut(&mut self.authored);
            authored.summary.iter_mut().for_each(scrub_in_place);
            authored.tools.values_mut().for_each(scrub_in_place);
        }
        // Lists are rebuilt only when something in them holds a secret.
        rebuild_if_dirty(&mut self.tools, |tool| {
            scrub_in_place(&mut tool.name);
            tool.title.iter_mut().for_each(scrub_in_place);
            tool.description.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut tool.input_schema);
            tool.output_schema.iter_mut().for_each(scrub_json);
            tool.annotations.iter_mut().for_each(scrub_json);
        });
        rebuild_if_dirty(&mut self.catalog.resources, |resource| {
            scrub_in_place(&mut resource.uri);
            scrub_in_place(&mut resource.name);
            resource.description.iter_mut().for_each(scrub_in_place);
            resource.mime_type.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut resource.definition);
        });
        rebuild_if_dirty(&mut self.catalog.templates, |template| {
            scrub_in_place(&mut template.uri_template);
            scrub_in_place(&mut template.name);
            template.description.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut template.definition);
        });
        rebuild_if_dirty(&mut self.catalog.prompts, |prompt| {
            scrub_in_place(&mut prompt.name);
            prompt.description.iter_mut().for_each(scrub_in_place);
            for argument in &mut prompt.arguments {
                scrub_in_place(&mut argument.name);
                argument.description.iter_mut().for_each(scrub_in_place);
            }
            scrub_json(&mut prompt.definition);
        });
    }

    /// Looks up an enabled tool by its exact name.
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Looks up a prompt by its exact name.
    pub fn prompt(&self, name: &str) -> Option<&PromptInfo> {
        self.catalog
            .prompts
            .iter()
            .find(|prompt| prompt.name == name)
    }
}

/// One workspace's complete, immutable view: every configured server and what it publishes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkspaceSnapshot {
    /// The workspace name.
    pub workspace: String,
    /// Raised by one on every commit.
    pub version: u64,
    /// Every configured server, by alias.
    pub servers: Servers,
}

impl WorkspaceSnapshot {
    /// Looks up a server by alias.
    pub fn server(&self, alias: &str) -> Option<&ServerSnapshot> {
        self.servers.get(alias).map(|server| &**server)
    }

    /// Whether every server has left `connecting` (a count, not a walk).
    pub fn is_settled(&self) -> bool {
        self.servers.count(ServerState::Connecting) == 0
    }

    /// The route rule, the one place it is written: the server `alias` is in this snapshot,
    /// enabled and ready, and, when a call names `tool`, lists that tool among its enabled
    /// tools. Every way in (the handle, EXEC ops, the command line, and through the handle
    /// the gateway) asks here and words the [`Refusal`] in its own error.
    ///
    /// A snapshot may be stale by the time a request reaches the server, so the server's
    /// live session checks again what it offers now: its tools, prompts and capabilities.
    pub fn admit<'a>(
        &'a self,
        alias: &str,
        tool: Option<&'a str>,
    ) -> Result<&'a ServerSnapshot, Refusal<'a>> {
        let server = self.server(alias).ok_or(Refusal::UnknownServer)?;
        let problem = server.problem.as_ref();
        match server.state {
            ServerState::Ready => {}
            ServerState::Disabled => return Err(Refusal::Disabled { problem }),
            state => return Err(Refusal::NotReady { state, problem }),
        }
        match tool {
            Some(tool) if server.tool(tool).is_none() => Err(Refusal::UnknownTool { server, tool }),
            _ => Ok(server),
        }
    }
}

/// Every server of a [`WorkspaceSnapshot`], by alias, in alias order, with how many are in
/// each state.
///
/// A persistent map: a clone shares every entry and every node of the tree with the
/// original, and changing one server copies only the path to it (O(log N)), so each commit
/// of a workspace of many servers costs what its change costs, not what the workspace holds,
/// and readers holding an older snapshot keep it whole. The counts are kept as servers come,
/// go and change state, so [`count`](Self::count) and [`WorkspaceSnapshot::is_settled`] read
/// a number instead of walking the servers.
#[derive(Clone, Default)]
pub struct Servers {
    map: imbl::OrdMap<Arc<str>, Arc<ServerSnapshot>>,
    /// How many servers are in each state, indexed by [`ServerState::index`].
    counts: [usize; ServerState::ALL.len()],
}

impl Servers {
    /// No server.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many servers there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The server `alias`, shared with every snapshot that holds it unchanged.
    pub fn get(&self, alias: &str) -> Option<&Arc<ServerSnapshot>> {
        self.map.get(alias)
    }

    /// The server `alias` with its key: the alias as the snapshot holds it, shared with every
    /// snapshot, so a table keyed by server takes no copy of a name a caller made up.
    pub fn get_key_value(&self, alias: &str) -> Option<(&Arc<str>, &Arc<ServerSnapshot>)> {
        self.map.get_key_value(alias)
    }

    /// Whether `alias` is one of the servers.
    pub fn contains(&self, alias: &str) -> bool {
        self.map.contains_key(alias)
    }

    /// Every server, in alias order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Arc<ServerSnapshot>> + '_ {
        self.map.values()
    }

    /// Every alias, in order.
    pub fn aliases(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.map.keys().map(|alias| &**alias)
    }

    /// Every server with its alias, in alias order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &Arc<ServerSnapshot>)> + '_ {
        self.map.iter().map(|(alias, server)| (&**alias, server))
    }

    /// How many servers are in `state`, without walking them.
    pub fn count(&self, state: ServerState) -> usize {
        self.counts[state.index()]
    }

    /// Puts `server` under its alias, replacing (and returning) the one there. The alias
    /// already present keeps its key, so a state change allocates only the changed path.
    pub fn insert(&mut self, server: Arc<ServerSnapshot>) -> Option<Arc<ServerSnapshot>> {
        self.counts[server.state.index()] += 1;
        let previous = match self.map.get_mut(server.alias.as_str()) {
            Some(slot) => Some(std::mem::replace(slot, server)),
            None => {
                self.map.insert(Arc::from(server.alias.as_str()), server);
                None
            }
        };
        if let Some(previous) = &previous {
            self.counts[previous.state.index()] -= 1;
        }
        previous
    }

    /// Takes `alias` out, returning it.
    pub fn remove(&mut self, alias: &str) -> Option<Arc<ServerSnapshot>> {
        let removed = self.map.remove(alias)?;
        self.counts[removed.state.index()] -= 1;
        Some(removed)
    }
}

/// Every server with its key (the alias as the snapshot holds it, shared), in alias order.
impl<'a> IntoIterator for &'a Servers {
    type Item = (&'a Arc<str>, &'a Arc<ServerSnapshot>);
    type IntoIter =
        imbl::ordmap::Iter<'a, Arc<str>, Arc<ServerSnapshot>, imbl::shared_ptr::DefaultSharedPtr>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl PartialEq for Servers {
    fn eq(&self, other: &Self) -> bool {
        // The counts follow from the servers.
        self.map == other.map
    }
}

impl fmt::Debug for Servers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Serialized as it always was: an object of servers by alias, in alias order.
impl Serialize for Servers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl FromIterator<Arc<ServerSnapshot>> for Servers {
    fn from_iter<I: IntoIterator<Item = Arc<ServerSnapshot>>>(servers: I) -> Self {
        let mut all = Self::new();
        for server in servers {
            all.insert(server);
        }
        all
    }
}

impl FromIterator<ServerSnapshot> for Servers {
    fn from_iter<I: IntoIterator<Item = ServerSnapshot>>(servers: I) -> Self {
        servers.into_iter().map(Arc::new).collect()
    }
}

/// Why [`WorkspaceSnapshot::admit`] routes nothing to a server.
///
/// Exhaustive on purpose: each caller maps every refusal to an error of its own, so a new
/// refusal must make each of them decide how to word it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal<'a> {
    /// The snapshot has no server by that alias.
    UnknownServer,
    /// The server is configured but not enabled in this workspace.
    Disabled {
        /// Why, when the snapshot says.
        problem: Option<&'a Problem>,
    },
    /// The server is enabled but not ready: connecting, unavailable, crash-looping or
    /// waiting for an authorization.
    NotReady {
        /// The state it is in.
        state: ServerState,
        /// Why, when the snapshot says.
        problem: Option<&'a Problem>,
    },
    /// The server is ready, but the tool named is not one of its enabled tools.
    UnknownTool {
        /// The server, for callers that suggest a tool it does list.
        server: &'a ServerSnapshot,
        /// The tool named.
        tool: &'a str,
    },
}

/// Rebuilds `items` with `scrub` applied to each, when any of them, shown as its JSON (how an
/// embedder would show it), holds a secret; leaves the shared list alone otherwise.
fn rebuild_if_dirty<T: Clone + Serialize>(items: &mut Arc<[T]>, scrub: impl Fn(&mut T)) {
    let dirty = items.iter().any(|item| {
        serde_json::to_string(item).is_ok_and(|json| crate::redact::holds_secret(&json))
    });
    if dirty {
        *items = items
            .iter()
            .cloned()
            .map(|mut item| {
                scrub(&mut item);
                item
            })
            .collect();
    }
}
