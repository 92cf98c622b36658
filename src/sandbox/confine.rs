//! The host's sandboxing and one process's confinement: a policy and this machine made into
//! the hook a child runs, with the report of what the kernel holds and why not the rest.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use seccompiler::BpfProgram;

use super::hook::Hook;
use super::machine::{self, Machine};
use super::paths::{Grants, Installation, Protected};
use super::{Program, Refusal, SandboxOptions, TempDir, effective, is_off};
use crate::config::{ResolvedSandbox, SandboxMode, SandboxNetwork, SandboxPolicy, show_bytes};
use crate::model::{SandboxPart, SandboxPartReport, SandboxReport, SandboxState};

/// The host's sandboxing: its default policy, what no process may reach, this machine.
pub(crate) struct Sandboxing {
    policy: SandboxPolicy,
    protected: Protected,
    machine: OnceLock<Machine>,
    filter: OnceLock<Result<BpfProgram, String>>,
    pretend: Vec<SandboxPart>,
}

impl std::fmt::Debug for Sandboxing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxing")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// One process's sandbox: what the child does before `exec`, what it is given, and what is
/// kept while it runs (its temporary directory, its report, its limits).
pub(crate) struct Confinement {
    hook: Option<Hook>,
    env: Vec<(String, String)>,
    tmp: Option<TempDir>,
    report: SandboxReport,
    limits: ResolvedSandbox,
    /// The read end of the pipe the hook reports a failed step on.
    said: Option<OwnedFd>,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl Sandboxing {
    /// The host-wide policy is the embedder's, else the configuration's, else the default.
    pub(crate) fn new(configured: Option<&SandboxPolicy>, options: &SandboxOptions) -> Self {
        let home = options
            .home
            .clone()
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from));
        Self {
            policy: options
                .policy
                .clone()
                .or_else(|| configured.cloned())
                .unwrap_or_default(),
            protected: Protected::new(home.as_deref(), &options.protected),
            machine: OnceLock::new(),
            filter: OnceLock::new(),
            #[cfg(feature = "test-hooks")]
            pretend: options.pretend_missing.clone(),
            #[cfg(not(feature = "test-hooks"))]
            pretend: Vec::new(),
        }
    }

    fn machine(&self) -> &Machine {
        self.machine.get_or_init(Machine::probe)
    }

    /// The confinement of `program` under `own` policy over the host's.
    ///
    /// # Errors
    ///
    /// The policy requires what this machine cannot enforce, or declares a path it may not
    /// have or that does not exist.
    pub(crate) fn confine(
        &self,
        own: Option<&SandboxPolicy>,
        program: &Program<'_>,
    ) -> Result<Confinement, Refusal> {
        let limits = effective(own, &self.policy);
        if is_off(&limits) {
            return Ok(Confinement::off());
        }
        let plan = Plan::new(&limits, self.machine(), &self.pretend);
        if limits.mode == SandboxMode::Require
            && let Some(missing) = plan.parts.iter().find(|part| !part.held)
        {
            return Err(Refusal(format!(
                "its sandbox policy requires {} but this machine cannot enforce it ({}): \
                 set the policy's mode to \"best-effort\", or run the host where it can",
                missing.part, missing.detail
            )));
        }
        self.build(plan, limits, program)
    }

    fn build(
        &self,
        mut plan: Plan,
        limits: ResolvedSandbox,
        program: &Program<'_>,
    ) -> Result<Confinement, Refusal> {
        let tmp = TempDir::new(program.owner)
            .map_err(|error| Refusal(format!("its temporary directory: {error}")))?;
        let mut hook = Hook::new();
        let (said, write) = machine::report_pipe()
            .ok_or_else(|| Refusal("no pipe could be made for its sandbox".to_owned()))?;
        hook.report = Some(write);
        if plan.namespaces != 0 {
            let namespaced = machine::namespaced(plan.namespaces);
            hook.unshare = namespaced.unshare;
            hook.uid_map = namespaced.uid_map;
            hook.gid_map = namespaced.gid_map;
        }
        hook.loopback = plan.loopback;
        hook.leader = plan.leader;
        hook.pid_max = plan.pid_max.map(|n| format!("{n}\n").into_bytes());
        hook.limits = plan.limits.clone();
        hook.cpu = limits.cpu;
        if plan.filesystem {
            let command = resolve(program.command, program.path_var);
            let installation = Installation::of(
                &command,
                program.args,
                program.cwd,
                program.path_var,
                &self.protected,
            );
            let mut read = limits.read.clone();
            if let Some(cwd) = program.cwd
                && let Ok(cwd) = cwd.canonicalize()
                && self.protected.check(&cwd).is_ok()
            {
                read.push(cwd);
            }
            let grants = Grants::new(
                &installation,
                tmp.path(),
                &read,
                &limits.write,
                &self.protected,
            )
            .map_err(|refused| {
                Refusal(format!(
                    "its sandbox policy names {}, which {}",
                    refused.path, refused.why
                ))
            })?;
            plan.describe_filesystem(&grants);
            hook.ruleset = Some(
                grants
                    .ruleset(limits.network == SandboxNetwork::None)
                    .map_err(|error| Refusal(format!("its Landlock ruleset: {error}")))?,
            );
        }
        if plan.syscalls {
            hook.filter = Some(
                self.filter
                    .get_or_init(super::filter::program)
                    .clone()
                    .map_err(|error| Refusal(format!("its seccomp filter: {error}")))?,
            );
        }
        // Its private directory is its home too: what a program keeps in its home (settings,
        // caches) starts empty and goes with it, and a program that reads the user's
        // configuration there (git's ~/.gitconfig) finds none rather than a refusal.
        let private = tmp.path().display().to_string();
        let mut env = vec![("TMPDIR".to_owned(), private.clone())];
        if !program.own_home {
            env.push(("HOME".to_owned(), private));
        }
        Ok(Confinement {
            hook: Some(hook),
            env,
            tmp: Some(tmp),
            report: plan.report(),
            limits,
            said: Some(said),
        })
    }
}

