//! DPoP (RFC 9449): proof-of-possession for OAuth tokens, when an authorization server
//! advertises it.
//!
//! rmcp has no DPoP, so this module adds what it lacks at the two places rmcp lets a host in:
//!
//! - [`OAuthHttp`], the [`OAuthHttpClient`] every OAuth request of an authorization goes
//!   through (discovery, registration, the token requests). It watches the
//!   authorization-server metadata go by; when that advertises `ES256` in
//!   `dpop_signing_alg_values_supported`, every request to its `token_endpoint` carries a
//!   fresh proof, a `use_dpop_nonce` refusal is answered once with the nonce it gave (§8),
//!   and a token the server issues as `token_type: DPoP` is remembered as bound.
//! - [`Dpop::resource_headers`], used by the connection's HTTP client: a bound token is sent
//!   as `Authorization: DPoP <token>` with a proof of its own (`ath` binds it to the token),
//!   and a server's `use_dpop_nonce` challenge is answered once (§9).
//!
//! The key is an ECDSA P-256 key made for one authorization and held in process memory
//! only, like the tokens bound to it: refreshes prove the same key, and a new authorization
//! makes a new one. Bound tokens are remembered by their `ath` (a hash), never in clear.
//!
//! [`OAuthHttp`] also applies the host's address rule ([`AddressRule`]) to OAuth requests
//! (rmcp applies it only to its own client): a name an authorization server or a server's
//! metadata gives may resolve to a loopback or private address only when the server's own
//! URL is of that class, and never to a link-local or otherwise reserved one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};

use super::error::AuthError;
use crate::protocol::address::AddressRule;

/// The only proof algorithm the host signs with.
const ALG: &str = "ES256";

/// The most one authorization-server answer may make the host hold (as rmcp's own client).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The most redirects one OAuth request follows, when it follows any.
const MAX_REDIRECTS: usize = 10;

/// How long one OAuth request may take when rmcp names no time.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How many token endpoints and bound tokens one authorization remembers.
const MAX_REMEMBERED: usize = 8;

/// The longest nonce the host keeps.
const MAX_NONCE: usize = 512;

/// One authorization's proof key and what it has learnt: which token endpoints want proofs,
/// the nonces the authorization server and the resource gave, and which tokens are bound.
pub(crate) struct Dpop {
    key: EcdsaKeyPair,
    /// The public key as a JWK (`kty`, `crv`, `x`, `y`): what every proof carries.
    jwk: serde_json::Value,
    rng: SystemRandom,
    learnt: Mutex<Learnt>,
}

#[derive(Default)]
struct Learnt {
    /// Token endpoints whose metadata advertised `ES256` proofs.
    token_endpoints: Vec<String>,
    /// The authorization server's latest `DPoP-Nonce`.
    server_nonce: Option<String>,
    /// The resource's latest `DPoP-Nonce`.
    resource_nonce: Option<String>,
    /// The `ath` of each token issued as `token_type: DPoP`.
    bound: Vec<String>,
}

impl std::fmt::Debug for Dpop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dpop(..)")
    }
}

/// Which nonce a proof carries.
#[derive(Clone, Copy)]
pub(crate) enum Audience {
    /// The authorization server's token endpoint.
    TokenEndpoint,
    /// The MCP server.
    Resource,
}

impl Dpop {
    /// A new key for one authorization.
    pub(crate) fn new() -> Result<Arc<Self>, AuthError> {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .map_err(|_| AuthError::DpopKey)?;
        // An uncompressed P-256 point: 0x04, then x and y of 32 bytes each.
        let point = key.public_key().as_ref();
        if point.len() != 65 || point[0] != 4 {
            return Err(AuthError::DpopPoint);
        }
        let jwk = serde_json::json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Ok(Arc::new(Self {
            key,
            jwk,
            rng: SystemRandom::new(),
            learnt: Mutex::default(),
        }))
    }

