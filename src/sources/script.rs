//! The script adapter: one script of any language as one tool, its typed parameters read
//! from a header block of comments in the script itself.
//!
//! ```text
//! #!/usr/bin/env bash
//! # @tool close-stale
//! # @description Closes issues idle for more than `days` days.
//! # @param repo:string the repository, owner/name
//! # @param days?:integer=30 how long an issue may be idle
//! # @param dry:boolean only say what would be closed
//! # @param labels?:json labels to skip, as a JSON array
//! ```
//!
//! The header is the comment lines at the top of the script (after a `#!` line, blank lines
//! allowed), `#` for bash, Python and uv, `//` for node, deno and bun, either for a shebang
//! script; it ends at the first line that is neither. `@param name:type description` has a
//! type of `string`, `number`, `integer`, `boolean` or `json`; `name?:type` is optional and
//! `name:type=default` is optional with a default (a default is one word: it ends at the
//! first space). A boolean is always optional: absent is `false`. `@description` lines
//! join into the tool's description; `@tool name` names the tool, which is otherwise the
//! declaration's `name`; `@allow-dash name…` lets the named parameters take a value that
//! starts with `-`. Other `@` words (`@ts-check`, `@author`) are left alone.
//!
//! A call runs `runtime… script --name value…`, one `--name value` pair per given (or
//! defaulted) parameter in header order, with the same bounds, process group and reaper as
//! the CLI adapter (`sources/program.rs`), and the same checks of the arguments
//! (`sources/params.rs`): a boolean is `--name` alone when `true` and
//! nothing when `false`; a `json` parameter is its JSON text; a number its JSON spelling.
//! A value that starts with `-` is refused unless its parameter is named by `@allow-dash`:
//! many argument parsers (minimist, yargs, a hand-written `case`) would read `--name --dry`
//! as two options, so the model could pass an option the header never declared.
//! Runtimes: `bash` runs `bash script`, `python` `python3 script`, `uv` `uv run script`,
//! `node` `node script`, `deno` `deno run script`, `bun` `bun run script`, and `shebang`
//! (the default) the script itself, which must be executable and start with `#!`.
//!
//! The header is read when the source is opened: an edited header takes effect when the
//! source is opened again. It is read from the first 64 KiB of the script; a header that
//! runs past them is refused naming the bound, never cut. A script lives beside the file that
//! declares it (in its folder or below, symbolic links followed): a `path` that leads
//! elsewhere is refused unless the declaration says `"outsideFolder": true`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::error::OpenError;
use super::faults::{DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, Faults};
use super::params::{self, Declared, Kind, Wording};
use super::program::{Launcher, Limits, outcome, probe_version, resolve_program};
use super::{CallFuture, DeclarationError, Finding, SourceError, SourceTool, ToolSource};
use crate::config::ConfigError;
use crate::protocol::Children;

/// How much of a script is read for its header: 64 KiB. A header is a few dozen lines.
pub const HEADER_BYTES: u64 = 64 << 10;

/// A script as a tool source of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptDeclaration {
    /// The source's name (`[a-z][a-z0-9-]*`), and the tool's unless the header has `@tool`.
    pub name: String,
    /// The script: absolute, or relative to the directory of the declaration's file.
    pub path: PathBuf,
    /// What runs it.
    #[serde(default)]
    pub runtime: Runtime,
    /// How long one call may run before its process group is killed.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How much one call may write, stdout and stderr together, before it is killed.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// Environment entries added to what every child inherits (the default few and
    /// `PLURNK_MCP_INHERIT_ENV`); values may hold `${NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The working directory (absolute); the host's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The sandbox every run of the script runs in; the host-wide policy where absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::config::SandboxPolicy>,
    /// The trimmed `--version` output of the runtime (for `shebang`, of the interpreter the
    /// `#!` line names) the script was written against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The script lives outside the folder of the file that declares it, and is meant to:
    /// without it such a `path` is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_folder: bool,
}

