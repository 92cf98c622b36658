//! Running a program for a tool source: the one place a source starts one. A run is a fresh
//! exec in its own process group, marked for the host's reaper and with a mark of the run's
//! own that its descendants inherit, bounded in time and output, its group and its marked
//! processes killed when the leader exits or the call ends any other way; `outcome` is what
//! the model sees of it, `probe_version` what `source check` sees. The CLI and script
//! sources both run through a [`Launcher`], their expanded environment and what every child
//! starts from.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::error::OpenError;
use super::faults::Faults;
use super::{DeclarationError, Finding, SourceError, SourceResult};
use crate::config::{ConfigError, SandboxPolicy};
use crate::protocol::{
    Children, Inherited, Reaper, StderrTail, describe_exit, group_command, kill_group, kill_marked,
};
use crate::sandbox::{Confinement, Leader};

/// How long a version probe (`check`) may run, and how much it may print.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
const VERSION_OUTPUT: usize = 64 << 10;
/// How much one read of a program's output takes.
const READ_CHUNK: usize = 16 << 10;

/// Expands a declaration's environment with `expand`, registering the secrets among it.
pub(crate) fn expand_env(
    env: &BTreeMap<String, String>,
    origin: &str,
    expand: &dyn Fn(&str) -> Result<String, ConfigError>,
) -> Result<Vec<(String, String)>, Vec<DeclarationError>> {
    let mut faults = Faults::new(origin);
    let mut expanded = Vec::with_capacity(env.len());
    for (name, raw) in env {
        match expand(raw) {
            Ok(value) => {
                if value != *raw || crate::config::is_credential_name(name) {
                    crate::redact::register([value.as_str()]);
                }
                expanded.push((name.clone(), value));
            }
            Err(problem) => faults.add(
                format!("env.{name}"),
                problem.to_string(),
                "define the variable it references, or write the value itself",
            ),
        }
    }
    faults.finish(expanded)
}

/// What an opened source runs its programs with.
pub(crate) struct Launcher {
    /// The declared environment, expanded: never shown.
    env: Vec<(String, String)>,
    /// The declared sandbox policy, paths expanded; the host-wide one where `None`.
    policy: Option<SandboxPolicy>,
    /// What every call's program starts from (the environment it inherits), and the reaper
    /// that marks it, so a host that dies takes it with it.
    children: Children,
}

/// The bounds one run of a declared program meets, and where it runs.
pub(crate) struct Limits<'a> {
    pub cwd: Option<&'a Path>,
    pub timeout: Duration,
    /// Standard output and standard error together, in bytes.
    pub max_output: usize,
}

impl Launcher {
    /// Expands a declaration's `env` with `expand` (see [`expand_env`]).
    pub(crate) fn open(
        env: &BTreeMap<String, String>,
        policy: Option<&SandboxPolicy>,
        origin: &str,
        expand: &dyn Fn(&str) -> Result<String, ConfigError>,
        children: Children,
    ) -> Result<Self, Vec<DeclarationError>> {
        let env = expand_env(env, origin, expand);
        let policy = policy
            .map(|policy| policy.expand("sandbox", &|_, path| expand(path)))
            .transpose()
            .map_err(|error| {
                vec![DeclarationError::new(
                    origin,
                    "sandbox",
                    error.to_string(),
                    "define the variable it references, or write the path itself",
                )]
            });
        match (env, policy) {
            (Ok(env), Ok(policy)) => Ok(Self {
                env,
                policy,
                children,
            }),
            (env, policy) => {
                let mut errors = env.err().unwrap_or_default();
                errors.extend(policy.err().unwrap_or_default());
                Err(errors)
            }
        }
    }

    /// The `PATH` the program runs with, which it is looked up on: declared, or inherited.
    fn path(&self) -> Option<OsString> {
        self.env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.into())
            .or_else(|| self.children.inherited.get("PATH").map(Into::into))
    }

    /// Finds `command` on the run's `PATH`; a call's refusal says what is missing.
    pub(crate) fn resolve(&self, command: &str) -> Result<PathBuf, SourceError> {
        resolve_program(command, self.path().as_deref())
            .map_err(|missing| SourceError::Unavailable(missing.to_string()))
    }

    /// Runs `program args…` with the declared environment, marked for the host's reaper.
    pub(crate) async fn run(
        &self,
        program: &Path,
        args: &[String],
        stdin: Option<&[u8]>,
        limits: Limits<'_>,
    ) -> Result<Exited, SourceError> {
        let confinement = self
            .children
            .confine(
                self.policy.as_ref(),
                program.as_os_str(),
                args,
                limits.cwd,
                &self.env,
            )
            .map_err(|refusal| SourceError::Unavailable(refusal.to_string()))?;
        exec(Exec {
            program,
            args,
            inherited: &self.children.inherited,
            env: &self.env,
            cwd: limits.cwd,
            stdin,
            timeout: limits.timeout,
            max_output: limits.max_output,
            reaper: Some(&self.children.reaper),
            confinement,
        })
        .await
    }
}

