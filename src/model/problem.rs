//! Problem, the RFC 9457-shaped failure every expected fault becomes, its kinds and the
//! Cause a kind is read as.

use std::fmt;

use serde::Serialize;

/// An expected failure, shaped after RFC 9457: what every failure a user can act on becomes.
///
/// A `Problem` never carries a credential: it is built from the alias, the transport and
/// messages of our own, never from an expanded definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// The HTTP-like status: `502` for a server that cannot be reached, `404` unknown, …
    pub status: u16,
    /// A stable machine-readable kind, such as `server-unavailable`.
    pub kind: String,
    /// One or more lower-case sentences that name the thing and say what to do.
    pub detail: String,
    /// Whether trying the same thing again later may succeed.
    pub retryable: bool,
    /// Whether a catalog could not be listed whole: its kind is `server-unavailable`, as the
    /// specification allocates for any connection that cannot be prepared, and this tells the
    /// cause apart ([`Cause::Listing`]).
    #[serde(skip)]
    pub(crate) listing: bool,
}

impl Problem {
    /// The same Problem with every registered secret scrubbed from its detail.
    pub(crate) fn scrubbed(mut self) -> Self {
        self.detail = crate::redact::scrub_capped(&self.detail, crate::redact::SHOWN_CHARS);
        self
    }

    /// `502 server-unavailable`: the server could not be connected, discovered or listed.
    pub fn server_unavailable(detail: impl Into<String>) -> Self {
        Self {
            status: 502,
            kind: "server-unavailable".into(),
            detail: detail.into(),
            retryable: true,
            listing: false,
        }
    }

    /// `502 server-unavailable` of a server that connected but one of whose catalogs (tools,
    /// resources, templates, prompts) could not be listed whole: the specification's kind for
    /// a failed catalog preparation, its cause [`Cause::Listing`].
    pub fn list_failed(detail: impl Into<String>) -> Self {
        Self {
            listing: true,
            ..Self::server_unavailable(detail)
        }
    }

