//! The zoo: ten published servers people install — from npm server-filesystem,
//! server-memory, server-sequential-thinking, server-everything and @playwright/mcp; from PyPI
//! mcp-server-time, mcp-server-git, mcp-server-fetch, mcp-server-sqlite, and excel-mcp-server
//! over Streamable HTTP — as `scripts/install-peers.sh` installs them, each given what it needs
//! in a folder of its own (a root, a memory file, a repository, a database, a workbook
//! folder), a loopback page for the two that fetch, and one real call each with what its
//! answer must say. A burner keeps every core busy, as a developer's machine is busy. No
//! traffic leaves loopback.
//!
//! Shared by `crates/cli/tests/zoo.rs` and the zoo benchmark (`examples/zoo.rs`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The ten servers, by alias.
pub const ALIASES: [&str; 10] = [
    "everything",
    "excel",
    "fetch",
    "filesystem",
    "git",
    "memory",
    "playwright",
    "sqlite",
    "thinking",
    "time",
];

/// The ones that speak 2026-07-28 (the rest speak 2025-11-25 only).
pub const MODERN: [&str; 4] = ["excel", "fetch", "git", "time"];

/// What a page of the loopback site says, which `fetch` and `playwright` must bring back.
const PAGE_WORDS: &str = "The zoo says hello-4242.";

/// A file planted in the filesystem server's root.
const PLANTED: &str = "planted-text-777";

/// The peers' paths, from `.cache/peers.env` under `root` (the repository).
fn peers_env(root: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root.join(".cache/peers.env"))
        .expect("scripts/install-peers.sh writes .cache/peers.env");
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.trim_matches(['\'', '"']).to_owned()))
        .collect()
}

/// One zoo: its folder, its HTTP server (excel), its loopback page and its commands.
pub struct Zoo {
    pub dir: PathBuf,
    peers: BTreeMap<String, String>,
    excel: Child,
    excel_url: String,
    page: SocketAddr,
    /// Each stdio server is started through a shell that notes each start in a file of
    /// its own before it becomes the server (`exec`): how many processes it was started as.
    counted: bool,
}

impl Zoo {
    /// A zoo under `dir` (made afresh), with the peers of the repository at `root`; with
    /// `counted`, every stdio server's starts are noted (see [`Zoo::starts`]).
    pub fn start(root: &Path, dir: PathBuf, counted: bool) -> Self {
        let mut peers = peers_env(root);
        // Playwright runs Debian's chromium, which the project's own script installs.
        let chromium = Command::new("bash")
            .arg(root.join("scripts/install-chromium.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/install-chromium.sh runs");
        assert!(
            chromium.status.success(),
            "scripts/install-chromium.sh failed"
        );
        let chromium = String::from_utf8_lossy(&chromium.stdout).trim().to_owned();
        peers.insert("CHROMIUM".into(), chromium);
        let _ = std::fs::remove_dir_all(&dir);
        for folder in ["root", "repo", "xl", "starts", "work", "memory", "db"] {
            std::fs::create_dir_all(dir.join(folder)).expect("the zoo's folders");
        }
        std::fs::write(dir.join("root/planted.txt"), format!("{PLANTED}\n")).expect("plant");
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(dir.join("repo"))
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("git runs");
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("repo/a.txt"), "hi\n").expect("a file to commit");
        git(&["add", "a.txt"]);
        git(&[
            "-c",
            "user.name=zoo",
            "-c",
            "user.email=zoo@127.0.0.1",
            "commit",
            "-q",
            "-m",
            "first",
        ]);
        let page = serve_page();
        let (excel, excel_url) = start_excel(&peers, &dir.join("xl"));
        Self {
            dir,
            peers,
            excel,
            excel_url,
            page,
            counted,
        }
    }

    fn peer(&self, key: &str) -> &str {
        self.peers
            .get(key)
            .unwrap_or_else(|| panic!("{key} missing from peers.env"))
    }