    fn learnt(&self) -> std::sync::MutexGuard<'_, Learnt> {
        self.learnt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A proof (RFC 9449 §4.2) for one request: `method` on `url` (its query and fragment
    /// left out), bound to `access_token` when one is presented, with the latest nonce of
    /// `audience` when one was given.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        audience: Audience,
    ) -> Result<String, AuthError> {
        let mut htu = reqwest::Url::parse(url).map_err(|_| AuthError::DpopTarget)?;
        htu.set_query(None);
        htu.set_fragment(None);
        let mut jti = [0u8; 16];
        self.rng
            .fill(&mut jti)
            .map_err(|_| AuthError::DpopIdentifier)?;
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_secs())
            .unwrap_or_default();
        let mut claims = serde_json::json!({
            "jti": URL_SAFE_NO_PAD.encode(jti),
            "htm": method,
            "htu": htu.as_str(),
            "iat": iat,
        });
        if let Some(token) = access_token {
            claims["ath"] = ath(token).into();
        }
        let nonce = match audience {
            Audience::TokenEndpoint => self.learnt().server_nonce.clone(),
            Audience::Resource => self.learnt().resource_nonce.clone(),
        };
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let header = serde_json::json!({ "typ": "dpop+jwt", "alg": ALG, "jwk": self.jwk });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| AuthError::DpopSignature)?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// Records what an authorization-server metadata document says about DPoP: its token
    /// endpoint wants proofs when it advertises `ES256`, and no longer when it does not.
    fn note_metadata(&self, document: &serde_json::Value) {
        let Some(endpoint) = document["token_endpoint"].as_str() else {
            return;
        };
        let endpoint = without_query(endpoint);
        let advertised = document["dpop_signing_alg_values_supported"]
            .as_array()
            .is_some_and(|algs| algs.iter().any(|alg| alg.as_str() == Some(ALG)));
        let mut learnt = self.learnt();
        learnt.token_endpoints.retain(|known| *known != endpoint);
        if advertised {
            remember(&mut learnt.token_endpoints, endpoint);
        }
    }

    /// Whether a POST to `url` is a token request that carries a proof.
    pub(super) fn wants_proof(&self, url: &str) -> bool {
        let url = without_query(url);
        self.learnt().token_endpoints.contains(&url)
    }

    /// Records a token endpoint's answer: the token it issued is bound when its type is DPoP.
    pub(super) fn note_token(&self, answer: &serde_json::Value) {
        let bound = answer["token_type"]
            .as_str()
            .is_some_and(|kind| kind.eq_ignore_ascii_case("dpop"));
        if let (true, Some(token)) = (bound, answer["access_token"].as_str()) {
            remember(&mut self.learnt().bound, ath(token));
        }
    }

    pub(super) fn note_nonce(
        &self,
        audience: Audience,
        headers: &reqwest::header::HeaderMap,
    ) -> bool {
        let Some(nonce) = headers
            .get("dpop-nonce")
            .and_then(|value| value.to_str().ok())
            .filter(|nonce| !nonce.is_empty() && nonce.len() <= MAX_NONCE)
        else {
            return false;
        };
        crate::redact::register([nonce]);
        let mut learnt = self.learnt();
        let slot = match audience {
            Audience::TokenEndpoint => &mut learnt.server_nonce,
            Audience::Resource => &mut learnt.resource_nonce,
        };
        *slot = Some(nonce.to_owned());
        true
    }

    /// Whether `token` was issued bound to this key.
    pub(crate) fn binds(&self, token: &str) -> bool {
        self.learnt().bound.contains(&ath(token))
    }

    /// The headers that present `token` to the resource for `method` on `url`: the DPoP
    /// scheme and a fresh proof.
    pub(crate) fn resource_headers(
        &self,
        method: &str,
        url: &str,
        token: &str,
    ) -> Result<[(reqwest::header::HeaderName, reqwest::header::HeaderValue); 2], AuthError> {
        let proof = self.proof(method, url, Some(token), Audience::Resource)?;
        let value = |text: String| {
            reqwest::header::HeaderValue::from_str(&text)
                .map(|mut value| {
                    value.set_sensitive(true);
                    value
                })
                .map_err(|_| AuthError::DpopHeader)
        };
        Ok([
            (
                reqwest::header::AUTHORIZATION,
                value(format!("DPoP {token}"))?,
            ),
            (
                reqwest::header::HeaderName::from_static("dpop"),
                value(proof)?,
            ),
        ])
    }

    /// Learns the resource's nonce after it refused a proof with `use_dpop_nonce`: rmcp's
    /// client keeps only the refusal's `WWW-Authenticate`, not its `DPoP-Nonce`, so the host
    /// asks once more itself, with a `ping` (harmless if the server answers it). Whether a
    /// new nonce was learnt.
    pub(crate) async fn learn_resource_nonce(
        &self,
        http: &reqwest::Client,
        url: &str,
        token: &str,
        protocol_version: Option<&reqwest::header::HeaderValue>,
    ) -> bool {
        let Ok(headers) = self.resource_headers("POST", url, token) else {
            return false;
        };
        let mut request = http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .timeout(Duration::from_secs(10))
            .body(r#"{"jsonrpc":"2.0","id":"dpop-nonce","method":"ping"}"#);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(version) = protocol_version {
            request = request.header("mcp-protocol-version", version.clone());
        }
        match request.send().await {
            Ok(response) => self.note_nonce(Audience::Resource, response.headers()),
            Err(_) => false,
        }
    }
}

