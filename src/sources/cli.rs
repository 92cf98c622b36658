//! The CLI adapter: a command-line program as a tool source, each tool a named subcommand
//! with declared parameters, so a model cannot invent a command line and what is reachable
//! is exactly what somebody wrote down.
//!
//! A [`CliDeclaration`] names one executable, its fixed leading arguments, environment and
//! bounds, and its tools. Each call is a fresh exec — there is no long-lived process — with
//! the argument array built from the call's arguments and no shell in between:
//!
//! ```text
//! command  args…  tool.args…  flags (declaration order)…  positionals (declaration order)…
//! ```
//!
//! - A flag and its value are two argv items (`--max-count 3`, never `--max-count=3`).
//! - A boolean parameter is the flag's presence: `true` adds the flag, `false` nothing.
//! - An array parameter with a flag must declare `repeat`, and gives one flag per item (`-e a
//!   -e b`): after one flag, a program would read the second item on as options or operands
//!   of their own (`find -name '*.txt' -exec …`). A positional array gives every item.
//! - A `stdin` parameter is written to the program's standard input instead of argv (a
//!   string as written, anything else as its JSON text); without one, stdin is closed.
//! - No value that starts with `-` reaches argv — every item of every parameter, flag values
//!   included — unless its parameter declares `allowDash`, or it is a positional of a tool
//!   that declares `endOfOptions`, which puts `--` before the positionals (for a program
//!   that reads `--` as the end of its options). A declaration whose `enum` or `default`
//!   starts with `-` must say `allowDash` too.
//! - An absent optional parameter with a `default` is passed as that default.
//!
//! So a model chooses values, never options: what reaches the program is exactly the
//! declared command line with the model's values in the declared places.
//!
//! The program runs in its own process group, marked for the host's reaper and with a mark
//! of the run's own that its descendants inherit, for at most `timeoutMs` (then its group is
//! killed: [`SourceError::Timeout`]), with standard output
//! and standard error together bounded at `maxOutputBytes` (past it the group is killed:
//! [`SourceError::OutputTooLarge`]). A non-zero exit is a result the model sees
//! (`is_error: true`): standard output, then how it exited and the end of its standard
//! error (the host's 4 KiB stderr tail, scrubbed of registered secrets). When the leader
//! exits, or the call ends any other way, its group and every process carrying the run's
//! mark are killed: a background descendant, in the group or in a session of its own
//! (`setsid`), neither holds the call to its deadline nor outlives it. With `json`, the
//! standard output of a successful run is parsed into `structured`: one JSON value as is, a
//! stream of several (`jq '.[]'`) as an array of them.
//!
//! [`exec`] is the one place a source starts a program; the script adapter uses it too.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{
    CallFuture, DeclarationError, Finding, SourceError, SourceResult, SourceTool, ToolSource,
};
use crate::protocol::{
    Children, Inherited, Reaper, StderrTail, describe_exit, group_command, kill_group, kill_marked,
};

/// How long a call may run unless the declaration says otherwise.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How much a call may write (stdout and stderr together) unless the declaration says
/// otherwise.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 20;
/// The longest `timeoutMs` a declaration may ask for: one hour.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// The largest `maxOutputBytes` a declaration may ask for: 256 MiB.
pub const MAX_OUTPUT_CEILING: usize = 256 << 20;
/// How long a version probe (`check`) may run, and how much it may print.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
const VERSION_OUTPUT: usize = 64 << 10;
/// How much one read of a program's output takes.
const READ_CHUNK: usize = 16 << 10;

// === the declaration ===

/// A command-line program as a tool source (see the module docs for the call semantics).
///
/// The fields are what the declaration's JSON says; [`CliDeclaration::parse`] is the way
/// to read one, reporting every fault at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CliDeclaration {
    /// The source's name, the namespace of its tools (`[a-z][a-z0-9-]*`).
    pub name: String,
    /// The one executable: an absolute path, or a bare name looked up on `PATH` per call.
    pub command: String,
    /// Arguments every call starts with (`-c color.ui=never`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment entries added to what every child inherits (the default few and
    /// `PLURNK_MCP_INHERIT_ENV`); values may hold `${NAME}`, which the caller's `expand`
    /// resolves when the source is opened.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The working directory (absolute); the host's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// How long one call may run before its process group is killed.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How much one call may write, stdout and stderr together, before it is killed.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// The trimmed output of `command versionArgs…` the declaration was written against;
    /// `check` reports drift from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The arguments that make `command` print its version.
    #[serde(default = "default_version_args")]
    pub version_args: Vec<String>,
    /// The tools, in the order they are listed.
    pub tools: Vec<CliTool>,
}

/// One tool of a [`CliDeclaration`]: a fixed subcommand with typed parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CliTool {
    /// The tool's name (`[A-Za-z0-9_.-]`, at most 64 characters).
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The subcommand's fixed arguments (`["log", "--no-decorate"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its parameters, in argv order (flags first, then positionals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<CliParam>,
    /// Parse the standard output as JSON into the result's structured content.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
    /// Put `--` before the positionals, which may then start with `-`: only for a program
    /// that reads `--` as the end of its options.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_of_options: bool,
}

/// One parameter of a [`CliTool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CliParam {
    /// The argument's name in the tool's input.
    pub name: String,
    /// Its JSON type; `string` when absent.
    #[serde(default, rename = "type")]
    pub kind: ParamType,
    /// What it means, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The call must give it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// The flag it is passed with (`-n`, `--max-count`); positional when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flag: Option<String>,
    /// For an array with a flag: the flag before every item.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
    /// Passed when the call does not give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The only values it may take.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<Value>>,
    /// Written to the program's standard input instead of argv.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// Its values may start with `-`: only for a parameter the program reads as a value
    /// whatever it starts with (a flag that takes a negative number).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_dash: bool,
}

