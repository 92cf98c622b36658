//! The device grant (RFC 8628), which rmcp lacks, for a daemon with no browser: the person
//! enters a user code at the verification URI on any device while the caller polls. Its
//! own client registration and token requests; the device code never leaves the vault.

use rmcp::transport::auth::{
    AuthClient, AuthorizationManager, AuthorizationMetadata, OAuthClientConfig, OAuthTokenResponse,
};

use super::challenge::{Challenged, challenged_scope, register_token};
use super::dpop::{Dpop, OAuthHttp};
use super::error::{AuthError, Refusal};
use super::request::{CLIENT_NAME, holding, json_bounded, shown, token_request};
use super::vault::{Attempt, DevicePending, Replay, Vault, Waiting};
use crate::config::PreparedAuthorization;
use crate::model::{DeviceAuthorization, DevicePoll, Problem};

/// The device grant's `grant_type`.
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Starts a device authorization of `server_url`: discovery (from the challenge), a client
/// identity (the pre-registered client, else dynamic registration for the device grant),
/// then the device authorization request. Refused when the authorization server advertises
/// no `device_authorization_endpoint`: there is no fallback.
pub(super) async fn begin_device(
    attempt: Attempt<'_>,
    scope: Option<String>,
    http: reqwest::Client,
) -> Result<(), AuthError> {
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
        return Err(AuthError::NotInteractive);
    };
    let dpop = Dpop::new()?;
    let (metadata, endpoint) = discover_device_endpoint(server_url, challenge, &dpop).await?;
    // The scope asked for, else the definition's, else the one the server's challenge names.
    let challenged = challenge.and_then(|challenge| challenged_scope(server_url, challenge));
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
    .map_err(|why| AuthError::DeviceRequest(Box::new(why)))?;
    let (device_code, shown) = read_device_answer(&answer)?;
    let expires_in = shown.expires_in;
    let pending = DevicePending {
        shown,
        device_code,
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

/// The authorization server's metadata, found from the server's challenge, and its device
/// authorization endpoint; refused when it advertises none.
async fn discover_device_endpoint(
    server_url: &str,
    challenge: Option<&str>,
    dpop: &std::sync::Arc<Dpop>,
) -> Result<(AuthorizationMetadata, String), AuthError> {
    let manager = AuthorizationManager::new_with_oauth_http_client(
        server_url,
        OAuthHttp::new(server_url, dpop.clone())?,
    )
    .await
    .map_err(|error| AuthError::Start(Refusal::from(&error)))?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|error| AuthError::ServerNotFound(Refusal::from(&error)))?
        .metadata;
    let endpoint = metadata
        .additional_fields
        .get("device_authorization_endpoint")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or(AuthError::NoDeviceEndpoint)?;
    Ok((metadata, endpoint))
}

/// The device code (registered as a secret) and what the person is shown, read from the
/// device authorization answer: every shown value bounded, the interval and lifetime
/// clamped.
fn read_device_answer(
    answer: &serde_json::Value,
) -> Result<(String, DeviceAuthorization), AuthError> {
    let field = |key: &str| answer.get(key).and_then(serde_json::Value::as_str);
    let number = |key: &str| answer.get(key).and_then(serde_json::Value::as_u64);
    let (Some(device_code), Some(user_code), Some(verification_uri)) = (
        field("device_code"),
        field("user_code"),
        field("verification_uri"),
    ) else {
        return Err(AuthError::DeviceAnswerIncomplete);
    };
    crate::redact::register([device_code]);
    let shown = DeviceAuthorization {
        verification_uri: shown(verification_uri, "verification URI")?,
        verification_uri_complete: field("verification_uri_complete")
            .map(|uri| shown(uri, "verification URI"))
            .transpose()?,
        user_code: shown(user_code, "user code")?,
        interval: number("interval").unwrap_or(5).clamp(1, 60),
        expires_in: number("expires_in").unwrap_or(600).min(3600),
        device: next_handle(),
    };
    Ok((device_code.to_owned(), shown))
}

/// A client registered (RFC 7591) for the device grant, with no secret.
async fn register_device_client(
    http: &reqwest::Client,
    metadata: &AuthorizationMetadata,
) -> Result<(String, Option<String>), AuthError> {
    let endpoint = metadata
        .registration_endpoint
        .as_deref()
        .ok_or(AuthError::NoRegistrationEndpoint)?;
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
        .map_err(|_| AuthError::RegistrationUnreachable)?;
    if !response.status().is_success() {
        return Err(AuthError::RegistrationRefused {
            status: response.status().as_u16(),
        });
    }
    let client = json_bounded(response).await?;
    let id = client["client_id"].as_str().ok_or(AuthError::NoClientId)?;
    Ok((
        id.to_owned(),
        client["client_secret"].as_str().map(str::to_owned),
    ))
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
    /// Approved, and its client installed: replay this action.
    Authorized(Replay),
}

/// One token request for the device authorization of `(workspace, alias)` whose handle is
/// `device`. `404 oauth-not-pending` when there is none with that handle.
pub(super) async fn poll_device(
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
    let failed = |why: AuthError| {
        Err(Problem::server_unavailable(format!(
            "server \"{alias}\" (http): the device authorization's token request failed \
             ({why}); authorize again"
        )))
    };
    // RFC 8628 §3.5: the codes a poll answers with; any other failure ends the attempt.
    let tokens = match answer {
        Ok(tokens) => tokens,
        Err(AuthError::TokenRefused(code)) => {
            return match code.as_str() {
                "authorization_pending" => keep(pending, DevicePoll::Pending),
                "slow_down" => {
                    pending.shown.interval = (pending.shown.interval + 5).min(60);
                    keep(pending, DevicePoll::SlowDown)
                }
                "access_denied" => Ok(Polled::Status(DevicePoll::Denied)),
                "expired_token" => Ok(Polled::Status(DevicePoll::Expired)),
                _ => failed(AuthError::TokenRefused(code)),
            };
        }
        Err(other) => return failed(other),
    };
    let response: OAuthTokenResponse = serde_json::from_value(tokens).map_err(|_| {
        Problem::server_unavailable(format!(
            "server \"{alias}\" (http): the authorization server's token answer is not an \
                 OAuth token response; authorize again"
        ))
    })?;
    let unusable = |why: AuthError| {
        Problem::server_unavailable(format!(
            "server \"{alias}\" (http): the device authorization's token could not be kept ({why})"
        ))
    };
    let oauth_http = OAuthHttp::new(&pending.server_url, pending.dpop.clone()).map_err(unusable)?;
    let manager =
        AuthorizationManager::new_with_oauth_http_client(pending.server_url.as_str(), oauth_http)
            .await
            .map_err(|error| unusable(AuthError::OAuth(Refusal::from(&error))))?;
    let mut config = OAuthClientConfig::new(pending.client_id.clone(), "http://127.0.0.1/")
        .with_scopes(pending.scopes.clone());
    if let Some(secret) = &pending.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    let manager = holding(manager, pending.metadata.clone(), config, response)
        .await
        .map_err(|error| unusable(AuthError::OAuth(Refusal::from(&error))))?;
    let client = AuthClient::new(Challenged::registering(http, pending.dpop), manager);
    register_token(&client).await;
    vault.install(workspace, alias, client, pending.definition);
    Ok(Polled::Authorized(pending.replay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_handles_tell_attempts_apart() {
        assert_ne!(next_handle(), next_handle());
    }
}
