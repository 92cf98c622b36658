//! Credentials as configured, and how configuration is shown without them.

use std::fmt;

use serde::{Serialize, Serializer};

use super::environment::is_single_reference;

/// A credential as configured, unexpanded: ideally one `${NAME}` reference.
///
/// `Debug` and `Serialize` show the text only when it is exactly one `${NAME}`
/// reference (which names where the secret lives, not the secret); a literal
/// token prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps an unexpanded credential.
    pub fn new(unexpanded: impl Into<String>) -> Self {
        Self(unexpanded.into())
    }

    /// The credential as configured, before expansion. Handle with care: it is a
    /// literal token unless [`is_reference`](Self::is_reference).
    pub fn unexpanded(&self) -> &str {
        &self.0
    }

    /// Whether it is exactly one `${NAME}` reference.
    pub fn is_reference(&self) -> bool {
        is_single_reference(&self.0)
    }

    fn shown(&self) -> &str {
        if self.is_reference() {
            &self.0
        } else {
            REDACTED
        }
    }
}

pub(crate) const REDACTED: &str = "<redacted>";

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_reference() {
            write!(f, "Secret({:?})", self.0)
        } else {
            f.write_str("Secret(<redacted>)")
        }
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.shown())
    }
}

/// Prints a string without quotes.
pub(crate) struct Bare<'a>(pub(crate) &'a str);

impl fmt::Debug for Bare<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
