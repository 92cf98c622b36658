//! Tool sources beyond MCP servers, through the host: a CLI adapter for `git` and one for
//! `jq`, a bash and a Python script with header-declared parameters, an OpenAPI document
//! served by a real HTTP server; each added live (snapshot, documents, the gateway's
//! tools/list), kept across a restart, bounded, and refused with errors that say where.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use plurnk_mcp::gateway::{Gateway, Naming};
use plurnk_mcp::sources::SourceKind;
use plurnk_mcp::store::SqliteStore;
use plurnk_mcp::{
    CallError, CallOptions, Host, HostConfig, HostOptions, ServerDefinition, ServerState,
    TransportKind,
};
use rmcp::ServiceExt;
use serde_json::{Value, json};

#[path = "support/calls.rs"]
mod calls;
#[path = "support/env.rs"]
mod env;
#[path = "support/wait.rs"]
mod wait;
use calls::{BOUND, shutdown_clean};
use env::EXE;

/// The configuration of exactly these variables.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::checked(env::map(pairs))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sources-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// A repository with one commit and one uncommitted change.
fn repository(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("notes.txt"), "first\n").expect("write");
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "the first commit"]);
    std::fs::write(repo.join("notes.txt"), "first\nsecond\n").expect("write");
    repo
}

fn git_declaration(repo: &Path) -> Value {
    json!({
        "kind": "cli",
        "name": "git",
        "command": "git",
        "args": ["-c", "color.ui=never", "--no-pager"],
        "env": {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"},
        "cwd": repo,
        "tools": [
            {"name": "log", "description": "Show the commit log", "args": ["log", "--no-decorate"],
             "params": [{"name": "oneline", "type": "boolean", "flag": "--oneline"}]},
            {"name": "status", "description": "Changed files", "args": ["status", "--porcelain=v1"]},
            {"name": "diff", "description": "Unstaged changes", "args": ["diff"]}
        ]
    })
}

fn jq_declaration() -> Value {
    json!({
        "kind": "cli",
        "name": "jq",
        "command": "jq",
        "tools": [{
            "name": "keys",
            "description": "The keys of a JSON object",
            "args": ["-c", "keys"],
            "json": true,
            "params": [{"name": "input", "stdin": true, "required": true,
                        "description": "the JSON text"}]
        }]
    })
}

fn bounded_declaration() -> Value {
    json!({
        "kind": "cli",
        "name": "bounded",
        "command": "sh",
        "timeoutMs": 300,
        "maxOutputBytes": 10000,
        "tools": [
            {"name": "hang", "description": "Sleeps past its deadline", "args": ["-c", "sleep 30 & wait"]},
            {"name": "flood", "description": "Writes past its bound", "args": ["-c", "exec yes"]}
        ]
    })
}

/// A bash script and a Python script with their parameters in their headers.
fn scripts(dir: &Path) -> (PathBuf, PathBuf) {
    let bash = dir.join("greet.sh");
    std::fs::write(
        &bash,
        "#!/usr/bin/env bash\n# @description Greets someone.\n# @param name:string who to greet\n\
         # @param shout:boolean in capitals\nname=\"\"; shout=\"\"\n\
         while [ $# -gt 0 ]; do case \"$1\" in --name) name=\"$2\"; shift 2;; \
         --shout) shout=1; shift;; *) shift;; esac; done\n\
         if [ -n \"$shout\" ]; then echo \"HELLO, ${name^^}\"; else echo \"hello, $name\"; fi\n",
    )
    .expect("bash script");
    let python = dir.join("add.py");
    std::fs::write(
        &python,
        "# @description Adds two numbers.\n# @param a:number the first\n# @param b?:number=1 the second\n\
         import argparse\np = argparse.ArgumentParser()\np.add_argument('--a', type=float)\n\
         p.add_argument('--b', type=float, default=1)\nargs = p.parse_args()\n\
         print(f'{args.a + args.b:g}')\n",
    )
    .expect("python script");
    (bash, python)
}

/// An HTTP API and the OpenAPI document that describes it, on loopback.
async fn pet_store() -> (String, tokio_util::sync::CancellationToken) {
    use axum::{Router, extract::Path as UrlPath, http::header::CONTENT_TYPE, routing::get};
    let json_body = |value: Value| ([(CONTENT_TYPE, "application/json")], value.to_string());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "Pets", "version": "1.0.0"},
        "servers": [{"url": base}],
        "paths": {
            "/pets/{id}": {"get": {
                "operationId": "showPet",
                "summary": "One pet by id",
                "parameters": [{"name": "id", "in": "path", "required": true,
                                "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "the pet"}}
            }}
        }
    });
    let router = Router::new()
        .route(
            "/openapi.json",
            get(move || async move { json_body(document.clone()) }),
        )
        .route(
            "/pets/{id}",
            get(move |UrlPath(id): UrlPath<u64>| async move {
                json_body(json!({"id": id, "name": format!("pet-{id}")}))
            }),
        );
    let stop = tokio_util::sync::CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    (base, stop)
}

