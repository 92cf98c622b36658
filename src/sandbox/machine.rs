//! What this machine can enforce, learnt once per process by trying: each part of the hook
//! run on its own in a child that then runs `/bin/true`, the step that fails (and its error)
//! read back from the report pipe. Nothing is assumed from a kernel version.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::hook::{Hook, Step};
use super::paths::{Grants, Installation, Protected};

/// A part of the machinery: available, or why not.
pub(crate) type Can = Result<(), String>;

/// What this machine can enforce.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    /// Landlock's ABI version, or why there is none.
    pub landlock: Result<i32, String>,
    pub seccomp: Can,
    pub user_namespace: Can,
    pub pid_namespace: Can,
    pub network_namespace: Can,
    pub loopback: Can,
    /// A `pid_max` per PID namespace (Linux 6.14 and later).
    pub pid_max: Can,
    /// The daemon runs as root: the kernel exempts its processes from `RLIMIT_NPROC`.
    pub root: bool,
}

impl Machine {
    /// Tries each part.
    pub(crate) fn probe() -> Self {
        let landlock = landlock_abi();
        let seccomp = super::filter::program().and_then(|filter| {
            let mut hook = Hook::new();
            hook.filter = Some(filter);
            trial(hook)
        });
        let user_namespace = trial(namespaced(libc::CLONE_NEWUSER));
        let pid_namespace = user_namespace.clone().and_then(|()| {
            let mut hook = namespaced(libc::CLONE_NEWUSER | libc::CLONE_NEWPID);
            hook.leader = true;
            trial(hook)
        });
        let pid_max = pid_namespace.clone().and_then(|()| {
            let mut hook = namespaced(libc::CLONE_NEWUSER | libc::CLONE_NEWPID);
            hook.leader = true;
            hook.pid_max = Some(b"1000\n".to_vec());
            trial(hook)
        });
        let network_namespace = user_namespace
            .clone()
            .and_then(|()| trial(namespaced(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)));
        let loopback = network_namespace.clone().and_then(|()| {
            let mut hook = namespaced(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
            hook.loopback = true;
            trial(hook)
        });
        let landlock = landlock.and_then(|abi| {
            let grants = Grants::new(
                &Installation::default(),
                Path::new("/tmp"),
                &[],
                &[],
                &Protected::default(),
            )
            .map_err(|refused| refused.why)?;
            let mut hook = Hook::new();
            hook.ruleset = Some(grants.ruleset(false)?);
            trial(hook).map(|()| abi)
        });
        Self {
            landlock,
            seccomp,
            user_namespace,
            pid_namespace,
            network_namespace,
            loopback,
            pid_max,
            // SAFETY: getuid has no preconditions.
            root: unsafe { libc::getuid() } == 0,
        }
    }
}

/// A hook that unshares `flags` and maps the daemon's own user and group.
pub(super) fn namespaced(flags: libc::c_int) -> Hook {
    let mut hook = Hook::new();
    hook.unshare = flags;
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    hook.uid_map = format!("{uid} {uid} 1\n").into_bytes();
    hook.gid_map = format!("{gid} {gid} 1\n").into_bytes();
    hook
}

/// A pipe whose ends are both close-on-exec: (read, write).
pub(super) fn report_pipe() -> Option<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: both were just opened and are owned by nothing else.
    Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What the hook said through the report pipe.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// The first step that failed, and its error.
    pub failed: Option<(Step, std::io::Error)>,
    /// The leader's pid, when it forked one.
    pub leader: Option<i32>,
}

/// Reads the report pipe to its end (every writer has exec'd or exited).
pub(super) fn read_report(read: OwnedFd) -> Said {
    let mut bytes = Vec::new();
    let _ = std::fs::File::from(read).read_to_end(&mut bytes);
    let mut said = Said::default();
    for message in bytes.chunks_exact(5) {
        let Ok(value) = <[u8; 4]>::try_from(&message[1..5]) else {
            continue;
        };
        let value = i32::from_le_bytes(value);
        if message[0] == super::hook::LEADER {
            said.leader = Some(value);
        } else if let (None, Some(step)) = (&said.failed, Step::from_byte(message[0])) {
            said.failed = Some((step, std::io::Error::from_raw_os_error(value)));
        }
    }
    said
}

/// Reaps a leader the host will not wait for (its program never ran).
pub(super) fn reap(leader: i32) {
    let mut status = 0;
    // SAFETY: waitpid on a child of this process, with a status on the stack.
    unsafe {
        libc::waitpid(leader, &mut status, 0);
    }
}

/// Runs `/bin/true` under `hook`: whether every step held, or the first that failed.
fn trial(mut hook: Hook) -> Can {
    let Some((read, write)) = report_pipe() else {
        return Err("no pipe could be made to learn the outcome".to_owned());
    };
    hook.report = Some(write);
    let mut command = std::process::Command::new("/bin/true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook only makes system calls (see hook.rs).
    unsafe {
        command.pre_exec(move || hook.run());
    }
    let status = command.status();
    // The command (and the hook, with its end of the pipe) is gone once it has run.
    drop(command);
    let said = read_report(read);
    let status = match (status, said.leader) {
        (Ok(_), Some(leader)) => {
            let mut raw = 0;
            // SAFETY: waitpid on this process's child (CLONE_PARENT), status on the stack.
            unsafe { libc::waitpid(leader, &mut raw, 0) };
            Ok(std::os::unix::process::ExitStatusExt::from_raw(raw))
        }
        (status, _) => status,
    };
    match (status, said.failed) {
        (_, Some((step, error))) => Err(format!("{} failed: {error}", step.doing())),
        (Ok(status), None) if status.success() => Ok(()),
        (Ok(status), None) => Err(format!("a trial process ended: {status}")),
        (Err(error), None) => Err(format!("a trial process could not start: {error}")),
    }
}

/// Landlock's ABI version, asked of the kernel.
fn landlock_abi() -> Result<i32, String> {
    const VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute and the version flag only
    // answers a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            VERSION,
        )
    };
    if abi > 0 {
        i32::try_from(abi).map_err(|_| "an unknown Landlock ABI".to_owned())
    } else {
        Err(format!(
            "this kernel has no Landlock ({})",
            std::io::Error::last_os_error()
        ))
    }
}

impl Step {
    /// What the step does, for a sentence: "unsharing a user namespace failed: …".
    pub(super) fn doing(self) -> &'static str {
        match self {
            Self::UserNamespace => "unsharing a user namespace",
            Self::Maps => "mapping the user into its namespace",
            Self::Loopback => "bringing the loopback up",
            Self::Limits => "setting the resource limits",
            Self::Leader => "starting the server in its PID namespace",
            Self::NoNewPrivs => "setting no_new_privs",
            Self::Landlock => "restricting the filesystem with Landlock",
            Self::Seccomp => "installing the seccomp filter",
            Self::PidMax => "setting the PID namespace's pid_max",
        }
    }
}
