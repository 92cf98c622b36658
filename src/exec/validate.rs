//! Checking an op against one snapshot before anything runs: [`validate`] (the server is
//! there, enabled and ready; the tool is one of its enabled tools; the arguments satisfy its
//! input schema) and [`effect`], the op's effect from the operator's `_READ` list alone. An
//! unknown tool is answered with the names closest to it.

use serde_json::{Map, Value};

use super::error::ExecError;
use super::op::Op;
use super::quote::{LISTED_TOOLS, capped};
use crate::model::{Effect, Refusal, ServerSnapshot, ServerState, WorkspaceSnapshot};
use crate::projection;

/// How many schema failures an error lists before it says how many more there are.
pub(super) const LISTED_FAILURES: usize = 8;

/// How many characters of one schema failure an error shows.
pub(super) const FAILURE_CHARS: usize = 200;

/// An op that passed [`validate`] against one snapshot: only `validate` makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    op: Op,
    effect: Effect,
    version: u64,
}

impl Validated {
    /// The op.
    pub fn op(&self) -> &Op {
        &self.op
    }

    /// Its effect, as [`effect`] classifies it.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    /// The version of the snapshot it was checked against.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The op, to run.
    pub fn into_op(self) -> Op {
        self.op
    }
}

/// Checks `op` against one snapshot before anything runs: the server exists, is enabled
/// and ready; for a call, the tool is one of its enabled tools and the arguments satisfy
/// the tool's input schema (JSON Schema, 2020-12 unless the schema's `$schema` names
/// another dialect; no remote `$ref` is ever fetched).
pub fn validate(op: &Op, snapshot: &WorkspaceSnapshot) -> Result<Validated, ExecError> {
    let alias = op.server();
    let server = snapshot
        .admit(alias, op.tool())
        .map_err(|refusal| refused(snapshot, alias, refusal))?;
    if let Op::Call {
        tool, arguments, ..
    } = op
        && let Some(info) = server.tool(tool)
    {
        check_arguments(alias, tool, &info.input_schema, arguments)?;
    }
    Ok(Validated {
        op: op.clone(),
        effect: effect(op, snapshot)?,
        version: snapshot.version,
    })
}

/// An op's words for a refusal of the route rule: an unknown server lists the enabled
/// ones, an unknown tool the names closest to it.
fn refused(snapshot: &WorkspaceSnapshot, alias: &str, refusal: Refusal<'_>) -> ExecError {
    match refusal {
        Refusal::UnknownServer => ExecError::UnknownServer {
            server: alias.to_owned(),
            enabled: snapshot
                .servers
                .values()
                .filter(|server| server.state != ServerState::Disabled)
                .map(|server| server.alias.clone())
                .collect(),
        },
        Refusal::Disabled { .. } => ExecError::Disabled {
            server: alias.to_owned(),
        },
        Refusal::NotReady { state, problem } => ExecError::NotReady {
            server: alias.to_owned(),
            state,
            kind: problem.map(|problem| problem.kind.clone()),
            cause: problem.map(crate::model::Problem::cause),
            detail: problem
                .map(|problem| problem.detail.clone())
                .unwrap_or_else(|| state.unready_detail()),
        },
        Refusal::UnknownTool { server, tool } => ExecError::UnknownTool {
            server: alias.to_owned(),
            tool: tool.to_owned(),
            hint: tool_hint(server, tool),
            family: projection::family_uri(alias),
        },
    }
}

/// The op's effect, synchronously: a catalog op is `read`; a call has its tool's effect
/// from the snapshot (`_READ` → [`Effect::Read`], every other tool [`Effect::Host`]). MCP
/// annotations are never consulted. A server or tool the snapshot does not hold is
/// [`ExecError::Unregistered`]: validate against the same snapshot first.
pub fn effect(op: &Op, snapshot: &WorkspaceSnapshot) -> Result<Effect, ExecError> {
    let unregistered = |tool: Option<&str>| ExecError::Unregistered {
        server: op.server().to_owned(),
        tool: tool.map(str::to_owned),
    };
    let server = snapshot
        .server(op.server())
        .ok_or_else(|| unregistered(None))?;
    match op {
        Op::Catalog { .. } => Ok(Effect::Read),
        Op::Call { tool, .. } => server
            .tool(tool)
            .map(|info| info.effect)
            .ok_or_else(|| unregistered(Some(tool))),
    }
}

