//! The secret registry: every credential value is registered when a connection is prepared,
//! and scrubbed from every string that leaves the host, in any spelling.
//!
//! Secrets have one owner (the operator environment), but their values travel: into a
//! child's environment, a header, a URL. Whatever comes back — a server's stderr, a
//! reqwest error that prints the URL, a JSON-RPC error that reflects a header, rmcp's own
//! log lines — may carry one. Rather than trusting every producer, the host registers each
//! value once ([`register`], from `protocol` as a connection is prepared) and scrubs at the
//! few places strings leave it: Problems as they are published or answered, `CallError`s
//! and results as calls return, shutdown reports, the CLI's output, and every log line
//! through [`Scrubbing`], the writer the command line's tracing subscriber uses (an
//! embedder with its own subscriber wraps its writer the same way).
//!
//! A value is matched ASCII-case-insensitively in each of its spellings: as written,
//! percent-encoded (URL and form), JSON-escaped (once and twice) and `Debug`-escaped, so a
//! URL that reqwest normalised or a token inside a JSON error body is caught as well. The
//! registry only grows: a value stays secret for the life of the process, even after the
//! connection that used it is gone (a late log line may still name it).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, LazyLock, RwLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Values shorter than this are not registered: a `${NAME}` that expands to `prod` or an
/// alias would otherwise be scrubbed from every message (the registry outlives the
/// connection), and a credential that short protects nothing anyway.
pub const MIN_SECRET_LEN: usize = 8;

/// A set of secrets and a matcher over all their spellings. The host keeps one for the
/// process ([`register`], [`scrub`]); a `Redactor` of one's own is for tests and tools.
#[derive(Default)]
pub struct Redactor {
    /// Every registered spelling.
    spellings: BTreeSet<String>,
    /// A matcher over `spellings`, rebuilt when one is added; `None` while empty.
    matcher: Option<Arc<AhoCorasick>>,
}

impl Redactor {
    /// The spellings of `values` this redactor does not hold yet.
    fn fresh<I, S>(&self, values: I) -> Vec<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut fresh = Vec::new();
        for value in values {
            let value = value.as_ref();
            if value.chars().count() < MIN_SECRET_LEN {
                continue;
            }
            for spelling in spellings(value) {
                if !self.spellings.contains(&spelling) {
                    fresh.push(spelling);
                }
            }
        }
        fresh
    }

    fn extend(&mut self, fresh: Vec<String>) {
        if fresh.is_empty() {
            return;
        }
        self.spellings.extend(fresh);
        // Longest first among overlapping matches, so a secret that contains another one is
        // replaced whole.
        let built = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(self.spellings.iter());
        match built {
            Ok(matcher) => self.matcher = Some(Arc::new(matcher)),
            Err(error) => {
                // Should never happen for plain strings; keep the old matcher rather than none.
                tracing::error!(%error, "the secret matcher could not be rebuilt");
            }
        }
    }

    /// Registers credential values (see the global [`register`]).
    pub fn register<I, S>(&mut self, values: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let fresh = self.fresh(values);
        self.extend(fresh);
    }

    /// `text` with every registered secret replaced by [`REDACTED`]; borrowed when clean.
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        scrub_with(self.matcher.as_deref(), text)
    }
}

fn scrub_with<'t>(matcher: Option<&AhoCorasick>, text: &'t str) -> Cow<'t, str> {
    let Some(matcher) = matcher else {
        return Cow::Borrowed(text);
    };
    if !matcher.is_match(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    matcher.replace_all_with(text, &mut out, |_, _, out| {
        out.push_str(REDACTED);
        true
    });
    Cow::Owned(out)
}

static REGISTRY: LazyLock<RwLock<Redactor>> = LazyLock::new(RwLock::default);

/// Registers credential values: from now on each is scrubbed, in every spelling, from
/// whatever passes through [`scrub`]. Values shorter than [`MIN_SECRET_LEN`] are ignored.
pub fn register<I, S>(values: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    // Most registrations bring nothing new (a reconnect): decide that under the read lock.
    let fresh = match REGISTRY.read() {
        Ok(registry) => registry.fresh(values),
        Err(_) => return,
    };
    if fresh.is_empty() {
        return;
    }
    if let Ok(mut registry) = REGISTRY.write() {
        registry.extend(fresh);
    }
}

fn matcher() -> Option<Arc<AhoCorasick>> {
    REGISTRY.read().ok().and_then(|r| r.matcher.clone())
}

/// Whether any secret is registered (when none is, scrubbing is skipped entirely).
pub fn active() -> bool {
    matcher().is_some()
}

/// Whether `text` holds a registered secret.
pub fn holds_secret(text: &str) -> bool {
    matcher().is_some_and(|matcher| matcher.is_match(text))
}

/// `text` with every registered secret replaced by [`REDACTED`]; borrowed when clean.
pub fn scrub(text: &str) -> Cow<'_, str> {
    scrub_with(matcher().as_deref(), text)
}