fn source(alias: &str, kind: SourceKind, declaration: Value, origin: &Path) -> ServerDefinition {
    match plurnk_mcp::sources::definition(alias, kind, declaration, &origin.display().to_string()) {
        Ok(definition) => definition,
        Err(errors) => panic!("{alias}: {errors}"),
    }
}

async fn host_on(store: &Path) -> Host {
    let store = SqliteStore::open(store).expect("state file");
    let options = HostOptions::default().with_store(Some(Arc::new(store)));
    Host::start_with(
        config(&[
            ("PLURNK_MCP_ALLOW_ADD", "true".into()),
            ("PLURNK_MCP_CONNECT_TIMEOUT", "30000".into()),
        ]),
        options,
    )
    .await
    .expect("host starts")
}

fn text(result: &plurnk_mcp::ToolResult) -> String {
    result.text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_a_namespace_added_live_and_kept_across_a_restart() {
    let dir = scratch("live");
    let repo = repository(&dir);
    let (bash, _python) = scripts(&dir);
    let (base, stop) = pet_store().await;
    let state = dir.join("state.sqlite");
    let host = host_on(&state).await;
    let workspace = host.workspace("team").await.expect("workspace");

    let mut added = vec![
        source(
            "git",
            SourceKind::Cli,
            git_declaration(&repo),
            &dir.join("git.json"),
        ),
        source(
            "greet",
            SourceKind::Script,
            json!({"kind": "script", "name": "greet", "path": bash, "runtime": "bash"}),
            &dir.join("greet.json"),
        ),
        source(
            "adder",
            SourceKind::Script,
            // Relative to the declaration's own file.
            json!({"kind": "script", "name": "adder", "path": "add.py", "runtime": "python"}),
            &dir.join("adder.json"),
        ),
        source(
            "pets",
            SourceKind::OpenApi,
            json!({"kind": "openapi", "name": "pets", "spec": format!("{base}/openapi.json")}),
            &dir.join("pets.json"),
        ),
    ];
    let jq = installed("jq");
    if jq {
        added.push(source(
            "jq",
            SourceKind::Cli,
            jq_declaration(),
            &dir.join("jq.json"),
        ));
    } else {
        eprintln!("jq is not installed on this machine: its adapter is not exercised here");
    }
    for definition in added {
        let alias = definition.alias().to_owned();
        let server = workspace.add(definition).await.unwrap_or_else(|problem| {
            panic!("{alias} is added live: {problem}");
        });
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
    }
    let snapshot = workspace.snapshot();
    let tools = |alias: &str| -> Vec<String> {
        snapshot
            .server(alias)
            .map(|server| server.tools.iter().map(|tool| tool.name.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(tools("git"), ["log", "status", "diff"]);
    assert_eq!(tools("greet"), ["greet"]);
    assert_eq!(tools("adder"), ["adder"]);
    assert_eq!(tools("pets"), ["showPet"]);
    assert_eq!(
        snapshot.server("git").map(|server| server.transport),
        Some(TransportKind::Cli)
    );
    assert_eq!(
        snapshot.server("pets").map(|server| server.transport),
        Some(TransportKind::OpenApi)
    );

    // Calls, through the same path as any server's.
    let call = |alias: &'static str, tool: &'static str, arguments: Value| {
        let workspace = workspace.clone();
        async move {
            workspace
                .call_tool(alias, tool, arguments, CallOptions::default())
                .await
                .unwrap_or_else(|error| panic!("{alias}/{tool}: {error}"))
        }
    };
    let log = call("git", "log", json!({"oneline": true})).await;
    assert!(text(&log).contains("the first commit"), "{}", text(&log));
    assert!(text(&call("git", "status", json!({})).await).contains("M notes.txt"));
    assert!(text(&call("git", "diff", json!({})).await).contains("+second"));
    let greeted = call("greet", "greet", json!({"name": "Ada", "shout": true})).await;
    assert_eq!(text(&greeted).trim(), "HELLO, ADA");
    assert_eq!(
        text(&call("adder", "adder", json!({"a": 40, "b": 2})).await).trim(),
        "42"
    );
    let pet = call("pets", "showPet", json!({"id": 7})).await;
    assert_eq!(
        pet.result["structuredContent"]["name"], "pet-7",
        "{}",
        pet.result
    );
    if jq {
        // An array is no structured content: the text holds it exactly.
        let keys = call("jq", "keys", json!({"input": "{\"b\": 1, \"a\": 2}"})).await;
        assert!(
            keys.result.get("structuredContent").is_none(),
            "{}",
            keys.result
        );
        assert_eq!(text(&keys).trim(), "[\"a\",\"b\"]");
    }
    // A tool's own failure is its result; arguments that do not fit are refused.
    match workspace
        .call_tool(
            "greet",
            "greet",
            json!({"nobody": 1}),
            CallOptions::default(),
        )
        .await
    {
        Err(CallError::Remote { code, message, .. }) => {
            assert_eq!(code, -32602, "{message}");
            assert!(message.contains("nobody"), "{message}");
        }
        other => panic!("an unknown argument is refused: {other:?}"),
    }

    // The EXEC bridge calls them like any server's tools.
    let op = r#"<<EXEC[adder](adder):{"a": 2, "b": 3}:EXEC"#;
    let exec = plurnk_mcp::exec::run(&workspace, op, CallOptions::default())
        .await
        .unwrap_or_else(|error| panic!("EXEC {op}: {error}"));
    assert_eq!(
        exec["content"][0]["text"].as_str().map(str::trim),
        Some("5"),
        "{exec}"
    );

    // The model's documents and the gateway's tools/list have them, like any server's.
    let family = plurnk_mcp::projection::family_document(&snapshot, "git").expect("a document");
    assert!(family.contains("EXEC [git] (log)"), "{family}");
    let survey = plurnk_mcp::projection::survey(&snapshot);
    for alias in ["git", "greet", "adder", "pets"] {
        assert!(survey.contains(alias), "{alias} in the survey: {survey}");
    }
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_end);
    tokio::spawn(Gateway::new(workspace.clone(), Naming::Prefixed).serve_io(read, write));
    let client = ().serve(client_end).await.expect("a client of the gateway");
    let served: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    for name in ["git_log", "greet_greet", "adder_adder", "pets_showPet"] {
        assert!(
            served.iter().any(|served| served == name),
            "{name} in {served:?}"
        );
    }
    drop(client);

    // The same actions as a server's: disabled, it contributes nothing; enabled, it is back.
    workspace.disable("greet").await.expect("disable greet");
    let off = workspace.snapshot();
    assert_eq!(
        off.server("greet").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    assert!(off.server("greet").is_some_and(|s| s.tools.is_empty()));
    workspace.enable("greet").await.expect("enable greet");
    let on = call("greet", "greet", json!({"name": "Bo"})).await;
    assert_eq!(text(&on).trim(), "hello, Bo");
    shutdown_clean(host).await;

    // Kept in the state file: a new host brings every one back, ready.
    let host = host_on(&state).await;
    let workspace = host.workspace("team").await.expect("workspace");
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| {
            ["git", "greet", "adder", "pets"].iter().all(|alias| {
                snapshot
                    .server(alias)
                    .is_some_and(|server| server.state == ServerState::Ready)
            })
        })
        .await;
    for alias in ["git", "greet", "adder", "pets"] {
        let server = snapshot.server(alias).expect("kept");
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
    }
    let again = workspace
        .call_tool("adder", "adder", json!({"a": 1}), CallOptions::default())
        .await
        .expect("adder after a restart");
    assert_eq!(again.text().trim(), "2");
    // Removed, it is gone from the workspace and from the state file.
    workspace.remove("adder").await.expect("remove adder");
    assert!(workspace.snapshot().server("adder").is_none());
    shutdown_clean(host).await;
    let host = host_on(&state).await;
    let workspace = host.workspace("team").await.expect("workspace");
    assert!(
        workspace.snapshot().server("adder").is_none(),
        "removed for good"
    );
    assert!(workspace.snapshot().server("git").is_some());
    shutdown_clean(host).await;
    stop.cancel();
}

/// Serves `router` on loopback until the token is cancelled; its `http://` origin.
async fn serve(router: axum::Router) -> (String, tokio_util::sync::CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    (origin, stop)
}

/// A document whose one operation's body refers to a chain of `levels` schemas, each
/// referring twice to the one below, with a `leaf`-byte string at the bottom: small as
/// written, `2^levels × leaf` bytes resolved.
fn fan_out(levels: usize, leaf: usize) -> Value {
    let mut schemas = serde_json::Map::new();
    for level in 0..levels {
        let below = json!({"$ref": format!("#/components/schemas/L{}", level + 1)});
        schemas.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": {"a": below, "b": below}}),
        );
    }
    schemas.insert(
        format!("L{levels}"),
        json!({"type": "string", "description": "x".repeat(leaf)}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Fan", "version": "1"},
        "servers": [{"url": "/v1"}],
        "paths": {"/deep": {"post": {
            "operationId": "deep",
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/L0"}}}}
        }}},
        "components": {"schemas": schemas}
    })
}

/// What a finished child process said and how much memory it held at its peak.
struct Ran {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    peak_rss_kib: i64,
}

/// Runs `plurnk-mcp args` with exactly `vars` (plus PATH and HOME), its address space limited
/// to `limit_kib`, and reads its peak resident memory from the kernel as it is reaped.
fn run_limited(args: &[String], vars: &[(&str, String)], limit_kib: u64, dir: &Path) -> Ran {
    use std::os::unix::process::ExitStatusExt;
    let stdout = dir.join("limited.stdout");
    let stderr = dir.join("limited.stderr");
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -v {limit_kib} && exec \"$0\" \"$@\""))
        .arg(EXE)
        .args(args)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    // glibc reserves 64 MiB of address space per arena, one per thread that contends: capped,
    // the limit measures what the host holds, not how many cores the machine has.
    command.env("MALLOC_ARENA_MAX", "2");
    command.envs(vars.iter().map(|(key, value)| (*key, value.as_str())));
    // Reaped by `wait4` below, which also gives its resource usage.
    #[expect(clippy::zombie_processes)]
    let child = command.spawn().expect("sh runs");
    let pid = i32::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: `rusage` is plain data the kernel fills; the child is ours and reaped here once.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    Ran {
        status: std::process::ExitStatus::from_raw(status),
        stdout: read(&stdout),
        stderr: read(&stderr),
        peak_rss_kib: usage.ru_maxrss,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_whose_references_fan_out_is_refused_under_a_memory_limit() {
    // 22 KB as written, 2.6 GB if its references were copied out: the host, limited to
    // 512 MiB of address space, refuses it with the bound's name and keeps the other source
    // ready; with the bound removed it dies of the allocation instead.
    let dir = scratch("fan-out");
    let fan = fan_out(17, 20_000);
    assert!(fan.to_string().len() < 24_000);
    let (fan_origin, stop_fan) = serve(axum::Router::new().route(
        "/openapi.json",
        axum::routing::get(move || async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                fan.to_string(),
            )
        }),
    ))
    .await;
    let (pets_origin, stop_pets) = pet_store().await;
    let declarations = dir.join("sources");
    std::fs::create_dir_all(&declarations).expect("dir");
    for (alias, origin) in [("fan", &fan_origin), ("pets", &pets_origin)] {
        std::fs::write(
            declarations.join(format!("{alias}.json")),
            json!({"kind": "openapi", "name": alias, "spec": format!("{origin}/openapi.json")})
                .to_string(),
        )
        .expect("declaration");
    }
    let args: Vec<String> = [
        "--state",
        &dir.join("state.sqlite").display().to_string(),
        "status",
        "--json",
    ]
    .map(str::to_owned)
    .into();
    let vars = [
        ("PLURNK_MCP_SOURCES", declarations.display().to_string()),
        ("PLURNK_MCP_ENABLED", json!(["fan", "pets"]).to_string()),
    ];
    let ran = tokio::task::spawn_blocking(move || run_limited(&args, &vars, 512 * 1024, &dir))
        .await
        .expect("the child is reaped");
    assert!(
        ran.status.success(),
        "the host survives: {:?}\n{}",
        ran.status,
        ran.stderr
    );
    let status: Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", ran.stdout, ran.stderr));
    assert_eq!(status["servers"]["pets"]["state"], "ready", "{status}");
    assert_eq!(status["servers"]["fan"]["state"], "unavailable", "{status}");
    let detail = status["servers"]["fan"]["problem"]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(
        detail.contains(&format!(
            "{fan_origin}/openapi.json: paths./deep.post: the operation's tool, its references \
             resolved, is larger than 1048576 bytes (maxToolBytes); raise `maxToolBytes`"
        )),
        "{detail}"
    );
    // Its whole life, the host held less than the limit by far (measured: about 40 MiB).
    assert!(
        ran.peak_rss_kib < 128 * 1024,
        "peak RSS {} KiB",
        ran.peak_rss_kib
    );
    eprintln!(
        "peak RSS of the host refusing the document: {} KiB",
        ran.peak_rss_kib
    );
    stop_fan.cancel();
    stop_pets.cancel();
}

