//! The stdio binding: one exact executable in its own process group, owned until it is gone.
//!
//! The child is spawned with its argument array and no shell, as the leader of a new process
//! group, so that closing a server also ends whatever it started. [`ChildProcess`] is the one
//! owner of that group: dropping it kills the whole group, and [`ChildProcess::close`] does the
//! polite version (stdin EOF is sent by the transport, then a bounded wait, then `SIGKILL`).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::close::CloseFault;

use super::reaper::Reaper;
use crate::config::SandboxPolicy;
use crate::model::SandboxReport;
use crate::sandbox::{Confinement, Leader, Program, Refusal, Sandboxing, TempDir};

/// How many stderr lines, and how many bytes of them, a server keeps for its Problem.
const STDERR_LINES: usize = 20;
const STDERR_BYTES: usize = 4096;
/// Kept beyond `STDERR_BYTES` and dropped only after scrubbing: a secret cut in half by the
/// window's start would otherwise survive as an unscrubbed fragment.
const STDERR_MARGIN: usize = 1024;
/// How much of one stderr line is logged; the rest of a longer line is dropped.
const STDERR_LOG_LINE: usize = 1024;
/// How many stderr lines a server may have logged per second (and in a burst); the rest are
/// counted, and the count is logged when the server quiets down.
const STDERR_LOG_RATE: f64 = 50.0;
const STDERR_LOG_BURST: f64 = 100.0;

/// The variables of the daemon's own environment every child inherits: the ones the official
/// SDKs' stdio clients pass (Python's `DEFAULT_INHERITED_ENV_VARS`, TypeScript's
/// `getDefaultEnvironment`) — who the user is and where its files are (`HOME`, `LOGNAME`,
/// `USER`), where programs are found (`PATH`), its shell and terminal (`SHELL`, `TERM`) — and,
/// beyond them, the locale, so that a program's text (a CLI source's output) is encoded and
/// worded as the daemon's is. None of them holds a credential; anything else a child needs,
/// its definition declares or the operator names in `PLURNK_MCP_INHERIT_ENV`.
pub(crate) const INHERITED_BY_DEFAULT: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NUMERIC",
    "LC_TIME",
];

/// What of the daemon's environment a child process starts from: [`INHERITED_BY_DEFAULT`] as
/// this process has them, and the variables the operator allows (their values as the host's
/// configuration has them) over those. A child's definition adds its own on top; nothing else
/// reaches it — not the gateway's bearer, not another server's credentials. `Debug` shows the
/// names only.
#[derive(Clone, Default)]
pub(crate) struct Inherited {
    vars: Vec<(String, OsString)>,
}

impl Inherited {
    /// The defaults from this process's environment, then `allowed` over them.
    pub(crate) fn new<'v>(allowed: impl IntoIterator<Item = (&'v str, &'v str)>) -> Self {
        let mut vars: Vec<(String, OsString)> = INHERITED_BY_DEFAULT
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), std::env::var_os(name)?)))
            .collect();
        for (name, value) in allowed {
            vars.retain(|(held, _)| held != name);
            vars.push((name.to_owned(), value.into()));
        }
        Self { vars }
    }

    /// The defaults alone: for a child started outside any host (`source check`'s probe).
    pub(crate) fn defaults() -> Self {
        Self::new([])
    }

    /// Clears `command`'s environment and gives it these.
    pub(crate) fn apply(&self, command: &mut Command) {
        command.env_clear();
        for (name, value) in &self.vars {
            command.env(name, value);
        }
    }

    /// The value of `name`, if a child inherits it.
    pub(crate) fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(held, _)| held == name)
            .map(|(_, value)| value.as_os_str())
    }
}

impl std::fmt::Debug for Inherited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.vars.iter().map(|(name, _)| name))
            .finish()
    }
}

/// What every child process of a host starts with: the environment it inherits, the
/// reaper that marks it and kills it if the host dies, and the host's sandboxing. Cheap to
/// clone.
#[derive(Clone)]
pub(crate) struct Children {
    pub reaper: Arc<Reaper>,
    pub inherited: Arc<Inherited>,
    pub sandbox: Arc<Sandboxing>,
}