/// The JSON type of a [`CliParam`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// A JSON string.
    #[default]
    String,
    /// Any JSON number.
    Number,
    /// A JSON number without a fraction.
    Integer,
    /// `true` (the flag) or `false` (nothing).
    Boolean,
    /// An array of strings, numbers or booleans.
    Array,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_output_bytes() -> usize {
    DEFAULT_MAX_OUTPUT_BYTES
}

fn default_version_args() -> Vec<String> {
    vec!["--version".to_owned()]
}

// The fields each object of a declaration may have, as `parse` reads them; a test checks
// they are exactly what the serde types (de)serialize.
const DECLARATION_FIELDS: &[&str] = &[
    "name",
    "command",
    "args",
    "env",
    "cwd",
    "timeoutMs",
    "maxOutputBytes",
    "version",
    "versionArgs",
    "tools",
];
const TOOL_FIELDS: &[&str] = &[
    "name",
    "description",
    "args",
    "params",
    "json",
    "endOfOptions",
];
const PARAM_FIELDS: &[&str] = &[
    "name",
    "type",
    "description",
    "required",
    "flag",
    "repeat",
    "default",
    "enum",
    "stdin",
    "allowDash",
];

impl ParamType {
    fn phrase(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Integer => "an integer",
            Self::Boolean => "true or false",
            Self::Array => "an array of strings, numbers or booleans",
        }
    }

    fn fits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value
                .as_array()
                .is_some_and(|items| items.iter().all(is_scalar)),
        }
    }

    fn schema(self) -> Value {
        match self {
            Self::String => json!({ "type": "string" }),
            Self::Number => json!({ "type": "number" }),
            Self::Integer => json!({ "type": "integer" }),
            Self::Boolean => json!({ "type": "boolean" }),
            Self::Array => json!({
                "type": "array",
                "items": { "type": ["string", "number", "boolean"] },
            }),
        }
    }
}

impl CliParam {
    /// Passed as a positional argument: no flag, not standard input, not a boolean.
    fn positional(&self) -> bool {
        self.flag.is_none() && !self.stdin && self.kind != ParamType::Boolean
    }
}

fn is_scalar(value: &Value) -> bool {
    value.is_string() || value.is_number() || value.is_boolean()
}

impl CliDeclaration {
    /// Reads a declaration from `value`, which came from `origin` (a file, an `add`
    /// action): every fault at once, each naming the field and the fix.
    pub fn parse(value: &Value, origin: &str) -> Result<Self, Vec<DeclarationError>> {
        let mut faults = Faults::new(origin);
        let Some(object) = faults.object(value, "", DECLARATION_FIELDS) else {
            return Err(faults.into_errors());
        };
        let name = faults.required::<String>(object, "", "name", "a string");
        if let Some(name) = &name {
            faults.source_name("name", name);
        }
        let command = faults.required::<String>(object, "", "command", "a string");
        if let Some(command) = &command {
            faults.command("command", command);
        }
        let args = faults.strings(object, "", "args");
        let env = faults.env(object, "");
        let cwd = faults.cwd(object, "");
        let timeout_ms = faults.timeout(object, "").unwrap_or(DEFAULT_TIMEOUT_MS);
        let max_output_bytes = faults
            .max_output(object, "")
            .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
        let version = faults.version(object, "");
        let version_args = match object.get("versionArgs") {
            None => default_version_args(),
            Some(_) => faults.strings(object, "", "versionArgs"),
        };
        let tools = match object.get("tools") {
            None => {
                faults.add(
                    "tools",
                    "is missing",
                    "list the program's tools: \"tools\": [{\"name\": \"log\", \"args\": [\"log\"]}]",
                );
                Vec::new()
            }
            Some(Value::Array(items)) => {
                if items.is_empty() {
                    faults.add(
                        "tools",
                        "is empty",
                        "declare at least one tool: a source without tools offers nothing",
                    );
                }
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| parse_tool(&mut faults, &format!("tools[{i}]"), item))
                    .collect()
            }
            Some(_) => {
                faults.add("tools", "is not an array", "write an array of tool objects");
                Vec::new()
            }
        };
        let mut seen = BTreeSet::new();
        for (i, tool) in tools.iter().enumerate() {
            if !seen.insert(tool.name.as_str()) {
                faults.add(
                    format!("tools[{i}].name"),
                    format!("names tool \"{}\" a second time", tool.name),
                    "give every tool its own name",
                );
            }
        }
        let (Some(name), Some(command)) = (name, command) else {
            return Err(faults.into_errors());
        };
        faults.finish(Self {
            name,
            command,
            args,
            env,
            cwd,
            timeout_ms,
            max_output_bytes,
            version,
            version_args,
            tools,
        })
    }

    /// Opens the source: expands each `env` value with `expand` (which resolves `${NAME}`
    /// and says what is wrong otherwise) and registers the expanded values that are
    /// secrets — those that came from a reference or whose name says credential — with
    /// the host's scrubber. Its calls are marked for `reaper`.
    pub(crate) fn open(
        &self,
        origin: &str,
        expand: &dyn Fn(&str) -> Result<String, String>,
        children: Children,
    ) -> Result<CliSource, Vec<DeclarationError>> {
        let env = expand_env(&self.env, origin, expand)?;
        Ok(CliSource {
            declaration: self.clone(),
            env,
            children,
        })
    }

    /// What this machine has of what the declaration needs: the program on `PATH` and,
    /// when `version` is set, whether `command versionArgs…` (run for at most 5 s) still
    /// prints it. The probe runs without the declared environment, which may hold
    /// references only `open` resolves.
    pub async fn check(&self) -> Finding {
        let path = std::env::var_os("PATH");
        let program = match resolve_program(&self.command, path.as_deref()) {
            Ok(program) => program,
            Err(problem) => return Finding::Missing(problem),
        };
        match &self.version {
            None => Finding::Ready(program.display().to_string()),
            Some(declared) => probe_version(&program, &self.version_args, declared).await,
        }
    }
}

