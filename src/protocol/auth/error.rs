//! Why a step of an authorization failed, in words of our own: [`AuthError`], one variant
//! per expected condition of the wing's steps; [`Refusal`], what an error of rmcp's OAuth is
//! read as; [`ErrorCode`], the only words of an authorization server's refusal the host
//! repeats.
//!
//! The face turns an [`AuthError`] into a Problem's detail; nothing outside the wing sees
//! one. No variant holds a credential or an authorization server's text, so neither its
//! message nor its `Debug` can show one.

use rmcp::transport::auth::AuthError as RmcpAuthError;

/// Why one step of an authorization failed.
///
/// Every message is lower case and names what failed. None carries a token, a secret, a
/// code or the authorization server's own words: of a refusal only its OAuth error code is
/// kept ([`ErrorCode`]), and a value too long to show is named, never shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AuthError {
    // === DPoP ===
    /// The authorization's P-256 key could not be generated.
    #[error("no DPoP key could be made")]
    DpopKey,
    /// The generated key's public point is not the 65-byte uncompressed form a JWK needs.
    #[error("the DPoP key's public point is not an uncompressed P-256 point")]
    DpopPoint,
    /// The URL a proof is for does not parse.
    #[error("a DPoP target is not a URL")]
    DpopTarget,
    /// No random `jti` could be drawn.
    #[error("no DPoP proof identifier could be made")]
    DpopIdentifier,
    /// The key refused to sign.
    #[error("a DPoP proof could not be signed")]
    DpopSignature,
    /// A proof or a bound token is not a valid header value.
    #[error("a DPoP header is not a header value")]
    DpopHeader,

    // === The OAuth HTTP client ===
    /// The server's URL, which the address rule is judged against, does not parse.
    #[error("its URL is not a URL")]
    ServerUrl,
    /// reqwest could not build the client.
    #[error("no HTTP client for OAuth could be made")]
    NoHttpClient,
    /// An OAuth request's URL names an address the rule refuses.
    #[error("an OAuth request named an address not allowed")]
    AddressRefused,
    /// A redirect of an OAuth request names an address the rule refuses.
    #[error("a redirect of an OAuth request named an address not allowed")]
    RedirectRefused,
    /// An OAuth request was redirected more than the host follows.
    #[error("an OAuth request was redirected too many times")]
    TooManyRedirects,
    /// An answer to one of rmcp's OAuth requests was longer than `limit` bytes.
    #[error("an OAuth answer was longer than {limit} bytes")]
    OAuthAnswerTooLarge {
        /// The most one answer may make the host hold.
        limit: usize,
    },

    // === The host's own requests and their answers ===
    /// The authorization server did not answer the host's own request.
    #[error("the authorization server could not be reached")]
    Unreachable,
    /// An answer to the host's own request was longer than `limit` bytes.
    #[error("the authorization server answered more than {limit} bytes")]
    AnswerTooLarge {
        /// The most one answer may make the host hold.
        limit: usize,
    },
    /// An answer's body could not be read.
    #[error("the authorization server's answer could not be read")]
    AnswerUnreadable,
    /// A token request refused with an OAuth error code: the code alone.
    #[error("{0}")]
    TokenRefused(ErrorCode),
    /// A token request refused with no OAuth error code: its HTTP status.
    #[error("HTTP {0}")]
    TokenStatus(u16),
    /// A value the authorization server gave for a person to see (`what`) is longer than
    /// `limit` bytes.
    #[error(
        "its authorization server's {what} is longer than {limit} bytes, so it is not shown; \
         check the server's OAuth metadata"
    )]
    NotShown {
        /// What the value is, such as `user code`.
        what: &'static str,
        /// The longest value shown.
        limit: usize,
    },

    // === rmcp's steps ===
    /// A step rmcp runs (discovery, client configuration, the exchange) failed.
    #[error("{0}")]
    OAuth(Refusal),
    /// rmcp's OAuth state could not be made (discovery from the server's URL).
    #[error("OAuth could not start: {0}")]
    Start(Refusal),
    /// The authorization request could not be prepared (client identity, scopes, PKCE).
    #[error("its authorization could not start: {0}")]
    AuthorizationStart(Refusal),
    /// The authorization URL could not be made.
    #[error("its authorization URL could not be made: {0}")]
    AuthorizationUrl(Refusal),
    /// Discovery from the server's challenge found no authorization server.
    #[error("its authorization server was not found: {0}")]
    ServerNotFound(Refusal),

    // === The flows ===
    /// An interactive flow (browser or device) was asked of an authorization that is not
    /// interactive OAuth.
    #[error("its authorization is not interactive OAuth")]
    NotInteractive,
    /// A browser authorization of a definition that gives no redirect URL.
    #[error(
        "its authorization gives no redirectUrl, which a browser authorization needs: set \
         authorization.redirectUrl, or authorize it with the device grant"
    )]
    NoRedirect,
    /// A callback rmcp accepted left no authorization manager to hold the token.
    #[error("the authorization ended in no usable state")]
    NoUsableState,
    /// The server asked for more scope `limit` times in a row.
    #[error(
        "it asked for more scope {limit} times in a row, so no further approval is asked for: \
         grant the scope it needs in its definition's `scope`, or disable and enable it to \
         start over"
    )]
    TooManyStepUps {
        /// The most step-ups one authorization makes.
        limit: u32,
    },
    /// A grant that sends a credential (`what`) found no published metadata, so no token
    /// endpoint to send it to.
    #[error(
        "the server publishes no protected-resource or authorization-server metadata, so there \
         is no token endpoint to send {what} to"
    )]
    NoMetadata {
        /// The credential, such as `the secret`.
        what: &'static str,
    },
    /// The authorization server is not the issuer the definition binds the credential
    /// (`what`) to.
    #[error(
        "the authorization server is not the issuer the definition binds {what} to, so it was \
         not sent"
    )]
    WrongIssuer {
        /// The credential, such as `the identity token`.
        what: &'static str,
    },
    /// The workload-identity grant was asked of another kind of authorization.
    #[error("its authorization is not a workload identity")]
    NotWorkloadIdentity,
    /// The authorization server lists its grants, without the JWT-bearer one.
    #[error(
        "its authorization server does not list the JWT-bearer grant, so the identity token \
         was not sent"
    )]
    NoJwtBearer,
    /// The JWT-bearer token request failed.
    #[error("the authorization server refused it ({0})")]
    GrantRefused(Box<AuthError>),
    /// A token endpoint's success is not a token response.
    #[error("the authorization server's answer is not an OAuth token response")]
    NotTokenResponse,
    /// The authorization server advertises no `device_authorization_endpoint`.
    #[error(
        "its authorization server advertises no device_authorization_endpoint, so the device \
         grant cannot be used: authorize it through the browser flow (enable it)"
    )]
    NoDeviceEndpoint,
    /// No client id is configured and the authorization server offers no registration.
    #[error(
        "its authorization server advertises no registration_endpoint and the definition names \
         no clientId: give it a pre-registered clientId"
    )]
    NoRegistrationEndpoint,
    /// The registration endpoint did not answer.
    #[error("its registration endpoint could not be reached")]
    RegistrationUnreachable,
    /// The registration endpoint refused the client with HTTP `status`.
    #[error("its registration endpoint refused the client ({status})")]
    RegistrationRefused {
        /// The HTTP status.
        status: u16,
    },
    /// The registration endpoint's answer has no `client_id`.
    #[error("its registration endpoint answered no client_id")]
    NoClientId,
    /// The device authorization request failed.
    #[error("the device authorization request failed: {0}")]
    DeviceRequest(Box<AuthError>),
    /// The device authorization answer lacks the device code, the user code or the
    /// verification URI.
    #[error("the authorization server's device authorization answer lacks its codes")]
    DeviceAnswerIncomplete,
}

