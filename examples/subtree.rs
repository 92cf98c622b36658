//! The host as a subtree of a daemon's own actor tree.
//!
//! A small daemon root actor starts the host linked under itself, has the host's events
//! delivered to it as its own messages, disables and enables a server by message from its
//! own `handle`, sees a (simulated) workspace failure restarted by the host's supervisor,
//! and hears the host's root terminate when it shuts the host down.
//!
//! Run with `cargo run --example subtree`. It serves the fixture MCP server over Streamable
//! HTTP on 127.0.0.1 inside this process, so it needs nothing else; it exits 0 when every
//! step happened, 1 otherwise, and stops by itself within 60 s either way.

use std::collections::BTreeMap;
use std::time::Duration;

use plurnk_mcp::{
    CallOptions, Host, HostConfig, HostEvent, HostMsg, HostOptions, ServerState, Workspace,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::json;

/// The daemon's messages: its own, and the host's events mapped into them.
enum DaemonMsg {
    Host(HostEvent),
}

/// Where the daemon is in its little script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Waiting for the disable it asked for.
    Disabling,
    /// Waiting for the server to come back after the enable it asked for.
    Enabling,
    /// Waiting for the host supervisor to restart the failed workspace.
    Failing,
    /// Waiting for the restarted workspace's server to be ready again.
    Restarting,
    /// Waiting for the host's root to terminate.
    ShuttingDown,
    /// Every step happened.
    Done,
}

struct DaemonState {
    host: Host,
    workspace: Workspace,
    step: Step,
    /// Told how far the daemon got, once it ends.
    done: Option<tokio::sync::oneshot::Sender<Step>>,
    /// Held by the daemon so it ends with the example.
    _server: tokio::task::JoinHandle<()>,
}

struct Daemon;

impl Actor for Daemon {
    type Msg = DaemonMsg;
    type State = DaemonState;
    type Arguments = tokio::sync::oneshot::Sender<Step>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        done: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let stop = tokio_util::sync::CancellationToken::new();
            let _ = plurnk_mcp_fixture::serve_http(
                listener,
                plurnk_mcp_fixture::FixtureOptions::default(),
                stop,
            )
            .await;
        });
        let env = BTreeMap::from([
            ("PLURNK_MCP_FIXTURE".to_owned(), url),
            ("PLURNK_MCP_ENABLED".to_owned(), r#"["fixture"]"#.to_owned()),
        ]);
        // Linked: this actor's `handle_supervisor_evt` hears the host's root end or fail.
        let host = Host::start_with(
            HostConfig::from_env(env)?,
            HostOptions::default().with_parent(Some(myself.get_cell())),
        )
        .await?;
        host.events_to(myself.clone(), |event| Some(DaemonMsg::Host(event)));
        let workspace = host.default_workspace();
        println!(
            "daemon: host started under the daemon; fixture is {}",
            state_of(&workspace)
        );
        // Disable by message; the answer comes on the reply port.
        let disabled = ractor::call!(host.actor(), |reply| HostMsg::Disable {
            workspace: "default".into(),
            alias: "fixture".into(),
            reply,
        })??;
        println!("daemon: disable answered: fixture is {}", disabled.state);
        Ok(DaemonState {
            host,
            workspace,
            step: Step::Disabling,
            done: Some(done),
            _server: server,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        DaemonMsg::Host(event): Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (alias, to) = match &event {
            HostEvent::StateChanged { alias, to, .. } => (alias.as_str(), *to),
            HostEvent::WorkspaceRestarted {
                workspace,
                failures,
                problem,
            } if state.step == Step::Failing => {
                println!(
                    "daemon: workspace {workspace} restarted after {failures} failure(s): {}",
                    problem.detail
                );
                state.step = Step::Restarting;
                return Ok(());
            }
            _ => return Ok(()),
        };
        if alias != "fixture" {
            return Ok(());
        }
        match (state.step, to) {
            (Step::Disabling, ServerState::Disabled) => {
                println!("daemon: told the fixture is disabled; enabling it by message");
                state.step = Step::Enabling;
                // A daemon that must not wait in its `handle` sends the message with a
                // reply port and goes on; here the events say when it is done.
                let (reply, _answer) = ractor::concurrency::oneshot();
                state.host.actor().send_message(HostMsg::Enable {
                    workspace: "default".into(),
                    alias: "fixture".into(),
                    customize: Box::default(),
                    reply: reply.into(),
                })?;
            }
            (Step::Enabling, ServerState::Ready) => {
                println!("daemon: told the fixture is ready; making the workspace fail");
                state.step = Step::Failing;
                // Simulated: a workspace actor that panics, as a bug would make it.
                state.workspace.crash_for_test();
            }
            (Step::Restarting, ServerState::Ready) => {
                let echoed = state
                    .workspace
                    .call_tool(
                        "fixture",
                        "echo",
                        json!({"text": "after the restart"}),
                        CallOptions::default(),
                    )
                    .await?;
                println!(
                    "daemon: the handle taken before the failure calls again: echo -> {}",
                    echoed.text()
                );
                state.step = Step::ShuttingDown;
                let report = state.host.shutdown().await;
                println!(
                    "daemon: host shut down, {} close failure(s)",
                    report.failures.len()
                );
                // The root's termination arrives in `handle_supervisor_evt`.
            }
            _ => {}
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, _)
                if cell.get_id() == state.host.actor().get_id() =>
            {
                println!("daemon: the host's root terminated");
                if state.step == Step::ShuttingDown {
                    state.step = Step::Done;
                }
                finish(state);
                myself.stop(None);
            }
            SupervisionEvent::ActorFailed(cell, error)
                if cell.get_id() == state.host.actor().get_id() =>
            {
                println!("daemon: the host's root failed: {error}");
                finish(state);
                myself.stop(None);
            }
            _ => {}
        }
        Ok(())
    }
}

fn finish(state: &mut DaemonState) {
    if let Some(done) = state.done.take() {
        let _ = done.send(state.step);
    }
}

fn state_of(workspace: &Workspace) -> String {
    workspace
        .snapshot()
        .server("fixture")
        .map(|server| server.state.to_string())
        .unwrap_or_else(|| "missing".into())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The workspace failure below is a real panic inside the host; say it in one line.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("daemon: a host actor panicked: {info}")
    }));
    let (done, finished) = tokio::sync::oneshot::channel();
    let (daemon, task) = Actor::spawn(None, Daemon, done).await?;
    let step = tokio::time::timeout(Duration::from_secs(60), finished).await;
    daemon.stop(None);
    let _ = task.await;
    match step {
        Ok(Ok(Step::Done)) => {
            println!("daemon: every step happened");
            Ok(())
        }
        other => {
            eprintln!("daemon: stopped early: {other:?}");
            std::process::exit(1);
        }
    }
}