impl Children {
    /// A reaper of their own, `inherited`, and no sandbox.
    #[cfg(test)]
    pub(crate) fn new(inherited: Inherited) -> Self {
        Self {
            reaper: Reaper::new(),
            inherited: Arc::new(inherited),
            sandbox: Arc::new(Sandboxing::new(
                Some(&crate::config::SandboxPolicy {
                    mode: Some(crate::config::SandboxMode::Off),
                    ..Default::default()
                }),
                &crate::sandbox::SandboxOptions::default(),
            )),
        }
    }

    /// The confinement of `command` under `policy` (over the host's), or why it may not run.
    pub(crate) fn confine(
        &self,
        policy: Option<&SandboxPolicy>,
        command: &OsStr,
        args: &[String],
        cwd: Option<&Path>,
        env: &[(String, String)],
    ) -> Result<Confinement, Refusal> {
        confine(
            &self.sandbox,
            &self.reaper,
            &self.inherited,
            policy,
            command,
            args,
            cwd,
            env,
        )
    }
}

/// The confinement of one program: its `PATH` is the definition's, else the inherited one.
#[allow(clippy::too_many_arguments)]
fn confine(
    sandbox: &Sandboxing,
    reaper: &Reaper,
    inherited: &Inherited,
    policy: Option<&SandboxPolicy>,
    command: &OsStr,
    args: &[String],
    cwd: Option<&Path>,
    env: &[(String, String)],
) -> Result<Confinement, Refusal> {
    let path_var = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| OsStr::new(value))
        .or_else(|| inherited.get("PATH"));
    sandbox.confine(
        policy,
        &Program {
            command,
            args,
            cwd,
            path_var,
            owner: reaper.mark().1,
            own_home: env.iter().any(|(name, _)| name == "HOME"),
        },
    )
}

/// What to spawn: already expanded, never shown.
pub(crate) struct StdioSpawn<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a PathBuf>,
    /// What the server starts from, before `env`.
    pub inherited: &'a Arc<Inherited>,
    pub env: &'a [(String, String)],
    /// The host's reaper: it marks the server and kills its group if the host dies.
    pub reaper: &'a Arc<Reaper>,
    /// The host's sandboxing, and the server's own policy over it.
    pub sandbox: &'a Arc<Sandboxing>,
    pub policy: Option<&'a SandboxPolicy>,
    /// Cancelled when the leader exits (by the task that reaps it: no watcher of its own).
    pub exited: CancellationToken,
}

/// The last bytes a server wrote to stderr, bounded whatever it writes: a server that
/// writes without newlines, or invalid UTF-8, costs the host [`STDERR_BYTES`] and no more,
/// and is drained to the end so it never blocks on a full pipe.
#[derive(Default)]
pub(crate) struct StderrTail(Mutex<VecDeque<u8>>);

impl StderrTail {
    /// Keeps the last bytes of `bytes` (and of what came before) within the bound.
    pub(crate) fn push(&self, bytes: &[u8]) {
        let Ok(mut tail) = self.0.lock() else {
            return;
        };
        let bound = STDERR_BYTES + STDERR_MARGIN;
        let keep = &bytes[bytes.len().saturating_sub(bound)..];
        let held = tail.len();
        let overflow = (held + keep.len()).saturating_sub(bound);
        tail.drain(..overflow.min(held));
        tail.extend(keep);
    }

