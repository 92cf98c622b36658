//! What a client may make the HTTP gateway hold: connections, bodies, sessions, listen
//! streams, answers it never reads.

#[allow(unused_imports)]
use super::*;

// === What a client may make the HTTP gateway hold ===

#[test]
fn half_open_connections_under_a_1024_file_limit_never_lock_a_client_out() {
    use std::io::Write;
    let ours = raise_nofile();
    assert!(
        ours >= 1_500,
        "this test opens 1,100 connections: raise the hard open-file limit (ulimit -Hn) to \
         1500 or more (it is {ours})"
    );
    // At the default cap, and with a cap the file limit cannot hold (accept then fails with
    // EMFILE): either way the connection idle longest makes room.
    for extra in [&[][..], &["--max-connections", "5000"][..]] {
        let (served, authority) = served_fixture(extra, Some(1024));
        let mut idle = Vec::new();
        for n in 0..1_100 {
            let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
            if n % 2 == 0 {
                // A head that never ends.
                let _ = stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: ");
            }
            idle.push(stream);
        }
        let started = Instant::now();
        let mut stream = connect(&authority, None, false);
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("a read timeout");
        stream
            .write_all(&modern_request(&authority, "tools/list", json!({})))
            .expect("send");
        let reply = read_reply(&mut stream);
        let label = format!("serve {extra:?} with 1,100 idle connections");
        let reply = reply.unwrap_or_else(|error| {
            panic!(
                "{label}: no answer within a second ({error}): {}",
                served.stderr()
            )
        });
        assert_eq!(reply.status, 200, "{label}: {reply:?}");
        assert!(
            listed(&reply).contains(&"fx_echo".to_owned()),
            "{label}: {reply:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1), "{label}");
        drop(idle);
    }
}

#[test]
fn past_the_connection_cap_a_client_is_refused_with_503_only_while_every_connection_is_busy() {
    use std::io::Write;
    let (served, authority) = served_fixture(&["--max-connections", "3"], None);
    // Three listen streams: three connections each with a request in flight.
    let listen = modern_request(
        &authority,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut streams: Vec<std::net::TcpStream> = (0..3)
        .map(|_| {
            let mut stream = connect(&authority, None, false);
            stream.write_all(&listen).expect("send");
            stream
        })
        .collect();
    for stream in &mut streams {
        // The acknowledgement arrives as the stream's first event.
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(&seen).contains("acknowledged") {
            use std::io::Read;
            assert_eq!(stream.read(&mut byte).expect("the stream"), 1);
            seen.push(byte[0]);
        }
    }
    let list = modern_request(&authority, "tools/list", json!({}));
    let refused = ask(&authority, None, &list);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert!(refused.body.contains("--max-connections"), "{refused:?}");
    // One stream ends: its place is free again.
    drop(streams.pop());
    assert!(
        wait::until_blocking(BOUND, || ask(&authority, None, &list).status == 200),
        "a freed place takes a client again: {}",
        served.stderr()
    );
}

#[test]
fn a_request_head_or_body_that_trickles_is_cut_off_and_a_foreign_host_refused() {
    use std::io::{Read, Write};
    let (served, authority) = served_fixture(
        &[
            "--header-timeout-ms",
            "500",
            "--body-timeout-ms",
            "1000",
            "--max-body-bytes",
            "4096",
        ],
        None,
    );
    // A head that never ends: the connection is closed.
    let mut stream = connect(&authority, None, false);
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: ")
        .expect("send");
    let mut rest = Vec::new();
    let ended = stream.read_to_end(&mut rest);
    assert!(
        ended.is_ok()
            || ended
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the connection is closed, not left open: {ended:?}"
    );

    // A body trickled a byte at a time: 408 once the body timeout passes.
    let body = modern_request(&authority, "tools/list", json!({}));
    let split = body
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let mut stream = connect(&authority, None, false);
    stream.write_all(&body[..split]).expect("the head");
    let writer = stream.try_clone().expect("a writer");
    let trickle = std::thread::spawn(move || {
        let mut writer = writer;
        for byte in &body[split..] {
            if writer.write_all(&[*byte]).is_err() {
                return;
            }
            // The pause is the scenario: a byte every 100 ms, so the body outlasts its 1 s timeout.
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let reply = read_reply(&mut stream).expect("an answer");
    assert_eq!(reply.status, 408, "{reply:?}");
    assert!(reply.body.contains("--body-timeout-ms"), "{reply:?}");
    drop(stream);
    let _ = trickle.join();

    // A body over the bound: 413, declared or chunked.
    let big = json!({"text": "x".repeat(5000)});
    let reply = ask(
        &authority,
        None,
        &modern_request(
            &authority,
            "tools/call",
            json!({"name": "fx_echo", "arguments": big}),
        ),
    );
    assert_eq!(reply.status, 413, "{reply:?}");
    assert!(reply.body.contains("--max-body-bytes"), "{reply:?}");
    let payload = "x".repeat(5000);
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{payload}\r\n0\r\n\r\n",
        payload.len()
    );
    let reply = ask(&authority, None, chunked.as_bytes());
    assert_eq!(reply.status, 413, "{reply:?}");
    assert!(reply.body.contains("--max-body-bytes"), "{reply:?}");
    // A body declared too long is refused at once, before a byte of it is sent.
    let declared = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 5000\r\n\r\n"
    );
    let reply = ask(&authority, None, declared.as_bytes());
    assert_eq!(reply.status, 413, "{reply:?}");

    // DNS rebinding: a loopback socket, a foreign Host.
    let reply = ask(
        &authority,
        None,
        &modern_request("evil.example.com", "tools/list", json!({})),
    );
    assert_eq!(reply.status, 403, "{reply:?}");
    let reply = ask(
        &authority,
        None,
        &modern_request(
            &format!(
                "evil.example.com:{}",
                authority.rsplit(':').next().unwrap_or_default()
            ),
            "tools/list",
            json!({}),
        ),
    );
    assert_eq!(reply.status, 403, "{reply:?}");
    // The gateway still answers.
    let reply = ask(
        &authority,
        None,
        &modern_request(&authority, "tools/list", json!({})),
    );
    assert_eq!(reply.status, 200, "{reply:?}: {}", served.stderr());
}

/// Opens a listen stream from `source`: the connection once the stream is acknowledged, or
/// the refusal.
fn open_listen(authority: &str, source: Option<[u8; 4]>) -> Result<std::net::TcpStream, Reply> {
    let request = modern_request(
        authority,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    open_stream(authority, source, &request, "acknowledged")
}

/// Opens a legacy session's `GET` stream from `source`.
fn open_get(
    authority: &str,
    source: Option<[u8; 4]>,
    session: &str,
) -> Result<std::net::TcpStream, Reply> {
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    open_stream(authority, source, request.as_bytes(), "retry:")
}

/// Sends `request` and, when it is answered 200, reads until `ready` shows; the refusal
/// otherwise.
fn open_stream(
    authority: &str,
    source: Option<[u8; 4]>,
    request: &[u8],
    ready: &str,
) -> Result<std::net::TcpStream, Reply> {
    use std::io::{Read, Write};
    let mut stream = connect(authority, source, false);
    stream.write_all(request).expect("send");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).expect("an answer"), 1, "{seen:?}");
        seen.push(byte[0]);
    }
    if !seen.starts_with(b"HTTP/1.1 200") {
        // The refusal again, whole: the same request on a fresh connection.
        return Err(ask(authority, source, request));
    }
    while !String::from_utf8_lossy(&seen).contains(ready) {
        assert_eq!(stream.read(&mut byte).expect("the stream"), 1);
        seen.push(byte[0]);
    }
    Ok(stream)
}

const ONE: Option<[u8; 4]> = Some([127, 0, 0, 1]);
const TWO: Option<[u8; 4]> = Some([127, 0, 0, 2]);

#[test]
fn sessions_and_listen_streams_are_bounded_per_client_and_in_total() {
    let (served, authority) = served_fixture(
        &[
            "--max-sessions",
            "3",
            "--max-sessions-per-client",
            "2",
            "--max-listen-streams",
            "3",
            "--max-listen-streams-per-client",
            "2",
        ],
        None,
    );
    let initialize = initialize_request(&authority);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = ask(&authority, ONE, &initialize);
        assert_eq!(reply.status, 200, "{reply:?}");
        ids.push(
            reply
                .header("mcp-session-id")
                .expect("a session")
                .to_owned(),
        );
    }
    let refused = ask(&authority, ONE, &initialize);
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("5"), "{refused:?}");
    assert!(
        refused
            .body
            .contains("client 127.0.0.1 has its 2 sessions open")
            && refused.body.contains("--max-sessions-per-client"),
        "{refused:?}"
    );
    // Another client has places of its own, up to the total.
    assert_eq!(ask(&authority, TWO, &initialize).status, 200);
    let refused = ask(&authority, TWO, &initialize);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.body.contains("--max-sessions)"), "{refused:?}");
    // A session ended gives its place back.
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: {}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n",
        ids[0]
    );
    assert_eq!(ask(&authority, ONE, delete.as_bytes()).status, 202);
    assert_eq!(ask(&authority, ONE, &initialize).status, 200);

    // A subscriptions/listen stream and a legacy session's GET stream are both listen streams.
    let mut ones = vec![
        open_get(&authority, ONE, &ids[1]).expect("a GET stream"),
        open_listen(&authority, ONE).expect("a stream"),
    ];
    let refused = open_listen(&authority, ONE).expect_err("over the client's bound");
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        refused.body.contains("--max-listen-streams-per-client"),
        "{refused:?}"
    );
    let _two = open_listen(&authority, TWO).expect("another client's stream");
    let refused = open_listen(&authority, TWO).expect_err("over the total");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(
        refused.body.contains("--max-listen-streams)"),
        "{refused:?}"
    );
    // A stream that ends gives its place back.
    drop(ones.pop());
    assert!(
        wait::until_blocking(BOUND, || open_listen(&authority, ONE).map(drop).is_ok()),
        "a freed place takes a stream again: {}",
        served.stderr()
    );
}

