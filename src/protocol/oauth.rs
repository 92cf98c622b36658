//! OAuth for Streamable HTTP servers, over rmcp's `auth` feature: the interactive
//! authorization-code flow and the device grant (human principal), the client-credentials
//! grant (application principal), and the JWT-bearer grant of a workload's identity token.
//!
//! rmcp does the protocol: protected-resource and authorization-server discovery (from the
//! `WWW-Authenticate` challenge, else the well-known probes), PKCE S256, resource
//! indicators, RFC 9207 issuer validation, client identity (pre-registered, then a Client ID
//! Metadata Document when advertised, then Dynamic Client Registration when
//! `registration_endpoint` is advertised), scope selection, and the silent refresh of a
//! rejected token against the issuer it was bound to. This module keeps what rmcp leaves to
//! its host:
//!
//! - [`Vault`]: the process-memory record of each `(workspace, alias)`'s OAuth state — one
//!   pending authorization (replaced by a newer request) and the authorized client. Nothing
//!   here is ever written anywhere: after a restart the server is `authorization-required`.
//! - [`begin`] and [`complete`]: start an authorization (its URL goes to the operator; there
//!   is no callback listener) and finish it with the complete callback URL.
//! - [`client_credentials`]: the grant, with the definition's issuer binding.
//! - [`begin_device`] and [`poll_device`]: the device grant (RFC 8628), which rmcp lacks.
//! - [`workload_identity`]: the JWT-bearer grant (RFC 7523), which rmcp lacks outside
//!   enterprise-managed authorization, and its [`Regrant`].
//!
//! Every authorization's OAuth requests go through [`OAuthHttp`] (DPoP, `dpop.rs`).
//! Every failure becomes text of our own: an authorization server's error text (attacker
//! owned) is never echoed (only an OAuth error code, bounded to its grammar), and no
//! credential is ever in a message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    ClientCredentialsConfig, CredentialStore as _, InMemoryCredentialStore, OAuthClientConfig,
    OAuthState, StoredCredentials, WWWAuthenticateParams,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::dpop::{self, Dpop, OAuthHttp};
use crate::config::{PreparedAuthorization, ServerDefinition};
use crate::model::{Customize, DeviceAuthorization, DevicePoll, PendingAuthorization, Problem};

/// An HTTP client that attaches (and refreshes) an OAuth access token: what the transport of
/// an authorized connection sends through. Clones share one token. Every token it sends,
/// refreshed ones included, is registered as a secret on its way out.
pub(crate) type AuthorizedClient = AuthClient<Challenged<reqwest::Client>>;

/// The client name sent with Dynamic Client Registration.
const CLIENT_NAME: &str = "plurnk-mcp";

/// What completing an authorization does next: the action that asked for it, performed
/// again now that the server can be reached.
#[derive(Debug, Clone)]
pub(crate) enum Replay {
    /// Enable the alias (with the customization it was asked with).
    Enable(Box<Customize>),
    /// Add the definition.
    Add(Box<ServerDefinition>),
}

/// One authorization waiting for its callback.
pub(crate) struct Pending {
    state: OAuthState,
    /// The proof key of this authorization (used when its server advertises DPoP).
    dpop: Arc<Dpop>,
    url: String,
    /// The definition being opened when authorization was asked for.
    definition: Arc<ServerDefinition>,
    replay: Replay,
}

impl Pending {
    /// The definition the authorization was started for.
    pub(crate) fn definition(&self) -> &ServerDefinition {
        &self.definition
    }

    /// What completing it does next.
    pub(crate) fn replay(&self) -> &Replay {
        &self.replay
    }
}

struct Authorized {
    client: AuthorizedClient,
    definition: Arc<ServerDefinition>,
}

/// The one authorization of a server that waits for its person.
enum Waiting {
    /// Through the browser: for the callback URL.
    Code(Box<Pending>),
    /// Through the device grant: for the person to enter the user code.
    Device(Box<DevicePending>),
}

impl Waiting {
    fn replay_mut(&mut self) -> &mut Replay {
        match self {
            Self::Code(pending) => &mut pending.replay,
            Self::Device(device) => &mut device.replay,
        }
    }

    fn shown(&self) -> PendingAuthorization {
        match self {
            Self::Code(pending) => PendingAuthorization {
                url: pending.url.clone(),
                device: None,
            },
            Self::Device(device) => PendingAuthorization {
                url: device.shown.verification_uri.clone(),
                device: Some(device.shown.clone()),
            },
        }
    }
}

#[derive(Default)]
struct Entry {
    /// The authorization waiting for its person; a new one replaces it.
    waiting: Option<Waiting>,
    /// The next authorization uses the device grant, with this scope (if any).
    device_requested: Option<Option<String>>,
    authorized: Option<Authorized>,
    /// Scope step-ups in a row; a fresh authorization starts again from zero.
    step_ups: u32,
}

/// How many scope step-ups in a row a server may ask for before the host stops asking a
/// person to approve more.
const MAX_STEP_UPS: u32 = 3;

/// The host's OAuth state in process memory, keyed by `(workspace, alias)`, so no other
/// workspace, alias or attempt can complete or use an authorization.
#[derive(Default)]
pub(crate) struct Vault {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(<redacted>)")
    }
}

impl Vault {
    fn with<T>(&self, workspace: &str, alias: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (workspace.to_owned(), alias.to_owned());
        let entry = entries.entry(key.clone()).or_default();
        let result = f(entry);
        if entry.waiting.is_none()
            && entry.device_requested.is_none()
            && entry.authorized.is_none()
            && entry.step_ups == 0
        {
            entries.remove(&key);
        }
        result
    }

    /// The authorized client of `(workspace, alias)`, if it was authorized for exactly
    /// `definition` (a changed definition authorizes again).
    pub(crate) fn authorized(
        &self,
        workspace: &str,
        alias: &str,
        definition: &ServerDefinition,
    ) -> Option<AuthorizedClient> {
        self.with(workspace, alias, |entry| {
            entry
                .authorized
                .as_ref()
                .filter(|authorized| *authorized.definition == *definition)
                .map(|authorized| authorized.client.clone())
        })
    }