/// What runs a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// `bash script`.
    Bash,
    /// `python3 script`.
    Python,
    /// `uv run script` (inline script metadata, PEP 723, is uv's to read).
    Uv,
    /// `node script`.
    Node,
    /// `deno run script`.
    Deno,
    /// `bun run script`.
    Bun,
    /// The script itself, through its `#!` line.
    #[default]
    Shebang,
}

impl Runtime {
    /// The program and the arguments before the script; `None` for a shebang script.
    fn launcher(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Self::Bash => Some(("bash", &[])),
            Self::Python => Some(("python3", &[])),
            Self::Uv => Some(("uv", &["run"])),
            Self::Node => Some(("node", &[])),
            Self::Deno => Some(("deno", &["run"])),
            Self::Bun => Some(("bun", &["run"])),
            Self::Shebang => None,
        }
    }

    /// The comment markers a header line may start with.
    fn comments(self) -> &'static [&'static str] {
        match self {
            Self::Bash | Self::Python | Self::Uv => &["#"],
            Self::Node | Self::Deno | Self::Bun => &["//"],
            Self::Shebang => &["#", "//"],
        }
    }
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_output_bytes() -> usize {
    DEFAULT_MAX_OUTPUT_BYTES
}

const DECLARATION_FIELDS: &[&str] = &[
    "name",
    "path",
    "runtime",
    "timeoutMs",
    "maxOutputBytes",
    "env",
    "cwd",
    "sandbox",
    "version",
    "outsideFolder",
];

/// The type of a header parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptType {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A JSON number without a fraction.
    Integer,
    /// `--name` when `true`, nothing when `false`.
    Boolean,
    /// Any JSON value, passed as its JSON text.
    Json,
}

impl ScriptType {
    fn named(word: &str) -> Option<Self> {
        Some(match word {
            "string" => Self::String,
            "number" => Self::Number,
            "integer" => Self::Integer,
            "boolean" => Self::Boolean,
            "json" => Self::Json,
            _ => return None,
        })
    }

    /// The default as written after `=`, read as this type.
    fn read_default(self, text: &str) -> Option<Value> {
        match self {
            Self::String => Some(json!(text)),
            Self::Json | Self::Number | Self::Integer | Self::Boolean => {
                serde_json::from_str::<Value>(text)
                    .ok()
                    .filter(|value| Kind::from(self).fits(value))
            }
        }
    }
}

impl From<ScriptType> for Kind {
    fn from(kind: ScriptType) -> Self {
        match kind {
            ScriptType::String => Self::String,
            ScriptType::Number => Self::Number,
            ScriptType::Integer => Self::Integer,
            ScriptType::Boolean => Self::Boolean,
            ScriptType::Json => Self::Json,
        }
    }
}

/// One `@param` of a script's header.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptParam {
    /// The argument's name, and its flag (`--name`).
    pub name: String,
    /// Its type.
    pub kind: ScriptType,
    /// What it means.
    pub description: Option<String>,
    /// The call must give it (neither `?` nor a default, and not a boolean).
    pub required: bool,
    /// Passed when the call does not give it.
    pub default: Option<Value>,
    /// Its value may start with `-` (`@allow-dash`).
    pub allow_dash: bool,
}

/// What a script's header declares.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptHeader {
    /// `@tool`: the tool's name, when it is not the declaration's.
    pub tool: Option<String>,
    /// `@description` lines, joined by spaces.
    pub description: Option<String>,
    /// `@param` lines, in order.
    pub params: Vec<ScriptParam>,
}

