//! Self-describing 2025-11-25 sessions: the `Mcp-Session-Id` carries what a replica needs to
//! serve the session (the revision and the client's declared capabilities, as the client's
//! `initialize` gave them), sealed with a key the replicas share, so any replica serves any
//! session and a load balancer needs no affinity.
//!
//! An id is `<payload>.<tag>`, both base64url: the payload is JSON `{"n": nonce, "w":
//! workspace, "e": end of life, "p": the initialize params}` (the nonce makes every session's
//! id its own), the tag its HMAC-SHA256 under the key. A replica that does not hold the
//! session in memory opens the id (rmcp asks its `SessionStore` when a request names an
//! unknown session): a tag that does not verify — a forged id, a tampered one, one sealed
//! under another key — is not a session (`404`), nor is an id of another workspace served
//! under the same key, one whose lifetime has passed, or one that [`Ended`]; one that opens
//! is restored in place, its `initialize` replayed from the payload, so the client carries on
//! without initializing again.
//!
//! A session that ends for good — its client's `DELETE`, idle past the gateway's bound —
//! goes on the ended list until its lifetime passes, so its id never opens again: the
//! gateway's own list, bounded, and with a store several hosts share (PostgreSQL) the store's
//! too, whose announcement ends every replica's copy. A gateway shutting down ends nothing:
//! its sessions go on through the other replicas. What a session holds in flight (a call, an
//! `elicitation/create` round, its `GET` stream) lives on the connection and the replica that
//! opened it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::{digest, hmac};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::InitializeRequestParams;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use serde_json::{Value, json};

use crate::store::{MAX_ENDED_SESSIONS, Store};

/// The shortest session key accepted: 32 bytes, the HMAC-SHA256 block's worth of a key.
pub const MIN_SESSION_KEY_BYTES: usize = 32;

/// The longest payload an id carries. A client whose declared capabilities would make the id
/// longer is sealed with what the gateway reads of them only (see [`Sealer::seal`]).
const MAX_PAYLOAD_BYTES: usize = 2048;

/// Seals and opens session ids under one key, for one workspace, each for a lifetime.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: Arc<hmac::Key>,
    /// The workspace the gateway serves: an id of another one does not open here.
    workspace: Arc<str>,
    /// How long an id opens after it is sealed.
    lifetime: Duration,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

/// What an id that opens holds.
pub(crate) struct Opened {
    /// The client's `initialize` params.
    pub(crate) params: InitializeRequestParams,
    /// When its lifetime ends, in seconds since the Unix epoch.
    pub(crate) until: u64,
}

/// Seconds since the Unix epoch: what a lifetime is sealed in, so replicas agree on it.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

impl Sealer {
    /// A sealer under `key` (the replicas' shared key), or under a random key of this process
    /// when `None` (then only this process opens its ids, as sessions in memory would), for
    /// the sessions of `workspace`, each id opening for `lifetime`.
    pub(crate) fn new(key: Option<&[u8]>, workspace: &str, lifetime: Duration) -> Self {
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
        Self {
            key: Arc::new(key),
            workspace: Arc::from(workspace),
            lifetime,
        }
    }

    /// How long an id opens after it is sealed, in whole seconds (at least one).
    pub(crate) fn lifetime_secs(&self) -> u64 {
        self.lifetime.as_secs().max(1)
    }

    /// The id of a new session whose client sent `params` in its `initialize`.
    pub(crate) fn seal(&self, params: &Value) -> String {
        self.seal_at(params, now())
    }

