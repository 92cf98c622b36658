//! The reaper: nothing a host starts outlives it, however the host dies.
//!
//! Closing a server kills its process group, and `Drop` does the same on every other path —
//! but neither runs when the host itself is killed with `SIGKILL`, and a grandchild that
//! calls `setsid` leaves the group altogether. So the first stdio server a host starts also
//! starts a reaper: a tiny `/bin/sh` in a process group of its own, deaf to `SIGINT`,
//! `SIGTERM` and `SIGHUP`, that reads "+ PGID" and "- PGID" lines from a pipe the host holds.
//! When the pipe ends — the host shut down, or died of anything — it kills every group still
//! listed, then every process that carries this host's mark in its environment
//! (`_PLURNK_MCP_HOST`, which each server and its descendants inherit, sessions or not), and
//! removes the private temporary directories of its sandboxed processes. A sandboxed server
//! leads a PID namespace of its own, so killing it ends every descendant it has, whatever
//! its group, session or environment.
//!
//! `PR_SET_PDEATHSIG` is not used: it fires when the *thread* that spawned the child exits,
//! and tokio retires idle blocking threads, which would kill healthy servers.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that marks a host's servers and their descendants.
pub(crate) const MARK: &str = "_PLURNK_MCP_HOST";

// Each watched group is a shell variable `g<PGID>`: adding and forgetting one is a single
// assignment or `unset`, so a host with thousands of servers costs the reaper no more per
// server than one (a list it rescanned on every forget took seconds of a core to shut 1,000
// servers down, past the shutdown's bound). Only digits ever reach `eval`. A group is killed
// with `kill -KILL -PGID`: dash, Debian's `/bin/sh`, refuses `kill -KILL -- -PGID`.
const SCRIPT: &str = r#"
trap '' INT TERM HUP PIPE
owner="$1"
while IFS=' ' read -r op pg; do
  case "$pg" in ''|*[!0-9]*) continue ;; esac
  case "$op" in
    +) eval "g$pg=1" ;;
    -) unset "g$pg" ;;
  esac
