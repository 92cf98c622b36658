//! Tests of the script adapter against real interpreters: a bash script, a Python script
//! and a shebang script, each with its parameters in its header.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::sources::SourceResult;
use crate::sources::cli::tests::{Scratch, gone, installed, pid_in};

const GREET: &str = r#"#!/usr/bin/env bash
# @tool greet
# @description Greets someone,
# @description as often as asked.
# @param name:string who to greet
# @param times?:integer=2 how often
# @param shout:boolean in capitals
# @param extra?:json anything else
set -eu
printf '[%s]' "$@"; echo
times=1; shout=; extra=
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=$2; shift 2 ;;
    --times) times=$2; shift 2 ;;
    --shout) shout=1; shift ;;
    --extra) extra=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 64 ;;
  esac
done
for _ in $(seq "$times"); do
  if [ -n "$shout" ]; then echo "HELLO $name" | tr a-z A-Z; else echo "hello $name"; fi
done
if [ -n "$extra" ]; then echo "extra=$extra"; fi
"#;

const ADD: &str = r#"#!/usr/bin/env python3
# @description Adds two numbers.
# @param a:number the first
# @param b:number=1 the second
# @param verbose:boolean show the sum as a sentence
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("--a", type=float, required=True)
parser.add_argument("--b", type=float, default=0)
parser.add_argument("--verbose", action="store_true")
args = parser.parse_args()
total = args.a + args.b
print(f"{args.a} + {args.b} = {total}" if args.verbose else json.dumps({"sum": total}))
"#;

fn write(dir: &Path, name: &str, text: &str, executable: bool) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("the script is written");
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

fn open(declaration: Value) -> ScriptSource {
    let parsed = ScriptDeclaration::parse(&declaration, "/etc/plurnk/sources/s.json")
        .expect("a valid declaration");
    parsed
        .open(
            "s.json",
            &|raw: &str| Ok(raw.to_owned()),
            crate::protocol::Children::new(crate::protocol::Inherited::defaults()),
        )
        .expect("it opens")
}

async fn call(
    source: &ScriptSource,
    tool: &str,
    arguments: Value,
) -> Result<SourceResult, SourceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    source.call(tool, arguments, Duration::from_secs(60)).await
}

#[tokio::test]
async fn a_bash_script_is_one_tool_with_its_header_parameters() {
    let scratch = Scratch::new("bash");
    let path = write(scratch.path(), "greet.sh", GREET, false);
    let source = open(json!({ "name": "greeter", "path": path, "runtime": "bash" }));
    let tools = source.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "greet");
    assert_eq!(
        tools[0].description.as_deref(),
        Some("Greets someone, as often as asked.")
    );
    assert_eq!(
        Value::Object(tools[0].input_schema.clone()),
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "who to greet" },
                "times": { "type": "integer", "description": "how often", "default": 2 },
                "shout": { "type": "boolean", "description": "in capitals" },
                "extra": { "description": "anything else" }
            },
            "required": ["name"],
            "additionalProperties": false
        })
    );
    // The default is passed; a false boolean is nothing.
    let plain = call(&source, "greet", json!({ "name": "ada", "shout": false }))
        .await
        .expect("it runs");
    assert_eq!(
        plain.text,
        "[--name][ada][--times][2]\nhello ada\nhello ada\n"
    );
    assert!(!plain.is_error);
    let loud = call(
        &source,
        "greet",
        json!({ "name": "ada lovelace", "times": 1, "shout": true, "extra": { "k": [1] } }),
    )
    .await
    .expect("it runs");
    assert_eq!(
        loud.text,
        "[--name][ada lovelace][--times][1][--shout][--extra][{\"k\":[1]}]\n\
         HELLO ADA LOVELACE\nextra={\"k\":[1]}\n"
    );
    assert_eq!(
        call(&source, "greet", json!({ "times": 1 })).await,
        Err(SourceError::InvalidArguments(
            "missing required argument \"name\": pass it as a string".into()
        ))
    );
    assert_eq!(
        call(&source, "greet", json!({ "name": "x", "times": 1.5 })).await,
        Err(SourceError::InvalidArguments(
            "argument \"times\" must be an integer, not a number with a fraction".into()
        ))
    );
    assert_eq!(
        call(&source, "greeter", json!({})).await,
        Err(SourceError::UnknownTool("greeter".into()))
    );
    let declaration = ScriptDeclaration::parse(
        &json!({ "name": "greeter", "path": path, "runtime": "bash" }),
        "s.json",
    )
    .expect("valid");
    assert!(matches!(declaration.check().await, Finding::Ready(found) if found.contains("bash")));
}

