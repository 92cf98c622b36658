//! Tests of the CLI adapter against real programs: git on a repository made here, jq,
//! sed and wc, and `sh` for deadlines, output bounds and exits.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::sources::SourceResult;

/// A directory of its own under the system's temporary directory, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(label: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "plurnk-source-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `program` is on this machine's PATH.
pub(crate) fn installed(program: &str) -> bool {
    resolve_program(program, std::env::var_os("PATH").as_deref()).is_ok()
}

/// Waits (at most 5 s) until process `pid` is gone: no longer in `/proc`, or a zombie.
pub(crate) async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command, which is in parentheses and may hold spaces.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next());
        if matches!(state, None | Some("Z" | "X")) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads the pid a program wrote to `file`, waiting (at most 5 s) for it to appear.
pub(crate) async fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Ok(pid) = text.trim().parse() {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn no_references(raw: &str) -> Result<String, crate::config::ConfigError> {
    Ok(raw.to_owned())
}

fn open(declaration: Value) -> CliSource {
    let parsed = CliDeclaration::parse(&declaration, "test.json").expect("a valid declaration");
    parsed
        .open(
            "test.json",
            &no_references,
            crate::protocol::Children::new(crate::protocol::Inherited::defaults()),
        )
        .expect("it opens")
}

async fn call(
    source: &CliSource,
    tool: &str,
    arguments: Value,
) -> Result<SourceResult, SourceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    source.call(tool, arguments, Duration::from_secs(60)).await
}

fn git_declaration(repo: &Path) -> Value {
    json!({
        "name": "git",
        "command": "git",
        "args": ["-c", "user.name=Plurnk Test", "-c", "user.email=test@example.com",
                 "-c", "color.ui=never", "--no-pager"],
        "env": { "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1" },
        "cwd": repo,
        "tools": [
            {
                "name": "log",
                "description": "Show the commit log",
                "args": ["log", "--no-decorate"],
                "params": [
                    { "name": "maxCount", "type": "integer", "flag": "--max-count",
                      "description": "at most this many commits" },
                    { "name": "oneline", "type": "boolean", "flag": "--oneline" },
                    { "name": "revision", "description": "where to start" }
                ]
            },
            { "name": "status", "args": ["status", "--porcelain=v1"] },
            {
                "name": "diff",
                "args": ["diff"],
                "params": [{ "name": "stat", "type": "boolean", "flag": "--stat" }]
            }
        ]
    })
}