    /// Forgets the authorized client (its tokens were refused for good).
    pub(crate) fn forget_authorized(&self, workspace: &str, alias: &str) {
        self.with(workspace, alias, |entry| entry.authorized = None);
    }

    /// Installs an authorized client for `definition`.
    pub(crate) fn install(
        &self,
        workspace: &str,
        alias: &str,
        client: AuthorizedClient,
        definition: Arc<ServerDefinition>,
    ) {
        self.with(workspace, alias, |entry| {
            entry.authorized = Some(Authorized { client, definition });
        });
    }

    /// Records a new waiting authorization; the one before it (if any) is dropped, so its
    /// callback or device code no longer completes anything.
    fn set_waiting(&self, workspace: &str, alias: &str, waiting: Waiting) {
        self.with(workspace, alias, |entry| entry.waiting = Some(waiting));
    }

    /// Where the waiting authorization is given, if one waits.
    pub(crate) fn pending(&self, workspace: &str, alias: &str) -> Option<PendingAuthorization> {
        self.with(workspace, alias, |entry| {
            entry.waiting.as_ref().map(Waiting::shown)
        })
    }

    /// Asks that the next authorization of `(workspace, alias)` use the device grant.
    pub(crate) fn request_device(&self, workspace: &str, alias: &str, scope: Option<String>) {
        self.with(workspace, alias, |entry| {
            entry.device_requested = Some(scope)
        });
    }

    /// The definition of the add that the pending authorization of `(workspace, alias)`
    /// will perform, if an add asked for it (the alias exists nowhere else until then).
    pub(crate) fn pending_add(&self, workspace: &str, alias: &str) -> Option<ServerDefinition> {
        self.with(workspace, alias, |entry| {
            match entry.waiting.as_mut().map(Waiting::replay_mut) {
                Some(Replay::Add(definition)) => Some((**definition).clone()),
                _ => None,
            }
        })
    }

    /// Takes the device request of `(workspace, alias)`, if the next authorization is to
    /// use the device grant (so a request that no authorization used is spent too).
    pub(crate) fn take_device_request(
        &self,
        workspace: &str,
        alias: &str,
    ) -> Option<Option<String>> {
        self.with(workspace, alias, |entry| entry.device_requested.take())
    }

    /// Says what completing the pending authorization whose URL is `url` does next (an add
    /// that asked for it replays the add; by default it enables the alias).
    pub(crate) fn set_replay(&self, workspace: &str, alias: &str, url: &str, replay: Replay) {
        self.with(workspace, alias, |entry| {
            if let Some(waiting) = entry
                .waiting
                .as_mut()
                .filter(|waiting| waiting.shown().url == url)
            {
                *waiting.replay_mut() = replay;
            }
        });
    }

    /// Takes the browser authorization out, to complete it.
    pub(crate) fn take_pending(&self, workspace: &str, alias: &str) -> Option<Pending> {
        self.with(workspace, alias, |entry| match entry.waiting.take() {
            Some(Waiting::Code(pending)) => Some(*pending),
            other => {
                entry.waiting = other;
                None
            }
        })
    }

    /// Takes the device authorization whose handle is `device` out, to poll it.
    fn take_device(&self, workspace: &str, alias: &str, device: &str) -> Option<DevicePending> {
        self.with(workspace, alias, |entry| match entry.waiting.take() {
            Some(Waiting::Device(pending)) if pending.shown.device == device => Some(*pending),
            other => {
                entry.waiting = other;
                None
            }
        })
    }

    /// Puts back an authorization taken out to complete or poll, unless a newer request
    /// replaced it meanwhile.
    fn restore(&self, workspace: &str, alias: &str, waiting: Waiting) {
        self.with(workspace, alias, |entry| {
            entry.waiting.get_or_insert(waiting);
        });
    }

    /// Puts back a browser authorization whose completion failed before its code was
    /// spent, unless a newer request replaced it meanwhile.
    pub(crate) fn restore_pending(&self, workspace: &str, alias: &str, pending: Pending) {
        self.restore(workspace, alias, Waiting::Code(Box::new(pending)));
    }

    /// Forgets everything about `(workspace, alias)`: a disable or a removal.
    pub(crate) fn clear(&self, workspace: &str, alias: &str) {
        self.with(workspace, alias, |entry| *entry = Entry::default());
    }
}

/// One authorization to start: of `alias` in `workspace` (recorded in `vault`), its server
/// at `server_url` opened for `definition` with its expanded `authorization`, from the
/// server's `challenge` (its `WWW-Authenticate` value).
pub(crate) struct Attempt<'a> {
    pub vault: &'a Vault,
    pub workspace: &'a str,
    pub alias: &'a str,
    pub server_url: &'a str,
    pub definition: Arc<ServerDefinition>,
    pub authorization: &'a PreparedAuthorization,
    pub challenge: Option<&'a str>,
}