    fn seal_at(&self, params: &Value, now: u64) -> String {
        let mut nonce = [0u8; 12];
        aws_lc_rs::rand::fill(&mut nonce).expect("the system's random source");
        let nonce = URL_SAFE_NO_PAD.encode(nonce);
        let until = now.saturating_add(self.lifetime_secs());
        let sealed = |params: &Value| {
            json!({"n": nonce, "w": &*self.workspace, "e": until, "p": params}).to_string()
        };
        let mut payload = sealed(params);
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
            payload = sealed(&reduced);
        }
        let tag = hmac::sign(&self.key, payload.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// What `id` holds, if it is an id this key sealed for this workspace and its lifetime
    /// has not passed.
    pub(crate) fn open(&self, id: &str) -> Option<Opened> {
        self.open_at(id, now())
    }

    fn open_at(&self, id: &str, now: u64) -> Option<Opened> {
        let (payload, tag) = id.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        hmac::verify(&self.key, &payload, &tag).ok()?;
        let sealed: Value = serde_json::from_slice(&payload).ok()?;
        if sealed.get("w")?.as_str()? != &*self.workspace {
            return None;
        }
        let until = sealed.get("e")?.as_u64()?;
        if until <= now {
            return None;
        }
        let params = serde_json::from_value(sealed.get("p")?.clone()).ok()?;
        Some(Opened { params, until })
    }
}

/// An id as the ended list and the store know it: its SHA-256 (never the id itself).
pub(crate) type Key = [u8; 32];

/// The key of `id`.
pub(crate) fn key_of(id: &str) -> Key {
    let mut key = [0u8; 32];
    key.copy_from_slice(digest::digest(&digest::SHA256, id.as_bytes()).as_ref());
    key
}

fn hex(key: &Key) -> String {
    key.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The sessions that ended, here or (through a store several hosts share) anywhere, each
/// until its lifetime passes: an id on the list never opens again.
pub(crate) struct Ended {
    local: Mutex<HashMap<Key, u64>>,
    store: Option<Arc<dyn Store>>,
}

/// How long recording or asking the store about an ended session may take: past it the
/// gateway goes on with what it knows (its own list), as it does while the store is away.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

impl Ended {
    pub(crate) fn new(store: Option<Arc<dyn Store>>) -> Self {
        Self {
            local: Mutex::new(HashMap::new()),
            store,
        }
    }

    /// Puts `key` on this gateway's list until `until`; past [`MAX_ENDED_SESSIONS`] the
    /// entries whose lifetime has passed go first, then the one nearest its end. Whether it
    /// was not on it already.
    pub(crate) fn note(&self, key: Key, until: u64) -> bool {
        let Ok(mut local) = self.local.lock() else {
            return false;
        };
        if local.contains_key(&key) {
            return false;
        }
        if local.len() >= MAX_ENDED_SESSIONS {
            let now = now();
            local.retain(|_, end| *end > now);
            if local.len() >= MAX_ENDED_SESSIONS
                && let Some(nearest) = local
                    .iter()
                    .min_by_key(|(key, end)| (**end, **key))
                    .map(|(key, _)| *key)
            {
                local.remove(&nearest);
            }
        }
        local.insert(key, until);
        true
    }

    /// Whether `key` is on this gateway's list and its lifetime has not passed.
    pub(crate) fn here(&self, key: &Key) -> bool {
        self.local
            .lock()
            .is_ok_and(|local| local.get(key).is_some_and(|until| *until > now()))
    }

    /// Ends `id`'s session for good, until `until`: on this gateway's list, and through the
    /// store for every other host.
    pub(crate) async fn end(&self, id: &str, until: u64) {
        let key = key_of(id);
        if !self.note(key, until) {
            return;
        }
        let Some(store) = &self.store else {
            return;
        };
        match tokio::time::timeout(STORE_TIMEOUT, store.end_session(&hex(&key), until)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "an ended session could not be recorded in the store; other replicas may serve it until its lifetime passes");
            }
            Err(_) => tracing::warn!(
                "the store did not record an ended session in time; other replicas may serve it until its lifetime passes"
            ),
        }
    }

    /// Whether `id`'s session ended here or, as the store says, anywhere. A store that
    /// cannot answer is taken to say no: sessions go on while it is away, as calls do.
    pub(crate) async fn anywhere(&self, id: &str) -> bool {
        let key = key_of(id);
        if self.here(&key) {
            return true;
        }
        let Some(store) = &self.store else {
            return false;
        };
        match tokio::time::timeout(STORE_TIMEOUT, store.session_ended(&hex(&key))).await {
            Ok(Ok(ended)) => ended,
            Ok(Err(_)) | Err(_) => false,
        }
    }

    /// The key an announcement names, if it is one of ours to parse.
    pub(crate) fn parse_key(text: &str) -> Option<Key> {
        if text.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(key)
    }
}