#[tokio::test]
async fn git_log_status_and_diff_on_a_real_repository() {
    let scratch = Scratch::new("git");
    let repo = scratch.path();
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=Plurnk Test",
                "-c",
                "user.email=test@example.com",
            ])
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {output:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("notes.txt"), "first\n").expect("write");
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "the first commit"]);
    std::fs::write(repo.join("notes.txt"), "first\nsecond\n").expect("write");
    std::fs::write(repo.join("new.txt"), "new\n").expect("write");
    let source = open(git_declaration(repo));

    let tools = source.tools();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["log", "status", "diff"]);
    assert_eq!(
        Value::Object(tools[0].input_schema.clone()),
        json!({
            "type": "object",
            "properties": {
                "maxCount": { "type": "integer", "description": "at most this many commits" },
                "oneline": { "type": "boolean" },
                "revision": { "type": "string", "description": "where to start" }
            },
            "additionalProperties": false
        })
    );

    let log = call(&source, "log", json!({ "maxCount": 1, "oneline": true }))
        .await
        .expect("log runs");
    assert!(!log.is_error, "{log:?}");
    assert_eq!(log.text.lines().count(), 1, "{}", log.text);
    assert!(
        log.text.trim_end().ends_with(" the first commit"),
        "{}",
        log.text
    );

    let status = call(&source, "status", json!({}))
        .await
        .expect("status runs");
    assert_eq!(status.text, " M notes.txt\n?? new.txt\n");

    let diff = call(&source, "diff", json!({ "stat": false }))
        .await
        .expect("diff runs");
    assert!(diff.text.contains("\n+second\n"), "{}", diff.text);
    let stat = call(&source, "diff", json!({ "stat": true }))
        .await
        .expect("diff runs");
    assert!(stat.text.contains("notes.txt | 1 +"), "{}", stat.text);

    // A non-zero exit is a result the model sees, with git's own words.
    let missing = call(&source, "log", json!({ "revision": "no-such-branch" }))
        .await
        .expect("a result");
    assert!(missing.is_error);
    assert!(
        missing
            .text
            .contains("[git exited with status 128; its stderr ends:]"),
        "{}",
        missing.text
    );
    assert!(missing.text.contains("no-such-branch"), "{}", missing.text);

    // Arguments are checked before anything runs.
    let wrong = call(&source, "log", json!({ "maxCount": "one" })).await;
    assert_eq!(
        wrong,
        Err(SourceError::InvalidArguments(
            "argument \"maxCount\" must be an integer, not a string".into()
        ))
    );
    let unknown = call(&source, "log", json!({ "colour": true })).await;
    assert_eq!(
        unknown,
        Err(SourceError::InvalidArguments(
            "unknown argument \"colour\": this tool takes maxCount, oneline, revision".into()
        ))
    );
    let option = call(&source, "log", json!({ "revision": "--output=/tmp/x" })).await;
    assert!(
        matches!(&option, Err(SourceError::InvalidArguments(m)) if m.contains("starts with '-'")),
        "{option:?}"
    );
    assert_eq!(
        call(&source, "blame", json!({})).await,
        Err(SourceError::UnknownTool("blame".into()))
    );

    let declaration = CliDeclaration::parse(&git_declaration(repo), "test.json").expect("valid");
    assert!(matches!(declaration.check().await, Finding::Ready(found) if found.ends_with("/git")));
}

#[tokio::test]
async fn check_finds_a_missing_program_and_a_drifted_version() {
    let missing = CliDeclaration::parse(
        &json!({ "name": "ghost", "command": "plurnk-no-such-program", "tools": [{ "name": "x" }] }),
        "test.json",
    )
    .expect("valid");
    let Finding::Missing(problem) = missing.check().await else {
        panic!("a missing program is missing");
    };
    assert!(
        problem.starts_with("\"plurnk-no-such-program\" is not on PATH ("),
        "{problem}"
    );

    let installed = std::process::Command::new("git")
        .arg("--version")
        .output()
        .expect("git runs");
    let installed = String::from_utf8_lossy(&installed.stdout).trim().to_owned();
    let mut declaration = json!({
        "name": "git", "command": "git", "version": installed, "tools": [{ "name": "x" }]
    });
    let same = CliDeclaration::parse(&declaration, "test.json").expect("valid");
    assert!(matches!(same.check().await, Finding::Ready(found) if found.contains(&installed)));
    declaration["version"] = json!("git version 1.0.0");
    let old = CliDeclaration::parse(&declaration, "test.json").expect("valid");
    assert_eq!(
        old.check().await,
        Finding::VersionDrift {
            declared: "git version 1.0.0".into(),
            installed,
        }
    );
}

