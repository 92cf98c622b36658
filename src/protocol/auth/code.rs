//! The interactive flow: authorization code with PKCE, through the person's browser.
//! [`begin`] records a pending authorization whose URL goes to the operator (there is no
//! callback listener); [`complete`] finishes it with the complete callback URL.

use std::sync::Arc;

use rmcp::transport::auth::{AuthClient, AuthorizationRequest, OAuthState};

use super::challenge::{
    AuthorizedClient, Challenged, is_insufficient_scope, register_token, step_up_scopes,
};
use super::dpop::{Dpop, OAuthHttp};
use super::error::{AuthError, Refusal};
use super::request::{CLIENT_NAME, shown};
use super::vault::{Attempt, MAX_STEP_UPS, Pending, Replay, Waiting};
use crate::config::{PreparedAuthorization, ServerDefinition};
use crate::model::Problem;

/// Starts an interactive authorization of `server_url` for `definition` and records it as
/// the pending one of `(workspace, alias)`. `challenge` is the `WWW-Authenticate` value of
/// the server's 401 or 403, which seeds discovery. A 403 `insufficient_scope` is a step-up:
/// it asks for the scopes granted so far and those the challenge names, at most
/// [`MAX_STEP_UPS`] times for one authorization. Its URL is the vault's
/// [`Vault::pending`](super::Vault::pending).
pub(super) async fn begin(attempt: Attempt<'_>) -> Result<(), AuthError> {
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
        return Err(AuthError::TooManyStepUps {
            limit: MAX_STEP_UPS,
        });
    }
    let PreparedAuthorization::OAuth {
        redirect_url,
        client_metadata_url,
        client_id,
        client_secret,
        scope,
    } = authorization
    else {
        return Err(AuthError::NotInteractive);
    };
    let Some(redirect_url) = redirect_url else {
        return Err(AuthError::NoRedirect);
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
    .map_err(|error| AuthError::Start(Refusal::from(&error)))?;
    state
        .start_authorization(request)
        .await
        .map_err(|error| AuthError::AuthorizationStart(Refusal::from(&error)))?;
    let url = state
        .get_authorization_url()
        .await
        .map_err(|error| AuthError::AuthorizationUrl(Refusal::from(&error)))?;
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

/// Finishes `pending` with the complete callback URL (state, `code` and `iss` validated by
/// rmcp against the attempt that made it). When the callback is refused the pending
/// authorization is handed back (a superseded or forged callback does not burn the real
/// one); the Problem echoes nothing the authorization server or the callback said.
pub(super) async fn complete(
    mut pending: Pending,
    alias: &str,
    callback_url: &str,
    http_client: reqwest::Client,
) -> Result<(AuthorizedClient, Arc<ServerDefinition>, Replay), Box<(Option<Pending>, Problem)>> {
    let refused = |detail: AuthError| Problem {
        listing: false,
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
        let problem = refused(AuthError::OAuth(Refusal::from(&error)));
        return Err(Box::new((Some(pending), problem)));
    }
    let (definition, replay, dpop) = (pending.definition, pending.replay, pending.dpop);
    let Some(manager) = pending.state.into_authorization_manager() else {
        return Err(Box::new((None, refused(AuthError::NoUsableState))));
    };
    let client = AuthClient::new(Challenged::registering(http_client, dpop), manager);
    register_token(&client).await;
    Ok((client, definition, replay))
}
