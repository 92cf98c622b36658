//! `plurnk-mcp import`: another client's MCP server list (Claude Desktop, Cursor, VS Code,
//! Codex) read into workspace definitions, with a reason for every entry that cannot be
//! carried over.
//!
//! Pure but for [`read`] (the bounded read of the file itself): file text in, a [`Plan`]
//! out. Nothing here touches a store or a host; the command line hands each planned
//! definition to `Workspace::add` (at most `--concurrency` at once), so the install gate
//! (`PLURNK_MCP_ALLOW_ADD`, `PLURNK_MCP_WORKSPACE_ENV`) and every check of an added server
//! still apply, and a refused entry is reported with the action's Problem.
//!
//! # Rules
//!
//! - **Names** fold to the host's alias rule: ASCII lower case, and `_`, `.`, ` `, `/`, `:`
//!   and `@` read as `-` (repeats collapsed, none at either end). A name that still is not a
//!   valid alias ([`is_valid_alias`]), or that folds to the same alias as another entry's,
//!   is skipped with the reason; colliding entries are all skipped, never one chosen.
//! - **Literal secrets are moved out**, by the host's own tests of what a credential is
//!   (`config::literal_credentials`, the refusal every kept definition meets). An
//!   environment entry whose name says credential (`key`, `token`, `secret`, `password`,
//!   `pat`, `auth`, ...) and whose value is literal becomes `${NAME}`, `NAME` being the
//!   entry's own name (`GH_PAT` → `${GH_PAT}`); a literal holds no `${` at all, so
//!   `pa$$w0rd` is moved like any other. A literal `Authorization: Bearer <token>` header
//!   becomes the server's bearer authorization, `${<ALIAS>_TOKEN}` holding the token; any
//!   other credential-named header `H` becomes `${<ALIAS>_<H>}` holding the whole value
//!   (`X-Auth` of `web` → `${WEB_X_AUTH}`). The value of a credential flag in the arguments
//!   (`--api-key X`, `--token=X`) becomes `${<ALIAS>_<FLAG>}`. Inside any other value, a
//!   URL's password becomes `${<NAME>_PASSWORD}` (`DATABASE_URL` → `DATABASE_URL_PASSWORD`;
//!   `<ALIAS>_PASSWORD` in the endpoint or an argument), a credential-named query value
//!   `${<ALIAS>_<PARAMETER>}`, and a token-shaped word (`ghp_…`, a JWT, a long random
//!   word) `${NAME}` of its entry (`${<ALIAS>_TOKEN}` in an argument). A derived name never
//!   collides: one the file refers to itself, or another entry's with a different value,
//!   is prefixed with the alias (and numbered). A credential mixed with references, which
//!   cannot be moved whole, skips its entry. The values never leave [`plan`]: the plan
//!   holds only the references and what each was moved from.
//! - **References** already written are carried: `${NAME}`, and `${env:NAME}` of VS Code
//!   and Cursor as `${NAME}`; `${userHome}` becomes `${HOME}`, `${/}` and
//!   `${pathSeparator}` a `/`. `${input:...}` (asked of the user by VS Code) and editor
//!   variables such as `${workspaceFolder}` cannot be carried: such an entry is skipped.
//! - **Disabled entries** (Cursor `"disabled": true`, Codex `enabled = false`) are planned
//!   with `enabled: false`: the command line adds them (add keeps only a server that
//!   connects, so it connects once) and disables them at once.
//! - **Not carried**, each skipping its entry with the reason and the fix: the SSE-only
//!   transport, `${input:...}`, `envFile`, a `null` environment value, OAuth settings,
//!   Codex `disabled_tools` without `enabled_tools`, and any field this reader does not know
//!   (it might change how the server runs). Settings that only tune the client (timeouts,
//!   approvals, `required`, VS Code's `dev`) are dropped with a note.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::config::{
    ConfigErrors, LiteralKind, McpAuthorization, McpHttpDefinition, McpServerDefinition,
    McpStdioDefinition, ServerDefinition, TransportKind, credential_flag, is_credential_name,
    is_valid_alias, literal_credentials, literals_in, redact_url, shorten,
};

/// The client whose configuration file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `claude_desktop_config.json`: `{"mcpServers": {...}}`.
    ClaudeDesktop,
    /// Cursor's `mcp.json`: `{"mcpServers": {...}}` with `type` and `disabled`.
    Cursor,
    /// VS Code's `mcp.json`: `{"servers": {...}, "inputs": [...]}`.
    VsCode,
    /// Codex's `config.toml`: `[mcp_servers.NAME]` tables.
    Codex,
}

