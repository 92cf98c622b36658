//! The host supervisor: the root of the tree. It owns the workspace actors and nothing else,
//! keeps a crashed workspace from taking the host down, and runs the shutdown order.

use std::collections::BTreeMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::messages::WorkspaceMsg;
use super::workspace::{WorkspaceActor, WorkspaceArgs};
use crate::model::CloseFailure;

/// The supervisor's messages.
pub(crate) enum SupervisorMsg {
    /// Start a workspace actor under the supervisor.
    Open {
        args: WorkspaceArgs,
        reply: RpcReplyPort<Result<ActorRef<WorkspaceMsg>, String>>,
    },
    /// Shut every workspace down and report every close failure.
    Shutdown {
        reply: RpcReplyPort<Vec<CloseFailure>>,
    },
}

/// The supervisor's state: its workspaces by name.
pub(crate) struct SupervisorState {
    workspaces: BTreeMap<String, ActorRef<WorkspaceMsg>>,
}

/// The actor.
pub(crate) struct HostSupervisor;

impl Actor for HostSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            workspaces: BTreeMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Open { args, reply } => {
                let name = args.name.clone();
                let spawned =
                    Actor::spawn_linked(None, WorkspaceActor, args, myself.get_cell()).await;
                let answer = match spawned {
                    Ok((actor, _)) => {
                        state.workspaces.insert(name, actor.clone());
                        Ok(actor)
                    }
                    Err(error) => Err(format!("workspace \"{name}\" could not start: {error}")),
                };
                let _ = reply.send(answer);
            }
            SupervisorMsg::Shutdown { reply } => {
                // Workspaces shut down concurrently; the reply waits for all in a task so the
                // supervisor's mailbox stays free.
                let workspaces: Vec<(String, ActorRef<WorkspaceMsg>)> = state
                    .workspaces
                    .iter()
                    .map(|(name, actor)| (name.clone(), actor.clone()))
                    .collect();
                tokio::spawn(async move {
                    let mut failures = Vec::new();
                    let calls = workspaces.into_iter().map(|(name, actor)| async move {
                        let result = actor
                            .call(|reply| WorkspaceMsg::Shutdown { reply }, None)
                            .await;
                        let failures = match result {
                            Ok(ractor::rpc::CallResult::Success(failures)) => failures,
                            _ => vec![CloseFailure {
                                workspace: name.clone(),
                                alias: String::new(),
                                detail: "the workspace stopped before it reported its shutdown"
                                    .into(),
                            }],
                        };
                        actor.stop(None);
                        failures
                    });
                    for batch in futures::future::join_all(calls).await {
                        failures.extend(batch);
                    }
                    let _ = reply.send(failures);
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never stop the host because a workspace ended; forget it (the next ask for it
        // starts it afresh from the store) and say so.
        if let SupervisionEvent::ActorFailed(_, error) = &event {
            tracing::error!(%error, "a workspace actor failed; its servers' connections were dropped with it");
        }
        if let SupervisionEvent::ActorFailed(cell, _)
        | SupervisionEvent::ActorTerminated(cell, _, _) = &event
        {
            state
                .workspaces
                .retain(|_, actor| actor.get_id() != cell.get_id());
        }
        Ok(())
    }
}
