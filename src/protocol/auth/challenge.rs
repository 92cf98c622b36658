//! What a server's refusal says and how an authorized connection answers it: the
//! `WWW-Authenticate` challenge (kept by [`Challenged`] for a reconnect to authorize again
//! from, read for a scope step-up), the token presented (with a DPoP proof when bound to the
//! authorization's key), and the workload-identity [`Regrant`] when the server refuses the
//! token the grant gave.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthClient, AuthError as RmcpAuthError, WWWAuthenticateParams};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::dpop::{self, Dpop};
use super::error::AuthError;
use super::request::token_request;
use crate::protocol::http::kept::Kept;

/// An HTTP client that attaches (and refreshes) an OAuth access token: what the transport of
/// an authorized connection sends through. Clones share one token. Every token it sends,
/// refreshed ones included, is registered as a secret on its way out.
pub(crate) type AuthorizedClient = AuthClient<Challenged<Kept>>;

/// A workload-identity grant, to run again when the server refuses the token it gave (an
/// expired one: the grant issues no refresh token). One renewal at a time; after a refused
/// one, none: the connection fails, and a new preparation reads the identity token anew.
pub(crate) struct Regrant {
    pub(super) http: reqwest::Client,
    pub(super) token_endpoint: String,
    pub(super) form: Vec<(&'static str, String)>,
    pub(super) dpop: Arc<Dpop>,
    /// The latest token the grant gave.
    pub(super) latest: Mutex<Option<String>>,
    pub(super) renewing: tokio::sync::Mutex<()>,
    pub(super) refused: std::sync::atomic::AtomicBool,
}

impl Regrant {
    /// One token request; the answer, or why there is none (a refusal's OAuth error code).
    pub(super) async fn grant(&self) -> Result<serde_json::Value, AuthError> {
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

impl Challenged<Kept> {
    /// Registers the tokens it is handed, and presents those bound to `dpop`'s key with
    /// proofs of it; a result the caller takes as written is kept whole ([`Kept`]).
    pub(crate) fn registering(inner: reqwest::Client, dpop: Arc<Dpop>) -> Self {
        Self {
            proving: Some((dpop, inner.clone())),
            inner: Kept(inner),
            slot: None,
            regrant: None,
            registered: Arc::default(),
        }
    }

    /// Also runs `regrant` when the server refuses the token, and sends the new one.
    pub(super) fn regranting(mut self, regrant: Arc<Regrant>) -> Self {
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
            let presented = dpop.resource_headers(method, uri, token).map_err(|why| {
                StreamableHttpError::from(RmcpAuthError::InternalError(why.to_string()))
            })?;
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
pub(super) async fn step_up_scopes(
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

/// The scope a challenge names, if any.
pub(super) fn challenged_scope(server_url: &str, challenge: &str) -> Option<String> {
    let base = reqwest::Url::parse(server_url).ok()?;
    WWWAuthenticateParams::parse(challenge, &base).scope
}

/// Whether the challenge asks for more scope (a 403 `insufficient_scope`).
pub(super) fn is_insufficient_scope(server_url: &str, challenge: &str) -> bool {
    reqwest::Url::parse(server_url)
        .map(|base| WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope())
        .unwrap_or(false)
}
