//! The gateway's status page: `GET /status` (HTML a person reads, no script, no external
//! asset) and `GET /status.json` (the same facts for a program): the workspace's servers,
//! their states, revisions and tool counts, the last Problem each had, the calls and errors
//! the gateway relayed to each, and how long it has served.
//!
//! What the page shows is what the host already publishes scrubbed (snapshots and events)
//! plus counts: never a definition, a target, a header, an argument or a result. Every text
//! a server chose (its description, a Problem quoting it) is HTML-escaped, and the answer
//! forbids scripts outright (`Content-Security-Policy`), so an escaping slip still runs
//! nothing.
//!
//! The page sits behind the bearer like `/mcp`, and behind the same `Host` and `Origin`
//! rules: rmcp's service owns them, so [`Status::answer`] asks that very service about the
//! request's head (an `OPTIONS` it refuses, `405`, only after those checks pass) rather than
//! keep a second copy of the rule here.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::{
    body::Body,
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::model::{HostEvent, Problem, ServerState, WorkspaceSnapshot};

/// How much of a server's description the page shows.
const DESCRIPTION_CHARS: usize = 160;

/// How often the HTML page reloads itself (a `<meta>` refresh: no script needed).
const REFRESH_SECONDS: u32 = 5;

/// What a script-free page may load: its own inline style, nothing else.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Calls and errors the gateway relayed to one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    calls: u64,
    errors: u64,
}

/// A Problem a server had, and when the gateway heard of it.
#[derive(Debug, Clone)]
struct Seen {
    problem: Problem,
    at: Instant,
}

/// What the status page counts and remembers beside the snapshot. Bounded by the
/// workspace's servers: a tally or a Problem is kept only for an alias the snapshot holds.
#[derive(Debug)]
pub(super) struct StatusBook {
    started: Instant,
    tallies: Mutex<HashMap<Arc<str>, Tally>>,
    problems: Mutex<HashMap<Arc<str>, Seen>>,
}

