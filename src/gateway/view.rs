//! What the gateway serves at one snapshot version: the names it serves tools and prompts
//! by, the merged lists already in their wire shape, and the routes back from a served name
//! or a resource URI to the one server that answers for it.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use super::uri_template::UriTemplate;
use super::{SEPARATOR, SERVER_META};
use crate::model::{ServerState, WorkspaceSnapshot};

/// How the gateway names what it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    /// Every ready server, names as `<server>_<name>`.
    Prefixed,
    /// This one server only, names as the server gave them.
    Unprefixed(String),
}

/// The served name of `name` of server `alias`.
pub fn served_name(naming: &Naming, alias: &str, name: &str) -> String {
    match naming {
        Naming::Prefixed => format!("{alias}{SEPARATOR}{name}"),
        Naming::Unprefixed(_) => name.to_owned(),
    }
}

/// The server and own name a served name stands for, if it can stand for one.
pub fn route_name<'a>(naming: &'a Naming, served: &'a str) -> Option<(&'a str, &'a str)> {
    match naming {
        Naming::Prefixed => served
            .split_once(SEPARATOR)
            .filter(|(alias, name)| !alias.is_empty() && !name.is_empty()),
        Naming::Unprefixed(alias) => Some((alias.as_str(), served)),
    }
}

/// What the gateway serves at one snapshot version: the merged lists, each already in the
/// wire shape, and the routes back.
#[derive(Debug, Default)]
pub(super) struct View {
    pub(super) version: u64,
    pub(super) tools: Vec<Value>,
    pub(super) prompts: Vec<Value>,
    pub(super) resources: Vec<Value>,
    pub(super) templates: Vec<Value>,
    /// Listed resource URI → every alias that lists it.
    pub(super) resource_owners: BTreeMap<String, Vec<String>>,
    /// (the parsed template, its URI template, alias).
    pub(super) template_owner: Vec<(Option<UriTemplate>, String, String)>,
}

/// Why no one server can answer for a URI.
#[derive(Debug, PartialEq)]
pub(super) enum Unroutable {
    /// No server lists it, no template matches it, and several servers offer resources.
    Unclaimed,
    /// Several servers claim it, each named: none is chosen for the client.
    Ambiguous(Vec<String>),
    /// The request chose a server this gateway does not serve resources of.
    NotServed(String),
}

impl View {
    pub(super) fn of(snapshot: &WorkspaceSnapshot, naming: &Naming) -> Self {
        let mut view = View {
            version: snapshot.version,
            ..View::default()
        };
        for server in snapshot.servers.values() {
            if server.state != ServerState::Ready {
                continue;
            }
            if let Naming::Unprefixed(only) = naming
                && server.alias != *only
            {
                continue;
            }
            let alias = server.alias.as_str();
            for tool in server.tools.iter() {
                let mut served = json!({
                    "name": served_name(naming, alias, &tool.name),
                    "inputSchema": tool.input_schema,
                });
                if let Some(title) = &tool.title {
                    served["title"] = json!(title);
                }
                if let Some(description) = &tool.description {
                    served["description"] = json!(description);
                }
                if let Some(schema) = &tool.output_schema {
                    served["outputSchema"] = schema.clone();
                }
                if let Some(annotations) = &tool.annotations {
                    served["annotations"] = annotations.clone();
                }
                view.tools.push(served);
            }
            for prompt in server.catalog.prompts.iter() {
                let mut served = prompt.definition.clone();
                served["name"] = json!(served_name(naming, alias, &prompt.name));
                view.prompts.push(served);
            }
            for resource in server.catalog.resources.iter() {
                view.resources
                    .push(with_server(&resource.definition, alias));
                let owners = view
                    .resource_owners
                    .entry(resource.uri.clone())
                    .or_default();
                if !owners.iter().any(|owner| owner == alias) {
                    owners.push(alias.to_owned());
                }
            }
            for template in server.catalog.templates.iter() {
                view.templates
                    .push(with_server(&template.definition, alias));
                view.template_owner.push((
                    UriTemplate::parse(&template.uri_template),
                    template.uri_template.clone(),
                    alias.to_owned(),
                ));
            }
        }
        view
    }