/// Finds `command`: an absolute path as it is, a bare name on `path`.
///
/// # Errors
///
/// [`OpenError::NotExecutable`] or [`OpenError::NotOnPath`]: what is missing, and the fix.
pub(crate) fn resolve_program(command: &str, path: Option<&OsStr>) -> Result<PathBuf, OpenError> {
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    if command.starts_with('/') {
        let candidate = PathBuf::from(command);
        return if executable(&candidate) {
            Ok(candidate)
        } else {
            Err(OpenError::NotExecutable {
                command: command.to_owned(),
            })
        };
    }
    let dirs: Vec<PathBuf> = path
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .collect();
    dirs.iter()
        .map(|dir| dir.join(command))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| OpenError::NotOnPath {
            command: command.to_owned(),
            searched: path
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
}

/// One run of a program: already resolved and bound, never shown (the environment may hold
/// secrets).
pub(crate) struct Exec<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    /// What the program starts from, before `env`.
    pub inherited: &'a Inherited,
    pub env: &'a [(String, String)],
    pub cwd: Option<&'a Path>,
    /// Written to standard input, which is then closed; `None` gives it `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    pub timeout: Duration,
    /// Standard output and standard error together, in bytes.
    pub max_output: usize,
    /// Marks the group for the host's reaper; `None` only for a short probe (`check`).
    pub reaper: Option<&'a Arc<Reaper>>,
    /// Its sandbox.
    pub confinement: Confinement,
}

/// How a run ended by itself.
pub(crate) struct Exited {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The sandbox limit that ended it, when one did (`killed: memory limit 1 GiB`).
    pub limit: Option<String>,
}

/// The variable that marks every process one run starts, whatever group or session it moves
/// to: its value is unique to the run.
const CALL_MARK: &str = "_PLURNK_MCP_CALL";

/// The `CALL_MARK=value` entry of a new run, unique in this process and among processes.
fn call_mark() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{CALL_MARK}={}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The process group of one run and the mark of its processes: both killed when this is
/// dropped, on every path — the run finished, ran out of time or output, or the call's future
/// was dropped.
struct Group<'a> {
    pgid: i32,
    /// `CALL_MARK=value`: finds the descendants that left the group (`setsid`).
    mark: String,
    /// The marked processes were killed after the leader exited; the drop need not look again.
    swept: AtomicBool,
    reaper: Option<&'a Arc<Reaper>>,
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        kill_group(self.pgid);
        if !self.swept.load(Ordering::Acquire) {
            kill_marked(&self.mark);
        }
        if let Some(reaper) = self.reaper {
            reaper.forget(self.pgid);
        }
    }
}

/// Runs a program in a process group of its own until it exits, its deadline passes or its
/// output passes its bound; the group, and every process that carries the run's mark, is
/// killed in every case when this returns (or its future is dropped), so nothing a call
/// starts outlives it — descendants that left the group (`setsid`) included, unless they
/// also cleared their environment (the reaper's limit too).
pub(crate) async fn exec(mut spec: Exec<'_>) -> Result<Exited, SourceError> {
    let mut command = group_command(
        spec.program,
        spec.args,
        spec.cwd,
        spec.inherited,
        spec.env,
        spec.reaper.map(|reaper| &**reaper),
    );
    command.stdin(if spec.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mark = call_mark();
    if let Some((name, value)) = mark.split_once('=') {
        command.env(name, value);
    }
    spec.confinement.install(&mut command);
    let name = spec.program.display();
    let spawned = command.spawn();
    // The sandbox's hook, and its end of the report pipe, go with the command.
    drop(command);
    let child = spawned.map_err(|error| {
        let error = spec.confinement.explain(error);
        SourceError::Unavailable(format!("{name} could not be started: {error}"))
    })?;
    // Its temporary directory lives as long as the run; in a PID namespace of its own, the
    // program is the leader the spawned child forked, and leads the group.
    let (leader, _tmp) = spec.confinement.keep();
    let mut child = Leader::new(child, leader);
    let pgid = child
        .pid()
        .and_then(|pid| i32::try_from(pid).ok())
        .ok_or_else(|| {
            SourceError::Unavailable(format!("{name} exited before it could be watched"))
        })?;
    let group = Group {
        pgid,
        mark,
        swept: AtomicBool::new(false),
        reaper: spec.reaper,
    };
    if let Some(reaper) = spec.reaper {
        reaper.watch(pgid);
    }
    let spawned = child.spawned();
    let (stdout, stderr, stdin) = (
        spawned.stdout.take(),
        spawned.stderr.take(),
        spawned.stdin.take(),
    );
    let used = AtomicUsize::new(0);
    let limit = spec.max_output;
    let work = async {
        let out = read_bounded(stdout, &used, limit);
        let err = read_bounded(stderr, &used, limit);
        let feed = async {
            if let (Some(mut pipe), Some(bytes)) = (stdin, spec.stdin) {
                // A program that exits without reading all of it is no failure (EPIPE).
                let _ = pipe.write_all(bytes).await;
            }
            Ok(())
        };
        let exit = async {
            let status = child.wait().await.map_err(|error| {
                SourceError::Unavailable(format!("{name} could not be waited for: {error}"))
            })?;
            // The leader is gone: whatever it left in its group or marked goes too, which
            // also ends the pipes a background descendant still holds. The look through /proc
            // blocks, so it runs off the runtime's workers.
            kill_group(group.pgid);
            let mark = group.mark.clone();
            if tokio::task::spawn_blocking(move || kill_marked(&mark))
                .await
                .is_ok()
            {
                group.swept.store(true, Ordering::Release);
            }
            Ok(status)
        };
        tokio::try_join!(out, err, feed, exit)
    };
    let timeout_ms = u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX);
    let ran = tokio::time::timeout(spec.timeout, work).await;
    drop(group);
    match ran {
        Err(_) => Err(SourceError::Timeout { timeout_ms }),
        Ok(Err(error)) => Err(error),
        Ok(Ok((stdout, stderr, (), status))) => {
            let said = String::from_utf8_lossy(&stderr);
            let limit = crate::sandbox::ending(spec.confinement.limits(), status, Some(&said)).map(
                |(cause, words)| {
                    crate::sandbox::count_kill(cause);
                    words
                },
            );
            Ok(Exited {
                status,
                stdout,
                stderr,
                limit,
            })
        }
    }
}

