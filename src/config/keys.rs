//! The `PLURNK_MCP_` variable namespace: prefix, folding, global names, companion suffixes and alias rules.

use super::target::TransportKind;

/// Every variable of ours starts with this, exactly (upper case).
pub(crate) const PREFIX: &str = "PLURNK_MCP_";

/// The longest server name: it becomes part of variable names, table rows and messages.
pub const MAX_ALIAS_LEN: usize = 64;

/// Server names that the global settings occupy, folded as a server name would be.
pub const RESERVED_ALIASES: &[&str] = &[
    "enabled",
    "expanded",
    "connect-timeout",
    "request-timeout",
    "discover-timeout",
    "log",
    "allow-add",
    "workspace-env",
    "sources",
    "inherit-env",
    "state",
    "sandbox",
];

/// Names a server cannot take because the executor and the URI authorities of what the
/// model reads already use them (§mcp-configuration: server names "share the executor and
/// URI-authority namespace"): `worker` (`worker://plurnk/…` documents), `plurnk` (their
/// authority), `exec` (the EXEC op), and the schemes a `<server>:///` facet address would
/// be taken for (`http`, `https`, `file`, `data`, `mcp`).
pub const NAMESPACE_ALIASES: &[&str] = &[
    "worker", "plurnk", "exec", "http", "https", "file", "data", "mcp",
];

/// The host-wide settings in the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Global {
    Enabled,
    Expanded,
    ConnectTimeout,
    RequestTimeout,
    DiscoverTimeout,
    /// The command line's log filter; read there, reserved here so it is never a server.
    Log,
    /// Whether workspaces may add servers (and customize them) at runtime.
    AllowAdd,
    /// The environment names an added or customized definition may refer to.
    WorkspaceEnv,
    /// The directory of tool-source declarations.
    Sources,
    /// The names of the daemon's variables every child process inherits.
    InheritEnv,
    /// The command line's state (a file or a `postgres://` URL); read there, reserved here
    /// so it is never a server.
    State,
    /// The host-wide sandbox policy of every process the host starts.
    Sandbox,
}

impl Global {
    const ALL: [Self; 12] = [
        Self::Enabled,
        Self::Expanded,
        Self::ConnectTimeout,
        Self::RequestTimeout,
        Self::DiscoverTimeout,
        Self::Log,
        Self::AllowAdd,
        Self::WorkspaceEnv,
        Self::Sources,
        Self::InheritEnv,
        Self::State,
        Self::Sandbox,
    ];

    /// The global a folded key names, if any.
    pub(crate) fn from_folded(folded: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.folded() == folded)
    }

    /// The name as [`fold`] produces it; these are exactly [`RESERVED_ALIASES`].
    pub(crate) fn folded(self) -> &'static str {
        match self {
            Self::Enabled => "enabled",
            Self::Expanded => "expanded",
            Self::ConnectTimeout => "connect-timeout",
            Self::RequestTimeout => "request-timeout",
            Self::DiscoverTimeout => "discover-timeout",
            Self::Log => "log",
            Self::AllowAdd => "allow-add",
            Self::WorkspaceEnv => "workspace-env",
            Self::Sources => "sources",
            Self::InheritEnv => "inherit-env",
            Self::State => "state",
            Self::Sandbox => "sandbox",
        }
    }

    /// The canonical variable name.
    pub(crate) fn variable(self) -> &'static str {
        match self {
            Self::Enabled => "PLURNK_MCP_ENABLED",
            Self::Expanded => "PLURNK_MCP_EXPANDED",
            Self::ConnectTimeout => "PLURNK_MCP_CONNECT_TIMEOUT",
            Self::RequestTimeout => "PLURNK_MCP_REQUEST_TIMEOUT",
            Self::DiscoverTimeout => "PLURNK_MCP_DISCOVER_TIMEOUT",
            Self::Log => "PLURNK_MCP_LOG",
            Self::AllowAdd => "PLURNK_MCP_ALLOW_ADD",
            Self::WorkspaceEnv => "PLURNK_MCP_WORKSPACE_ENV",
            Self::Sources => "PLURNK_MCP_SOURCES",
            Self::InheritEnv => "PLURNK_MCP_INHERIT_ENV",
            Self::State => "PLURNK_MCP_STATE",
            Self::Sandbox => "PLURNK_MCP_SANDBOX",
        }
    }
}

/// The companion suffixes. `Summary` also ends every `_<tool>_SUMMARY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Suffix {
    Args,
    Cwd,
    Env,
    Bearer,
    Headers,
    /// http: the wire's `authorization` union as JSON, every credential a `${NAME}`.
    Authorization,
    Tools,
    Read,
    Summary,
    /// stdio: the server's sandbox policy as JSON.
    Sandbox,
}

impl Suffix {
    pub(crate) const ALL: [Self; 10] = [
        Self::Args,
        Self::Cwd,
        Self::Env,
        Self::Bearer,
        Self::Headers,
        Self::Authorization,
        Self::Tools,
        Self::Read,
        Self::Summary,
        Self::Sandbox,
    ];

