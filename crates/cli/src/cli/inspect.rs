//! The commands that show what a workspace's servers offer: `status`, `tools`, `docs`,
//! `survey`, `resources`, `read`, `prompts` and `prompt`.

use std::process::ExitCode;

use super::{
    Global, Needs, arguments, fail, finish, print_json, render_table, shown, start,
    with_ready_server,
};
use plurnk_mcp::{CallOptions, ServerState, WorkspaceSnapshot};

/// A document the host rendered (what the model reads), for a terminal: its lines are its
/// own (the projection puts a server's text on one line), so line breaks stay; no other
/// control or format character gets through.
fn document_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if plurnk_mcp::text::is_unshown(c) && c != '\n' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// Renders the status table.
/// Connect every enabled server and print its state.
#[derive(clap::Args)]
pub(crate) struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Keep watching: a live table redrawn on every state change, each change
    /// highlighted and every server's last Problem kept, until Ctrl-C. Piped, a line per
    /// change; with --json, a JSON object per change.
    #[arg(long)]
    watch: bool,
}

/// List a server's enabled tools.
#[derive(clap::Args)]
pub(crate) struct ToolsArgs {
    /// The server alias.
    server: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// List a server's resources and resource templates.
#[derive(clap::Args)]
pub(crate) struct ResourcesArgs {
    /// The server alias.
    server: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Read a resource and print the server's answer as JSON.
#[derive(clap::Args)]
pub(crate) struct ReadArgs {
    /// The server alias.
    server: String,
    /// The resource URI.
    uri: String,
}

/// List a server's prompts.
#[derive(clap::Args)]
pub(crate) struct PromptsArgs {
    /// The server alias.
    server: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Get a prompt and print its messages as JSON.
#[derive(clap::Args)]
pub(crate) struct PromptArgs {
    /// The server alias.
    server: String,
    /// The prompt name.
    name: String,
    /// The prompt arguments, a JSON object.
    arguments: Option<String>,
}

/// Print what the model reads of a server: its family document, a tool's document, or
/// (given `<server>:///resources` or `<server>:///prompts`) a facet.
#[derive(clap::Args)]
pub(crate) struct DocsArgs {
    /// The server alias, or a document address (`worker://plurnk/tools/...`,
    /// `<server>:///resources`, `<server>:///prompts`).
    server: String,
    /// A tool of the server: print its document.
    tool: Option<String>,
}

/// Print the tools survey: one row per enabled server, and the tool tree of each
/// PLURNK_MCP_EXPANDED server.
#[derive(clap::Args)]
pub(crate) struct SurveyArgs {}

impl StatusArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        if self.watch {
            super::watch::watch(global, self.json).await
        } else {
            status(global, self.json).await
        }
    }
}

impl ToolsArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        tools(global, &self.server, self.json).await
    }
}

impl ResourcesArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        resources(global, &self.server, self.json).await
    }
}

impl ReadArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        read(global, &self.server, &self.uri).await
    }
}

impl PromptsArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        prompts(global, &self.server, self.json).await
    }
}

impl PromptArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        prompt(global, &self.server, &self.name, self.arguments.as_deref()).await
    }
}

impl DocsArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        docs(global, &self.server, self.tool.as_deref()).await
    }
}

impl SurveyArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        survey(global).await
    }
}

pub(crate) fn status_table(snapshot: &WorkspaceSnapshot) -> String {
    let mut rows = vec![[
        "SERVER".to_owned(),
        "TRANSPORT".to_owned(),
        "STATE".to_owned(),
        "REVISION".to_owned(),
        "TOOLS".to_owned(),
        "PROBLEM".to_owned(),
    ]];
    for server in snapshot.servers.values() {
        rows.push(super::server_row(server, super::server_note(server)));
    }
    render_table(&rows)
}

async fn status(global: &Global, json: bool) -> ExitCode {
    let (host, workspace) = match start(global, Needs::All).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let snapshot = workspace.snapshot();
    if snapshot.servers.is_empty() {
        errln!(
            "plurnk-mcp: no servers are configured: set PLURNK_MCP_<name> to an executable or an http(s) URL, and PLURNK_MCP_ENABLED to the names to connect"
        );
    }
    if json {
        match serde_json::to_string_pretty(&*snapshot) {
            Ok(text) => outln!("{}", plurnk_mcp::text::escape_json_unshown(&text)),
            Err(error) => {
                finish(&host).await;
                return fail(error);
            }
        }
    } else {
        out!("{}", status_table(&snapshot));
        for server in snapshot.servers.values() {
            if server.state == plurnk_mcp::ServerState::AuthorizationRequired {
                errln!(
                    "plurnk-mcp: server \"{0}\" needs OAuth authorization: run `plurnk-mcp auth {0}` (or `plurnk-mcp auth {0} --device` on a machine without a browser)",
                    server.alias
                );
            }
        }
    }
    finish(&host).await;
    ExitCode::SUCCESS
}