#[tokio::test]
async fn a_python_script_is_run_by_python3() {
    let scratch = Scratch::new("python");
    let path = write(scratch.path(), "add.py", ADD, false);
    let source = open(json!({ "name": "add", "path": path, "runtime": "python" }));
    assert_eq!(source.tools()[0].name, "add");
    let sum = call(&source, "add", json!({ "a": 2.5 }))
        .await
        .expect("it runs");
    assert_eq!(sum.text, "{\"sum\": 3.5}\n");
    let sentence = call(&source, "add", json!({ "a": 2, "b": 3, "verbose": true }))
        .await
        .expect("it runs");
    assert_eq!(sentence.text, "2.0 + 3.0 = 5.0\n");
    let mut declaration = json!({ "name": "add", "path": path, "runtime": "python" });
    let python = ScriptDeclaration::parse(&declaration, "s.json").expect("valid");
    assert!(matches!(python.check().await, Finding::Ready(_)));
    declaration["version"] = json!("Python 0.1");
    let old = ScriptDeclaration::parse(&declaration, "s.json").expect("valid");
    let Finding::VersionDrift {
        declared,
        installed,
    } = old.check().await
    else {
        panic!("python3 is not 0.1");
    };
    assert_eq!(declared, "Python 0.1");
    assert!(installed.starts_with("Python 3."), "{installed}");
}

#[tokio::test]
async fn a_shebang_script_runs_itself_and_a_past_deadline_kills_its_group() {
    let scratch = Scratch::new("shebang");
    let path = write(scratch.path(), "greet", GREET, true);
    let source = open(json!({ "name": "greet", "path": path }));
    let hello = call(&source, "greet", json!({ "name": "bob", "times": 1 }))
        .await
        .expect("it runs");
    assert_eq!(hello.text, "[--name][bob][--times][1]\nhello bob\n");

    let pidfile = scratch.path().join("grandchild");
    let slow = write(
        scratch.path(),
        "slow",
        "#!/bin/sh\n# @param file:string where the pid goes\nsleep 30 & echo $! > \"$2\"; wait\n",
        true,
    );
    let source = open(json!({ "name": "slow", "path": slow, "timeoutMs": 300 }));
    assert_eq!(
        call(&source, "slow", json!({ "file": pidfile })).await,
        Err(SourceError::Timeout { timeout_ms: 300 })
    );
    let grandchild = pid_in(&pidfile).await;
    assert!(
        gone(grandchild).await,
        "sleep {grandchild} outlived its call"
    );
}

#[tokio::test]
async fn check_names_a_missing_script_runtime_or_shebang() {
    let scratch = Scratch::new("check");
    let check = |declaration: Value| async move {
        ScriptDeclaration::parse(&declaration, "s.json")
            .expect("valid")
            .check()
            .await
    };
    let absent = scratch.path().join("absent.sh");
    let Finding::Missing(problem) = check(json!({ "name": "a", "path": absent })).await else {
        panic!("an absent script is missing");
    };
    assert!(problem.starts_with(&format!("script {} cannot be read", absent.display())));

    let plain = write(scratch.path(), "plain", "echo hi\n", true);
    assert_eq!(
        check(json!({ "name": "a", "path": plain })).await,
        Finding::Missing(format!(
            "script {} does not start with #!: add one, or set a runtime",
            plain.display()
        ))
    );
    let unexecutable = write(scratch.path(), "off", "#!/bin/sh\necho hi\n", false);
    assert_eq!(
        check(json!({ "name": "a", "path": unexecutable })).await,
        Finding::Missing(format!(
            "script {} is not executable: chmod +x it, or set a runtime",
            unexecutable.display()
        ))
    );
    let ts = write(scratch.path(), "tool.ts", "// @param x:string\n", false);
    for (runtime, program) in [
        ("deno", "deno"),
        ("bun", "bun"),
        ("uv", "uv"),
        ("python", "python3"),
    ] {
        let finding = check(json!({ "name": "a", "path": ts, "runtime": runtime })).await;
        if installed(program) {
            assert!(matches!(finding, Finding::Ready(_)), "{finding:?}");
        } else {
            let Finding::Missing(problem) = finding else {
                panic!("{program} is not installed here");
            };
            assert!(
                problem.starts_with(&format!(
                    "the {runtime} runtime: \"{program}\" is not on PATH"
                )),
                "{problem}"
            );
        }
    }
}