    /// The last lines kept, decoded lossily, scrubbed of secrets and then cut to
    /// [`STDERR_BYTES`] and [`STDERR_LINES`], or `None` when the server wrote nothing.
    pub(crate) fn text(&self) -> Option<String> {
        let bytes: Vec<u8> = self.0.lock().ok()?.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let clean = crate::redact::scrub(&text);
        let clean = clean.trim_end_matches(['\n', '\r']);
        let mut start = clean.len().saturating_sub(STDERR_BYTES);
        while !clean.is_char_boundary(start) {
            start += 1;
        }
        let window = &clean[start..];
        if window.trim().is_empty() {
            return None;
        }
        let lines: Vec<&str> = window.lines().collect();
        Some(lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n"))
    }
}

/// How far a server process has ended, as its one watcher task sees it.
#[derive(Clone, Default)]
struct Ended {
    /// How the leader exited, once it has.
    exit: Option<String>,
    /// Stderr reached EOF: everything the server wrote is in the tail.
    stderr_done: bool,
}

/// What a server's one watcher task reports, shared with its [`ChildProcess`]: one
/// allocation per server for the stderr tail and how the process ended.
#[derive(Default)]
struct Reported {
    stderr: StderrTail,
    ended: Mutex<Ended>,
    /// Wakes whoever waits for `ended` to change.
    changed: Notify,
}

impl Reported {
    fn ended(&self) -> Ended {
        self.ended
            .lock()
            .map(|ended| ended.clone())
            .unwrap_or_default()
    }

    fn update(&self, change: impl FnOnce(&mut Ended)) {
        if let Ok(mut ended) = self.ended.lock() {
            change(&mut ended);
        }
        self.changed.notify_waiters();
    }