#[test]
fn twenty_thousand_legacy_initializes_leave_the_gateway_small_and_expired_sessions_give_memory_back()
 {
    use std::io::Write;
    let (served, authority) = served_fixture(&["--session-idle-ms", "4000"], None);
    let pid = served.child.id();
    assert_eq!(
        ask(
            &authority,
            None,
            &modern_request(&authority, "tools/list", json!({}))
        )
        .status,
        200
    );
    let idle = memory_kib(pid, "VmRSS");
    let started = Instant::now();
    let statuses: Vec<BTreeMap<u16, usize>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let authority = authority.as_str();
                scope.spawn(move || {
                    let request = initialize_request(authority);
                    let mut stream = connect(authority, None, false);
                    let mut statuses = BTreeMap::new();
                    for _ in 0..5_000 {
                        stream.write_all(&request).expect("send");
                        let reply = read_reply(&mut stream).expect("an answer");
                        *statuses.entry(reply.status).or_default() += 1;
                    }
                    statuses
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a worker"))
            .collect()
    });
    let mut total = BTreeMap::new();
    for counts in statuses {
        for (status, count) in counts {
            *total.entry(status).or_insert(0usize) += count;
        }
    }
    let peak = memory_kib(pid, "VmHWM");
    eprintln!(
        "20,000 initializes in {:?}: {total:?}; resident {idle} KiB idle, peak {peak} KiB",
        started.elapsed()
    );
    assert_eq!(total.values().sum::<usize>(), 20_000);
    assert!(
        total.keys().all(|status| [200, 429].contains(status)),
        "{total:?}"
    );
    assert!(
        total.get(&429).is_some_and(|refused| *refused > 10_000),
        "{total:?}"
    );
    // One client holds at most 256 sessions of about 60 KiB each.
    assert!(
        peak < idle + 64 * 1024,
        "{peak} KiB at the peak, {idle} KiB idle: {}",
        served.stderr()
    );
    // Once the sessions expire the client is admitted again and the memory is given back.
    assert!(wait::until_blocking(BOUND, || {
        ask(&authority, None, &initialize_request(&authority)).status == 200
    }));
    assert!(
        wait::until_blocking(BOUND, || memory_kib(pid, "VmRSS") < idle + 16 * 1024),
        "{} KiB resident after the sessions expired, {idle} KiB idle",
        memory_kib(pid, "VmRSS")
    );
}

