//! The HTTP gateway against a client that is not the one it expects: a foreign `Host` at the
//! checks, one address holding every connection.

use std::io::Write;

use serde_json::json;

use crate::served::{ask, connect, modern_request, raw_request, read_reply, served_fixture};
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
