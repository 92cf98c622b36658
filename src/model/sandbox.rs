//! What a server's sandbox holds, as a status shows it: each part its policy asked for, held
//! by the kernel or not and why, and what a limit that ended a process is called.

use std::fmt;

use serde::Serialize;

/// How much of a process's sandbox the kernel holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxState {
    /// Every part the policy asks for.
    Held,
    /// Some parts: the machine cannot enforce the others (`best-effort`).
    Partly,
    /// None: the policy's mode is `off`, or the build has no sandbox.
    Off,
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Held => "held",
            Self::Partly => "partly",
            Self::Off => "off",
        })
    }
}

/// One part of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxPart {
    /// What it may read and write (Landlock).
    Filesystem,
    /// What network it reaches (a network namespace, Landlock's TCP rules).
    Network,
    /// The system calls it may not make (seccomp, `no_new_privs`, no capabilities).
    Syscalls,
    /// Its descendants end with it (a PID namespace).
    Descendants,
    /// Memory per process.
    Memory,
    /// Processes and threads.
    Processes,
    /// Open files per process.
    Files,
    /// CPU time per process.
    Cpu,
}

impl fmt::Display for SandboxPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Filesystem => "filesystem",
            Self::Network => "network",
            Self::Syscalls => "syscalls",
            Self::Descendants => "descendants",
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::Files => "files",
            Self::Cpu => "cpu",
        })
    }
}

/// One part of a sandbox as it was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxPartReport {
    /// Which part.
    pub part: SandboxPart,
    /// Whether the kernel holds it.
    pub held: bool,
    /// What it is (`read: system, installation, 2 declared; write: its temporary directory`),
    /// or why it is not held (`no user namespaces: unshare failed with EPERM`).
    pub detail: String,
}

/// A process's sandbox as it was applied when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// Held, partly or off.
    pub state: SandboxState,
    /// Every part the policy asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<SandboxPartReport>,
}

impl SandboxReport {
    /// No sandbox.
    pub fn off() -> Self {
        Self {
            state: SandboxState::Off,
            parts: Vec::new(),
        }
    }

    /// The parts the kernel does not hold, named: `network, descendants`.
    pub fn missing(&self) -> Vec<SandboxPart> {
        self.parts
            .iter()
            .filter(|part| !part.held)
            .map(|part| part.part)
            .collect()
    }

    /// One line: `held`, `partly (no network: …)`, `off`.
    pub fn line(&self) -> String {
        let missing: Vec<String> = self
            .parts
            .iter()
            .filter(|part| !part.held)
            .map(|part| format!("{}: {}", part.part, part.detail))
            .collect();
        if missing.is_empty() {
            self.state.to_string()
        } else {
            format!("{} (not held: {})", self.state, missing.join("; "))
        }
    }
}

/// The limit that ended a process, as the kernel or the process itself said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitCause {
    /// An allocation past its memory limit failed.
    Memory,
    /// A process or thread past its limit could not be started.
    Processes,
    /// A file past its limit could not be opened.
    Files,
    /// Its CPU time ran out (`SIGXCPU`).
    Cpu,
}

impl LimitCause {
    /// The label the sandbox kill counter carries.
    pub fn label(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::Files => "files",
            Self::Cpu => "cpu",
        }
    }
}