impl ScriptHeader {
    /// Reads the header of `text`, a script run by `runtime`; faults name `origin` (the
    /// script) and the line.
    pub fn parse(
        text: &str,
        runtime: Runtime,
        origin: &str,
    ) -> Result<Self, Vec<DeclarationError>> {
        let mut faults = Faults::new(origin);
        let mut header = ScriptHeader::default();
        let mut descriptions = Vec::new();
        let mut names = BTreeSet::new();
        // Each `@param`'s line, and each `@allow-dash` name with its line, for the checks
        // that need the whole header.
        let mut param_lines = Vec::new();
        let mut dashed: Vec<(String, String)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let field = format!("line {}", index + 1);
            let comment = match header_line(index, line, runtime) {
                HeaderLine::Skipped => continue,
                HeaderLine::Comment(comment) => comment,
                HeaderLine::End => break,
            };
            let comment = comment.trim();
            let (word, rest) = comment
                .split_once(char::is_whitespace)
                .map_or((comment, ""), |(word, rest)| (word, rest.trim()));
            match word {
                "@description" => descriptions.push(rest.to_owned()),
                "@tool" => {
                    faults.tool_name(&field, rest);
                    header.tool = Some(rest.to_owned());
                }
                "@param" => {
                    if let Some(param) = parse_param(&mut faults, &field, rest) {
                        if !names.insert(param.name.clone()) {
                            faults.add(
                                &field,
                                format!("declares parameter \"{}\" a second time", param.name),
                                "give every @param its own name",
                            );
                        }
                        header.params.push(param);
                        param_lines.push(field.clone());
                    }
                }
                "@allow-dash" => {
                    if rest.is_empty() {
                        faults.add(
                            &field,
                            "@allow-dash names no parameter",
                            "name the parameters whose values may start with '-', such as \
                             `@allow-dash offset`",
                        );
                    }
                    dashed.extend(
                        rest.split_whitespace()
                            .map(|name| (name.to_owned(), field.clone())),
                    );
                }
                _ => {}
            }
        }
        for (name, field) in dashed {
            match header.params.iter_mut().find(|param| param.name == name) {
                Some(param) if param.kind == ScriptType::Boolean => faults.add(
                    &field,
                    format!("@allow-dash names the boolean \"{name}\", which passes no value"),
                    format!("remove \"{name}\" from @allow-dash"),
                ),
                Some(param) => param.allow_dash = true,
                None => faults.add(
                    &field,
                    format!("@allow-dash names \"{name}\", which no @param declares"),
                    "name only declared parameters",
                ),
            }
        }
        for (param, field) in header.params.iter().zip(&param_lines) {
            if let Some(default) = &param.default
                && !param.allow_dash
                && param.kind().dash_item(default).is_some()
            {
                faults.add(
                    field,
                    format!("default {default} starts with '-', which the script would read as an option"),
                    format!(
                        "add `@allow-dash {}` if the script reads it as a value, or change it",
                        param.name
                    ),
                );
            }
        }
        let description = descriptions.join(" ");
        if !description.trim().is_empty() {
            header.description = Some(description.trim().to_owned());
        }
        faults.finish(header)
    }
}

/// `name[?]:type[=default] [description…]`.
fn parse_param(faults: &mut Faults, field: &str, spec: &str) -> Option<ScriptParam> {
    let shape = "write `@param name:type description`, with a type of string, number, \
                 integer, boolean or json (`name?:type` optional, `name:type=default`)";
    let (head, description) = spec
        .split_once(char::is_whitespace)
        .map_or((spec, ""), |(head, rest)| (head, rest.trim()));
    let Some((name, typed)) = head.split_once(':') else {
        faults.add(field, format!("\"{head}\" has no type"), shape);
        return None;
    };
    let (name, optional) = match name.strip_suffix('?') {
        Some(name) => (name, true),
        None => (name, false),
    };
    faults.param_name(field, name);
    let (type_word, default_text) = match typed.split_once('=') {
        Some((word, default)) => (word, Some(default)),
        None => (typed, None),
    };
    let Some(kind) = ScriptType::named(type_word) else {
        faults.add(
            field,
            format!("\"{type_word}\" is not a parameter type"),
            shape,
        );
        return None;
    };
    let default = match default_text {
        None => None,
        Some(text) => match kind.read_default(text) {
            Some(value) => Some(value),
            None => {
                faults.add(
                    field,
                    format!("default \"{text}\" is not {}", Kind::from(kind).phrase()),
                    format!("write a default that is {}", Kind::from(kind).phrase()),
                );
                return None;
            }
        },
    };
    if kind == ScriptType::Boolean && default == Some(Value::Bool(true)) {
        faults.add(
            field,
            "a boolean defaults to true, so it could never be turned off",
            "drop the default (absent is false) and invert the parameter's meaning",
        );
    }
    Some(ScriptParam {
        name: name.to_owned(),
        kind,
        description: (!description.is_empty()).then(|| description.to_owned()),
        required: !optional && default.is_none() && kind != ScriptType::Boolean,
        default,
        allow_dash: false,
    })
}

