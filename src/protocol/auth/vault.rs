//! The vault: each `(workspace, alias)`'s OAuth state in process memory, the one
//! authorization waiting for its person (a browser callback or a device code) and the
//! authorized client. Nothing here is ever written anywhere: after a restart the server is
//! `authorization-required`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{AuthorizationMetadata, OAuthState};

use super::challenge::AuthorizedClient;
use super::dpop::Dpop;
use crate::config::{PreparedAuthorization, ServerDefinition};
use crate::model::{Customize, DeviceAuthorization, PendingAuthorization};

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
pub(super) struct Pending {
    pub(super) state: OAuthState,
    /// The proof key of this authorization (used when its server advertises DPoP).
    pub(super) dpop: Arc<Dpop>,
    pub(super) url: String,
    /// The definition being opened when authorization was asked for.
    pub(super) definition: Arc<ServerDefinition>,
    pub(super) replay: Replay,
}

impl Pending {
    /// The definition the authorization was started for.
    pub(super) fn definition(&self) -> &ServerDefinition {
        &self.definition
    }

    /// What completing it does next.
    pub(super) fn replay(&self) -> &Replay {
        &self.replay
    }
}

struct Authorized {
    client: AuthorizedClient,
    definition: Arc<ServerDefinition>,
}

/// The one authorization of a server that waits for its person.
pub(super) enum Waiting {
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

    pub(super) fn shown(&self) -> PendingAuthorization {
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
pub(super) struct Entry {
    /// The authorization waiting for its person; a new one replaces it.
    waiting: Option<Waiting>,
    /// The next authorization uses the device grant, with this scope (if any).
    device_requested: Option<Option<String>>,
    authorized: Option<Authorized>,
    /// Scope step-ups in a row; a fresh authorization starts again from zero.
    pub(super) step_ups: u32,
}

/// How many scope step-ups in a row a server may ask for before the host stops asking a
/// person to approve more.
pub(super) const MAX_STEP_UPS: u32 = 3;

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
    pub(super) fn with<T>(
        &self,
        workspace: &str,
        alias: &str,
        f: impl FnOnce(&mut Entry) -> T,
    ) -> T {
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
    pub(super) fn authorized(
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
    pub(super) fn forget_authorized(&self, workspace: &str, alias: &str) {
        self.with(workspace, alias, |entry| entry.authorized = None);
    }

    /// Installs an authorized client for `definition`.
    pub(super) fn install(
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
    pub(super) fn set_waiting(&self, workspace: &str, alias: &str, waiting: Waiting) {
        self.with(workspace, alias, |entry| entry.waiting = Some(waiting));
    }

    /// Where the waiting authorization is given, if one waits.
    pub(crate) fn pending(&self, workspace: &str, alias: &str) -> Option<PendingAuthorization> {
        self.with(workspace, alias, |entry| {
            entry.waiting.as_ref().map(Waiting::shown)
        })
    }

    /// Asks that the next authorization of `(workspace, alias)` use the device grant.
    pub(super) fn request_device(&self, workspace: &str, alias: &str, scope: Option<String>) {
        self.with(workspace, alias, |entry| {
            entry.device_requested = Some(scope)
        });
    }

    /// The definition of the add that the pending authorization of `(workspace, alias)`
    /// will perform, if an add asked for it (the alias exists nowhere else until then).
    pub(super) fn pending_add(&self, workspace: &str, alias: &str) -> Option<ServerDefinition> {
        self.with(workspace, alias, |entry| {
            match entry.waiting.as_mut().map(Waiting::replay_mut) {
                Some(Replay::Add(definition)) => Some((**definition).clone()),
                _ => None,
            }
        })
    }

    /// Takes the device request of `(workspace, alias)`, if the next authorization is to
    /// use the device grant (so a request that no authorization used is spent too).
    pub(super) fn take_device_request(
        &self,
        workspace: &str,
        alias: &str,
    ) -> Option<Option<String>> {
        self.with(workspace, alias, |entry| entry.device_requested.take())
    }

    /// Says what completing the pending authorization whose URL is `url` does next (an add
    /// that asked for it replays the add; by default it enables the alias).
    pub(super) fn set_replay(&self, workspace: &str, alias: &str, url: &str, replay: Replay) {
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
    pub(super) fn take_pending(&self, workspace: &str, alias: &str) -> Option<Pending> {
        self.with(workspace, alias, |entry| match entry.waiting.take() {
            Some(Waiting::Code(pending)) => Some(*pending),
            other => {
                entry.waiting = other;
                None
            }
        })
    }

    /// Takes the device authorization whose handle is `device` out, to poll it.
    pub(super) fn take_device(
        &self,
        workspace: &str,
        alias: &str,
        device: &str,
    ) -> Option<DevicePending> {
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
    pub(super) fn restore(&self, workspace: &str, alias: &str, waiting: Waiting) {
        self.with(workspace, alias, |entry| {
            entry.waiting.get_or_insert(waiting);
        });
    }

    /// Puts back a browser authorization whose completion failed before its code was
    /// spent, unless a newer request replaced it meanwhile.
    pub(super) fn restore_pending(&self, workspace: &str, alias: &str, pending: Pending) {
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
pub(super) struct Attempt<'a> {
    pub vault: &'a Vault,
    pub workspace: &'a str,
    pub alias: &'a str,
    pub server_url: &'a str,
    pub definition: Arc<ServerDefinition>,
    pub authorization: &'a PreparedAuthorization,
    pub challenge: Option<&'a str>,
}

/// A device authorization (RFC 8628) waiting for its person; the device code stays here.
pub(super) struct DevicePending {
    pub(super) shown: DeviceAuthorization,
    pub(super) device_code: String,
    pub(super) client_id: String,
    pub(super) client_secret: Option<String>,
    pub(super) metadata: AuthorizationMetadata,
    /// The proof key of this authorization (used when its server advertises DPoP).
    pub(super) dpop: Arc<Dpop>,
    pub(super) server_url: String,
    pub(super) scopes: Vec<String>,
    pub(super) expires_at: std::time::Instant,
    pub(super) definition: Arc<ServerDefinition>,
    pub(super) replay: Replay,
}