    fn path(&self, relative: &str) -> String {
        self.dir.join(relative).to_string_lossy().into_owned()
    }

    /// The loopback page's URL.
    pub fn page_url(&self) -> String {
        format!("http://{}/", self.page)
    }

    /// What each stdio server writes, declared in its sandbox as a user would (the default
    /// lets a server read its own installation and the system's folders and write only its
    /// private temporary directory): the folder it serves, its memory file's, its repository,
    /// its database's, its working directory.
    fn writes(&self, alias: &str) -> Vec<String> {
        let mut writes: Vec<String> = match alias {
            "filesystem" => vec![self.path("root")],
            "memory" => vec![self.path("memory")],
            "git" => vec![self.path("repo")],
            "sqlite" => vec![self.path("db")],
            "playwright" => vec![self.path("work")],
            _ => vec![],
        };
        if self.counted {
            writes.push(self.path("starts"));
        }
        writes
    }

    /// Every stdio server's command and arguments, and its own environment, by alias.
    fn commands(&self) -> Vec<(&'static str, String, Vec<String>, Option<Value>)> {
        let npm = |bin: &str| format!("{}/node_modules/.bin/{bin}", self.peer("ZOO_NPM"));
        let py = |bin: &str| format!("{}/bin/{bin}", self.peer("ZOO_VENV"));
        vec![
            (
                "everything",
                self.peer("NODE22").to_owned(),
                vec![self.peer("SERVER_EVERYTHING").to_owned(), "stdio".into()],
                None,
            ),
            (
                "fetch",
                py("mcp-server-fetch"),
                vec!["--allow-private-ips".into()],
                None,
            ),
            (
                "filesystem",
                npm("mcp-server-filesystem"),
                vec![self.path("root")],
                None,
            ),
            (
                "git",
                py("mcp-server-git"),
                vec!["--repository".into(), self.path("repo")],
                None,
            ),
            (
                "memory",
                npm("mcp-server-memory"),
                vec![],
                Some(json!({"MEMORY_FILE_PATH": self.path("memory/memory.jsonl")})),
            ),
            (
                "playwright",
                npm("playwright-mcp"),
                [
                    "--headless",
                    "--isolated",
                    "--browser",
                    "chromium",
                    "--executable-path",
                    self.peer("CHROMIUM"),
                ]
                .map(str::to_owned)
                .to_vec(),
                None,
            ),
            (
                "sqlite",
                format!("{}/bin/mcp-server-sqlite", self.peer("ZOO_SQLITE")),
                vec!["--db-path".into(), self.path("db/zoo.sqlite")],
                None,
            ),
            (
                "thinking",
                npm("mcp-server-sequential-thinking"),
                vec![],
                None,
            ),
            ("time", py("mcp-server-time"), vec![], None),
        ]
    }