/// `command` as the child's `exec` will find it: a path as it is, a bare name on `path_var`.
fn resolve(command: &OsStr, path_var: Option<&OsStr>) -> PathBuf {
    let command = Path::new(command);
    if command.components().count() > 1 {
        return command.to_owned();
    }
    path_var
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| command.to_owned())
}

impl Confinement {
    /// No sandbox.
    pub(crate) fn off() -> Self {
        Self {
            hook: None,
            env: Vec::new(),
            tmp: None,
            report: SandboxReport::off(),
            limits: SandboxPolicy {
                mode: Some(SandboxMode::Off),
                ..SandboxPolicy::default()
            }
            .resolve(),
            said: None,
        }
    }

    /// What the kernel holds.
    pub(crate) fn report(&self) -> &SandboxReport {
        &self.report
    }

    /// The limits it runs under (for naming the one that ended it).
    pub(crate) fn limits(&self) -> &ResolvedSandbox {
        &self.limits
    }

    /// Gives `command` the sandbox: its environment (after the definition's, so `TMPDIR` is
    /// the private directory) and the hook its child runs before `exec`.
    pub(crate) fn install(&mut self, command: &mut tokio::process::Command) {
        for (name, value) in &self.env {
            command.env(name, value);
        }
        if let Some(hook) = self.hook.take() {
            // SAFETY: the hook only makes system calls on memory it owns (see hook.rs).
            unsafe {
                command.pre_exec(move || hook.run());
            }
        }
    }

    /// After a failed spawn (its command dropped): the error, with the sandbox step that
    /// failed when one did. A leader that was forked but never ran is reaped.
    pub(crate) fn explain(&mut self, error: std::io::Error) -> std::io::Error {
        let Some(said) = self.said.take().map(machine::read_report) else {
            return error;
        };
        if let Some(leader) = said.leader {
            machine::reap(leader);
        }
        match said.failed {
            Some((step, cause)) => std::io::Error::new(
                error.kind(),
                format!(
                    "its sandbox could not be set up: {} failed: {cause}",
                    step.doing()
                ),
            ),
            None => error,
        }
    }

    /// After a spawn (its command dropped): the pid of the leader, when the server runs in
    /// a PID namespace of its own (then it, not the spawned child, is the server), and what
    /// must live as long as the process (its temporary directory).
    pub(crate) fn keep(&mut self) -> (Option<i32>, Option<TempDir>) {
        let leader = self
            .said
            .take()
            .and_then(|read| machine::read_report(read).leader);
        (leader, self.tmp.take())
    }
}

/// What of a policy this machine enforces, and how.
struct Plan {
    parts: Vec<SandboxPartReport>,
    namespaces: libc::c_int,
    loopback: bool,
    leader: bool,
    pid_max: Option<u64>,
    limits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    filesystem: bool,
    syscalls: bool,
}

