//! The HTTP gateway against a client that is not the one it expects: a foreign `Host` at the
//! checks, one address holding every connection, sessions that ended, answers left unread.

use std::io::Write;

use serde_json::json;

use crate::served::{
    Served, ask, connect, initialize_request, mcp_request, memory_kib, modern_request, raw_request,
    read_reply, served_fixture,
};
use crate::wait::{self, BOUND};

#[test]
fn the_checks_meet_the_host_rule_of_mcp() {
    let (served, authority) = served_fixture(&[], None);
    for path in ["/healthz", "/readyz"] {
        let (status, body) = raw_request(&authority, "GET", path, &[("Host", "evil.example")]);
        assert_eq!(status, 403, "{path}: {body}");
        let (status, body) = raw_request(&authority, "GET", path, &[]);
        assert_eq!(status, 200, "{path}: {body} {}", served.stderr());
    }
    let (_, body) = raw_request(&authority, "GET", "/readyz", &[("Host", "localhost")]);
    assert_eq!(body, "ready\n");
}

/// A request head whose body (`Content-Length` 4,096) has only its first bytes: a request in
/// flight for as long as the client likes.
fn trickled(authority: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n"
    )
    .into_bytes();
    request.extend_from_slice(b"{\"jsonrpc\": \"2.0\", ");
    request
}

#[test]
fn one_client_trickling_bodies_holds_its_own_connections_and_another_is_answered() {
    let (served, authority) = served_fixture(
        &[
            "--max-connections",
            "8",
            "--max-connections-per-client",
            "4",
            "--body-timeout-ms",
            "60000",
        ],
        None,
    );
    // 127.0.0.1 opens connections that each trickle a body, until the gateway refuses it: by
    // then every place of its own holds a request in flight (a connection whose head had not
    // arrived yet was idle, and closed to make room).
    let mut held = Vec::new();
    let refused = loop {
        assert!(
            held.len() < 64,
            "127.0.0.1 was never refused: {}",
            served.stderr()
        );
        let mut stream = connect(&authority, Some([127, 0, 0, 1]), false);
        stream.write_all(&trickled(&authority)).expect("send");
        stream
            .set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .expect("a read timeout");
        match read_reply(&mut stream) {
            Ok(reply) => break reply,
            // No answer: its request is in flight.
            Err(_) => held.push(stream),
        }
    };
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert!(
        refused.body.contains("--max-connections-per-client"),
        "{refused:?}"
    );
    // Another client is answered meanwhile.
    let list = modern_request(&authority, "tools/list", json!({}));
    let reply = ask(&authority, Some([127, 0, 0, 2]), &list);
    assert_eq!(reply.status, 200, "{reply:?}");
    // Exactly 4 of the first client's connections still hold their requests.
    let still = held
        .iter()
        .filter(|stream| {
            let _ = stream.set_nonblocking(true);
            let mut byte = [0u8; 1];
            let mut reader: &std::net::TcpStream = stream;
            let open = matches!(
                std::io::Read::read(&mut reader, &mut byte),
                Err(ref error) if error.kind() == std::io::ErrorKind::WouldBlock
            );
            let _ = stream.set_nonblocking(false);
            open
        })
        .count();
    assert_eq!(still, 4, "{} held", held.len());
    // One ends: the client has a place again.
    drop(held);
    assert!(
        wait::until_blocking(BOUND, || ask(&authority, Some([127, 0, 0, 1]), &list)
            .status
            == 200),
        "a freed place takes the client again: {}",
        served.stderr()
    );
}

/// The key the gateways of one test share.
const SESSION_KEY: &str = "hardening-tests-share-this-session-key-0123";

/// A fixture workspace served by `plurnk-mcp serve` under [`SESSION_KEY`], with `extra`
/// flags; its `host:port`, and its metrics' when `--metrics` is among them.
fn served_sessions(extra: &[&str]) -> (Served, String, Option<String>) {
    let mut env = crate::env::fixture("fx", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx"]).to_string()));
    env.push(("KEY".into(), SESSION_KEY.into()));
    let mut args = vec!["--transport", "http", "--session-key-env", "KEY"];
    args.extend_from_slice(extra);
    let served = Served::start(&args, &env, true);
    let authority_of = |suffix: &str| {
        wait::until_blocking(BOUND, || served.stderr().contains(suffix));
        served
            .stderr()
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("http://"))
            .find_map(|rest| rest.strip_suffix(suffix).map(str::to_owned))
    };
    let authority = authority_of("/mcp").expect("the gateway's URL");
    let metrics = extra
        .contains(&"--metrics")
        .then(|| authority_of("/metrics").expect("the metrics URL"));
    (served, authority, metrics)
}