impl Format {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [Self; 4] = [Self::ClaudeDesktop, Self::Cursor, Self::VsCode, Self::Codex];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeDesktop => "claude-desktop",
            Self::Cursor => "cursor",
            Self::VsCode => "vscode",
            Self::Codex => "codex",
        }
    }

    /// The format `--format NAME` names (`claude` and `vs-code` too), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "claude-desktop" | "claude" => Some(Self::ClaudeDesktop),
            "cursor" => Some(Self::Cursor),
            "vscode" | "vs-code" => Some(Self::VsCode),
            "codex" => Some(Self::Codex),
            _ => None,
        }
    }

    /// The format of a file, from its name and content: a `.toml` file (or TOML text with
    /// `mcp_servers`) is Codex; JSON with `servers` is VS Code; JSON with `mcpServers` is
    /// Cursor when it lives under `.cursor/` or uses Cursor's `type`, `disabled` or
    /// `${env:...}`, else Claude Desktop. Unreadable text falls back on the path.
    pub fn detect(path: &str, text: &str) -> Self {
        let path = path.replace('\\', "/").to_ascii_lowercase();
        if path.ends_with(".toml") {
            return Self::Codex;
        }
        let Ok(value) = serde_json::from_str::<Value>(&strip_jsonc(text)) else {
            if toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("mcp_servers")) {
                return Self::Codex;
            }
            return if path.contains(".vscode/") {
                Self::VsCode
            } else if path.contains(".cursor/") {
                Self::Cursor
            } else {
                Self::ClaudeDesktop
            };
        };
        if vscode_servers(&value).is_some() {
            return Self::VsCode;
        }
        let cursorish = value
            .get("mcpServers")
            .and_then(Value::as_object)
            .is_some_and(|servers| {
                servers.values().any(|server| {
                    server.get("disabled").is_some()
                        || server.get("type").is_some()
                        || server.to_string().contains("${env:")
                })
            });
        if path.contains(".cursor/") || cursorish {
            Self::Cursor
        } else {
            Self::ClaudeDesktop
        }
    }

    /// The key that holds the server list, as the file spells it.
    fn servers_key(self) -> &'static str {
        match self {
            Self::ClaudeDesktop | Self::Cursor => "mcpServers",
            Self::VsCode => "servers",
            Self::Codex => "mcp_servers",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a file cannot be read at all. None quotes a value from the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The text is not JSON (or TOML) at all.
    #[error(
        "it is not valid {language}{}: {message}: fix the file, or name its format with --format (claude-desktop, cursor, vscode, codex)",
        at(*line, *column)
    )]
    Syntax {
        /// `JSON` or `TOML`.
        language: &'static str,
        /// The 1-based line the parser stopped at, when it says.
        line: Option<usize>,
        /// The 1-based column the parser stopped at, when it says.
        column: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// The document has no server list where the format keeps it.
    #[error(
        "it holds no \"{key}\" object, where a {format} file lists its servers: name the right format with --format (claude-desktop, cursor, vscode, codex)"
    )]
    NoServers {
        /// The format it was read as.
        format: Format,
        /// The key that was looked for.
        key: &'static str,
    },
}

fn at(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    }
}

/// Why one entry is not imported: each says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCarried {
    /// The name cannot become an alias.
    #[error(
        "its name does not fold to an alias ([a-z][a-z0-9-]*, starting with a letter, at most 64 characters, not a reserved name such as \"enabled\", not ending in -args, -cwd, -env, -bearer, -headers, -tools, -read or -summary): rename it in the file"
    )]
    Unfoldable,
    /// Two or more names fold to one alias.
    #[error("its name folds to \"{alias}\", like {others}: rename all but one in the file")]
    Collision {
        /// The alias they share.
        alias: String,
        /// The other names, quoted and joined.
        others: String,
    },
    /// The entry is not an object.
    #[error("it is not an object of settings")]
    NotAnObject,
    /// A field of the wrong JSON type.
    #[error("\"{field}\" is not {expected}: fix it in the file")]
    WrongType {
        /// The field.
        field: String,
        /// What it must be.
        expected: &'static str,
    },
    /// Neither a command nor a URL.
    #[error("it has neither \"command\" nor \"url\": give one")]
    NoTarget,
    /// Both a command and a URL.
    #[error("it has both \"command\" and \"url\": keep the one it uses")]
    BothTargets,
    /// A `type` that is not a transport.
    #[error("\"type\" is none of stdio, http, streamable-http or sse: set the transport it uses")]
    UnknownType,
    /// The SSE-only transport of 2024-11-05.
    #[error(
        "it uses the SSE-only transport (type \"sse\"), which plurnk-mcp does not speak: if the server also serves Streamable HTTP, point \"url\" at that endpoint and set type \"http\""
    )]
    Sse,
    /// The transport's target is missing or of the wrong transport.
    #[error("type \"{kind}\" needs \"{needs}\": give it")]
    MissingForType {
        /// The declared type.
        kind: &'static str,
        /// The field it needs.
        needs: &'static str,
    },
    /// `${input:ID}`, which VS Code asks the user for.
    #[error(
        "\"{field}\" uses ${{input:{id}}}, which VS Code asks the user for: put the value in an environment variable and write ${{env:NAME}} instead"
    )]
    InputVariable {
        /// The field holding it.
        field: String,
        /// The input's id.
        id: String,
    },
    /// An editor variable such as `${workspaceFolder}`.
    #[error(
        "\"{field}\" uses ${{{variable}}}, which only the editor can fill in: write the value, or ${{env:NAME}}"
    )]
    EditorVariable {
        /// The field holding it.
        field: String,
        /// What is between `${` and `}`.
        variable: String,
    },
    /// `envFile`, which the host does not load.
    #[error(
        "it reads \"envFile\", which plurnk-mcp does not load: copy the variables it needs into \"env\", each value as ${{env:NAME}}"
    )]
    EnvFile,
    /// A `null` environment value (VS Code: unset the variable).
    #[error("env \"{name}\" is null (unset for the server), which plurnk-mcp cannot do: remove it")]
    UnsetEnv {
        /// The variable.
        name: String,
    },
    /// OAuth settings.
    #[error(
        "it configures OAuth (\"{field}\"), which plurnk-mcp does not perform: give it a bearer token instead (`plurnk-mcp add`)"
    )]
    OAuth {
        /// The field.
        field: String,
    },
    /// Codex `disabled_tools` alone.
    #[error(
        "\"disabled_tools\" without \"enabled_tools\" cannot be carried: plurnk-mcp enables tools by name; list the ones to keep in \"enabled_tools\""
    )]
    ExcludedTools,
    /// A field this reader does not know.
    #[error(
        "\"{field}\" is not understood and may change how the server runs: remove it, or add the server by hand (`plurnk-mcp add`)"
    )]
    UnknownField {
        /// The field.
        field: String,
    },
    /// A credential that is mixed with references, so it cannot be moved into one.
    #[error(
        "it holds a credential written literally in {fields}, mixed with ${{NAME}} references so that it cannot be moved into one: put the whole value in one environment variable and write ${{NAME}} in the file"
    )]
    LiteralCredential {
        /// The fields, never a value.
        fields: String,
    },
    /// The host's own checks of a definition refused it.
    #[error("it is not a valid definition: {0}")]
    Invalid(ConfigErrors),
}