    /// Waits up to `bound` until `done` holds of how the process ended; returns that.
    async fn wait_until(&self, bound: Duration, done: impl Fn(&Ended) -> bool) -> Ended {
        let waited = tokio::time::timeout(bound, async {
            loop {
                // Registered before reading, so a change in between is not missed.
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let ended = self.ended();
                if done(&ended) {
                    return ended;
                }
                changed.await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| self.ended())
    }
}

/// A command whose child leads a session, and so a process group, of its own: closing the
/// group reaches every descendant that stayed in it, and the child has no controlling terminal
/// (it can neither read the daemon's terminal nor be sent its signals). A session of its own
/// is also how the scheduler shares the processors fairly: with autogroup scheduling (Linux's
/// default) the processes of one session share one slice, so servers left in the daemon's
/// session would together get what one program gets on a busy machine. The official Python
/// SDK starts its servers the same way. The child starts from `inherited`, then `env`, and
/// carries `reaper`'s mark, which every descendant inherits whatever group or session it
/// moves to. Standard output and error are piped; standard input is the caller's to set.
/// Nothing is killed on drop: the caller owns the group and ends it.
pub(crate) fn group_command(
    program: impl AsRef<OsStr>,
    args: &[String],
    cwd: Option<&Path>,
    inherited: &Inherited,
    env: &[(String, String)],
    reaper: Option<&Reaper>,
) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    // SAFETY: setsid(2) between fork and exec touches no memory of the parent. It runs before
    // any hook added later (a sandbox's), whose leader then leads a group within this session.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    inherited.apply(&mut command);
    for (key, value) in env {
        command.env(key, value);
    }
    if let Some(reaper) = reaper {
        let (mark, owner) = reaper.mark();
        command.env(mark, owner);
    }
    command
}

/// What starting one server needs, owned, for a blocking thread.
struct Start {
    command: String,
    args: Vec<String>,
    cwd: Option<PathBuf>,
    inherited: Arc<Inherited>,
    env: Vec<(String, String)>,
    reaper: Arc<Reaper>,
    sandbox: Arc<Sandboxing>,
    policy: Option<SandboxPolicy>,
}

impl Start {
    /// Spawns the child in its sandbox; the confinement it was given, kept.
    fn spawn(self) -> std::io::Result<(tokio::process::Child, Confinement)> {
        let mut confinement = confine(
            &self.sandbox,
            &self.reaper,
            &self.inherited,
            self.policy.as_ref(),
            OsStr::new(&self.command),
            &self.args,
            self.cwd.as_deref(),
            &self.env,
        )
        .map_err(|refusal| std::io::Error::new(std::io::ErrorKind::PermissionDenied, refusal))?;
        let mut command = group_command(
            &self.command,
            &self.args,
            self.cwd.as_deref(),
            &self.inherited,
            &self.env,
            Some(&self.reaper),
        );
        command.stdin(Stdio::piped());
        confinement.install(&mut command);
        let spawned = command.spawn();
        // The hook (and its end of the report pipe) goes with the command.
        drop(command);
        let child = spawned.map_err(|error| confinement.explain(error))?;
        Ok((child, confinement))
    }
}

/// A running (or exited) server process and its group.
pub(crate) struct ChildProcess {
    /// The server's pid, which is its process group's: the spawned child's, or that of the
    /// leader of its PID namespace.
    pgid: i32,
    reaper: Arc<Reaper>,
    reported: Arc<Reported>,
    /// What its sandbox holds.
    sandbox: Arc<SandboxReport>,
    /// Its private temporary directory, removed once it is gone.
    _tmp: Option<TempDir>,
}

impl ChildProcess {
    /// Spawns the server and returns it with the two pipes the transport speaks over.
    pub(crate) async fn spawn(
        spec: &StdioSpawn<'_>,
    ) -> std::io::Result<(ChildProcess, ChildStdout, ChildStdin)> {
        let start = Start {
            command: spec.command.to_owned(),
            args: spec.args.to_vec(),
            cwd: spec.cwd.cloned(),
            inherited: spec.inherited.clone(),
            env: spec.env.to_vec(),
            reaper: spec.reaper.clone(),
            sandbox: spec.sandbox.clone(),
            policy: spec.policy.cloned(),
        };
        // `spawn` returns once the child has exec'd: a sandboxed child sets up its namespaces
        // and its confinement first, and that wait is spent off the runtime's workers.
        let (child, mut confinement) = tokio::task::spawn_blocking(move || start.spawn())
            .await
            .map_err(std::io::Error::other)??;
        // The server leads its process group: the spawned child, or the leader of the
        // server's PID namespace that child forked.
        let (leader, tmp) = confinement.keep();
        let mut child = Leader::new(child, leader);
        let pid = child
            .pid()
            .ok_or_else(|| std::io::Error::other("the child exited before it could be watched"))?;
        let pgid = i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
        spec.reaper.watch(pgid);
        let limits = confinement.limits().clone();
        let sandboxed = !crate::sandbox::is_off(&limits);
        let spawned = child.spawned();
        let (Some(stdout), Some(stdin)) = (spawned.stdout.take(), spawned.stdin.take()) else {
            return Err(std::io::Error::other("the child's pipes were not set up"));
        };
        let reported = Arc::new(Reported::default());
        let (pipe, report, exited) = (
            child.spawned().stderr.take(),
            reported.clone(),
            spec.exited.clone(),
        );
        // One task per server, which owns the `Child`: it drains stderr into the tail and
        // reaps the leader, reporting each as it happens (the leader may exit long before a
        // descendant lets go of stderr).
        tokio::spawn(async move {
            let drain = async {
                if let Some(pipe) = pipe {
                    read_stderr(pipe, &report.stderr).await;
                }
                report.update(|ended| ended.stderr_done = true);
            };
            let reap = async {
                let status = match child.wait().await {
                    Ok(status) if sandboxed => {
                        // Its last words say which limit ended it, if one did: they come
                        // at once, since its namespace ends with it.
                        report
                            .wait_until(Duration::from_millis(150), |ended| ended.stderr_done)
                            .await;
                        let said = report.stderr.text();
                        match crate::sandbox::ending(&limits, status, said.as_deref()) {
                            Some((cause, words)) => {
                                crate::sandbox::count_kill(cause);
                                format!("{} ({words})", describe_exit(status))
                            }
                            None => describe_exit(status),
                        }
                    }
                    Ok(status) => describe_exit(status),
                    Err(error) => format!("could not be waited for: {error}"),
                };
                report.update(|ended| ended.exit = Some(status));
                exited.cancel();
            };
            tokio::join!(drain, reap);
        });
        Ok((
            ChildProcess {
                pgid,
                reaper: spec.reaper.clone(),
                reported,
                sandbox: Arc::new(confinement.report().clone()),
                _tmp: tmp,
            },
            stdout,
            stdin,
        ))
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pgid.unsigned_abs()
    }

    /// What its sandbox holds.
    pub(crate) fn sandbox(&self) -> &Arc<SandboxReport> {
        &self.sandbox
    }

    /// The captured stderr tail.
    pub(crate) fn stderr(&self) -> &StderrTail {
        &self.reported.stderr
    }