/// Starts an interactive authorization of `server_url` for `definition` and records it as
/// the pending one of `(workspace, alias)`. `challenge` is the `WWW-Authenticate` value of
/// the server's 401 or 403, which seeds discovery. A 403 `insufficient_scope` is a step-up:
/// it asks for the scopes granted so far and those the challenge names, at most
/// [`MAX_STEP_UPS`] times for one authorization. Its URL is the vault's
/// [`Vault::pending`].
pub(crate) async fn begin(attempt: Attempt<'_>) -> Result<(), String> {
    let Attempt {
        vault,
        workspace,
        alias,
        server_url,
        definition,
        authorization,
        challenge,
    } = attempt;
    let step_up = challenge.is_some_and(|challenge| is_insufficient_scope(server_url, challenge));
    let previous = vault.authorized(workspace, alias, &definition);
    let scopes = match challenge {
        Some(challenge) if step_up => {
            Some(step_up_scopes(previous.as_ref(), server_url, challenge).await)
        }
        _ => None,
    };
    let refused = vault.with(workspace, alias, |entry| {
        if !step_up {
            entry.step_ups = 0;
            return false;
        }
        entry.step_ups += 1;
        entry.step_ups > MAX_STEP_UPS
    });
    if refused {
        return Err(format!(
            "it asked for more scope {MAX_STEP_UPS} times in a row, so no further approval is \
             asked for: grant the scope it needs in its definition's `scope`, or disable and \
             enable it to start over"
        ));
    }
    let PreparedAuthorization::OAuth {
        redirect_url,
        client_metadata_url,
        client_id,
        client_secret,
        scope,
    } = authorization
    else {
        return Err("its authorization is not interactive OAuth".to_owned());
    };
    let mut request = AuthorizationRequest::new(redirect_url.clone()).with_client_name(CLIENT_NAME);
    if let Some(client_id) = client_id {
        request = request.with_preregistered_client(client_id.clone());
        if let Some(secret) = client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(url) = client_metadata_url {
        request = request.with_client_metadata_url(url.clone());
    }
    match (scopes, scope) {
        (Some(scopes), _) => request = request.with_scopes(scopes),
        (None, Some(scope)) => request = request.with_scopes(scope.split_whitespace()),
        (None, None) => {}
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    let dpop = Dpop::new()?;
    let mut state = OAuthState::new_with_oauth_http_client(
        server_url,
        OAuthHttp::new(server_url, dpop.clone())?,
    )
    .await
    .map_err(|error| format!("OAuth could not start: {}", refusal(&error)))?;
    state
        .start_authorization(request)
        .await
        .map_err(|error| format!("its authorization could not start: {}", refusal(&error)))?;
    let url = state.get_authorization_url().await.map_err(|error| {
        format!(
            "its authorization URL could not be made: {}",
            refusal(&error)
        )
    })?;
    vault.set_waiting(
        workspace,
        alias,
        Waiting::Code(Box::new(Pending {
            state,
            dpop,
            url: shown(url, "authorization URL")?,
            definition,
            replay: Replay::Enable(Box::default()),
        })),
    );
    Ok(())
}

/// The longest URL or code from an authorization server the host shows anyone.
const MAX_SHOWN: usize = 4096;

/// `value` (what the authorization server gave as `what`), if it is short enough to show.
fn shown(value: impl Into<String>, what: &str) -> Result<String, String> {
    let value = value.into();
    if value.len() > MAX_SHOWN {
        return Err(format!(
            "its authorization server's {what} is longer than {MAX_SHOWN} bytes, so it is not \
             shown; check the server's OAuth metadata"
        ));
    }
    Ok(value)
}

/// Finishes `pending` with the complete callback URL (state, `code` and `iss` validated by
/// rmcp against the attempt that made it). When the callback is refused the pending
/// authorization is handed back (a superseded or forged callback does not burn the real
/// one); the Problem echoes nothing the authorization server or the callback said.
pub(crate) async fn complete(
    mut pending: Pending,
    alias: &str,
    callback_url: &str,
    http_client: reqwest::Client,
) -> Result<(AuthorizedClient, Arc<ServerDefinition>, Replay), Box<(Option<Pending>, Problem)>> {
    let refused = |detail: &str| Problem {
        status: 400,
        kind: "oauth-callback-refused".into(),
        detail: format!(
            "the authorization callback for server \"{alias}\" was refused: {detail}; \
             pass the complete callback URL of the latest authorization, or enable the server \
             to authorize again"
        ),
        retryable: false,
    };
    // The code and state are credentials from here on (rmcp logs the code it exchanges).
    if let Ok(url) = reqwest::Url::parse(callback_url) {
        let values: Vec<String> = url
            .query_pairs()
            .filter(|(key, _)| key == "code" || key == "state")
            .map(|(_, value)| value.into_owned())
            .collect();
        crate::redact::register(values);
    }
    if let Err(error) = pending.state.handle_callback_url(callback_url).await {
        let problem = refused(refusal(&error));
        return Err(Box::new((Some(pending), problem)));
    }
    let (definition, replay, dpop) = (pending.definition, pending.replay, pending.dpop);
    let Some(manager) = pending.state.into_authorization_manager() else {
        return Err(Box::new((
            None,
            refused("the authorization ended in no usable state"),
        )));
    };
    let client = AuthClient::new(Challenged::registering(http_client, dpop), manager);
    register_token(&client).await;
    Ok((client, definition, replay))
}

/// Runs the client-credentials grant against `server_url`'s authorization server
/// (`client_secret_basic` when the server advertises only it, else the body form rmcp
/// prefers), bound to `issuer` when the definition names one. A refusal is `502
/// oauth-client-credentials-failed` naming only the server and the client id.
pub(crate) async fn client_credentials(
    alias: &str,
    server_url: &str,
    authorization: &PreparedAuthorization,
    http_client: reqwest::Client,
) -> Result<AuthorizedClient, Problem> {
    let PreparedAuthorization::ClientCredentials {
        client_id,
        client_secret,
        scope,
        issuer,
    } = authorization
    else {
        return Err(Problem::server_unavailable(format!(
            "server \"{alias}\" (http): its authorization is not the client-credentials grant"
        )));
    };
    let failed = |why: &str| Problem {
        status: 502,
        kind: crate::model::CLIENT_CREDENTIALS_FAILED.into(),
        detail: format!(
            "server \"{alias}\" (http): the client-credentials grant of client \"{client_id}\" \
             failed: {why}; check the client id, its secret and the scope"
        ),
        retryable: false,
    };
    let (mut manager, metadata, dpop) =
        discover_for_grant(server_url, issuer.as_deref(), "the secret")
            .await
            .map_err(|why| failed(&why))?;
    manager.set_metadata(metadata);
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes: scope
            .as_deref()
            .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        resource: Some(server_url.to_owned()),
    };
    manager
        .validate_client_credentials_metadata(&config)
        .map_err(|error| failed(refusal(&error)))?;
    manager
        .configure_client_credentials(&config)
        .map_err(|error| failed(refusal(&error)))?;
    manager
        .exchange_client_credentials(&config)
        .await
        .map_err(|error| failed(refusal(&error)))?;
    let client = AuthClient::new(Challenged::registering(http_client, dpop), manager);
    register_token(&client).await;
    Ok(client)
}

/// Discovery for a grant that sends a credential of its own (`what`): a manager over a new
/// DPoP key, and the authorization server's metadata. The credential goes only to a token
/// endpoint the server published, never to one inferred from its URL (the 2025-03-26
/// fallback), which it gave no sign of running; and with `issuer`, only to that issuer's.
async fn discover_for_grant(
    server_url: &str,
    issuer: Option<&str>,
    what: &str,
) -> Result<(AuthorizationManager, AuthorizationMetadata, Arc<Dpop>), String> {
    let dpop = Dpop::new()?;
    let oauth_http = OAuthHttp::new(server_url, dpop.clone())?;
    let manager = AuthorizationManager::new_with_oauth_http_client(server_url, oauth_http)
        .await
        .map_err(|error| refusal(&error).to_owned())?;
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|error| refusal(&error).to_owned())?;
    if !resolution.source.is_discovered() {
        return Err(format!(
            "the server publishes no protected-resource or authorization-server metadata, so \
             there is no token endpoint to send {what} to"
        ));
    }
    if let Some(expected) = issuer {
        let found = resolution.metadata.issuer.as_deref();
        if found.map(normalize_issuer) != Some(normalize_issuer(expected)) {
            return Err(format!(
                "the authorization server is not the issuer the definition binds {what} to, so \
                 it was not sent"
            ));
        }
    }
    Ok((manager, resolution.metadata, dpop))
}

