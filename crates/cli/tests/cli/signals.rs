//! Signals: nothing outlives a host killed with SIGKILL; SIGTERM, SIGINT and SIGHUP shut it
//! down, telling every server of the work it stops.

#[allow(unused_imports)]
use super::*;

/// A `plurnk-mcp status --watch` (which connects every enabled server and runs until a
/// signal) over the fixture, a server that ignores SIGTERM and stdin EOF and one whose
/// grandchild moved to a session of its own; each carries `mark`. Returns once all of them
/// run. (A one-shot `call` would start only the server it names.)
fn held_cli(mark: &str) -> std::process::Child {
    let mut env = BTreeMap::new();
    for (alias, args) in [
        ("slow", json!(["fixture"])),
        ("immortal", json!(["fixture", "--hostile", "immortal"])),
        ("runaway", json!(["fixture", "--hostile", "escape"])),
    ] {
        let upper = alias.to_ascii_uppercase();
        env.insert(format!("PLURNK_MCP_{upper}"), EXE.to_owned());
        env.insert(format!("PLURNK_MCP_{upper}_ARGS"), args.to_string());
        env.insert(
            format!("PLURNK_MCP_{upper}_ENV"),
            json!({ "TEST_MARK": mark }).to_string(),
        );
    }
    env.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["slow", "immortal", "runaway"]).to_string(),
    );
    let mut command = Command::new(EXE);
    command
        .args(["--state", &scratch_state(), "status", "--watch"])
        .env_clear()
        .envs(&env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    let mut child = command.spawn().expect("plurnk-mcp runs");
    // The host is up once the watch prints its table (its first line is the header); what
    // follows is read and dropped so the watch never blocks on a full pipe.
    let stdout = child.stdout.take().expect("stdout");
    let (up, table) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("SERVER") {
                let _ = up.send(());
            }
        }
    });
    assert!(
        table.recv_timeout(wait::BOUND).is_ok(),
        "status --watch printed no table"
    );
    // Every server runs, and so does the runaway's grandchild.
    assert!(
        wait::until_blocking(wait::BOUND, || marked(mark).len() >= 4),
        "the servers did not start: {:?}",
        marked(mark)
    );
    child
}

#[test]
fn nothing_outlives_a_host_killed_with_sigkill() {
    let mark = format!("sigkill-{}", std::process::id());
    let mut cli = held_cli(&mark);
    cli.kill().expect("SIGKILL");
    let _ = cli.wait();
    assert!(
        wait::until_blocking(wait::BOUND, || marked(&mark).is_empty()),
        "outlived the host: {:?}",
        marked(&mark)
    );
}

#[test]
fn the_command_line_shuts_down_on_sigterm_sigint_and_sighup() {
    for (signal, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let mark = format!("{name}-{}", std::process::id());
        let cli = held_cli(&mark);
        let pid = i32::try_from(cli.id()).expect("pid");
        // SAFETY: a signal to the process we spawned.
        unsafe {
            libc::kill(pid, signal);
        }
        let output = cli.wait_with_output().expect("it exits");
        assert_eq!(
            output.status.code(),
            Some(128 + signal),
            "{name}: {:?} {}",
            output.status,
            text(&output.stderr)
        );
        assert!(
            text(&output.stderr).contains("closing every server"),
            "{name}: {}",
            text(&output.stderr)
        );
        assert!(
            wait::until_blocking(wait::BOUND, || marked(&mark).is_empty()),
            "{name}: outlived the host: {:?}",
            marked(&mark)
        );
    }
}

/// A 2026-07-28 `tools/call` of `name` with `arguments`, POSTed to a gateway at `url` by a
/// client that declares the Tasks extension; the answer is not awaited (the test stops the
/// gateway under it).
fn post_call_in_background(url: &str, name: &str, arguments: Value) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_once('/').expect("a path");
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}
    })
    .to_string();
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(authority).expect("the gateway answers");
    stream
        .write_all(request.as_bytes())
        .expect("the request goes out");
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    });
}

