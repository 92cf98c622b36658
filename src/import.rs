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
//!   valid alias ([`is_valid_alias`](crate::config::is_valid_alias)), or that folds to the
//!   same alias as another entry's, is skipped with the reason; colliding entries are all
//!   skipped, never one chosen.
//! - **Every literal environment and header value is moved out**, whatever its name: a
//!   server's environment and headers are where credentials go, and no test of names or
//!   shapes finds every one (a `SESSION`, an `X-Access` key in hexadecimal, a webhook URL).
//!   An environment entry whose value is literal becomes `${NAME}`, `NAME` being the
//!   entry's own name (`GH_PAT` → `${GH_PAT}`); a literal holds no `${` at all, so
//!   `pa$$w0rd` is moved like any other. A literal `Authorization: Bearer <token>` header
//!   becomes the server's bearer authorization, `${<ALIAS>_TOKEN}` holding the token; any
//!   other header `H` becomes `${<ALIAS>_<H>}` holding the whole value (`X-Auth` of `web` →
//!   `${WEB_X_AUTH}`). Elsewhere the host's own tests of what a credential is decide
//!   (`config::literal_credentials`, the refusal every kept definition meets): the value of
//!   a credential flag in the arguments (`--api-key X`, `--token=X`) becomes
//!   `${<ALIAS>_<FLAG>}`; inside an argument, the endpoint or a value mixed with references,
//!   a URL's password becomes `${<NAME>_PASSWORD}` (`<ALIAS>_PASSWORD` in the endpoint or
//!   an argument), a credential-named query value `${<ALIAS>_<PARAMETER>}`, a webhook URL
//!   (Slack's, Discord's) `${<ALIAS>_URL}`, and a token-shaped word (`ghp_…`, a JWT, a long
//!   random word) `${NAME}` of its entry (`${<ALIAS>_TOKEN}` in an argument).
//! - **A moved literal's variable is fresh**: never one the file refers to itself, another
//!   entry's with a different value, or one the operator's environment holds with a
//!   different value (an entry named `github` would otherwise be handed the operator's own
//!   `GITHUB_TOKEN`); such a name is prefixed with the alias (and numbered). A variable the
//!   environment holds with this very value is reused: the operator set it after a plan
//!   named it. A credential mixed with references, which cannot be moved whole, skips its
//!   entry. The values never leave [`plan`]: the plan holds only the references and what
//!   each was moved from.
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

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use crate::config::{ConfigErrors, Environment, ServerDefinition, TransportKind, redact_url};

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
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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
/// reason. A literal moved out of the file gets a variable `environment` (the operator's)
/// does not hold with another value, so no entry is handed a credential of the operator's.
///
/// # Errors
///
/// Text that does not parse (with the line and column the parser gives), or no server list
/// where the format keeps it.
pub fn plan(text: &str, format: Format, environment: &Environment) -> Result<Plan, ImportError> {
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
    let mut moved = Moved::new(&document, environment);
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

mod codex;
mod draft;
mod finish;
mod json;
mod names;
mod parse;
mod secrets;

use codex::codex_entry;
use json::json_entry;
use names::fold_all;
use parse::{parse, strip_jsonc, vscode_servers};
use secrets::Moved;

#[cfg(test)]
mod tests;