fn parse_tool(faults: &mut Faults, path: &str, value: &Value) -> Option<CliTool> {
    let object = faults.object(value, path, TOOL_FIELDS)?;
    let name = faults.required::<String>(object, path, "name", "a string");
    if let Some(name) = &name {
        faults.tool_name(&join(path, "name"), name);
    }
    let description = faults.take::<String>(object, path, "description", "a string");
    let args = faults.strings(object, path, "args");
    let json = faults
        .take::<bool>(object, path, "json", "true or false")
        .unwrap_or(false);
    let end_of_options = faults
        .take::<bool>(object, path, "endOfOptions", "true or false")
        .unwrap_or(false);
    let params: Vec<CliParam> = match object.get("params") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| parse_param(faults, &format!("{path}.params[{i}]"), item))
            .collect(),
        Some(_) => {
            faults.add(
                join(path, "params"),
                "is not an array",
                "write an array of parameter objects",
            );
            Vec::new()
        }
    };
    check_params(faults, path, &params);
    if end_of_options && !params.iter().any(CliParam::positional) {
        faults.add(
            join(path, "endOfOptions"),
            "the tool has no positional parameter to put after \"--\"",
            "drop \"endOfOptions\", or declare the positional parameters it is for",
        );
    }
    Some(CliTool {
        name: name?,
        description,
        args,
        params,
        json,
        end_of_options,
    })
}

fn parse_param(faults: &mut Faults, path: &str, value: &Value) -> Option<CliParam> {
    let object = faults.object(value, path, PARAM_FIELDS)?;
    let name = faults.required::<String>(object, path, "name", "a string");
    if let Some(name) = &name {
        faults.param_name(&join(path, "name"), name);
    }
    let kind = faults
        .take::<ParamType>(
            object,
            path,
            "type",
            "one of string, number, integer, boolean, array",
        )
        .unwrap_or_default();
    let description = faults.take::<String>(object, path, "description", "a string");
    let flag_of = |faults: &mut Faults, key| {
        faults
            .take::<bool>(object, path, key, "true or false")
            .unwrap_or(false)
    };
    let required = flag_of(faults, "required");
    let repeat = flag_of(faults, "repeat");
    let stdin = flag_of(faults, "stdin");
    let allow_dash = flag_of(faults, "allowDash");
    let flag = faults.take::<String>(
        object,
        path,
        "flag",
        "a string such as \"-n\" or \"--max-count\"",
    );
    let default = object.get("default").cloned();
    let allowed = faults.take::<Vec<Value>>(object, path, "enum", "an array of values");
    let param = CliParam {
        name: name?,
        kind,
        description,
        required,
        flag,
        repeat,
        default,
        allowed,
        stdin,
        allow_dash,
    };
    check_param(faults, path, &param);
    Some(param)
}

