//! The workspace's live attachments and the routes calls take to them, changed together: a
//! route is added, replaced or removed exactly when its attachment is, so a commit publishes
//! the routes as they stand instead of rebuilding them by a walk over every attachment.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::ActorRef;

use super::Route;
use super::successor::Successor;
use crate::actors::attachment::AttachmentMsg;
use crate::protocol::Session;

/// The routes of a workspace, by alias: a persistent map, so publishing them with a commit
/// shares them, and changing one copies only its path.
pub(crate) type Routes = imbl::OrdMap<Arc<str>, Route>;

/// One server's live attachment.
pub(super) struct Attached {
    /// Who owns the connection; with `session`, what the server's route is. Neither is
    /// changed in place: a new attachment is inserted whole, which moves its route with it.
    actor: ActorRef<AttachmentMsg>,
    session: Arc<Session>,
    pub(super) instance: u64,
    pub(super) draining: bool,
    /// The same server under a changed definition, prepared beside this one.
    pub(super) successor: Option<Successor>,
}

impl Attached {
    pub(super) fn new(
        actor: ActorRef<AttachmentMsg>,
        session: Arc<Session>,
        instance: u64,
    ) -> Self {
        Self {
            actor,
            session,
            instance,
            draining: false,
            successor: None,
        }
    }

    pub(super) fn actor(&self) -> &ActorRef<AttachmentMsg> {
        &self.actor
    }

    pub(super) fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

/// Every live attachment by alias, and the routes to them.
#[derive(Default)]
pub(super) struct Attachments {
    by_alias: HashMap<String, Attached>,
    routes: Routes,
}

impl Attachments {
    /// `attached` becomes `alias`'s attachment, and its route the server's.
    pub(super) fn insert(&mut self, alias: &str, attached: Attached) {
        let route = Route {
            session: attached.session.clone(),
            actor: attached.actor.clone(),
        };
        match self.routes.get_mut(alias) {
            Some(slot) => *slot = route,
            None => {
                self.routes.insert(Arc::from(alias), route);
            }
        }
        self.by_alias.insert(alias.to_owned(), attached);
    }

    /// `alias` has no attachment any more, and no route.
    pub(super) fn remove(&mut self, alias: &str) -> Option<Attached> {
        self.routes.remove(alias);
        self.by_alias.remove(alias)
    }

    pub(super) fn get(&self, alias: &str) -> Option<&Attached> {
        self.by_alias.get(alias)
    }

    /// The attachment, to change what is not its route (`Attached::new` and
    /// [`insert`](Self::insert) are how an actor or session changes).
    pub(super) fn get_mut(&mut self, alias: &str) -> Option<&mut Attached> {
        self.by_alias.get_mut(alias)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Attached)> {
        self.by_alias.iter()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut Attached)> {
        self.by_alias.iter_mut()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Attached> {
        self.by_alias.values_mut()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_alias.is_empty()
    }

    /// The routes as they stand: what a commit publishes (a clone shares the map).
    pub(super) fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Whether every route is its attachment's, and only those: a walk over all of them,
    /// for the commit's debug assertion.
    pub(super) fn routes_agree(&self) -> bool {
        self.routes.len() == self.by_alias.len()
            && self.by_alias.iter().all(|(alias, attached)| {
                self.routes.get(alias.as_str()).is_some_and(|route| {
                    Arc::ptr_eq(&route.session, &attached.session)
                        && route.actor.get_id() == attached.actor.get_id()
                })
            })
    }
}