impl Declared for ScriptParam {
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
}

/// How the script adapter words a refusal of a call's arguments.
const WORDING: Wording = Wording {
    takes: "this script",
    as_option: "the script would read as an option",
};

impl ScriptDeclaration {
    /// Reads a declaration from `value`, which came from `origin` (a file, an `add`
    /// action): every fault at once. A relative `path` is resolved against the directory
    /// of `origin` when that is an absolute file path.
    pub fn parse(value: &Value, origin: &str) -> Result<Self, Vec<DeclarationError>> {
        let mut faults = Faults::new(origin);
        let Some(object) = faults.object(value, "", DECLARATION_FIELDS) else {
            return Err(faults.into_errors());
        };
        let name = faults.required::<String>(object, "", "name", "a string");
        if let Some(name) = &name {
            faults.source_name("name", name);
        }
        let path = faults
            .required::<PathBuf>(object, "", "path", "a string")
            .and_then(|path| {
                if path.is_absolute() {
                    return Some(path);
                }
                let base = Path::new(origin);
                match base.parent() {
                    Some(dir) if base.is_absolute() => Some(dir.join(path)),
                    _ => {
                        faults.add(
                            "path",
                            format!("\"{}\" is relative to no file", path.display()),
                            "write an absolute path (a declaration that is not read from a \
                             file has no directory to resolve it against)",
                        );
                        None
                    }
                }
            });
        let runtime = faults
            .take::<Runtime>(
                object,
                "",
                "runtime",
                "one of bash, python, uv, node, deno, bun, shebang",
            )
            .unwrap_or_default();
        let timeout_ms = faults.timeout(object, "").unwrap_or(DEFAULT_TIMEOUT_MS);
        let max_output_bytes = faults
            .max_output(object, "")
            .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
        let env = faults.env(object, "");
        let cwd = faults.cwd(object, "");
        let sandbox = faults.sandbox(object, "");
        let version = faults.version(object, "");
        let outside_folder = faults
            .take::<bool>(object, "", "outsideFolder", "true or false")
            .unwrap_or(false);
        let (Some(name), Some(path)) = (name, path) else {
            return Err(faults.into_errors());
        };
        faults.finish(Self {
            name,
            path,
            runtime,
            timeout_ms,
            max_output_bytes,
            env,
            cwd,
            sandbox,
            version,
            outside_folder,
        })
    }

    /// Refuses a script outside the folder of `origin` (the file that declares it, when it
    /// is one), symbolic links followed, unless the declaration says `outsideFolder`.
    fn beside_its_declaration(&self, origin: &str) -> Result<(), DeclarationError> {
        let origin = Path::new(origin);
        let Some(folder) = origin.is_absolute().then(|| origin.parent()).flatten() else {
            return Ok(());
        };
        if self.outside_folder {
            return Ok(());
        }
        let real = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let (script, folder) = (real(&self.path), real(folder));
        if script.starts_with(&folder) {
            return Ok(());
        }
        Err(DeclarationError::new(
            origin.display().to_string(),
            "path",
            format!(
                "{} is outside {}, the folder of the file that declares it",
                script.display(),
                folder.display()
            ),
            "keep the script beside its declaration, or write \"outsideFolder\": true if it \
             is meant to run a script from elsewhere",
        ))
    }