    /// How the leader exited, if it has.
    pub(crate) fn exit_status(&self) -> Option<String> {
        self.reported.ended().exit
    }

    /// After a failure: waits up to `bound` for the leader to exit and its stderr to end, so
    /// that the Problem carries the exit status and the server's last words.
    pub(crate) async fn settle(&self, bound: Duration) {
        self.reported
            .wait_until(bound, |ended| ended.exit.is_some() && ended.stderr_done)
            .await;
    }

    /// Waits up to `bound` for the leader to exit.
    pub(crate) async fn wait_exit(&self, bound: Duration) -> Option<String> {
        self.reported
            .wait_until(bound, |ended| ended.exit.is_some())
            .await
            .exit
    }

    /// Closes the group after the transport has closed stdin: a bounded wait for a graceful
    /// exit, then `SIGKILL` to the whole group (descendants included) in every case.
    ///
    /// Returns an error naming what did not go away.
    pub(crate) async fn close(self, grace: Duration) -> Result<(), CloseFault> {
        let graceful = self.wait_exit(grace).await.is_some();
        kill_group(self.pgid);
        self.reaper.forget(self.pgid);
        if graceful {
            return Ok(());
        }
        match self.wait_exit(Duration::from_secs(2)).await {
            Some(_) => Ok(()),
            None => Err(CloseFault::Survived { pgid: self.pgid }),
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // Whatever path got us here (a failed negotiation, a panic, an aborted task), the
        // group must not outlive its owner. Killing an already empty group is harmless.
        kill_group(self.pgid);
        self.reaper.forget(self.pgid);
    }
}

/// Sends `SIGKILL` to the process group `pgid` (never to groups 0 and 1, which would be
/// this process's own group or every process).
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: `killpg` has no memory-safety preconditions; a stale or empty group
        // makes it fail with ESRCH, which is exactly "nothing left to kill".
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// How many times [`kill_marked`] looks again after a pass that killed something: a process
/// it killed may have forked just before, into a pid the pass had already gone by.
const MARKED_PASSES: usize = 4;

/// Sends `SIGKILL` to every process whose environment holds `entry` (`NAME=value`) exactly —
/// the descendants of one child that left its group (`setsid`), found the way the reaper
/// finds a host's — and returns how many it killed. One pass reads `/proc/<pid>/environ` of
/// every process (about 1 ms for 90 processes); a process that cleared its environment is
/// not found.
pub(crate) fn kill_marked(entry: &str) -> usize {
    let own = std::process::id();
    let mut killed = 0;
    for _ in 0..MARKED_PASSES {
        let Ok(processes) = std::fs::read_dir("/proc") else {
            return killed;
        };
        let mut this_pass = 0;
        for process in processes.flatten() {
            let name = process.file_name();
            let Some(pid) = name.to_str().and_then(|name| name.parse::<u32>().ok()) else {
                continue;
            };
            if pid == own {
                continue;
            }
            let Ok(environ) = std::fs::read(process.path().join("environ")) else {
                continue;
            };
            let marked = environ
                .split(|byte| *byte == 0)
                .any(|variable| variable == entry.as_bytes());
            if let (true, Ok(pid)) = (marked, i32::try_from(pid)) {
                // SAFETY: `kill` has no memory-safety preconditions; a process that is already
                // gone makes it fail with ESRCH.
                if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                    this_pass += 1;
                }
            }
        }
        killed += this_pass;
        if this_pass == 0 {
            break;
        }
    }
    killed
}

/// How a process ended, in words: "exited with status 3", "was killed by signal 9".
pub(crate) fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "exited".to_owned(),
    }
}

/// How much stderr one read takes: the buffer lives as long as the server, per server, so it
/// is small (stderr is a trickle; a flood only takes more reads).
const STDERR_READ: usize = 256;

