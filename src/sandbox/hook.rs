//! What runs in the child between `fork` and `exec`: the namespaces, the leader, the limits,
//! Landlock and seccomp, in that order. Everything it needs is made in the parent first
//! ([`Hook`]), so the child only makes system calls: it allocates nothing and takes no lock,
//! which is all a child of a threaded process may do.
//!
//! The child unshares a user namespace (and in it a PID and a network namespace), maps its
//! own user and group, brings its loopback up when asked and sets its limits. Only a process
//! forked after `unshare` is inside the new PID namespace (and a process outside it may not
//! start threads there), so with one the child forks the *leader* with `CLONE_PARENT`: the
//! leader is the host's own child, the first process of the namespace, the leader of a process
//! group of its own; it confines itself and goes on to `exec` the server, while the child tells
//! the host the leader's pid and exits. When the leader ends, the kernel kills every process left in
//! its namespace, so nothing the server started outlives it, whatever session, group or
//! environment it moved to.

use std::ffi::{CStr, c_char};
use std::os::fd::{AsRawFd, OwnedFd};

use seccompiler::BpfProgram;

/// One step of the hook: when it fails, its number and the error go back to the parent
/// through the report pipe, so the parent can say which part the machine refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Step {
    UserNamespace = 1,
    Maps = 2,
    Loopback = 3,
    Limits = 4,
    Leader = 5,
    NoNewPrivs = 6,
    Landlock = 7,
    Seccomp = 8,
    /// The leader could not set its namespace's `pid_max` (reported, not fatal).
    PidMax = 9,
}

/// The report pipe's tag of the leader's pid (every other tag is a failed [`Step`]).
pub(super) const LEADER: u8 = 0xff;

impl Step {
    pub(super) fn from_byte(byte: u8) -> Option<Self> {
        [
            Self::UserNamespace,
            Self::Maps,
            Self::Loopback,
            Self::Limits,
            Self::Leader,
            Self::NoNewPrivs,
            Self::Landlock,
            Self::Seccomp,
            Self::PidMax,
        ]
        .into_iter()
        .find(|step| *step as u8 == byte)
    }
}

/// Everything the child does, made ready in the parent.
pub(super) struct Hook {
    /// `CLONE_NEWUSER` with `CLONE_NEWPID` and `CLONE_NEWNET` as planned; 0 for none.
    pub unshare: libc::c_int,
    /// `"<uid> <uid> 1\n"` and `"<gid> <gid> 1\n"`.
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// Bring `lo` up in the new network namespace.
    pub loopback: bool,
    /// `(resource, limit)` pairs, set soft and hard alike.
    pub limits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    /// The CPU limit: soft (`SIGXCPU`) and hard one second later (`SIGKILL`).
    pub cpu: Option<libc::rlim_t>,
    /// The namespace's `pid_max` (`"<n>\n"`), when the kernel keeps one per PID namespace.
    pub pid_max: Option<Vec<u8>>,
    /// Fork the leader (a PID namespace was unshared).
    pub leader: bool,
    /// The Landlock ruleset (its rules already added).
    pub ruleset: Option<OwnedFd>,
    /// The seccomp filter.
    pub filter: Option<BpfProgram>,
    /// The write end of the report pipe (close-on-exec).
    pub report: Option<OwnedFd>,
}

impl Hook {
    pub(super) fn new() -> Self {
        Self {
            unshare: 0,
            uid_map: Vec::new(),
            gid_map: Vec::new(),
            loopback: false,
            limits: Vec::new(),
            cpu: None,
            pid_max: None,
            leader: false,
            ruleset: None,
            filter: None,
            report: None,
        }
    }

    /// Runs in the child after `fork`, before `exec`.
    ///
    /// # Safety
    ///
    /// Only in a freshly forked child: it forks again and changes the process for good.
    pub(super) unsafe fn run(&self) -> std::io::Result<()> {
        // SAFETY: each step makes system calls on memory this value owns.
        unsafe {
            if self.unshare != 0 {
                self.step(Step::UserNamespace, libc::unshare(self.unshare))?;
                self.step(Step::Maps, self.write_maps())?;
            }
            if self.loopback {
                self.step(Step::Loopback, loopback_up())?;
            }
            self.step(Step::Limits, self.set_limits())?;
            if self.leader {
                self.fork_leader()?;
            }
            self.confine()
        }
    }