/// `manager` holding `response`, the token a grant of our own obtained, for the client
/// `config` describes (rmcp refreshes it when it came with a refresh token).
async fn holding(
    mut manager: AuthorizationManager,
    metadata: AuthorizationMetadata,
    config: OAuthClientConfig,
    response: rmcp::transport::auth::OAuthTokenResponse,
) -> Result<AuthorizationManager, AuthError> {
    let issuer = metadata.issuer.clone();
    manager.set_metadata(metadata);
    let (client_id, scopes) = (config.client_id.clone(), config.scopes.clone());
    manager.configure_client(config)?;
    let received = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .ok();
    let store = InMemoryCredentialStore::new();
    store
        .save(
            StoredCredentials::new(client_id, Some(response), scopes, received).with_issuer(issuer),
        )
        .await?;
    manager.set_credential_store(store);
    Ok(manager)
}

/// The JWT-bearer grant's `grant_type` (RFC 7523 §2.1).
const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Runs the JWT-bearer grant (RFC 7523 §2.1) of a workload's identity token against
/// `server_url`'s authorization server, bound to `issuer` when the definition names one. The
/// token goes only to a token endpoint the server published, and not to one whose
/// authorization server lists its grants without this one. A refusal is `502
/// oauth-workload-identity-failed` naming the server and the OAuth error code, and is not
/// retried: the grant runs again only when the connection is prepared again, or once when
/// the server refuses the token it gave.
pub(crate) async fn workload_identity(
    alias: &str,
    server_url: &str,
    authorization: &PreparedAuthorization,
    http_client: reqwest::Client,
) -> Result<AuthorizedClient, Problem> {
    let failed = |why: &str| Problem {
        status: 502,
        kind: crate::model::WORKLOAD_IDENTITY_FAILED.into(),
        detail: format!(
            "server \"{alias}\" (http): the workload-identity grant failed: {why}; check the \
             identity token (its audience and expiry), the client id and the scope"
        ),
        retryable: false,
    };
    let PreparedAuthorization::WorkloadIdentity {
        assertion,
        client_id,
        scope,
        issuer,
    } = authorization
    else {
        return Err(failed("its authorization is not a workload identity"));
    };
    let (manager, metadata, dpop) =
        discover_for_grant(server_url, issuer.as_deref(), "the identity token")
            .await
            .map_err(|why| failed(&why))?;
    if let Some(grants) = metadata
        .additional_fields
        .get("grant_types_supported")
        .and_then(serde_json::Value::as_array)
        && !grants.iter().any(|grant| grant == JWT_BEARER_GRANT)
    {
        return Err(failed(
            "its authorization server does not list the JWT-bearer grant, so the identity \
             token was not sent",
        ));
    }
    let mut form = vec![
        ("grant_type", JWT_BEARER_GRANT.to_owned()),
        ("assertion", assertion.clone()),
        ("resource", server_url.to_owned()),
    ];
    if let Some(scope) = scope {
        form.push(("scope", scope.clone()));
    }
    if let Some(client_id) = client_id {
        form.push(("client_id", client_id.clone()));
    }
    let client_name = client_id.clone().unwrap_or_else(|| "workload".to_owned());
    let regrant = Regrant {
        http: http_client.clone(),
        token_endpoint: metadata.token_endpoint.clone(),
        form,
        dpop: dpop.clone(),
        latest: Mutex::default(),
        renewing: tokio::sync::Mutex::default(),
        refused: std::sync::atomic::AtomicBool::new(false),
    };
    let answer = regrant
        .grant()
        .await
        .map_err(|code| failed(&format!("the authorization server refused it ({code})")))?;
    let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(answer)
        .map_err(|_| failed("the authorization server's answer is not an OAuth token response"))?;
    let scopes: Vec<String> = scope
        .as_deref()
        .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let config = OAuthClientConfig::new(client_name, "http://127.0.0.1/").with_scopes(scopes);
    let manager = holding(manager, metadata, config, response)
        .await
        .map_err(|error| failed(refusal(&error)))?;
    let challenged = Challenged::registering(http_client, dpop).regranting(Arc::new(regrant));
    let client = AuthClient::new(challenged, manager);
    register_token(&client).await;
    Ok(client)
}