async fn read_stderr(mut pipe: ChildStderr, tail: &StderrTail) {
    // In the watcher task's own allocation, not a heap block of its own.
    let mut buffer = [0u8; STDERR_READ];
    // The line being logged, cut at STDERR_LOG_LINE bytes; `cut` once it was.
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut budget = LogBudget::new();
    loop {
        let read = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let chunk = &buffer[..read];
        tail.push(chunk);
        if !tracing::enabled!(target: "plurnk_mcp::server_stderr", tracing::Level::DEBUG) {
            continue;
        }
        for piece in chunk.split_inclusive(|byte| *byte == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = (STDERR_LOG_LINE + STDERR_MARGIN).saturating_sub(line.len());
            line.extend_from_slice(&body[..body.len().min(room)]);
            cut |= body.len() > room;
            if ends {
                budget.log(&line, cut);
                line.clear();
                cut = false;
            }
        }
    }
    if !line.is_empty() {
        budget.log(&line, cut);
    }
    budget.report_skipped();
}

/// A server's stderr is logged at a bounded rate: a flood costs the daemon's log a line a
/// second, not the server's whole output.
struct LogBudget {
    tokens: f64,
    refilled: tokio::time::Instant,
    skipped: u64,
}

impl LogBudget {
    fn new() -> Self {
        Self {
            tokens: STDERR_LOG_BURST,
            refilled: tokio::time::Instant::now(),
            skipped: 0,
        }
    }

    fn log(&mut self, line: &[u8], cut: bool) {
        let now = tokio::time::Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * STDERR_LOG_RATE).min(STDERR_LOG_BURST);
        self.refilled = now;
        if self.tokens < 1.0 {
            self.skipped += 1;
            return;
        }
        self.tokens -= 1.0;
        self.report_skipped();
        log_stderr_line(line, cut);
    }

    fn report_skipped(&mut self) {
        if self.skipped > 0 {
            tracing::debug!(
                target: "plurnk_mcp::server_stderr",
                "[{} stderr lines not logged: more than {STDERR_LOG_RATE} a second]",
                self.skipped
            );
            self.skipped = 0;
        }
    }
}