/// The faults of one parameter on its own.
fn check_param(faults: &mut Faults, path: &str, param: &CliParam) {
    if let Some(flag) = &param.flag {
        let shaped = flag.starts_with('-')
            && flag != "-"
            && flag != "--"
            && !flag.contains('=')
            && !flag.chars().any(|c| c.is_whitespace() || c.is_control());
        if !shaped {
            faults.add(
                join(path, "flag"),
                format!("\"{flag}\" is not a flag"),
                "write one option word starting with '-', such as \"-n\" or \"--max-count\"; \
                 its value is always passed as the next argument, never after '='",
            );
        }
    }
    if param.stdin && param.flag.is_some() {
        faults.add(
            join(path, "stdin"),
            "a stdin parameter also has a flag",
            "drop \"flag\": a stdin parameter is written to standard input, not passed in argv",
        );
    }
    if param.stdin && matches!(param.kind, ParamType::Boolean | ParamType::Array) {
        faults.add(
            join(path, "stdin"),
            format!("a {:?} parameter cannot be standard input", param.kind).to_lowercase(),
            "make the stdin parameter a string (or a number)",
        );
    }
    if param.repeat && (param.kind != ParamType::Array || param.flag.is_none()) {
        faults.add(
            join(path, "repeat"),
            "repeat applies only to an array parameter with a flag",
            "drop \"repeat\", or make the parameter an array with a \"flag\"",
        );
    }
    if !param.repeat && param.kind == ParamType::Array && param.flag.is_some() && !param.stdin {
        faults.add(
            join(path, "repeat"),
            "is missing: after one flag, a program would read the array's second item on as \
             options and operands of their own",
            "add \"repeat\": true, which puts the flag before every item (-e a -e b)",
        );
    }
    if param.allow_dash && (param.stdin || param.kind == ParamType::Boolean) {
        faults.add(
            join(path, "allowDash"),
            "allowDash applies only to a parameter whose value is passed in argv",
            "drop \"allowDash\"",
        );
    }
    if !param.allow_dash {
        let dashed = |value: &Value| dash_item(value).is_some();
        if let Some(allowed) = &param.allowed {
            for (i, value) in allowed.iter().enumerate() {
                if dashed(value) {
                    faults.add(
                        format!("{path}.enum[{i}]"),
                        format!("{value} starts with '-', which a program reads as an option"),
                        "add \"allowDash\": true if the program reads it as a value, or drop it",
                    );
                }
            }
        }
        if let Some(default) = &param.default
            && !param.stdin
            && dashed(default)
        {
            faults.add(
                join(path, "default"),
                format!("{default} starts with '-', which a program reads as an option"),
                "add \"allowDash\": true if the program reads it as a value, or change it",
            );
        }
    }
    if param.kind == ParamType::Boolean && param.flag.is_none() && !param.stdin {
        faults.add(
            join(path, "flag"),
            "a boolean parameter has no flag",
            "give it the \"flag\" its presence stands for, such as \"--oneline\"",
        );
    }
    if param.required && param.default.is_some() {
        faults.add(
            join(path, "default"),
            "a required parameter has a default, which would never be used",
            "drop \"required\" or \"default\"",
        );
    }
    if let Some(allowed) = &param.allowed {
        if matches!(param.kind, ParamType::Boolean | ParamType::Array) {
            faults.add(
                join(path, "enum"),
                format!("enum does not apply to a {:?} parameter", param.kind).to_lowercase(),
                "drop \"enum\", or make the parameter a string, number or integer",
            );
        } else if allowed.is_empty() {
            faults.add(
                join(path, "enum"),
                "is empty, so no value would be accepted",
                "list the values the parameter may take, or drop \"enum\"",
            );
        }
        for (i, value) in allowed.iter().enumerate() {
            if !param.kind.fits(value) {
                faults.add(
                    format!("{path}.enum[{i}]"),
                    format!("{value} is not {}", param.kind.phrase()),
                    format!("write {} (the parameter's type)", param.kind.phrase()),
                );
            }
        }
    }
    if let Some(default) = &param.default {
        if !param.kind.fits(default) {
            faults.add(
                join(path, "default"),
                format!("{default} is not {}", param.kind.phrase()),
                format!("write {} (the parameter's type)", param.kind.phrase()),
            );
        } else if param
            .allowed
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(default))
        {
            faults.add(
                join(path, "default"),
                format!("{default} is not one of the enum's values"),
                "make the default one of the values \"enum\" lists",
            );
        }
    }
}

/// The faults of a tool's parameters together.
fn check_params(faults: &mut Faults, path: &str, params: &[CliParam]) {
    let mut names = BTreeSet::new();
    let mut flags = BTreeSet::new();
    let mut stdin = 0;
    let mut optional_positional = None;
    let mut array_positional = None;
    for (i, param) in params.iter().enumerate() {
        let at = format!("{path}.params[{i}]");
        if !names.insert(param.name.as_str()) {
            faults.add(
                join(&at, "name"),
                format!("names parameter \"{}\" a second time", param.name),
                "give every parameter of a tool its own name",
            );
        }
        if let Some(flag) = &param.flag
            && !flags.insert(flag.as_str())
        {
            faults.add(
                join(&at, "flag"),
                format!("flag \"{flag}\" is used by another parameter too"),
                "give every parameter its own flag",
            );
        }
        if param.stdin {
            stdin += 1;
            if stdin > 1 {
                faults.add(
                    join(&at, "stdin"),
                    "a second parameter is standard input",
                    "mark at most one parameter of a tool as stdin",
                );
            }
        }
        // A boolean without a flag is a fault of its own, not a positional.
        if !param.positional() {
            continue;
        }
        if let Some(earlier) = &array_positional {
            faults.add(
                join(&at, "flag"),
                format!("a positional parameter follows the positional array {earlier}"),
                "make the positional array the last positional parameter, or give one a flag",
            );
        }
        if param.kind == ParamType::Array {
            array_positional = Some(format!("\"{}\"", param.name));
        }
        if param.required {
            if let Some(earlier) = &optional_positional {
                faults.add(
                    join(&at, "required"),
                    format!(
                        "a required positional parameter follows the optional one {earlier}, \
                         which would take its place when left out"
                    ),
                    "put required positional parameters first, or give the optional one a flag",
                );
            }
        } else if optional_positional.is_none() && param.default.is_none() {
            optional_positional = Some(format!("\"{}\"", param.name));
        }
    }
}

// === reading declarations: every fault at once ===

/// The faults found in one declaration so far; shared by the declaration readers.
pub(crate) struct Faults {
    origin: String,
    errors: Vec<DeclarationError>,
}

