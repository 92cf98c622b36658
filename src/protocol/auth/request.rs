//! The requests the host makes to an authorization server itself, and how their answers
//! are read: a token request (a form POST, authenticated as the client, with a DPoP proof
//! when the endpoint wants one), a bounded JSON answer, what of an answer may be shown,
//! and a refusal's OAuth error code (never the authorization server's text).

use rmcp::transport::auth::{
    AuthError as RmcpAuthError, AuthorizationManager, AuthorizationMetadata, CredentialStore as _,
    InMemoryCredentialStore, OAuthClientConfig, OAuthTokenResponse, StoredCredentials,
};

use super::dpop::{self, Dpop};
use super::error::{AuthError, ErrorCode};

/// The client name sent with Dynamic Client Registration.
pub(super) const CLIENT_NAME: &str = "plurnk-mcp";

/// The longest URL or code from an authorization server the host shows anyone.
pub(super) const MAX_SHOWN: usize = 4096;

/// `value` (what the authorization server gave as `what`), if it is short enough to show.
pub(super) fn shown(value: impl Into<String>, what: &'static str) -> Result<String, AuthError> {
    let value = value.into();
    if value.len() > MAX_SHOWN {
        return Err(AuthError::NotShown {
            what,
            limit: MAX_SHOWN,
        });
    }
    Ok(value)
}

/// `manager` holding `response`, the token a grant of our own obtained, for the client
/// `config` describes (rmcp refreshes it when it came with a refresh token).
pub(super) async fn holding(
    mut manager: AuthorizationManager,
    metadata: AuthorizationMetadata,
    config: OAuthClientConfig,
    response: OAuthTokenResponse,
) -> Result<AuthorizationManager, RmcpAuthError> {
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

/// The most an authorization server's answer may make the host hold.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A JSON answer of at most [`MAX_ANSWER_BYTES`]; anything that is not JSON is `null`.
pub(super) async fn json_bounded(
    response: reqwest::Response,
) -> Result<serde_json::Value, AuthError> {
    match crate::protocol::http::read_bounded(response, MAX_ANSWER_BYTES).await {
        Ok(body) => Ok(serde_json::from_slice(&body).unwrap_or_default()),
        Err(crate::protocol::http::Bounded::TooLarge) => Err(AuthError::AnswerTooLarge {
            limit: MAX_ANSWER_BYTES,
        }),
        Err(crate::protocol::http::Bounded::Failed(_)) => Err(AuthError::AnswerUnreadable),
    }
}

/// A form POST to one of the authorization server's endpoints, authenticated as the client
/// (`client_secret_basic` with a secret); the JSON answer, or the OAuth `error` code of a
/// refusal (never its description), else its status.
pub(super) async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    client_id: &str,
    client_secret: Option<&str>,
    form: &[(&str, String)],
    dpop: Option<&Dpop>,
) -> Result<serde_json::Value, AuthError> {
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
        let response = request.send().await.map_err(|_| AuthError::Unreachable)?;
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
    Err(match ErrorCode::of(&answer) {
        Some(code) => AuthError::TokenRefused(code),
        None => AuthError::TokenStatus(status.as_u16()),
    })
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
        assert_eq!(
            refused,
            AuthError::NotShown {
                what: "user code",
                limit: MAX_SHOWN
            }
        );
        let refused = refused.to_string();
        assert!(
            refused.contains("user code") && refused.contains("4096") && !refused.contains("uuu"),
            "{refused}"
        );
    }
}
