//! Reading a Prometheus endpoint the way a scraper does: one raw HTTP/1.1 GET, bounded.

/// A raw HTTP/1.1 GET of `path` on `address`, bounded in time: the status line and the
/// body. Blocking (std), so it also serves tests with no runtime.
pub fn http_get(address: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let bound = std::time::Duration::from_secs(20);
    let mut stream = std::net::TcpStream::connect(address).expect("the endpoint accepts");
    stream
        .set_read_timeout(Some(bound))
        .expect("a read timeout");
    stream
        .set_write_timeout(Some(bound))
        .expect("a write timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("the endpoint answers and closes");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

/// The value of the sample `series` (its name and labels as rendered) in a scrape.
pub fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