#[tokio::test]
async fn jq_filters_standard_input_into_structured_content() {
    if !installed("jq") {
        eprintln!("skipped: jq is not installed on this machine");
        return;
    }
    let source = open(json!({
        "name": "jq",
        "command": "jq",
        "tools": [{
            "name": "query",
            "args": ["-c"],
            "json": true,
            "params": [
                { "name": "filter", "required": true },
                { "name": "input", "stdin": true, "required": true },
                { "name": "raw", "type": "boolean", "flag": "-r" }
            ]
        }]
    }));
    let input = r#"{"name": "plurnk", "tags": ["mcp", "host"]}"#;
    let one = call(
        &source,
        "query",
        json!({ "filter": ".tags", "input": input }),
    )
    .await
    .expect("jq runs");
    assert_eq!(one.text, "[\"mcp\",\"host\"]\n");
    assert_eq!(one.structured, Some(json!(["mcp", "host"])));
    // A stream of values is an array of them.
    let stream = call(
        &source,
        "query",
        json!({ "filter": ".tags[]", "input": input }),
    )
    .await
    .expect("jq runs");
    assert_eq!(stream.structured, Some(json!(["mcp", "host"])));
    // Output that is not JSON, from a tool that promised it, is an error result.
    let raw = call(
        &source,
        "query",
        json!({ "filter": ".tags | join(\" and \")", "input": input, "raw": true }),
    )
    .await
    .expect("jq runs");
    assert!(raw.is_error);
    assert!(
        raw.text
            .starts_with("mcp and host\n[jq wrote output that is not JSON"),
        "{}",
        raw.text
    );
    // A filter jq cannot compile: its exit and its message.
    let broken = call(&source, "query", json!({ "filter": ".[", "input": input }))
        .await
        .expect("a result");
    assert!(broken.is_error);
    assert!(
        broken
            .text
            .contains("[jq exited with status 3; its stderr ends:]"),
        "{}",
        broken.text
    );
    assert_eq!(
        call(&source, "query", json!({ "filter": "." })).await,
        Err(SourceError::InvalidArguments(
            "missing required argument \"input\": pass it as a string".into()
        ))
    );
}

#[tokio::test]
async fn sed_and_wc_read_standard_input() {
    let source = open(json!({
        "name": "text",
        "command": "sed",
        "tools": [{
            "name": "substitute",
            "params": [
                { "name": "expression", "flag": "-e", "type": "array", "repeat": true },
                { "name": "text", "stdin": true }
            ]
        }]
    }));
    let sed = call(
        &source,
        "substitute",
        json!({ "expression": ["s/cat/dog/", "s/sat/stood/"], "text": "the cat sat\n" }),
    )
    .await
    .expect("sed runs");
    assert_eq!(sed.text, "the dog stood\n");

    let source = open(json!({
        "name": "count",
        "command": "/usr/bin/wc",
        "tools": [{
            "name": "bytes",
            "args": ["-c"],
            "params": [{ "name": "text", "stdin": true }]
        }]
    }));
    let counted = call(&source, "bytes", json!({ "text": "hello" }))
        .await
        .expect("wc runs");
    assert_eq!(counted.text.trim(), "5");
    // Without the stdin parameter, stdin is closed: nothing to count.
    let empty = call(&source, "bytes", json!({})).await.expect("wc runs");
    assert_eq!(empty.text.trim(), "0");
}

fn sh(script: &str, timeout_ms: u64, max_output_bytes: usize) -> CliSource {
    open(json!({
        "name": "sh",
        "command": "sh",
        "args": ["-c", script, "sh"],
        "timeoutMs": timeout_ms,
        "maxOutputBytes": max_output_bytes,
        "tools": [{ "name": "run", "params": [{ "name": "file", "required": true }] }]
    }))
}

#[tokio::test]
async fn a_call_past_its_deadline_is_killed_with_its_group() {
    let scratch = Scratch::new("deadline");
    let pidfile = scratch.path().join("grandchild");
    // The leader waits on a grandchild sleep of its own group.
    let source = sh("sleep 30 & echo $! > \"$1\"; wait", 300, 10_000);
    let started = Instant::now();
    let outcome = call(&source, "run", json!({ "file": pidfile })).await;
    assert_eq!(outcome, Err(SourceError::Timeout { timeout_ms: 300 }));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let grandchild = pid_in(&pidfile).await;
    assert!(
        gone(grandchild).await,
        "the grandchild sleep {grandchild} outlived its call"
    );
    // The caller's deadline wins when it is the shorter one.
    let Value::Object(arguments) = json!({ "file": scratch.path().join("second") }) else {
        unreachable!()
    };
    let shorter = source
        .call("run", arguments, Duration::from_millis(100))
        .await;
    assert_eq!(shorter, Err(SourceError::Timeout { timeout_ms: 100 }));
}