/// An API that answers 401 unless both of its credentials are right, and its document.
struct Vault {
    origin: String,
    stop: tokio_util::sync::CancellationToken,
    /// Requests answered (credentials right) and refused (401).
    answered: Arc<std::sync::atomic::AtomicUsize>,
    refused: Arc<std::sync::atomic::AtomicUsize>,
}

impl Vault {
    async fn start(token: &'static str, key: &'static str) -> Self {
        use axum::http::{HeaderMap, StatusCode, header};
        use axum::response::IntoResponse;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let answered = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let (ok, no) = (answered.clone(), refused.clone());
        let document = json!({
            "openapi": "3.1.0",
            "info": {"title": "Vault", "version": "1"},
            "servers": [{"url": "/v1"}],
            "paths": {"/whoami": {"get": {"operationId": "whoami", "summary": "Who the caller is"}}}
        });
        let router = axum::Router::new()
            .route(
                "/openapi.json",
                axum::routing::get(move || async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        document.to_string(),
                    )
                }),
            )
            .route(
                "/v1/whoami",
                axum::routing::get(move |headers: HeaderMap| {
                    let (ok, no) = (ok.clone(), no.clone());
                    async move {
                        let text = |name: header::HeaderName| {
                            headers
                                .get(name)
                                .and_then(|value| value.to_str().ok())
                                .unwrap_or_default()
                                .to_owned()
                        };
                        let authorization = text(header::AUTHORIZATION);
                        let api_key = text(header::HeaderName::from_static("x-api-key"));
                        if authorization != format!("Bearer {token}") || api_key != key {
                            no.fetch_add(1, Ordering::SeqCst);
                            return (StatusCode::UNAUTHORIZED, "missing or wrong credentials")
                                .into_response();
                        }
                        ok.fetch_add(1, Ordering::SeqCst);
                        // Echoed, as a careless API would: the caller must see it scrubbed.
                        let body =
                            json!({"user": "ada", "authorization": authorization, "key": api_key});
                        (
                            [(header::CONTENT_TYPE, "application/json")],
                            body.to_string(),
                        )
                            .into_response()
                    }
                }),
            );
        let (origin, stop) = serve(router).await;
        Self {
            origin,
            stop,
            answered,
            refused,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_openapi_source_is_added_and_called_and_its_credentials_stay_secret() {
    use std::sync::atomic::Ordering;
    const TOKEN: &str = "vault-bearer-SENTINEL-5a1e";
    const KEY: &str = "vault-key-SENTINEL-77c3";
    let vault = Vault::start(TOKEN, KEY).await;
    let dir = scratch("vault");
    let state = dir.join("state.sqlite").display().to_string();
    let file = dir.join("vault.json");
    std::fs::write(
        &file,
        json!({"kind": "openapi", "name": "vault",
               "spec": format!("{}/openapi.json", vault.origin),
               "bearer": "${OAPI_TOK}", "headers": {"X-Api-Key": "${OAPI_KEY}"}})
        .to_string(),
    )
    .expect("declaration");
    let cli = |args: Vec<String>, token: &str| {
        let mut command = tokio::process::Command::new(EXE);
        command.args(["--state", &state]).args(args).env_clear();
        for key in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(key) {
                command.env(key, value);
            }
        }
        command
            .env("PLURNK_MCP_LOG", "trace")
            .env("PLURNK_MCP_ALLOW_ADD", "true")
            .env("PLURNK_MCP_WORKSPACE_ENV", r#"["OAPI_TOK","OAPI_KEY"]"#)
            .env("OAPI_TOK", token)
            .env("OAPI_KEY", KEY);
        async move { command.output().await.expect("plurnk-mcp runs") }
    };
    let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
    let mut seen = String::new();
    let mut shown = |output: &std::process::Output| {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        seen.push_str(&text);
        text
    };

    let added = cli(
        args(&["add", "vault", "--source", &file.display().to_string()]),
        TOKEN,
    )
    .await;
    let said = shown(&added);
    assert!(added.status.success(), "{said}");
    let called = cli(args(&["call", "vault", "whoami", "{}"]), TOKEN).await;
    let said = shown(&called);
    assert!(called.status.success(), "{said}");
    let result: Value = serde_json::from_slice(&called.stdout).unwrap_or_default();
    assert_eq!(result["structuredContent"]["user"], "ada", "{said}");
    assert_eq!(
        result["structuredContent"]["authorization"], "<redacted>",
        "{said}"
    );
    assert_eq!(result["structuredContent"]["key"], "<redacted>", "{said}");
    assert_eq!(vault.answered.load(Ordering::SeqCst), 1);

    // The API does check: with another token, the call is its 401, a result flagged isError.
    let wrong = cli(
        args(&["call", "vault", "whoami", "{}"]),
        "not-the-vault-token-0000",
    )
    .await;
    let said = shown(&wrong);
    assert_eq!(wrong.status.code(), Some(1), "{said}");
    assert!(said.contains("401 Unauthorized"), "{said}");
    assert!(vault.refused.load(Ordering::SeqCst) >= 1);

    let status = cli(args(&["status", "--json"]), TOKEN).await;
    let said = shown(&status);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
    assert_eq!(status["servers"]["vault"]["state"], "ready", "{said}");

    // Neither credential in any spelling in anything the command line wrote (its trace log
    // included), nor in the state file.
    let lower = seen.to_ascii_lowercase();
    for secret in [TOKEN, KEY] {
        for spelling in [secret.to_owned(), secret.replace('-', "%2D")] {
            assert!(
                !lower.contains(&spelling.to_ascii_lowercase()),
                "{spelling} was shown:\n{seen}"
            );
        }
        let stored = std::fs::read(&state).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&stored).contains(secret));
    }
    assert!(seen.contains("TRACE"), "the log ran at trace level");
    vault.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_deadline_or_its_output_bound_is_killed_and_settles_typed() {
    let dir = scratch("bounds");
    let store = dir.join("state.sqlite");
    let host = host_on(&store).await;
    let workspace = host.workspace("team").await.expect("workspace");
    workspace
        .add(source(
            "bounded",
            SourceKind::Cli,
            bounded_declaration(),
            &dir.join("b.json"),
        ))
        .await
        .expect("added");
    for (tool, kind) in [("hang", "timeout"), ("flood", "output-too-large")] {
        let started = std::time::Instant::now();
        match workspace
            .call_tool("bounded", tool, json!({}), CallOptions::default())
            .await
        {
            Err(CallError::Remote {
                code,
                data,
                message,
                ..
            }) => {
                assert_eq!(code, plurnk_mcp::sources::server::SOURCE_ERROR, "{message}");
                assert_eq!(
                    data.as_ref().and_then(|d| d["kind"].as_str()),
                    Some(kind),
                    "{message}"
                );
            }
            other => panic!("{tool} settles with a typed error: {other:?}"),
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{tool}"
        );
    }
    // Killed with its group: no `sleep 30` of ours is left.
    let left = Command::new("pgrep")
        .args(["-f", "sleep 30 & wait"])
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    assert!(left.is_empty(), "the hung call's group is gone: {left}");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declarations_in_a_directory_are_checked_at_start_and_a_collision_names_both() {
    let dir = scratch("directory");
    let declarations = dir.join("sources");
    std::fs::create_dir_all(&declarations).expect("dir");
    let write = |name: &str, text: String| {
        std::fs::write(declarations.join(name), text).expect("write");
    };
    write(
        "git.json",
        json!({"kind": "cli", "name": "git", "command": "git",
               "tools": [{"name": "log", "args": ["log"]}]})
        .to_string(),
    );
    write("torn.json", "{\"kind\": \"cli\",".to_owned());
    let shown = |name: &str| declarations.join(name).display().to_string();
    let env = |extra: &[(&str, String)]| -> BTreeMap<String, String> {
        let mut map: BTreeMap<String, String> = extra
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect();
        map.insert(
            "PLURNK_MCP_SOURCES".into(),
            declarations.display().to_string(),
        );
        map
    };
    // A file that is not JSON, and two claimants of one alias, fail the configuration.
    let errors = match HostConfig::from_env(env(&[("PLURNK_MCP_GIT", "/usr/bin/git-mcp".into())])) {
        Ok(_) => panic!("a collision fails the configuration"),
        Err(errors) => errors.to_string(),
    };
    assert!(
        errors.contains("\"git\" is claimed twice")
            && errors.contains("PLURNK_MCP_GIT")
            && errors.contains(&shown("git.json")),
        "{errors}"
    );
    assert!(
        errors.contains(&format!("{}: line 1 column", shown("torn.json"))),
        "{errors}"
    );

    // Two kinds claiming one alias: the error names both files.
    std::fs::remove_file(declarations.join("torn.json")).expect("remove");
    write(
        "pets.json",
        json!({"kind": "openapi", "name": "git", "spec": "https://example.com/openapi.json"})
            .to_string(),
    );
    let errors = match HostConfig::from_env(env(&[])) {
        Ok(_) => panic!("two sources of one alias fail the configuration"),
        Err(errors) => errors.to_string(),
    };
    assert!(
        errors.contains("\"git\" is claimed twice")
            && errors.contains(&shown("git.json"))
            && errors.contains(&shown("pets.json")),
        "{errors}"
    );
    std::fs::remove_file(declarations.join("pets.json")).expect("remove");

    // A declaration its reader refuses fails the start, with every fault of it.
    write(
        "broken.json",
        json!({"kind": "cli", "name": "broken", "command": "git", "colour": true,
               "tools": [{"name": "a b"}]})
        .to_string(),
    );
    let config = match HostConfig::from_env(env(&[])) {
        Ok(config) => config,
        Err(errors) => panic!("well-formed files: {errors}"),
    };
    let said = match Host::start(config).await {
        Ok(_) => panic!("a refused declaration fails the start"),
        Err(error) => error.to_string(),
    };
    assert!(
        said.contains(&format!("{}: colour", shown("broken.json"))),
        "{said}"
    );
    assert!(
        said.contains(&format!("{}: tools[0].name", shown("broken.json"))),
        "{said}"
    );

    // The good declaration alone is a service source like a configured server.
    std::fs::remove_file(declarations.join("broken.json")).expect("remove");
    let mut map = env(&[]);
    map.insert("PLURNK_MCP_ENABLED".into(), json!(["git"]).to_string());
    let config = HostConfig::from_env(map).expect("valid");
    assert_eq!(
        config
            .servers()
            .get("git")
            .map(|git| git.transport().kind()),
        Some(TransportKind::Cli)
    );
    let host = Host::start(config).await.expect("starts");
    let snapshot = host.default_workspace().snapshot();
    let git = snapshot.server("git").expect("configured");
    assert_eq!(git.state, ServerState::Ready, "{:?}", git.problem);
    shutdown_clean(host).await;
}

/// What a call through the host refuses, as the caller sees it: `-32602` and the message.
async fn refused(
    workspace: &plurnk_mcp::Workspace,
    alias: &str,
    tool: &str,
    arguments: Value,
) -> String {
    match workspace
        .call_tool(alias, tool, arguments, CallOptions::default())
        .await
    {
        Err(CallError::Remote { code, message, .. }) => {
            assert_eq!(code, -32602, "{message}");
            message
        }
        other => panic!("{alias}/{tool} is refused: {other:?}"),
    }
}

/// The faults of a declaration the reader refuses, as one message.
fn refused_declaration(alias: &str, declaration: Value, origin: &Path) -> String {
    match plurnk_mcp::sources::definition(
        alias,
        SourceKind::Cli,
        declaration,
        &origin.display().to_string(),
    ) {
        Ok(_) => panic!("{alias}: the declaration is refused"),
        Err(errors) => errors.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_never_invents_a_command_line_for_find_git_or_sh() {
    let dir = scratch("injection");
    let repo = repository(&dir);
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    std::fs::write(work.join("a.txt"), "a\n").expect("write");
    let pwned = |name: &str| work.join(name).exists() || repo.join(name).exists();
    let host = host_on(&dir.join("state.sqlite")).await;
    let workspace = host.workspace("team").await.expect("workspace");

    // find: an array with a flag and no `repeat` passed `-exec touch PWNED ;` after one
    // `-name`. It is refused at declaration, saying what to add.
    let mut find = json!({
        "kind": "cli", "name": "find", "command": "/usr/bin/find", "cwd": work,
        "tools": [{"name": "byname", "args": ["."],
                   "params": [{"name": "names", "type": "array", "flag": "-name"}]}]
    });
    let said = refused_declaration("find", find.clone(), &dir.join("find.json"));
    assert!(
        said.contains("find.json: tools[0].params[0].repeat: is missing")
            && said.contains("add \"repeat\": true"),
        "{said}"
    );
    // With `repeat`, every item gets its own flag, and an item that starts with '-' is refused
    // before anything runs.
    find["tools"][0]["params"][0]["repeat"] = json!(true);
    workspace
        .add(source(
            "find",
            SourceKind::Cli,
            find,
            &dir.join("find.json"),
        ))
        .await
        .expect("find is added");
    let message = refused(
        &workspace,
        "find",
        "byname",
        json!({"names": ["*.txt", "-exec", "touch", "PWNED", ";"]}),
    )
    .await;
    assert!(
        message.contains(
            "argument \"names\" item 2 is \"-exec\", which starts with '-' and would be read as \
             an option"
        ),
        "{message}"
    );
    assert!(!pwned("PWNED"), "find ran -exec");
    let found = workspace
        .call_tool(
            "find",
            "byname",
            json!({"names": ["*.txt"]}),
            CallOptions::default(),
        )
        .await
        .expect("find runs");
    assert_eq!(found.text().trim(), "./a.txt");

    // git: `--output=FILE` writes a file wherever it lands among the options.
    let mut git = json!({
        "kind": "cli", "name": "history", "command": "git", "cwd": repo,
        "args": ["-c", "color.ui=never", "--no-pager"],
        "env": {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"},
        "tools": [
            {"name": "by", "args": ["log", "--oneline"],
             "params": [{"name": "authors", "type": "array", "flag": "--author"}]},
            {"name": "show", "args": ["log", "--oneline"],
             "params": [{"name": "revisions", "type": "array"}]},
            {"name": "touched", "args": ["log", "--oneline"], "endOfOptions": true,
             "params": [{"name": "paths", "type": "array", "required": true}]}
        ]
    });
    let said = refused_declaration("history", git.clone(), &dir.join("git.json"));
    assert!(
        said.contains("git.json: tools[0].params[0].repeat: is missing"),
        "{said}"
    );
    git["tools"][0]["params"][0]["repeat"] = json!(true);
    workspace
        .add(source(
            "history",
            SourceKind::Cli,
            git,
            &dir.join("git.json"),
        ))
        .await
        .expect("git is added");
    let message = refused(
        &workspace,
        "history",
        "by",
        json!({"authors": ["T", "--output=PWNED-A"]}),
    )
    .await;
    assert!(
        message.contains("argument \"authors\" item 2 is \"--output=PWNED-A\""),
        "{message}"
    );
    // Every item of a positional array, not only the first.
    let message = refused(
        &workspace,
        "history",
        "show",
        json!({"revisions": ["HEAD", "--output=PWNED-B"]}),
    )
    .await;
    assert!(
        message.contains("argument \"revisions\" item 2 is \"--output=PWNED-B\""),
        "{message}"
    );
    // After `--`, git reads it as a path: no file is written, and the log is empty.
    let touched = workspace
        .call_tool(
            "history",
            "touched",
            json!({"paths": ["--output=PWNED-C"]}),
            CallOptions::default(),
        )
        .await
        .expect("git runs");
    assert!(!touched.is_error, "{}", touched.text());
    assert_eq!(touched.text(), "");
    let logged = workspace
        .call_tool(
            "history",
            "touched",
            json!({"paths": ["notes.txt"]}),
            CallOptions::default(),
        )
        .await
        .expect("git runs");
    assert!(
        logged.text().contains("the first commit"),
        "{}",
        logged.text()
    );
    for name in ["PWNED-A", "PWNED-B", "PWNED-C"] {
        assert!(!pwned(name), "git wrote {name}");
    }

    // sh: `-o errexit -c 'touch PWNED'` makes an option list run code.
    let mut shell = json!({
        "kind": "cli", "name": "lint", "command": "sh", "cwd": work,
        "tools": [{"name": "run",
                   "params": [{"name": "options", "type": "array", "flag": "-o"},
                              {"name": "script", "required": true}]}]
    });
    let said = refused_declaration("lint", shell.clone(), &dir.join("sh.json"));
    assert!(
        said.contains("sh.json: tools[0].params[0].repeat: is missing"),
        "{said}"
    );
    shell["tools"][0]["params"][0]["repeat"] = json!(true);
    workspace
        .add(source("lint", SourceKind::Cli, shell, &dir.join("sh.json")))
        .await
        .expect("sh is added");
    let message = refused(
        &workspace,
        "lint",
        "run",
        json!({"options": ["errexit", "-c", "touch PWNED-D"], "script": "a.txt"}),
    )
    .await;
    assert!(
        message.contains("argument \"options\" item 2 is \"-c\""),
        "{message}"
    );
    let message = refused(&workspace, "lint", "run", json!({"script": "-c"})).await;
    assert!(
        message.contains("argument \"script\" is \"-c\""),
        "{message}"
    );
    assert!(!pwned("PWNED-D"), "sh ran the model's code");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_json_output_that_is_an_object_becomes_structured_content() {
    let dir = scratch("shapes");
    let store = dir.join("state.sqlite");
    let host = host_on(&store).await;
    let workspace = host.workspace("team").await.expect("workspace");
    let printing = |name: &str, output: &str| {
        json!({"name": name, "description": format!("Prints {output}"), "json": true,
               "args": ["-c", format!("printf '%s' '{output}'")]})
    };
    workspace
        .add(source(
            "shapes",
            SourceKind::Cli,
            json!({"kind": "cli", "name": "shapes", "command": "sh", "tools": [
                printing("object", r#"{"a": [1, 2]}"#),
                printing("array", "[1, 2]"),
                printing("number", "42"),
                printing("stream", r#"{"a": 1} {"b": 2}"#),
            ]}),
            &dir.join("shapes.json"),
        ))
        .await
        .expect("added");
    // structuredContent is an object, as MCP has it; any other JSON output stays in the
    // text alone, exactly as the program wrote it (no envelope a client could mistake for
    // the output).
    for (tool, structured, text) in [
        ("object", Some(json!({"a": [1, 2]})), r#"{"a": [1, 2]}"#),
        ("array", None, "[1, 2]"),
        ("number", None, "42"),
        ("stream", None, r#"{"a": 1} {"b": 2}"#),
    ] {
        let result = workspace
            .call_tool("shapes", tool, json!({}), CallOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
        assert!(!result.is_error, "{tool}: {}", result.result);
        assert_eq!(
            result.result.get("structuredContent"),
            structured.as_ref(),
            "{tool}: {}",
            result.result
        );
        assert_eq!(result.text(), text, "{tool}");
    }
    shutdown_clean(host).await;
}