/// A legacy request of `method` in session `id`.
fn in_session(authority: &str, id: &str, method: &str) -> Vec<u8> {
    let body = if method.starts_with("notifications/") {
        json!({"jsonrpc": "2.0", "method": method})
    } else {
        json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {}})
    };
    mcp_request(
        authority,
        &body,
        &[
            ("Mcp-Session-Id", id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    )
}

/// A new legacy session at `authority`, initialized; its id.
fn session(authority: &str) -> String {
    let reply = ask(authority, None, &initialize_request(authority));
    assert_eq!(reply.status, 200, "{reply:?}");
    let id = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let initialized = ask(
        authority,
        None,
        &in_session(authority, &id, "notifications/initialized"),
    );
    assert_eq!(initialized.status, 202, "{initialized:?}");
    id
}

/// The status `tools/list` in session `id` gets at `authority`.
fn listed_in(authority: &str, id: &str) -> u16 {
    ask(authority, None, &in_session(authority, id, "tools/list")).status
}

/// The value of a gauge in a scrape of `metrics`.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    let (_, body) = raw_request(metrics, "GET", "/metrics", &[]);
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
}

#[test]
fn a_session_that_ended_is_404_after_delete_idle_or_lifetime_and_in_another_workspace() {
    let (served, authority, metrics) =
        served_sessions(&["--session-idle-ms", "1000", "--metrics", "127.0.0.1:0"]);
    let metrics = metrics.expect("metrics");
    // Ended by its client: the id opens again nowhere (rmcp would restore it from the id).
    let deleted = session(&authority);
    assert_eq!(listed_in(&authority, &deleted), 200);
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: {deleted}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n"
    );
    assert_eq!(ask(&authority, None, delete.as_bytes()).status, 202);
    assert_eq!(listed_in(&authority, &deleted), 404, "served after DELETE");
    // Ended by idling past the bound: once the gateway holds no session, the id is 404.
    let idled = session(&authority);
    assert!(
        wait::until_blocking(BOUND, || {
            gauge(&metrics, "plurnk_mcp_gateway_sessions") == Some(0.0)
        }),
        "the session never idled out: {}",
        served.stderr()
    );
    assert_eq!(
        listed_in(&authority, &idled),
        404,
        "served after idle expiry"
    );
    // Another workspace under the same key: the id is not a session there.
    let live = session(&authority);
    let (_other, elsewhere, _) = served_sessions(&["--workspace", "other"]);
    assert_eq!(
        listed_in(&elsewhere, &live),
        404,
        "opened in another workspace"
    );
    // A live session's lifetime ends it, however busy it is.
    let (_short, brief, _) = served_sessions(&["--session-lifetime-ms", "3000"]);
    let busy = session(&brief);
    assert!(
        wait::until_blocking(BOUND, || listed_in(&brief, &busy) == 404),
        "served past its lifetime"
    );
}

#[test]
fn answers_left_unread_are_bounded_in_bytes_and_a_client_past_its_share_is_refused() {
    use std::io::BufRead;
    const READERS: usize = 24;
    const TEXT: usize = 1_000_000;
    let (served, authority) = served_fixture(
        &[
            "--max-bytes-in-flight",
            "16777216",
            "--max-bytes-in-flight-per-client",
            "8388608",
        ],
        None,
    );
    let pid = served.child.id();
    let idle = memory_kib(pid, "VmRSS");
    let echo = modern_request(
        &authority,
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"text": "x".repeat(TEXT)}}),
    );
    // Each reader sends a megabyte to echo and reads no more than the answer's status line:
    // its answer stays in the gateway until the write timeout cuts it off.
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..READERS {
        let mut stream = connect(&authority, None, true);
        stream.write_all(&echo).expect("send");
        let mut line = String::new();
        let mut reader = std::io::BufReader::with_capacity(64, &stream);
        reader.read_line(&mut line).expect("a status line");
        if line.contains(" 200 ") {
            admitted.push(stream);
        } else {
            refused.push(line);
        }
    }
    // A client's share is 8 MiB: a request (1 MB) and its answer held are about 2 MB each.
    assert!(
        !refused.is_empty() && refused.iter().all(|line| line.contains(" 429 ")),
        "{} admitted, refused: {refused:?}",
        admitted.len()
    );
    assert!(admitted.len() <= 8, "{} admitted", admitted.len());
    let reply = ask(&authority, Some([127, 0, 0, 2]), &echo);
    assert_eq!(reply.status, 200, "another client has a share of its own");
    let peak = memory_kib(pid, "VmHWM");
    eprintln!(
        "{READERS} unread answers of {TEXT} bytes: {} admitted, {} refused; {idle} KiB idle, \
         peak {peak} KiB",
        admitted.len(),
        refused.len()
    );
    // Unbounded, the 24 answers took the gateway 71 MiB over idle on this machine; bounded, 23.
    assert!(
        peak < idle + 48 * 1024,
        "{peak} KiB at the peak, {idle} KiB idle"
    );
    drop(admitted);
}