/// What [`plan`] makes of a file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The format it was read as.
    pub format: Format,
    /// The entries that can be imported, in the file's order.
    pub servers: Vec<Planned>,
    /// The entries that cannot, with their reasons.
    pub skipped: Vec<Skipped>,
}

/// One entry, ready for `Workspace::add`.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The name in the file.
    pub source: String,
    /// The validated, unexpanded definition (its alias the folded name).
    pub definition: ServerDefinition,
    /// Whether it stays enabled once added.
    pub enabled: bool,
    /// The `${NAME}` references that replace literal secrets of the file.
    pub introduced: Vec<Introduced>,
    /// Settings that were dropped because they only tune the other client.
    pub notes: Vec<String>,
}

/// A literal secret moved out of the file into a `${NAME}` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Introduced {
    /// The variable the reference names.
    pub variable: String,
    /// Where the value was: `env GITHUB_TOKEN`, `header Authorization`.
    pub from: String,
}

/// An entry left out, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The name in the file.
    pub source: String,
    /// Why, and what to do.
    pub reason: NotCarried,
}

impl Planned {
    /// The server alias.
    pub fn alias(&self) -> &str {
        self.definition.alias()
    }

    /// Its transport.
    pub fn transport(&self) -> TransportKind {
        self.definition.transport().kind()
    }

    /// What it runs or dials, safe to print: the command as written, or a URL's origin.
    pub fn target(&self) -> String {
        match self.definition.transport() {
            crate::config::Transport::Stdio(stdio) => stdio.command.clone(),
            crate::config::Transport::Http(http) => redact_url(&http.url),
            crate::config::Transport::InProcess => "in-process".to_owned(),
            crate::config::Transport::Source(source) => source.origin.clone(),
        }
    }
}

impl Plan {
    /// Every `${NAME}` the planned definitions refer to: what the operator sets and lists
    /// in `PLURNK_MCP_WORKSPACE_ENV` before they can connect.
    pub fn variables(&self) -> BTreeSet<String> {
        self.servers
            .iter()
            .flat_map(|server| server.definition.referenced_names())
            .collect()
    }
}

/// The default bound of a file `import` reads: 1 MiB. The largest client files seen hold a
/// few dozen servers in under 20 KiB; a megabyte holds about 4,000 entries.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 20;

/// The default number of entries `import` connects at once: each add spawns or dials its
/// server and lists it, and a Node server's process holds about 60 MiB while it starts.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// Why a file cannot be read for import. None quotes its content.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It cannot be opened or read.
    #[error(
        "cannot read {path}: {source}: give the path of a Claude Desktop, Cursor, VS Code or Codex configuration file"
    )]
    Unreadable {
        /// The path as given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A directory, FIFO, socket or device: reading one could block or never end.
    #[error(
        "{path} is not a regular file (it is {what}): give the path of a configuration file itself"
    )]
    NotAFile {
        /// The path as given.
        path: String,
        /// What it is instead.
        what: &'static str,
    },
    /// Past the size bound.
    #[error(
        "{path} is larger than {max_bytes} bytes, the bound of an imported file: give the client's configuration file, or raise the bound with --max-bytes"
    )]
    TooLarge {
        /// The path as given.
        path: String,
        /// The bound.
        max_bytes: u64,
    },
    /// Not UTF-8 text.
    #[error("{path} is not UTF-8 text: give a JSON or TOML configuration file")]
    NotText {
        /// The path as given.
        path: String,
    },
}

