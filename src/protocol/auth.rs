//! OAuth for Streamable HTTP servers, over rmcp's `auth` feature: the interactive
//! authorization-code flow and the device grant (human principal), the client-credentials
//! grant (application principal), and the JWT-bearer grant of a workload's identity token.
//!
//! rmcp does the protocol: protected-resource and authorization-server discovery (from the
//! `WWW-Authenticate` challenge, else the well-known probes), PKCE S256, resource
//! indicators, RFC 9207 issuer validation, client identity (pre-registered, then a Client ID
//! Metadata Document when advertised, then Dynamic Client Registration when
//! `registration_endpoint` is advertised), scope selection, and the silent refresh of a
//! rejected token against the issuer it was bound to. This wing keeps what rmcp leaves to
//! its host, and this file is its face, what the rest of the crate calls:
//!
//! - [`Server`]: the session opening a server asks it for the credentials a connection
//!   starts with ([`Server::authorize`]), and hands it each refusal
//!   ([`Server::refused`], [`Server::reauthorize`]), which ends in a pending authorization
//!   ([`Unauthorized::Pending`]) or a failure.
//! - [`Completion`], [`DeviceRequest`] and [`poll_device`]: the handle finishes a pending
//!   authorization (a callback URL, a device poll) and gets back the [`Replay`] to perform.
//! - [`Asked`]: what an action that may ask for authorization carries until its answer, so
//!   a completion replays that action.
//! - [`Vault::pending`]: where a server's waiting authorization is given (its snapshot
//!   shows it); [`Vault::clear`]: a disable or a removal forgets everything.
//!
//! Every failure becomes text of our own: an authorization server's error text (attacker
//! owned) is never echoed (only an OAuth error code, bounded to its grammar), and no
//! credential is ever in a message.
//!
//! # Layout
//!
//! One concept a file, each importing only those above it in this list:
//! `error` (why a step failed: [`AuthError`](error::AuthError), in words of our own) →
//! `dpop` (RFC 9449 proofs and the OAuth HTTP client) → `request` (a token request and how
//! an answer is read) → `challenge` (a refusal's challenge, the presented token, the
//! workload [`Regrant`](challenge::Regrant)) → `vault` (the state) → the flows: `code`
//! (interactive, PKCE), `grant` (client credentials, workload identity), `device`.

mod challenge;
mod code;
mod device;
mod dpop;
mod error;
mod grant;
mod request;
mod vault;

use std::sync::Arc;

pub(crate) use challenge::{AuthorizedClient, ChallengeSlot, Challenged};
pub(crate) use device::Polled;
pub(crate) use vault::{Replay, Vault};

use crate::config::{PreparedAuthorization, ServerDefinition};
use crate::model::{PendingAuthorization, Problem, ServerSnapshot, ServerSummary};
use vault::{Attempt, Pending};

/// One server being opened, as its authorization sees it: whose it is (the vault's key), how
/// its Problems name it, and how it authorizes.
pub(crate) struct Server<'a> {
    pub vault: &'a Vault,
    pub workspace: &'a str,
    pub alias: &'a str,
    /// `server "<alias>" (<transport>)`, the start of every Problem about it.
    pub label: &'a str,
    /// Its URL; empty when it is not reached over HTTP.
    pub url: &'a str,
    pub definition: &'a ServerDefinition,
    pub authorization: Option<&'a PreparedAuthorization>,
    /// The host's shared HTTP client, built on first use.
    pub http: &'a (dyn Fn() -> Result<reqwest::Client, super::http::ClientUnbuilt> + Sync),
}

/// What a connection starts with: the client that attaches a token, if any.
pub(crate) struct Credentials {
    pub client: Option<AuthorizedClient>,
    /// The client comes from the client-credentials grant.
    pub grant: bool,
}

/// Why a refused server is not reached now.
pub(crate) enum Unauthorized {
    /// A person has to authorize it first: `pending` says where (none when the authorization
    /// was settled or forgotten in the meantime).
    Pending {
        problem: Problem,
        pending: Option<PendingAuthorization>,
    },
    /// It could not be authorized: the Problem says why.
    Failed(Problem),
}