#[test]
fn a_client_that_never_reads_its_answer_is_cut_off_with_memory_bounded() {
    use std::io::{Read, Write};
    let (served, authority) = served_fixture(&["--write-timeout-ms", "1000"], None);
    let pid = served.child.id();
    let sockets = sockets_of(pid);
    let idle = memory_kib(pid, "VmRSS");
    const READERS: usize = 8;
    const ANSWER: usize = 1_000_000;
    let echo = modern_request(
        &authority,
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"text": "x".repeat(ANSWER)}}),
    );
    // Large requests with small answers (a tool nobody serves): what their parsing took is
    // given back when their connections end.
    let unknown = modern_request(
        &authority,
        "tools/call",
        json!({"name": "fx_nothing", "arguments": {"text": "x".repeat(3 * ANSWER)}}),
    );
    std::thread::scope(|scope| {
        for _ in 0..16 {
            scope.spawn(|| {
                let reply = ask(&authority, None, &unknown);
                assert!(reply.body.contains("fx_nothing"), "{reply:?}");
            });
        }
    });
    assert!(
        wait::until_blocking(BOUND, || memory_kib(pid, "VmRSS") < idle + 16 * 1024),
        "{} KiB resident after 16 large requests, {idle} KiB idle",
        memory_kib(pid, "VmRSS")
    );
    // Clients that read their large answers (each way under a mebibyte, together over):
    // what the answers took is given back.
    let halves = modern_request(
        &authority,
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"text": "x".repeat(ANSWER * 6 / 10)}}),
    );
    std::thread::scope(|scope| {
        for _ in 0..16 {
            scope.spawn(|| {
                let reply = ask(&authority, None, &halves);
                assert_eq!(reply.status, 200, "{}", reply.status);
                assert!(reply.body.len() > ANSWER * 6 / 10, "the whole answer");
            });
        }
    });
    assert!(
        wait::until_blocking(BOUND, || memory_kib(pid, "VmRSS") < idle + 16 * 1024),
        "{} KiB resident after 16 large answers were read, {idle} KiB idle",
        memory_kib(pid, "VmRSS")
    );
    let mut readers: Vec<_> = (0..READERS)
        .map(|_| {
            let mut stream = connect(&authority, None, true);
            stream.write_all(&echo).expect("send");
            stream
        })
        .collect();
    assert!(
        wait::until_blocking(BOUND, || sockets_of(pid) >= sockets + READERS),
        "every reader is connected"
    );
    // Meanwhile the gateway answers others.
    let reply = ask(
        &authority,
        None,
        &modern_request(&authority, "tools/list", json!({})),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    // Each connection is closed once its answer has gone unread for the write timeout.
    assert!(
        wait::until_blocking(BOUND, || sockets_of(pid) <= sockets),
        "{} sockets open, {sockets} before the readers: {}",
        sockets_of(pid),
        served.stderr()
    );
    let peak = memory_kib(pid, "VmHWM");
    eprintln!("{READERS} unread answers of {ANSWER} bytes: {idle} KiB idle, peak {peak} KiB");
    assert!(
        peak < idle + 256 * 1024,
        "{peak} KiB at the peak, {idle} KiB idle"
    );
    // What the answers took is given back once they are gone.
    assert!(
        wait::until_blocking(BOUND, || memory_kib(pid, "VmRSS") < idle + 16 * 1024),
        "{} KiB resident after the readers were cut off, {idle} KiB idle",
        memory_kib(pid, "VmRSS")
    );
    for reader in &mut readers {
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        assert!(
            got.len() < ANSWER,
            "a reader was cut off before its whole answer"
        );
    }
}

