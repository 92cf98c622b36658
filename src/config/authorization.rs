//! How a Streamable HTTP server authorizes requests: a bearer credential, interactive OAuth,
//! the client-credentials grant, or a workload's identity token (the JWT-bearer grant).
//!
//! Every credential is held unexpanded as a [`Secret`], ideally (and, outside
//! the service environment's `_BEARER`, necessarily) one `${NAME}` reference
//! that only the service expands while preparing a connection.

use std::fmt;

use serde::Serialize;

use super::secret::{Bare, Secret};

/// The `authorization` of an HTTP definition: the wire's closed union of
/// `bearer`, `oauth`, `client-credentials` and `workload-identity` (absent means none).
///
/// `Serialize` gives the wire shape with every credential shown only when it is
/// one `${NAME}` reference; `Debug` likewise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Authorization {
    /// `Authorization: Bearer <token>` on every request; what
    /// `PLURNK_MCP_<server>_BEARER` configures.
    Bearer {
        /// The credential.
        token: Secret,
    },
    /// Interactive OAuth for a human principal.
    #[serde(rename = "oauth")]
    OAuth(OAuthAuthorization),
    /// The OAuth client-credentials grant for an application principal.
    ClientCredentials(ClientCredentials),
    /// A workload's identity token exchanged for an access token (RFC 7523 JWT-bearer
    /// grant, workload identity federation).
    WorkloadIdentity(WorkloadIdentity),
}

impl Authorization {
    /// A bearer credential.
    pub fn bearer(token: impl Into<String>) -> Self {
        Self::Bearer {
            token: Secret::new(token),
        }
    }

    /// The wire's `type`: `bearer`, `oauth`, `client-credentials` or `workload-identity`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bearer { .. } => "bearer",
            Self::OAuth(_) => "oauth",
            Self::ClientCredentials(_) => "client-credentials",
            Self::WorkloadIdentity(_) => "workload-identity",
        }
    }

    /// Every credential it holds with its wire field name, for checks that
    /// they are `${NAME}` references.
    pub(crate) fn credentials(&self) -> Vec<(&'static str, &Secret)> {
        match self {
            Self::Bearer { token } => vec![("token", token)],
            Self::OAuth(oauth) => oauth
                .client_secret
                .iter()
                .map(|secret| ("clientSecret", secret))
                .collect(),
            Self::ClientCredentials(grant) => vec![("clientSecret", &grant.client_secret)],
            Self::WorkloadIdentity(grant) => vec![("assertion", &grant.assertion)],
        }
    }
}

/// Interactive OAuth: the CIMD-preferred form (`client_metadata_url`), the
/// pre-registered form (`client_id` with `client_secret`), or neither (dynamic
/// client registration as the server-advertised fallback).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthAuthorization {
    /// Where the authorization server sends the user back; the client returns
    /// the complete callback URL through `oauth.complete`. Absent, the server is authorized
    /// through the device grant only (no browser comes back anywhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_url: Option<String>,
    /// The client ID metadata document (CIMD) URL, an absolute `https://` URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// A pre-registered client identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The pre-registered client's secret: one `${NAME}` reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// The scope to request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl OAuthAuthorization {
    /// Dynamic client registration only: just the redirect URL.
    pub fn new(redirect_url: impl Into<String>) -> Self {
        Self {
            redirect_url: Some(redirect_url.into()),
            client_metadata_url: None,
            client_id: None,
            client_secret: None,
            scope: None,
        }
    }
}

/// The client-credentials grant (`client_secret_basic`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCredentials {
    /// The client identifier; named in Problems, unlike the secret.
    pub client_id: String,
    /// The client secret: one `${NAME}` reference.
    pub client_secret: Secret,
    /// The scope to request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The authorization server the credential is bound to (the SDK's `expectedIssuer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl ClientCredentials {
    /// A grant with no scope or issuer binding.
    pub fn new(client_id: impl Into<String>, client_secret: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: Secret::new(client_secret),
            scope: None,
            issuer: None,
        }
    }
}

/// A workload's identity token (a JWT its platform issues: a Kubernetes service account
/// token, a CI provider's OIDC token), presented to the authorization server with the
/// JWT-bearer grant (RFC 7523 §2.1) for an access token. Nothing else authenticates the
/// client: the token is the credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadIdentity {
    /// The identity token: one `${NAME}` reference, expanded each time the connection is
    /// prepared (so a rotated token is picked up).
    pub assertion: Secret,
    /// The client identifier the authorization server knows the workload by, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The scope to request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The authorization server the token may be sent to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl WorkloadIdentity {
    /// A grant with no client id, scope or issuer binding.
    pub fn new(assertion: impl Into<String>) -> Self {
        Self {
            assertion: Secret::new(assertion),
            client_id: None,
            scope: None,
            issuer: None,
        }
    }
}

/// An OAuth authorization with its credential expanded, for the connection
/// that performs the flow. Like [`PreparedServer`](super::PreparedServer) it is
/// never stored; `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub enum PreparedAuthorization {
    /// Interactive OAuth.
    OAuth {
        /// The redirect URL (none: the device grant only).
        redirect_url: Option<String>,
        /// The CIMD URL.
        client_metadata_url: Option<String>,
        /// The pre-registered client identifier.
        client_id: Option<String>,
        /// The pre-registered client secret, expanded.
        client_secret: Option<String>,
        /// The scope to request.
        scope: Option<String>,
    },
    /// The client-credentials grant.
    ClientCredentials {
        /// The client identifier.
        client_id: String,
        /// The client secret, expanded.
        client_secret: String,
        /// The scope to request.
        scope: Option<String>,
        /// The bound issuer.
        issuer: Option<String>,
    },
    /// The JWT-bearer grant of a workload's identity token.
    WorkloadIdentity {
        /// The identity token, expanded.
        assertion: String,
        /// The client identifier.
        client_id: Option<String>,
        /// The scope to request.
        scope: Option<String>,
        /// The bound issuer.
        issuer: Option<String>,
    },
}

impl fmt::Debug for PreparedAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OAuth {
                redirect_url,
                client_metadata_url,
                client_id,
                client_secret,
                scope,
            } => f
                .debug_struct("OAuth")
                .field("redirect_url", redirect_url)
                .field("client_metadata_url", client_metadata_url)
                .field("client_id", client_id)
                .field(
                    "client_secret",
                    &client_secret.as_ref().map(|_| Bare("<redacted>")),
                )
                .field("scope", scope)
                .finish(),
            Self::ClientCredentials {
                client_id,
                client_secret: _,
                scope,
                issuer,
            } => f
                .debug_struct("ClientCredentials")
                .field("client_id", client_id)
                .field("client_secret", &Bare("<redacted>"))
                .field("scope", scope)
                .field("issuer", issuer)
                .finish(),
            Self::WorkloadIdentity {
                assertion: _,
                client_id,
                scope,
                issuer,
            } => f
                .debug_struct("WorkloadIdentity")
                .field("assertion", &Bare("<redacted>"))
                .field("client_id", client_id)
                .field("scope", scope)
                .field("issuer", issuer)
                .finish(),
        }
    }
}
