//! The store against a fake PostgreSQL on 127.0.0.1:0 that speaks the wire protocol badly on
//! purpose: a message that claims 2 GiB, a request for the password in clear or as MD5, no
//! TLS where it is wanted. (The store against a real PostgreSQL is `tests/replicas.rs`.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::store::{PostgresStore, StoreError};

/// The password every URL of these tests carries: it must never reach the fake server.
const PASSWORD: &str = "fake-Server-Must-Not-Learn-1";

/// What the fake server did on its connections: every byte it read, and how many of the
/// bytes it meant to write it could.
#[derive(Default)]
struct Seen {
    read: Vec<u8>,
    written: usize,
}

/// How the fake answers a connection once it has read the client's startup message.
#[derive(Clone)]
struct Fake {
    /// The answer to an `SSLRequest`, if the client sends one.
    ssl: u8,
    /// What it writes after the startup message.
    reply: Vec<u8>,
    /// Bytes of junk it writes after the reply, a mebibyte at a time.
    junk: usize,
}

impl Fake {
    /// Listens on 127.0.0.1:0; its port and what it saw.
    async fn start(self) -> (u16, Arc<Mutex<Seen>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let kept = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (fake, seen) = (self.clone(), kept.clone());
                tokio::spawn(async move { fake.answer(&mut stream, &seen).await });
            }
        });
        (port, seen)
    }

    async fn answer(&self, stream: &mut tokio::net::TcpStream, seen: &Mutex<Seen>) {
        let record = |bytes: &[u8]| seen.lock().expect("seen").read.extend_from_slice(bytes);
        // A length-prefixed startup message; an SSLRequest (length 8, code 80877103) first
        // is answered with one byte.
        loop {
            let mut length = [0u8; 4];
            if stream.read_exact(&mut length).await.is_err() {
                return;
            }
            let length = u32::from_be_bytes(length) as usize;
            let mut body = vec![0u8; length.saturating_sub(4).min(1 << 16)];
            if stream.read_exact(&mut body).await.is_err() {
                return;
            }
            record(&body);
            if length == 8 && body == 80_877_103u32.to_be_bytes() {
                if stream.write_all(&[self.ssl]).await.is_err() {
                    return;
                }
                continue;
            }
            break;
        }
        if stream.write_all(&self.reply).await.is_err() {
            return;
        }
        let chunk = vec![b'x'; 1 << 20];
        let mut left = self.junk;
        while left > 0 {
            let take = left.min(chunk.len());
            if stream.write_all(&chunk[..take]).await.is_err() {
                break;
            }
            seen.lock().expect("seen").written += take;
            left -= take;
        }
        // Whatever the client sends next (a password, were it given one), until it closes.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut rest)).await;
        record(&rest);
    }
}

/// A backend message: its tag, then its length and body.
fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&u32::try_from(body.len() + 4).expect("short").to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The store's connect against the fake at `port`, bounded well past the store's own
/// deadlines (10 s); its refusal as the caller reads it.
async fn refused(url: &str) -> String {
    let connected = tokio::time::timeout(Duration::from_secs(30), PostgresStore::connect(url))
        .await
        .expect("the store's own deadline ends it");
    match connected {
        Ok(_) => panic!("{url}: connected to a fake"),
        Err(error @ StoreError::Unavailable { .. }) => error.to_string(),
        Err(other) => panic!("{url}: {other}"),
    }
}

fn url(port: u16, query: &str) -> String {
    format!("postgres://app:{PASSWORD}@127.0.0.1:{port}/mcp{query}")
}

#[tokio::test]
async fn a_message_claiming_2_gib_ends_the_connection_before_its_body_is_read() {
    const JUNK: usize = 64 << 20;
    // An error response that says it is 2 GiB long, then 64 MiB of it.
    let mut reply = vec![b'E'];
    reply.extend_from_slice(&i32::MAX.to_be_bytes());
    let (port, seen) = Fake {
        ssl: b'N',
        reply,
        junk: JUNK,
    }
    .start()
    .await;
    let said = refused(&url(port, "")).await;
    assert!(
        said.contains("a message ('E') of 2147483647 bytes, over the 8 MiB"),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "{said}");
    // The client closed the connection: the fake could not write all it meant to (the
    // kernel's buffers take a few MiB at most).
    let written = seen.lock().expect("seen").written;
    assert!(written < JUNK, "the client read {written} bytes of junk");
}

