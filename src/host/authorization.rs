//! A person's authorization as the handle offers it: the `202` an action waiting for one
//! stands for, finishing a browser authorization with its callback, and the device grant
//! (start, poll). The auth wing keeps the state; the handle performs the action a finished
//! authorization gives back, as any other action.

use std::sync::atomic::Ordering;

use super::Workspace;
use crate::model::{Problem, ServerSnapshot, ServerState};
use crate::protocol::auth::{self, Completion, DeviceRequest, Polled, Replay};

/// What an add or enable answers at the action boundary while an interactive authorization
/// waits for a person (§mcp-management-actions): `202` with where to authorize, serialized as
/// `{"status": 202, "authorization": {"url": …}}` (a device authorization adds its code and
/// polling terms under `authorization.device`). Nothing is published meanwhile;
/// [`Workspace::oauth_complete`] or [`Workspace::poll_device`] finishes the action.
///
/// The actions answer a [`ServerSnapshot`], as every action does; [`Accepted::of`] reads the
/// `202` out of one, so an embedder relays the specification's shape without matching states.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Accepted {
    /// Always [`Accepted::STATUS`]: kept in the value so that what is relayed carries it.
    status: u16,
    /// Where the person authorizes.
    authorization: crate::model::PendingAuthorization,
}

impl Accepted {
    /// The status of an action accepted and waiting for authorization.
    pub const STATUS: u16 = 202;

    /// The `202` an action's `answer` stands for: `Some` while the server waits for a person's
    /// authorization (state `authorization-required`, with where to give it), `None` when the
    /// action finished (ready, or the server's Problem says why not).
    pub fn of(answer: &ServerSnapshot) -> Option<Self> {
        if answer.state != ServerState::AuthorizationRequired {
            return None;
        }
        answer.authorization.clone().map(|authorization| Self {
            status: Self::STATUS,
            authorization,
        })
    }

    /// The `202` of a device authorization ([`Workspace::authorize_device`]): its
    /// verification URI as the `url`, with the code to enter there.
    pub fn device(device: crate::model::DeviceAuthorization) -> Self {
        Self {
            status: Self::STATUS,
            authorization: crate::model::PendingAuthorization {
                url: device.verification_uri.clone(),
                device: Some(device),
            },
        }
    }

    /// `202`.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Where the person authorizes.
    pub fn authorization(&self) -> &crate::model::PendingAuthorization {
        &self.authorization
    }
}

impl Workspace {
    /// `oauth.complete`: finishes the pending OAuth authorization of `alias` with the
    /// complete callback URL the authorization server sent the person back to (its `state`,
    /// `code` and `iss` are validated together, against the attempt that made the URL),
    /// then performs the add or enable that asked for it, whose answer this is.
    ///
    /// `404 oauth-not-pending` when nothing waits (completed, replaced by a newer request,
    /// cleared by a disable, or lost in a restart); `409 oauth-target-conflict` when the
    /// server changed meanwhile; `400 oauth-callback-refused` for a callback that is not this
    /// attempt's (the pending authorization stays, so the real callback still completes it).
    /// No text of the authorization server's is echoed.
    pub async fn oauth_complete(
        &self,
        alias: &str,
        callback_url: &str,
    ) -> Result<ServerSnapshot, Problem> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        let completion = Completion::take(&self.host.settings.connect.oauth, &self.name, alias)
            .ok_or_else(|| Problem::oauth_not_pending(alias))?;
        let current = match self.list().await {
            Ok(summaries) => summaries.into_iter().find(|summary| summary.alias == alias),
            Err(problem) => {
                completion.put_back();
                return Err(problem);
            }
        };
        if completion.drifted(current.as_ref()) {
            return Err(Problem::oauth_target_conflict(alias));
        }
        let http_client = self.oauth_http()?;
        match completion.finish(callback_url, http_client).await {
            Ok(replay) => self.replay(alias, replay).await,
            Err(problem) => Err(problem.scrubbed()),
        }
    }

    /// Performs again the action a completed authorization was asked by.
    async fn replay(&self, alias: &str, replay: Replay) -> Result<ServerSnapshot, Problem> {
        match replay {
            Replay::Add(definition) => self.add(*definition).await,
            Replay::Enable(customize) => self.enable_with(alias, *customize).await,
        }
    }

    /// Starts a device authorization (RFC 8628) of `alias`, for a daemon with no browser:
    /// the person enters the user code at the verification URI on any device, and the
    /// caller polls with [`Workspace::poll_device`], honouring the interval. The server must
    /// be an OAuth one that asks for authorization now (disabled, `authorization-required`,
    /// or an add waiting for its authorization); its authorization server must advertise a
    /// `device_authorization_endpoint` (there is no fallback), and the client is the
    /// definition's pre-registered one or one registered dynamically for the device grant.
    pub async fn authorize_device(
        &self,
        alias: &str,
        scope: Option<&str>,
    ) -> Result<crate::model::DeviceAuthorization, Problem> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        let mut request =
            DeviceRequest::ask(&self.host.settings.connect.oauth, &self.name, alias, scope);
        let answer = match request.added.take() {
            Some(definition) => self.add(definition).await,
            None => self.enable(alias).await,
        };
        // Whatever happened, the request is spent.
        drop(request);
        let server = answer?;
        match server.authorization.and_then(|pending| pending.device) {
            Some(device) => Ok(device),
            None if server.state == ServerState::Ready => Err(Problem::conflict(format!(
                "server \"{alias}\" is already authorized and ready: there is nothing to \
                 authorize (disable it first to authorize it anew)"
            ))),
            None => Err(server.problem.unwrap_or_else(|| {
                Problem::server_unavailable(format!(
                    "server \"{alias}\" did not ask for authorization, so no device \
                     authorization was started"
                ))
            })),
        }
    }

    /// One poll of the device authorization `device` of `alias`: `pending` or `slow_down`
    /// (poll again after the interval), `denied`, `expired`, or `authorized`, when the
    /// token is installed and the action that asked for it (the enable, or an add) has run;
    /// its answer is the server's snapshot. `404 oauth-not-pending` for an unknown handle.
    pub async fn poll_device(
        &self,
        alias: &str,
        device: &str,
    ) -> Result<crate::model::DevicePoll, Problem> {
        if self.host.closed.load(Ordering::Acquire) {
            return Err(Problem::shutting_down());
        }
        let http_client = self.oauth_http()?;
        let vault = &self.host.settings.connect.oauth;
        match auth::poll_device(vault, &self.name, alias, device, http_client).await {
            Ok(Polled::Status(status)) => Ok(status),
            Ok(Polled::Authorized(replay)) => Ok(crate::model::DevicePoll::Authorized {
                server: Box::new(self.replay(alias, replay).await?),
            }),
            Err(problem) => Err(problem.scrubbed()),
        }
    }
}

impl Workspace {
    /// The host's shared HTTP client, which an authorization's own requests go through.
    fn oauth_http(&self) -> Result<reqwest::Client, Problem> {
        self.host
            .settings
            .connect
            .http_client()
            .map_err(|error| Problem::server_unavailable(error.to_string()))
    }
}