/// How much of one server-provided text the host passes on in a message (a Problem, an
/// error, an event): enough for any honest diagnostic, not a megabyte a server chose.
pub const SHOWN_CHARS: usize = 8192;

/// `text` scrubbed, then cut to `cap` characters (marked `…`). Scrubbing comes first, so a
/// cut never leaves half a secret behind.
pub fn scrub_capped(text: &str, cap: usize) -> String {
    let clean = scrub(text);
    if clean.chars().count() <= cap {
        return clean.into_owned();
    }
    let mut out: String = clean.chars().take(cap).collect();
    out.push('…');
    out
}

/// Scrubs `text` in place.
pub fn scrub_in_place(text: &mut String) {
    if let Cow::Owned(clean) = scrub(text) {
        *text = clean;
    }
}

/// Scrubs every string of a JSON value in place, keys included.
pub fn scrub_json(value: &mut serde_json::Value) {
    if matcher().is_none() {
        return;
    }
    scrub_json_with(value);
}

fn scrub_json_with(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => scrub_in_place(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(scrub_json_with),
        serde_json::Value::Object(map) => {
            let dirty: Vec<String> = map
                .keys()
                .filter(|key| matches!(scrub(key), Cow::Owned(_)))
                .cloned()
                .collect();
            for key in dirty {
                if let Some(inner) = map.remove(&key) {
                    // Two keys may scrub to the same text: neither value is lost.
                    let clean = scrub(&key).into_owned();
                    let mut renamed = clean.clone();
                    let mut n = 1;
                    while map.contains_key(&renamed) {
                        n += 1;
                        renamed = format!("{clean}#{n}");
                    }
                    map.insert(renamed, inner);
                }
            }
            map.values_mut().for_each(scrub_json_with);
        }
        _ => {}
    }
}

/// The spellings of one value that text leaving the host may carry.
fn spellings(value: &str) -> Vec<String> {
    let json = |s: &str| {
        let quoted = serde_json::Value::String(s.to_owned()).to_string();
        quoted[1..quoted.len() - 1].to_owned()
    };
    let debug = {
        let quoted = format!("{value:?}");
        quoted[1..quoted.len() - 1].to_owned()
    };
    let mut out = vec![
        value.to_owned(),
        percent_encode(value, false),
        percent_encode(value, true),
        json(value),
        json(&json(value)),
        debug,
    ];
    out.sort();
    out.dedup();
    out.retain(|s| s.len() >= MIN_SECRET_LEN);
    out
}

