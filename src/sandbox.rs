//! Least privilege for every process the host starts: a stdio server, a tool source's
//! program or script runs in the sandbox its definition's policy declares (over the
//! host-wide policy, over the built-in default), enforced by the kernel.
//!
//! `Sandboxing` is the host's: the default policy, the paths no process may reach, and what
//! this machine can enforce (learnt once, by trying). For each process it makes a
//! `Confinement`: the hook the child runs before `exec`, the environment it adds (`TMPDIR`),
//! a private temporary directory, and the [`SandboxReport`](crate::SandboxReport) a status
//! shows. Without the `sandbox` feature every confinement is `off` and nothing of this is
//! compiled; the configuration refuses a policy that asks for more.
//!
//! Rooms (feature `sandbox`), importing one way: this face → machine → hook, paths, filter.
//! - `machine`: what this machine can enforce, by trial.
//! - `paths`: what a process may read and write; its program's installation; the Landlock
//!   ruleset.
//! - `filter`: the seccomp filter.
//! - `hook`: what the child does between `fork` and `exec`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::config::{ResolvedSandbox, SandboxMode, SandboxPolicy};
use crate::model::LimitCause;
#[cfg(feature = "test-hooks")]
use crate::model::SandboxPart;

#[cfg(feature = "sandbox")]
mod confine;
#[cfg(feature = "sandbox")]
mod filter;
#[cfg(feature = "sandbox")]
mod hook;
#[cfg(feature = "sandbox")]
mod machine;
#[cfg(feature = "sandbox")]
mod paths;

#[cfg(feature = "sandbox")]
pub(crate) use confine::{Confinement, Sandboxing};
#[cfg(feature = "sandbox")]
pub use confine::{MachineFinding, check};

/// How a host sandboxes the processes it starts, beyond the configuration: the embedder's
/// default policy (over `PLURNK_MCP_SANDBOX`), and the paths no sandboxed process may reach
/// (the command line adds its state file's folder).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SandboxOptions {
    /// The host-wide policy; `PLURNK_MCP_SANDBOX` (then the built-in default) when `None`.
    pub policy: Option<SandboxPolicy>,
    /// Paths no sandboxed process may read or write, however its policy names them: the
    /// host's own state.
    pub protected: Vec<PathBuf>,
    /// The home whose credentials (`.ssh`, `.aws`, `.config`, …) no policy may grant; the
    /// host process's `HOME` when `None`.
    pub home: Option<PathBuf>,
    /// Parts taken as missing from this machine whatever it has: how the tests see a machine
    /// without them.
    #[cfg(feature = "test-hooks")]
    pub pretend_missing: Vec<SandboxPart>,
}

setters!(SandboxOptions {
    with_policy => policy: Option<SandboxPolicy>,
    with_protected => protected: Vec<PathBuf>,
    with_home => home: Option<PathBuf>,
});

#[cfg(feature = "test-hooks")]
impl SandboxOptions {
    /// Takes `parts` as missing from this machine (a test lever).
    #[must_use]
    pub fn pretending_missing(mut self, parts: Vec<SandboxPart>) -> Self {
        self.pretend_missing = parts;
        self
    }
}

/// One program to start: as its definition names it, expanded. (A build without the feature
/// confines nothing and reads none of it.)
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) struct Program<'a> {
    pub command: &'a OsStr,
    pub args: &'a [String],
    pub cwd: Option<&'a Path>,
    /// The `PATH` it is looked up on.
    pub path_var: Option<&'a OsStr>,
    /// The host's mark, which names its temporary directories.
    pub owner: &'a str,
    /// Its definition sets `HOME` itself (else its home is its private directory).
    pub own_home: bool,
}

/// Why a process was not started: its policy requires what this machine cannot enforce, or
/// names a path it may not have. Shown in the server's Problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refusal(pub String);

/// The limit that ended a process, if its exit says one did: `SIGXCPU` is the CPU limit; an
/// abnormal exit whose last words name a failed allocation, fork or open is the memory,
/// process or file limit the policy set. A process the host killed (`SIGKILL`) is never
/// taken for one.
pub(crate) fn ending(
    limits: &ResolvedSandbox,
    status: ExitStatus,
    stderr: Option<&str>,
) -> Option<(LimitCause, String)> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() || status.signal() == Some(libc::SIGKILL) {
        return None;
    }
    if status.signal() == Some(libc::SIGXCPU)
        && let Some(cpu) = limits.cpu
    {
        return Some((LimitCause::Cpu, format!("killed: CPU time limit {cpu} s")));
    }
    let said = stderr.unwrap_or_default();
    let says = |words: &[&str]| words.iter().any(|word| said.contains(word));
    if limits.memory.is_some()
        && says(&[
            "memory allocation of",
            "out of memory",
            "MemoryError",
            "Cannot allocate memory",
            "Allocation failed",
            "bad_alloc",
            "ENOMEM",
        ])
    {
        return Some((
            LimitCause::Memory,
            format!("killed: memory limit {}", limits.show_memory()),
        ));
    }
    if let Some(files) = limits.files
        && says(&["Too many open files", "EMFILE"])
    {
        return Some((
            LimitCause::Files,
            format!("killed: open-files limit {files}"),
        ));
    }
    if let Some(processes) = limits.processes
        && says(&[
            "Resource temporarily unavailable",
            "EAGAIN",
            "can't start new thread",
            "Cannot fork",
            "pthread_create",
        ])
    {
        return Some((
            LimitCause::Processes,
            format!("killed: process limit {processes}"),
        ));
    }
    None
}

