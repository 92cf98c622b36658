//! The tool-source layer's errors: [`SourceError`], why a call gave no result (the public
//! edge, what the host's caller reads), and [`OpenError`], what opening or checking a source
//! meets on this machine (a program that is not there, a script or a document that cannot be
//! read or fetched), which becomes a declaration's fault, a `source check` finding or a
//! call's refusal. A declaration's own faults are
//! [`DeclarationError`](super::DeclarationError)s, every one at once; a `${NAME}` that does
//! not expand is the expander's [`ConfigError`](crate::config::ConfigError).

use std::path::PathBuf;

/// Why a call could not produce a result at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// No tool of that name.
    #[error("no tool \"{0}\" in this source")]
    UnknownTool(String),
    /// The arguments do not fit the tool's parameters; says which and how.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The call ran past its deadline; its process group was killed (for a program).
    #[error("the call ran past its deadline of {timeout_ms} ms and was stopped")]
    Timeout {
        /// The deadline.
        timeout_ms: u64,
    },
    /// The output passed its bound; the program was killed.
    #[error("the output passed its bound of {limit} bytes and the call was stopped")]
    OutputTooLarge {
        /// The bound.
        limit: usize,
    },
    /// The program could not be found or started, or the request not sent: the whole
    /// message (what, and why), which the caller reads as it is and nothing branches on.
    #[error("{0}")]
    Unavailable(String),
}

/// Why a source cannot be opened or checked on this machine, or a call's program not found:
/// each message names the thing and what is wrong with it; a missing program's says what to
/// do, and the declaration's fault made of any other adds its own fix.
///
/// No variant holds a secret: a spec URL and what the network said of it are scrubbed where
/// the error is made, so neither `Display` nor `Debug` shows a registered credential; the
/// rest are paths, command names and the system's own words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    /// A command written as an absolute path that is not an executable file.
    #[error("{command} is not an executable file: install it, or correct the path")]
    NotExecutable {
        /// The path as declared.
        command: String,
    },
    /// A bare command found in no directory of the run's `PATH`.
    #[error("\"{command}\" is not on PATH ({searched}): install it, or write its absolute path")]
    NotOnPath {
        /// The command as declared.
        command: String,
        /// The `PATH` searched (empty when there is none).
        searched: String,
    },
    /// A script whose head could not be read (its header is read as the source opens).
    #[error("script {} cannot be read: {source}", path.display())]
    ScriptUnreadable {
        /// The script's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// reqwest could not build a client (its TLS backend did not start): not the operator's
    /// doing.
    #[error("the HTTP client could not be built: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// A spec file that could not be opened or read.
    #[error("the spec file {} cannot be read: {source}", path.display())]
    SpecFileUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A spec file past the bound a document may have.
    #[error("the spec file {} is larger than {limit} bytes", path.display())]
    SpecFileTooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        limit: usize,
    },
    /// A spec URL whose request failed, or whose answer broke off as it was read.
    #[error("the spec URL {url} {problem}")]
    SpecUrlUnreachable {
        /// The URL, scrubbed.
        url: String,
        /// What the connection said, its causes included, scrubbed.
        problem: String,
    },
    /// A spec URL that answered with a status other than success (a redirect to another
    /// origin included, which is not followed).
    #[error("the spec URL {url} answered {}", status_line(*status))]
    SpecUrlStatus {
        /// The URL, scrubbed.
        url: String,
        /// The status it answered.
        status: reqwest::StatusCode,
    },
    /// A spec URL whose answer passed the bound a document may have.
    #[error("the spec URL {url} is larger than {limit} bytes")]
    SpecUrlTooLarge {
        /// The URL, scrubbed.
        url: String,
        /// The bound.
        limit: usize,
    },
    /// A spec URL that did not answer within the deadline.
    #[error("the spec URL {url} did not answer within {timeout_ms} ms")]
    SpecUrlTimeout {
        /// The URL, scrubbed.
        url: String,
        /// The deadline.
        timeout_ms: u128,
    },
}

/// A status as messages word it: `404 Not Found`, or the bare code when it has no reason.
pub(crate) fn status_line(status: reqwest::StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}