/// Whether a challenge asks for a (new) DPoP nonce.
pub(crate) fn wants_nonce(challenge: &str) -> bool {
    challenge.to_ascii_lowercase().contains("use_dpop_nonce")
}

/// `base64url(SHA-256(token))`: the `ath` claim (RFC 9449 §4.2).
fn ath(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        token.as_bytes(),
    ))
}

/// The form fields of an OAuth request that are credentials.
const FORM_CREDENTIALS: [&str; 7] = [
    "code",
    "code_verifier",
    "refresh_token",
    "client_secret",
    "assertion",
    "client_assertion",
    "device_code",
];

/// Registers as secrets the credentials an OAuth request's form carries, whichever of
/// rmcp's requests it is: none of them may then appear anywhere the host lets text out.
pub(super) fn register_form_credentials(body: &[u8]) {
    let values: Vec<String> = form_urlencoded::parse(body)
        .filter(|(key, _)| FORM_CREDENTIALS.contains(&key.as_ref()))
        .map(|(_, value)| value.into_owned())
        .collect();
    crate::redact::register(values);
}

/// Registers as secrets the tokens an authorization server's answer carries (a refresh
/// rotates the refresh token, too).
pub(super) fn register_answer_credentials(answer: &serde_json::Value) {
    let tokens = ["access_token", "refresh_token", "id_token"]
        .into_iter()
        .filter_map(|key| answer[key].as_str().map(str::to_owned));
    crate::redact::register(tokens);
}