    /// What a client is told changed between two views.
    pub(super) fn changes(&self, next: &View) -> [bool; 3] {
        [
            self.tools != next.tools,
            self.prompts != next.prompts,
            self.resources != next.resources || self.templates != next.templates,
        ]
    }

    /// The server a URI belongs to, so that no server answers for another's resources
    /// without the client knowing: the server the request chose (`_meta` [`SERVER_META`]),
    /// else the one server that lists the URI, else the one server whose template can
    /// expand to it (RFC 6570, not a prefix), else the only server offering resources. A
    /// URI that several servers list, or that no server lists and several servers'
    /// templates match, is ambiguous and refused, naming them: the first in some order
    /// would be a guess a hostile server could win.
    pub(super) fn resource_route(
        &self,
        uri: &str,
        chosen: Option<&str>,
    ) -> Result<&str, Unroutable> {
        let offering = || {
            self.resource_owners
                .values()
                .flatten()
                .chain(self.template_owner.iter().map(|(_, _, alias)| alias))
        };
        if let Some(chosen) = chosen {
            return offering()
                .find(|alias| *alias == chosen)
                .map(String::as_str)
                .ok_or_else(|| Unroutable::NotServed(chosen.to_owned()));
        }
        fn one(claimants: Vec<&str>) -> Result<&str, Unroutable> {
            match claimants.as_slice() {
                [only] => Ok(*only),
                _ => Err(Unroutable::Ambiguous(
                    claimants.iter().map(|alias| (*alias).to_owned()).collect(),
                )),
            }
        }
        if let Some(owners) = self.resource_owners.get(uri) {
            return one(owners.iter().map(String::as_str).collect());
        }
        let mut matching: Vec<&str> = self
            .template_owner
            .iter()
            .filter(|(template, _, _)| template.as_ref().is_some_and(|t| t.matches(uri)))
            .map(|(_, _, alias)| alias.as_str())
            .collect();
        matching.sort_unstable();
        matching.dedup();
        if !matching.is_empty() {
            return one(matching);
        }
        let mut servers = offering();
        let first = servers.next().ok_or(Unroutable::Unclaimed)?;
        if servers.all(|alias| alias == first) {
            Ok(first)
        } else {
            Err(Unroutable::Unclaimed)
        }
    }

    pub(super) fn template_route(&self, uri_template: &str) -> Option<&str> {
        self.template_owner
            .iter()
            .find(|(_, template, _)| template == uri_template)
            .map(|(_, _, alias)| alias.as_str())
    }
}

impl Unroutable {
    /// The client's error: which URI, and what would route it.
    pub(super) fn into_error(self, uri: &str) -> McpError {
        // The URI is the client's text (or a server's): quoted cut, never whole.
        let shown = crate::config::shorten(uri);
        let message = match self {
            Self::Unclaimed => format!(
                "no server of this gateway offers resource \"{shown}\": resources/list and \
                 resources/templates/list name what it serves"
            ),
            Self::Ambiguous(servers) => format!(
                "resource \"{shown}\" is claimed by servers {}: name the one to read in the \
                 request's _meta \"{SERVER_META}\" (each listed resource carries its server there)",
                servers
                    .iter()
                    .map(|alias| format!("\"{alias}\""))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            Self::NotServed(chosen) => format!(
                "the request's _meta \"{SERVER_META}\" names \"{}\", which serves no resources \
                 here: name a server from resources/list",
                crate::config::shorten(&chosen)
            ),
        };
        McpError::resource_not_found(message, Some(json!({ "uri": shown })))
    }
}

/// `value` (an object a server gave) with `_meta` [`SERVER_META`] naming `alias`.
pub(super) fn with_server(value: &Value, alias: &str) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(SERVER_META.to_owned(), Value::String(alias.to_owned()));
        }
    }
    value
}
