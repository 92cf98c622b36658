//! Each kind's declaration reader and opener, in one place: validating a declaration, opening
//! it into a [`ToolSource`](super::ToolSource), checking it on this machine.

use std::sync::Arc;

use serde_json::Value;

use super::cli::CliDeclaration;
use super::openapi::OpenApiDeclaration;
use super::script::ScriptDeclaration;
use super::{DeclarationError, Finding, SharedSource, SourceKind};

/// Every fault of `declaration` as a source of `kind`.
pub(super) fn validate(
    kind: SourceKind,
    declaration: &Value,
    origin: &str,
) -> Vec<DeclarationError> {
    let value = without_kind(declaration);
    let faults = match kind {
        SourceKind::Cli => CliDeclaration::parse(&value, origin).err(),
        SourceKind::Script => ScriptDeclaration::parse(&value, origin).err(),
        SourceKind::OpenApi => OpenApiDeclaration::parse(&value, origin).err(),
    };
    faults.unwrap_or_default()
}

/// The declaration without its `kind`, which the host reads and the readers do not know.
fn without_kind(declaration: &Value) -> Value {
    let mut value = declaration.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("kind");
    }
    value
}

/// Opens `declaration` (already expanded) as a source of `kind`.
///
/// # Errors
///
/// Every fault that keeps it from opening, each naming the field and the fix.
pub(super) async fn open(
    kind: SourceKind,
    declaration: &Value,
    origin: &str,
    children: crate::protocol::Children,
) -> Result<SharedSource, Vec<DeclarationError>> {
    let value = without_kind(declaration);
    // Every `${NAME}` was expanded as the connection was prepared.
    let expand = |text: &str| Ok(text.to_owned());
    Ok(match kind {
        SourceKind::Cli => {
            let declaration = CliDeclaration::parse(&value, origin)?;
            Arc::new(declaration.open(origin, &expand, children)?)
        }
        SourceKind::Script => {
            let declaration = ScriptDeclaration::parse(&value, origin)?;
            Arc::new(declaration.open(origin, &expand, children)?)
        }
        SourceKind::OpenApi => {
            let declaration = OpenApiDeclaration::parse_expanded(&value, origin)?;
            Arc::new(declaration.open(&expand).await?)
        }
    })
}

/// What `declaration` (unexpanded) needs on this machine, and whether it is there.
pub(super) async fn check(
    kind: SourceKind,
    declaration: &Value,
    origin: &str,
) -> Result<Finding, Vec<DeclarationError>> {
    let value = without_kind(declaration);
    Ok(match kind {
        SourceKind::Cli => CliDeclaration::parse(&value, origin)?.check().await,
        SourceKind::Script => ScriptDeclaration::parse(&value, origin)?.check().await,
        SourceKind::OpenApi => OpenApiDeclaration::parse(&value, origin)?.check().await,
    })
}