    /// Opens the source: reads the script's header and expands `env` (see
    /// [`super::cli::CliDeclaration::open`]); calls are marked for `reaper`.
    pub(crate) fn open(
        &self,
        origin: &str,
        expand: &dyn Fn(&str) -> Result<String, ConfigError>,
        children: Children,
    ) -> Result<ScriptSource, Vec<DeclarationError>> {
        let shown = self.path.display().to_string();
        self.beside_its_declaration(origin)
            .map_err(|outside| vec![outside])?;
        let (text, longer) = read_head(&self.path).map_err(|unreadable| {
            vec![DeclarationError::new(
                origin,
                "path",
                unreadable.to_string(),
                "point path at a readable script",
            )]
        })?;
        if longer && header_runs_to_the_end(&text, self.runtime) {
            return Err(vec![DeclarationError::new(
                &shown,
                "header",
                format!(
                    "runs past the first {} KiB of the script, the most read for a header",
                    HEADER_BYTES >> 10
                ),
                "shorten the header (its @param and @description lines)",
            )]);
        }
        let header = ScriptHeader::parse(&text, self.runtime, &shown);
        let launcher = Launcher::open(&self.env, self.sandbox.as_ref(), origin, expand, children);
        let (header, launcher) = match (header, launcher) {
            (Ok(header), Ok(launcher)) => (header, launcher),
            (header, launcher) => {
                let mut errors = header.err().unwrap_or_default();
                errors.extend(launcher.err().unwrap_or_default());
                return Err(errors);
            }
        };
        Ok(ScriptSource {
            declaration: self.clone(),
            tool: header.tool.clone().unwrap_or_else(|| self.name.clone()),
            header,
            launcher,
        })
    }

    /// What this machine has of what the script needs: the file, its runtime on `PATH`
    /// (for `shebang`: the file executable, starting with `#!`) and, when `version` is
    /// set, whether the runtime still prints it.
    pub async fn check(&self) -> Finding {
        let shown = self.path.display();
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => return Finding::Missing(format!("script {shown} is not a file")),
            Err(error) => {
                return Finding::Missing(format!("script {shown} cannot be read: {error}"));
            }
        };
        let path = std::env::var_os("PATH");
        let (program, mut args) = match self.runtime.launcher() {
            Some((runtime, _)) => match resolve_program(runtime, path.as_deref()) {
                Ok(program) => (program, Vec::new()),
                Err(problem) => {
                    return Finding::Missing(format!("the {runtime} runtime: {problem}"));
                }
            },
            None => {
                if meta.permissions().mode() & 0o111 == 0 {
                    return Finding::Missing(format!(
                        "script {shown} is not executable: chmod +x it, or set a runtime"
                    ));
                }
                let (head, _) = read_head(&self.path).unwrap_or_default();
                let Some(line) = head.lines().next().and_then(|line| line.strip_prefix("#!"))
                else {
                    return Finding::Missing(format!(
                        "script {shown} does not start with #!: add one, or set a runtime"
                    ));
                };
                let mut words = line.split_whitespace().map(str::to_owned);
                let Some(interpreter) = words.next() else {
                    return Finding::Missing(format!("script {shown} has an empty #! line"));
                };
                match resolve_program(&interpreter, path.as_deref()) {
                    Ok(program) => (program, words.collect()),
                    Err(problem) => {
                        return Finding::Missing(format!(
                            "the #! interpreter of {shown}: {problem}"
                        ));
                    }
                }
            }
        };
        match &self.version {
            None => Finding::Ready(format!("{shown} run by {}", program.display())),
            Some(declared) => {
                args.push("--version".to_owned());
                probe_version(&program, &args, declared).await
            }
        }
    }
}