#[test]
fn every_fault_of_a_header_is_reported_with_its_line() {
    let faults = ScriptHeader::parse(
        "#!/bin/sh\n\
         # @param :string nameless\n\
         # @param count:date when\n\
         # @param limit:integer=abc how many\n\
         # @param limit:string again\n\
         # @param dry:boolean=true never off\n\
         # @param bare\n\
         # @tool not a name\n\
         # @ts-check and other words are left alone\n\
         echo body\n\
         # @param after:string not in the header\n",
        Runtime::Shebang,
        "/srv/tools/x.sh",
    )
    .expect_err("faults");
    let found: Vec<(&str, &str)> = faults
        .iter()
        .map(|fault| (fault.field.as_str(), fault.problem.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("line 2", "\"\" is not a parameter name"),
            ("line 3", "\"date\" is not a parameter type"),
            ("line 4", "default \"abc\" is not an integer"),
            (
                "line 6",
                "a boolean defaults to true, so it could never be turned off"
            ),
            ("line 7", "\"bare\" has no type"),
            ("line 8", "\"not a name\" is not a tool name"),
        ]
    );
    assert!(faults.iter().all(|fault| fault.origin == "/srv/tools/x.sh"));
    // The duplicate is reported once the first of its name was read cleanly.
    let faults = ScriptHeader::parse(
        "// @param a:string\n// @param a:number\n",
        Runtime::Node,
        "x.js",
    )
    .expect_err("faults");
    assert_eq!(
        faults[0].to_string(),
        "x.js: line 2: declares parameter \"a\" a second time; give every @param its own name"
    );
    // A JavaScript header does not read `#` lines, and `//` is no Python comment.
    let header = ScriptHeader::parse("# @param a:string\n", Runtime::Node, "x.js").expect("ok");
    assert!(header.params.is_empty());
}

#[test]
fn every_fault_of_a_declaration_is_reported_with_its_field() {
    let faults = ScriptDeclaration::parse(
        &json!({ "name": "X", "path": "tools/x.sh", "runtime": "perl", "tools": [] }),
        "add action",
    )
    .expect_err("faults");
    let found: Vec<&str> = faults.iter().map(|fault| fault.field.as_str()).collect();
    assert_eq!(found, ["tools", "name", "path", "runtime"]);
    assert_eq!(
        faults[3].to_string(),
        "add action: runtime: is not one of bash, python, uv, node, deno, bun, shebang; write \
         one of bash, python, uv, node, deno, bun, shebang"
    );
    // Relative to the declaration's file.
    let declaration = ScriptDeclaration::parse(
        &json!({ "name": "x", "path": "tools/x.sh" }),
        "/etc/plurnk/sources/x.json",
    )
    .expect("valid");
    assert_eq!(
        declaration.path,
        Path::new("/etc/plurnk/sources/tools/x.sh")
    );
    assert_eq!(declaration.runtime, Runtime::Shebang);
}

#[tokio::test]
async fn a_value_that_starts_with_a_dash_reaches_a_script_only_where_the_header_allows_it() {
    let scratch = Scratch::new("dash");
    // A hand-written parser that takes any `--word` as an option: `--repo --force` would be
    // the option the header never declared.
    let path = write(
        scratch.path(),
        "move.sh",
        "#!/usr/bin/env bash\n# @param repo:string where\n# @param offset?:integer by how much\n\
         # @param note?:json anything\n# @allow-dash offset\n\
         printf '[%s]' \"$@\"; echo\n",
        false,
    );
    let source = open(json!({ "name": "move", "path": path, "runtime": "bash" }));
    assert_eq!(
        call(&source, "move", json!({ "repo": "--force" })).await,
        Err(SourceError::InvalidArguments(
            "argument \"repo\" is \"--force\", which starts with '-' and the script would read \
             as an option: pass a value that does not start with '-'"
                .into()
        ))
    );
    // A `json` value is checked as the text it becomes: a negative number starts with '-'.
    assert!(matches!(
        call(&source, "move", json!({ "repo": "r", "note": -3 })).await,
        Err(SourceError::InvalidArguments(message)) if message.starts_with("argument \"note\" is \"-3\"")
    ));
    let moved = call(
        &source,
        "move",
        json!({ "repo": "r", "offset": -3, "note": "-x" }),
    )
    .await
    .expect("it runs");
    assert_eq!(moved.text, "[--repo][r][--offset][-3][--note][\"-x\"]\n");
}

#[test]
fn allow_dash_names_declared_parameters_and_a_dashed_default_needs_it() {
    let faults = ScriptHeader::parse(
        "#!/bin/sh\n\
         # @param offset:integer=-1 how far\n\
         # @param depth:integer=-2 how deep\n\
         # @param dry:boolean only say\n\
         # @allow-dash depth dry ghost\n\
         # @allow-dash\n",
        Runtime::Shebang,
        "x.sh",
    )
    .expect_err("faults");
    let found: Vec<(&str, &str)> = faults
        .iter()
        .map(|fault| (fault.field.as_str(), fault.problem.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("line 6", "@allow-dash names no parameter"),
            (
                "line 5",
                "@allow-dash names the boolean \"dry\", which passes no value"
            ),
            (
                "line 5",
                "@allow-dash names \"ghost\", which no @param declares"
            ),
            (
                "line 2",
                "default -1 starts with '-', which the script would read as an option"
            ),
        ]
    );
    assert_eq!(
        faults[3].fix,
        "add `@allow-dash offset` if the script reads it as a value, or change it"
    );
}

