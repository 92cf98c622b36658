//! The command line (`plurnk-mcp`) as a user runs it: a real process, its output and exit
//! status, over the fixture and third-party servers.
//!
//! # Layout
//! One binary, a module per behaviour; this file holds the setup they share.
//! - `commands`: configuration faults, status/tools/call/exec, the demo, third-party peers,
//!   workspace actions, a sentinel secret through every output, tool sources, metrics.
//! - `signals`: SIGKILL, SIGTERM, SIGINT and SIGHUP, and what each tells the servers.
//! - `import`: each client's file, every credential shape, the file and concurrency bounds.
//! - `terminal`: on a pseudo-terminal: hydration's progress line and `status --watch`.

use std::collections::BTreeMap;
use std::process::{Command, Output};

#[path = "../support/scrape.rs"]
mod scrape;
use scrape::{http_get, sample};

#[path = "../support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "../support/env.rs"]
mod env;
#[path = "../support/http_fixture.rs"]
mod http_fixture;
#[path = "../support/processes.rs"]
mod processes;
#[path = "../support/wait.rs"]
mod wait;
use processes::marked;

use serde_json::{Value, json};

use env::{EXE, fixture};
use http_fixture::HttpFixture;

/// A state file of its own for every run that does not name one.
fn scratch_state() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{}-{}.sqlite",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_file(&path);
    path.to_string_lossy().into_owned()
}

/// Runs `plurnk-mcp` with exactly `vars` (plus PATH and HOME), never the caller's env, and
/// with a fresh state file unless `args` name one.
fn run(args: &[&str], vars: &BTreeMap<String, String>) -> Output {
    let mut command = Command::new(EXE);
    command.args(args).env_clear();
    if !args.contains(&"--state") && args.first() != Some(&"demo") {
        command.args(["--state", &scratch_state()]);
    }
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command.envs(vars);
    command.output().expect("plurnk-mcp runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[path = "../support/pty.rs"]
mod pty;

mod commands;
mod import;
mod signals;
mod terminal;
