//! Reading a server target (URL or executable), and the HTTP and environment name rules its companions follow.

use std::fmt;

use serde::Serialize;

/// How a server is reached: the one list of transports, for definitions, snapshots and
/// Problems alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TransportKind {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// A server inside the embedding process, over in-memory streams
    /// ([`HostOptions::in_process`](crate::HostOptions::in_process)); never configured
    /// by a target, only registered by the embedder.
    InProcess,
    /// A command-line program's declared subcommands ([`crate::sources`]).
    Cli,
    /// A script with a parameter header ([`crate::sources`]).
    Script,
    /// An OpenAPI document's operations ([`crate::sources`]).
    #[serde(rename = "openapi")]
    OpenApi,
}

impl TransportKind {
    /// The tool-source kind a declaration's `kind` names.
    pub fn source_named(name: &str) -> Option<Self> {
        match name {
            "cli" => Some(Self::Cli),
            "script" => Some(Self::Script),
            "openapi" => Some(Self::OpenApi),
            _ => None,
        }
    }

    /// Whether this is a tool source rather than an MCP server.
    pub fn is_source(self) -> bool {
        matches!(self, Self::Cli | Self::Script | Self::OpenApi)
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
            Self::InProcess => "in-process",
            Self::Cli => "cli",
            Self::Script => "script",
            Self::OpenApi => "openapi",
        })
    }
}

/// Why a target cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetFault {
    /// Empty or only white space.
    Empty,
    /// Starts like `http:`/`https:` but is not an absolute URL with a host.
    NotAbsoluteUrl,
}

/// Picks the transport from a target as written, before expansion.
///
/// An absolute `http://` or `https://` URL (scheme in any case) with a non-empty
/// host selects Streamable HTTP. Anything else is one exact stdio executable,
/// white space and all. Something that starts like an HTTP URL but is not
/// absolute (`http:/x`, `https://`, `https:host`, ` https://x`, a URL with
/// spaces) is a fault rather than an executable of that odd name.
///
/// It never answers [`TransportKind::InProcess`]: no target names one.
pub(crate) fn classify(target: &str) -> Result<TransportKind, TargetFault> {
    if target.trim().is_empty() {
        return Err(TargetFault::Empty);
    }
    if is_absolute_http_url(target) {
        return Ok(TransportKind::Http);
    }
    if starts_like_http(target.trim_start()) {
        return Err(TargetFault::NotAbsoluteUrl);
    }
    Ok(TransportKind::Stdio)
}

fn starts_like_http(s: &str) -> bool {
    starts_with_ignore_case(s, "http:") || starts_with_ignore_case(s, "https:")
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The part after `scheme://` of an http(s) URL, if `s` starts with one.
fn after_scheme(s: &str) -> Option<(&str, &str)> {
    ["http://", "https://"].into_iter().find_map(|scheme| {
        starts_with_ignore_case(s, scheme).then(|| (&s[..scheme.len()], &s[scheme.len()..]))
    })
}

/// The authority (`user@host:port`) and what follows it.
fn split_authority(rest: &str) -> (&str, &str) {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest.split_at(end)
}

/// Whether `s` is an absolute http(s) URL with a host and no white space or
/// control characters. Enough parsing to be sure of the host; the HTTP client
/// does the rest when it connects.
pub(crate) fn is_absolute_http_url(s: &str) -> bool {
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((_, rest)) = after_scheme(s) else {
        return false;
    };
    let (authority, _) = split_authority(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8080`.
        bracketed.split_once(']').map_or("", |(inside, _)| inside)
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    !host.is_empty()
}

/// A URL with everything after its origin hidden, for `Debug` and `status`.
///
/// User info, path and query can all hold credentials (some hosted MCP servers
/// put the API key in the path), and a URL in a definition may be a literal
/// rather than a `${NAME}` reference, so only `scheme://host:port` is shown.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = after_scheme(url) else {
        return "<redacted>".to_owned();
    };
    let (authority, tail) = split_authority(rest);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((_, host_port)) => ("<redacted>@", host_port),
        None => ("", authority),
    };
    let tail = if tail.is_empty() || tail == "/" {
        tail
    } else {
        "/<redacted>"
    };
    format!("{scheme}{userinfo}{host_port}{tail}")
}

/// Whether `name` is an HTTP field name (an RFC 9110 token).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The longest valid beginning of a header name, when the whole is not valid.
/// `None` when the name is valid.
pub(crate) fn invalid_header_name(name: &str) -> Option<String> {
    if !name.is_empty() && name.chars().all(is_token_char) {
        return None;
    }
    Some(name.chars().take_while(|c| is_token_char(*c)).collect())
}