impl Plan {
    fn new(limits: &ResolvedSandbox, machine: &Machine, pretend: &[SandboxPart]) -> Self {
        let lever = |part: SandboxPart, can: &machine::Can| -> machine::Can {
            if pretend.contains(&part) {
                Err("taken as missing by a test lever".to_owned())
            } else {
                can.clone()
            }
        };
        let mut plan = Self {
            parts: Vec::new(),
            namespaces: 0,
            loopback: false,
            leader: false,
            pid_max: None,
            limits: Vec::new(),
            filesystem: false,
            syscalls: false,
        };
        let landlock = lever(
            SandboxPart::Filesystem,
            &machine.landlock.clone().map(|_| ()),
        );
        plan.filesystem = landlock.is_ok();
        plan.part(SandboxPart::Filesystem, landlock.clone(), String::new());
        let user = machine.user_namespace.clone();
        // Descendants: a PID namespace whose first process holds it.
        let pid = lever(
            SandboxPart::Descendants,
            &user.clone().and(machine.pid_namespace.clone()),
        );
        if pid.is_ok() {
            plan.namespaces |= libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
            plan.leader = true;
        }
        plan.part(
            SandboxPart::Descendants,
            pid.clone(),
            "a PID namespace of its own, which it leads: every descendant ends with it".to_owned(),
        );
        plan.network(limits.network, machine, &user, &landlock, &lever);
        let seccomp = lever(SandboxPart::Syscalls, &machine.seccomp);
        plan.syscalls = seccomp.is_ok();
        plan.part(
            SandboxPart::Syscalls,
            seccomp,
            "seccomp refuses ptrace, process_vm_*, keyrings, modules, mounts, bpf; \
             no_new_privs; no capabilities"
                .to_owned(),
        );
        plan.limit_parts(limits, machine, &user, &pid, &lever);
        if plan.namespaces != 0 {
            plan.namespaces |= libc::CLONE_NEWUSER;
        }
        plan
    }

    fn network(
        &mut self,
        network: SandboxNetwork,
        machine: &Machine,
        user: &machine::Can,
        landlock: &machine::Can,
        lever: &dyn Fn(SandboxPart, &machine::Can) -> machine::Can,
    ) {
        let (can, detail) = match network {
            SandboxNetwork::Any => return,
            SandboxNetwork::None => (
                user.clone().and(machine.network_namespace.clone()),
                "none: a network namespace of its own with no interface up",
            ),
            SandboxNetwork::Loopback => (
                user.clone()
                    .and(machine.network_namespace.clone())
                    .and(machine.loopback.clone()),
                "its own loopback only: a network namespace of its own",
            ),
        };
        let can = lever(SandboxPart::Network, &can);
        if can.is_ok() {
            self.namespaces |= libc::CLONE_NEWNET;
            self.loopback = network == SandboxNetwork::Loopback;
        }
        let can = match (can, network, landlock) {
            (Err(why), SandboxNetwork::None, Ok(())) => Err(format!(
                "{why}; Landlock refuses its TCP connections and listeners, not UDP"
            )),
            (can, _, _) => can,
        };
        self.part(SandboxPart::Network, can, detail.to_owned());
    }

    fn limit_parts(
        &mut self,
        limits: &ResolvedSandbox,
        machine: &Machine,
        user: &machine::Can,
        pid: &machine::Can,
        lever: &dyn Fn(SandboxPart, &machine::Can) -> machine::Can,
    ) {
        // Root outside a user namespace may raise its own limits again.
        let kept: machine::Can = if machine.root {
            user.clone()
                .map_err(|why| format!("the daemon runs as root and {why}"))
        } else {
            Ok(())
        };
        if let Some(memory) = limits.memory {
            self.limits
                .push((libc::RLIMIT_DATA, memory as libc::rlim_t));
            let can = lever(SandboxPart::Memory, &kept);
            self.part(
                SandboxPart::Memory,
                can,
                format!("{} of data per process (RLIMIT_DATA)", show_bytes(memory)),
            );
        }
        if let Some(files) = limits.files {
            self.limits
                .push((libc::RLIMIT_NOFILE, files as libc::rlim_t));
            let can = lever(SandboxPart::Files, &kept);
            self.part(
                SandboxPart::Files,
                can,
                format!("{files} open files per process (RLIMIT_NOFILE)"),
            );
        }
        if let Some(processes) = limits.processes {
            self.processes(processes, machine, user, pid, lever);
        }
        if let Some(cpu) = limits.cpu {
            let can = lever(SandboxPart::Cpu, &kept);
            self.part(
                SandboxPart::Cpu,
                can,
                format!("{cpu} s of CPU per process (RLIMIT_CPU)"),
            );
        }
    }

