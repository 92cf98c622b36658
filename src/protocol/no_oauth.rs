//! The auth wing's face in a build without the `oauth` feature: the same names the session,
//! the connection and the actors call, answering that no server is authorized by OAuth. The
//! configuration refuses every OAuth authorization in such a build (naming the feature), so
//! a definition reaches this face with a bearer or with nothing; a server that answers 401
//! fails with a Problem that says what a build without OAuth can do.

use std::sync::{Arc, Mutex};

use crate::config::{PreparedAuthorization, ServerDefinition};
use crate::model::{Customize, PendingAuthorization, Problem, ServerSnapshot};

/// An OAuth-authorized HTTP client: none can exist in this build.
pub(crate) enum AuthorizedClient {}

/// The last challenge a connection's server refused a token with: only an OAuth connection
/// records one, so in this build it stays empty.
pub(crate) type ChallengeSlot = Arc<Mutex<Option<String>>>;

/// The authorizations of every workspace: none in this build.
#[derive(Debug, Default)]
pub(crate) struct Vault;

impl Vault {
    /// Where the server's pending authorization is: never, in this build.
    pub(crate) fn pending(&self, _workspace: &str, _alias: &str) -> Option<PendingAuthorization> {
        None
    }

    /// A disable or a removal forgets the server's authorizations: it has none.
    pub(crate) fn clear(&self, _workspace: &str, _alias: &str) {}
}

/// The action an authorization may be asked by (see the `oauth` build's `Replay`).
#[allow(dead_code)] // the OAuth build replays it
pub(crate) enum Replay {
    /// Enable the alias.
    Enable(Box<Customize>),
    /// Add the definition.
    Add(Box<ServerDefinition>),
}

/// What an action carries until its answer; no answer waits for an authorization here.
pub(crate) struct Asked;

impl Asked {
    pub(crate) fn new(_vault: &Arc<Vault>, _replay: Replay) -> Self {
        Self
    }

    /// The action answered: nothing to remember.
    pub(crate) fn answered(self, _workspace: &str, _alias: &str, _snapshot: &ServerSnapshot) {}
}

/// One server being opened, as its authorization sees it: the fields the `oauth` build's
/// `Server` has, so the session builds it the same way in both.
#[allow(dead_code)] // the OAuth build reads every field
pub(crate) struct Server<'a> {
    pub vault: &'a Vault,
    pub workspace: &'a str,
    pub alias: &'a str,
    /// `server "<alias>" (<transport>)`, the start of every Problem about it.
    pub label: &'a str,
    pub url: &'a str,
    pub definition: &'a ServerDefinition,
    pub authorization: Option<&'a PreparedAuthorization>,
}

/// What a connection starts with: no OAuth client.
pub(crate) struct Credentials {
    pub client: Option<AuthorizedClient>,
    pub grant: bool,
}

/// Why a server could not be opened for its authorization.
pub(crate) enum Unauthorized {
    /// A person has to authorize it first: never, in this build.
    #[allow(dead_code)] // the session reads what the OAuth build makes
    Pending {
        problem: Problem,
        pending: Option<PendingAuthorization>,
    },
    /// It could not be authorized: the Problem says why.
    Failed(Problem),
}

impl Server<'_> {
    /// The credentials a connection starts with: a bearer rides in the headers, so none
    /// here; an OAuth authorization cannot reach this build (the configuration refuses it).
    pub(crate) async fn authorize(&self) -> Result<Credentials, Problem> {
        match self.authorization {
            None => Ok(Credentials {
                client: None,
                grant: false,
            }),
            Some(_) => Err(Problem::server_unavailable(format!(
                "{} asks for OAuth, which needs the `oauth` feature of plurnk-mcp",
                self.label
            ))),
        }
    }

    /// No refusal is answered by asking a person.
    pub(crate) fn interactive(&self) -> bool {
        false
    }

    /// The server refused the connection: it needs an authorization this build can give
    /// only as a bearer.
    pub(crate) async fn refused(&self, _challenge: String) -> Unauthorized {
        self.unauthorized()
    }

    /// As [`Server::refused`].
    pub(crate) async fn reauthorize(&self, _challenge: String) -> Unauthorized {
        self.unauthorized()
    }

    fn unauthorized(&self) -> Unauthorized {
        Unauthorized::Failed(Problem::unauthorized(format!(
            "{} could not be connected: authorization required (HTTP 401): give its \
             definition a bearer `authorization`, or check the one it has (OAuth needs the \
             `oauth` feature of plurnk-mcp)",
            self.label
        )))
    }
}
