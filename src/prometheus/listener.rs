//! The metrics endpoint's own listener: one scrape a connection, answered in the text
//! exposition format, and nothing a client does holds it.
//!
//! - A request head has [`HEAD_TIMEOUT`] to arrive, and the whole exchange
//!   [`EXCHANGE_TIMEOUT`].
//! - At most [`MAX_CONNECTIONS`] are open. Past it the connection that has waited longest for
//!   its head is closed to make room, so sockets that send nothing never lock a scraper out;
//!   when every one is being answered, the new one is closed unanswered.
//! - The `Host` rule of the gateway's `/mcp`: a page a browser was tricked into loading from
//!   a rebound name must not read the metrics. A scrape names a loopback host, an address
//!   (which no rebinding can forge: the page sends the name it rebound) or a name the
//!   operator allows; any other is `403`, a head without `Host` `400`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// How long a connection has to send its request head: a scraper sends it at once.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one scrape may take, its request and its answer together.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest request head read; a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;

/// Connections open at once.
const MAX_CONNECTIONS: usize = 16;

/// How often histogram samples are folded into their buckets between scrapes: until then
/// each sample is held, so a host that is never scraped would hold every call's.
const UPKEEP: Duration = Duration::from_secs(5);

/// Accepts scrapes until the runtime ends, and keeps the histograms folded meanwhile.
pub(super) async fn run(
    listener: std::net::TcpListener,
    handle: PrometheusHandle,
    allowed_hosts: Vec<String>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "the metrics endpoint cannot accept connections");
            return;
        }
    };
    let slots = Arc::new(Slots::default());
    let allowed: Arc<[String]> = allowed_hosts.into();
    let mut upkeep = tokio::time::interval(UPKEEP);
    loop {
        let stream = tokio::select! {
            _ = upkeep.tick() => {
                handle.run_upkeep();
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, most likely: make room, and pause rather than spin.
                    slots.evict_waiting();
                    tracing::warn!(%error, "the metrics endpoint could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // With no room the connection is dropped, which closes it.
        let Some(slot) = slots.admit() else {
            continue;
        };
        let handle = handle.clone();
        let allowed = allowed.clone();
        tokio::spawn(async move {
            let close = slot.close.clone();
            let exchange = answer(stream, &handle, &allowed, &slot.head);
            tokio::select! {
                _ = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange) => {}
                () = close.cancelled() => {}
            }
            drop(slot);
        });
    }
}

// === Slots ===

/// The open connections by the order they came in, each with whether its head is in.
#[derive(Default)]
struct Slots {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Waiting>>,
}

/// An open connection as the slots see it.
struct Waiting {
    head: Arc<AtomicBool>,
    close: CancellationToken,
}

/// A connection's hold on its slot, freed when it is dropped.
struct Held {
    slots: Arc<Slots>,
    id: u64,
    /// Set once its request head is in: from then on it is being answered, not waiting.
    head: Arc<AtomicBool>,
    close: CancellationToken,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock() {
            open.remove(&self.id);
        }
    }
}

impl Slots {
    /// A slot for a new connection: a free one, else the one of the connection that has
    /// waited longest for its head (which is closed), else none.
    fn admit(self: &Arc<Self>) -> Option<Held> {
        let mut open = self.open.lock().ok()?;
        if open.len() >= MAX_CONNECTIONS && !Self::evict(&mut open) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let waiting = Waiting {
            head: Arc::new(AtomicBool::new(false)),
            close: CancellationToken::new(),
        };
        let held = Held {
            slots: self.clone(),
            id,
            head: waiting.head.clone(),
            close: waiting.close.clone(),
        };
        open.insert(id, waiting);
        Some(held)
    }

    /// Closes the connection that has waited longest for its head, if one is waiting.
    fn evict_waiting(&self) {
        if let Ok(mut open) = self.open.lock() {
            Self::evict(&mut open);
        }
    }

    fn evict(open: &mut BTreeMap<u64, Waiting>) -> bool {
        let oldest = open
            .iter()
            .find(|(_, waiting)| !waiting.head.load(Ordering::Acquire))
            .map(|(id, _)| *id);
        match oldest.and_then(|id| open.remove(&id)) {
            Some(waiting) => {
                waiting.close.cancel();
                true
            }
            None => false,
        }
    }
}

// === One exchange ===