#[tokio::test]
async fn output_past_its_bound_is_stopped_and_killed() {
    let scratch = Scratch::new("flood");
    let pidfile = scratch.path().join("leader");
    let source = sh("echo $$ > \"$1\"; exec yes", 30_000, 10_000);
    let outcome = call(&source, "run", json!({ "file": pidfile })).await;
    assert_eq!(outcome, Err(SourceError::OutputTooLarge { limit: 10_000 }));
    let leader = pid_in(&pidfile).await;
    assert!(gone(leader).await, "yes ({leader}) outlived its call");
    // Standard error counts too.
    let source = sh("exec yes >&2", 30_000, 10_000);
    let outcome = call(&source, "run", json!({ "file": "x" })).await;
    assert_eq!(outcome, Err(SourceError::OutputTooLarge { limit: 10_000 }));
}

#[tokio::test]
async fn a_non_zero_exit_is_an_error_result_with_the_end_of_stderr() {
    let source = sh("echo out; echo \"err: $1\" >&2; exit 3", 5_000, 10_000);
    let result = call(&source, "run", json!({ "file": "named" }))
        .await
        .expect("a result");
    assert_eq!(
        result,
        SourceResult {
            text: "out\n[sh exited with status 3; its stderr ends:]\nerr: named".into(),
            structured: None,
            is_error: true,
        }
    );
    let quiet = sh("exit 1", 5_000, 10_000);
    let result = call(&quiet, "run", json!({ "file": "x" }))
        .await
        .expect("a result");
    assert_eq!(result.text, "[sh exited with status 1]");
    // A zero exit's stderr is not the model's business.
    let noisy = sh("echo fine; echo progress >&2", 5_000, 10_000);
    let result = call(&noisy, "run", json!({ "file": "x" }))
        .await
        .expect("a result");
    assert_eq!(result.text, "fine\n");
    assert!(!result.is_error);
}

#[test]
fn argv_is_flags_in_declaration_order_then_positionals() {
    let tool: CliTool = serde_json::from_value(json!({
        "name": "t",
        "params": [
            { "name": "pattern", "required": true },
            { "name": "count", "type": "integer", "flag": "-n" },
            { "name": "files", "type": "array" },
            { "name": "exclude", "type": "array", "flag": "--exclude", "repeat": true },
            { "name": "quiet", "type": "boolean", "flag": "-q" },
            { "name": "verbose", "type": "boolean", "flag": "-v" },
            { "name": "format", "flag": "--format", "enum": ["json", "text"], "default": "text" },
            { "name": "keys", "type": "array", "flag": "--keys", "repeat": true }
        ]
    }))
    .expect("a tool");
    let Value::Object(arguments) = json!({
        "files": ["a.txt", "b.txt"],
        "pattern": "needle",
        "quiet": true,
        "verbose": false,
        "count": 3,
        "exclude": ["x", "y"],
        "keys": ["k1", 2, true]
    }) else {
        unreachable!()
    };
    let bound = bind(&tool, arguments).expect("binds");
    assert_eq!(
        bound.argv,
        [
            "-n",
            "3",
            "--exclude",
            "x",
            "--exclude",
            "y",
            "-q",
            "--format",
            "text",
            "--keys",
            "k1",
            "--keys",
            "2",
            "--keys",
            "true",
            "needle",
            "a.txt",
            "b.txt"
        ]
    );
    let Value::Object(arguments) = json!({ "pattern": "p", "format": "yaml" }) else {
        unreachable!()
    };
    assert_eq!(
        bind(&tool, arguments),
        Err(SourceError::InvalidArguments(
            "argument \"format\" must be one of \"json\", \"text\", not \"yaml\"".into()
        ))
    );
}

/// What `bind` makes of `arguments` for `tool`.
fn bound(tool: &Value, arguments: Value) -> Result<Vec<String>, SourceError> {
    let tool: CliTool = serde_json::from_value(tool.clone()).expect("a tool");
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    bind(&tool, arguments).map(|bound| bound.argv)
}