/// `path.key`, or `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Faults {
    pub(crate) fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_owned(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn add(
        &mut self,
        field: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let field = field.into();
        let field = if field.is_empty() {
            "(the declaration)".to_owned()
        } else {
            field
        };
        self.errors
            .push(DeclarationError::new(&self.origin, field, problem, fix));
    }

    pub(crate) fn into_errors(self) -> Vec<DeclarationError> {
        self.errors
    }

    /// `value` when nothing was wrong.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Vec<DeclarationError>> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self.errors)
        }
    }

    /// `value` as an object with only `known` fields (each other field is a fault).
    pub(crate) fn object<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        known: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(object) = value.as_object() else {
            self.add(path, "is not an object", "write a JSON object");
            return None;
        };
        for key in object.keys() {
            if !known.contains(&key.as_str()) {
                self.add(
                    join(path, key),
                    "is not a field of this declaration",
                    format!("remove it, or use one of: {}", known.join(", ")),
                );
            }
        }
        Some(object)
    }

    /// The field `key` of `object` as a `T`, if present and of the right shape.
    pub(crate) fn take<T: DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        expected: &str,
    ) -> Option<T> {
        let value = object.get(key)?;
        match T::deserialize(value) {
            Ok(value) => Some(value),
            Err(_) => {
                self.add(
                    join(path, key),
                    format!("is not {expected}"),
                    format!("write {expected}"),
                );
                None
            }
        }
    }

    /// Like [`Faults::take`], and a fault when the field is absent.
    pub(crate) fn required<T: DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        expected: &str,
    ) -> Option<T> {
        if !object.contains_key(key) {
            self.add(join(path, key), "is missing", format!("write {expected}"));
            return None;
        }
        self.take(object, path, key, expected)
    }

    pub(crate) fn strings(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Vec<String> {
        let strings: Vec<String> = self
            .take(object, path, key, "an array of strings")
            .unwrap_or_default();
        if strings.iter().any(|s| s.contains('\0')) {
            self.add(
                join(path, key),
                "holds a NUL character, which no argument can carry",
                "remove the NUL",
            );
        }
        strings
    }

    /// A source's name: the namespace of its tools.
    pub(crate) fn source_name(&mut self, field: &str, name: &str) {
        let mut chars = name.chars();
        let shaped = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && name.len() <= 64;
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a source name"),
                "use lower-case letters, digits and '-', starting with a letter, at most 64 \
                 characters, such as \"git\"",
            );
        }
    }

    pub(crate) fn tool_name(&mut self, field: &str, name: &str) {
        let shaped = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a tool name"),
                "use 1 to 64 letters, digits, '_', '.' and '-', such as \"log\"",
            );
        }
    }

    pub(crate) fn param_name(&mut self, field: &str, name: &str) {
        let mut chars = name.chars();
        let shaped = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            && name.len() <= 64;
        if !shaped {
            self.add(
                field,
                format!("\"{name}\" is not a parameter name"),
                "use letters, digits, '_' and '-', starting with a letter, such as \"maxCount\"",
            );
        }
    }

    /// A program to run: absolute, or a bare name found on `PATH`.
    pub(crate) fn command(&mut self, field: &str, command: &str) {
        if command.is_empty() || command.contains('\0') {
            self.add(
                field,
                "is empty or holds a NUL",
                "name one executable, such as \"git\" or \"/usr/bin/git\"",
            );
        } else if command.contains('/') && !command.starts_with('/') {
            self.add(
                field,
                format!("\"{command}\" is a relative path"),
                "write an absolute path, or a bare name looked up on PATH",
            );
        } else if command.chars().any(char::is_whitespace) && !command.starts_with('/') {
            self.add(
                field,
                format!("\"{command}\" is more than one word"),
                "name only the executable here and put its arguments in \"args\": no shell \
                 splits this",
            );
        }
    }

    pub(crate) fn env(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> BTreeMap<String, String> {
        let env: BTreeMap<String, String> = self
            .take(object, path, "env", "an object of strings")
            .unwrap_or_default();
        for (name, value) in &env {
            let mut chars = name.chars();
            let shaped = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !shaped {
                self.add(
                    format!("{}.{name}", join(path, "env")),
                    format!("\"{name}\" is not an environment variable name"),
                    "use letters, digits and '_', not starting with a digit",
                );
            }
            if value.contains('\0') {
                self.add(
                    format!("{}.{name}", join(path, "env")),
                    "holds a NUL character",
                    "remove the NUL",
                );
            }
        }
        env
    }

    pub(crate) fn cwd(&mut self, object: &Map<String, Value>, path: &str) -> Option<PathBuf> {
        let cwd: PathBuf = self.take(object, path, "cwd", "a string")?;
        if !cwd.is_absolute() {
            self.add(
                join(path, "cwd"),
                format!("\"{}\" is a relative path", cwd.display()),
                "write an absolute directory",
            );
        }
        Some(cwd)
    }

    pub(crate) fn timeout(&mut self, object: &Map<String, Value>, path: &str) -> Option<u64> {
        let expected = format!("a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}");
        let timeout: u64 = self.take(object, path, "timeoutMs", &expected)?;
        if timeout == 0 || timeout > MAX_TIMEOUT_MS {
            self.add(
                join(path, "timeoutMs"),
                format!("{timeout} is out of range"),
                format!("write {expected}"),
            );
            return None;
        }
        Some(timeout)
    }

    pub(crate) fn max_output(&mut self, object: &Map<String, Value>, path: &str) -> Option<usize> {
        let expected = format!("a whole number of bytes from 1 to {MAX_OUTPUT_CEILING}");
        let bound: usize = self.take(object, path, "maxOutputBytes", &expected)?;
        if bound == 0 || bound > MAX_OUTPUT_CEILING {
            self.add(
                join(path, "maxOutputBytes"),
                format!("{bound} is out of range"),
                format!("write {expected}"),
            );
            return None;
        }
        Some(bound)
    }

    pub(crate) fn version(&mut self, object: &Map<String, Value>, path: &str) -> Option<String> {
        let version: String = self.take(object, path, "version", "a string")?;
        if version.trim().is_empty() {
            self.add(
                join(path, "version"),
                "is empty",
                "write the trimmed --version output, or drop \"version\"",
            );
        }
        Some(version)
    }
}

