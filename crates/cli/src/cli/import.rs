//! `plurnk-mcp import`: another client's file planned, each entry added (a few at once),
//! and the outcome with the variables to set.

use std::process::ExitCode;

use super::{Global, Needs, environment, fail, finish, printable, render_table, start};
use plurnk_mcp::HostConfig;

/// The `import` command's flags.
#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    /// The configuration file.
    file: std::path::PathBuf,
    /// Read it as this format instead of detecting it: claude-desktop, cursor, vscode
    /// or codex.
    #[arg(long)]
    format: Option<String>,
    /// Print what would be imported, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// The largest file read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = plurnk_mcp::import::DEFAULT_MAX_FILE_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_bytes: u64,
    /// How many entries connect at once.
    #[arg(long, value_name = "N", default_value_t = plurnk_mcp::import::DEFAULT_CONCURRENCY as u64,
          value_parser = clap::value_parser!(u64).range(1..=256))]
    concurrency: u64,
}

impl ImportArgs {
    /// Imports the file as these flags ask.
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        let bounds = ImportBounds {
            max_bytes: self.max_bytes,
            concurrency: usize::try_from(self.concurrency).unwrap_or(1),
        };
        import(
            global,
            &self.file,
            self.format.as_deref(),
            self.dry_run,
            bounds,
        )
        .await
    }
}