/// Reads one request head (within [`HEAD_TIMEOUT`]) and answers it; the connection closes
/// after the answer.
async fn answer(
    mut stream: TcpStream,
    handle: &PrometheusHandle,
    allowed: &[String],
    head_in: &AtomicBool,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => return respond(&mut stream, Response::too_large()).await,
        // Closed, failed or too slow: nothing to answer.
        Ok(Err(_)) | Err(_) => return Ok(()),
    };
    head_in.store(true, Ordering::Release);
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let host = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim())
    });
    let response = match (host, method, path) {
        (None, _, _) => Response::no_host(),
        (Some(host), _, _) if !host_allowed(host, allowed) => Response::foreign_host(),
        (_, "GET" | "HEAD", "/metrics") => Response::metrics(handle.render(), method == "HEAD"),
        (_, _, "/metrics") => Response::not_allowed(),
        _ => Response::not_found(),
    };
    respond(&mut stream, response).await
}

/// The request head up to its blank line; `None` past [`MAX_HEAD`]. The whole head is read
/// before answering: a socket closed with unread bytes is reset, and the scraper could lose
/// the answer to the reset.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 1024];
    while memchr::memmem::find(&head, b"\r\n\r\n").is_none() {
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&chunk[..read]);
    }
    Ok(Some(head))
}

/// Whether a request naming `host` (its `Host` header, `name[:port]`) may be answered: a
/// loopback name (`localhost`, `*.localhost`), an address, or one of `allowed` (a name, which
/// then fits any port, or `name:port`).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let (name, port) = split_host(host);
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok() {
        return true;
    }
    allowed.iter().any(|entry| {
        let (allowed_name, allowed_port) = split_host(entry);
        allowed_name.eq_ignore_ascii_case(&name) && allowed_port.is_none_or(|p| Some(p) == port)
    })
}

/// `name[:port]` or `[v6][:port]` → the name (brackets off) and the port.
fn split_host(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':')),
            None => (rest, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, Some(port)),
        _ => (host, None),
    }
}

/// An answer to a scrape.
struct Response {
    status: &'static str,
    content_type: &'static str,
    /// `Allow` for a method other than GET and HEAD.
    allow: bool,
    body: String,
    /// A HEAD request: the headers only.
    head_only: bool,
}

impl Response {
    fn metrics(body: String, head_only: bool) -> Self {
        Self {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            allow: false,
            body,
            head_only,
        }
    }

    fn not_found() -> Self {
        Self::text("404 Not Found", "not found: the metrics are at /metrics\n")
    }

    fn not_allowed() -> Self {
        Self {
            allow: true,
            ..Self::text("405 Method Not Allowed", "use GET for /metrics\n")
        }
    }

    fn too_large() -> Self {
        Self::text(
            "431 Request Header Fields Too Large",
            "the request head is too large\n",
        )
    }

    fn no_host() -> Self {
        Self::text(
            "400 Bad Request",
            "a scrape needs a Host header: send HTTP/1.1\n",
        )
    }

    fn foreign_host() -> Self {
        Self::text(
            "403 Forbidden",
            "the Host header names neither a loopback host, an address, nor a name allowed \
             (plurnk-mcp --metrics-allow-host): scrape by address, or allow the name\n",
        )
    }

    fn text(status: &'static str, body: &str) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            allow: false,
            body: body.to_owned(),
            head_only: false,
        }
    }
}

async fn respond(stream: &mut TcpStream, response: Response) -> std::io::Result<()> {
    let mut message = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        response.status,
        response.content_type,
        response.body.len(),
        if response.allow {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        },
    );
    if !response.head_only {
        message.push_str(&response.body);
    }
    stream.write_all(message.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_names_a_loopback_host_an_address_or_an_allowed_name() {
        let allowed = ["metrics.internal".to_owned(), "plurnk:9464".to_owned()];
        for host in [
            "localhost",
            "localhost:9464",
            "a.localhost",
            "127.0.0.1:9464",
            "10.0.0.5:9464",
            "[::1]:9464",
            "[fe80::1]",
            "metrics.internal:1234",
            "METRICS.internal",
            "plurnk:9464",
        ] {
            assert!(host_allowed(host, &allowed), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9464",
            "plurnk:80",
            "plurnk",
            "",
        ] {
            assert!(!host_allowed(host, &allowed), "{host}");
        }
    }

    #[test]
    fn a_full_set_makes_room_by_closing_the_connection_waiting_longest_for_its_head() {
        let slots = Arc::new(Slots::default());
        let held: Vec<Held> = (0..MAX_CONNECTIONS)
            .map(|_| slots.admit().expect("room"))
            .collect();
        // The first is being answered; the second has waited longest of the others.
        held[0].head.store(true, Ordering::Release);
        let next = slots.admit().expect("room made");
        assert!(!held[0].close.is_cancelled());
        assert!(held[1].close.is_cancelled());
        assert!(!next.close.is_cancelled());
        // Every one being answered: no room.
        for held in &held {
            held.head.store(true, Ordering::Release);
        }
        next.head.store(true, Ordering::Release);
        assert!(slots.admit().is_none());
    }
}