    /// The word as it ends a folded key.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::Args => "args",
            Self::Cwd => "cwd",
            Self::Env => "env",
            Self::Bearer => "bearer",
            Self::Headers => "headers",
            Self::Authorization => "authorization",
            Self::Tools => "tools",
            Self::Read => "read",
            Self::Summary => "summary",
            Self::Sandbox => "sandbox",
        }
    }

    /// The suffix as operators write it.
    pub(crate) fn upper(self) -> &'static str {
        match self {
            Self::Args => "_ARGS",
            Self::Cwd => "_CWD",
            Self::Env => "_ENV",
            Self::Bearer => "_BEARER",
            Self::Headers => "_HEADERS",
            Self::Authorization => "_AUTHORIZATION",
            Self::Tools => "_TOOLS",
            Self::Read => "_READ",
            Self::Summary => "_SUMMARY",
            Self::Sandbox => "_SANDBOX",
        }
    }

    /// The one transport this companion belongs to, or `None` when it fits both.
    pub(crate) fn applies_to(self) -> Option<TransportKind> {
        match self {
            Self::Args | Self::Cwd | Self::Env | Self::Sandbox => Some(TransportKind::Stdio),
            Self::Bearer | Self::Headers | Self::Authorization => Some(TransportKind::Http),
            Self::Tools | Self::Read | Self::Summary => None,
        }
    }

    /// The suffix a folded key ends in, with the length of the part before `-<word>`.
    /// The part before must be non-empty: `PLURNK_MCP_ARGS` declares a server `args`.
    pub(crate) fn split(folded: &str) -> Option<(Self, usize)> {
        Self::ALL.into_iter().find_map(|suffix| {
            let stem = folded.strip_suffix(suffix.word())?.strip_suffix('-')?;
            (!stem.is_empty()).then_some((suffix, stem.len()))
        })
    }
}

/// Folds the part of a key after [`PREFIX`]: ASCII lower case, `_` read as `-`.
///
/// Folding keeps every byte's position, so an index into the folded key is an
/// index into the key as written.
pub(crate) fn fold(rest: &str) -> String {
    rest.chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The canonical variable for a server's target, `PLURNK_MCP_CHROME_DEVTOOLS` for `chrome-devtools`.
pub fn target_variable(alias: &str) -> String {
    format!("{PREFIX}{}", alias.to_ascii_uppercase().replace('-', "_"))
}

/// Whether `s` matches `[a-z][a-z0-9-]*`.
pub(crate) fn is_alias_syntax(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= MAX_ALIAS_LEN
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Whether `s` can name a server: `[a-z][a-z0-9-]*`, not one of [`RESERVED_ALIASES`] or
/// [`NAMESPACE_ALIASES`],
/// and not ending in a companion word such as `-tools` or `-env` (the environment
/// could never declare such a server, because its variable would read as a companion).
pub fn is_valid_alias(s: &str) -> bool {
    is_alias_syntax(s)
        && !RESERVED_ALIASES.contains(&s)
        && !NAMESPACE_ALIASES.contains(&s)
        && Suffix::split(s).is_none()
}

/// The key under which a tool's summary is stored and looked up: ASCII lower case,
/// every character other than a letter or digit read as `_`.
///
/// A `PLURNK_MCP_<server>_<tool>_SUMMARY` variable can only spell letters, digits
/// and underscores, so `take-screenshot` and `browser.navigate` are written
/// `TAKE_SCREENSHOT` and `BROWSER_NAVIGATE`.
pub fn tool_summary_key(tool: &str) -> String {
    tool.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_keeps_positions() {
        let rest = "GitHub_CREATE_Issue_SUMMARY";
        assert_eq!(fold(rest), "github-create-issue-summary");
        assert_eq!(fold(rest).len(), rest.len());
    }

    #[test]
    fn suffix_split_needs_a_stem() {
        assert_eq!(Suffix::split("github-args"), Some((Suffix::Args, 6)));
        assert_eq!(Suffix::split("args"), None);
        assert_eq!(Suffix::split("-args"), None);
        assert_eq!(Suffix::split("githubargs"), None);
        assert_eq!(
            Suffix::split("github-authorization"),
            Some((Suffix::Authorization, 6))
        );
        assert_eq!(
            Suffix::split("github-create-issue-summary"),
            Some((Suffix::Summary, 19))
        );
    }

    #[test]
    fn alias_validity() {
        assert!(is_valid_alias("github"));
        assert!(is_valid_alias("chrome-devtools"));
        assert!(is_valid_alias("a1"));
        assert!(is_valid_alias("tools"));
        for taken in NAMESPACE_ALIASES {
            assert!(!is_valid_alias(taken), "{taken}");
        }
        assert!(!is_valid_alias("github-tools"));
        assert!(!is_valid_alias("github-authorization"));
        assert!(!is_valid_alias("enabled"));
        assert!(!is_valid_alias("connect-timeout"));
        assert!(!is_valid_alias("1password"));
        assert!(!is_valid_alias("GitHub"));
        assert!(!is_valid_alias("git_hub"));
        assert!(!is_valid_alias(""));
    }

    #[test]
    fn globals_are_the_reserved_aliases() {
        let folded: Vec<_> = Global::ALL.iter().map(|g| g.folded()).collect();
        assert_eq!(folded, RESERVED_ALIASES);
        for g in Global::ALL {
            assert_eq!(
                fold(&g.variable()[PREFIX.len()..]),
                g.folded(),
                "{g:?} variable folds to its name"
            );
        }
    }

    #[test]
    fn tool_keys() {
        assert_eq!(tool_summary_key("create_issue"), "create_issue");
        assert_eq!(tool_summary_key("Take-Screenshot"), "take_screenshot");
        assert_eq!(tool_summary_key("browser.navigate"), "browser_navigate");
    }
}