/// A workload-identity grant, to run again when the server refuses the token it gave (an
/// expired one: the grant issues no refresh token). One renewal at a time; after a refused
/// one, none: the connection fails, and a new preparation reads the identity token anew.
pub(crate) struct Regrant {
    http: reqwest::Client,
    token_endpoint: String,
    form: Vec<(&'static str, String)>,
    dpop: Arc<Dpop>,
    /// The latest token the grant gave.
    latest: Mutex<Option<String>>,
    renewing: tokio::sync::Mutex<()>,
    refused: std::sync::atomic::AtomicBool,
}

impl Regrant {
    /// One token request; the answer, or the OAuth error code of a refusal.
    async fn grant(&self) -> Result<serde_json::Value, String> {
        let answer = token_request(
            &self.http,
            &self.token_endpoint,
            "",
            None,
            &self.form,
            Some(&self.dpop),
        )
        .await;
        let token = answer
            .as_ref()
            .ok()
            .and_then(|answer| answer["access_token"].as_str())
            .map(str::to_owned);
        if let Some(token) = token {
            crate::redact::register([&token]);
            *self
                .latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(token);
        }
        answer
    }

    fn current(&self) -> Option<String> {
        self.latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A new token in place of the refused one, unless a renewal was refused before.
    async fn renew(&self) -> Option<String> {
        use std::sync::atomic::Ordering;
        let refused_token = self.current();
        let _one = self.renewing.lock().await;
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        let latest = self.current();
        if latest != refused_token {
            // Another request's renewal ran meanwhile.
            return latest;
        }
        match self.grant().await {
            Ok(_) => self.current(),
            Err(_) => {
                self.refused.store(true, Ordering::Relaxed);
                None
            }
        }
    }
}

/// Registers the client's current access and refresh tokens as secrets, so a server (or a
/// log line of rmcp's) reflecting one shows `<redacted>`.
pub(crate) async fn register_token(client: &AuthorizedClient) {
    let credentials = client.auth_manager.lock().await.get_credentials().await;
    if let Ok((_, Some(response))) = credentials
        && let Ok(fields) = serde_json::to_value(&response)
    {
        let tokens = ["access_token", "refresh_token", "id_token"]
            .into_iter()
            .filter_map(|key| fields[key].as_str().map(str::to_owned));
        crate::redact::register(tokens);
    }
}

fn normalize_issuer(issuer: &str) -> &str {
    issuer.trim_end_matches('/')
}

/// What went wrong, in words of our own: never the authorization server's error text.
fn refusal(error: &AuthError) -> &'static str {
    match error {
        AuthError::AuthorizationRequired => "authorization is required",
        AuthError::AuthorizationFailed(_) => {
            "the callback was not one of this authorization (its state, code or issuer did not check out)"
        }
        AuthError::TokenExchangeFailed(_) => "the authorization server refused the token exchange",
        AuthError::TokenRefreshFailed(_) | AuthError::TokenRefreshRejected(_) => {
            "the token could not be refreshed"
        }
        AuthError::HttpError(_) | AuthError::DiscoveryRequestFailed { .. } => {
            "the authorization server could not be reached"
        }
        AuthError::MetadataError(_)
        | AuthError::ProtectedResourceMetadataInvalid { .. }
        | AuthError::AuthorizationServersUnavailable { .. }
        | AuthError::NoAuthorizationSupport => {
            "its protected-resource or authorization-server metadata is missing or unusable"
        }
        AuthError::PkceUnsupported => "the authorization server does not support PKCE S256",
        AuthError::UrlError(_) => "a URL in the flow is not valid",
        AuthError::RegistrationFailed(_) => {
            "no client identity could be established (no pre-registered client, no client \
             metadata document support, no registration endpoint)"
        }
        AuthError::InsufficientScope { .. } | AuthError::InvalidScope(_) => {
            "the scope asked for was not granted"
        }
        AuthError::AuthorizationServerMismatch { .. }
        | AuthError::AuthorizationServerMissingIssuer { .. } => {
            "the authorization server's issuer did not match the one expected"
        }
        AuthError::ClientCredentialsError(_) => {
            "the authorization server refused the client credentials"
        }
        _ => "the OAuth flow failed",
    }
}

/// The last `WWW-Authenticate` challenge a connection's server answered with (a 401, or a
/// 403 for a scope), after rmcp's own silent refresh: what a new authorization starts from.
pub(crate) type ChallengeSlot = Arc<Mutex<Option<String>>>;

/// A Streamable HTTP client that is the client it wraps, plus: inside rmcp's [`AuthClient`]
/// (which hands it the current token, refreshed ones included), every token is registered
/// as a secret, and one bound to the authorization's DPoP key is presented with the DPoP
/// scheme and a proof; outside it, with a [`ChallengeSlot`], each challenge the server's
/// refusals carry is recorded there.
#[derive(Clone)]
pub(crate) struct Challenged<C> {
    inner: C,
    slot: Option<ChallengeSlot>,
    /// The authorization's proof key, and the client that learns a resource's nonce.
    proving: Option<(Arc<Dpop>, reqwest::Client)>,
    /// How a refused workload-identity token is replaced: the grant run again.
    regrant: Option<Arc<Regrant>>,
    /// The token registered last: a request with the same one registers nothing again.
    registered: Arc<Mutex<Option<String>>>,
}

impl<C> Challenged<C> {
    /// Records refusals' challenges in `slot`.
    pub(crate) fn new(inner: C, slot: ChallengeSlot) -> Self {
        Self {
            inner,
            slot: Some(slot),
            proving: None,
            regrant: None,
            registered: Arc::default(),
        }
    }

    /// Registers `auth_header`'s token once, when it is new (a refresh): the registry's own
    /// check computes every spelling, too much for each request.
    fn register(&self, auth_header: &Option<String>) {
        let Some(token) = auth_header else {
            return;
        };
        let mut registered = self
            .registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if registered.as_deref() != Some(token.as_str()) {
            crate::redact::register([token]);
            *registered = Some(token.clone());
        }
    }

