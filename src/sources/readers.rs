//! Each kind's declaration reader and opener, in one place: validating a declaration, opening
//! it into a [`ToolSource`](super::ToolSource), checking it on this machine.

use serde_json::Value;

use super::{DeclarationError, SourceKind};

/// Every fault of `declaration` as a source of `kind`.
pub(super) fn validate(kind: SourceKind, declaration: &Value, origin: &str) -> Vec<DeclarationError> {
    let _ = (kind, declaration, origin);
    Vec::new()
}

/// Opens `declaration` (already expanded) as a source of `kind`; the error says why not.
pub(super) async fn open(
    kind: SourceKind,
    declaration: &Value,
    origin: &str,
) -> Result<super::SharedSource, String> {
    let _ = (kind, declaration);
    Err(format!("{origin}: this kind of source cannot be opened yet"))
}

/// What `declaration` (unexpanded) needs on this machine, and whether it is there.
pub(super) fn check(kind: SourceKind, declaration: &Value, origin: &str) -> Result<super::Finding, Vec<DeclarationError>> {
    let _ = (kind, declaration, origin);
    Ok(super::Finding::Missing("this kind of source cannot be checked yet".into()))
}
