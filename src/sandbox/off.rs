//! The sandbox in a build without the `sandbox` feature: every process runs unconfined, as
//! the configuration (which refuses a policy asking for more) guarantees none asks otherwise.

use super::{Program, Refusal, SandboxOptions, TempDir};
use crate::config::{ResolvedSandbox, SandboxMode, SandboxPolicy};
use crate::model::SandboxReport;

/// The host's sandboxing: none.
#[derive(Debug)]
pub(crate) struct Sandboxing;

/// One process's sandbox: none.
#[derive(Debug)]
pub(crate) struct Confinement {
    report: SandboxReport,
    limits: ResolvedSandbox,
}

impl Sandboxing {
    pub(crate) fn new(_configured: Option<&SandboxPolicy>, _options: &SandboxOptions) -> Self {
        Self
    }

    pub(crate) fn confine(
        &self,
        _own: Option<&SandboxPolicy>,
        _program: &Program<'_>,
    ) -> Result<Confinement, Refusal> {
        Ok(Confinement::off())
    }
}

impl Confinement {
    pub(crate) fn off() -> Self {
        Self {
            report: SandboxReport::off(),
            limits: SandboxPolicy {
                mode: Some(SandboxMode::Off),
                ..SandboxPolicy::default()
            }
            .resolve(),
        }
    }

    pub(crate) fn report(&self) -> &SandboxReport {
        &self.report
    }

    pub(crate) fn limits(&self) -> &ResolvedSandbox {
        &self.limits
    }

    pub(crate) fn install(&mut self, _command: &mut tokio::process::Command) {}

    pub(crate) fn explain(&mut self, error: std::io::Error) -> std::io::Error {
        error
    }

    pub(crate) fn keep(&mut self) -> (Option<i32>, Option<TempDir>) {
        (None, None)
    }
}