#[tokio::test]
async fn a_script_writing_past_its_output_bound_is_stopped_and_killed() {
    let scratch = Scratch::new("script-flood");
    let pidfile = scratch.path().join("leader");
    let path = write(
        scratch.path(),
        "flood",
        "#!/bin/sh\n# @param file:string where the pid goes\necho $$ > \"$2\"; exec yes\n",
        true,
    );
    let source = open(json!({ "name": "flood", "path": path, "maxOutputBytes": 10_000 }));
    assert_eq!(
        call(&source, "flood", json!({ "file": pidfile })).await,
        Err(SourceError::OutputTooLarge { limit: 10_000 })
    );
    let leader = pid_in(&pidfile).await;
    assert!(gone(leader).await, "yes ({leader}) outlived its call");
}

/// Opens `declaration` as the file `origin` declares it.
fn open_from(declaration: &Value, origin: &Path) -> Result<ScriptSource, Vec<DeclarationError>> {
    let origin = origin.display().to_string();
    ScriptDeclaration::parse(declaration, &origin)?.open(
        &origin,
        &|raw: &str| Ok(raw.to_owned()),
        crate::protocol::Children::new(crate::protocol::Inherited::defaults()),
    )
}

#[test]
fn a_header_past_its_bound_is_refused_naming_it_and_a_long_script_is_not() {
    let scratch = Scratch::new("long-header");
    let origin = scratch.path().join("s.json");
    // A header of 2,000 parameters: about 70 KiB, past the 64 KiB read.
    let mut long = String::from("#!/usr/bin/env bash\n# @description Many parameters.\n");
    for n in 0..2_000 {
        long.push_str(&format!("# @param p{n}?:string parameter number {n}\n"));
    }
    long.push_str("echo done\n");
    assert!(long.len() as u64 > HEADER_BYTES);
    let path = write(scratch.path(), "long.sh", &long, false);
    let refused = open_from(
        &json!({"name": "long", "path": path, "runtime": "bash"}),
        &origin,
    )
    .expect_err("cut, it would lose parameters");
    let said = refused
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    assert!(
        said.contains("header: runs past the first 64 KiB"),
        "{said}"
    );
    // A short header before 100 KiB of script: the header is whole.
    let mut script = String::from("#!/usr/bin/env bash\n# @param name:string who\n");
    script.push_str(&"echo filler line of the script body\n".repeat(3_000));
    let path = write(scratch.path(), "big.sh", &script, false);
    let opened = open_from(
        &json!({"name": "big", "path": path, "runtime": "bash"}),
        &origin,
    )
    .expect("a short header in a long script");
    assert_eq!(opened.header().params.len(), 1);
}

#[test]
fn a_script_outside_its_declarations_folder_is_refused_unless_declared() {
    let scratch = Scratch::new("outside");
    let sources = scratch.path().join("sources");
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&sources).expect("a folder");
    std::fs::create_dir_all(&elsewhere).expect("a folder");
    let origin = sources.join("s.json");
    let script = write(&elsewhere, "greet.sh", GREET, false);
    let said = |errors: Vec<DeclarationError>| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    // By a relative path that climbs out, by an absolute one, and through a link inside.
    let link = sources.join("linked.sh");
    std::os::unix::fs::symlink(&script, &link).expect("a symbolic link");
    for path in [
        json!("../elsewhere/greet.sh"),
        json!(script),
        json!("linked.sh"),
    ] {
        let declaration = json!({"name": "greeter", "path": path, "runtime": "bash"});
        let refused = said(open_from(&declaration, &origin).expect_err("outside"));
        assert!(
            refused.contains("path: ")
                && refused.contains("is outside")
                && refused.contains("\"outsideFolder\": true"),
            "{path}: {refused}"
        );
        let mut declared = declaration.clone();
        declared["outsideFolder"] = json!(true);
        assert!(open_from(&declared, &origin).is_ok(), "{path} declared");
    }
    // Beside its declaration, and below it: fine.
    let below = sources.join("below");
    std::fs::create_dir_all(&below).expect("a folder");
    write(&sources, "greet.sh", GREET, false);
    write(&below, "greet.sh", GREET, false);
    for path in ["greet.sh", "below/greet.sh"] {
        let declaration = json!({"name": "greeter", "path": path, "runtime": "bash"});
        assert!(open_from(&declaration, &origin).is_ok(), "{path}");
    }
}
