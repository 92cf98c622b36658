//! On a pseudo-terminal: hydration's progress line, and `status --watch` drawing what fits,
//! following a killed server, ending on Ctrl-C.

#[allow(unused_imports)]
use super::*;

/// `plurnk-mcp <args>` with exactly `vars` (plus PATH and HOME) and a fresh state file, as a
/// command for a terminal; `piped` runs it as `plurnk-mcp … | cat` from a shell, so its
/// output is a pipe while its stderr is still the terminal.
fn terminal_command(args: &[&str], vars: &BTreeMap<String, String>, piped: bool) -> Command {
    let state = scratch_state();
    let mut command = if piped {
        let mut shell = Command::new("sh");
        shell.args(["-c", "\"$0\" \"$@\" | cat", EXE]);
        shell
    } else {
        Command::new(EXE)
    };
    command.args(["--state", &state]).args(args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command.env("TERM", "xterm").envs(vars);
    command
}

/// 200 fixture servers and one more, `last`: with `hold` it answers after sleeping that long
/// (a fixture started late), without it never (held until the connect timeout,
/// `connect_ms`).
fn two_hundred_and_one(hold: Option<u64>, connect_ms: u64) -> BTreeMap<String, String> {
    let aliases: Vec<String> = (0..200).map(|n| format!("s{n:03}")).collect();
    let mut vars: BTreeMap<String, String> = aliases
        .iter()
        .flat_map(|alias| fixture(alias, &[]))
        .collect();
    let (target, args) = match hold {
        Some(seconds) => (
            "/bin/sh",
            json!([
                "-c",
                format!("sleep {seconds}; exec \"$0\" fixture --name last"),
                EXE
            ]),
        ),
        None => ("/bin/sleep", json!(["3600"])),
    };
    vars.insert("PLURNK_MCP_LAST".into(), target.into());
    vars.insert("PLURNK_MCP_LAST_ARGS".into(), args.to_string());
    let mut enabled = aliases;
    enabled.push("last".into());
    vars.insert("PLURNK_MCP_ENABLED".into(), json!(enabled).to_string());
    vars.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), connect_ms.to_string());
    vars
}

#[test]
fn hydration_shows_its_progress_on_a_terminal_and_none_when_piped_or_json() {
    let bound = std::time::Duration::from_secs(120);
    // On a terminal: the line counts the servers and names the one pending longest, in the
    // end the one that answers 8 s late (the others have 30 s, which they never need).
    let mut shown = pty::Terminal::spawn(
        terminal_command(&["status"], &two_hundred_and_one(Some(8), 30_000), false),
        200,
        50,
    );
    let status = shown.wait(bound).expect("status ends");
    let text = shown.text();
    assert!(status.success(), "{status:?}: {text}");
    let progress: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("connecting workspace \"default\": "))
        .collect();
    assert!(!progress.is_empty(), "no progress line: {text}");
    assert!(
        progress
            .iter()
            .any(|line| line.contains(" ready, ") && line.contains(" pending (slowest: ")),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|line| line.contains("200 ready, 0 unavailable, 1 pending (slowest: last, ")),
        "the last one pending is named: {progress:?}"
    );
    // The table follows, each row a line of its own.
    assert!(row_says(&text, "last", "ready"), "{text}");
    assert!(row_says(&text, "s199", "ready"), "{text}");

    // Piped, and as JSON, on the same terminal (stderr is still one): no line at all. The
    // two run at once, their servers held for 2 s by the one that never answers.
    let quiet = two_hundred_and_one(None, 2_000);
    let mut piped = pty::Terminal::spawn(terminal_command(&["status"], &quiet, true), 200, 50);
    let mut json = pty::Terminal::spawn(
        terminal_command(&["status", "--json"], &quiet, false),
        200,
        50,
    );
    for (terminal, what) in [(&mut piped, "piped"), (&mut json, "--json")] {
        let status = terminal.wait(bound).expect("status ends");
        let raw = terminal.raw();
        assert!(status.success(), "{what}: {status:?}: {raw}");
        assert!(raw.contains("s199"), "{what}: the output is there: {raw}");
        assert!(
            !raw.contains("connecting workspace") && !raw.contains("slowest"),
            "{what} shows progress: {raw}"
        );
    }
}