/// Reads the file at `path` for [`plan`]: a regular file (a symlink to one included) of at
/// most `max_bytes` bytes of UTF-8. A FIFO, socket, device or directory is refused without
/// reading from it (it is opened non-blocking, so a FIFO with no writer does not hold the
/// command), and so is a longer file, after reading one byte past the bound at most. The only
/// function here that touches the file system.
///
/// # Errors
///
/// [`ReadError`], naming the path (as `shown`, the caller's printable form of it) and the
/// fix.
pub fn read(path: &std::path::Path, shown: &str, max_bytes: u64) -> Result<String, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let unreadable = |source| ReadError::Unreadable {
        path: shown.to_owned(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(unreadable)?;
    let kind = file.metadata().map_err(unreadable)?.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else {
        Some("not a file")
    };
    if let Some(what) = what {
        return Err(ReadError::NotAFile {
            path: shown.to_owned(),
            what,
        });
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge {
            path: shown.to_owned(),
            max_bytes,
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotText {
        path: shown.to_owned(),
    })
}

/// Reads `text` as `format` into a plan: every entry either planned or skipped with its
/// reason.
///
/// # Errors
///
/// Text that does not parse (with the line and column the parser gives), or no server list
/// where the format keeps it.
pub fn plan(text: &str, format: Format) -> Result<Plan, ImportError> {
    let document = parse(text, format)?;
    let servers = match format {
        Format::VsCode => vscode_servers(&document),
        _ => document.get(format.servers_key()),
    };
    let Some(servers) = servers.and_then(Value::as_object) else {
        return Err(ImportError::NoServers {
            format,
            key: format.servers_key(),
        });
    };
    let mut plan = Plan {
        format,
        servers: Vec::new(),
        skipped: Vec::new(),
    };
    let aliases = fold_all(servers.keys().map(String::as_str));
    // The literal values moved out so far, by the variable that now holds each: only to
    // tell one value from another, never kept beyond this function.
    let mut moved = Moved::new(&document);
    for (source, value) in servers {
        let skip = |reason| Skipped {
            source: source.clone(),
            reason,
        };
        let alias = match &aliases[source.as_str()] {
            Ok(alias) => alias.clone(),
            Err(reason) => {
                plan.skipped.push(skip(reason.clone()));
                continue;
            }
        };
        let Some(fields) = value.as_object() else {
            plan.skipped.push(skip(NotCarried::NotAnObject));
            continue;
        };
        let read = match format {
            Format::Codex => codex_entry(&alias, fields, &mut moved),
            _ => json_entry(&alias, fields, &mut moved),
        };
        match read {
            Ok(mut planned) => {
                planned.source = source.clone();
                plan.servers.push(planned);
            }
            Err(reason) => plan.skipped.push(skip(reason)),
        }
    }
    Ok(plan)
}

fn parse(text: &str, format: Format) -> Result<Value, ImportError> {
    if format == Format::Codex {
        let table: toml::Table = toml::from_str(text).map_err(|error| {
            let (line, column) = error
                .span()
                .map(|span| line_column(text, span.start))
                .unzip();
            ImportError::Syntax {
                language: "TOML",
                line,
                column,
                message: error.message().trim().replace('\n', "; "),
            }
        })?;
        return Ok(toml_to_json(toml::Value::Table(table)));
    }
    serde_json::from_str(&strip_jsonc(text)).map_err(|error| ImportError::Syntax {
        language: "JSON",
        line: Some(error.line()),
        column: Some(error.column()),
        // serde_json's syntax messages end in " at line L column C", said once already.
        message: error
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    })
}

/// VS Code's list: `servers` of `mcp.json`, or `mcp.servers` of a `settings.json`.
fn vscode_servers(document: &Value) -> Option<&Value> {
    document
        .get("servers")
        .or_else(|| document.get("mcp").and_then(|mcp| mcp.get("servers")))
        .filter(|servers| servers.is_object())
}

/// The 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(key, value)| (key, toml_to_json(value)))
                .collect(),
        ),
    }
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as VS Code and Cursor accept it,
/// made plain JSON. Every removed byte becomes a space, so the parser's line and column
/// still point into the file as written.
fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    // Comments first, so that a comma before one is seen to trail.
    outside_strings(&mut bytes, |bytes, i| match (bytes[i], bytes.get(i + 1)) {
        (b'/', Some(b'/')) => {
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| i + n);
            bytes[i..end].fill(b' ');
            end
        }
        (b'/', Some(b'*')) => {
            let end = bytes[i + 2..]
                .windows(2)
                .position(|pair| pair == b"*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            for byte in &mut bytes[i..end] {
                if *byte != b'\n' {
                    *byte = b' ';
                }
            }
            end
        }
        _ => i + 1,
    });
    outside_strings(&mut bytes, |bytes, i| {
        if bytes[i] == b',' {
            let next = bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i + 1
    });
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// Calls `visit` at each byte outside JSON strings; it answers where to go on.
fn outside_strings(bytes: &mut [u8], mut visit: impl FnMut(&mut [u8], usize) -> usize) {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        if in_string {
            match bytes[i] {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
        } else if bytes[i] == b'"' {
            in_string = true;
            i += 1;
        } else {
            i = visit(bytes, i).max(i + 1);
        }
    }
}

// === names ===

/// Each name's alias, or why it has none: unfoldable, or shared with another name.
fn fold_all<'a>(
    names: impl Iterator<Item = &'a str>,
) -> BTreeMap<&'a str, Result<String, NotCarried>> {
    let folded: Vec<(&str, Option<String>)> = names.map(|name| (name, fold(name))).collect();
    let mut by_alias: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, alias) in &folded {
        if let Some(alias) = alias {
            by_alias.entry(alias).or_default().push(name);
        }
    }
    folded
        .iter()
        .map(|(name, alias)| {
            let result = match alias {
                None => Err(NotCarried::Unfoldable),
                Some(alias) => {
                    let others: Vec<&&str> = by_alias[alias.as_str()]
                        .iter()
                        .filter(|other| *other != name)
                        .collect();
                    if others.is_empty() {
                        Ok(alias.clone())
                    } else {
                        Err(NotCarried::Collision {
                            alias: alias.clone(),
                            others: some_of(&others),
                        })
                    }
                }
            };
            (*name, result)
        })
        .collect()
}

/// How many other names a collision names; the rest are counted. Thousands of names folding
/// to one alias would otherwise make each of their reasons list all the others.
const NAMED_OTHERS: usize = 3;

/// `"a", "b", "c" and 7 more`, each name cut to the quoting bound.
fn some_of(names: &[&&str]) -> String {
    let mut shown: Vec<String> = names
        .iter()
        .take(NAMED_OTHERS)
        .map(|name| format!("{:?}", shorten(name)))
        .collect();
    if names.len() > NAMED_OTHERS {
        shown.push(format!("{} more", names.len() - NAMED_OTHERS));
    }
    match shown.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => shown.join(""),
    }
}

/// A client's server name folded to the host's alias rule, if it can be.
fn fold(name: &str) -> Option<String> {
    let mut alias = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            c if c.is_ascii_alphanumeric() => alias.push(c.to_ascii_lowercase()),
            '-' | '_' | '.' | ' ' | '/' | ':' | '@' => {
                if !alias.is_empty() && !alias.ends_with('-') {
                    alias.push('-');
                }
            }
            _ => return None,
        }
    }
    while alias.ends_with('-') {
        alias.pop();
    }
    is_valid_alias(&alias).then_some(alias)
}

