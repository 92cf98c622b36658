//! `plurnk-mcp auth`: an OAuth server authorized in this process, by the browser's
//! callback or the device grant.

use std::process::ExitCode;
use std::time::Duration;

use super::{Global, Needs, fail, finish, print_json, print_summaries, start};
use plurnk_mcp::Workspace;

/// `plurnk-mcp auth <server> [--device] [--scope S] [--json]`.
/// Authorize an OAuth server in this process, as a person would, and show its tools.
///
/// Prints the authorization URL and reads the callback URL you were sent back to from
/// standard input; with `--device`, shows a user code to enter on any device and polls
/// until it is approved. Tokens live in this process only: a daemon (or `serve`)
/// authorizes its own servers the same way, through its embedding API.
#[derive(clap::Args)]
pub(crate) struct AuthArgs {
    /// The server alias.
    server: String,
    /// Use the device authorization grant (no browser on this machine).
    #[arg(long)]
    device: bool,
    /// The scope to ask for (device grant only; otherwise the definition's).
    #[arg(long)]
    scope: Option<String>,
    /// Print JSON: the 202 while it waits, then the server's summary.
    #[arg(long)]
    pub(crate) json: bool,
}

impl AuthArgs {
    pub(crate) async fn run(self, global: &Global) -> ExitCode {
        auth(
            global,
            &self.server,
            self.device,
            self.scope.as_deref(),
            self.json,
        )
        .await
    }
}

async fn auth(
    global: &Global,
    server: &str,
    device: bool,
    scope: Option<&str>,
    json: bool,
) -> ExitCode {
    let (host, workspace) = match start(global, Needs::One(server)).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let outcome = if device {
        authorize_by_device(&workspace, server, scope, json, global.progress).await
    } else {
        authorize_by_browser(&workspace, server, json).await
    };
    let code = match outcome {
        Ok(_) if json => print_summaries(&workspace, Some(server), true).await,
        Ok(ready) => {
            outln!("server \"{server}\" is {}", ready.state);
            for tool in ready.tools.iter() {
                outln!("  {}", tool.name);
            }
            ExitCode::SUCCESS
        }
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

async fn authorize_by_browser(
    workspace: &Workspace,
    server: &str,
    json: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    let asked = workspace.enable(server).await?;
    authorized_interactively(workspace, asked, json).await
}

/// Prints an action's `202`: with `--json` the answer itself, on one line of stdout (what to
/// do goes to stderr); otherwise `lines`, the first of which says it is the 202.
fn print_accepted(accepted: &plurnk_mcp::Accepted, json: bool, todo: &str, lines: &[String]) {
    if json {
        match serde_json::to_string(accepted) {
            Ok(text) => outln!("{}", plurnk_mcp::text::escape_json_unshown(&text)),
            Err(error) => errln!("plurnk-mcp: {error}"),
        }
        errln!("plurnk-mcp: {todo}");
    } else {
        for line in lines {
            outln!("{line}");
        }
    }
}

/// An action's answer that waits for a person's authorization (the `202`): prints it, reads
/// the callback URL from standard input, and completes it (any other answer is returned as
/// is).
pub(super) async fn authorized_interactively(
    workspace: &Workspace,
    asked: plurnk_mcp::ServerSnapshot,
    json: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    let server = asked.alias.clone();
    let Some(accepted) = plurnk_mcp::Accepted::of(&asked) else {
        return Ok(asked);
    };
    print_accepted(
        &accepted,
        json,
        "open the authorization's url, approve, and paste the URL your browser was sent back \
         to on standard input",
        &[
            format!(
                "server \"{server}\" waits for authorization ({}): open this URL, approve, and \
                 paste the URL your browser was sent back to:",
                accepted.status()
            ),
            accepted.authorization().url.clone(),
        ],
    );
    let mut line = String::new();
    let read =
        tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line).map(|_| line))
            .await;
    let callback = match read {
        Ok(Ok(line)) if !line.trim().is_empty() => line.trim().to_owned(),
        _ => {
            return Err(plurnk_mcp::Problem::invalid_definition(
                "no callback URL was given on standard input: run `plurnk-mcp auth` again and \
                 paste the whole URL the authorization server redirected to",
            ));
        }
    };
    workspace.oauth_complete(&server, &callback).await
}

async fn authorize_by_device(
    workspace: &Workspace,
    server: &str,
    scope: Option<&str>,
    json: bool,
    progress: bool,
) -> Result<plurnk_mcp::ServerSnapshot, plurnk_mcp::Problem> {
    use plurnk_mcp::DevicePoll;
    let device = workspace.authorize_device(server, scope).await?;
    let (expires_in, interval, handle) =
        (device.expires_in, device.interval, device.device.clone());
    // The authorization server's words reach the terminal as the tables show text: with no
    // control character that could move the cursor or recolour the screen.
    let (code, uri) = (
        super::shown(&device.user_code),
        super::shown(&device.verification_uri),
    );
    let waits = format!(
        "server \"{server}\" waits for authorization ({})",
        plurnk_mcp::Accepted::STATUS
    );
    let open = match &device.verification_uri_complete {
        Some(complete) => vec![
            format!("{waits}: on any device, open {}", super::shown(complete)),
            format!("(or {uri} and enter the code {code})"),
        ],
        None => vec![format!(
            "{waits}: on any device, open {uri} and enter the code {code}"
        )],
    };
    print_accepted(
        &plurnk_mcp::Accepted::device(device),
        json,
        "on any device, open the authorization's url and enter its device.userCode; polling \
         until it is approved",
        &open,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(expires_in);
    // On a terminal, the code and the time left stay in view while the poll waits.
    let _countdown = progress.then(|| super::progress::Countdown::start(&code, &uri, deadline));
    let mut interval = Duration::from_secs(interval);
    while std::time::Instant::now() < deadline {
        tokio::time::sleep(interval).await;
        match workspace.poll_device(server, &handle).await? {
            DevicePoll::Pending => {}
            DevicePoll::SlowDown => interval += Duration::from_secs(5),
            DevicePoll::Authorized { server } => return Ok(*server),
            DevicePoll::Denied => {
                return Err(plurnk_mcp::Problem::forbidden(format!(
                    "the authorization of server \"{server}\" was refused on the device"
                )));
            }
            DevicePoll::Expired => break,
        }
    }
    Err(plurnk_mcp::Problem::oauth_not_pending(server))
}