#[test]
fn no_item_of_any_parameter_may_start_with_a_dash_unless_declared() {
    let tool = json!({
        "name": "t",
        "params": [
            { "name": "count", "type": "integer", "flag": "-n" },
            { "name": "names", "type": "array", "flag": "-name", "repeat": true },
            { "name": "offset", "type": "integer", "flag": "--offset", "allowDash": true },
            { "name": "files", "type": "array" }
        ]
    });
    let refusal = |which: &str, item: &str| {
        Err(SourceError::InvalidArguments(format!(
            "{which} is \"{item}\", which starts with '-' and would be read as an option: \
             pass a value that does not start with '-'"
        )))
    };
    // A flag's value, an item after the first of a flagged array and of a positional array,
    // and a negative number: each is checked.
    assert_eq!(
        bound(&tool, json!({ "count": -1 })),
        refusal("argument \"count\"", "-1")
    );
    assert_eq!(
        bound(
            &tool,
            json!({ "names": ["*.txt", "-exec", "touch", "x", ";"] })
        ),
        refusal("argument \"names\" item 2", "-exec")
    );
    assert_eq!(
        bound(&tool, json!({ "files": ["a", "b", "--delete"] })),
        refusal("argument \"files\" item 3", "--delete")
    );
    // A long value is quoted only in part.
    let long = format!("-{}", "x".repeat(200));
    assert_eq!(
        bound(&tool, json!({ "files": [long] })),
        refusal(
            "argument \"files\" item 1",
            &format!("-{}\u{2026}", "x".repeat(63))
        )
    );
    // Where the declaration allows it, and with none of them, the argv is what was declared.
    assert_eq!(
        bound(
            &tool,
            json!({ "offset": -5, "names": ["a", "b"], "files": ["c"] })
        ),
        Ok(["-name", "a", "-name", "b", "--offset", "-5", "c"]
            .map(String::from)
            .to_vec())
    );
    // After `--`, a positional may start with '-'; a flag's value still may not.
    let mut ended = tool.clone();
    ended["endOfOptions"] = json!(true);
    assert_eq!(
        bound(&ended, json!({ "count": 2, "files": ["-a", "--b"] })),
        Ok(["-n", "2", "--", "-a", "--b"].map(String::from).to_vec())
    );
    assert_eq!(
        bound(&ended, json!({ "count": -2, "files": ["-a"] })),
        refusal("argument \"count\"", "-2")
    );
    // No positional given, no `--`.
    assert_eq!(
        bound(&ended, json!({ "count": 2 })),
        Ok(["-n", "2"].map(String::from).to_vec())
    );
    // Standard input is no argv: it may start with anything.
    let stdin = json!({ "name": "t", "params": [{ "name": "text", "stdin": true }] });
    let Value::Object(arguments) = json!({ "text": "--help" }) else {
        unreachable!()
    };
    let tool: CliTool = serde_json::from_value(stdin).expect("a tool");
    assert_eq!(
        bind(&tool, arguments).map(|bound| bound.stdin),
        Ok(Some(b"--help".to_vec()))
    );
}