/// The policy a process runs under: its own members over the host's, over the built-in
/// default, paths as given.
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) fn effective(own: Option<&SandboxPolicy>, host: &SandboxPolicy) -> ResolvedSandbox {
    own.map_or_else(|| host.clone(), |own| own.over(host))
        .resolve()
}

/// Counts a process ended by a limit.
pub(crate) fn count_kill(cause: LimitCause) {
    metrics::counter!("plurnk_mcp_sandbox_kills_total", "cause" => cause.label()).increment(1);
}

/// Whether a resolved policy asks for no sandbox.
pub(crate) fn is_off(resolved: &ResolvedSandbox) -> bool {
    resolved.mode == SandboxMode::Off
}

#[cfg(not(feature = "sandbox"))]
mod off;
#[cfg(not(feature = "sandbox"))]
pub(crate) use off::{Confinement, Sandboxing};

/// A directory of one sandboxed process: made private (0700) under the system's temporary
/// directory, named after the host (so its reaper removes what a killed host left), and
/// removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
impl TempDir {
    /// A fresh directory `plurnk-mcp-sandbox-<owner>-<n>`.
    pub(crate) fn new(owner: &str) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "{}{owner}-{}",
            TEMP_PREFIX,
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// How every sandboxed process's temporary directory begins (the reaper removes a dead
/// host's by it).
#[cfg_attr(not(feature = "sandbox"), allow(dead_code))]
pub(crate) const TEMP_PREFIX: &str = "plurnk-mcp-sandbox-";

/// The process that is the server: the spawned child itself, or the leader that child forked
/// into the server's own PID namespace (the host's child too, by `CLONE_PARENT`), which the
/// host waits for through a pidfd.
pub(crate) enum Leader {
    /// The spawned child runs the program.
    Spawned(tokio::process::Child),
    /// The spawned child forked the leader and exited.
    Forked {
        spawned: tokio::process::Child,
        pid: i32,
    },
}

impl Leader {
    /// The spawned `child`, and the leader it forked, if it did.
    pub(crate) fn new(child: tokio::process::Child, leader: Option<i32>) -> Self {
        match leader {
            Some(pid) => Self::Forked {
                spawned: child,
                pid,
            },
            None => Self::Spawned(child),
        }
    }

    /// The spawned child, whose pipes the server's are.
    pub(crate) fn spawned(&mut self) -> &mut tokio::process::Child {
        match self {
            Self::Spawned(child) | Self::Forked { spawned: child, .. } => child,
        }
    }

    /// The server's pid, as the host sees it.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Self::Spawned(child) => child.id(),
            Self::Forked { pid, .. } => u32::try_from(*pid).ok(),
        }
    }

    /// Waits for the server to exit and reaps it.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Self::Spawned(child) => child.wait().await,
            Self::Forked { spawned, pid } => {
                // The spawned child exited as soon as it had forked the leader.
                let _ = spawned.wait().await;
                wait_forked(*pid).await
            }
        }
    }
}

/// Waits for `pid`, a child of this process no `tokio::process::Child` knows, to exit.
async fn wait_forked(pid: i32) -> std::io::Result<ExitStatus> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: pidfd_open with a pid and no flags returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        // No pidfd on this kernel: a blocking wait off the runtime's workers.
        return tokio::task::spawn_blocking(move || {
            let mut status = 0;
            // SAFETY: waitpid on this process's child, status on the stack.
            match unsafe { libc::waitpid(pid, &mut status, 0) } {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(ExitStatus::from_raw(status)),
            }
        })
        .await
        .map_err(std::io::Error::other)?;
    }
    // SAFETY: the descriptor was just opened and is owned by nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    // SAFETY: the AsyncFd owns the descriptor, which stays open and the same until it drops.
    let ready = unsafe { tokio::io::unix::AsyncFd::register(pidfd)? };
    let _ = ready.readable().await?;
    // SAFETY: waitid on the pidfd with a zeroed siginfo on the stack.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let done = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            std::os::fd::AsRawFd::as_raw_fd(ready.get_ref()) as libc::id_t,
            &mut info,
            libc::WEXITED,
        )
    };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid filled the child fields of the siginfo.
    let status = unsafe { info.si_status() };
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => status | 0x80,
        _ => status,
    };
    Ok(ExitStatus::from_raw(raw))
}