/// The first [`HEADER_BYTES`] of a script, decoded lossily, and whether the script is longer.
///
/// # Errors
///
/// [`OpenError::ScriptUnreadable`]: the file cannot be opened or read.
fn read_head(path: &Path) -> Result<(String, bool), OpenError> {
    use std::io::Read;
    let unreadable = |source| OpenError::ScriptUnreadable {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(HEADER_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    let longer = bytes.len() as u64 > HEADER_BYTES;
    bytes.truncate(HEADER_BYTES as usize);
    Ok((String::from_utf8_lossy(&bytes).into_owned(), longer))
}

/// One line of a script as its header reads it.
enum HeaderLine<'a> {
    /// The `#!` line, or a blank one: part of the header, saying nothing.
    Skipped,
    /// A comment: what follows its marker.
    Comment(&'a str),
    /// Anything else: the header ended before it.
    End,
}

/// Line `index` (from 0) of a script `runtime` runs, as its header reads it.
fn header_line(index: usize, line: &str, runtime: Runtime) -> HeaderLine<'_> {
    let trimmed = line.trim();
    if index == 0 && trimmed.starts_with("#!") || trimmed.is_empty() {
        return HeaderLine::Skipped;
    }
    runtime
        .comments()
        .iter()
        .find_map(|marker| trimmed.strip_prefix(marker))
        .map_or(HeaderLine::End, HeaderLine::Comment)
}

/// Whether the header of `text` is still going on at its last line: read from a longer
/// script, the rest of it was not read.
fn header_runs_to_the_end(text: &str, runtime: Runtime) -> bool {
    !text
        .lines()
        .enumerate()
        .any(|(index, line)| matches!(header_line(index, line, runtime), HeaderLine::End))
}

/// An opened [`ScriptDeclaration`]: its one tool, callable.
pub struct ScriptSource {
    declaration: ScriptDeclaration,
    /// The tool's name: `@tool`, or the declaration's name.
    tool: String,
    header: ScriptHeader,
    /// Its environment, expanded, and what every run starts from.
    launcher: Launcher,
}

impl std::fmt::Debug for ScriptSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptSource")
            .field("name", &self.declaration.name)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl ScriptSource {
    /// The header the script declared when it was opened.
    pub fn header(&self) -> &ScriptHeader {
        &self.header
    }
}

impl ToolSource for ScriptSource {
    fn tools(&self) -> Vec<SourceTool> {
        vec![SourceTool {
            name: self.tool.clone(),
            description: self.header.description.clone(),
            input_schema: params::input_schema(&self.header.params),
        }]
    }

    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Map<String, Value>,
        deadline: Duration,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            if tool != self.tool {
                return Err(SourceError::UnknownTool(tool.to_owned()));
            }
            let flags = bind(&self.header.params, arguments)?;
            let declaration = &self.declaration;
            let script = declaration.path.display().to_string();
            let (program, mut args) = match declaration.runtime.launcher() {
                Some((runtime, before)) => {
                    let program = self.launcher.resolve(runtime)?;
                    let mut args: Vec<String> =
                        before.iter().map(|arg| (*arg).to_owned()).collect();
                    args.push(script.clone());
                    (program, args)
                }
                None => (declaration.path.clone(), Vec::new()),
            };
            args.extend(flags);
            let limits = Limits {
                cwd: declaration.cwd.as_deref(),
                timeout: deadline.min(Duration::from_millis(declaration.timeout_ms)),
                max_output: declaration.max_output_bytes,
            };
            let exited = self.launcher.run(&program, &args, None, limits).await?;
            Ok(outcome(&script, exited, false))
        })
    }
}

/// Checks `arguments` against the header and builds `--name value` pairs in header order.
fn bind(params: &[ScriptParam], arguments: Map<String, Value>) -> Result<Vec<String>, SourceError> {
    params::known(params, &arguments, &WORDING)?;
    let mut argv = Vec::new();
    for param in params {
        let Some(value) = params::value(param, &arguments)? else {
            continue;
        };
        let flag = format!("--{}", param.name);
        if param.kind == ScriptType::Boolean {
            if value == &Value::Bool(true) {
                argv.push(flag);
            }
            continue;
        }
        let items = params::items(param, value)?;
        if !param.allow_dash {
            params::no_dash(param, value, &WORDING)?;
        }
        argv.push(flag);
        argv.extend(items);
    }
    Ok(argv)
}

#[cfg(test)]
mod tests;