/// `web` → `WEB`, `my-server` → `MY_SERVER`; any name → a reference name.
fn variable_name(parts: &[&str]) -> String {
    let mut name: String = parts
        .iter()
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("_");
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

// === secrets ===

/// The literal values moved out of the file so far, by the variable that holds each, and the
/// names the file refers to itself (which hold values of their own).
#[derive(Default)]
struct Moved {
    values: BTreeMap<String, String>,
    referred: BTreeSet<String>,
}

impl Moved {
    /// Nothing moved yet; `document`'s own references are taken.
    fn new(document: &Value) -> Self {
        let mut referred = BTreeSet::new();
        referred_names(document, None, &mut referred);
        Self {
            values: BTreeMap::new(),
            referred,
        }
    }

    /// The variable that will hold `value`: `preferred`, unless the file refers to that name
    /// itself or another entry already moved a different value there; then
    /// `<ALIAS>_<preferred>` (numbered if that is taken too).
    fn variable(&mut self, preferred: String, alias: &str, value: &str) -> String {
        let prefix = variable_name(&[alias]);
        let prefixed = if preferred.starts_with(&format!("{prefix}_")) {
            preferred.clone()
        } else {
            format!("{prefix}_{preferred}")
        };
        let mut candidate = preferred;
        let mut n = 1;
        loop {
            match self.values.get(&candidate) {
                Some(held) if held != value => {}
                Some(_) => return candidate,
                None if self.referred.contains(&candidate) => {}
                None => {
                    self.values.insert(candidate.clone(), value.to_owned());
                    return candidate;
                }
            }
            n += 1;
            candidate = if n == 2 && prefixed != candidate {
                prefixed.clone()
            } else {
                format!("{prefixed}_{n}")
            };
        }
    }
}

/// Every name `value` refers to: `${NAME}` and `${env:NAME}` in any string (`${userHome}` is
/// `HOME`), and the variable names Codex's `env_vars`, `bearer_token_env_var` and
/// `env_http_headers` hold.
fn referred_names(value: &Value, key: Option<&str>, names: &mut BTreeSet<String>) {
    let codex = matches!(
        key,
        Some("env_vars" | "bearer_token_env_var" | "env_http_headers")
    );
    match value {
        Value::String(s) => {
            if codex && is_reference_name(s) {
                names.insert(s.clone());
            }
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                let after = &rest[start + 2..];
                let Some(end) = after.find('}') else {
                    break;
                };
                let inner = &after[..end];
                let name = inner.strip_prefix("env:").unwrap_or(inner);
                if inner == "userHome" {
                    names.insert("HOME".to_owned());
                } else if is_reference_name(name) {
                    names.insert(name.to_owned());
                }
                rest = &after[end + 1..];
            }
        }
        Value::Array(items) => {
            for item in items {
                referred_names(item, key, names);
            }
        }
        Value::Object(fields) => {
            for (field, item) in fields {
                // Below a Codex list of names (`{ name = "X" }`, a header's variable) every
                // name counts.
                referred_names(item, if codex { key } else { Some(field) }, names);
            }
        }
        _ => {}
    }
}

impl fmt::Debug for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.values.keys()).finish()
    }
}

/// Moves the credentials written into one entry's strings out into references.
struct Outward<'a> {
    alias: &'a str,
    moved: &'a mut Moved,
    introduced: &'a mut Vec<Introduced>,
}

impl Outward<'_> {
    /// `s` with each credential written into it (a URL's password or credential-named query
    /// value, a token-shaped word) replaced by a reference to the variable `name` gives it.
    fn literals_in(
        &mut self,
        s: &str,
        from: &str,
        name: impl Fn(&LiteralKind) -> String,
    ) -> String {
        let mut out = String::with_capacity(s.len());
        let mut copied = 0;
        for literal in literals_in(s) {
            let value = &s[literal.range.clone()];
            let variable = self.moved.variable(name(&literal.kind), self.alias, value);
            self.introduced.push(Introduced {
                variable: variable.clone(),
                from: format!("{from} ({})", literal.kind),
            });
            out.push_str(&s[copied..literal.range.start]);
            out.push_str(&format!("${{{variable}}}"));
            copied = literal.range.end;
        }
        out.push_str(&s[copied..]);
        out
    }

    /// An argument array with each credential flag's literal value (`--token X`,
    /// `--api-key=X`) and each credential written into an argument moved out; a flag's
    /// value becomes `${<ALIAS>_<FLAG>}`.
    fn arguments(&mut self, args: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(args.len());
        // The flag whose value the next argument is: its name and as written.
        let mut value_of: Option<(&str, &str)> = None;
        for (index, arg) in args.iter().enumerate() {
            let from = format!("args[{index}]");
            if let Some(flag) = value_of.take()
                && !arg.starts_with('-')
                && !arg.is_empty()
            {
                out.push(if is_literal(arg) {
                    self.flag_value(flag, arg, &from)
                } else {
                    arg.clone()
                });
                continue;
            }
            if let Some(flag) = credential_flag(arg) {
                match flag.inline {
                    Some(start) if !arg[start..].is_empty() && is_literal(&arg[start..]) => {
                        let written = &arg[..start - 1];
                        let reference = self.flag_value((flag.name, written), &arg[start..], &from);
                        out.push(format!("{}{reference}", &arg[..start]));
                    }
                    Some(_) => out.push(arg.clone()),
                    None => {
                        value_of = Some((flag.name, arg));
                        out.push(arg.clone());
                    }
                }
                continue;
            }
            let alias = self.alias;
            out.push(self.literals_in(arg, &from, |kind| match kind {
                LiteralKind::Password => variable_name(&[alias, "PASSWORD"]),
                LiteralKind::Query(query) => variable_name(&[alias, query]),
                LiteralKind::Token => variable_name(&[alias, "TOKEN"]),
            }));
        }
        out
    }

    /// The reference that replaces the value of a credential flag (its name, and the flag
    /// as written).
    fn flag_value(&mut self, (name, written): (&str, &str), value: &str, from: &str) -> String {
        let variable = self
            .moved
            .variable(variable_name(&[self.alias, name]), self.alias, value);
        self.introduced.push(Introduced {
            variable: variable.clone(),
            from: format!("{from} (the value of {written})"),
        });
        format!("${{{variable}}}")
    }
}