#[test]
fn every_accepted_socket_has_tcp_nodelay() {
    use std::io::Write;
    let (served, authority) = served_fixture(&[], None);
    let pid = served.child.id();
    let mut stream = connect(&authority, None, false);
    stream
        .write_all(&modern_request(&authority, "tools/list", json!({})))
        .expect("send");
    assert_eq!(read_reply(&mut stream).expect("an answer").status, 200);
    // The gateway's end of this connection: the socket whose peer is our local port.
    let ours = stream.local_addr().expect("local address").port();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).expect("the tcp table");
    let inode = table
        .lines()
        .skip(1)
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote = u16::from_str_radix(fields.get(2)?.rsplit(':').next()?, 16).ok()?;
            (remote == ours).then(|| fields.get(9).map(|inode| (*inode).to_owned()))?
        })
        .expect("the gateway's socket of this connection");
    let fd: i32 = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the gateway's files")
        .filter_map(Result::ok)
        .find(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy() == format!("socket:[{inode}]"))
        })
        .and_then(|entry| entry.file_name().to_string_lossy().parse().ok())
        .expect("the descriptor of that socket");
    // SAFETY: pidfd_open/pidfd_getfd(2) duplicate our own child's descriptor into this
    // process; getsockopt(2) reads an int into a local.
    let nodelay = unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) as libc::c_int;
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as libc::c_int;
        assert!(
            copy >= 0,
            "pidfd_getfd: {}",
            std::io::Error::last_os_error()
        );
        let mut value: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let read = libc::getsockopt(
            copy,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut value as *mut libc::c_int).cast(),
            &mut length,
        );
        libc::close(copy);
        libc::close(pidfd);
        assert_eq!(read, 0, "getsockopt: {}", std::io::Error::last_os_error());
        value
    };
    assert_eq!(nodelay, 1, "the gateway's socket has TCP_NODELAY");
}