/// Expands a declaration's environment with `expand`, registering the secrets among it.
pub(crate) fn expand_env(
    env: &BTreeMap<String, String>,
    origin: &str,
    expand: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Vec<(String, String)>, Vec<DeclarationError>> {
    let mut faults = Faults::new(origin);
    let mut expanded = Vec::with_capacity(env.len());
    for (name, raw) in env {
        match expand(raw) {
            Ok(value) => {
                if value != *raw || crate::config::is_credential_name(name) {
                    crate::redact::register([value.as_str()]);
                }
                expanded.push((name.clone(), value));
            }
            Err(problem) => faults.add(
                format!("env.{name}"),
                problem,
                "define the variable it references, or write the value itself",
            ),
        }
    }
    faults.finish(expanded)
}

// === the source ===

/// An opened [`CliDeclaration`]: its tools, callable.
pub struct CliSource {
    declaration: CliDeclaration,
    /// The declared environment, expanded: never shown.
    env: Vec<(String, String)>,
    /// What every call's program starts from (the environment it inherits), and the reaper
    /// that marks it, so a host that dies takes it with it.
    children: Children,
}

impl std::fmt::Debug for CliSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliSource")
            .field("name", &self.declaration.name)
            .finish_non_exhaustive()
    }
}

impl CliSource {
    /// The declaration it was opened from.
    pub fn declaration(&self) -> &CliDeclaration {
        &self.declaration
    }

    /// The `PATH` the program runs with, which it is looked up on: declared, or inherited.
    fn path(&self) -> Option<std::ffi::OsString> {
        self.env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.into())
            .or_else(|| self.children.inherited.get("PATH").map(Into::into))
    }
}

impl ToolSource for CliSource {
    fn tools(&self) -> Vec<SourceTool> {
        self.declaration
            .tools
            .iter()
            .map(|tool| SourceTool {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: input_schema(&tool.params),
            })
            .collect()
    }

    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Map<String, Value>,
        deadline: Duration,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let declaration = &self.declaration;
            let tool = declaration
                .tools
                .iter()
                .find(|candidate| candidate.name == tool)
                .ok_or_else(|| SourceError::UnknownTool(tool.to_owned()))?;
            let bound = bind(tool, arguments)?;
            let path = self.path();
            let program = resolve_program(&declaration.command, path.as_deref())
                .map_err(SourceError::Unavailable)?;
            let mut args = declaration.args.clone();
            args.extend(tool.args.iter().cloned());
            args.extend(bound.argv);
            let exited = exec(Exec {
                program: &program,
                args: &args,
                inherited: &self.children.inherited,
                env: &self.env,
                cwd: declaration.cwd.as_deref(),
                stdin: bound.stdin.as_deref(),
                timeout: deadline.min(Duration::from_millis(declaration.timeout_ms)),
                max_output: declaration.max_output_bytes,
                reaper: Some(&self.children.reaper),
            })
            .await?;
            Ok(outcome(&declaration.command, exited, tool.json))
        })
    }
}

/// The JSON Schema of a tool's input.
fn input_schema(params: &[CliParam]) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in params {
        let mut property = param.kind.schema();
        if let Some(description) = &param.description {
            property["description"] = json!(description);
        }
        if let Some(allowed) = &param.allowed {
            property["enum"] = json!(allowed);
        }
        if let Some(default) = &param.default {
            property["default"] = default.clone();
        }
        if param.required {
            required.push(json!(param.name));
        }
        properties.insert(param.name.clone(), property);
    }
    super::closed_object(properties, required)
}

/// What a call's arguments become: argv items after the fixed ones, and standard input.
#[derive(Debug, PartialEq)]
struct Bound {
    argv: Vec<String>,
    stdin: Option<Vec<u8>>,
}

