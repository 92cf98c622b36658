//! The workspace actions: `list`, `add`, `enable`, `disable` and `remove`.

use std::process::ExitCode;

use super::auth::authorized_interactively;
use super::{Global, Needs, fail, finish, print_json, print_summaries, start};

/// Every available server of the workspace: source, target, enabledness, state.
#[derive(clap::Args)]
pub(crate) struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Add a server to the workspace and enable it; it is kept only if it connects.
#[derive(clap::Args)]
pub(crate) struct AddArgs {
    /// The new alias.
    alias: String,
    /// An absolute http(s) URL, or one exact executable (not with --source).
    #[arg(required_unless_present = "source")]
    target: Option<String>,
    /// A tool source instead of an MCP server: its declaration file (JSON with "kind":
    /// cli, script or openapi; see the README's "Tool sources").
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "options"])]
    source: Option<std::path::PathBuf>,
    /// McpServerOptions as JSON: args, cwd, env, headers, authorization, tools, read.
    #[arg(long)]
    options: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Enable a server in the workspace (optionally customized).
#[derive(clap::Args)]
pub(crate) struct EnableArgs {
    /// The alias.
    alias: String,
    /// McpServerOptions as JSON, the highest layer of the cascade.
    #[arg(long)]
    options: Option<String>,
    /// A client configuration overlay: a JSON object of PLURNK_MCP_* variables.
    #[arg(long)]
    overlay: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Disable a server in the workspace; it stays listed.
#[derive(clap::Args)]
pub(crate) struct DisableArgs {
    /// The alias.
    alias: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Remove a server added (or specialized) in the workspace.
#[derive(clap::Args)]
pub(crate) struct RemoveArgs {
    /// The alias.
    alias: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ListArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        action(global, Action::List, self.json).await
    }
}

impl AddArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        let asked = Action::Add {
            alias: self.alias,
            target: self.target.unwrap_or_default(),
            source: self.source,
            options: self.options,
        };
        action(global, asked, self.json).await
    }
}

impl EnableArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        let asked = Action::Enable {
            alias: self.alias,
            options: self.options,
            overlay: self.overlay,
        };
        action(global, asked, self.json).await
    }
}

impl DisableArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        action(global, Action::Disable { alias: self.alias }, self.json).await
    }
}

impl RemoveArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        action(global, Action::Remove { alias: self.alias }, self.json).await
    }
}

/// A workspace action as a user runs it: what changed, or the Problem and exit 2.
enum Action {
    List,
    Add {
        alias: String,
        target: String,
        /// A tool source's declaration file, instead of a target.
        source: Option<std::path::PathBuf>,
        options: Option<String>,
    },
    Enable {
        alias: String,
        options: Option<String>,
        overlay: Option<String>,
    },
    Disable {
        alias: String,
    },
    Remove {
        alias: String,
    },
}

/// The definition of tool source `alias` from its declaration `file`; the message names the
/// file, the field and the fix.
fn source_definition(
    alias: &str,
    file: &std::path::Path,
) -> Result<plurnk_mcp::ServerDefinition, String> {
    let origin = file.display().to_string();
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("{origin} cannot be read ({error}): name a declaration file"))?;
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(|error| {
        format!(
            "{origin}: line {} column {}: not valid JSON: write one JSON object with \"kind\" and the fields of its kind",
            error.line(),
            error.column()
        )
    })?;
    let kind = value.get("kind").and_then(serde_json::Value::as_str);
    let kind = kind
        .and_then(plurnk_mcp::sources::SourceKind::from_name)
        .ok_or_else(|| {
            format!("{origin}: kind: missing or unknown: write \"kind\": \"cli\", \"script\" or \"openapi\"")
        })?;
    if let Some(object) = value.as_object_mut() {
        match object.get("name").and_then(serde_json::Value::as_str) {
            Some(name) if name != alias => {
                return Err(format!(
                    "{origin}: name: declares \"{name}\", but it is being added as \"{alias}\": add it as \"{name}\" or change its name"
                ));
            }
            Some(_) => {}
            None => {
                object.insert("name".into(), serde_json::Value::String(alias.to_owned()));
            }
        }
    }
    plurnk_mcp::sources::definition(alias, kind, value, &origin).map_err(|errors| {
        format!(
            "tool source \"{}\" cannot be added: {errors}",
            plurnk_mcp::config::shorten(alias)
        )
    })
}