/// rmcp's session store over sealed ids: loading is opening the id (and finding it on no
/// ended list); nothing is kept.
pub(crate) struct SealedSessions {
    pub(crate) sealer: Sealer,
    pub(crate) ended: Arc<Ended>,
}

#[async_trait::async_trait]
impl SessionStore for SealedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(opened) = self.sealer.open(session_id) else {
            return Ok(None);
        };
        if self.ended.anywhere(session_id).await {
            return Ok(None);
        }
        Ok(Some(SessionState::new(opened.params)))
    }

    async fn store(&self, _: &str, _: &SessionState) -> Result<(), SessionStoreError> {
        Ok(())
    }

    async fn delete(&self, _: &str) -> Result<(), SessionStoreError> {
        // The session manager's close, which rmcp calls first, ended it.
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

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    #[test]
    fn an_id_opens_under_its_key_only_and_not_once_changed() {
        let shared = Sealer::new(Some(&[7u8; 32]), "team", DAY);
        let id = shared.seal(&params());
        let opened = Sealer::new(Some(&[7u8; 32]), "team", DAY)
            .open(&id)
            .expect("another replica opens it");
        assert_eq!(opened.params.protocol_version.as_str(), "2025-11-25");
        assert!(opened.params.capabilities.elicitation.is_some());
        assert_eq!(opened.params.client_info.name, "probe");
        // Each session its own id, though the client said the same.
        assert_ne!(shared.seal(&params()), id);
        // Another key, a changed payload, a changed tag, a made-up id: none opens.
        assert!(
            Sealer::new(Some(&[8u8; 32]), "team", DAY)
                .open(&id)
                .is_none()
        );
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
    fn an_id_opens_only_in_its_workspace_and_within_its_lifetime() {
        let team = Sealer::new(Some(&[7u8; 32]), "team", Duration::from_secs(60));
        let id = team.seal_at(&params(), 1_000);
        assert_eq!(
            team.open_at(&id, 1_059).map(|opened| opened.until),
            Some(1_060)
        );
        assert!(team.open_at(&id, 1_060).is_none(), "its lifetime passed");
        let other = Sealer::new(Some(&[7u8; 32]), "other", Duration::from_secs(60));
        assert!(
            other.open_at(&id, 1_001).is_none(),
            "another workspace under the same key"
        );
    }

    #[test]
    fn the_ended_list_keeps_what_is_alive_and_forgets_the_nearest_end_first() {
        let ended = Ended::new(None);
        let far = now() + 3_600;
        assert!(ended.note(key_of("a"), far));
        assert!(!ended.note(key_of("a"), far), "noted once");
        assert!(ended.here(&key_of("a")));
        assert!(!ended.here(&key_of("b")));
        // One whose lifetime passed is not ended any more: its id does not open anyway.
        ended.note(key_of("past"), now() - 1);
        assert!(!ended.here(&key_of("past")));
        // Full: the passed one goes first, then the one nearest its end.
        for n in 0..MAX_ENDED_SESSIONS {
            ended.note(key_of(&format!("s{n}")), far + 10 + n as u64);
        }
        let len = ended.local.lock().map(|local| local.len()).unwrap_or(0);
        assert_eq!(len, MAX_ENDED_SESSIONS);
        assert!(!ended.here(&key_of("a")), "the nearest end goes first");
        assert_eq!(Ended::parse_key(&hex(&key_of("x"))), Some(key_of("x")));
        assert_eq!(Ended::parse_key("zz"), None);
    }

    #[test]
    fn a_long_declaration_is_sealed_with_what_the_gateway_reads() {
        let sealer = Sealer::new(None, "team", DAY);
        let mut long = params();
        long["capabilities"]["experimental"] = json!({"x": "y".repeat(5000)});
        long["clientInfo"]["name"] = json!("n".repeat(500));
        let id = sealer.seal(&long);
        assert!(id.len() < 4 * MAX_PAYLOAD_BYTES, "{}", id.len());
        let opened = sealer.open(&id).expect("opens").params;
        assert!(opened.capabilities.elicitation.is_some());
        assert!(opened.capabilities.experimental.is_none());
        assert_eq!(opened.client_info.name.len(), 64);
    }
}
