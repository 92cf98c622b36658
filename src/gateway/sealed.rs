//! Self-describing 2025-11-25 sessions: the `Mcp-Session-Id` carries what a replica needs to
//! serve the session (the revision and the client's declared capabilities, as the client's
//! `initialize` gave them), sealed with a key the replicas share, so any replica serves any
//! session and a load balancer needs no affinity.
//!
//! An id is `<payload>.<tag>`, both base64url: the payload is JSON `{"n": nonce, "p": the
//! initialize params}` (the nonce makes every session's id its own), the tag its HMAC-SHA256
//! under the key. A replica that does not hold the session in memory opens the id (rmcp asks
//! its `SessionStore` when a request names an unknown session): a tag that does not verify —
//! a forged id, a tampered one, one sealed under another key — is not a session (`404`), and
//! one that verifies is restored in place, its `initialize` replayed from the payload, so the
//! client carries on without initializing again. Nothing is stored anywhere: `store` and
//! `delete` do nothing, and a `DELETE` ends the session on the replica that received it only
//! (its id stays valid elsewhere until the key changes). What a session holds in flight (a
//! call, an `elicitation/create` round, its `GET` stream) lives on the connection and the
//! replica that opened it.

use std::sync::Arc;

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::InitializeRequestParams;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use serde_json::{Value, json};

/// The shortest session key accepted: 32 bytes, the HMAC-SHA256 block's worth of a key.
pub const MIN_SESSION_KEY_BYTES: usize = 32;

/// The longest payload an id carries. A client whose declared capabilities would make the id
/// longer is sealed with what the gateway reads of them only (see [`Sealer::seal`]).
const MAX_PAYLOAD_BYTES: usize = 2048;

/// Seals and opens session ids under one key.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: Arc<hmac::Key>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

impl Sealer {
    /// A sealer under `key` (the replicas' shared key), or under a random key of this process
    /// when `None` (then only this process opens its ids, as sessions in memory would).
    pub(crate) fn new(key: Option<&[u8]>) -> Self {
        let key = match key {
            Some(key) => hmac::Key::new(hmac::HMAC_SHA256, key),
            None => {
                let mut random = [0u8; 32];
                // Without the system's randomness every replica's key would be the same
                // known bytes and anyone could forge a session: no gateway starts then.
                aws_lc_rs::rand::fill(&mut random).expect("the system's random source");
                hmac::Key::new(hmac::HMAC_SHA256, &random)
            }
        };
        Self { key: Arc::new(key) }
    }

    /// The id of a new session whose client sent `params` in its `initialize`.
    pub(crate) fn seal(&self, params: &Value) -> String {
        let mut nonce = [0u8; 12];
        aws_lc_rs::rand::fill(&mut nonce).expect("the system's random source");
        let nonce = URL_SAFE_NO_PAD.encode(nonce);
        let mut payload = json!({"n": nonce, "p": params}).to_string();
        if payload.len() > MAX_PAYLOAD_BYTES {
            // Only what a replica reads of the client is kept: its revision, its name and
            // version, and whether it answers elicitation (the one request the gateway
            // bridges to a legacy client).
            let shortened = |value: Option<&Value>| {
                let text = value.and_then(Value::as_str).unwrap_or_default();
                text.chars().take(64).collect::<String>()
            };
            let mut capabilities = serde_json::Map::new();
            if params.pointer("/capabilities/elicitation").is_some() {
                capabilities.insert("elicitation".into(), json!({}));
            }
            let reduced = json!({
                "protocolVersion": shortened(params.get("protocolVersion")),
                "capabilities": capabilities,
                "clientInfo": {
                    "name": shortened(params.pointer("/clientInfo/name")),
                    "version": shortened(params.pointer("/clientInfo/version")),
                },
            });
            payload = json!({"n": nonce, "p": reduced}).to_string();
        }
        let tag = hmac::sign(&self.key, payload.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// The `initialize` params sealed in `id`, if it is an id this key sealed.
    pub(crate) fn open(&self, id: &str) -> Option<InitializeRequestParams> {
        let (payload, tag) = id.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        hmac::verify(&self.key, &payload, &tag).ok()?;
        let sealed: Value = serde_json::from_slice(&payload).ok()?;
        serde_json::from_value(sealed.get("p")?.clone()).ok()
    }
}

/// rmcp's session store over sealed ids: loading is opening the id; nothing is kept.
pub(crate) struct SealedSessions(pub(crate) Sealer);

#[async_trait::async_trait]
impl SessionStore for SealedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(self.0.open(session_id).map(SessionState::new))
    }

    async fn store(&self, _: &str, _: &SessionState) -> Result<(), SessionStoreError> {
        Ok(())
    }

    async fn delete(&self, _: &str) -> Result<(), SessionStoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Value {
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "probe", "version": "1.0"},
        })
    }

    #[test]
    fn an_id_opens_under_its_key_only_and_not_once_changed() {
        let shared = Sealer::new(Some(&[7u8; 32]));
        let id = shared.seal(&params());
        let opened = Sealer::new(Some(&[7u8; 32]))
            .open(&id)
            .expect("another replica opens it");
        assert_eq!(opened.protocol_version.as_str(), "2025-11-25");
        assert!(opened.capabilities.elicitation.is_some());
        assert_eq!(opened.client_info.name, "probe");
        // Each session its own id, though the client said the same.
        assert_ne!(shared.seal(&params()), id);
        // Another key, a changed payload, a changed tag, a made-up id: none opens.
        assert!(Sealer::new(Some(&[8u8; 32])).open(&id).is_none());
        let (payload, tag) = id.split_once('.').expect("two parts");
        let mut bytes = URL_SAFE_NO_PAD.decode(payload).expect("base64url");
        let at = bytes.iter().position(|b| *b == b'2').expect("a digit");
        bytes[at] = b'3';
        let tampered = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(&bytes));
        assert!(shared.open(&tampered).is_none());
        let mut tag = URL_SAFE_NO_PAD.decode(tag).expect("base64url");
        tag[0] ^= 1;
        assert!(
            shared
                .open(&format!("{payload}.{}", URL_SAFE_NO_PAD.encode(&tag)))
                .is_none()
        );
        for forged in ["", ".", "abc", "abc.def", &format!("{payload}.")] {
            assert!(shared.open(forged).is_none(), "{forged}");
        }
    }

    #[test]
    fn a_long_declaration_is_sealed_with_what_the_gateway_reads() {
        let sealer = Sealer::new(None);
        let mut long = params();
        long["capabilities"]["experimental"] = json!({"x": "y".repeat(5000)});
        long["clientInfo"]["name"] = json!("n".repeat(500));
        let id = sealer.seal(&long);
        assert!(id.len() < 4 * MAX_PAYLOAD_BYTES, "{}", id.len());
        let opened = sealer.open(&id).expect("opens");
        assert!(opened.capabilities.elicitation.is_some());
        assert!(opened.capabilities.experimental.is_none());
        assert_eq!(opened.client_info.name.len(), 64);
    }
}