/// What an error of rmcp's OAuth is read as: never its text, which may be the authorization
/// server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Authorization is required.
    #[error("authorization is required")]
    AuthorizationRequired,
    /// The callback's state, code or issuer did not match this authorization.
    #[error(
        "the callback was not one of this authorization (its state, code or issuer did not \
         check out)"
    )]
    ForeignCallback,
    /// The token exchange was refused.
    #[error("the authorization server refused the token exchange")]
    ExchangeRefused,
    /// A refresh failed or was rejected.
    #[error("the token could not be refreshed")]
    RefreshFailed,
    /// The authorization server did not answer.
    #[error("the authorization server could not be reached")]
    Unreachable,
    /// The metadata is missing or unusable.
    #[error("its protected-resource or authorization-server metadata is missing or unusable")]
    Metadata,
    /// No PKCE S256.
    #[error("the authorization server does not support PKCE S256")]
    PkceUnsupported,
    /// A URL in the flow does not parse.
    #[error("a URL in the flow is not valid")]
    BadUrl,
    /// No client identity could be had.
    #[error(
        "no client identity could be established (no pre-registered client, no client \
         metadata document support, no registration endpoint)"
    )]
    NoClientIdentity,
    /// The scope asked for was not granted.
    #[error("the scope asked for was not granted")]
    ScopeNotGranted,
    /// The issuer did not match the one expected.
    #[error("the authorization server's issuer did not match the one expected")]
    IssuerMismatch,
    /// The client-credentials grant was refused.
    #[error("the authorization server refused the client credentials")]
    ClientCredentialsRefused,
    /// Anything else.
    #[error("the OAuth flow failed")]
    Other,
}

