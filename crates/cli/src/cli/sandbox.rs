//! `plurnk-mcp sandbox check`: what this machine can enforce of a sandbox, and why not.

use std::process::ExitCode;

use super::{print_json, render_table};

/// The sandbox every stdio server and tool source runs in.
#[derive(clap::Args)]
pub(crate) struct SandboxArgs {
    #[command(subcommand)]
    command: SandboxCommand,
}

#[derive(clap::Subcommand)]
enum SandboxCommand {
    /// Check what this machine can enforce (Landlock, seccomp, user, PID and network
    /// namespaces, limits), each part tried in a child process, and why a part is missing.
    /// Exits 1 when any is missing: a policy whose mode is `require` then refuses to start
    /// its server, and `best-effort` starts it with the rest.
    Check {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

impl SandboxArgs {
    /// Whether the command was asked for JSON.
    pub(crate) fn json(&self) -> bool {
        match self.command {
            SandboxCommand::Check { json } => json,
        }
    }

    pub(crate) async fn run(self) -> ExitCode {
        match self.command {
            SandboxCommand::Check { json } => check(json).await,
        }
    }
}

async fn check(json: bool) -> ExitCode {
    let findings = match tokio::task::spawn_blocking(plurnk_mcp::sandbox::check).await {
        Ok(findings) => findings,
        Err(error) => {
            errln!("plurnk-mcp: the machine could not be checked: {error}");
            return ExitCode::from(2);
        }
    };
    let all = findings.iter().all(|finding| finding.available);
    if json {
        let code = print_json(&findings);
        if code != ExitCode::SUCCESS {
            return code;
        }
    } else {
        let mut table = vec![["PART".to_owned(), "STATUS".to_owned(), "DETAIL".to_owned()]];
        for finding in &findings {
            table.push([
                finding.feature.to_owned(),
                if finding.available {
                    "ready"
                } else {
                    "missing"
                }
                .to_owned(),
                finding.detail.clone(),
            ]);
        }
        out!("{}", render_table(&table));
    }
    if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