#[test]
fn no_item_may_name_a_response_file_unless_declared_even_after_the_end_of_options() {
    let tool = json!({
        "name": "compile",
        "endOfOptions": true,
        "params": [
            { "name": "define", "flag": "-D" },
            { "name": "address", "flag": "--at", "allowDash": true },
            { "name": "files", "type": "array" }
        ]
    });
    let refusal = |which: &str, item: &str| {
        Err(SourceError::InvalidArguments(format!(
            "{which} is \"{item}\", which starts with '@' and a program that reads response \
             files would read the file it names as options: pass a value that does not start \
             with '@'"
        )))
    };
    assert_eq!(
        bound(&tool, json!({ "define": "@notes.txt" })),
        refusal("argument \"define\"", "@notes.txt")
    );
    // After `--` a '-' is a file name, but gcc still reads `@file` as options.
    assert_eq!(
        bound(&tool, json!({ "files": ["-weird.c", "@notes.txt"] })),
        refusal("argument \"files\" item 2", "@notes.txt")
    );
    // The per-parameter opt-in lets it through, and '@' inside a value is no response file.
    assert_eq!(
        bound(
            &tool,
            json!({ "address": "@home", "define": "X=a@b", "files": ["a.c"] })
        ),
        Ok(["-D", "X=a@b", "--at", "@home", "--", "a.c"]
            .map(String::from)
            .to_vec())
    );
    // A declared value that names one is a fault of the declaration.
    let faults = CliDeclaration::parse(
        &json!({
            "name": "cc",
            "command": "gcc",
            "tools": [{"name": "compile", "params": [
                { "name": "flags", "default": "@defaults.rsp" },
                { "name": "mode", "enum": ["fast", "@slow"] }
            ]}]
        }),
        "cc.json",
    )
    .expect_err("response files declared");
    let said: Vec<String> = faults.iter().map(ToString::to_string).collect();
    assert!(
        said.iter()
            .any(|fault| fault.contains("tools[0].params[0].default")
                && fault.contains("starts with '@'")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|fault| fault.contains("tools[0].params[1].enum[1]")),
        "{said:?}"
    );
}