/// Whether `s` holds no `${` at all: a literal, not a reference or a template.
fn is_literal(s: &str) -> bool {
    !s.contains("${")
}

/// Editor variables that name no environment variable.
const EDITOR_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "cwd",
    "file",
    "fileBasename",
    "fileDirname",
    "relativeFile",
    "execPath",
    "defaultBuildTask",
    "selectedText",
    "lineNumber",
];

/// Rewrites a client's `${...}` variables into the host's `${NAME}` references.
fn references(field: &str, s: &str) -> Result<String, NotCarried> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // Unterminated: left as written for the host's check to name.
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let editor = || NotCarried::EditorVariable {
            field: shorten(field),
            variable: shorten(inner),
        };
        if let Some(id) = inner.strip_prefix("input:") {
            return Err(NotCarried::InputVariable {
                field: shorten(field),
                id: shorten(id),
            });
        } else if let Some(name) = inner.strip_prefix("env:") {
            if !is_reference_name(name) {
                return Err(editor());
            }
            out.push_str(&format!("${{{name}}}"));
        } else if inner == "userHome" {
            out.push_str("${HOME}");
        } else if inner == "/" || inner == "pathSeparator" {
            out.push('/');
        } else if is_reference_name(inner) && !EDITOR_VARIABLES.contains(&inner) {
            out.push_str(&format!("${{{inner}}}"));
        } else {
            return Err(editor());
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_reference_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

// === entries ===

/// The transport-neutral reading of one entry, before it becomes a definition.
#[derive(Default)]
struct Draft {
    command: Option<String>,
    args: Vec<String>,
    cwd: Option<String>,
    env: BTreeMap<String, String>,
    url: Option<String>,
    headers: BTreeMap<String, String>,
    bearer: Option<String>,
    tools: Option<Vec<String>>,
    enabled: bool,
    introduced: Vec<Introduced>,
    notes: Vec<String>,
}

fn string(fields: &Map<String, Value>, field: &str) -> Result<Option<String>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => references(field, s).map(Some),
        Some(_) => Err(wrong(field, "a string")),
    }
}

fn strings(fields: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => references(field, s),
                _ => Err(wrong(field, "an array of strings")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(wrong(field, "an array of strings")),
    }
}

/// A map of strings; numbers and booleans are written as text (VS Code allows them).
fn string_map(
    fields: &Map<String, Value>,
    field: &str,
) -> Result<BTreeMap<String, String>, NotCarried> {
    let Some(value) = fields.get(field).filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Some(entries) = value.as_object() else {
        return Err(wrong(field, "an object of strings"));
    };
    let mut out = BTreeMap::new();
    for (name, value) in entries {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => {
                return Err(NotCarried::UnsetEnv {
                    name: shorten(name),
                });
            }
            _ => return Err(wrong(&format!("{field}.{name}"), "a string")),
        };
        out.insert(name.clone(), references(&format!("{field}.{name}"), &text)?);
    }
    Ok(out)
}

fn boolean(fields: &Map<String, Value>, field: &str) -> Result<Option<bool>, NotCarried> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(field, "true or false")),
    }
}

fn wrong(field: &str, expected: &'static str) -> NotCarried {
    NotCarried::WrongType {
        field: shorten(field),
        expected,
    }
}

/// Claude Desktop, Cursor and VS Code entries.
fn json_entry(
    alias: &str,
    fields: &Map<String, Value>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    for field in fields.keys() {
        match field.as_str() {
            "command" | "args" | "env" | "cwd" | "url" | "headers" | "type" | "disabled"
            | "enabled" => {}
            "envFile" => return Err(NotCarried::EnvFile),
            "auth" | "oauth" => {
                return Err(NotCarried::OAuth {
                    field: field.clone(),
                });
            }
            // Descriptive, or tuning only the other client.
            "description" | "gallery" | "version" | "dev" | "autoApprove" | "alwaysAllow"
            | "timeout" => {}
            _ => {
                return Err(NotCarried::UnknownField {
                    field: shorten(field),
                });
            }
        }
    }
    let mut draft = Draft {
        command: string(fields, "command")?,
        args: strings(fields, "args")?.unwrap_or_default(),
        cwd: string(fields, "cwd")?,
        env: string_map(fields, "env")?,
        url: string(fields, "url")?,
        headers: string_map(fields, "headers")?,
        enabled: !boolean(fields, "disabled")?.unwrap_or(false)
            && boolean(fields, "enabled")?.unwrap_or(true),
        ..Draft::default()
    };
    for (field, note) in [
        ("dev", "VS Code's dev mode (watch and debug) is not carried"),
        (
            "timeout",
            "its timeout is not carried: the host's PLURNK_MCP_REQUEST_TIMEOUT applies",
        ),
        (
            "autoApprove",
            "tool approvals are not carried: the workspace decides what it calls",
        ),
        (
            "alwaysAllow",
            "tool approvals are not carried: the workspace decides what it calls",
        ),
    ] {
        if fields.contains_key(field) {
            draft.notes.push(note.to_owned());
        }
    }
    let kind = match fields.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) => Some(kind.as_str()),
        Some(_) => return Err(wrong("type", "a string")),
    };
    let kind = match kind {
        None => None,
        Some("stdio") => Some(TransportKind::Stdio),
        Some("http" | "streamable-http" | "streamableHttp") => Some(TransportKind::Http),
        Some("sse") => return Err(NotCarried::Sse),
        Some(_) => return Err(NotCarried::UnknownType),
    };
    finish(alias, draft, kind, moved)
}