    /// Processes: `RLIMIT_NPROC` counts the user's processes in the server's own user
    /// namespace (outside one it would count every process of the daemon's user); the kernel
    /// exempts root from it, so under root the PID namespace's `pid_max` bounds the server's
    /// descendants instead.
    fn processes(
        &mut self,
        processes: u64,
        machine: &Machine,
        user: &machine::Can,
        pid: &machine::Can,
        lever: &dyn Fn(SandboxPart, &machine::Can) -> machine::Can,
    ) {
        let counted = processes;
        let pid_max = pid.clone().and(machine.pid_max.clone());
        if pid_max.is_ok() {
            // pid_max is one more than the highest pid; once pids wrap around the kernel hands
            // out those from 300 up again, so the namespace holds `counted` processes then,
            // and up to 300 more before.
            self.pid_max = Some(counted.saturating_add(301));
        }
        if user.is_ok() {
            self.limits
                .push((libc::RLIMIT_NPROC, counted as libc::rlim_t));
        }
        let (can, detail) = match (machine.root, user, &pid_max) {
            (false, Ok(()), _) => (
                Ok(()),
                format!("{processes} processes and threads (RLIMIT_NPROC in its user namespace)"),
            ),
            (true, _, Ok(())) => (
                Ok(()),
                format!(
                    "{counted} to {} processes and threads below it (its PID namespace's \
                     pid_max; the kernel exempts root from RLIMIT_NPROC)",
                    counted.saturating_add(300)
                ),
            ),
            (false, Err(why), _) => (Err(why.clone()), String::new()),
            (true, _, Err(why)) => (
                Err(format!(
                    "the kernel exempts root from RLIMIT_NPROC and {why}"
                )),
                String::new(),
            ),
        };
        let can = lever(SandboxPart::Processes, &can);
        self.part(SandboxPart::Processes, can, detail);
    }

    fn part(&mut self, part: SandboxPart, can: machine::Can, detail: String) {
        self.parts.push(match can {
            Ok(()) => SandboxPartReport {
                part,
                held: true,
                detail,
            },
            Err(why) => SandboxPartReport {
                part,
                held: false,
                detail: why,
            },
        });
    }

    fn describe_filesystem(&mut self, grants: &Grants) {
        if let Some(part) = self
            .parts
            .iter_mut()
            .find(|part| part.part == SandboxPart::Filesystem && part.held)
        {
            part.detail = format!(
                "Landlock: reads the system, its installation ({} paths) and {} declared; \
                 writes its temporary directory and {} declared; the home folder hidden",
                grants.installation, grants.declared_read, grants.declared_write
            );
        }
    }

    fn report(&self) -> SandboxReport {
        let state = if self.parts.iter().all(|part| part.held) {
            SandboxState::Held
        } else {
            SandboxState::Partly
        };
        SandboxReport {
            state,
            parts: self.parts.clone(),
        }
    }
}

/// One thing `plurnk-mcp sandbox check` says of this machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MachineFinding {
    /// What (`landlock`, `user namespaces`, …).
    pub feature: &'static str,
    /// Whether this machine has it.
    pub available: bool,
    /// What it gives, or why it is missing.
    pub detail: String,
}

/// What this machine can enforce, part by part, learnt by trying each in a child process.
pub fn check() -> Vec<MachineFinding> {
    let machine = Machine::probe();
    let finding = |feature, can: &machine::Can, gives: &str| MachineFinding {
        feature,
        available: can.is_ok(),
        detail: match can {
            Ok(()) => gives.to_owned(),
            Err(why) => why.clone(),
        },
    };
    let landlock = machine.landlock.clone().map(|_| ());
    let abi = machine.landlock.clone().unwrap_or_default();
    vec![
        finding(
            "landlock",
            &landlock,
            &format!(
                "ABI {abi}: the filesystem{}{}",
                if abi >= 4 {
                    ", TCP bind and connect"
                } else {
                    ""
                },
                if abi >= 6 {
                    ", signals and abstract sockets scoped"
                } else {
                    ""
                }
            ),
        ),
        finding(
            "seccomp",
            &machine.seccomp,
            "a system call filter, no_new_privs",
        ),
        finding(
            "user namespaces",
            &machine.user_namespace,
            "a user namespace per process: limits counted per server, no capabilities outside",
        ),
        finding(
            "PID namespaces",
            &machine.pid_namespace,
            "descendants end with their server",
        ),
        finding(
            "pid_max per PID namespace",
            &machine.pid_max,
            "a bound on a server's descendants that holds for root too",
        ),
        finding(
            "network namespaces",
            &machine.network_namespace,
            "network none",
        ),
        finding(
            "loopback in a namespace",
            &machine.loopback,
            "network loopback",
        ),
        MachineFinding {
            feature: "resource limits",
            available: true,
            detail: if machine.root {
                "memory, files, CPU per process; the daemon runs as root, which the kernel exempts \
                 from the process limit (pid_max bounds it instead)"
                    .to_owned()
            } else {
                "memory, files, CPU per process; processes per server".to_owned()
            },
        },
    ]
}