/// The lines of `text` that are `alias`'s row in a status table and say `state`.
fn row_says(text: &str, alias: &str, state: &str) -> bool {
    text.lines().any(|line| {
        let mut cells = line.split_whitespace();
        cells.next() == Some(alias) && cells.nth(1) == Some(state)
    })
}

#[test]
fn status_watch_on_a_short_terminal_draws_what_fits_and_says_how_many_more() {
    let bound = std::time::Duration::from_secs(30);
    let aliases: Vec<String> = (0..6).map(|n| format!("s{n}")).collect();
    let mut vars: BTreeMap<String, String> = aliases
        .iter()
        .flat_map(|alias| fixture(alias, &[]))
        .collect();
    vars.insert("PLURNK_MCP_ENABLED".into(), json!(aliases).to_string());
    // Six rows: the header, three servers and the line that counts the rest, and the cursor's
    // row. A table taller than the terminal would scroll off, and each redraw would leave a
    // copy behind.
    let mut watched = pty::Terminal::spawn(
        terminal_command(&["status", "--watch"], &vars, false),
        120,
        6,
    );
    assert!(
        wait::until_blocking(bound, || watched.text().contains("… 3 more servers")),
        "{}",
        watched.text()
    );
    watched.type_in("\u{3}");
    assert!(
        watched.wait(bound).is_some(),
        "the watch ends on Ctrl-C: {}",
        watched.text()
    );
}

#[test]
fn status_watch_shows_a_killed_server_go_unavailable_and_come_back_and_ends_on_ctrl_c() {
    let bound = std::time::Duration::from_secs(30);
    let mark = format!("watch-{}", std::process::id());
    let mut vars: BTreeMap<String, String> = fixture("alpha", &[])
        .into_iter()
        .chain(fixture("beta", &[]))
        .collect();
    for alias in ["alpha", "beta"] {
        vars.insert(
            format!("PLURNK_MCP_{}_ENV", alias.to_uppercase()),
            json!({"TEST_MARK": format!("{mark}-{alias}")}).to_string(),
        );
    }
    vars.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["alpha", "beta"]).to_string(),
    );
    let mut watched = pty::Terminal::spawn(
        terminal_command(&["status", "--watch"], &vars, false),
        160,
        40,
    );
    assert!(
        wait::until_blocking(bound, || {
            let text = watched.text();
            row_says(&text, "alpha", "ready") && row_says(&text, "beta", "ready")
        }),
        "{}",
        watched.text()
    );
    let alpha = marked(&format!("{mark}-alpha"));
    assert_eq!(alpha.len(), 1, "{alpha:?}");
    let before = watched.raw().len();
    // SAFETY: a signal to a fixture process this test's command started.
    unsafe {
        libc::kill(alpha[0].0, libc::SIGKILL);
    }
    // The same command, never run again, shows it go and come back.
    let after = |watched: &pty::Terminal| pty::plain(&watched.raw()[before..]);
    assert!(
        wait::until_blocking(bound, || row_says(&after(&watched), "alpha", "unavailable")),
        "{}",
        after(&watched)
    );
    assert!(
        wait::until_blocking(bound, || {
            let text = after(&watched);
            let gone = text.find("unavailable").unwrap_or(text.len());
            row_says(&text[gone..], "alpha", "ready")
        }),
        "{}",
        after(&watched)
    );
    let raw = watched.raw()[before..].to_owned();
    // The change is highlighted (reverse video), and the row keeps the Problem it had.
    assert!(raw.contains("\u{1b}[7m"), "{raw:?}");
    let text = pty::plain(&raw);
    assert!(
        text.lines()
            .any(|line| line.starts_with("alpha") && line.contains(" s ago: ")),
        "{text}"
    );
    assert!(
        !row_says(&text, "beta", "unavailable"),
        "beta never went: {text}"
    );
    // Ctrl-C on the terminal: the servers are closed and nothing is left behind.
    watched.type_in("\u{3}");
    let status = watched.wait(bound).expect("the watch ends on Ctrl-C");
    assert_eq!(status.code(), Some(130), "{}", watched.text());
    assert!(
        watched.text().contains("closing every server"),
        "{}",
        watched.text()
    );
    assert!(
        wait::until_blocking(bound, || marked(&mark).is_empty()),
        "left behind: {:?}",
        marked(&mark)
    );
}