/// Checks `arguments` against `tool`'s parameters and builds the call's argv: flags in
/// declaration order, then positionals (after `--` for a tool with `endOfOptions`).
fn bind(tool: &CliTool, arguments: Map<String, Value>) -> Result<Bound, SourceError> {
    let params = &tool.params;
    let invalid = |message: String| SourceError::InvalidArguments(message);
    if let Some(unknown) = arguments
        .keys()
        .find(|key| !params.iter().any(|param| &param.name == *key))
    {
        let names: Vec<&str> = params.iter().map(|param| param.name.as_str()).collect();
        let takes = if names.is_empty() {
            "this tool takes no arguments".to_owned()
        } else {
            format!("this tool takes {}", names.join(", "))
        };
        return Err(invalid(format!("unknown argument \"{unknown}\": {takes}")));
    }
    let mut flags = Vec::new();
    let mut positionals = Vec::new();
    let mut stdin = None;
    for param in params {
        let given = arguments.get(&param.name).filter(|value| !value.is_null());
        let Some(value) = given.or(param.default.as_ref()) else {
            if param.required {
                return Err(invalid(format!(
                    "missing required argument \"{}\": pass it as {}",
                    param.name,
                    param.kind.phrase()
                )));
            }
            continue;
        };
        if !param.kind.fits(value) {
            return Err(invalid(format!(
                "argument \"{}\" must be {}, not {}",
                param.name,
                param.kind.phrase(),
                describe_value(value)
            )));
        }
        if let Some(allowed) = &param.allowed
            && !allowed.contains(value)
        {
            let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(invalid(format!(
                "argument \"{}\" must be one of {}, not {value}",
                param.name,
                listed.join(", ")
            )));
        }
        let items: Vec<String> = match value {
            Value::Array(items) => items.iter().map(argv_text).collect(),
            Value::Bool(_) => Vec::new(),
            other => vec![argv_text(other)],
        };
        if items.iter().any(|item| item.contains('\0')) {
            return Err(invalid(format!(
                "argument \"{}\" holds a NUL character, which no argument can carry: remove it",
                param.name
            )));
        }
        if param.stdin {
            stdin = Some(argv_text(value).into_bytes());
            continue;
        }
        // After `--` nothing is an option; anywhere else a leading '-' would make the value
        // an option of the model's choosing, whether alone or after a flag.
        let after_end = tool.end_of_options && param.positional();
        if !param.allow_dash
            && !after_end
            && let Some((position, item)) = dash_item(value)
        {
            let which = match position {
                Some(position) => format!("argument \"{}\" item {position}", param.name),
                None => format!("argument \"{}\"", param.name),
            };
            return Err(invalid(format!(
                "{which} is \"{}\", which starts with '-' and would be read as an option: pass \
                 a value that does not start with '-'",
                shorten(&item)
            )));
        }
        match &param.flag {
            Some(flag) if param.kind == ParamType::Boolean => {
                if value == &Value::Bool(true) {
                    flags.push(flag.clone());
                }
            }
            // An array with a flag always repeats it (the declaration must say so): one flag
            // followed by several items is how `-exec` got in.
            Some(flag) => {
                for item in items {
                    flags.push(flag.clone());
                    flags.push(item);
                }
            }
            None => positionals.extend(items),
        }
    }
    if tool.end_of_options && !positionals.is_empty() {
        flags.push("--".to_owned());
    }
    flags.extend(positionals);
    Ok(Bound { argv: flags, stdin })
}

/// The first argv item of `value` that starts with `-`, with its position (from 1) when
/// `value` is an array.
fn dash_item(value: &Value) -> Option<(Option<usize>, String)> {
    match value {
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let text = argv_text(item);
            text.starts_with('-').then_some((Some(i + 1), text))
        }),
        Value::Bool(_) => None,
        other => {
            let text = argv_text(other);
            text.starts_with('-').then_some((None, text))
        }
    }
}

/// A caller's value as an error quotes it: its first 64 characters.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((cut, _)) => format!("{}\u{2026}", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A value as one argv item: a string as written, anything else as its JSON text.
pub(crate) fn argv_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// What a wrong value was, for an error message (its kind, not its possibly long text).
pub(crate) fn describe_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a number with a fraction",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array (of something else)",
        Value::Object(_) => "an object",
    }
}

// === running a program ===

/// Finds `command`: an absolute path as it is, a bare name on `path`. Says what is missing.
pub(crate) fn resolve_program(command: &str, path: Option<&OsStr>) -> Result<PathBuf, String> {
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    if command.starts_with('/') {
        let candidate = PathBuf::from(command);
        return if executable(&candidate) {
            Ok(candidate)
        } else {
            Err(format!(
                "{command} is not an executable file: install it, or correct the path"
            ))
        };
    }
    let dirs: Vec<PathBuf> = path
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .collect();
    dirs.iter()
        .map(|dir| dir.join(command))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| {
            let searched = path
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!(
                "\"{command}\" is not on PATH ({searched}): install it, or write its absolute path"
            )
        })
}

/// One run of a program: already resolved and bound, never shown (the environment may hold
/// secrets).
pub(crate) struct Exec<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    /// What the program starts from, before `env`.
    pub inherited: &'a Inherited,
    pub env: &'a [(String, String)],
    pub cwd: Option<&'a Path>,
    /// Written to standard input, which is then closed; `None` gives it `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    pub timeout: Duration,
    /// Standard output and standard error together, in bytes.
    pub max_output: usize,
    /// Marks the group for the host's reaper; `None` only for a short probe (`check`).
    pub reaper: Option<&'a Arc<Reaper>>,
}

/// How a run ended by itself.
pub(crate) struct Exited {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The variable that marks every process one run starts, whatever group or session it moves
/// to: its value is unique to the run.
const CALL_MARK: &str = "_PLURNK_MCP_CALL";

/// The `CALL_MARK=value` entry of a new run, unique in this process and among processes.
fn call_mark() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{CALL_MARK}={}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The process group of one run and the mark of its processes: both killed when this is
/// dropped, on every path — the run finished, ran out of time or output, or the call's future
/// was dropped.
struct Group<'a> {
    pgid: i32,
    /// `CALL_MARK=value`: finds the descendants that left the group (`setsid`).
    mark: String,
    /// The marked processes were killed after the leader exited; the drop need not look again.
    swept: AtomicBool,
    reaper: Option<&'a Arc<Reaper>>,
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        kill_group(self.pgid);
        if !self.swept.load(Ordering::Acquire) {
            kill_marked(&self.mark);
        }
        if let Some(reaper) = self.reaper {
            reaper.forget(self.pgid);
        }
    }
}

