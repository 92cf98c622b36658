//! The machine grants, where no person takes part: client credentials (an application
//! principal) and the JWT-bearer grant of a workload's identity token (RFC 7523), which
//! rmcp lacks outside enterprise-managed authorization. Each sends a credential of its own,
//! so each sends it only to a token endpoint the server published.

use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{
    AuthClient, AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig,
    OAuthClientConfig, OAuthTokenResponse,
};

use super::challenge::{AuthorizedClient, Challenged, Regrant, register_token};
use super::dpop::{Dpop, OAuthHttp};
use super::error::{AuthError, Refusal};
use super::request::holding;
use crate::config::PreparedAuthorization;
use crate::model::Problem;

/// Runs the client-credentials grant against `server_url`'s authorization server
/// (`client_secret_basic` when the server advertises only it, else the body form rmcp
/// prefers), bound to `issuer` when the definition names one. A refusal is `502
/// oauth-client-credentials-failed` naming only the server and the client id.
pub(super) async fn client_credentials(
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
    let failed = |why: AuthError| Problem {
        listing: false,
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
            .map_err(failed)?;
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
    let refused = |error| failed(AuthError::OAuth(Refusal::from(&error)));
    manager
        .validate_client_credentials_metadata(&config)
        .map_err(refused)?;
    manager
        .configure_client_credentials(&config)
        .map_err(refused)?;
    manager
        .exchange_client_credentials(&config)
        .await
        .map_err(refused)?;
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
    what: &'static str,
) -> Result<(AuthorizationManager, AuthorizationMetadata, Arc<Dpop>), AuthError> {
    let dpop = Dpop::new()?;
    let oauth_http = OAuthHttp::new(server_url, dpop.clone())?;
    let manager = AuthorizationManager::new_with_oauth_http_client(server_url, oauth_http)
        .await
        .map_err(|error| AuthError::OAuth(Refusal::from(&error)))?;
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|error| AuthError::OAuth(Refusal::from(&error)))?;
    if !resolution.source.is_discovered() {
        return Err(AuthError::NoMetadata { what });
    }
    if let Some(expected) = issuer {
        let found = resolution.metadata.issuer.as_deref();
        if found.map(normalize_issuer) != Some(normalize_issuer(expected)) {
            return Err(AuthError::WrongIssuer { what });
        }
    }
    Ok((manager, resolution.metadata, dpop))
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
pub(super) async fn workload_identity(
    alias: &str,
    server_url: &str,
    authorization: &PreparedAuthorization,
    http_client: reqwest::Client,
) -> Result<AuthorizedClient, Problem> {
    let failed = |why: AuthError| Problem {
        listing: false,
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
        return Err(failed(AuthError::NotWorkloadIdentity));
    };
    let (manager, metadata, dpop) =
        discover_for_grant(server_url, issuer.as_deref(), "the identity token")
            .await
            .map_err(failed)?;
    if let Some(grants) = metadata
        .additional_fields
        .get("grant_types_supported")
        .and_then(serde_json::Value::as_array)
        && !grants.iter().any(|grant| grant == JWT_BEARER_GRANT)
    {
        return Err(failed(AuthError::NoJwtBearer));
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
        .map_err(|why| failed(AuthError::GrantRefused(Box::new(why))))?;
    let response: OAuthTokenResponse =
        serde_json::from_value(answer).map_err(|_| failed(AuthError::NotTokenResponse))?;
    let scopes: Vec<String> = scope
        .as_deref()
        .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let config = OAuthClientConfig::new(client_name, "http://127.0.0.1/").with_scopes(scopes);
    let manager = holding(manager, metadata, config, response)
        .await
        .map_err(|error| failed(AuthError::OAuth(Refusal::from(&error))))?;
    let challenged = Challenged::registering(http_client, dpop).regranting(Arc::new(regrant));
    let client = AuthClient::new(challenged, manager);
    register_token(&client).await;
    Ok(client)
}

fn normalize_issuer(issuer: &str) -> &str {
    issuer.trim_end_matches('/')
}
