//! Negotiation on one transport, under paused time: the project's fixture served in this
//! process behind a pipe that holds its answers, and a hand-written peer that says other
//! things first. rmcp's `Auto` lifecycle gave up on discover after a fixed 10 s and sent
//! `initialize` on the same transport, where the late answer then failed the negotiation.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::*;
use crate::model::ConnectPhase;

/// Past rmcp's old discover window (10 s).
const LATE: Duration = Duration::from_secs(11);

fn options() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(60),
        close_grace: Duration::from_millis(500),
        #[cfg(feature = "http")]
        http_client: Arc::default(),
        interaction: None,
        elicitation: true,
        limits: Limits::default(),
        reaper: super::super::Reaper::new(),
        inherited: Arc::default(),
        sources: None,
        oauth: Arc::default(),
        sandbox: Arc::new(crate::sandbox::Sandboxing::new(
            Some(&crate::config::SandboxPolicy {
                mode: Some(crate::config::SandboxMode::Off),
                ..Default::default()
            }),
            &crate::sandbox::SandboxOptions::default(),
        )),
    }
}

/// What a peer behind a connector saw: how many connections were opened to it and the
/// methods the host sent it, in order.
#[derive(Default)]
struct Seen {
    opened: AtomicUsize,
    methods: Mutex<Vec<String>>,
}

impl Seen {
    fn methods(&self) -> Vec<String> {
        self.methods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The methods once `count` have passed the relay (a notification sent last may still be
    /// on its way when the connection is made), or as they are after a generous while.
    async fn methods_once(&self, count: usize) -> Vec<String> {
        for _ in 0..500 {
            if self.methods().len() >= count {
                break;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.methods()
    }
}

/// The fixture (`legacy` or not) behind a pipe that holds its first answer for `delay` and
/// records what the host sends it.
fn held_fixture(legacy: bool, delay: Duration, seen: Arc<Seen>) -> InProcessConnector {
    Arc::new(move || {
        seen.opened.fetch_add(1, Ordering::SeqCst);
        let (host_end, relay) = tokio::io::duplex(64 * 1024);
        let (to_fixture, fixture_end) = tokio::io::duplex(64 * 1024);
        let (fixture_read, fixture_write) = tokio::io::split(fixture_end);
        tokio::spawn(plurnk_mcp_fixture::serve_io(
            fixture_read,
            fixture_write,
            plurnk_mcp_fixture::FixtureOptions {
                legacy,
                ..Default::default()
            },
        ));
        let (relay_read, mut relay_write) = tokio::io::split(relay);
        let (from_fixture, mut into_fixture) = tokio::io::split(to_fixture);
        let recorder = seen.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(relay_read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(method) = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|message| Some(message.get("method")?.as_str()?.to_owned()))
                {
                    recorder
                        .methods
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(method);
                }
                let sent = into_fixture.write_all(format!("{line}\n").as_bytes()).await;
                if sent.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            let mut lines = BufReader::new(from_fixture).lines();
            let mut first = true;
            while let Ok(Some(line)) = lines.next_line().await {
                if std::mem::take(&mut first) {
                    tokio::time::sleep(delay).await;
                }
                if relay_write
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        host_end
    })
}

async fn connected(connector: InProcessConnector, phases: &Phases) -> Connection {
    let target = Target::InProcess(connector);
    // A guard only a hung negotiation reaches (time is paused: it passes at once then).
    tokio::time::timeout(
        Duration::from_secs(600),
        connect("slow", &target, &options(), None, phases),
    )
    .await
    .expect("negotiation ends")
    .unwrap_or_else(|error| panic!("connects: {error}"))
}

#[tokio::test(start_paused = true)]
async fn a_discover_answered_after_the_old_window_negotiates_2026_07_28_on_the_same_connection() {
    let seen = Arc::new(Seen::default());
    let phases = Phases::new(None);
    let started = tokio::time::Instant::now();
    let connection = connected(held_fixture(false, LATE, seen.clone()), &phases).await;
    assert!(started.elapsed() >= LATE, "the answer was held");
    assert_eq!(connection.negotiated().revision, "2026-07-28");
    assert!(connection.negotiated().modern);
    assert_eq!(seen.opened.load(Ordering::SeqCst), 1, "one connection");
    // One discover, adopted by rmcp's discover lifecycle: nothing asked twice, no initialize.
    assert_eq!(seen.methods(), ["server/discover"]);
    assert_eq!(phases.phase(), ConnectPhase::Negotiating);
    assert!(phases.times().starting_ms >= 11_000, "{:?}", phases.times());
    let _ = connection.close(Duration::from_millis(200)).await;
}

#[tokio::test(start_paused = true)]
async fn a_legacy_server_slow_to_refuse_discover_is_initialized_on_the_same_connection() {
    let seen = Arc::new(Seen::default());
    let phases = Phases::new(None);
    let connection = connected(held_fixture(true, LATE, seen.clone()), &phases).await;
    assert_eq!(connection.negotiated().revision, "2025-11-25");
    assert!(!connection.negotiated().modern);
    assert_eq!(seen.opened.load(Ordering::SeqCst), 1, "one connection");
    assert_eq!(
        seen.methods_once(3).await,
        ["server/discover", "initialize", "notifications/initialized"]
    );
    let _ = connection.close(Duration::from_millis(200)).await;
}

/// A peer that says other things before it answers discover, late: an answer to a request
/// nobody sent, an error for another, a notification and a request of its own.
fn chatty_peer(answered_ping: Arc<Mutex<Option<Value>>>) -> InProcessConnector {
    Arc::new(move || {
        let (host_end, peer_end) = tokio::io::duplex(64 * 1024);
        let answered_ping = answered_ping.clone();
        tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(peer_end);
            let mut lines = BufReader::new(read).lines();
            let Ok(Some(line)) = lines.next_line().await else {
                return;
            };
            let discover: Value = serde_json::from_str(&line).unwrap_or_default();
            let before = [
                json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "late"}}),
                json!({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "starting"}}),
                json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
            ];
            for message in before {
                let _ = write.write_all(format!("{message}\n").as_bytes()).await;
            }
            tokio::time::sleep(LATE).await;
            let answer = json!({"jsonrpc": "2.0", "id": discover["id"], "result": {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "chatty", "version": "1"}},
            }});
            let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).unwrap_or_default();
                if message["id"] == "srv-1" {
                    *answered_ping
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(message);
                }
            }
        });
        host_end
    })
}

