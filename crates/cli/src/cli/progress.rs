//! Progress on long work, for a person at a terminal: hydration (how many servers are
//! ready, unavailable and pending, and the one pending longest) and a device
//! authorization's countdown. Drawn by indicatif on stderr only, and only when both stdout
//! and stderr are terminals and the command's output is not JSON: output piped into another
//! program (`status | less`, which draws on the same terminal) or read by one gets no
//! progress line in its way.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plurnk_mcp::{ConnectPhase, ServerState, Workspace, WorkspaceSnapshot};

/// How long work runs before its progress line appears: quick work never flashes one.
const SHOW_AFTER: Duration = Duration::from_millis(300);

/// How often a line is redrawn (the spinner, the slowest server's wait, the countdown).
const TICK: Duration = Duration::from_millis(200);

/// Whether a command may show progress: both its output and stderr are a terminal, and it
/// prints no JSON.
pub(crate) fn wanted(json: bool) -> bool {
    !json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// A progress line on stderr, hidden until [`SHOW_AFTER`] has passed.
fn line(template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let shown = bar.downgrade();
    tokio::spawn(async move {
        tokio::time::sleep(SHOW_AFTER).await;
        if let Some(bar) = shown.upgrade()
            && !bar.is_finished()
        {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(TICK);
        }
    });
    bar
}

/// The progress lines of hydration, one per workspace the host opens, cleared once the
/// command has its host.
#[derive(Clone, Default)]
pub(crate) struct Hydration {
    bars: Arc<Mutex<Vec<ProgressBar>>>,
}

impl Hydration {
    /// What [`plurnk_mcp::HostOptions::on_open`] calls: follows the workspace's snapshots
    /// until no server is connecting.
    pub(crate) fn on_open(&self) -> plurnk_mcp::OnOpen {
        let bars = self.bars.clone();
        Arc::new(move |workspace: &Workspace| {
            let bar = line("{spinner} {prefix}: {msg}");
            bar.set_prefix(format!("connecting workspace \"{}\"", workspace.name()));
            if let Ok(mut bars) = bars.lock() {
                bars.push(bar.clone());
            }
            tokio::spawn(follow(workspace.clone(), bar));
        })
    }

    /// Clears every line: hydration is over.
    pub(crate) fn finish(&self) {
        if let Ok(mut bars) = self.bars.lock() {
            for bar in bars.drain(..) {
                bar.finish_and_clear();
            }
        }
    }
}

/// Keeps `bar` saying where hydration is, from each snapshot (and the clock, for the
/// slowest server's wait), until nothing is connecting or the bar is finished.
async fn follow(workspace: Workspace, bar: ProgressBar) {
    let mut watch = workspace.watch();
    let mut since: HashMap<Arc<str>, Instant> = HashMap::new();
    let mut snapshot = watch.current();
    let mut tick = tokio::time::interval(TICK);
    loop {
        if bar.is_finished() {
            return;
        }
        let (message, done) = hydration_message(&snapshot, &mut since, Instant::now());
        bar.set_message(message);
        if done && snapshot.version > 0 {
            bar.finish_and_clear();
            return;
        }
        tokio::select! {
            changed = watch.changed() => match changed {
                Some(next) => snapshot = next,
                None => {
                    bar.finish_and_clear();
                    return;
                }
            },
            _ = tick.tick() => {}
        }
    }
}

/// `12 ready, 1 unavailable, 187 pending (slowest: github, 4.2 s)`, and whether nothing is
/// pending. `since` remembers when each pending server was first seen pending.
fn hydration_message(
    snapshot: &WorkspaceSnapshot,
    since: &mut HashMap<Arc<str>, Instant>,
    now: Instant,
) -> (String, bool) {
    // The snapshot keeps a count per state; only the slowest pending needs a walk.
    let servers = &snapshot.servers;
    let ready = servers.count(ServerState::Ready);
    let unavailable =
        servers.count(ServerState::Unavailable) + servers.count(ServerState::CrashLoop);
    let pending = servers.count(ServerState::Connecting);
    // Authorization required, or a state newer than this command line: it waits on something
    // other than its connection.
    let waiting = servers.len()
        - ready
        - unavailable
        - pending
        - servers.count(ServerState::Disabled)
        - servers.count(ServerState::Idle);
    // A server seen pending again after it settled starts its wait again.
    since.retain(|alias, _| {
        servers
            .get(alias)
            .is_some_and(|server| server.state == ServerState::Connecting)
    });
    let mut slowest: Option<(&Arc<str>, Instant, Option<ConnectPhase>)> = None;
    for (alias, server) in servers {
        if server.state == ServerState::Connecting {
            let first = *since.entry(alias.clone()).or_insert(now);
            // The longest pending, the first alias among equals.
            if slowest.is_none_or(|(_, at, _)| first < at) {
                let phase = server.connecting.map(|connecting| connecting.phase);
                slowest = Some((alias, first, phase));
            }
        }
    }
    let mut message = format!("{ready} ready, {unavailable} unavailable, {pending} pending");
    if waiting > 0 {
        message.push_str(&format!(", {waiting} waiting for authorization"));
    }
    if let Some((alias, at, phase)) = slowest {
        message.push_str(&format!(
            " (slowest: {}, {:.1} s",
            super::shown(alias),
            now.duration_since(at).as_secs_f64()
        ));
        if let Some(phase) = phase {
            message.push_str(&format!(", {phase}"));
        }
        message.push(')');
    }
    (message, pending == 0)
}

/// A device authorization's line: its code, where to enter it, and the time left, until
/// dropped.
pub(crate) struct Countdown {
    bar: ProgressBar,
}

impl Countdown {
    /// Starts the line for `code` at `uri`, expiring at `deadline`.
    pub(crate) fn start(code: &str, uri: &str, deadline: Instant) -> Self {
        let bar = line("{spinner} {msg}");
        let (code, uri) = (super::shown(code), super::shown(uri));
        let ticking = bar.downgrade();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while let Some(bar) = ticking.upgrade() {
                if bar.is_finished() {
                    return;
                }
                bar.set_message(countdown_message(
                    &code,
                    &uri,
                    deadline.saturating_duration_since(Instant::now()),
                ));
                drop(bar);
                tick.tick().await;
            }
        });
        Self { bar }
    }
}

impl Drop for Countdown {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `waiting for code WDJB-MJHT at https://…: 14:32 left`.
fn countdown_message(code: &str, uri: &str, left: Duration) -> String {
    let seconds = left.as_secs();
    format!(
        "waiting for approval of code {code} at {uri}: {}:{:02} left",
        seconds / 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_countdown_says_minutes_and_seconds_left() {
        assert_eq!(
            countdown_message("ABCD-EFGH", "https://as/device", Duration::from_secs(872)),
            "waiting for approval of code ABCD-EFGH at https://as/device: 14:32 left"
        );
        assert_eq!(
            countdown_message("C", "u", Duration::from_millis(900)),
            "waiting for approval of code C at u: 0:00 left"
        );
    }
}