/// Runs a program in a process group of its own until it exits, its deadline passes or its
/// output passes its bound; the group, and every process that carries the run's mark, is
/// killed in every case when this returns (or its future is dropped), so nothing a call
/// starts outlives it — descendants that left the group (`setsid`) included, unless they
/// also cleared their environment (the reaper's limit too).
pub(crate) async fn exec(spec: Exec<'_>) -> Result<Exited, SourceError> {
    let mut command = group_command(
        spec.program,
        spec.args,
        spec.cwd,
        spec.inherited,
        spec.env,
        spec.reaper.map(|reaper| &**reaper),
    );
    command.stdin(if spec.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mark = call_mark();
    if let Some((name, value)) = mark.split_once('=') {
        command.env(name, value);
    }
    let name = spec.program.display();
    let mut child = command.spawn().map_err(|error| {
        SourceError::Unavailable(format!("{name} could not be started: {error}"))
    })?;
    let pgid = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .ok_or_else(|| {
            SourceError::Unavailable(format!("{name} exited before it could be watched"))
        })?;
    let group = Group {
        pgid,
        mark,
        swept: AtomicBool::new(false),
        reaper: spec.reaper,
    };
    if let Some(reaper) = spec.reaper {
        reaper.watch(pgid);
    }
    let (stdout, stderr, stdin) = (child.stdout.take(), child.stderr.take(), child.stdin.take());
    let used = AtomicUsize::new(0);
    let limit = spec.max_output;
    let work = async {
        let out = read_bounded(stdout, &used, limit);
        let err = read_bounded(stderr, &used, limit);
        let feed = async {
            if let (Some(mut pipe), Some(bytes)) = (stdin, spec.stdin) {
                // A program that exits without reading all of it is no failure (EPIPE).
                let _ = pipe.write_all(bytes).await;
            }
            Ok(())
        };
        let exit = async {
            let status = child.wait().await.map_err(|error| {
                SourceError::Unavailable(format!("{name} could not be waited for: {error}"))
            })?;
            // The leader is gone: whatever it left in its group or marked goes too, which
            // also ends the pipes a background descendant still holds. The look through /proc
            // blocks, so it runs off the runtime's workers.
            kill_group(group.pgid);
            let mark = group.mark.clone();
            if tokio::task::spawn_blocking(move || kill_marked(&mark))
                .await
                .is_ok()
            {
                group.swept.store(true, Ordering::Release);
            }
            Ok(status)
        };
        tokio::try_join!(out, err, feed, exit)
    };
    let timeout_ms = u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX);
    let ran = tokio::time::timeout(spec.timeout, work).await;
    drop(group);
    match ran {
        Err(_) => Err(SourceError::Timeout { timeout_ms }),
        Ok(Err(error)) => Err(error),
        Ok(Ok((stdout, stderr, (), status))) => Ok(Exited {
            status,
            stdout,
            stderr,
        }),
    }
}

/// Reads `pipe` to its end, failing once the run's output (`used`, shared by its pipes)
/// passes `limit`.
async fn read_bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    used: &AtomicUsize,
    limit: usize,
) -> Result<Vec<u8>, SourceError> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(kept);
    };
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        let read = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return Ok(kept),
            Ok(read) => read,
        };
        if used.fetch_add(read, Ordering::Relaxed) + read > limit {
            return Err(SourceError::OutputTooLarge { limit });
        }
        kept.extend_from_slice(&buffer[..read]);
    }
}

/// The result a run gives the model: its standard output; after a non-zero exit, how it
/// exited and the end of its standard error too; with `json`, the parsed output.
pub(crate) fn outcome(label: &str, exited: Exited, json: bool) -> SourceResult {
    let mut text = String::from_utf8_lossy(&exited.stdout).into_owned();
    if !exited.status.success() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[{label} {}", describe_exit(exited.status)));
        let tail = StderrTail::default();
        tail.push(&exited.stderr);
        match tail.text() {
            Some(stderr) => text.push_str(&format!("; its stderr ends:]\n{stderr}")),
            None => text.push(']'),
        }
        return SourceResult {
            text,
            structured: None,
            is_error: true,
        };
    }
    if !json {
        return SourceResult {
            text,
            structured: None,
            is_error: false,
        };
    }
    let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect();
    match values {
        Ok(mut values) => {
            let structured = match values.len() {
                0 => None,
                1 => values.pop(),
                _ => Some(Value::Array(values)),
            };
            SourceResult {
                text,
                structured,
                is_error: false,
            }
        }
        Err(error) => {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[{label} wrote output that is not JSON: {error}]"));
            SourceResult {
                text,
                structured: None,
                is_error: true,
            }
        }
    }
}

/// Runs `program args…` (bounded at 5 s and 64 KiB, with the default environment alone and
/// outside any host) and compares its trimmed output — standard output, or standard error
/// when that is all it wrote — with `declared`.
pub(crate) async fn probe_version(program: &Path, args: &[String], declared: &str) -> Finding {
    let ran = exec(Exec {
        program,
        args,
        inherited: &Inherited::defaults(),
        env: &[],
        cwd: None,
        stdin: None,
        timeout: VERSION_TIMEOUT,
        max_output: VERSION_OUTPUT,
        reaper: None,
    })
    .await;
    let shown = format!("{} {}", program.display(), args.join(" "));
    let exited = match ran {
        Ok(exited) => exited,
        Err(error) => return Finding::Missing(format!("`{shown}` gave no version: {error}")),
    };
    if !exited.status.success() {
        return Finding::Missing(format!(
            "`{shown}` {}: set versionArgs to the arguments that print its version",
            describe_exit(exited.status)
        ));
    }
    let output = if exited.stdout.iter().all(u8::is_ascii_whitespace) {
        exited.stderr
    } else {
        exited.stdout
    };
    let installed = String::from_utf8_lossy(&output).trim().to_owned();
    if installed == declared.trim() {
        Finding::Ready(format!("{} ({installed})", program.display()))
    } else {
        Finding::VersionDrift {
            declared: declared.trim().to_owned(),
            installed,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