#[tokio::test]
async fn a_password_asked_for_in_clear_or_as_md5_without_tls_is_never_sent() {
    for (code, body, how) in [
        (3u32, vec![], "in clear"),
        (5u32, vec![1, 2, 3, 4], "as MD5"),
    ] {
        let mut request = code.to_be_bytes().to_vec();
        request.extend_from_slice(&body);
        let (port, seen) = Fake {
            ssl: b'N',
            reply: message(b'R', &request),
            junk: 0,
        }
        .start()
        .await;
        let said = refused(&url(port, "")).await;
        // What the fake was sent once the client closed: the startup message (the user) and
        // nothing of the password.
        let read = wait_for_close(&seen).await;
        let read = String::from_utf8_lossy(&read).into_owned();
        assert!(read.contains("app"), "{read:?}");
        assert!(!read.contains(PASSWORD), "{how}: the password was sent");
        assert!(
            !read.contains("md5"),
            "{how}: an MD5 of the password was sent"
        );
        assert!(
            said.contains(&format!("asked for the password {how}"))
                && said.contains("scram-sha-256")
                && said.contains("sslmode=require"),
            "{said}"
        );
    }
}

/// What the fake read once the client closed its connections (the store closes them when it
/// gives up); bounded by the fake's own 20 s read.
async fn wait_for_close(seen: &Arc<Mutex<Seen>>) -> Vec<u8> {
    let mut last = 0;
    // The store has given up before this is called; its sockets close as it drops them.
    for _ in 0..100 {
        let now = seen.lock().expect("seen").read.len();
        if now == last && now > 0 {
            break;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen.lock().expect("seen").read.clone()
}

#[tokio::test]
async fn a_server_without_tls_is_refused_where_tls_is_wanted_saying_what_to_do() {
    let clear_request = message(b'R', &3u32.to_be_bytes());
    let (port, _) = Fake {
        ssl: b'N',
        reply: clear_request.clone(),
        junk: 0,
    }
    .start()
    .await;
    // Asked for by the URL.
    let said = refused(&url(port, "?sslmode=require")).await;
    assert!(
        said.contains("does not offer TLS, which the URL's sslmode asks for"),
        "{said}"
    );
    // Without sslmode, for a host that is not loopback (reached here at a loopback address).
    let by_default = format!("postgres://app:{PASSWORD}@db.example:{port}/mcp?hostaddr=127.0.0.1");
    let said = refused(&by_default).await;
    assert!(
        said.contains("which the store uses by default for a host that is not loopback")
            && said.contains("?sslmode=disable"),
        "{said}"
    );
    // `prefer` goes on in clear, and then no password is asked for in clear either.
    let said = refused(&url(port, "?sslmode=prefer")).await;
    assert!(said.contains("asked for the password in clear"), "{said}");
}

#[test]
fn messages_pass_whole_however_they_are_cut_and_a_long_one_is_refused_at_its_header() {
    // What a server sends while a connection starts and answers a query: SCRAM, parameters,
    // a row, the end.
    let mut bytes = message(b'R', &[0, 0, 0, 10, b'S', b'C', b'R', b'A', b'M', 0, 0]);
    bytes.extend(message(b'S', b"client_encoding\0UTF8\0"));
    bytes.extend(message(b'K', &[0, 0, 0, 7, 0, 0, 0, 9]));
    bytes.extend(message(b'Z', b"I"));
    bytes.extend(message(b'D', &vec![7u8; 70_000]));
    bytes.extend(message(b'Z', b"I"));
    for cut in [1, 2, 3, 4, 5, 6, 7, 13, 64, 4096, 65_536, bytes.len()] {
        let mut guarded = Guarded::raw((), Start::Clear);
        for chunk in bytes.chunks(cut) {
            assert_eq!(guarded.check(chunk), Ok(()), "cut every {cut}");
        }
        assert!(
            matches!(guarded.state, State::Header { have: 0, .. }),
            "cut every {cut}: {:?}",
            guarded.state
        );
    }
    // A header past the bound is refused whichever byte its length ends in.
    let mut long = vec![b'D'];
    long.extend_from_slice(&(u32::try_from(MAX_MESSAGE_BYTES).expect("fits")).to_be_bytes());
    for cut in 1..=5 {
        let mut guarded = Guarded::raw((), Start::Clear);
        let refused = long
            .chunks(cut)
            .map(|chunk| guarded.check(chunk))
            .find(Result::is_err);
        assert!(
            matches!(refused, Some(Err((io::ErrorKind::InvalidData, _)))),
            "cut every {cut}"
        );
    }
    // One byte less is a message like any other.
    let mut fits = vec![b'D'];
    fits.extend_from_slice(&(u32::try_from(MAX_MESSAGE_BYTES - 1).expect("fits")).to_be_bytes());
    assert_eq!(Guarded::raw((), Start::Clear).check(&fits), Ok(()));
    // Inside TLS a password in clear is nobody else's: only a raw connection refuses it.
    let clear = message(b'R', &3u32.to_be_bytes());
    assert!(Guarded::raw((), Start::Clear).check(&clear).is_err());
    assert_eq!(Guarded::encrypted(()).check(&clear), Ok(()));
}