fn parse_options(
    text: Option<&str>,
) -> Result<Option<plurnk_mcp::config::McpServerOptions>, ExitCode> {
    match text {
        None => Ok(None),
        Some(text) => plurnk_mcp::config::McpServerOptions::from_json(text)
            .map(Some)
            .map_err(|errors| fail(format!("--options is not valid: {errors}"))),
    }
}

/// The definition an `add` adds, read from its source file or its target and options; `None`
/// for every other action. A refusal is the command's exit.
fn prepared(action: &Action) -> Result<Option<plurnk_mcp::ServerDefinition>, ExitCode> {
    Ok(match action {
        Action::Add {
            alias,
            source: Some(file),
            ..
        } => match source_definition(alias, file) {
            Ok(definition) => Some(definition),
            Err(message) => return Err(fail(message)),
        },
        Action::Add {
            alias,
            target,
            options,
            ..
        } => {
            let options = parse_options(options.as_deref())?;
            let definition =
                plurnk_mcp::ServerDefinition::from_target(alias, target).and_then(|definition| {
                    match &options {
                        Some(options) => definition.with_options(options),
                        None => Ok(definition),
                    }
                });
            match definition {
                Ok(definition) => Some(definition),
                Err(errors) => {
                    return Err(fail(format!(
                        "server \"{}\" cannot be added: {errors}",
                        plurnk_mcp::config::shorten(alias)
                    )));
                }
            }
        }
        _ => None,
    })
}

/// The customization an `enable` asks for (its options and its overlay); the default for every
/// other action. A refusal is the command's exit.
fn customization(action: &Action) -> Result<plurnk_mcp::Customize, ExitCode> {
    Ok(match action {
        Action::Enable {
            alias,
            options,
            overlay,
        } => {
            let options = parse_options(options.as_deref())?;
            let overlay = match overlay {
                None => None,
                Some(text) => {
                    let map: std::collections::BTreeMap<String, String> = match serde_json::from_str(
                        text,
                    ) {
                        Ok(map) => map,
                        Err(error) => {
                            return Err(fail(format!(
                                "--overlay must be a JSON object of PLURNK_MCP_* variables: {error}"
                            )));
                        }
                    };
                    match plurnk_mcp::config::Overlay::from_env_map(map) {
                        Ok(overlay) => overlay.server(alias),
                        Err(errors) => {
                            return Err(fail(format!("--overlay is not valid: {errors}")));
                        }
                    }
                }
            };
            plurnk_mcp::Customize::default()
                .with_overlay(overlay)
                .with_options(options)
        }
        _ => plurnk_mcp::Customize::default(),
    })
}

async fn action(global: &Global, action: Action, json: bool) -> ExitCode {
    // Everything that can be refused before starting the host is refused first.
    let prepared = match prepared(&action) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    let customize = match customization(&action) {
        Ok(customize) => customize,
        Err(code) => return code,
    };
    // An action on one server connects only that one; a listing connects every server, as
    // it shows their states.
    let needs = match &action {
        Action::List => Needs::All,
        Action::Add { alias, .. }
        | Action::Enable { alias, .. }
        | Action::Disable { alias }
        | Action::Remove { alias } => Needs::One(alias),
    };
    let (host, workspace) = match start(global, needs).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let outcome = match &action {
        Action::List => Ok(None),
        // A server that needs a person's OAuth authorization is authorized here and now:
        // this process is where its tokens live.
        Action::Add { .. } => match prepared {
            Some(definition) => match workspace.add(definition).await {
                Ok(asked) => authorized_interactively(&workspace, asked, json)
                    .await
                    .map(|s| Some(s.alias)),
                Err(problem) => Err(problem),
            },
            None => Ok(None),
        },
        Action::Enable { alias, .. } => match workspace.enable_with(alias, customize).await {
            Ok(asked) => authorized_interactively(&workspace, asked, json)
                .await
                .map(|s| Some(s.alias)),
            Err(problem) => Err(problem),
        },
        Action::Disable { alias } => workspace.disable(alias).await.map(|s| Some(s.alias)),
        Action::Remove { alias } => workspace.remove(alias).await.map(|_| None),
    };
    let code = match outcome {
        Ok(alias) => print_summaries(&workspace, alias.as_deref(), json).await,
        Err(problem) => {
            if json {
                let _ = print_json(&problem);
            }
            fail(problem)
        }
    };
    finish(&host).await;
    code
}