    /// The ten servers as a host's environment: each `PLURNK_MCP_<SERVER>` with its companions,
    /// all enabled, nothing else (the default timeouts).
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for (alias, command, args, own) in self.commands() {
            let key = format!("PLURNK_MCP_{}", alias.to_uppercase());
            let (command, args) = if self.counted {
                let mut wrapped = vec![
                    "-c".to_owned(),
                    "echo started >> \"$0\"; exec \"$@\"".to_owned(),
                    self.path(&format!("starts/{alias}")),
                    command,
                ];
                wrapped.extend(args);
                ("/bin/sh".to_owned(), wrapped)
            } else {
                (command, args)
            };
            env.insert(key.clone(), command);
            env.insert(format!("{key}_ARGS"), json!(args).to_string());
            // Playwright writes its snapshots under its working directory.
            env.insert(format!("{key}_CWD"), self.path("work"));
            let writes = self.writes(alias);
            if !writes.is_empty() {
                env.insert(
                    format!("{key}_SANDBOX"),
                    json!({"write": writes}).to_string(),
                );
            }
            if let Some(own) = own {
                env.insert(format!("{key}_ENV"), own.to_string());
            }
        }
        env.insert("PLURNK_MCP_EXCEL".into(), self.excel_url.clone());
        env.insert("PLURNK_MCP_ENABLED".into(), json!(ALIASES).to_string());
        env
    }

    /// The ten servers as the Python SDK client of `peers/zoo_client.py` takes them: each
    /// stdio server's command, arguments, own environment and folder (started through the
    /// same counting shell), and the HTTP one's URL.
    pub fn specs(&self) -> Value {
        let env = self.env();
        let mut specs = serde_json::Map::new();
        for alias in ALIASES {
            let key = format!("PLURNK_MCP_{}", alias.to_uppercase());
            let target = env[&key].clone();
            let spec = if target.starts_with("http") {
                json!({"url": target})
            } else {
                let json = |suffix: &str| {
                    env.get(&format!("{key}_{suffix}"))
                        .and_then(|text| serde_json::from_str::<Value>(text).ok())
                };
                json!({
                    "command": target,
                    "args": json("ARGS").unwrap_or_else(|| json!([])),
                    "env": json("ENV").unwrap_or_else(|| json!({})),
                    "cwd": env.get(&format!("{key}_CWD")),
                })
            };
            specs.insert(alias.to_owned(), spec);
        }
        Value::Object(specs)
    }

    /// How many processes a stdio server was started as (a counted zoo only).
    pub fn starts(&self, alias: &str) -> usize {
        std::fs::read_to_string(self.dir.join("starts").join(alias))
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }

    /// One real call of each server, and what its answer must say; `tag` makes what a call
    /// creates its own (a workbook, an entity), so the calls can be made again.
    pub fn calls(&self, tag: &str) -> Vec<ZooCall> {
        let workbook = self.path(&format!("xl/zoo-{tag}.xlsx"));
        let entity = format!("Zebra-{tag}");
        vec![
            ZooCall::text("everything", "echo", json!({"message": "zoo"}), "Echo: zoo"),
            ZooCall {
                alias: "excel",
                tool: "create_workbook",
                arguments: json!({"path": workbook}),
                expect: Expect::File(PathBuf::from(&workbook)),
            },
            ZooCall::text(
                "fetch",
                "fetch",
                json!({"url": self.page_url()}),
                "hello-4242",
            ),
            ZooCall::text(
                "filesystem",
                "read_text_file",
                json!({"path": self.path("root/planted.txt")}),
                PLANTED,
            ),
            ZooCall::text(
                "git",
                "git_status",
                json!({"repo_path": self.path("repo")}),
                "On branch main",
            ),
            ZooCall::text(
                "memory",
                "create_entities",
                json!({"entities": [{"name": entity, "entityType": "animal",
                                     "observations": ["striped"]}]}),
                &entity,
            ),
            ZooCall::text(
                "playwright",
                "browser_navigate",
                json!({"url": self.page_url()}),
                "Page Title: Zoo Page",
            ),
            ZooCall::text(
                "sqlite",
                "read_query",
                json!({"query": "select 6*7 as answer"}),
                "42",
            ),
            ZooCall::text(
                "thinking",
                "sequentialthinking",
                json!({"thought": "one", "thoughtNumber": 1, "totalThoughts": 1,
                       "nextThoughtNeeded": false}),
                "\"thoughtNumber\": 1",
            ),
            ZooCall {
                alias: "time",
                tool: "get_current_time",
                arguments: json!({"timezone": "Etc/UTC"}),
                expect: Expect::Structured("timezone", json!("Etc/UTC")),
            },
        ]
    }
}

impl Drop for Zoo {
    fn drop(&mut self) {
        // The HTTP server leads a process group of its own: it goes, with whatever it started.
        // SAFETY: kill(2) on our own child's group.
        unsafe {
            libc::kill(-(self.excel.id() as i32), libc::SIGKILL);
        }
        let _ = self.excel.wait();
    }
}