/// Reads `pipe` to its end, failing once the run's output (`used`, shared by its pipes)
/// passes `limit`.
async fn read_bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    used: &AtomicUsize,
    limit: usize,
) -> Result<Vec<u8>, SourceError> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(kept);
    };
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        let read = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return Ok(kept),
            Ok(read) => read,
        };
        if used.fetch_add(read, Ordering::Relaxed) + read > limit {
            return Err(SourceError::OutputTooLarge { limit });
        }
        kept.extend_from_slice(&buffer[..read]);
    }
}

/// The result a run gives the model: its standard output; after a non-zero exit, how it
/// exited and the end of its standard error too; with `json`, the parsed output.
pub(crate) fn outcome(label: &str, exited: Exited, json: bool) -> SourceResult {
    let mut text = String::from_utf8_lossy(&exited.stdout).into_owned();
    if !exited.status.success() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[{label} {}", describe_exit(exited.status)));
        if let Some(limit) = &exited.limit {
            text.push_str(&format!(" ({limit})"));
        }
        let tail = StderrTail::default();
        tail.push(&exited.stderr);
        match tail.text() {
            Some(stderr) => text.push_str(&format!("; its stderr ends:]\n{stderr}")),
            None => text.push(']'),
        }
        return SourceResult {
            text,
            structured: None,
            is_error: true,
        };
    }
    if !json {
        return SourceResult {
            text,
            structured: None,
            is_error: false,
        };
    }
    let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect();
    match values {
        Ok(mut values) => {
            let structured = match values.len() {
                0 => None,
                1 => values.pop(),
                _ => Some(Value::Array(values)),
            };
            SourceResult {
                text,
                structured,
                is_error: false,
            }
        }
        Err(error) => {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[{label} wrote output that is not JSON: {error}]"));
            SourceResult {
                text,
                structured: None,
                is_error: true,
            }
        }
    }
}

/// Runs `program args…` (bounded at 5 s and 64 KiB, with the default environment alone and
/// outside any host) and compares its trimmed output — standard output, or standard error
/// when that is all it wrote — with `declared`.
pub(crate) async fn probe_version(program: &Path, args: &[String], declared: &str) -> Finding {
    let ran = exec(Exec {
        program,
        args,
        inherited: &Inherited::defaults(),
        env: &[],
        cwd: None,
        stdin: None,
        timeout: VERSION_TIMEOUT,
        max_output: VERSION_OUTPUT,
        reaper: None,
        confinement: Confinement::off(),
    })
    .await;
    let shown = format!("{} {}", program.display(), args.join(" "));
    let exited = match ran {
        Ok(exited) => exited,
        Err(error) => return Finding::Missing(format!("`{shown}` gave no version: {error}")),
    };
    if !exited.status.success() {
        return Finding::Missing(format!(
            "`{shown}` {}: set versionArgs to the arguments that print its version",
            describe_exit(exited.status)
        ));
    }
    let output = if exited.stdout.iter().all(u8::is_ascii_whitespace) {
        exited.stderr
    } else {
        exited.stdout
    };
    let installed = String::from_utf8_lossy(&output).trim().to_owned();
    if installed == declared.trim() {
        Finding::Ready(format!("{} ({installed})", program.display()))
    } else {
        Finding::VersionDrift {
            declared: declared.trim().to_owned(),
            installed,
        }
    }
}