#[tokio::test(start_paused = true)]
async fn what_a_server_says_before_its_discover_answer_is_read_and_dropped_never_an_error() {
    let answered_ping = Arc::new(Mutex::new(None));
    let phases = Phases::new(None);
    let connection = connected(chatty_peer(answered_ping.clone()), &phases).await;
    assert_eq!(connection.negotiated().revision, "2026-07-28");
    assert_eq!(connection.negotiated().name.as_deref(), Some("chatty"));
    // Its own request was answered (refused: nothing was negotiated yet), not left waiting.
    let answered = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(answer) = answered_ping
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
            {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the peer's request is answered");
    assert_eq!(answered["error"]["code"], -32600, "{answered}");
    let _ = connection.close(Duration::from_millis(200)).await;
}

/// A peer that refuses its first request as an unsupported version (listing 2026-07-28 as
/// supported, as the conformance suite's server does) and answers discover after that;
/// counts the discovers it was asked.
fn refusing_first_peer(discovers: Arc<AtomicUsize>) -> InProcessConnector {
    Arc::new(move || {
        let (host_end, peer_end) = tokio::io::duplex(64 * 1024);
        let discovers = discovers.clone();
        tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(peer_end);
            let mut lines = BufReader::new(read).lines();
            let mut refused = false;
            while let Ok(Some(line)) = lines.next_line().await {
                let request: Value = serde_json::from_str(&line).unwrap_or_default();
                if request["method"] != "server/discover" {
                    continue;
                }
                discovers.fetch_add(1, Ordering::SeqCst);
                let answer = if std::mem::replace(&mut refused, true) {
                    json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                        "resultType": "complete", "supportedVersions": ["2026-07-28"],
                        "capabilities": {}, "ttlMs": 0, "cacheScope": "public"}})
                } else {
                    json!({"jsonrpc": "2.0", "id": request["id"], "error": {
                        "code": -32022, "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}})
                };
                let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
            }
        });
        host_end
    })
}

#[tokio::test(start_paused = true)]
async fn a_refusal_that_lists_the_revision_asked_is_asked_again_not_taken_for_a_legacy_server() {
    let discovers = Arc::new(AtomicUsize::new(0));
    let phases = Phases::new(None);
    let connection = connected(refusing_first_peer(discovers.clone()), &phases).await;
    assert_eq!(connection.negotiated().revision, "2026-07-28");
    assert!(connection.negotiated().modern);
    assert_eq!(discovers.load(Ordering::SeqCst), 2, "asked once more");
    let _ = connection.close(Duration::from_millis(200)).await;
}