/// Codex `[mcp_servers.NAME]` tables.
fn codex_entry(
    alias: &str,
    fields: &Map<String, Value>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    for field in fields.keys() {
        match field.as_str() {
            "command"
            | "args"
            | "env"
            | "env_vars"
            | "cwd"
            | "url"
            | "bearer_token"
            | "bearer_token_env_var"
            | "http_headers"
            | "env_http_headers"
            | "enabled"
            | "required"
            | "startup_timeout_sec"
            | "startup_timeout_ms"
            | "tool_timeout_sec"
            | "enabled_tools"
            | "disabled_tools" => {}
            "auth" | "oauth" | "scopes" | "oauth_resource" => {
                return Err(NotCarried::OAuth {
                    field: field.clone(),
                });
            }
            _ => {
                return Err(NotCarried::UnknownField {
                    field: shorten(field),
                });
            }
        }
    }
    let mut draft = Draft {
        command: string(fields, "command")?,
        args: strings(fields, "args")?.unwrap_or_default(),
        cwd: string(fields, "cwd")?,
        env: string_map(fields, "env")?,
        url: string(fields, "url")?,
        headers: string_map(fields, "http_headers")?,
        enabled: boolean(fields, "enabled")?.unwrap_or(true),
        ..Draft::default()
    };
    // Variables passed through from Codex's own environment: the same name, referred to.
    if let Some(Value::Array(names)) = fields.get("env_vars") {
        for name in names {
            let name = match name {
                Value::String(name) => name.as_str(),
                Value::Object(entry) => entry.get("name").and_then(Value::as_str).unwrap_or(""),
                _ => "",
            };
            if !is_reference_name(name) {
                return Err(wrong("env_vars", "an array of variable names"));
            }
            draft.env.insert(name.to_owned(), format!("${{{name}}}"));
        }
    } else if fields.get("env_vars").is_some_and(|v| !v.is_null()) {
        return Err(wrong("env_vars", "an array of variable names"));
    }
    for (header, variable) in string_map(fields, "env_http_headers")? {
        if !is_reference_name(&variable) {
            return Err(wrong(
                &format!("env_http_headers.{header}"),
                "a variable name",
            ));
        }
        draft.headers.insert(header, format!("${{{variable}}}"));
    }
    if let Some(variable) = string(fields, "bearer_token_env_var")? {
        if !is_reference_name(&variable) {
            return Err(wrong("bearer_token_env_var", "a variable name"));
        }
        draft.bearer = Some(format!("${{{variable}}}"));
    }
    if let Some(token) = string(fields, "bearer_token")? {
        draft.bearer = Some(if is_literal(&token) {
            let variable = moved.variable(variable_name(&[alias, "TOKEN"]), alias, &token);
            draft.introduced.push(Introduced {
                variable: variable.clone(),
                from: "bearer_token".to_owned(),
            });
            format!("${{{variable}}}")
        } else {
            token
        });
    }
    let enabled_tools = strings(fields, "enabled_tools")?;
    let disabled_tools = strings(fields, "disabled_tools")?.unwrap_or_default();
    draft.tools = match enabled_tools {
        Some(tools) => Some(
            tools
                .into_iter()
                .filter(|tool| !disabled_tools.contains(tool))
                .collect(),
        ),
        None if disabled_tools.is_empty() => None,
        None => return Err(NotCarried::ExcludedTools),
    };
    for (field, note) in [
        (
            "startup_timeout_sec",
            "startup_timeout_sec is not carried: the host's PLURNK_MCP_CONNECT_TIMEOUT applies",
        ),
        (
            "startup_timeout_ms",
            "startup_timeout_ms is not carried: the host's PLURNK_MCP_CONNECT_TIMEOUT applies",
        ),
        (
            "tool_timeout_sec",
            "tool_timeout_sec is not carried: the host's PLURNK_MCP_REQUEST_TIMEOUT applies",
        ),
        (
            "required",
            "required is not carried: a server that cannot connect is shown unavailable and never stops the others",
        ),
    ] {
        if fields.contains_key(field) {
            draft.notes.push(note.to_owned());
        }
    }
    finish(alias, draft, None, moved)
}

