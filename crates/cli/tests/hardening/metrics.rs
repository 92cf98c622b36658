//! The Prometheus endpoint (`plurnk-mcp --metrics`) against sockets that send nothing and
//! pages that were rebound to it.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::served::{Served, raw_request};
use crate::wait::BOUND;

/// `plurnk-mcp serve --transport http --metrics 127.0.0.1:0` on a fixture; the metrics
/// endpoint's authority.
fn served_metrics() -> (Served, String) {
    let mut env = crate::env::fixture("fx", &[]);
    env.push((
        "PLURNK_MCP_ENABLED".into(),
        serde_json::json!(["fx"]).to_string(),
    ));
    let served = Served::start(
        &["--transport", "http", "--metrics", "127.0.0.1:0"],
        &env,
        true,
    );
    // The metrics URL is printed first, before the host starts.
    let url = served.url.clone().expect("a URL");
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("the metrics URL first: {url}"))
        .to_owned();
    (served, authority)
}

#[test]
fn idle_sockets_never_lock_a_scraper_out_and_a_foreign_host_is_refused() {
    let (served, authority) = served_metrics();
    // Far more sockets than the endpoint's 16 places, none sending a byte.
    let idle: Vec<std::net::TcpStream> = (0..64)
        .map(|_| std::net::TcpStream::connect(&authority).expect("connect"))
        .collect();
    let started = Instant::now();
    let (status, body) = raw_request(&authority, "GET", "/metrics", &[]);
    assert_eq!(status, 200, "{body} {}", served.stderr());
    assert!(body.contains("plurnk_mcp_commits_total"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the scrape waited {:?} behind idle sockets",
        started.elapsed()
    );
    drop(idle);
    // A socket that sends nothing is closed once its head is late (5 s), well before a
    // scrape's whole exchange would be (10 s).
    let mut silent = std::net::TcpStream::connect(&authority).expect("connect");
    silent
        .set_read_timeout(Some(BOUND))
        .expect("a read timeout");
    let opened = Instant::now();
    let mut byte = [0u8; 1];
    assert_eq!(silent.read(&mut byte).expect("closed, not timed out"), 0);
    assert!(
        opened.elapsed() < Duration::from_secs(9),
        "a silent socket was kept {:?}",
        opened.elapsed()
    );
    // The Host rule: a rebound name is refused, loopback names and addresses answered.
    let (status, body) = raw_request(&authority, "GET", "/metrics", &[("Host", "evil.example")]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--metrics-allow-host"), "{body}");
    for host in ["localhost", "127.0.0.1:9", "[::1]:9464"] {
        let (status, body) = raw_request(&authority, "GET", "/metrics", &[("Host", host)]);
        assert_eq!(status, 200, "{host}: {body}");
    }
}