/// Percent-encodes everything but RFC 3986's unreserved characters; `form` spells a space
/// as `+`, as `application/x-www-form-urlencoded` does.
fn percent_encode(value: &str, form: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            b' ' if form => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A writer for log output that scrubs each write before passing it on; as a
/// [`tracing_subscriber::fmt::MakeWriter`] it makes one per event, so a whole formatted line
/// is scrubbed at once and a secret cannot straddle two writes.
#[derive(Clone, Debug)]
pub struct Scrubbing<M> {
    inner: M,
}

impl<M> Scrubbing<M> {
    /// Wraps `inner` (for example `std::io::stderr`).
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

/// One event's output, buffered until it is dropped, then scrubbed and written whole.
pub struct ScrubbingLine<W: Write> {
    buffer: Vec<u8>,
    inner: W,
}

impl<W: Write> Write for ScrubbingLine<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for ScrubbingLine<W> {
    fn drop(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buffer);
        let clean = scrub(&text);
        let _ = self.inner.write_all(clean.as_bytes());
        let _ = self.inner.flush();
    }
}

impl<'a, M> tracing_subscriber::fmt::MakeWriter<'a> for Scrubbing<M>
where
    M: tracing_subscriber::fmt::MakeWriter<'a>,
{
    type Writer = ScrubbingLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingLine {
            buffer: Vec::new(),
            inner: self.inner.make_writer(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_registered_value_is_scrubbed() {
        let secret = "s3cr3t/va+lue?&=\"x";
        register([secret]);
        let cases = [
            secret.to_owned(),
            secret.to_ascii_uppercase(),
            percent_encode(secret, false),
            percent_encode(secret, false).to_ascii_lowercase(),
            percent_encode(secret, true),
            serde_json::json!({ "token": secret }).to_string(),
            serde_json::json!({ "inner": serde_json::json!({ "token": secret }).to_string() })
                .to_string(),
            format!("{secret:?}"),
        ];
        for case in cases {
            let text = format!("before {case} after");
            let clean = scrub(&text);
            assert!(clean.contains(REDACTED), "{case}: {clean}");
            assert!(!clean.to_ascii_lowercase().contains("s3cr3t"), "{clean}");
            assert!(clean.starts_with("before ") && clean.ends_with(" after"));
        }
    }

    #[test]
    fn clean_text_and_short_values_are_left_alone() {
        register(["abc"]);
        assert!(matches!(
            scrub("abc is short"),
            Cow::Borrowed("abc is short")
        ));
        let mut value = serde_json::json!({"a": ["nothing here", 1, null]});
        let before = value.clone();
        scrub_json(&mut value);
        assert_eq!(value, before);
    }

    #[test]
    fn keys_that_scrub_alike_keep_every_value() {
        register([
            "collide-secret-one",
            "collide-secret-two",
            "collide-secret-three",
        ]);
        let mut value = serde_json::json!({
            "collide-secret-one": 1, "collide-secret-two": 2, "collide-secret-three": 3
        });
        scrub_json(&mut value);
        let object = value.as_object().cloned().unwrap_or_default();
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["<redacted>", "<redacted>#2", "<redacted>#3"],
            "{value}"
        );
        let mut values: Vec<i64> = object.values().filter_map(|v| v.as_i64()).collect();
        values.sort_unstable();
        assert_eq!(values, [1, 2, 3]);
    }

    #[test]
    fn a_redactor_of_its_own_registers_from_the_minimum_length() {
        let mut redactor = Redactor::default();
        redactor.register(["1234567", "abcdefgh"]);
        // Seven characters are too few to be a secret, eight are enough.
        assert_eq!(redactor.scrub("1234567 abcdefgh"), "1234567 <redacted>");
        assert!(matches!(
            redactor.scrub("clean text"),
            Cow::Borrowed("clean text")
        ));
        let empty = Redactor::default();
        assert_eq!(empty.scrub("abcdefgh"), "abcdefgh");
    }

    #[test]
    fn spellings_are_the_ones_text_really_carries() {
        let mut redactor = Redactor::default();
        redactor.register(["pa ss/wo\"rd+1"]);
        // Written out by hand, not by the encoder under test.
        for (spelling, shown) in [
            ("pa%20ss%2Fwo%22rd%2B1", "URL"),
            ("pa+ss%2Fwo%22rd%2B1", "form"),
            ("pa%20ss%2fwo%22rd%2b1", "URL, lower-case hex"),
            (r#"pa ss/wo\"rd+1"#, "JSON inside a longer string"),
        ] {
            let text = format!("{{\"q\":\"x={spelling}&more\"}}");
            let clean = redactor.scrub(&text);
            assert!(clean.contains(REDACTED), "{shown}: {clean}");
            assert!(!clean.contains("wo"), "{shown}: {clean}");
        }
    }

    #[test]
    fn a_control_character_is_matched_as_json_and_as_debug_spell_it() {
        let secret = "ctl\u{1}-secret-xyz";
        let mut redactor = Redactor::default();
        redactor.register([secret]);
        for (text, shown) in [
            (format!("{:?}", format!("before {secret} after")), "Debug"),
            (
                serde_json::json!(format!("before {secret} after")).to_string(),
                "JSON",
            ),
        ] {
            let clean = redactor.scrub(&text);
            assert!(!clean.contains("-secret-xyz"), "{shown}: {clean}");
        }
    }

    #[test]
    fn the_registry_says_whether_it_holds_secrets_and_where() {
        register(["registry-secret-77"]);
        assert!(active());
        assert!(holds_secret("x registry-SECRET-77 y"));
        assert!(!holds_secret("nothing to see"));
    }

    #[test]
    fn a_cut_never_leaves_half_a_secret() {
        register(["cut-secret-abcdefgh"]);
        let text = format!("{}cut-secret-abcdefgh tail", "x".repeat(10));
        let shown = scrub_capped(&text, 15);
        assert!(!shown.contains("cut-secret"), "{shown}");
        assert_eq!(shown, "xxxxxxxxxx<reda…");
    }

    #[test]
    fn json_strings_and_keys_are_scrubbed() {
        register(["json-secret-42"]);
        let mut value = serde_json::json!({
            "json-secret-42": {"list": ["x json-secret-42 y", 3]},
        });
        scrub_json(&mut value);
        let text = value.to_string();
        assert!(!text.contains("json-secret-42"), "{text}");
        assert_eq!(value[REDACTED]["list"][0], "x <redacted> y");
    }

    #[test]
    fn the_log_writer_scrubs_a_whole_event() {
        register(["log-secret-77"]);
        let sink = Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
            impl Write for Shared {
                fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                    if let Ok(mut sink) = self.0.lock() {
                        sink.extend_from_slice(bytes);
                    }
                    Ok(bytes.len())
                }
                fn flush(&mut self) -> std::io::Result<()> {
                    Ok(())
                }
            }
            let mut line = ScrubbingLine {
                buffer: Vec::new(),
                inner: Shared(sink.clone()),
            };
            // Split across writes, as a formatter may do.
            line.write_all(b"url=http://h/?t=log-sec").ok();
            line.write_all(b"ret-77 end\n").ok();
        }
        let written = sink.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&written),
            "url=http://h/?t=<redacted> end\n"
        );
    }
}
