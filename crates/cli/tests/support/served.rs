//! `plurnk-mcp serve` as the tests run it, and the bare HTTP/1.1 clients they meet it with:
//! the child process and the URL it prints, requests written byte by byte (heads, bodies,
//! the client's address chosen), answers read as a raw client reads them, and the process's
//! memory and sockets from `/proc`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::env::{EXE, fixture};
use crate::wait::{self, BOUND};

/// The `_meta` a 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// `plurnk-mcp serve` as a child process.
pub struct Served {
    pub child: Child,
    pub url: Option<String>,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `plurnk-mcp --state <fresh> serve <args>` with exactly `vars` (plus PATH and
    /// HOME); for HTTP, waits for the URL it prints.
    pub fn start(args: &[&str], vars: &[(String, String)], http: bool) -> Self {
        Self::launch(args, vars, http, None)
    }

    /// As [`Served::start`], the child limited to `nofile` open files when given.
    pub fn launch(
        args: &[&str],
        vars: &[(String, String)],
        http: bool,
        nofile: Option<u64>,
    ) -> Self {
        let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "gateway-{}-{}.sqlite",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let _ = std::fs::remove_file(&state);
        let mut command = Command::new(EXE);
        command
            .arg("--state")
            .arg(&state)
            .arg("serve")
            .args(args)
            .env_clear()
            .envs(vars.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for key in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(key) {
                command.env(key, value);
            }
        }
        if let Some(nofile) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit(2) between fork and exec touches no memory of the parent.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: nofile,
                        rlim_max: nofile,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command.spawn().expect("plurnk-mcp serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, url) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().expect("stderr"));
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(url) = line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"))
                {
                    let _ = found.send(url.to_owned());
                }
                kept.lock().expect("stderr").push_str(&format!("{line}\n"));
            }
        });
        let url = http.then(|| {
            url.recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!("serve printed no URL: {}", stderr.lock().expect("stderr"))
                })
        });
        Self { child, url, stderr }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let child = &mut self.child;
        if wait::until_blocking(Duration::from_secs(15), || {
            matches!(child.try_wait(), Ok(Some(_)))
        }) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A fixture workspace served over HTTP by `plurnk-mcp serve` with `extra` flags.
pub fn served_fixture(extra: &[&str], nofile: Option<u64>) -> (Served, String) {
    let mut env = fixture("fx", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx"]).to_string()));
    let mut args = vec!["--transport", "http"];
    args.extend_from_slice(extra);
    let served = Served::launch(&args, &env, true, nofile);
    let url = served.url.clone().expect("url");
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .expect("http://HOST:PORT/mcp")
        .to_owned();
    (served, authority)
}

/// One answer as a raw client reads it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: String,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key == name).then(|| value.trim())
        })
    }
}

/// An HTTP/1.1 request to `/mcp` with a JSON body (`Host` is `host`).
pub fn mcp_request(host: &str, body: &Value, headers: &[(&str, &str)]) -> Vec<u8> {
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    request.into_bytes()
}

/// A 2026-07-28 request to `/mcp`.
pub fn modern_request(host: &str, method: &str, params: Value) -> Vec<u8> {
    let mut params = params;
    params["_meta"] = modern_meta();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let name = body["params"]["name"].as_str().map(str::to_owned);
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name.as_str()));
    }
    mcp_request(host, &body, &headers)
}

/// A legacy `initialize`.
pub fn initialize_request(host: &str) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "gateway-test", "version": "1"}}});
    mcp_request(host, &body, &[])
}

/// Reads one answer: its head, then a body by `Content-Length`, chunked to its last chunk,
/// or to the end of the connection.
pub fn read_reply(stream: &mut std::net::TcpStream) -> std::io::Result<Reply> {
    use std::io::Read;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut rest = buffer[head_end + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers: String = lines
        .map(|line| match line.split_once(':') {
            Some((name, value)) => format!("{}:{value}\n", name.to_ascii_lowercase()),
            None => format!("{line}\n"),
        })
        .collect();
    let reply = Reply {
        status,
        headers,
        body: String::new(),
    };
    let mut more = |rest: &mut Vec<u8>| -> std::io::Result<bool> {
        let read = stream.read(&mut chunk)?;
        rest.extend_from_slice(&chunk[..read]);
        Ok(read > 0)
    };
    let body = if let Some(length) = reply.header("content-length") {
        let length: usize = length.parse().unwrap_or(0);
        while rest.len() < length && more(&mut rest)? {}
        rest.truncate(length);
        rest
    } else if reply.header("transfer-encoding") == Some("chunked") {
        let mut body = Vec::new();
        loop {
            let Some(line_end) = rest.windows(2).position(|window| window == b"\r\n") else {
                if !more(&mut rest)? {
                    break;
                }
                continue;
            };
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16)
                .unwrap_or(0);
            if size == 0 {
                break;
            }
            while rest.len() < line_end + 2 + size + 2 {
                if !more(&mut rest)? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest.drain(..line_end + 2 + size + 2);
        }
        body
    } else {
        while more(&mut rest)? {}
        rest
    };
    Ok(Reply {
        body: String::from_utf8_lossy(&body).into_owned(),
        ..reply
    })
}

/// A connection to `authority`, from `source` (a loopback address) when given, with a
/// small receive buffer when `small_window`.
pub fn connect(
    authority: &str,
    source: Option<[u8; 4]>,
    small_window: bool,
) -> std::net::TcpStream {
    let target: std::net::SocketAddr = authority.parse().expect("an address");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        if let Some(source) = source {
            socket
                .bind((std::net::Ipv4Addr::from(source), 0).into())
                .expect("bind the source address");
        }
        if small_window {
            socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
            // A small segment size too: the gateway's kernel sizes its send buffer by it, so
            // what the client leaves unread stays in the gateway, not in the kernel.
            use std::os::fd::AsRawFd;
            let segment: libc::c_int = 536;
            // SAFETY: setsockopt(2) on our own socket with a local int.
            let set = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_MAXSEG,
                    (&segment as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(set, 0, "TCP_MAXSEG: {}", std::io::Error::last_os_error());
        }
        socket.connect(target).await.expect("connect")
    });
    let stream = stream.into_std().expect("a std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream
        .set_read_timeout(Some(BOUND))
        .expect("a read timeout");
    stream
}

/// Sends `request` on a fresh connection and reads the answer.
pub fn ask(authority: &str, source: Option<[u8; 4]>, request: &[u8]) -> Reply {
    use std::io::Write;
    let mut stream = connect(authority, source, false);
    stream.write_all(request).expect("send");
    read_reply(&mut stream).expect("an answer")
}

/// A `tools/list` answer's tool names.
pub fn listed(reply: &Reply) -> Vec<String> {
    reply
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .chain(serde_json::from_str::<Value>(&reply.body).ok())
        .filter_map(|message| message["result"]["tools"].as_array().cloned())
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

/// Kilobytes of the process's resident memory (`VmRSS`) or its peak (`VmHWM`).
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix(field)?
                    .trim_start_matches(':')
                    .trim()
                    .trim_end_matches(" kB")
                    .parse()
                    .ok()
            })
        })
        .expect("a memory figure")
}

/// How many sockets the process holds open.
pub fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| std::fs::read_link(entry.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// Raises this process's open-file limit to its hard limit; the limit then.
pub fn raise_nofile() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit(2) on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// A bare HTTP/1.1 request of `method` for `path` at `authority` (`Host` is the authority
/// unless `headers` name one): the status code and the body.
pub fn raw_request(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}