/// Headers the transport sets on every request, and the hop-by-hop ones that describe one
/// connection, not the request; a configured one would contradict the transport (`Mcp-*`
/// carry protocol state, and body/header disagreement fails), so they are refused at load,
/// and the HTTP transport refuses the same list again (`protocol/http.rs`).
pub(crate) fn is_reserved_header(name: &str) -> bool {
    const RESERVED: [&str; 12] = [
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "keep-alive",
        "last-event-id",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ];
    let lower = name.to_ascii_lowercase();
    lower.starts_with("mcp-") || RESERVED.contains(&lower.as_str())
}

/// Whether a caller's argument (a model's, through a tool source) may set header `name` on a
/// request the operator's credentials ride on: never a reserved header, a credential or
/// cookie, nor one a server reads as the client's own address or route (`Forwarded`,
/// `X-Forwarded-*`, `X-Real-IP`, `Via`, `Proxy-*`).
#[cfg(feature = "sources")]
pub(crate) fn caller_may_set_header(name: &str) -> bool {
    const OPERATOR_ONLY: [&str; 6] = [
        "authorization",
        "cookie",
        "forwarded",
        "via",
        "x-real-ip",
        "x-client-ip",
    ];
    let lower = name.to_ascii_lowercase();
    !(is_reserved_header(name)
        || OPERATOR_ONLY.contains(&lower.as_str())
        || lower.starts_with("proxy-")
        || lower.starts_with("x-forwarded-"))
}

/// Whether a header value can be sent: no line breaks, NUL or other control
/// characters except tab.
pub(crate) fn is_valid_header_value(value: &str) -> bool {
    !value.chars().any(|c| c.is_control() && c != '\t')
}

/// The longest valid beginning of an environment variable name, when the whole
/// is not valid (empty, or holding `=` or NUL). `None` when the name is valid.
pub(crate) fn invalid_env_name(name: &str) -> Option<String> {
    let bad = |c: char| c == '=' || c == '\0';
    if !name.is_empty() && !name.contains(bad) {
        return None;
    }
    Some(name.chars().take_while(|c| !bad(*c)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_targets() {
        for url in [
            "http://localhost:8080/mcp",
            "https://api.githubcopilot.com/mcp/",
            "HTTPS://Example.COM",
            "https://user:pw@host/x",
            "https://[::1]:3000/mcp",
            "https://${HOST}/mcp",
            "http://h?x=1",
        ] {
            assert_eq!(classify(url), Ok(TransportKind::Http), "{url}");
        }
    }

    #[test]
    fn stdio_targets() {
        for cmd in [
            "/usr/local/bin/my server",
            "npx",
            "C:\\Program Files\\mcp\\server.exe",
            "./http-server",
            "${SERVER_BIN}",
            "httpd",
            "ws://not-http",
        ] {
            assert_eq!(classify(cmd), Ok(TransportKind::Stdio), "{cmd}");
        }
    }

    #[test]
    fn broken_urls_are_faults() {
        for url in [
            "http:/x",
            "https://",
            "https:host",
            "https:///path",
            "http://@/x",
            "https://host/a b",
            " https://host",
            "HTTP:",
            "https://[]/x",
        ] {
            assert_eq!(classify(url), Err(TargetFault::NotAbsoluteUrl), "{url}");
        }
        assert_eq!(classify(""), Err(TargetFault::Empty));
        assert_eq!(classify("  "), Err(TargetFault::Empty));
    }

    #[test]
    fn url_redaction_keeps_only_the_origin() {
        assert_eq!(
            redact_url("https://mcp.example.com/api/KEY123/mcp?t=s"),
            "https://mcp.example.com/<redacted>"
        );
        assert_eq!(
            redact_url("https://u:pw@host:8/"),
            "https://<redacted>@host:8/"
        );
        assert_eq!(redact_url("http://h"), "http://h");
        assert_eq!(redact_url("nonsense"), "<redacted>");
    }

    #[test]
    fn header_names() {
        assert_eq!(invalid_header_name("X-Api-Key"), None);
        assert_eq!(
            invalid_header_name("Authorization: Bearer x"),
            Some("Authorization".into())
        );
        assert_eq!(invalid_header_name(""), Some(String::new()));
        assert!(is_reserved_header("MCP-Protocol-Version"));
        assert!(is_reserved_header("content-type"));
        assert!(!is_reserved_header("X-Mcp-Thing"));
        assert!(is_valid_header_value("a\tb"));
        assert!(!is_valid_header_value("a\r\nb"));
    }

    #[test]
    fn env_names() {
        assert_eq!(invalid_env_name("API_KEY"), None);
        assert_eq!(invalid_env_name("A=b"), Some("A".into()));
        assert_eq!(invalid_env_name(""), Some(String::new()));
    }
}