impl StatusBook {
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            tallies: Mutex::new(HashMap::new()),
            problems: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one operation relayed to `alias`, failed or not (a tool's `isError` counts as
    /// an error). An alias the snapshot does not hold is not counted: a client's made-up
    /// names never grow the book.
    pub(super) fn count(&self, snapshot: &WorkspaceSnapshot, alias: &str, failed: bool) {
        let Some((key, _)) = snapshot.servers.get_key_value(alias) else {
            return;
        };
        let mut tallies = self
            .tallies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tally = tallies.entry(key.clone()).or_default();
        tally.calls += 1;
        tally.errors += u64::from(failed);
    }

    /// Remembers the Problem of a state change of `workspace`'s servers.
    fn heard(&self, workspace: &str, event: HostEvent, snapshot: &WorkspaceSnapshot) {
        let HostEvent::StateChanged {
            workspace: of,
            alias,
            problem: Some(problem),
            ..
        } = event
        else {
            return;
        };
        if of != workspace {
            return;
        }
        let Some((key, _)) = snapshot.servers.get_key_value(alias.as_str()) else {
            return;
        };
        let mut problems = self
            .problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        problems.insert(
            key.clone(),
            Seen {
                problem,
                at: Instant::now(),
            },
        );
    }

    /// The page's facts, from `snapshot` and what the book holds.
    fn report(&self, snapshot: &WorkspaceSnapshot) -> Report {
        let now = Instant::now();
        let tallies = self
            .tallies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let problems = self
            .problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let servers = snapshot
            .servers
            .iter()
            .map(|(alias, server)| {
                let tally = tallies.get(alias).copied().unwrap_or_default();
                // The Problem the server has now, else the last one it recovered from (at
                // start-up too, before the gateway was listening: the snapshot keeps it).
                let last_problem = match (&server.problem, &server.recovered) {
                    (Some(problem), _) => Some(LastProblem::of(
                        problem,
                        problems
                            .get(alias)
                            .filter(|seen| seen.problem == *problem)
                            .map_or(Duration::ZERO, |seen| now - seen.at),
                        true,
                    )),
                    (None, Some(recovered)) => Some(LastProblem::of(
                        &recovered.problem,
                        recovered.ago(std::time::SystemTime::now()),
                        false,
                    )),
                    (None, None) => None,
                };
                ServerStatus {
                    alias: alias.to_string(),
                    transport: server.transport.to_string(),
                    state: server.state,
                    revision: server.negotiated.as_ref().map(|n| n.revision.clone()),
                    tools: (server.state == ServerState::Ready).then_some(server.tools.len()),
                    description: server
                        .negotiated
                        .as_ref()
                        .and_then(|n| n.description.as_deref())
                        .map(cut),
                    calls: tally.calls,
                    errors: tally.errors,
                    last_problem,
                    sandbox: server.sandbox.clone(),
                }
            })
            .collect();
        Report {
            workspace: snapshot.workspace.clone(),
            version: snapshot.version,
            uptime_seconds: now.duration_since(self.started).as_secs(),
            servers,
        }
    }
}

/// `text` cut to [`DESCRIPTION_CHARS`].
fn cut(text: &str) -> String {
    match text.char_indices().nth(DESCRIPTION_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `/status.json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    workspace: String,
    /// The snapshot's version.
    version: u64,
    uptime_seconds: u64,
    servers: Vec<ServerStatus>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServerStatus {
    alias: String,
    transport: String,
    state: ServerState,
    revision: Option<String>,
    /// Enabled tools, while ready.
    tools: Option<usize>,
    /// What the server says it is (its own words, cut).
    description: Option<String>,
    calls: u64,
    errors: u64,
    last_problem: Option<LastProblem>,
    /// What its sandbox holds (a ready stdio server).
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<std::sync::Arc<crate::model::SandboxReport>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LastProblem {
    status: u16,
    kind: String,
    detail: String,
    /// Whether the server has it now (else it had it and recovered).
    current: bool,
    /// A current Problem: how long ago the gateway heard of it (0 when the server had it
    /// before the gateway started). One recovered from: how long ago the server recovered.
    seconds_ago: u64,
}

impl LastProblem {
    fn of(problem: &Problem, ago: Duration, current: bool) -> Self {
        Self {
            status: problem.status,
            kind: problem.kind.clone(),
            detail: problem.detail.clone(),
            current,
            seconds_ago: ago.as_secs(),
        }
    }
}

/// The status routes' state: the workspace, the book, and the service whose `Host` and
/// `Origin` rules they share.
#[derive(Clone)]
pub(super) struct Status {
    gateway: super::Gateway,
    guard: Arc<dyn Fn(Request) -> GuardFuture + Send + Sync>,
}

type GuardFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

impl Status {
    /// The routes' state; `guard` answers a request's head as `/mcp` would (see the module
    /// docs).
    pub(super) fn new(
        gateway: super::Gateway,
        guard: impl Fn(Request) -> GuardFuture + Send + Sync + 'static,
    ) -> Self {
        Self {
            gateway,
            guard: Arc::new(guard),
        }
    }

    /// Follows the host's events until `shutdown`, remembering each server's last Problem.
    pub(super) fn follow(&self, shutdown: CancellationToken) {
        let mut events = self.gateway.workspace().events();
        let gateway = self.gateway.clone();
        tokio::spawn(async move {
            let workspace = gateway.workspace().name().to_owned();
            loop {
                let event = tokio::select! {
                    event = events.recv() => event,
                    () = shutdown.cancelled() => return,
                };
                match event {
                    Ok(event) => {
                        let snapshot = gateway.workspace().snapshot();
                        gateway.inner.status.heard(&workspace, event, &snapshot);
                    }
                    // Missed events cost only the Problems they carried; the current ones
                    // are in the snapshot.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// The refusal `/mcp` would give a request of this head for its `Host` or `Origin`, if
    /// any: rmcp checks them before anything else and answers a method it does not serve
    /// `405`; any other answer is its refusal, passed on as it is.
    pub(super) async fn refusal(
        &self,
        uri: &axum::http::Uri,
        headers: &axum::http::HeaderMap,
    ) -> Option<Response> {
        let mut probe = Request::new(Body::empty());
        *probe.method_mut() = Method::OPTIONS;
        *probe.uri_mut() = uri.clone();
        *probe.headers_mut() = headers.clone();
        let verdict = (self.guard)(probe).await;
        (verdict.status() != StatusCode::METHOD_NOT_ALLOWED).then_some(verdict)
    }

    /// Answers `GET /status` or `GET /status.json` (`json`), once the request passes the
    /// `Host` and `Origin` rules of `/mcp`.
    pub(super) async fn answer(&self, request: Request, json: bool) -> Response {
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            let mut refused = (
                StatusCode::METHOD_NOT_ALLOWED,
                "use GET for the status page\n",
            )
                .into_response();
            refused
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return refused;
        }
        let (parts, _) = request.into_parts();
        if let Some(refused) = self.refusal(&parts.uri, &parts.headers).await {
            return refused;
        }
        let report = self
            .gateway
            .inner
            .status
            .report(&self.gateway.workspace().snapshot());
        let (kind, body) = if json {
            match serde_json::to_string_pretty(&report) {
                Ok(text) => ("application/json", text),
                Err(error) => {
                    return (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the status could not be written: {error}\n"),
                    )
                        .into_response();
                }
            }
        } else {
            ("text/html; charset=utf-8", page(&report))
        };
        let mut response = if parts.method == Method::HEAD {
            Response::new(Body::empty())
        } else {
            Response::new(Body::from(body))
        };
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        response
    }
}

/// `text` as HTML text or attribute content: nothing in it can open a tag, an entity or
/// leave a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A control character has no business on a page (and a NUL none in HTML), nor
            // has a bidirectional override, which would make a row read otherwise.
            c if crate::text::is_unshown(c) && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A duration as a person reads it: `42 s`, `3 min 5 s`, `2 h 7 min`, `3 d 4 h`.
fn ago(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

/// The HTML page of `report`.
fn page(report: &Report) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for server in &report.servers {
        *counts.entry(server.state.as_str()).or_default() += 1;
    }
    let counts = counts
        .iter()
        .map(|(state, count)| format!("{count} {state}"))
        .collect::<Vec<_>>()
        .join(", ");
    let workspace = escape(&report.workspace);
    let mut html = String::with_capacity(4096 + report.servers.len() * 512);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>plurnk-mcp: {workspace}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>plurnk-mcp gateway: workspace “{workspace}”</h1>\n\
         <p class=\"summary\">up {uptime} · snapshot {version} · {total} servers{sep}{counts}</p>\n",
        uptime = ago(report.uptime_seconds),
        version = report.version,
        total = report.servers.len(),
        sep = if counts.is_empty() { "" } else { ": " },
    );
    html.push_str(
        "<table>\n<thead><tr><th>server</th><th>transport</th><th>state</th><th>revision</th>\
         <th>tools</th><th>calls</th><th>errors</th><th>sandbox</th><th>description</th>\
         <th>last problem</th></tr></thead>\n<tbody>\n",
    );
    for server in &report.servers {
        let state = server.state.as_str();
        let problem = match &server.last_problem {
            None => String::new(),
            Some(last) => format!(
                "<span class=\"kind\">{} {}</span>{} {}",
                last.status,
                escape(&last.kind),
                if last.current {
                    String::new()
                } else {
                    format!(
                        " <span class=\"ago\">({} ago, recovered)</span>",
                        ago(last.seconds_ago)
                    )
                },
                escape(&last.detail),
            ),
        };
        let _ = writeln!(
            html,
            "<tr id=\"server-{alias}\"><td class=\"alias\">{alias}</td><td>{transport}</td>\
             <td class=\"state {state}\">{state}</td><td>{revision}</td><td class=\"n\">{tools}</td>\
             <td class=\"n\">{calls}</td><td class=\"n\">{errors}</td>\
             <td class=\"sandbox\">{sandbox}</td>\
             <td class=\"description\">{description}</td><td class=\"problem\">{problem}</td></tr>",
            alias = escape(&server.alias),
            transport = escape(&server.transport),
            revision = escape(server.revision.as_deref().unwrap_or("-")),
            tools = server.tools.map_or("-".to_owned(), |n| n.to_string()),
            calls = server.calls,
            errors = server.errors,
            sandbox = escape(
                &server
                    .sandbox
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |sandbox| sandbox.line())
            ),
            description = escape(server.description.as_deref().unwrap_or("")),
        );
    }
    html.push_str(
        "</tbody>\n</table>\n<p class=\"foot\">Calls and errors count what this gateway relayed \
         since it started; <a href=\"status.json\">status.json</a> has the same facts.</p>\n\
         </body>\n</html>\n",
    );
    html
}

/// The page's style: inline, since the page loads nothing else.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.3em;margin:0 0 .3em}.summary,.foot{color:#555}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}\
th{background:#f3f3f3}.n{text-align:right;font-variant-numeric:tabular-nums}.alias{font-weight:600}\
.state{font-weight:600}.ready{color:#176f2c}.connecting{color:#8a6d00}.unavailable,.crash-loop{color:#b00020}\
.authorization-required{color:#8a4b00}.disabled{color:#777}.description{max-width:28em;overflow-wrap:anywhere}\
.problem{max-width:36em;overflow-wrap:anywhere}.kind{font-family:monospace;margin-right:.4em}.ago{color:#777}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_a_server_writes_can_open_a_tag_or_leave_an_attribute() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape("bell\u{7}nul\u{0}"), "bell\u{fffd}nul\u{fffd}");
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(ago(42), "42 s");
        assert_eq!(ago(185), "3 min 5 s");
        assert_eq!(ago(7620), "2 h 7 min");
        assert_eq!(ago(3 * 86_400 + 4 * 3600), "3 d 4 h");
    }
}