/// SIGTERM with a Task and a plain call in flight: before the command line exits, the
/// Python SDK server's Task is cancelled (`tasks/cancel`) and the stdio fixture is sent
/// `notifications/cancelled` for the call's request, so no server keeps working for a
/// client that is gone.
#[test]
fn a_sigterm_tells_every_server_of_the_work_it_stops() {
    use std::io::BufRead;
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let probe = runtime.block_on(plurnk_mcp_fixture::probe::Probe::start());
    let mut python = processes::Killed(
        Command::new(&peers().python)
            .arg(peer_script("python_surfaces.py"))
            .args(["--http", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the Python peer starts"),
    );
    let mut line = String::new();
    std::io::BufReader::new(python.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the peer announces its address");
    let web = line
        .trim()
        .strip_prefix("listening ")
        .expect("a listening line")
        .to_owned();
    // What the Python server's tasks look like, asked by a host of the test's own.
    let tasks = || {
        runtime.block_on(async {
            let host = plurnk_mcp::Host::start(
                plurnk_mcp::HostConfig::from_env([
                    ("PLURNK_MCP_WEB".to_owned(), web.clone()),
                    ("PLURNK_MCP_ENABLED".to_owned(), json!(["web"]).to_string()),
                ])
                .expect("valid"),
            )
            .await
            .expect("host starts");
            let log = host
                .default_workspace()
                .call_tool(
                    "web",
                    "task_log",
                    json!({}),
                    plurnk_mcp::CallOptions::default(),
                )
                .await
                .expect("task_log")
                .text();
            let _ = host.shutdown().await;
            serde_json::from_str::<Value>(&log).expect("JSON")
        })
    };
    let env: BTreeMap<String, String> = [
        ("PLURNK_MCP_WEB".to_owned(), web.clone()),
        ("PLURNK_MCP_FX".to_owned(), EXE.to_owned()),
        (
            "PLURNK_MCP_FX_ARGS".to_owned(),
            json!(["fixture", "--probe", probe.address()]).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED".to_owned(),
            json!(["web", "fx"]).to_string(),
        ),
    ]
    .into_iter()
    .collect();
    let mut serve = processes::Killed(
        Command::new(EXE)
            .args(["--state", &scratch_state(), "serve", "--transport", "http"])
            .args(["--listen", "127.0.0.1:0"])
            .env_clear()
            .envs(&env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("plurnk-mcp serve starts"),
    );
    // It says where it serves on stderr; the rest of stderr is kept for the failure message.
    let (found, address) = std::sync::mpsc::channel();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let lines = std::io::BufReader::new(serve.0.stderr.take().expect("stderr"));
    let kept = said.clone();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                let _ = found.send(url.to_owned());
            }
            if let Ok(mut said) = kept.lock() {
                said.push_str(&line);
                said.push('\n');
            }
        }
    });
    let gateway = address
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("serve says where it serves");

    post_call_in_background(&gateway, "fx_gate", json!({"id": "held"}));
    post_call_in_background(
        &gateway,
        "web_long_job",
        json!({"steps": 500, "delay_ms": 200}),
    );
    runtime.block_on(probe.wait_gate("held", std::time::Duration::from_secs(20)));
    let task_id = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let log = tasks();
            let working = log.as_object().and_then(|tasks| {
                tasks
                    .iter()
                    .find(|(_, task)| {
                        task["status"] == "working" && task["polls"].as_u64() >= Some(1)
                    })
                    .map(|(id, _)| id.clone())
            });
            if let Some(id) = working {
                break id;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no Task is polled: {log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };

    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(i32::try_from(serve.0.id()).expect("pid"), libc::SIGTERM);
    }
    let status = serve.0.wait().expect("it exits");
    let said = said.lock().map(|said| said.clone()).unwrap_or_default();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{said}");
    assert!(
        probe.count("cancel-notice") >= 1,
        "the fixture was not told: {:?}",
        probe.events()
    );
    let log = tasks();
    assert_eq!(
        log[&task_id]["status"], "cancelled",
        "the Task was not cancelled: {log}"
    );
}

/// SIGTERM to a one-shot `plurnk-mcp call` whose call is held on the fixture: the fixture is
/// sent `notifications/cancelled` for it before the command exits, every time (20 runs).
#[test]
fn a_sigterm_to_a_one_shot_call_tells_its_server_every_time() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    for run in 0..20 {
        let probe = runtime.block_on(plurnk_mcp_fixture::probe::Probe::start());
        let env: BTreeMap<String, String> = [
            ("PLURNK_MCP_FX".to_owned(), EXE.to_owned()),
            (
                "PLURNK_MCP_FX_ARGS".to_owned(),
                json!(["fixture", "--probe", probe.address()]).to_string(),
            ),
            ("PLURNK_MCP_ENABLED".to_owned(), json!(["fx"]).to_string()),
        ]
        .into_iter()
        .collect();
        let id = format!("held-{run}");
        let mut call = processes::Killed(
            Command::new(EXE)
                .args(["--state", &scratch_state(), "call", "fx", "gate"])
                .arg(json!({ "id": id }).to_string())
                .env_clear()
                .envs(&env)
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("plurnk-mcp call starts"),
        );
        runtime.block_on(probe.wait_gate(&id, wait::BOUND));
        // SAFETY: a signal to the process we spawned.
        unsafe {
            libc::kill(i32::try_from(call.0.id()).expect("pid"), libc::SIGTERM);
        }
        let status = call.0.wait().expect("it exits");
        assert_eq!(status.code(), Some(128 + libc::SIGTERM), "run {run}");
        // The fixture reports what it received before acting on it; the report may still be
        // on its way when the command has exited.
        assert!(
            wait::until_blocking(wait::BOUND, || probe.count("cancel-notice") >= 1),
            "run {run}: the fixture was not told: {:?}",
            probe.events()
        );
    }
}