/// What an answer must say.
pub enum Expect {
    /// Some text block holds this.
    Text(String),
    /// `structuredContent[key]` is this.
    Structured(&'static str, Value),
    /// The call made this file.
    File(PathBuf),
}

/// One real call of one server.
pub struct ZooCall {
    pub alias: &'static str,
    pub tool: &'static str,
    pub arguments: Value,
    pub expect: Expect,
}

impl ZooCall {
    fn text(alias: &'static str, tool: &'static str, arguments: Value, says: &str) -> Self {
        Self {
            alias,
            tool,
            arguments,
            expect: Expect::Text(says.to_owned()),
        }
    }

    /// Whether `result` (a tool result as JSON: its content blocks, structured content and
    /// `isError`) is the answer this call must get.
    pub fn check(&self, result: &Value) -> Result<(), String> {
        let shown = || {
            let text = result.to_string();
            text.chars().take(600).collect::<String>()
        };
        if result["isError"] == json!(true) {
            return Err(format!(
                "{}/{} answered an error: {}",
                self.alias,
                self.tool,
                shown()
            ));
        }
        let holds = match &self.expect {
            Expect::Text(says) => result["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .filter_map(|block| block["text"].as_str())
                    .any(|text| text.contains(says.as_str()))
            }),
            Expect::Structured(key, value) => result["structuredContent"][key] == *value,
            Expect::File(path) => path.is_file(),
        };
        if holds {
            Ok(())
        } else {
            Err(format!(
                "{}/{} did not answer as it must: {}",
                self.alias,
                self.tool,
                shown()
            ))
        }
    }
}

/// A page on 127.0.0.1:0 (and the `robots.txt` `mcp-server-fetch` reads first), served by a
/// thread for as long as the process runs.
fn serve_page() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the page");
    let address = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || answer_page(stream));
        }
    });
    address
}

fn answer_page(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let (kind, body) = if path.starts_with("/robots.txt") {
        ("text/plain", "User-agent: *\nAllow: /\n".to_owned())
    } else {
        (
            "text/html; charset=utf-8",
            format!(
                "<!doctype html><html><head><title>Zoo Page</title></head>\
                 <body><p>{PAGE_WORDS}</p></body></html>"
            ),
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// excel-mcp-server over Streamable HTTP on a free loopback port, once it accepts
/// connections (a Python interpreter's start, under load, takes seconds).
fn start_excel(peers: &BTreeMap<String, String>, folder: &Path) -> (Child, String) {
    let command = format!("{}/bin/excel-mcp-server", peers["ZOO_VENV"]);
    for _ in 0..3 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new(&command)
            .args(["streamable-http", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["--allow-unauthenticated", "--allow-dir"])
            .arg(folder)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("excel-mcp-server starts");
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (child, format!("http://127.0.0.1:{port}/mcp"));
            }
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Lost its port to another process, or never came up: once more on another.
        // SAFETY: kill(2) on our own child's group.
        unsafe {
            libc::kill(-(child.id() as i32), libc::SIGKILL);
        }
        let _ = child.wait();
    }
    panic!("excel-mcp-server did not listen on a loopback port");
}

/// Keeps every core busy, as a developer's machine is while they work: a busy shell loop per
/// core, each in a session of its own as another program on the machine would be (the
/// scheduler shares the processors between sessions first), killed when this is dropped.
pub struct Burner(Vec<Child>);

impl Burner {
    pub fn start() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Self(
            (0..cores)
                .map(|_| {
                    let mut command = Command::new("/bin/sh");
                    command
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    // SAFETY: setsid(2) between fork and exec touches no memory of the parent.
                    unsafe {
                        command.pre_exec(|| {
                            if libc::setsid() == -1 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                    command.spawn().expect("a burner starts")
                })
                .collect(),
        )
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SAFETY: kill(2) on our own child's group.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}
