//! `plurnk-mcp call` and `plurnk-mcp exec`: one tool call, by name or as an EXEC op.

use std::process::ExitCode;

use super::{Global, Needs, arguments, fail, finish, print_json, start};
use plurnk_mcp::CallOptions;

/// Call a tool and print its result as JSON.
///
/// Exits 0 for a result, 1 for a result the tool flagged `isError`, 2 for a failure.
#[derive(clap::Args)]
pub(crate) struct CallArgs {
    /// The server alias.
    server: String,
    /// The tool name.
    tool: String,
    /// The arguments, a JSON object.
    arguments: Option<String>,
}

/// Run one EXEC op and print its result as JSON.
///
/// `<<EXEC[server](tool):{"name":"value"}:EXEC` calls a tool; `<<EXEC[server]:?:EXEC`
/// prints the server's tools. Exits like `call`: 0 for a result, 1 for a result the tool
/// flagged `isError`, 2 for a failure.
#[derive(clap::Args)]
pub(crate) struct ExecArgs {
    /// The op.
    op: String,
}

impl CallArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        call(global, &self.server, &self.tool, self.arguments.as_deref()).await
    }
}

impl ExecArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        exec(global, &self.op).await
    }
}

async fn call(global: &Global, server: &str, tool: &str, arguments: Option<&str>) -> ExitCode {
    let arguments = match self::arguments(arguments) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    let (host, workspace) = match start(global, Needs::One(server)).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let result = workspace
        .call_tool(server, tool, arguments, CallOptions::default())
        .await;
    let code = match result {
        Ok(result) => match serde_json::to_string_pretty(&result.result) {
            Ok(text) => {
                // A server's text: its format characters escaped as JSON allows.
                outln!("{}", plurnk_mcp::text::escape_json_unshown(&text));
                if result.is_error {
                    errln!("plurnk-mcp: {server}/{tool} reported a tool error (isError)");
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(error) => fail(error),
        },
        Err(error) => fail(error),
    };
    finish(&host).await;
    code
}

/// `plurnk-mcp exec '<op>'`: the op's result as JSON, exiting as [`call`] does. An op that
/// cannot be read is refused before any server is started.
async fn exec(global: &Global, op: &str) -> ExitCode {
    let server = match plurnk_mcp::exec::parse(op) {
        Ok(parsed) => parsed.server().to_owned(),
        Err(error) => return fail(error),
    };
    let (host, workspace) = match start(global, Needs::One(&server)).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = match plurnk_mcp::exec::run(&workspace, op, CallOptions::default()).await {
        Ok(value) => print_json(&value),
        Err(plurnk_mcp::exec::ExecError::ToolError {
            server,
            tool,
            result,
            ..
        }) => match serde_json::to_string_pretty(&result) {
            Ok(text) => {
                outln!("{}", plurnk_mcp::text::escape_json_unshown(&text));
                errln!("plurnk-mcp: {server}/{tool} reported a tool error (isError)");
                ExitCode::from(1)
            }
            Err(error) => fail(error),
        },
        Err(error) => fail(error),
    };
    finish(&host).await;
    code
}