    /// Forks the leader (the host's child, the namespace's first process), which returns to
    /// go on to `exec`; this process tells the host the leader's pid and exits.
    unsafe fn fork_leader(&self) -> std::io::Result<()> {
        // SAFETY: a raw clone without a new stack is a fork; the leader only makes system
        // calls until it execs.
        unsafe {
            let flags = (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong;
            let pid = libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize);
            if pid == 0 {
                // The leader leads a process group of its own too, so that its group is its
                // pid, as an unsandboxed server's is.
                libc::setpgid(0, 0);
                if let Some(pid_max) = &self.pid_max
                    && write_file(c"/proc/sys/kernel/pid_max", pid_max) < 0
                {
                    // The server runs without it; the probe learns from this that it cannot.
                    let _ = self.step(Step::PidMax, -1);
                }
                return Ok(());
            }
            self.step(Step::Leader, if pid < 0 { -1 } else { 0 })?;
            if let Some(report) = &self.report {
                let bytes = (pid as i32).to_le_bytes();
                let message = [LEADER, bytes[0], bytes[1], bytes[2], bytes[3]];
                libc::write(report.as_raw_fd(), message.as_ptr().cast(), message.len());
            }
            libc::_exit(0)
        }
    }

    /// The server's own confinement.
    unsafe fn confine(&self) -> std::io::Result<()> {
        // SAFETY: system calls on memory this value owns.
        unsafe {
            drop_capabilities();
            self.step(
                Step::NoNewPrivs,
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
            )?;
            if let Some(ruleset) = &self.ruleset {
                let done = libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    ruleset.as_raw_fd(),
                    0 as libc::c_uint,
                );
                self.step(Step::Landlock, if done == 0 { 0 } else { -1 })?;
            }
            if let Some(filter) = &self.filter {
                let applied = seccompiler::apply_filter(filter).is_ok();
                self.step(Step::Seccomp, if applied { 0 } else { -1 })?;
            }
        }
        Ok(())
    }

    unsafe fn write_maps(&self) -> libc::c_int {
        // SAFETY: writes of owned bytes to files this process may write.
        unsafe {
            // Without `deny`, an unprivileged process may not write its gid_map; a
            // privileged one may, and may fail here: either way the maps decide.
            write_file(c"/proc/self/setgroups", b"deny");
            let uid = write_file(c"/proc/self/uid_map", &self.uid_map);
            let gid = write_file(c"/proc/self/gid_map", &self.gid_map);
            if uid < 0 || gid < 0 { -1 } else { 0 }
        }
    }

    unsafe fn set_limits(&self) -> libc::c_int {
        // SAFETY: `setrlimit` reads a struct on the stack.
        unsafe {
            for (resource, limit) in &self.limits {
                // Never above what the process already has: a limit may only come down
                // (raising the hard one needs a privilege the child does not have).
                let mut held = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: libc::RLIM_INFINITY,
                };
                libc::getrlimit(*resource, &mut held);
                let limit = (*limit).min(held.rlim_max);
                let value = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(*resource, &value) != 0 {
                    return -1;
                }
            }
            if let Some(cpu) = self.cpu {
                let mut held = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: libc::RLIM_INFINITY,
                };
                libc::getrlimit(libc::RLIMIT_CPU, &mut held);
                let value = libc::rlimit {
                    rlim_cur: cpu.min(held.rlim_max),
                    rlim_max: cpu.saturating_add(1).min(held.rlim_max),
                };
                if libc::setrlimit(libc::RLIMIT_CPU, &value) != 0 {
                    return -1;
                }
            }
            0
        }
    }

    /// Turns a step's result into the hook's: on failure, tells the parent which step and
    /// why through the report pipe.
    unsafe fn step(&self, step: Step, result: libc::c_int) -> std::io::Result<()> {
        if result >= 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if let Some(report) = &self.report {
            let errno = error.raw_os_error().unwrap_or(0);
            let bytes = errno.to_le_bytes();
            let message = [step as u8, bytes[0], bytes[1], bytes[2], bytes[3]];
            // SAFETY: a write of a buffer on the stack.
            unsafe {
                libc::write(report.as_raw_fd(), message.as_ptr().cast(), message.len());
            }
        }
        Err(error)
    }
}

/// Writes `bytes` to `path`; the result of the write (negative on failure).
unsafe fn write_file(path: &CStr, bytes: &[u8]) -> libc::c_int {
    // SAFETY: open, write and close of a path and a buffer the caller owns.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return -1;
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if written < 0 { -1 } else { 0 }
    }
}

/// Brings `lo` up in the current network namespace.
unsafe fn loopback_up() -> libc::c_int {
    // SAFETY: an ioctl on a socket this function opens, with a struct on the stack.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return -1;
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let done = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        libc::close(socket);
        done
    }
}

/// Empties the capability bounding set, so no `exec` (of root in the namespace included)
/// gains a capability. Fails quietly where the process may not change it: then it had none.
unsafe fn drop_capabilities() {
    // SAFETY: prctl with integer arguments.
    unsafe {
        for capability in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
    }
}