#[test]
fn every_fault_of_a_declaration_is_reported_with_its_field_and_fix() {
    let faults = CliDeclaration::parse(
        &json!({
            "name": "Git Tools",
            "command": "./bin/git",
            "colour": true,
            "timeoutMs": 0,
            "env": { "1BAD": "x" },
            "cwd": "relative/dir",
            "tools": [
                {
                    "name": "log",
                    "params": [
                        { "name": "n", "type": "integer", "flag": "-n", "default": "ten" },
                        { "name": "n", "type": "boolean" },
                        { "name": "input", "stdin": true, "flag": "-i" },
                        { "name": "more", "stdin": true },
                        { "name": "mode", "enum": ["a", 2], "default": "c" },
                        { "name": "tag", "type": "array", "repeat": true },
                        { "name": "when", "type": "date", "flag": "=x" },
                        { "name": "last", "required": true }
                    ]
                },
                { "name": "log", "extra": 1 },
                { "name": "bad name" },
                {
                    "name": "find",
                    "endOfOptions": true,
                    "params": [
                        { "name": "names", "type": "array", "flag": "-name" },
                        { "name": "all", "type": "boolean", "flag": "-a", "allowDash": true },
                        { "name": "depth", "type": "integer", "flag": "-d", "enum": [1, -1] },
                        { "name": "sort", "flag": "-s", "default": "-size" }
                    ]
                }
            ]
        }),
        "/etc/plurnk/sources/git.json",
    )
    .expect_err("faults");
    let fields: Vec<(&str, &str)> = faults
        .iter()
        .map(|fault| (fault.field.as_str(), fault.problem.as_str()))
        .collect();
    let expected = [
        ("colour", "is not a field of this declaration"),
        ("name", "\"Git Tools\" is not a source name"),
        ("command", "\"./bin/git\" is a relative path"),
        ("env.1BAD", "\"1BAD\" is not an environment variable name"),
        ("cwd", "\"relative/dir\" is a relative path"),
        ("timeoutMs", "0 is out of range"),
        ("tools[0].params[0].default", "\"ten\" is not an integer"),
        ("tools[0].params[1].flag", "a boolean parameter has no flag"),
        (
            "tools[0].params[2].stdin",
            "a stdin parameter also has a flag",
        ),
        ("tools[0].params[4].enum[1]", "2 is not a string"),
        (
            "tools[0].params[4].default",
            "\"c\" is not one of the enum's values",
        ),
        (
            "tools[0].params[5].repeat",
            "repeat applies only to an array parameter with a flag",
        ),
        (
            "tools[0].params[6].type",
            "is not one of string, number, integer, boolean, array",
        ),
        ("tools[0].params[6].flag", "\"=x\" is not a flag"),
        (
            "tools[0].params[1].name",
            "names parameter \"n\" a second time",
        ),
        (
            "tools[0].params[3].stdin",
            "a second parameter is standard input",
        ),
        (
            "tools[0].params[7].flag",
            "a positional parameter follows the positional array \"tag\"",
        ),
        (
            "tools[0].params[7].required",
            "a required positional parameter follows the optional one \"tag\", which would \
             take its place when left out",
        ),
        ("tools[1].extra", "is not a field of this declaration"),
        ("tools[2].name", "\"bad name\" is not a tool name"),
        ("tools[1].name", "names tool \"log\" a second time"),
        (
            "tools[3].params[0].repeat",
            "is missing: after one flag, a program would read the array's second item on as \
             options and operands of their own",
        ),
        (
            "tools[3].params[1].allowDash",
            "allowDash applies only to a parameter whose value is passed in argv",
        ),
        (
            "tools[3].params[2].enum[1]",
            "-1 starts with '-', which a program reads as an option",
        ),
        (
            "tools[3].params[3].default",
            "\"-size\" starts with '-', which a program reads as an option",
        ),
        (
            "tools[3].endOfOptions",
            "the tool has no positional parameter to put after \"--\"",
        ),
    ];
    let mut missing: Vec<_> = expected.iter().filter(|e| !fields.contains(e)).collect();
    let mut extra: Vec<_> = fields.iter().filter(|f| !expected.contains(f)).collect();
    missing.sort();
    extra.sort();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:#?}\nextra {extra:#?}"
    );
    for fault in &faults {
        assert_eq!(fault.origin, "/etc/plurnk/sources/git.json");
        assert!(!fault.fix.is_empty(), "{fault}");
    }
    assert_eq!(
        faults[0].to_string(),
        "/etc/plurnk/sources/git.json: colour: is not a field of this declaration; remove it, \
         or use one of: name, command, args, env, cwd, sandbox, timeoutMs, maxOutputBytes, \
         version, versionArgs, tools"
    );
    // Not an object at all, and an object without its required fields.
    let faults = CliDeclaration::parse(&json!([]), "x.json").expect_err("faults");
    assert_eq!(
        faults[0].to_string(),
        "x.json: (the declaration): is not an object; write a JSON object"
    );
    let faults = CliDeclaration::parse(&json!({}), "x.json").expect_err("faults");
    let fields: Vec<&str> = faults.iter().map(|fault| fault.field.as_str()).collect();
    assert_eq!(fields, ["name", "command", "tools"]);
}

