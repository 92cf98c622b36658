//! `plurnk-mcp source check`: what each tool source needs on this machine.

use std::process::ExitCode;

use super::{Global, Needs, fail, finish, print_json, render_table, start};

/// `plurnk-mcp source check`: every tool source of the workspace (service and added), what
/// it needs on this machine and whether it is there. Exit 0 when all are ready, 1 otherwise.
/// Tool sources (CLI adapters, scripts, OpenAPI documents).
#[derive(clap::Args)]
pub(crate) struct SourceArgs {
    #[command(subcommand)]
    command: SourceCommand,
}

#[derive(clap::Subcommand)]
enum SourceCommand {
    /// Check every tool source of the workspace on this machine: missing binaries, runtimes
    /// that are not installed, declarations written against another version than the one
    /// installed. Exits 1 when any needs attention.
    Check {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

impl SourceArgs {
    /// Whether the command was asked for JSON.
    pub(crate) fn json(&self) -> bool {
        match self.command {
            SourceCommand::Check { json } => json,
        }
    }

    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        match self.command {
            SourceCommand::Check { json } => source_check(global, json).await,
        }
    }
}

async fn source_check(global: &Global, json: bool) -> ExitCode {
    let (host, workspace) = match start(global, Needs::All).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let summaries = match workspace.list().await {
        Ok(summaries) => summaries,
        Err(problem) => {
            finish(&host).await;
            return fail(problem);
        }
    };
    finish(&host).await;
    let mut rows = Vec::new();
    let mut ready = true;
    for summary in summaries
        .iter()
        .filter(|summary| summary.transport.is_source())
    {
        let kind = plurnk_mcp::sources::SourceKind::from_name(&summary.transport.to_string());
        let declaration = summary
            .definition
            .get("declaration")
            .cloned()
            .unwrap_or_default();
        let found = match kind {
            Some(kind) => {
                Some(plurnk_mcp::sources::check(kind, &declaration, &summary.alias).await)
            }
            None => None,
        };
        let (status, detail) = match found {
            Some(Ok(plurnk_mcp::sources::Finding::Ready(what))) => ("ready", what),
            Some(Ok(plurnk_mcp::sources::Finding::Missing(what))) => ("missing", what),
            Some(Ok(plurnk_mcp::sources::Finding::VersionDrift {
                declared,
                installed,
            })) => (
                "version-drift",
                format!(
                    "written against {declared:?}, installed {installed:?}: check the declaration still fits, then record the new version"
                ),
            ),
            Some(Err(faults)) => (
                "invalid",
                faults
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            None => ("invalid", "not a tool source".to_owned()),
        };
        ready &= status == "ready";
        rows.push((
            summary.alias.clone(),
            summary.transport.to_string(),
            status,
            detail,
        ));
    }
    if json {
        let value: Vec<serde_json::Value> = rows
            .iter()
            .map(|(alias, kind, status, detail)| {
                serde_json::json!({"alias": alias, "kind": kind, "status": status, "detail": detail})
            })
            .collect();
        let code = print_json(&value);
        if code != ExitCode::SUCCESS {
            return code;
        }
    } else if rows.is_empty() {
        errln!(
            "plurnk-mcp: the workspace has no tool sources (PLURNK_MCP_SOURCES, or add --source FILE)"
        );
    } else {
        let mut table = vec![[
            "SOURCE".to_owned(),
            "KIND".to_owned(),
            "STATUS".to_owned(),
            "DETAIL".to_owned(),
        ]];
        for (alias, kind, status, detail) in &rows {
            table.push([
                alias.clone(),
                kind.clone(),
                (*status).to_owned(),
                detail.clone(),
            ]);
        }
        out!("{}", render_table(&table));
    }
    if ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