impl Server<'_> {
    /// The credentials a connection starts with: a machine grant's client, obtained now, or
    /// the vault's client authorized for exactly this definition (a changed definition
    /// authorizes again).
    pub(crate) async fn authorize(&self) -> Result<Credentials, Problem> {
        let http = || {
            (self.http)().map_err(|detail| {
                Problem::server_unavailable(format!(
                    "{} could not be prepared: {detail}",
                    self.label
                ))
            })
        };
        let (alias, url) = (self.alias, self.url);
        let (client, grant) = match self.authorization {
            // A server declared by its URL alone may hold a token of the device grant.
            None => (
                self.vault
                    .authorized(self.workspace, alias, self.definition),
                false,
            ),
            Some(authorization @ PreparedAuthorization::ClientCredentials { .. }) => {
                let client = grant::client_credentials(alias, url, authorization, http()?).await?;
                (Some(client), true)
            }
            Some(authorization @ PreparedAuthorization::WorkloadIdentity { .. }) => {
                let client = grant::workload_identity(alias, url, authorization, http()?).await?;
                (Some(client), false)
            }
            Some(PreparedAuthorization::OAuth { .. }) => (
                self.vault
                    .authorized(self.workspace, alias, self.definition),
                false,
            ),
        };
        Ok(Credentials { client, grant })
    }

    /// Whether a refusal is answered by asking a person (interactive OAuth).
    pub(crate) fn interactive(&self) -> bool {
        matches!(
            self.authorization,
            Some(PreparedAuthorization::OAuth { .. })
        )
    }

    /// The server refused the connection with `challenge`. A machine grant's token refused
    /// is a failure of that grant; no token, or one refused even after rmcp's silent
    /// refresh, starts a new authorization, replacing any pending one.
    pub(crate) async fn refused(&self, challenge: String) -> Unauthorized {
        let alias = self.alias;
        match self.authorization {
            Some(PreparedAuthorization::ClientCredentials { client_id, .. }) => {
                Unauthorized::Failed(Problem {
                    listing: false,
                    status: 502,
                    kind: crate::model::CLIENT_CREDENTIALS_FAILED.into(),
                    detail: format!(
                        "server \"{alias}\" (http) refused the token the client-credentials \
                         grant of client \"{client_id}\" gave: check the client's scope and \
                         the server's audience"
                    ),
                    retryable: false,
                })
            }
            Some(PreparedAuthorization::WorkloadIdentity { .. }) => Unauthorized::Failed(Problem {
                listing: false,
                status: 502,
                kind: crate::model::WORKLOAD_IDENTITY_FAILED.into(),
                detail: format!(
                    "server \"{alias}\" (http) refused the token its workload-identity \
                     grant gave, even after a new grant: check the scope and the server's \
                     audience"
                ),
                retryable: false,
            }),
            _ => self.reauthorize(challenge).await,
        }
    }

    /// Authorizes the server again from `challenge`: a new pending authorization (through
    /// the device grant when one was asked for, else the browser), so the session opens as
    /// `authorization-required`.
    pub(crate) async fn reauthorize(&self, challenge: String) -> Unauthorized {
        let (vault, workspace, alias) = (self.vault, self.workspace, self.alias);
        let device = vault.take_device_request(workspace, alias);
        // A server declared by its URL alone, whose 401 names its authorization server, is
        // authorized through the device grant when one was asked for: a client registered
        // for it, no redirect involved.
        let by_url_alone = PreparedAuthorization::OAuth {
            redirect_url: None,
            client_metadata_url: None,
            client_id: None,
            client_secret: None,
            scope: None,
        };
        let authorization = match (self.authorization, &device) {
            (Some(authorization), _) if self.interactive() => authorization,
            (None, Some(_)) => &by_url_alone,
            _ => {
                return Unauthorized::Failed(Problem::unauthorized(format!(
                    "{} could not be connected: authorization required (HTTP 401): give its \
                     definition an `authorization` (bearer, oauth or client-credentials), \
                     authorize it with the device grant, or check the credentials it has",
                    self.label
                )));
            }
        };
        let attempt = Attempt {
            vault,
            workspace,
            alias,
            server_url: self.url,
            definition: Arc::new(self.definition.clone()),
            authorization,
            challenge: Some(&challenge),
        };
        let failed = |detail: &dyn std::fmt::Display| {
            Unauthorized::Failed(Problem::authorization_failed(format!(
                "{} could not be authorized: {detail}",
                self.label
            )))
        };
        let begun = match device {
            Some(scope) => match (self.http)() {
                Ok(http) => device::begin_device(attempt, scope, http).await,
                Err(detail) => return failed(&detail),
            },
            None => code::begin(attempt).await,
        };
        match begun {
            Ok(()) => {
                vault.forget_authorized(workspace, alias);
                Unauthorized::Pending {
                    problem: Problem::authorization_required(alias),
                    pending: vault.pending(workspace, alias),
                }
            }
            Err(why) => failed(&why),
        }
    }
}