done
for pg in $(set | sed -n 's/^g\([0-9][0-9]*\)=.*/\1/p'); do kill -KILL "-$pg" 2>/dev/null; done
for file in $(grep -l -s -z -x -F "_PLURNK_MCP_HOST=$owner" /proc/[0-9]*/environ); do
  pid=${file#/proc/}; pid=${pid%/environ}
  kill -KILL "$pid" 2>/dev/null
done
rm -rf "${TMPDIR:-/tmp}/plurnk-mcp-sandbox-$owner-"*
"#;

/// One host's reaper, started on first use.
pub(crate) struct Reaper {
    /// This host's mark: unique per host, so hosts in one process never reap each other.
    owner: String,
    running: OnceLock<Option<Running>>,
}

struct Running {
    child: Mutex<Child>,
    pipe: Mutex<Option<ChildStdin>>,
}

impl Reaper {
    pub(crate) fn new() -> Arc<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Arc::new(Self {
            owner: format!(
                "{}-{nanos}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            running: OnceLock::new(),
        })
    }

    /// The mark a server of this host carries in its environment.
    pub(crate) fn mark(&self) -> (&'static str, &str) {
        (MARK, &self.owner)
    }

    fn running(&self) -> Option<&Running> {
        self.running
            .get_or_init(|| {
                let mut command = Command::new("/bin/sh");
                command
                    .args(["-c", SCRIPT, "plurnk-mcp-reaper", &self.owner])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                std::os::unix::process::CommandExt::process_group(&mut command, 0);
                match command.spawn() {
                    Ok(mut child) => {
                        let pipe = child.stdin.take();
                        Some(Running {
                            child: Mutex::new(child),
                            pipe: Mutex::new(pipe),
                        })
                    }
                    Err(error) => {
                        tracing::warn!(
                            %error,
                            "the reaper could not be started: servers may outlive a host that is killed"
                        );
                        None
                    }
                }
            })
            .as_ref()
    }

    fn tell(&self, line: &str) {
        let Some(running) = self.running() else {
            return;
        };
        if let Ok(mut pipe) = running.pipe.lock()
            && let Some(pipe) = pipe.as_mut()
        {
            // A few bytes into a pipe its reader drains at once; a dead reader is EPIPE.
            let _ = pipe.write_all(line.as_bytes());
        }
    }

    /// A server's process group to kill if the host dies.
    pub(crate) fn watch(&self, pgid: i32) {
        self.tell(&format!("+ {pgid}\n"));
    }

    /// A group the host closed itself.
    pub(crate) fn forget(&self, pgid: i32) {
        if self.running.get().is_some() {
            self.tell(&format!("- {pgid}\n"));
        }
    }

    /// The host is shutting down: ends the pipe, so the reaper kills what is left (groups
    /// not closed, descendants that left their group) and exits; waits up to `bound`.
    /// The error says what did not finish.
    pub(crate) async fn finish(&self, bound: Duration) -> Result<(), ReaperError> {
        let Some(Some(running)) = self.running.get() else {
            return Ok(());
        };
        if let Ok(mut pipe) = running.pipe.lock() {
            pipe.take();
        }
        let deadline = Instant::now() + bound;
        loop {
            let exited = running
                .child
                .lock()
                .map_err(|_| ReaperError::Poisoned)?
                .try_wait()
                .map_err(|error| ReaperError::Wait(error.to_string()))?;
            if exited.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ReaperError::Unfinished {
                    ms: bound.as_millis(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Why the reaper did not finish at shutdown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReaperError {
    /// A thread panicked while holding the reaper's handle.
    #[error("the reaper's handle is poisoned")]
    Poisoned,
    /// The operating system would not say whether the reaper exited.
    #[error("the reaper could not be waited for: {0}")]
    Wait(String),
    /// The reaper was still running when the bound passed.
    #[error("the reaper did not finish within {ms} ms")]
    Unfinished { ms: u128 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn group_leader() -> Child {
        let mut command = Command::new("sleep");
        command.arg("30").process_group(0);
        command.spawn().expect("sleep runs")
    }

    #[tokio::test]
    async fn the_reaper_kills_every_watched_group_and_spares_the_forgotten_ones() {
        let reaper = Reaper::new();
        // A server's group that does not carry this host's mark: only the group kill ends it.
        let mut watched = group_leader();
        let mut forgotten = group_leader();
        let pgid = |child: &Child| i32::try_from(child.id()).expect("pid");
        reaper.watch(pgid(&watched));
        reaper.watch(pgid(&forgotten));
        reaper.forget(pgid(&forgotten));
        // A host that opened and closed thousands of servers before it shuts down.
        for fake in 4_000_000..4_003_000 {
            reaper.watch(fake);
        }
        for fake in 4_000_000..4_003_000 {
            reaper.forget(fake);
        }
        // The bound `Host::shutdown` gives it.
        let finished = reaper.finish(Duration::from_secs(5)).await;
        // Killed before the reaper exits; reaped here as soon as the kernel has it.
        let deadline = Instant::now() + Duration::from_secs(2);
        let watched_status = loop {
            match watched.try_wait().expect("try_wait") {
                Some(status) => break Some(status),
                None if Instant::now() >= deadline => break None,
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let forgotten_status = forgotten.try_wait().expect("try_wait");
        for child in [&mut watched, &mut forgotten] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(finished, Ok(()));
        assert_eq!(
            watched_status
                .and_then(|status| std::os::unix::process::ExitStatusExt::signal(&status)),
            Some(libc::SIGKILL),
            "the watched group was not killed: {watched_status:?}"
        );
        assert!(
            forgotten_status.is_none(),
            "a forgotten group was killed: {forgotten_status:?}"
        );
    }
}