/// What became of one planned server.
#[derive(Clone)]
enum Imported {
    /// `--dry-run`: nothing was tried.
    Would,
    /// `--dry-run`, with the install gate closed: the add would be refused, for this reason.
    WouldBeRefused(&'static str),
    /// Added, and enabled or disabled as the file had it.
    Done,
    /// Added and checked, its connection let go; to be enabled again once the host is gone.
    Released,
    /// The action's Problem.
    Refused(plurnk_mcp::Problem),
    /// Added, but the disable the file asked for was refused.
    NotDisabled(plurnk_mcp::Problem),
    /// Added and checked, but left disabled: the store refused to enable it again.
    NotEnabled(String),
}

/// The bounds of one `import`: `--max-bytes` and `--concurrency`.
pub(crate) struct ImportBounds {
    /// The largest file read.
    pub(crate) max_bytes: u64,
    /// How many entries connect at once (at least 1).
    pub(crate) concurrency: usize,
}

/// `plurnk-mcp import <file> [--format F] [--dry-run] [--max-bytes B] [--concurrency N]`:
/// every server of another client's file added through `Workspace::add`, as `add` adds one,
/// at most N at once, and let go once checked (disabled), so no more than N run at once
/// whatever the file's length; the ones the file has enabled are enabled again in the store
/// once the import's host is gone, and the next command connects them. Exit 0 when all were
/// imported, 1 when some were skipped or refused, 2 when the file cannot be read or the host
/// cannot start.
pub(crate) async fn import(
    global: &Global,
    file: &std::path::Path,
    format: Option<&str>,
    dry_run: bool,
    bounds: ImportBounds,
) -> ExitCode {
    use plurnk_mcp::config::shorten;
    use plurnk_mcp::import::Format;
    let path = printable(&file.display().to_string());
    let text = match plurnk_mcp::import::read(file, &path, bounds.max_bytes) {
        Ok(text) => text,
        Err(error) => return fail(error),
    };
    let format = match format {
        None => Format::detect(&file.to_string_lossy(), &text),
        Some(name) => match Format::from_name(name) {
            Some(format) => format,
            None => {
                return fail(format!(
                    "--format {:?} is not a format: use claude-desktop, cursor, vscode or codex",
                    printable(&shorten(name))
                ));
            }
        },
    };
    // Moved literals get variables the operator's environment does not hold otherwise.
    let environment = plurnk_mcp::config::Environment::new(environment());
    let plan = match plurnk_mcp::import::plan(&text, format, &environment) {
        Ok(plan) => plan,
        Err(error) => return fail(format!("cannot import {path} as {format}: {error}")),
    };
    let outcomes = if dry_run || plan.servers.is_empty() {
        would_outcomes(&plan)
    } else {
        match add_each(global, &plan, bounds).await {
            Ok(outcomes) => outcomes,
            Err(code) => return code,
        }
    };
    report(global, &path, format, &plan, &outcomes, dry_run)
}

/// What a dry run (or an empty plan) says of each entry: the gate the adds would meet, and
/// every one refused while it is closed.
fn would_outcomes(plan: &plurnk_mcp::import::Plan) -> Vec<Imported> {
    let gate_closed = HostConfig::from_env(super::environment())
        .is_ok_and(|config| !config.allows_runtime_servers());
    let would = if gate_closed {
        Imported::WouldBeRefused(
            "the install gate is closed: the operator must set PLURNK_MCP_ALLOW_ADD=true \
             before a workspace can add servers",
        )
    } else {
        Imported::Would
    };
    plan.servers.iter().map(|_| would.clone()).collect()
}

/// Adds every entry of `plan`: each add connects its candidate (within the connect timeout),
/// a few at once, and its connection is let go once it is checked, so a file of hundreds of
/// entries never has hundreds of servers running together, during the import or at its end.
async fn add_each(
    global: &Global,
    plan: &plurnk_mcp::import::Plan,
    bounds: ImportBounds,
) -> Result<Vec<Imported>, ExitCode> {
    use futures::StreamExt;
    let (host, workspace) = start(global, Needs::All).await?;
    let adds = plan.servers.iter().map(|server| {
        let workspace = workspace.clone();
        async move {
            if let Err(problem) = workspace.add(server.definition.clone()).await {
                return Imported::Refused(problem);
            }
            match (workspace.disable(server.alias()).await, server.enabled) {
                (Ok(_), true) => Imported::Released,
                (Ok(_), false) => Imported::Done,
                // Still enabled, and connected until the import ends.
                (Err(_), true) => Imported::Done,
                (Err(problem), false) => Imported::NotDisabled(problem),
            }
        }
    });
    let mut outcomes: Vec<Imported> = futures::stream::iter(adds)
        .buffered(bounds.concurrency.max(1))
        .collect()
        .await;
    finish(&host).await;
    enable_again(global, plan, &mut outcomes).await;
    Ok(outcomes)
}

/// Prints what the import did (or would do) of each entry, the skipped ones, the notes and
/// the variables to set; exit 1 when any entry was not imported as it is.
fn report(
    global: &Global,
    path: &str,
    format: plurnk_mcp::import::Format,
    plan: &plurnk_mcp::import::Plan,
    outcomes: &[Imported],
    dry_run: bool,
) -> ExitCode {
    use plurnk_mcp::config::shorten;
    let verb = if dry_run {
        "would add"
    } else {
        "added what connects of"
    };
    outln!(
        "{path}: read as {format}; {verb} {} server(s) into workspace \"{}\", {} skipped",
        plan.servers.len(),
        global.workspace,
        plan.skipped.len()
    );
    out!("{}", import_table(plan, outcomes));
    for skipped in &plan.skipped {
        outln!(
            "{}",
            printable(&format!(
                "skipped {:?}: {}",
                shorten(&skipped.source),
                skipped.reason
            ))
        );
    }
    for server in &plan.servers {
        for note in &server.notes {
            outln!(
                "{}",
                printable(&format!("note {:?}: {note}", shorten(&server.source)))
            );
        }
    }
    print_variables(plan, dry_run);
    let failed = plan.skipped.len()
        + outcomes
            .iter()
            .filter(|outcome| {
                matches!(
                    outcome,
                    Imported::Refused(_)
                        | Imported::NotDisabled(_)
                        | Imported::NotEnabled(_)
                        | Imported::WouldBeRefused(_)
                )
            })
            .count();
    if failed == 0 {
        return ExitCode::SUCCESS;
    }
    let total = plan.skipped.len() + plan.servers.len();
    let was = if dry_run { "would not be" } else { "were not" };
    errln!(
        "plurnk-mcp: {failed} of {total} entries of {path} {was} imported as they are: see the reasons above"
    );
    ExitCode::from(1)
}

/// Enables again, in the store itself, every entry let go once checked: with the import's host
/// gone nothing connects it now, and the next command does.
async fn enable_again(global: &Global, plan: &plurnk_mcp::import::Plan, outcomes: &mut [Imported]) {
    if !outcomes
        .iter()
        .any(|outcome| matches!(outcome, Imported::Released))
    {
        return;
    }
    let store = match plurnk_mcp::store::open(&global.state).await {
        Ok(store) => Some(store),
        Err(error) => {
            let why = printable(&error.to_string());
            for outcome in outcomes.iter_mut() {
                if matches!(outcome, Imported::Released) {
                    *outcome = Imported::NotEnabled(why.clone());
                }
            }
            None
        }
    };
    let Some(store) = store else {
        return;
    };
    for (server, outcome) in plan.servers.iter().zip(outcomes.iter_mut()) {
        if matches!(outcome, Imported::Released) {
            *outcome = match store
                .set_enabled(&global.workspace, server.alias(), true)
                .await
            {
                Ok(()) => Imported::Done,
                Err(error) => Imported::NotEnabled(printable(&error.to_string())),
            };
        }
    }
}

fn import_table(plan: &plurnk_mcp::import::Plan, outcomes: &[Imported]) -> String {
    let mut rows = vec![
        [
            "SERVER",
            "FROM",
            "TRANSPORT",
            "ENABLED",
            "TARGET",
            "REFERENCES",
            "RESULT",
        ]
        .map(str::to_owned),
    ];
    for (server, outcome) in plan.servers.iter().zip(outcomes) {
        let references: Vec<String> = server
            .introduced
            .iter()
            .map(|introduced| format!("${{{}}}", introduced.variable))
            .collect();
        let result = match outcome {
            Imported::Would => "would be added".to_owned(),
            Imported::WouldBeRefused(why) => format!("would be refused: {why}"),
            Imported::Done => "added".to_owned(),
            Imported::Refused(problem) => format!("refused: {problem}"),
            Imported::NotDisabled(problem) => {
                format!("added, but still enabled: the disable was refused: {problem}")
            }
            Imported::Released => "added".to_owned(),
            Imported::NotEnabled(why) => format!(
                "added and checked, but left disabled: {why}: enable it with `plurnk-mcp \
                 enable {}`",
                server.alias()
            ),
        };
        rows.push([
            server.alias().to_owned(),
            plurnk_mcp::config::shorten(&server.source),
            server.transport().to_string(),
            if server.enabled { "yes" } else { "no" }.to_owned(),
            server.target(),
            if references.is_empty() {
                "-".to_owned()
            } else {
                references.join(", ")
            },
            result,
        ]);
    }
    if rows.len() == 1 {
        return String::new();
    }
    render_table(&rows)
}

/// The variables the planned servers refer to: names, whether each is set and handed to
/// workspaces, and where a moved secret came from. Never a value.
fn print_variables(plan: &plurnk_mcp::import::Plan, dry_run: bool) {
    let variables = plan.variables();
    if variables.is_empty() {
        return;
    }
    let config = HostConfig::from_env(environment()).ok();
    let handed = |name: &str| {
        config
            .as_ref()
            .is_some_and(|config| config.workspace_env().contains(name))
    };
    // Where each moved value was, gathered once: a file of thousands of entries is read in
    // one pass, not once per variable.
    let mut origins: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for server in &plan.servers {
        for introduced in &server.introduced {
            origins
                .entry(introduced.variable.as_str())
                .or_default()
                .push(format!(
                    "moved out of {}'s {}",
                    server.alias(),
                    introduced.from
                ));
        }
    }
    let mut rows = vec![["VARIABLE", "SET", "IN WORKSPACE_ENV", "FROM"].map(str::to_owned)];
    let mut missing = false;
    for name in &variables {
        let set = std::env::var_os(name).is_some();
        missing |= !set || !handed(name);
        let from = match origins.get(name.as_str()) {
            None => "a reference in the file".to_owned(),
            Some(moved) => moved.join("; "),
        };
        rows.push([
            name.clone(),
            if set { "yes" } else { "no" }.to_owned(),
            if handed(name) { "yes" } else { "no" }.to_owned(),
            from,
        ]);
    }
    outln!("variables the servers refer to (their values are never shown):");
    out!("{}", render_table(&rows));
    let allowed = config
        .as_ref()
        .is_some_and(HostConfig::allows_runtime_servers);
    if missing || !allowed {
        let when = if dry_run {
            "before importing"
        } else {
            "and import again"
        };
        outln!(
            "set each variable, list it in PLURNK_MCP_WORKSPACE_ENV and set PLURNK_MCP_ALLOW_ADD=true {when}: a server is added only once it connects"
        );
    }
}