/// The arguments against the tool's input schema; a schema that cannot be compiled is the
/// server's fault.
fn check_arguments(
    server: &str,
    tool: &str,
    schema: &Value,
    arguments: &Map<String, Value>,
) -> Result<(), ExecError> {
    // `offline`: a `$ref` outside the schema is never fetched (and the crate is built
    // without its HTTP and file resolvers besides).
    let validator = jsonschema::options()
        .offline()
        .build(schema)
        .map_err(|error| ExecError::BadSchema {
            server: server.to_owned(),
            tool: tool.to_owned(),
            detail: capped(&error.to_string(), FAILURE_CHARS),
        })?;
    let instance = Value::Object(arguments.clone());
    let mut failures = Vec::new();
    let mut more = 0;
    for error in validator.iter_errors(&instance) {
        if failures.len() == LISTED_FAILURES {
            more += 1;
            continue;
        }
        let path = error.instance_path().as_str();
        let path = if path.is_empty() {
            "(the arguments)"
        } else {
            path
        };
        failures.push(capped(&format!("{path}: {error}"), FAILURE_CHARS));
    }
    if failures.is_empty() {
        return Ok(());
    }
    Err(ExecError::BadArguments {
        server: server.to_owned(),
        tool: tool.to_owned(),
        failures,
        more,
        document: projection::tool_uri(server, tool),
    })
}

/// What an unknown-tool error suggests: the close names, else the server's tools.
pub(super) fn tool_hint(server: &ServerSnapshot, asked: &str) -> String {
    let names: Vec<&str> = server.tools.iter().map(|tool| tool.name.as_str()).collect();
    if names.is_empty() {
        return "it has no enabled tools".to_owned();
    }
    let close = close_matches(asked, &names);
    if !close.is_empty() {
        let quoted: Vec<String> = close.iter().map(|name| format!("\"{name}\"")).collect();
        let lead = if quoted.len() == 1 {
            "the closest is"
        } else {
            "the closest are"
        };
        return format!("{lead} {}", quoted.join(" or "));
    }
    let shown: Vec<&str> = names.iter().copied().take(LISTED_TOOLS).collect();
    match names.len() - shown.len() {
        0 => format!("its enabled tools are {}", shown.join(", ")),
        more => format!("its enabled tools are {} and {more} more", shown.join(", ")),
    }
}

/// Up to three names close to `asked`: the same but for case, one containing the other, or
/// a few edits apart.
fn close_matches<'n>(asked: &str, names: &[&'n str]) -> Vec<&'n str> {
    let asked = asked.to_lowercase();
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .filter_map(|name| {
            let lower = name.to_lowercase();
            if lower == asked {
                return Some((0, *name));
            }
            if asked.len() >= 3 && (lower.contains(&asked) || asked.contains(&lower)) {
                return Some((1, *name));
            }
            let limit = (asked.chars().count() / 3).clamp(1, 3);
            edits(&asked, &lower, limit).map(|distance| (1 + distance, *name))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

/// The edit distance between `a` and `b` (insertions, deletions, substitutions and swaps of
/// neighbours) when it is at most `limit`; names longer than a name should be are not
/// compared.
fn edits(a: &str, b: &str, limit: usize) -> Option<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() > 64 || b.len() > 64 || a.len().abs_diff(b.len()) > limit {
        return None;
    }
    // Three rows of the optimal-string-alignment table: two back, one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut current = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            let mut distance = (previous[j] + usize::from(a[i] != b[j]))
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                distance = distance.min(before[j - 1] + 1);
            }
            current[j + 1] = distance;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous
        .last()
        .copied()
        .filter(|distance| *distance <= limit)
}