/// Logs one stderr line, lossily decoded and scrubbed at the source: a server may print the
/// credentials it was given.
fn log_stderr_line(line: &[u8], cut: bool) {
    let text = String::from_utf8_lossy(line);
    // Scrubbed before it is cut, so no half secret is left at the cut.
    let text = crate::redact::scrub_capped(&text, STDERR_LOG_LINE);
    let more = if cut { " [cut]" } else { "" };
    tracing::debug!(target: "plurnk_mcp::server_stderr", "{text}{more}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_is_bounded_in_lines_and_bytes() {
        let tail = StderrTail::default();
        for i in 0..100 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let text = tail.text().unwrap_or_default();
        assert_eq!(text.lines().count(), STDERR_LINES);
        assert!(text.ends_with("line 99"), "{text}");
        // No newline at all, megabytes of it: still the last STDERR_BYTES.
        for _ in 0..1000 {
            tail.push(&[b'x'; 10_000]);
        }
        assert_eq!(
            tail.0.lock().map(|t| t.len()).unwrap_or(0),
            STDERR_BYTES + STDERR_MARGIN
        );
        assert!(tail.text().unwrap_or_default().len() <= STDERR_BYTES);
    }

    #[test]
    fn the_tail_holds_exactly_the_last_bytes_however_they_arrive() {
        let tail = StderrTail::default();
        let mut written = Vec::new();
        for i in 0..3000 {
            let line = format!("line {i}\n");
            written.extend_from_slice(line.as_bytes());
            tail.push(line.as_bytes());
        }
        let held: Vec<u8> = tail
            .0
            .lock()
            .map(|t| t.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(
            held,
            written[written.len() - (STDERR_BYTES + STDERR_MARGIN)..]
        );
        let text = tail.text().unwrap_or_default();
        let expected: Vec<String> = (2980..3000).map(|i| format!("line {i}")).collect();
        assert_eq!(text, expected.join("\n"));
    }

    #[test]
    fn the_window_starts_at_the_next_whole_character() {
        let tail = StderrTail::default();
        // Two-byte characters: the kept bytes and the 4 KiB window both start inside one.
        tail.push(format!("{}x", "\u{e9}".repeat(3000)).as_bytes());
        let text = tail.text().unwrap_or_default();
        assert_eq!(text, format!("{}x", "\u{e9}".repeat(2047)));
    }

    /// What the host logs of the stderr of `sh -c script`, line by line.
    fn stderr_logged(script: &str) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Capture(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Capture {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                if let Ok(mut logs) = self.0.lock() {
                    logs.extend_from_slice(bytes);
                }
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "plurnk_mcp::server_stderr=debug",
            ))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .with_level(false)
            .with_target(false)
            .finish();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        tracing::subscriber::with_default(subscriber, || {
            runtime.block_on(async {
                let mut child = Command::new("sh")
                    .args(["-c", script])
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("sh runs");
                let pipe = child.stderr.take().expect("stderr is piped");
                read_stderr(pipe, &StderrTail::default()).await;
                let _ = child.wait().await;
            });
        });
        let logged = capture
            .0
            .lock()
            .map(|logs| String::from_utf8_lossy(&logs).into_owned())
            .unwrap_or_default();
        logged.lines().map(|line| line.trim().to_owned()).collect()
    }

    #[test]
    fn stderr_is_logged_line_by_line_and_a_long_line_is_cut() {
        // Two lines in one write, a line just as long as a log line and its margin, then a
        // longer one without a newline.
        let lines = stderr_logged(
            "printf 'first\\nsecond\\n' >&2; head -c 2048 /dev/zero | tr '\\0' y >&2; \
             echo >&2; head -c 3000 /dev/zero | tr '\\0' z >&2",
        );
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[..2], ["first", "second"]);
        // Shortened for the log, but nothing was dropped before it was scrubbed.
        assert_eq!(lines[2], format!("{}\u{2026}", "y".repeat(STDERR_LOG_LINE)));
        assert_eq!(
            lines[3],
            format!("{}\u{2026} [cut]", "z".repeat(STDERR_LOG_LINE))
        );
    }

    #[test]
    fn a_stderr_flood_is_logged_at_a_bounded_rate() {
        // A burst past the budget, a second of quiet, then a few lines more.
        let lines = stderr_logged("seq 1 150 >&2; sleep 1; seq 151 180 >&2");
        let burst = lines
            .iter()
            .take_while(|line| !line.starts_with('['))
            .count();
        // The burst is logged up to its budget (a token more may refill while it is read).
        assert!((100..=105).contains(&burst), "{burst} of {lines:?}");
        assert_eq!(
            lines[burst],
            format!(
                "[{} stderr lines not logged: more than 50 a second]",
                150 - burst
            )
        );
        // A second refilled the budget: every later line is logged.
        let later: Vec<String> = (151..=180).map(|n| n.to_string()).collect();
        assert_eq!(lines[burst + 1..], later[..]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_log_budget_is_a_burst_then_a_rate() {
        // The clock stands still: the burst is exactly STDERR_LOG_BURST lines.
        let mut budget = LogBudget::new();
        for _ in 0..150 {
            budget.log(b"line", false);
        }
        assert_eq!(budget.skipped, 50);
        // A second refills STDERR_LOG_RATE lines; the next logged line reports the skipped.
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..50 {
            budget.log(b"line", false);
        }
        assert_eq!(budget.skipped, 0);
        budget.log(b"line", false);
        assert_eq!(budget.skipped, 1);
    }

    #[test]
    fn a_secret_at_the_window_edge_is_not_left_in_half() {
        crate::redact::register(["edge-secret-0123456789"]);
        let tail = StderrTail::default();
        // The secret straddles the start of the 4 KiB window.
        let filler = "y".repeat(STDERR_BYTES - 10);
        tail.push(format!("edge-secret-0123456789{filler}").as_bytes());
        let text = tail.text().unwrap_or_default();
        assert!(!text.contains("0123456789"), "{}", &text[..40]);
    }

    #[test]
    fn invalid_utf8_on_stderr_is_decoded_lossily() {
        let tail = StderrTail::default();
        tail.push(b"ok \xff\xfe then more\n");
        assert_eq!(
            tail.text().as_deref(),
            Some("ok \u{fffd}\u{fffd} then more")
        );
    }
}