impl From<&RmcpAuthError> for Refusal {
    fn from(error: &RmcpAuthError) -> Self {
        match error {
            RmcpAuthError::AuthorizationRequired => Self::AuthorizationRequired,
            RmcpAuthError::AuthorizationFailed(_) => Self::ForeignCallback,
            RmcpAuthError::TokenExchangeFailed(_) => Self::ExchangeRefused,
            RmcpAuthError::TokenRefreshFailed(_) | RmcpAuthError::TokenRefreshRejected(_) => {
                Self::RefreshFailed
            }
            RmcpAuthError::HttpError(_) | RmcpAuthError::DiscoveryRequestFailed { .. } => {
                Self::Unreachable
            }
            RmcpAuthError::MetadataError(_)
            | RmcpAuthError::ProtectedResourceMetadataInvalid { .. }
            | RmcpAuthError::AuthorizationServersUnavailable { .. }
            | RmcpAuthError::NoAuthorizationSupport => Self::Metadata,
            RmcpAuthError::PkceUnsupported => Self::PkceUnsupported,
            RmcpAuthError::UrlError(_) => Self::BadUrl,
            RmcpAuthError::RegistrationFailed(_) => Self::NoClientIdentity,
            RmcpAuthError::InsufficientScope { .. } | RmcpAuthError::InvalidScope(_) => {
                Self::ScopeNotGranted
            }
            RmcpAuthError::AuthorizationServerMismatch { .. }
            | RmcpAuthError::AuthorizationServerMissingIssuer { .. } => Self::IssuerMismatch,
            RmcpAuthError::ClientCredentialsError(_) => Self::ClientCredentialsRefused,
            _ => Self::Other,
        }
    }
}

/// The longest [`ErrorCode`] kept.
const MAX_CODE: usize = 40;

/// The OAuth error code (RFC 6749 §5.2) of a refused token request, bounded to its grammar
/// (ASCII letters, digits and `_`, at most 40 of them): the code, such as
/// `authorization_pending`, and never the `error_description`, which is the server's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorCode(String);

impl ErrorCode {
    /// The code of an OAuth error answer, if it names a non-empty one.
    pub(crate) fn of(answer: &serde_json::Value) -> Option<Self> {
        let code: String = answer["error"]
            .as_str()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(MAX_CODE)
            .collect();
        (!code.is_empty()).then_some(Self(code))
    }

    /// The code.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_its_oauth_code_bounded_and_never_its_description() {
        let answer = serde_json::json!({
            "error": "slow_down\"; <script>SENTINEL-DESCRIPTION".repeat(4),
            "error_description": "secret-SENTINEL-7781 was wrong",
        });
        let refused = AuthError::TokenRefused(ErrorCode::of(&answer).expect("a code"));
        let (shown, debug) = (refused.to_string(), format!("{refused:?}"));
        assert_eq!(shown.len(), MAX_CODE, "{shown}");
        assert!(shown.starts_with("slow_downscriptSENTINEL"), "{shown}");
        assert!(!shown.contains(['"', '<', ' ']), "{shown}");
        for text in [&shown, &debug] {
            assert!(
                !text.contains("secret-SENTINEL") && !text.contains('<'),
                "{text}"
            );
        }
        assert_eq!(
            ErrorCode::of(&serde_json::json!({"error": "<>"})),
            None,
            "nothing of the grammar left is no code"
        );
        assert_eq!(ErrorCode::of(&serde_json::json!({"error": 7})), None);
    }

    #[test]
    fn a_wrapped_refusal_reads_as_it_did_when_it_was_text() {
        let code = ErrorCode::of(&serde_json::json!({"error": "invalid_grant"})).expect("a code");
        assert_eq!(
            AuthError::GrantRefused(Box::new(AuthError::TokenRefused(code))).to_string(),
            "the authorization server refused it (invalid_grant)"
        );
        assert_eq!(
            AuthError::DeviceRequest(Box::new(AuthError::TokenStatus(400))).to_string(),
            "the device authorization request failed: HTTP 400"
        );
        assert_eq!(
            AuthError::Start(Refusal::from(&RmcpAuthError::TokenExchangeFailed(
                "server text SENTINEL".into()
            )))
            .to_string(),
            "OAuth could not start: the authorization server refused the token exchange"
        );
    }
}