#[test]
fn the_fields_parse_reads_are_the_fields_serde_knows() {
    let full = CliDeclaration {
        name: "n".into(),
        command: "c".into(),
        args: vec!["a".into()],
        env: [("K".to_owned(), "v".to_owned())].into(),
        cwd: Some("/".into()),
        sandbox: Some(crate::config::SandboxPolicy::default()),
        timeout_ms: 1,
        max_output_bytes: 1,
        version: Some("v".into()),
        version_args: vec!["-V".into()],
        tools: vec![CliTool {
            name: "t".into(),
            description: Some("d".into()),
            args: vec!["a".into()],
            params: vec![CliParam {
                name: "p".into(),
                kind: ParamType::Array,
                description: Some("d".into()),
                required: true,
                flag: Some("-p".into()),
                repeat: true,
                default: Some(json!([])),
                allowed: Some(vec![]),
                stdin: true,
                allow_dash: true,
            }],
            json: true,
            end_of_options: true,
        }],
    };
    let value = serde_json::to_value(&full).expect("serializes");
    let keys = |value: &Value| -> Vec<String> {
        value
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let sorted = |known: &[&str]| {
        let mut known: Vec<String> = known.iter().map(|k| (*k).to_owned()).collect();
        known.sort();
        known
    };
    assert_eq!(keys(&value), sorted(DECLARATION_FIELDS));
    assert_eq!(keys(&value["tools"][0]), sorted(TOOL_FIELDS));
    assert_eq!(keys(&value["tools"][0]["params"][0]), sorted(PARAM_FIELDS));
    let back: CliDeclaration = serde_json::from_value(value).expect("deserializes");
    assert_eq!(back, full);
}

#[test]
fn expanded_references_are_opened_and_their_faults_named() {
    let declaration = CliDeclaration::parse(
        &json!({
            "name": "gh",
            "command": "gh",
            "env": { "GH_TOKEN": "${GITHUB_TOKEN}", "GH_HOST": "${MISSING}" },
            "tools": [{ "name": "x" }]
        }),
        "gh.json",
    )
    .expect("valid");
    let environment =
        crate::config::Environment::new([("GITHUB_TOKEN", "cli-adapter-secret-8675309")]);
    let expand = |raw: &str| environment.expand(raw);
    let faults = declaration
        .open(
            "gh.json",
            &expand,
            crate::protocol::Children::new(crate::protocol::Inherited::defaults()),
        )
        .expect_err("a fault");
    assert_eq!(
        faults[0].to_string(),
        "gh.json: env.GH_HOST: the value refers to ${MISSING}, which is not set in the \
         environment: set MISSING or change the reference; define the variable it \
         references, or write the value itself"
    );
    // The secret was registered with the scrubber even though the open failed on another.
    assert_eq!(
        crate::redact::scrub("token cli-adapter-secret-8675309"),
        format!("token {}", crate::redact::REDACTED)
    );
}

#[tokio::test]
async fn a_leader_that_exits_takes_its_background_children_with_it() {
    let scratch = Scratch::new("leader-exits");
    let pidfile = scratch.path().join("child");
    // The leader leaves a child in its group that holds the output pipes and carries no mark
    // (its environment is cleared): only killing the group after the leader ends the pipes.
    let source = sh(
        "env -i \"$(command -v sleep)\" 30 & echo $! > \"$1\"",
        5_000,
        10_000,
    );
    let started = Instant::now();
    let result = call(&source, "run", json!({ "file": pidfile }))
        .await
        .expect("the leader's exit is the call's end, not the deadline");
    assert!(!result.is_error, "{result:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let child = pid_in(&pidfile).await;
    assert!(
        gone(child).await,
        "the background child {child} outlived its call"
    );
}

#[tokio::test]
async fn a_setsid_descendant_holding_the_pipes_is_killed_when_the_leader_exits_or_the_deadline_passes()
 {
    let scratch = Scratch::new("setsid");
    // A descendant in a session of its own, holding the pipes, that writes its own pid; the
    // leader goes on once it has.
    let escape = "setsid sh -c 'echo $$ > \"$1\"; exec sleep 30' sh \"$1\" & \
                  until [ -s \"$1\" ]; do sleep 0.01; done;";
    let exits = sh(escape, 5_000, 10_000);
    let pidfile = scratch.path().join("after-exit");
    let started = Instant::now();
    let result = call(&exits, "run", json!({ "file": pidfile }))
        .await
        .expect("the leader's exit is the call's end");
    assert!(!result.is_error, "{result:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let escaped = pid_in(&pidfile).await;
    assert!(
        gone(escaped).await,
        "the setsid descendant {escaped} outlived its call"
    );

    // The leader waits for it: the call ends at its deadline, and so does the descendant.
    let waits = sh(&format!("{escape} wait"), 1_000, 10_000);
    let pidfile = scratch.path().join("after-deadline");
    assert_eq!(
        call(&waits, "run", json!({ "file": pidfile })).await,
        Err(SourceError::Timeout { timeout_ms: 1_000 })
    );
    let escaped = pid_in(&pidfile).await;
    assert!(
        gone(escaped).await,
        "the setsid descendant {escaped} outlived its deadline"
    );
}
