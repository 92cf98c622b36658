//! How the bridge's errors show text they did not write: a name cleaned of control
//! characters and cut, unexpected text quoted, escaped and cut, a long text capped, a list
//! bounded.

/// How many characters of a name an error shows.
const NAME_CHARS: usize = 128;

/// How many characters of unexpected text an error quotes.
const SNIPPET_CHARS: usize = 40;

/// How many names an error lists before it says how many more there are: a server's tools
/// when none is close to the one asked for, or the enabled servers.
pub(super) const LISTED_TOOLS: usize = 20;

/// A name as an error shows it: control and format characters as `?`, cut at
/// [`NAME_CHARS`].
pub(super) fn name(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(NAME_CHARS)
        .map(|c| if crate::text::is_unshown(c) { '?' } else { c })
        .collect();
    if text.chars().nth(NAME_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// Unexpected text as an error quotes it: the start of it, escaped.
pub(super) fn snippet(text: &str) -> String {
    if text.is_empty() {
        return "nothing".to_owned();
    }
    let start: String = text.chars().take(SNIPPET_CHARS).collect();
    let cut = if text.chars().nth(SNIPPET_CHARS).is_some() {
        "…"
    } else {
        ""
    };
    format!("{start:?}{cut}")
}

/// What an error keeps of unexpected text: enough for [`snippet`] to quote it and to tell
/// that it goes on.
pub(super) fn excerpt(text: &str) -> String {
    text.chars().take(SNIPPET_CHARS + 1).collect()
}

/// `text` cut at `max` characters, ending in `…` when cut.
pub(super) fn capped(text: &str, max: usize) -> String {
    if text.chars().nth(max).is_none() {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}
