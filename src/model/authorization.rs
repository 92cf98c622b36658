//! An OAuth authorization waiting for a person: the pending URL and a device grant's code.

use serde::Serialize;

/// An OAuth authorization waiting for a person: open `url`, approve, and pass the complete
/// callback URL to [`crate::Workspace::oauth_complete`]; or, for the device grant
/// ([`crate::Workspace::authorize_device`]), enter `device.user_code` at `url` on any device
/// and [`crate::Workspace::poll_device`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PendingAuthorization {
    /// The authorization server's URL for this attempt (the verification URI of a device
    /// authorization).
    pub url: String,
    /// A device authorization's code and polling terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceAuthorization>,
}

/// A device authorization (RFC 8628) waiting for a person: show `verification_uri` and
/// `user_code` (or `verification_uri_complete`, which embeds the code), then poll with
/// `device` every `interval` seconds, for at most `expires_in` seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeviceAuthorization {
    /// Where the person goes.
    pub verification_uri: String,
    /// The same, with the user code in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_uri_complete: Option<String>,
    /// What the person enters.
    pub user_code: String,
    /// Seconds between polls.
    pub interval: u64,
    /// Seconds the code lives.
    pub expires_in: u64,
    /// The opaque handle [`crate::Workspace::poll_device`] takes (not the device code, which
    /// never leaves the host).
    pub device: String,
}
