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
//!   that reads `--` as the end of its options). Nor does one that starts with `@`, which
//!   gcc, javac and every program built on libiberty or picocli read as a response file of
//!   options (`@notes.txt` could carry gcc's `-wrapper`), even after `--`: only `allowDash`
//!   lets it through. A declaration whose `enum` or `default` starts with `-` or `@` must say
//!   `allowDash` too.
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
//! The run itself is `sources/program.rs`'s, which the script adapter shares; the parameter
//! checks are `sources/params.rs`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::faults::{
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, MAX_OUTPUT_CEILING, MAX_TIMEOUT_MS,
};
use super::faults::{Faults, join};
use super::params::{self, Declared, Kind, Leading, Wording};
use super::program::{Launcher, Limits, outcome, probe_version, resolve_program};
use super::{CallFuture, DeclarationError, Finding, SourceError, SourceTool, ToolSource};
use crate::config::ConfigError;
use crate::protocol::Children;

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
    /// The sandbox every call's program runs in; the host-wide policy where absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::config::SandboxPolicy>,
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
    /// Its values may start with `-` or `@`: only for a parameter the program reads as a
    /// value whatever it starts with (a flag that takes a negative number, an address).
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
    "sandbox",
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

impl From<ParamType> for Kind {
    fn from(kind: ParamType) -> Self {
        match kind {
            ParamType::String => Self::String,
            ParamType::Number => Self::Number,
            ParamType::Integer => Self::Integer,
            ParamType::Boolean => Self::Boolean,
            ParamType::Array => Self::Array,
        }
    }
}

impl CliParam {
    /// Passed as a positional argument: no flag, not standard input, not a boolean.
    fn positional(&self) -> bool {
        self.flag.is_none() && !self.stdin && self.kind != ParamType::Boolean
    }
}

impl Declared for CliParam {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        self.kind.into()
    }

    fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    fn required(&self) -> bool {
        self.required
    }

    fn default(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    fn allowed(&self) -> Option<&[Value]> {
        self.allowed.as_deref()
    }
}

/// How the CLI adapter words a refusal of a call's arguments.
const WORDING: Wording = Wording {
    takes: "this tool",
    as_option: "would be read as an option",
};

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
        let sandbox = faults.sandbox(object, "");
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
            sandbox,
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
        expand: &dyn Fn(&str) -> Result<String, ConfigError>,
        children: Children,
    ) -> Result<CliSource, Vec<DeclarationError>> {
        Ok(CliSource {
            declaration: self.clone(),
            launcher: Launcher::open(&self.env, self.sandbox.as_ref(), origin, expand, children)?,
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
            Err(missing) => return Finding::Missing(missing.to_string()),
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

/// The faults of one parameter on its own: how its value is passed, then the values it
/// declares.
fn check_param(faults: &mut Faults, path: &str, param: &CliParam) {
    passing_faults(faults, path, param);
    if !param.allow_dash {
        dash_faults(faults, path, param);
    }
    if param.kind == ParamType::Boolean && param.flag.is_none() && !param.stdin {
        faults.add(
            join(path, "flag"),
            "a boolean parameter has no flag",
            "give it the \"flag\" its presence stands for, such as \"--oneline\"",
        );
    }
    value_faults(faults, path, param);
}

/// How the value reaches the program: the flag's shape, standard input, `repeat` and
/// `allowDash` where they apply.
fn passing_faults(faults: &mut Faults, path: &str, param: &CliParam) {
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
}

/// The declared values (`enum`, `default`) that start with `-` or `@`, which a program would
/// read as options, for a parameter without `allowDash`.
fn dash_faults(faults: &mut Faults, path: &str, param: &CliParam) {
    // What a program makes of the value, when it reads it as options.
    let read = |value: &Value| {
        Kind::from(param.kind)
            .option_item(value, Leading::DashOrAt)
            .map(|(_, item)| {
                if item.starts_with('@') {
                    "starts with '@', which a program that reads response files reads as a \
                     file of options"
                } else {
                    "starts with '-', which a program reads as an option"
                }
            })
    };
    if let Some(allowed) = &param.allowed {
        for (i, value) in allowed.iter().enumerate() {
            if let Some(read) = read(value) {
                faults.add(
                    format!("{path}.enum[{i}]"),
                    format!("{value} {read}"),
                    "add \"allowDash\": true if the program reads it as a value, or drop it",
                );
            }
        }
    }
    if let Some(default) = &param.default
        && !param.stdin
        && let Some(read) = read(default)
    {
        faults.add(
            join(path, "default"),
            format!("{default} {read}"),
            "add \"allowDash\": true if the program reads it as a value, or change it",
        );
    }
}

/// `required` beside a default, and the `enum` and `default` against the type and each other.
fn value_faults(faults: &mut Faults, path: &str, param: &CliParam) {
    let kind = Kind::from(param.kind);
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
            if !kind.fits(value) {
                faults.add(
                    format!("{path}.enum[{i}]"),
                    format!("{value} is not {}", kind.phrase()),
                    format!("write {} (the parameter's type)", kind.phrase()),
                );
            }
        }
    }
    if let Some(default) = &param.default {
        if !kind.fits(default) {
            faults.add(
                join(path, "default"),
                format!("{default} is not {}", kind.phrase()),
                format!("write {} (the parameter's type)", kind.phrase()),
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

// === the source ===

/// An opened [`CliDeclaration`]: its tools, callable.
pub struct CliSource {
    declaration: CliDeclaration,
    /// Its environment, expanded, and what every run starts from.
    launcher: Launcher,
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
}

impl ToolSource for CliSource {
    fn tools(&self) -> Vec<SourceTool> {
        self.declaration
            .tools
            .iter()
            .map(|tool| SourceTool {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: params::input_schema(&tool.params),
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
            let program = self.launcher.resolve(&declaration.command)?;
            let mut args = declaration.args.clone();
            args.extend(tool.args.iter().cloned());
            args.extend(bound.argv);
            let limits = Limits {
                cwd: declaration.cwd.as_deref(),
                timeout: deadline.min(Duration::from_millis(declaration.timeout_ms)),
                max_output: declaration.max_output_bytes,
            };
            let exited = self
                .launcher
                .run(&program, &args, bound.stdin.as_deref(), limits)
                .await?;
            Ok(outcome(&declaration.command, exited, tool.json))
        })
    }
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
    params::known(&tool.params, &arguments, &WORDING)?;
    let mut flags = Vec::new();
    let mut positionals = Vec::new();
    let mut stdin = None;
    for param in &tool.params {
        let Some(value) = params::value(param, &arguments)? else {
            continue;
        };
        let items = params::items(param, value)?;
        if param.stdin {
            stdin = Some(params::argv_text(value).into_bytes());
            continue;
        }
        // After `--` nothing is an option, but a response file is still read.
        let after_end = tool.end_of_options && param.positional();
        if !param.allow_dash {
            let leading = if after_end {
                Leading::At
            } else {
                Leading::DashOrAt
            };
            params::no_options(param, value, leading, &WORDING)?;
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

#[cfg(test)]
pub(crate) mod tests;