/// A browser authorization taken out of the vault to be completed. It is spent by
/// [`Completion::finish`], or dropped; [`Completion::put_back`] returns it unspent.
pub(crate) struct Completion<'a> {
    vault: &'a Vault,
    workspace: &'a str,
    alias: &'a str,
    pending: Pending,
}

impl<'a> Completion<'a> {
    /// The browser authorization pending for `(workspace, alias)`, if one is.
    pub(crate) fn take(vault: &'a Vault, workspace: &'a str, alias: &'a str) -> Option<Self> {
        let pending = vault.take_pending(workspace, alias)?;
        Some(Self {
            vault,
            workspace,
            alias,
            pending,
        })
    }

    /// Puts it back, unless a newer request replaced it meanwhile.
    pub(crate) fn put_back(self) {
        self.vault
            .restore_pending(self.workspace, self.alias, self.pending);
    }

    /// Whether the server changed since the authorization was asked for, given its
    /// summary now (`None`: the alias is not there): an add's alias now exists, or an
    /// uncustomized enable's definition is no longer the one authorized.
    pub(crate) fn drifted(&self, current: Option<&ServerSummary>) -> bool {
        match (self.pending.replay(), current) {
            (Replay::Add(_), current) => current.is_some(),
            (Replay::Enable(_), None) => true,
            (Replay::Enable(customize), Some(summary)) => {
                customize.is_empty()
                    && serde_json::to_value(self.pending.definition())
                        .ok()
                        .as_ref()
                        != Some(&summary.definition)
            }
        }
    }

    /// Finishes it with the complete callback URL and installs the authorized client; the
    /// action to perform next. A refused callback puts it back, so the real one still
    /// completes it.
    pub(crate) async fn finish(
        self,
        callback_url: &str,
        http: reqwest::Client,
    ) -> Result<Replay, Problem> {
        let Self {
            vault,
            workspace,
            alias,
            pending,
        } = self;
        match code::complete(pending, alias, callback_url, http).await {
            Ok((client, definition, replay)) => {
                vault.install(workspace, alias, client, definition);
                Ok(replay)
            }
            Err(failure) => {
                let (pending, problem) = *failure;
                if let Some(pending) = pending {
                    vault.restore_pending(workspace, alias, pending);
                }
                Err(problem)
            }
        }
    }
}

/// A request that the next authorization of `(workspace, alias)` use the device grant,
/// spent when it drops, whatever the action that asked for it did.
pub(crate) struct DeviceRequest<'a> {
    vault: &'a Vault,
    workspace: &'a str,
    alias: &'a str,
    /// The definition of the add waiting for its authorization, if an add asked for it:
    /// such an add exists nowhere else, so it is asked again.
    pub added: Option<ServerDefinition>,
}

impl<'a> DeviceRequest<'a> {
    /// Asks for the device grant, with `scope` (if any).
    pub(crate) fn ask(
        vault: &'a Vault,
        workspace: &'a str,
        alias: &'a str,
        scope: Option<&str>,
    ) -> Self {
        let added = vault.pending_add(workspace, alias);
        vault.request_device(workspace, alias, scope.map(str::to_owned));
        Self {
            vault,
            workspace,
            alias,
            added,
        }
    }
}

impl Drop for DeviceRequest<'_> {
    fn drop(&mut self) {
        let _ = self.vault.take_device_request(self.workspace, self.alias);
    }
}

/// One poll of the device authorization `device` of `(workspace, alias)`; when it is
/// approved, its client is installed and the action to perform next is returned.
/// `404 oauth-not-pending` when there is none with that handle.
pub(crate) async fn poll_device(
    vault: &Vault,
    workspace: &str,
    alias: &str,
    device: &str,
    http: reqwest::Client,
) -> Result<Polled, Problem> {
    device::poll_device(vault, workspace, alias, device, http).await
}

/// The action a server's authorization may be asked by, carried with it until its answer:
/// an answer that waits for a person's authorization records it, so completing that
/// authorization performs this action again (an add replays the add, an enable its
/// customization).
pub(crate) struct Asked {
    vault: Arc<Vault>,
    replay: Replay,
}

impl Asked {
    pub(crate) fn new(vault: &Arc<Vault>, replay: Replay) -> Self {
        Self {
            vault: vault.clone(),
            replay,
        }
    }

    /// The action on `(workspace, alias)` answered `snapshot`.
    pub(crate) fn answered(self, workspace: &str, alias: &str, snapshot: &ServerSnapshot) {
        if let Some(pending) = &snapshot.authorization {
            self.vault
                .set_replay(workspace, alias, &pending.url, self.replay);
        }
    }
}