    /// `401 server-unauthorized`: the server refused the connection for want of an
    /// authorization its definition does not give (or a token it refused).
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self {
            status: 401,
            kind: UNAUTHORIZED.into(),
            detail: detail.into(),
            retryable: false,
            listing: false,
        }
    }

    /// `502 authorization-failed`: the server asks for OAuth authorization, and its
    /// authorization could not be started (discovery or registration failed).
    pub fn authorization_failed(detail: impl Into<String>) -> Self {
        Self {
            status: 502,
            kind: AUTHORIZATION_FAILED.into(),
            detail: detail.into(),
            retryable: true,
            listing: false,
        }
    }

    /// Why a server is not ready, as the Problem's kind (and, for a catalog, its cause)
    /// says.
    pub fn cause(&self) -> Cause {
        if self.listing {
            Cause::Listing
        } else {
            Cause::of_kind(&self.kind)
        }
    }

    /// `409 server-crash-loop`: the server crashed too often and waits for an explicit enable.
    pub fn crash_loop(detail: impl Into<String>) -> Self {
        Self {
            status: 409,
            kind: "server-crash-loop".into(),
            detail: detail.into(),
            retryable: false,
            listing: false,
        }
    }

    /// `404 unknown-server`.
    pub fn unknown_server(alias: &str) -> Self {
        Self {
            status: 404,
            kind: "unknown-server".into(),
            detail: format!(
                "server \"{}\" is not configured in this workspace: check the alias or add it",
                crate::config::shorten(alias)
            ),
            retryable: false,
            listing: false,
        }
    }

    /// `409 conflict`.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self {
            status: 409,
            kind: "conflict".into(),
            detail: detail.into(),
            retryable: false,
            listing: false,
        }
    }

    /// `403 forbidden`: the operator has not allowed what was asked.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self {
            status: 403,
            kind: "forbidden".into(),
            detail: detail.into(),
            retryable: false,
            listing: false,
        }
    }

    /// `400 literal-credential`: a definition that would be kept holds a credential written
    /// literally; the detail names every field (never a value) and says to write `${NAME}`.
    pub fn literal_credential(refused: &crate::config::LiteralCredentials) -> Self {
        Self {
            status: 400,
            kind: "literal-credential".into(),
            detail: refused.to_string(),
            retryable: false,
            listing: false,
        }
    }

    /// `400 invalid-definition`.
    pub fn invalid_definition(detail: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "invalid-definition".into(),
            detail: detail.into(),
            retryable: false,
            listing: false,
        }
    }

    /// `401 authorization-required`: the server needs OAuth authorization, which a person
    /// gives at the URL in the server's snapshot (`authorization`).
    pub fn authorization_required(alias: &str) -> Self {
        Self {
            status: 401,
            kind: AUTHORIZATION_REQUIRED.into(),
            detail: format!(
                "server \"{alias}\" (http) needs OAuth authorization: open the URL in its \
                 `authorization`, approve, then pass the complete callback URL to \
                 Workspace::oauth_complete (or run `plurnk-mcp auth {alias}`)"
            ),
            retryable: false,
            listing: false,
        }
    }

    /// `404 oauth-not-pending`: no authorization of the server waits for a callback.
    pub fn oauth_not_pending(alias: &str) -> Self {
        Self {
            status: 404,
            kind: "oauth-not-pending".into(),
            detail: format!(
                "no authorization of server \"{alias}\" is pending in this workspace (it was \
                 completed, replaced, cleared by a disable, or lost in a restart): enable the \
                 server to start a new one"
            ),
            retryable: false,
            listing: false,
        }
    }

    /// `409 oauth-target-conflict`: the server changed while its authorization was pending.
    pub fn oauth_target_conflict(alias: &str) -> Self {
        Self {
            status: 409,
            kind: "oauth-target-conflict".into(),
            detail: format!(
                "server \"{alias}\" was changed (or removed, or added) while its authorization \
                 was pending, so that authorization is not applied: enable the server to \
                 authorize its current definition"
            ),
            retryable: false,
            listing: false,
        }
    }

    /// `503 shutting-down`: the host refuses new work while it shuts down.
    pub fn shutting_down() -> Self {
        Self {
            status: 503,
            kind: "shutting-down".into(),
            detail: "the host is shutting down and accepts no new work".into(),
            retryable: false,
            listing: false,
        }
    }
}

/// The kind of a Problem whose server waits for a person's OAuth authorization.
pub(crate) const AUTHORIZATION_REQUIRED: &str = "authorization-required";
/// The kind of [`Problem::authorization_failed`].
pub(crate) const AUTHORIZATION_FAILED: &str = "authorization-failed";
/// The kind of [`Problem::unauthorized`].
pub(crate) const UNAUTHORIZED: &str = "server-unauthorized";
/// The kind of a refused client-credentials grant's Problem.
pub(crate) const CLIENT_CREDENTIALS_FAILED: &str = "oauth-client-credentials-failed";
/// The kind of a refused workload-identity grant's Problem.
pub(crate) const WORKLOAD_IDENTITY_FAILED: &str = "oauth-workload-identity-failed";

/// Why a server is not ready, as its [`Problem`]'s kind says: what the EXEC bridge reports
/// it as ([`crate::exec::ExecError::telemetry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// It needs an authorization it does not have, or was refused one: pending OAuth
    /// (`authorization-required`), none configured or a token refused
    /// (`server-unauthorized`), an authorization that could not be started
    /// (`authorization-failed`), a refused grant (`oauth-client-credentials-failed`,
    /// `oauth-workload-identity-failed`).
    Authorization,
    /// A catalog could not be listed whole (`server-unavailable` from
    /// [`Problem::list_failed`]).
    Listing,
    /// Anything else: it could not be reached, it crashed, its workspace failed.
    Unreachable,
}

impl Cause {
    /// The cause a Problem kind names.
    pub fn of_kind(kind: &str) -> Self {
        match kind {
            AUTHORIZATION_REQUIRED
            | AUTHORIZATION_FAILED
            | UNAUTHORIZED
            | CLIENT_CREDENTIALS_FAILED
            | WORKLOAD_IDENTITY_FAILED => Self::Authorization,
            _ => Self::Unreachable,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.kind, self.detail)
    }
}

impl std::error::Error for Problem {}