fn without_query(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

fn remember(list: &mut Vec<String>, value: String) {
    if !list.contains(&value) {
        if list.len() >= MAX_REMEMBERED {
            list.remove(0);
        }
        list.push(value);
    }
}

/// The HTTP client of one authorization's OAuth requests: rmcp's requests, sent with the
/// host's address rule, with DPoP proofs where the authorization server asks for them.
pub(crate) struct OAuthHttp {
    follow: reqwest::Client,
    stop: reqwest::Client,
    rule: AddressRule,
    dpop: Arc<Dpop>,
}

impl OAuthHttp {
    /// The client for authorizing the server at `server_url`, proving `dpop`'s key.
    pub(crate) fn new(server_url: &str, dpop: Arc<Dpop>) -> Result<Arc<Self>, AuthError> {
        let base = reqwest::Url::parse(server_url).map_err(|_| AuthError::ServerUrl)?;
        let rule = AddressRule::of(&base);
        let follow_rule = rule.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            // Behind a proxy a redirect's name would reach the proxy unjudged: only the host
            // the request was judged for may be followed.
            let elsewhere = follow_rule.proxied()
                && attempt.previous().first().map(reqwest::Url::host_str)
                    != Some(attempt.url().host_str());
            if !follow_rule.allows_url(attempt.url()) || elsewhere {
                attempt.error(AuthError::RedirectRefused)
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(AuthError::TooManyRedirects)
            } else {
                attempt.follow()
            }
        });
        let build = |redirect| {
            reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .redirect(redirect)
                .dns_resolver(Arc::new(rule.clone()))
                .build()
                .map_err(|_| AuthError::NoHttpClient)
        };
        Ok(Arc::new(Self {
            follow: build(follow)?,
            stop: build(reqwest::redirect::Policy::none())?,
            rule,
            dpop,
        }))
    }

    async fn send(
        &self,
        request: OAuthHttpRequest,
    ) -> Result<::http::Response<Vec<u8>>, OAuthHttpClientError> {
        let OAuthHttpRequest {
            request,
            redirect_policy,
            timeout,
            ..
        } = request;
        let client = match redirect_policy {
            OAuthHttpRedirectPolicy::Stop => &self.stop,
            _ => &self.follow,
        };
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        // An address in the URL itself never goes through the resolver, nor does a name a
        // proxy resolves: both are judged here, before the request is made.
        if let Ok(parsed) = reqwest::Url::parse(&url)
            && self.rule.judge(&parsed).await.is_err()
        {
            return Err(AuthError::AddressRefused.into());
        }
        if parts.method == reqwest::Method::POST {
            register_form_credentials(&body);
        }
        let proved = parts.method == reqwest::Method::POST && self.dpop.wants_proof(&url);
        let mut nonce_retry = proved;
        loop {
            let mut builder = client
                .request(parts.method.clone(), url.as_str())
                .headers(parts.headers.clone())
                .timeout(timeout.unwrap_or(REQUEST_TIMEOUT))
                .body(body.clone());
            if proved {
                let proof = self
                    .dpop
                    .proof("POST", &url, None, Audience::TokenEndpoint)?;
                builder = builder.header("dpop", proof);
            }
            let response = builder.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let version = response.version();
            let answer = match crate::protocol::http::read_bounded(response, MAX_ANSWER_BYTES).await
            {
                Ok(answer) => answer,
                Err(crate::protocol::http::Bounded::TooLarge) => {
                    return Err(AuthError::OAuthAnswerTooLarge {
                        limit: MAX_ANSWER_BYTES,
                    }
                    .into());
                }
                Err(crate::protocol::http::Bounded::Failed(error)) => return Err(error.into()),
            };
            let json = || serde_json::from_slice::<serde_json::Value>(&answer).ok();
            if status.is_success()
                && let Some(answer) = json()
            {
                register_answer_credentials(&answer);
            }
            if proved {
                let fresh = self.dpop.note_nonce(Audience::TokenEndpoint, &headers);
                if status.is_success() {
                    if let Some(answer) = json() {
                        self.dpop.note_token(&answer);
                    }
                } else if nonce_retry
                    && fresh
                    && json().is_some_and(|answer| answer["error"] == "use_dpop_nonce")
                {
                    nonce_retry = false;
                    continue;
                }
            } else if parts.method == reqwest::Method::GET
                && status.is_success()
                && let Some(document) = json()
            {
                self.dpop.note_metadata(&document);
            }
            let mut reply = ::http::Response::builder().status(status).version(version);
            for (name, value) in &headers {
                reply = reply.header(name, value);
            }
            return Ok(reply.body(answer)?);
        }
    }
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(self.send(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(part: &str) -> serde_json::Value {
        let bytes = URL_SAFE_NO_PAD.decode(part).expect("base64url");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn a_proof_is_signed_by_the_key_it_carries_and_names_its_request() {
        let dpop = Dpop::new().expect("a key");
        dpop.learnt().resource_nonce = Some("resource-nonce".into());
        let proof = dpop
            .proof(
                "POST",
                "https://mcp.example/mcp?x=1#f",
                Some("the-token"),
                Audience::Resource,
            )
            .expect("a proof");
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = decode(parts[0]);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        let claims = decode(parts[1]);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(
            claims["htu"], "https://mcp.example/mcp",
            "no query or fragment"
        );
        assert_eq!(claims["ath"], ath("the-token"));
        assert_eq!(claims["nonce"], "resource-nonce");
        // The token endpoint's nonce is its own: none learnt yet.
        let other = dpop
            .proof(
                "POST",
                "https://as.example/token",
                None,
                Audience::TokenEndpoint,
            )
            .expect("a proof");
        let other_claims = decode(other.split('.').nth(1).expect("claims"));
        assert!(other_claims.get("nonce").is_none() && other_claims.get("ath").is_none());
        assert_ne!(other_claims["jti"], claims["jti"], "a fresh jti per proof");
        // The signature verifies against the public key in the header.
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        for coordinate in ["x", "y"] {
            let bytes = URL_SAFE_NO_PAD
                .decode(jwk[coordinate].as_str().expect("a coordinate"))
                .expect("base64url");
            point.extend(bytes);
        }
        let key = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
            point,
        );
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).expect("base64url");
        let input = format!("{}.{}", parts[0], parts[1]);
        assert!(key.verify(input.as_bytes(), &signature).is_ok());
        assert!(key.verify(b"something else", &signature).is_err());
    }

    #[test]
    fn only_a_token_endpoint_that_advertises_es256_gets_proofs_and_only_dpop_tokens_are_bound() {
        let dpop = Dpop::new().expect("a key");
        let endpoint = "https://as.example/token";
        dpop.note_metadata(&serde_json::json!({
            "token_endpoint": endpoint,
            "dpop_signing_alg_values_supported": ["RS256"],
        }));
        assert!(!dpop.wants_proof(endpoint), "no ES256, no proofs");
        dpop.note_metadata(&serde_json::json!({
            "token_endpoint": endpoint,
            "dpop_signing_alg_values_supported": ["ES256", "EdDSA"],
        }));
        assert!(dpop.wants_proof(endpoint));
        assert!(!dpop.wants_proof("https://as.example/other"));
        dpop.note_metadata(&serde_json::json!({ "token_endpoint": endpoint }));
        assert!(!dpop.wants_proof(endpoint), "a newer document without DPoP");

        dpop.note_token(&serde_json::json!({"access_token": "bearer-one", "token_type": "Bearer"}));
        dpop.note_token(&serde_json::json!({"access_token": "bound-one", "token_type": "DPoP"}));
        assert!(!dpop.binds("bearer-one"));
        assert!(dpop.binds("bound-one"));
        assert!(!format!("{dpop:?}").contains("bound-one"));
    }

    #[test]
    fn every_credential_an_oauth_request_or_answer_carries_is_registered() {
        register_form_credentials(
            b"grant_type=authorization_code&code=code-SENTINEL-4411&code_verifier=verifier-SENTINEL-4412&redirect_uri=http%3A%2F%2Flocalhost%2Fcb",
        );
        register_answer_credentials(&serde_json::json!({
            "access_token": "access-SENTINEL-4413",
            "refresh_token": "rotated-SENTINEL-4414",
            "token_type": "Bearer",
        }));
        let text = "code-SENTINEL-4411 verifier-SENTINEL-4412 access-SENTINEL-4413 \
                    rotated-SENTINEL-4414 http://localhost/cb";
        let scrubbed = crate::redact::scrub(text);
        assert!(!scrubbed.contains("SENTINEL"), "{scrubbed}");
        assert!(
            scrubbed.contains("http://localhost/cb"),
            "not a credential: {scrubbed}"
        );
    }

    #[test]
    fn a_nonce_challenge_is_told_from_other_refusals() {
        assert!(wants_nonce(
            r#"DPoP error="use_dpop_nonce", resource_metadata="x""#
        ));
        assert!(!wants_nonce(r#"DPoP error="invalid_token""#));
    }
}