    fn note<T, E>(
        &self,
        result: Result<T, StreamableHttpError<E>>,
    ) -> Result<T, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let Some(slot) = &self.slot else {
            return result;
        };
        if let Err(error) = &result {
            let challenge = match error {
                StreamableHttpError::AuthRequired(refused) => {
                    Some(refused.www_authenticate_header.clone())
                }
                StreamableHttpError::InsufficientScope(refused) => {
                    Some(refused.www_authenticate_header.clone())
                }
                _ => None,
            };
            if let Some(challenge) = challenge {
                *slot
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(challenge);
            }
        }
        result
    }
}

impl Challenged<reqwest::Client> {
    /// Registers the tokens it is handed, and presents those bound to `dpop`'s key with
    /// proofs of it.
    pub(crate) fn registering(inner: reqwest::Client, dpop: Arc<Dpop>) -> Self {
        Self {
            proving: Some((dpop, inner.clone())),
            inner,
            slot: None,
            regrant: None,
            registered: Arc::default(),
        }
    }

    /// Also runs `regrant` when the server refuses the token, and sends the new one.
    fn regranting(mut self, regrant: Arc<Regrant>) -> Self {
        self.regrant = Some(regrant);
        self
    }
}

impl<C: StreamableHttpClient + Sync> Challenged<C> {
    /// Sends one request through `call` (given the token to send as a bearer, and the
    /// headers): a token bound to the DPoP key goes as `Authorization: DPoP` with a fresh
    /// proof for `method` on `uri` instead, and a `use_dpop_nonce` refusal is answered once
    /// with the nonce the server gives.
    async fn present<T, F, Fut>(
        &self,
        method: &'static str,
        uri: &str,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        call: F,
    ) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>, HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        let Some(regrant) = &self.regrant else {
            return self
                .send(method, uri, auth_header, &custom_headers, &call)
                .await;
        };
        // The grant's latest token, which rmcp (holding only the first) does not know.
        let token = regrant.current().or(auth_header);
        let result = self.send(method, uri, token, &custom_headers, &call).await;
        match &result {
            Err(StreamableHttpError::AuthRequired(refused))
                if !dpop::wants_nonce(&refused.www_authenticate_header) =>
            {
                match regrant.renew().await {
                    Some(fresh) => {
                        self.send(method, uri, Some(fresh), &custom_headers, &call)
                            .await
                    }
                    None => result,
                }
            }
            _ => result,
        }
    }

    /// [`Self::present`] without the regrant.
    async fn send<T, F, Fut>(
        &self,
        method: &'static str,
        uri: &str,
        auth_header: Option<String>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
        call: &F,
    ) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>, HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        self.register(&auth_header);
        let bound = match (&self.proving, &auth_header) {
            (Some((dpop, http)), Some(token)) if dpop.binds(token) => Some((dpop, http, token)),
            _ => None,
        };
        let Some((dpop, http, token)) = bound else {
            return self.note(call(auth_header, custom_headers.clone()).await);
        };
        let proved = || {
            let mut headers = custom_headers.clone();
            let presented = dpop
                .resource_headers(method, uri, token)
                .map_err(|why| StreamableHttpError::from(AuthError::InternalError(why)))?;
            headers.extend(presented);
            Ok::<_, StreamableHttpError<C::Error>>(headers)
        };
        let result = call(None, proved()?).await;
        if let Err(StreamableHttpError::AuthRequired(refused)) = &result
            && dpop::wants_nonce(&refused.www_authenticate_header)
        {
            let version = custom_headers.get(&HeaderName::from_static("mcp-protocol-version"));
            if dpop.learn_resource_nonce(http, uri, token, version).await {
                return self.note(call(None, proved()?).await);
            }
        }
        self.note(result)
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Challenged<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.present(
            "POST",
            &uri,
            auth_header,
            custom_headers,
            |auth, headers| {
                self.inner.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    headers,
                )
            },
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.present(
            "POST",
            &uri,
            auth_header,
            custom_headers,
            |auth, headers| {
                self.inner.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    headers,
                    max_sse_event_size,
                )
            },
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.present(
            "POST",
            &uri,
            auth_header,
            custom_headers,
            |auth, headers| {
                self.inner.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    headers,
                    limits,
                )
            },
        )
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.present(
            "DELETE",
            &uri,
            auth_header,
            custom_headers,
            |auth, headers| {
                self.inner
                    .delete_session(uri.clone(), session_id.clone(), auth, headers)
            },
        )
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.present("GET", &uri, auth_header, custom_headers, |auth, headers| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth,
                headers,
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.present("GET", &uri, auth_header, custom_headers, |auth, headers| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth,
                headers,
                max_sse_event_size,
            )
        })
        .await
    }
}

/// The scopes a step-up asks for: those granted so far and those the challenge names.
async fn step_up_scopes(
    client: Option<&AuthorizedClient>,
    server_url: &str,
    challenge: &str,
) -> Vec<String> {
    let mut scopes = match client {
        Some(client) => client.auth_manager.lock().await.get_current_scopes().await,
        None => Vec::new(),
    };
    if let Ok(base) = reqwest::Url::parse(server_url) {
        let params = WWWAuthenticateParams::parse(challenge, &base);
        if let Some(required) = params.scope {
            for scope in required.split_whitespace() {
                if !scopes.iter().any(|have| have == scope) {
                    scopes.push(scope.to_owned());
                }
            }
        }
    }
    scopes
}

/// Whether the challenge asks for more scope (a 403 `insufficient_scope`).
fn is_insufficient_scope(server_url: &str, challenge: &str) -> bool {
    reqwest::Url::parse(server_url)
        .map(|base| WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope())
        .unwrap_or(false)
}

/// The device grant's `grant_type`.
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// A device authorization (RFC 8628) waiting for its person; the device code stays here.
pub(crate) struct DevicePending {
    shown: DeviceAuthorization,
    device_code: String,
    client_id: String,
    client_secret: Option<String>,
    metadata: rmcp::transport::auth::AuthorizationMetadata,
    /// The proof key of this authorization (used when its server advertises DPoP).
    dpop: Arc<Dpop>,
    server_url: String,
    scopes: Vec<String>,
    expires_at: std::time::Instant,
    definition: Arc<ServerDefinition>,
    replay: Replay,
}