/// Picks the transport, moves literal secrets out and validates the definition.
fn finish(
    alias: &str,
    mut draft: Draft,
    kind: Option<TransportKind>,
    moved: &mut Moved,
) -> Result<Planned, NotCarried> {
    let kind = match (kind, &draft.command, &draft.url) {
        (Some(TransportKind::Stdio), None, _) => {
            return Err(NotCarried::MissingForType {
                kind: "stdio",
                needs: "command",
            });
        }
        (Some(TransportKind::Http), _, None) => {
            return Err(NotCarried::MissingForType {
                kind: "http",
                needs: "url",
            });
        }
        (Some(kind), _, _) => kind,
        (None, Some(_), Some(_)) => return Err(NotCarried::BothTargets),
        (None, Some(_), None) => TransportKind::Stdio,
        (None, None, Some(_)) => TransportKind::Http,
        (None, None, None) => return Err(NotCarried::NoTarget),
    };
    let wire = if kind == TransportKind::Http {
        let mut headers = BTreeMap::new();
        for (name, value) in std::mem::take(&mut draft.headers) {
            if !is_credential_name(&name) {
                let mut out = Outward {
                    alias,
                    moved,
                    introduced: &mut draft.introduced,
                };
                let value = out.literals_in(&value, &format!("header {name}"), |kind| match kind {
                    LiteralKind::Password => variable_name(&[alias, &name, "PASSWORD"]),
                    LiteralKind::Query(query) => variable_name(&[alias, query]),
                    LiteralKind::Token => variable_name(&[alias, &name]),
                });
                headers.insert(name, value);
                continue;
            }
            if !is_literal(&value) || value.is_empty() {
                headers.insert(name, value);
                continue;
            }
            let scheme_and_token = if name.eq_ignore_ascii_case("authorization") {
                value.split_once(' ')
            } else {
                None
            };
            let bearer = scheme_and_token
                .filter(|(scheme, token)| {
                    scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()
                })
                .map(|(_, token)| token.trim());
            if let Some(token) = bearer
                && draft.bearer.is_none()
            {
                let variable = moved.variable(variable_name(&[alias, "TOKEN"]), alias, token);
                draft.introduced.push(Introduced {
                    variable: variable.clone(),
                    from: format!("header {name}"),
                });
                draft.bearer = Some(format!("${{{variable}}}"));
                continue;
            }
            let variable = moved.variable(variable_name(&[alias, &name]), alias, &value);
            draft.introduced.push(Introduced {
                variable: variable.clone(),
                from: format!("header {name}"),
            });
            headers.insert(name, format!("${{{variable}}}"));
        }
        // An `Authorization: Bearer ${NAME}` header is the bearer authorization itself.
        if draft.bearer.is_none()
            && let Some(key) = headers
                .keys()
                .find(|key| key.eq_ignore_ascii_case("authorization"))
                .cloned()
            && let Some(token) = headers[&key]
                .split_once(' ')
                .filter(|(scheme, token)| {
                    scheme.eq_ignore_ascii_case("bearer") && is_single_reference(token.trim())
                })
                .map(|(_, token)| token.trim().to_owned())
        {
            headers.remove(&key);
            draft.bearer = Some(token);
        }
        let url =
            Outward {
                alias,
                moved,
                introduced: &mut draft.introduced,
            }
            .literals_in(draft.url.as_deref().unwrap_or_default(), "url", |kind| {
                match kind {
                    LiteralKind::Password => variable_name(&[alias, "PASSWORD"]),
                    LiteralKind::Query(query) => variable_name(&[alias, query]),
                    LiteralKind::Token => variable_name(&[alias, "TOKEN"]),
                }
            });
        McpServerDefinition::Http(McpHttpDefinition {
            name: alias.to_owned(),
            url,
            headers,
            authorization: draft
                .bearer
                .clone()
                .map(|token| McpAuthorization::Bearer { token }),
            tools: draft.tools.clone(),
            read: Vec::new(),
            summary: None,
            tool_summaries: BTreeMap::new(),
        })
    } else {
        let mut env = BTreeMap::new();
        for (name, value) in std::mem::take(&mut draft.env) {
            let from = format!("env {name}");
            let value = if !is_credential_name(&name) {
                let mut out = Outward {
                    alias,
                    moved,
                    introduced: &mut draft.introduced,
                };
                out.literals_in(&value, &from, |kind| match kind {
                    LiteralKind::Password => variable_name(&[&name, "PASSWORD"]),
                    LiteralKind::Query(query) => variable_name(&[&name, query]),
                    LiteralKind::Token => variable_name(&[&name]),
                })
            } else if is_literal(&value) && !value.is_empty() {
                let variable = moved.variable(variable_name(&[&name]), alias, &value);
                draft.introduced.push(Introduced {
                    variable: variable.clone(),
                    from,
                });
                format!("${{{variable}}}")
            } else {
                value
            };
            env.insert(name, value);
        }
        let args = Outward {
            alias,
            moved,
            introduced: &mut draft.introduced,
        }
        .arguments(&draft.args);
        McpServerDefinition::Stdio(McpStdioDefinition {
            name: alias.to_owned(),
            command: draft.command.clone().unwrap_or_default(),
            args,
            cwd: draft.cwd.clone(),
            env,
            tools: draft.tools.clone(),
            read: Vec::new(),
            summary: None,
            tool_summaries: BTreeMap::new(),
        })
    };
    // Settings of the other transport would be silently lost: say so.
    let dropped = match kind {
        TransportKind::Http => [
            ("args", !draft.args.is_empty()),
            ("cwd", draft.cwd.is_some()),
            ("env", !draft.env.is_empty()),
        ],
        _ => [
            ("headers", !draft.headers.is_empty()),
            ("bearer", draft.bearer.is_some()),
            ("", false),
        ],
    };
    if let Some((field, _)) = dropped.iter().find(|(_, set)| *set) {
        return Err(NotCarried::WrongType {
            field: (*field).to_owned(),
            expected: "a setting of this server's transport",
        });
    }
    // Whatever could not be moved out (a credential mixed with references) is not carried:
    // the one refusal the add would answer with, said before anything is tried.
    let literal = serde_json::to_value(&wire)
        .map(|wire| literal_credentials(&wire))
        .unwrap_or_default();
    if !literal.is_empty() {
        return Err(NotCarried::LiteralCredential {
            fields: literal.join(", "),
        });
    }
    let definition = ServerDefinition::try_from(wire).map_err(NotCarried::Invalid)?;
    Ok(Planned {
        source: String::new(),
        definition,
        enabled: draft.enabled,
        introduced: draft.introduced,
        notes: draft.notes,
    })
}

fn is_single_reference(s: &str) -> bool {
    s.strip_prefix("${")
        .and_then(|s| s.strip_suffix('}'))
        .is_some_and(is_reference_name)
}

#[cfg(test)]
mod tests;
