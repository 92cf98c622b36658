//! `plurnk-mcp status --watch`: the workspace's servers as a live table, redrawn from the
//! host's events (each state change and commit; never by polling), a changed row shown in
//! reverse video for a few seconds, and the last Problem each server had kept after it
//! recovered. It runs until a signal: Ctrl-C shuts the host down as for any command, so no
//! server is left behind.
//!
//! On a terminal the table is redrawn in place, each line cut to the terminal's width so the
//! redraw knows how many lines to take back. Piped, it prints the table once and then one line
//! per state change; with `--json`, the snapshot and then one JSON object per change, a line
//! each.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use plurnk_mcp::{HostEvent, ServerState, WorkspaceSnapshot};
use tokio::sync::broadcast;

use super::{Global, Needs, fail, finish, render_table, shown, start};

/// How long a changed row stays highlighted.
const HIGHLIGHT: Duration = Duration::from_secs(3);

/// What the table remembers beside the snapshot.
#[derive(Default)]
struct Seen {
    /// When each server last changed state, while that is recent enough to highlight.
    changed: HashMap<String, Instant>,
}

impl Seen {
    /// Takes in a state change of this workspace.
    fn change(&mut self, alias: &str, now: Instant) {
        self.changed.insert(alias.to_owned(), now);
    }

    /// The table's rows: a header, then a row per server (and whether to highlight it).
    fn rows(&self, snapshot: &WorkspaceSnapshot, now: Instant) -> Vec<([String; 6], bool)> {
        let mut rows = vec![(
            [
                "SERVER",
                "TRANSPORT",
                "STATE",
                "REVISION",
                "TOOLS",
                "LAST PROBLEM",
            ]
            .map(str::to_owned),
            false,
        )];
        for server in snapshot.servers.values() {
            // The snapshot keeps what a server recovered from, at start-up too.
            let problem = match (&server.problem, &server.recovered) {
                (None, Some(recovered)) if server.connecting.is_none() => format!(
                    "{} ago: {}",
                    seconds(recovered.ago(std::time::SystemTime::now())),
                    super::first_line(&recovered.problem)
                ),
                _ => super::server_note(server),
            };
            let recent = self
                .changed
                .get(&server.alias)
                .is_some_and(|at| now.duration_since(*at) < HIGHLIGHT);
            rows.push((super::server_row(server, problem), recent));
        }
        rows
    }
}

fn seconds(elapsed: Duration) -> String {
    format!("{} s", elapsed.as_secs())
}

/// Where the table goes.
enum Output {
    /// Redrawn in place; how many lines the last drawing took.
    Terminal(console::Term, usize),
    /// A line per change.
    Lines,
    /// A JSON object per change.
    Json,
}

pub(crate) async fn watch(global: &Global, json: bool) -> ExitCode {
    let (host, workspace) = match start(global, Needs::All).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    // Subscribed before the first drawing: nothing between it and the first event is lost.
    let mut events = host.events();
    let mut output = if json {
        Output::Json
    } else if std::io::stdout().is_terminal() {
        Output::Terminal(console::Term::stdout(), 0)
    } else {
        Output::Lines
    };
    let mut seen = Seen::default();
    let snapshot = workspace.snapshot();
    if let Err(error) = first(&mut output, &seen, &snapshot) {
        finish(&host).await;
        return fail(error);
    }
    let started = Instant::now();
    // Only to let a highlight fade: the table's content changes only with events.
    let mut fade = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(HostEvent::StateChanged { workspace: of, alias, from, to, problem })
                    if of == workspace.name() =>
                {
                    seen.change(&alias, Instant::now());
                    match &mut output {
                        Output::Terminal(..) => {}
                        Output::Lines => outln!(
                            "+{:.1} s  {}  {} -> {}{}",
                            started.elapsed().as_secs_f64(),
                            shown(&alias),
                            from.map_or("-", ServerState::as_str),
                            to,
                            problem
                                .as_ref()
                                .map(|p| format!(": {}", shown(&super::first_line(p))))
                                .unwrap_or_default()
                        ),
                        Output::Json => {
                            let change = serde_json::json!({
                                "alias": alias, "from": from, "to": to, "problem": problem,
                            });
                            outln!("{change}");
                        }
                    }
                }
                Ok(HostEvent::SnapshotCommitted { .. } | HostEvent::WorkspaceRestarted { .. }
                    | HostEvent::WorkspaceFailed { .. }) => {}
                Ok(_) => continue,
                // What was missed is in the snapshot, which is read whole below.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = fade.tick() => {
                if !matches!(output, Output::Terminal(..)) {
                    continue;
                }
            }
        }
        if let Output::Terminal(term, drawn) = &mut output {
            *drawn = redraw(term, *drawn, &seen, &workspace.snapshot());
        }
    }
    finish(&host).await;
    ExitCode::SUCCESS
}

/// The first drawing: the table (terminal, lines) or the snapshot (JSON).
fn first(output: &mut Output, seen: &Seen, snapshot: &WorkspaceSnapshot) -> Result<(), String> {
    match output {
        Output::Terminal(term, drawn) => *drawn = redraw(term, 0, seen, snapshot),
        Output::Lines => {
            let rows: Vec<[String; 6]> = seen
                .rows(snapshot, Instant::now())
                .into_iter()
                .map(|(row, _)| row)
                .collect();
            out!("{}", render_table(&rows));
        }
        Output::Json => {
            let text = serde_json::to_string(snapshot).map_err(|error| error.to_string())?;
            outln!("{}", plurnk_mcp::text::escape_json_unshown(&text));
        }
    }
    Ok(())
}

/// Takes back the `drawn` lines of the last drawing and draws the table again; returns how
/// many lines it took.
fn redraw(term: &console::Term, drawn: usize, seen: &Seen, snapshot: &WorkspaceSnapshot) -> usize {
    let now = Instant::now();
    let rows = seen.rows(snapshot, now);
    let highlighted: Vec<bool> = rows.iter().map(|(_, recent)| *recent).collect();
    let table: Vec<[String; 6]> = rows.into_iter().map(|(row, _)| row).collect();
    let (height, width) = term.size();
    let width = usize::from(width).max(20);
    // Cut to the height too: a line that scrolled off cannot be taken back, and each redraw
    // would leave a copy of the table behind. The header and the last line stay.
    let room = usize::from(height).saturating_sub(1).max(3);
    let shown_rows = table.len().min(room - 1);
    let hidden = table.len() - shown_rows;
    let mut frame = String::new();
    for (line, recent) in render_table(&table)
        .lines()
        .zip(highlighted)
        .take(shown_rows)
    {
        // Cut to the width, so no line wraps and the next redraw takes back exactly these.
        let line = console::truncate_str(line, width, "…");
        let line = if recent {
            console::style(line).reverse().bold().to_string()
        } else {
            line.into_owned()
        };
        frame.push_str(&line);
        frame.push('\n');
    }
    let mut lines = shown_rows;
    if hidden > 0 {
        frame.push_str(&format!(
            "… {hidden} more servers (status without --watch lists all)\n"
        ));
        lines += 1;
    }
    let _ = term.clear_last_lines(drawn);
    out!("{frame}");
    lines
}