async fn tools(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
        if json {
            return print_json(&*entry.tools);
        }
        for tool in entry.tools.iter() {
            let effect = match tool.effect {
                plurnk_mcp::Effect::Read => "read",
                plurnk_mcp::Effect::Host => "host",
            };
            let description = tool
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or("");
            outln!(
                "{:<32} {effect:<5} {}",
                shown(&tool.name),
                shown(description)
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

/// `docs <server> [tool]` or `docs <address>`: the document, as the model reads it.
async fn docs(global: &Global, server: &str, tool: Option<&str>) -> ExitCode {
    let alias = plurnk_mcp::projection::addressed_server(server);
    let needs = Needs::One(alias.as_deref().unwrap_or(server));
    let (host, workspace) = match start(global, needs).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let snapshot = workspace.snapshot();
    let is_address = server.contains("://");
    let document = match (is_address, tool) {
        (true, None) => plurnk_mcp::projection::document(&snapshot, server),
        (true, Some(_)) => {
            finish(&host).await;
            return fail(format!(
                "{server:?} is a document address: give it alone, or give a server alias and a tool"
            ));
        }
        (false, None) => plurnk_mcp::projection::family_document(&snapshot, server),
        (false, Some(tool)) => plurnk_mcp::projection::tool_document(&snapshot, server, tool),
    };
    let code = match document {
        Some(text) => {
            out!("{}", document_text(&text));
            ExitCode::SUCCESS
        }
        None => fail(missing_document(&snapshot, server, tool, is_address)),
    };
    finish(&host).await;
    code
}

/// Why there is no document: the server is unknown or disabled, or the tool is not enabled.
fn missing_document(
    snapshot: &WorkspaceSnapshot,
    server: &str,
    tool: Option<&str>,
    is_address: bool,
) -> String {
    // Names and addresses are the caller's: quoted cut.
    let quoted = plurnk_mcp::config::shorten(server);
    if is_address {
        return format!(
            "no document at {quoted:?}: addresses are worker://plurnk/tools/<server>.md, worker://plurnk/tools/<server>/<tool>.md, <server>:///resources and <server>:///prompts, of an enabled server"
        );
    }
    let enabled: Vec<&str> = snapshot
        .servers
        .values()
        .filter(|entry| entry.state != ServerState::Disabled)
        .map(|entry| entry.alias.as_str())
        .collect();
    match (snapshot.server(server), tool) {
        (None, _) => format!(
            "no server \"{quoted}\" is configured (enabled: {}): see `plurnk-mcp survey`",
            if enabled.is_empty() {
                "none".to_owned()
            } else {
                enabled.join(", ")
            }
        ),
        (Some(entry), _) if entry.state == ServerState::Disabled => {
            format!("server \"{server}\" is disabled: enable it with `plurnk-mcp enable {server}`")
        }
        (Some(entry), Some(tool)) => {
            let tools: Vec<&str> = entry.tools.iter().map(|t| t.name.as_str()).collect();
            let tool = plurnk_mcp::config::shorten(tool);
            format!(
                "server \"{server}\" has no enabled tool \"{tool}\" (its tools: {}): see `plurnk-mcp docs {server}`",
                if tools.is_empty() {
                    format!("none while it is {}", entry.state)
                } else {
                    tools.join(", ")
                }
            )
        }
        (Some(_), None) => format!("server \"{server}\" has no document"),
    }
}

/// `survey`: the tools survey, as the model reads it.
async fn survey(global: &Global) -> ExitCode {
    let (host, workspace) = match start(global, Needs::All).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    out!(
        "{}",
        document_text(&plurnk_mcp::projection::survey(&workspace.snapshot()))
    );
    finish(&host).await;
    ExitCode::SUCCESS
}

async fn resources(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
        if json {
            return print_json(&serde_json::json!({
                "resources": &*entry.catalog.resources,
                "templates": &*entry.catalog.templates,
            }));
        }
        for resource in entry.catalog.resources.iter() {
            outln!(
                "{:<40} {:<24} {}",
                shown(&resource.uri),
                shown(resource.mime_type.as_deref().unwrap_or("-")),
                shown(&resource.name)
            );
        }
        for template in entry.catalog.templates.iter() {
            outln!(
                "{:<40} {:<24} {}",
                shown(&template.uri_template),
                "(template)",
                shown(&template.name)
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

async fn read(global: &Global, server: &str, uri: &str) -> ExitCode {
    with_ready_server(global, server, |workspace, _| async move {
        match workspace
            .read_resource(server, uri, CallOptions::default())
            .await
        {
            Ok(result) => print_json(&result),
            Err(error) => fail(error),
        }
    })
    .await
}

async fn prompts(global: &Global, server: &str, json: bool) -> ExitCode {
    with_ready_server(global, server, |_, entry| async move {
        if json {
            return print_json(&*entry.catalog.prompts);
        }
        for prompt in entry.catalog.prompts.iter() {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        a.name.clone()
                    } else {
                        format!("{}?", a.name)
                    }
                })
                .collect();
            outln!(
                "{:<32} ({}) {}",
                shown(&prompt.name),
                shown(&arguments.join(", ")),
                shown(prompt.description.as_deref().unwrap_or(""))
            );
        }
        ExitCode::SUCCESS
    })
    .await
}

async fn prompt(global: &Global, server: &str, name: &str, text: Option<&str>) -> ExitCode {
    let arguments = match arguments(text) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    with_ready_server(global, server, |workspace, _| async move {
        match workspace
            .get_prompt(server, name, arguments, CallOptions::default())
            .await
        {
            Ok(result) => print_json(&result),
            Err(error) => fail(error),
        }
    })
    .await
}