/// Starts a device authorization of `server_url`: discovery (from the challenge), a client
/// identity (the pre-registered client, else dynamic registration for the device grant),
/// then the device authorization request. Refused when the authorization server advertises
/// no `device_authorization_endpoint`: there is no fallback.
pub(crate) async fn begin_device(
    attempt: Attempt<'_>,
    scope: Option<String>,
    http: reqwest::Client,
) -> Result<(), String> {
    let Attempt {
        vault,
        workspace,
        alias,
        server_url,
        definition,
        authorization,
        challenge,
    } = attempt;
    let PreparedAuthorization::OAuth {
        client_id,
        client_secret,
        scope: defined_scope,
        ..
    } = authorization
    else {
        return Err("its authorization is not interactive OAuth".to_owned());
    };
    let dpop = Dpop::new()?;
    let manager = AuthorizationManager::new_with_oauth_http_client(
        server_url,
        OAuthHttp::new(server_url, dpop.clone())?,
    )
    .await
    .map_err(|error| format!("OAuth could not start: {}", refusal(&error)))?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|error| {
            format!(
                "its authorization server was not found: {}",
                refusal(&error)
            )
        })?
        .metadata;
    let endpoint = metadata
        .additional_fields
        .get("device_authorization_endpoint")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            "its authorization server advertises no device_authorization_endpoint, so the \
             device grant cannot be used: authorize it through the browser flow (enable it)"
                .to_owned()
        })?;
    // The scope asked for, else the definition's, else the one the server's challenge names.
    let challenged = challenge.and_then(|challenge| {
        let base = reqwest::Url::parse(server_url).ok()?;
        WWWAuthenticateParams::parse(challenge, &base).scope
    });
    let scopes: Vec<String> = scope
        .or_else(|| defined_scope.clone())
        .or(challenged)
        .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let (client_id, client_secret) = match client_id {
        Some(id) => (id.clone(), client_secret.clone()),
        None => register_device_client(&http, &metadata).await?,
    };
    if let Some(secret) = &client_secret {
        crate::redact::register([secret]);
    }
    let mut form = vec![
        ("client_id", client_id.clone()),
        ("resource", server_url.to_owned()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let answer = token_request(
        &http,
        &endpoint,
        &client_id,
        client_secret.as_deref(),
        &form,
        None,
    )
    .await
    .map_err(|why| format!("the device authorization request failed: {why}"))?;
    let field = |key: &str| answer.get(key).and_then(serde_json::Value::as_str);
    let number = |key: &str| answer.get(key).and_then(serde_json::Value::as_u64);
    let (Some(device_code), Some(user_code), Some(verification_uri)) = (
        field("device_code"),
        field("user_code"),
        field("verification_uri"),
    ) else {
        return Err(
            "the authorization server's device authorization answer lacks its codes".to_owned(),
        );
    };
    crate::redact::register([device_code]);
    let expires_in = number("expires_in").unwrap_or(600).min(3600);
    let shown = DeviceAuthorization {
        verification_uri: shown(verification_uri, "verification URI")?,
        verification_uri_complete: field("verification_uri_complete")
            .map(|uri| shown(uri, "verification URI"))
            .transpose()?,
        user_code: shown(user_code, "user code")?,
        interval: number("interval").unwrap_or(5).clamp(1, 60),
        expires_in,
        device: next_handle(),
    };
    let pending = DevicePending {
        shown,
        device_code: device_code.to_owned(),
        client_id,
        client_secret,
        metadata,
        dpop,
        server_url: server_url.to_owned(),
        scopes,
        expires_at: std::time::Instant::now() + std::time::Duration::from_secs(expires_in),
        definition,
        replay: Replay::Enable(Box::default()),
    };
    vault.set_waiting(workspace, alias, Waiting::Device(Box::new(pending)));
    Ok(())
}

/// A client registered (RFC 7591) for the device grant, with no secret.
async fn register_device_client(
    http: &reqwest::Client,
    metadata: &rmcp::transport::auth::AuthorizationMetadata,
) -> Result<(String, Option<String>), String> {
    let endpoint = metadata.registration_endpoint.as_deref().ok_or_else(|| {
        "its authorization server advertises no registration_endpoint and the definition names \
         no clientId: give it a pre-registered clientId"
            .to_owned()
    })?;
    let body = serde_json::json!({
        "client_name": CLIENT_NAME,
        "grant_types": [DEVICE_GRANT, "refresh_token"],
        "response_types": [],
        "redirect_uris": [],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    let response = http
        .post(endpoint)
        .json(&body)
        .timeout(std::time::Duration::from_secs(20))
        .send()
        .await
        .map_err(|_| "its registration endpoint could not be reached".to_owned())?;
    if !response.status().is_success() {
        return Err(format!(
            "its registration endpoint refused the client ({})",
            response.status().as_u16()
        ));
    }
    let client = json_bounded(response).await?;
    let id = client["client_id"]
        .as_str()
        .ok_or_else(|| "its registration endpoint answered no client_id".to_owned())?;
    Ok((
        id.to_owned(),
        client["client_secret"].as_str().map(str::to_owned),
    ))
}

/// The most an authorization server's answer may make the host hold.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A JSON answer of at most [`MAX_ANSWER_BYTES`]; anything that is not JSON is `null`.
async fn json_bounded(response: reqwest::Response) -> Result<serde_json::Value, String> {
    match super::http::read_bounded(response, MAX_ANSWER_BYTES).await {
        Ok(body) => Ok(serde_json::from_slice(&body).unwrap_or_default()),
        Err(super::http::Bounded::TooLarge) => Err(format!(
            "the authorization server answered more than {MAX_ANSWER_BYTES} bytes"
        )),
        Err(super::http::Bounded::Failed(_)) => {
            Err("the authorization server's answer could not be read".to_owned())
        }
    }
}

/// A form POST to one of the authorization server's endpoints, authenticated as the client
/// (`client_secret_basic` with a secret); the JSON answer, or the OAuth `error` code of a
/// refusal (never its description).
async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    client_id: &str,
    client_secret: Option<&str>,
    form: &[(&str, String)],
    dpop: Option<&Dpop>,
) -> Result<serde_json::Value, String> {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let dpop = dpop.filter(|dpop| dpop.wants_proof(endpoint));
    // A `use_dpop_nonce` refusal is answered once, with the nonce it gave.
    let mut nonce_retry = dpop.is_some();
    let (status, answer) = loop {
        let mut request = http
            .post(endpoint)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(std::time::Duration::from_secs(20))
            .body(body.clone());
        if let Some(secret) = client_secret {
            // RFC 6749 §2.3.1: each form-encoded before Basic encoding.
            let encoded =
                |value: &str| form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>();
            request = request.basic_auth(encoded(client_id), Some(encoded(secret)));
        }
        if let Some(dpop) = dpop {
            let proof = dpop.proof("POST", endpoint, None, dpop::Audience::TokenEndpoint)?;
            request = request.header("dpop", proof);
        }
        let response = request
            .send()
            .await
            .map_err(|_| "the authorization server could not be reached".to_owned())?;
        let status = response.status();
        let fresh = dpop
            .is_some_and(|dpop| dpop.note_nonce(dpop::Audience::TokenEndpoint, response.headers()));
        let answer = json_bounded(response).await?;
        if nonce_retry && fresh && answer["error"] == "use_dpop_nonce" {
            nonce_retry = false;
            continue;
        }
        break (status, answer);
    };
    if status.is_success() {
        if let Some(dpop) = dpop {
            dpop.note_token(&answer);
        }
        return Ok(answer);
    }
    // The OAuth error code only, bounded to its grammar; the description is the server's.
    let code: String = answer["error"]
        .as_str()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(40)
        .collect();
    Err(if code.is_empty() {
        format!("HTTP {}", status.as_u16())
    } else {
        code
    })
}

/// A handle no other device authorization of this host has had: it only tells attempts
/// apart (polling needs the workspace handle anyway), so a counter does.
fn next_handle() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("device-{n}")
}

/// What one poll found, for the host to act on.
pub(crate) enum Polled {
    /// Not yet (or too fast, or refused, or expired): tell the caller.
    Status(DevicePoll),
    /// Approved: install this client for this definition and replay this action.
    Authorized(AuthorizedClient, Arc<ServerDefinition>, Replay),
}

/// One token request for the device authorization of `(workspace, alias)` whose handle is
/// `device`. `404 oauth-not-pending` when there is none with that handle.
pub(crate) async fn poll_device(
    vault: &Vault,
    workspace: &str,
    alias: &str,
    device: &str,
    http: reqwest::Client,
) -> Result<Polled, Problem> {
    let Some(mut pending) = vault.take_device(workspace, alias, device) else {
        return Err(Problem::oauth_not_pending(alias));
    };
    if std::time::Instant::now() >= pending.expires_at {
        return Ok(Polled::Status(DevicePoll::Expired));
    }
    let form = [
        ("grant_type", DEVICE_GRANT.to_owned()),
        ("device_code", pending.device_code.clone()),
        ("client_id", pending.client_id.clone()),
        ("resource", pending.server_url.clone()),
    ];
    let answer = token_request(
        &http,
        &pending.metadata.token_endpoint,
        &pending.client_id,
        pending.client_secret.as_deref(),
        &form,
        Some(&pending.dpop),
    )
    .await;
    let keep = |pending: DevicePending, status: DevicePoll| {
        vault.restore(workspace, alias, Waiting::Device(Box::new(pending)));
        Ok(Polled::Status(status))
    };
    let tokens = match answer {
        Ok(tokens) => tokens,
        Err(code) => {
            return match code.as_str() {
                "authorization_pending" => keep(pending, DevicePoll::Pending),
                "slow_down" => {
                    pending.shown.interval = (pending.shown.interval + 5).min(60);
                    keep(pending, DevicePoll::SlowDown)
                }
                "access_denied" => Ok(Polled::Status(DevicePoll::Denied)),
                "expired_token" => Ok(Polled::Status(DevicePoll::Expired)),
                other => {
                    let problem = Problem::server_unavailable(format!(
                        "server \"{alias}\" (http): the device authorization's token request \
                         failed ({other}); authorize again"
                    ));
                    Err(problem)
                }
            };
        }
    };
    let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(tokens)
        .map_err(|_| {
            Problem::server_unavailable(format!(
                "server \"{alias}\" (http): the authorization server's token answer is not an \
                 OAuth token response; authorize again"
            ))
        })?;
    let unusable = |why: &str| {
        Problem::server_unavailable(format!(
            "server \"{alias}\" (http): the device authorization's token could not be kept ({why})"
        ))
    };
    let oauth_http =
        OAuthHttp::new(&pending.server_url, pending.dpop.clone()).map_err(|why| unusable(&why))?;
    let manager =
        AuthorizationManager::new_with_oauth_http_client(pending.server_url.as_str(), oauth_http)
            .await
            .map_err(|error| unusable(refusal(&error)))?;
    let mut config = OAuthClientConfig::new(pending.client_id.clone(), "http://127.0.0.1/")
        .with_scopes(pending.scopes.clone());
    if let Some(secret) = &pending.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    let manager = holding(manager, pending.metadata.clone(), config, response)
        .await
        .map_err(|error| unusable(refusal(&error)))?;
    let client = AuthClient::new(Challenged::registering(http, pending.dpop), manager);
    register_token(&client).await;
    Ok(Polled::Authorized(
        client,
        pending.definition,
        pending.replay,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_an_authorization_server_makes_the_host_show_is_bounded() {
        assert_eq!(
            shown("https://as.test/device", "verification URI").as_deref(),
            Ok("https://as.test/device")
        );
        let refused = shown("u".repeat(MAX_SHOWN + 1), "user code").expect_err("too long");
        assert!(
            refused.contains("user code") && refused.contains("4096"),
            "{refused}"
        );
    }

    #[test]
    fn device_handles_tell_attempts_apart() {
        assert_ne!(next_handle(), next_handle());
    }
}
