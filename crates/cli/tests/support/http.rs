//! Bare HTTP/1.1 servers on 127.0.0.1:0 that record what they are sent: a server's
//! endpoints as a test scripts them, and places credentials must never reach.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What a server was sent: each request whole (head and body), in arrival order.
pub type Recorded = Arc<Mutex<Vec<String>>>;

/// A bare HTTP/1.1 server on 127.0.0.1:0 that answers each request by its path with
/// `route(address, path)`, and records each request whole (head and body).
pub async fn routed_http(
    route: impl Fn(SocketAddr, &str) -> String + Send + Sync + 'static,
) -> (SocketAddr, Recorded) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    let route = Arc::new(route);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (route, recorded) = (route.clone(), recorded.clone());
            tokio::spawn(async move {
                // One request per connection: read until the head and its declared body
                // are in (bounded), then answer and close.
                let mut request = Vec::new();
                let mut buffer = vec![0u8; 16 * 1024];
                loop {
                    let Ok(read) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        break;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|line| {
                                let (name, value) = line.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= length || request.len() > 1 << 20 {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
                if let Ok(mut seen) = recorded.lock() {
                    seen.push(text);
                }
                let _ = stream.write_all(route(address, &path).as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (address, seen)
}

/// An HTTP answer with a JSON body.
pub fn json_answer(status: &str, body: &serde_json::Value) -> String {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A server that answers every request with `answer`.
pub async fn raw_http(answer: String) -> (SocketAddr, Recorded) {
    routed_http(move |_, _| answer.clone()).await
}
