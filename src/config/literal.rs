//! Credentials written out where a `${NAME}` reference belongs, and the one refusal every
//! kept definition goes through.
//!
//! A definition that is kept (an added server, a workspace's specialization or customized
//! enable, a tool source's declaration) must hold no credential: the state file outlives the
//! process, is backed up and copied. A credential is *written literally* when one of these is
//! not a `${NAME}` reference:
//!
//! - a credential field: `authorization.token`, `.clientSecret`, `.assertion`, a source's
//!   `bearer`;
//! - an `env` or `headers` entry whose name says credential ([`is_credential_name`]); an
//!   optional scheme word may precede the reference (`Bearer ${TOKEN}`);
//! - an `env` or `headers` value that is a long hexadecimal token (`X-Access: 3f9a…`, 32
//!   hexadecimal digits or more, in one case: an API key as many services issue them);
//! - a URL's password, a credential-named query value (`?api_key=...`), a token-shaped path
//!   segment, or a whole webhook URL whose path is its secret (Slack's
//!   `hooks.slack.com/services/…`, Discord's `/api/webhooks/…`), wherever a URL is written
//!   (the endpoint, an argument, an environment value);
//! - the value of a credential flag in an argument array: `--token X`, `--api-key=X`
//!   ([`credential_flag`]);
//! - a token-shaped word anywhere ([`looks_like_token`]): a well-known token prefix, a JWT,
//!   or a long, mixed-case, digit-bearing, high-entropy word.
//!
//! [`literal_credentials`] finds every one of them in a definition's wire JSON, naming the
//! field and never the value. The workspace's add and customized enable call it (through
//! [`ServerDefinition::literal_credentials`]) before anything connects and answer
//! `400 literal-credential`; the store calls it again before each write, as a last line.
//! `import` uses the same predicates ([`literals_in`], [`credential_flag`],
//! [`is_credential_name`]) to move each such value into a reference instead.

use std::fmt;
use std::ops::Range;

use serde_json::Value;

use super::definition::ServerDefinition;
use super::environment::is_single_reference;
use super::error::ConfigError;
use super::transport::Transport;
use super::wire::McpServerDefinition;

/// The fields that carry a credential and nothing else: each must be exactly one `${NAME}`
/// reference when present. `bearer` and a top-level `clientSecret` are not in the server
/// wire shape; they are checked so a definition built from other names cannot smuggle a
/// token past the refusal. `declaration.bearer` is an OpenAPI source's.
const CREDENTIAL_FIELDS: &[(&[&str], &str)] = &[
    (&["authorization", "token"], "authorization.token"),
    (
        &["authorization", "clientSecret"],
        "authorization.clientSecret",
    ),
    (&["authorization", "assertion"], "authorization.assertion"),
    (&["authorization", "bearer"], "authorization.bearer"),
    (&["bearer"], "bearer"),
    (&["clientSecret"], "clientSecret"),
    (&["declaration", "bearer"], "declaration.bearer"),
];

/// Prefixes that well-known services give their tokens (GitHub, GitLab, Slack, OpenAI and
/// Anthropic, Stripe, AWS access key ids, npm, PyPI, Hugging Face, Google API keys, Shopify,
/// DigitalOcean, SendGrid, Square, Google OAuth access tokens).
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxa-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "xapp-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "AKIA",
    "ASIA",
    "npm_",
    "pypi-",
    "hf_",
    "AIza",
    "shpat_",
    "shpss_",
    "dop_v1_",
    "SG.",
    "sq0atp-",
    "sq0csp-",
    "ya29.",
];

/// A prefixed token has at least this many characters after its prefix (a real one has 16
/// to 80), so `sk-learn` or `hf_home` are words, not tokens.
const MIN_AFTER_PREFIX: usize = 12;

/// A word without a known prefix is taken for a token only from this length on: shorter
/// random-looking words are too often identifiers.
const MIN_HIGH_ENTROPY_LEN: usize = 32;

/// Bits of Shannon entropy per character from which a long word is taken for random (32
/// random base62 characters give about 4.5; English identifiers of that length stay under
/// 4).
const MIN_ENTROPY_BITS: f64 = 4.0;

/// What a credential written into a string is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LiteralKind {
    /// A URL's password.
    Password,
    /// The value of a credential-named query parameter.
    Query(String),
    /// A token-shaped word (a URL's path segment included).
    Token,
    /// A whole webhook URL, whose path is its secret.
    Webhook,
}

/// Hosts whose webhook URLs carry their secret in the path: anyone who has the URL can post
/// as the hook (`hooks.slack.com/services/T…/B…/…`, `discord.com/api/webhooks/ID/TOKEN`).
const WEBHOOKS: &[(&str, &str)] = &[
    ("hooks.slack.com", "/services/"),
    ("hooks.slack.com", "/workflows/"),
    ("hooks.slack.com", "/triggers/"),
    ("discord.com", "/api/webhooks/"),
    ("discordapp.com", "/api/webhooks/"),
    ("ptb.discord.com", "/api/webhooks/"),
    ("canary.discord.com", "/api/webhooks/"),
];

/// A hexadecimal value of at least this many digits in an `env` or `headers` entry is taken
/// for a token: 128 bits, what services that issue hexadecimal keys give at least.
const MIN_HEX_TOKEN_LEN: usize = 32;

/// A credential written into a string: where, and what it is. Never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Literal {
    /// Its bytes in the string.
    pub(crate) range: Range<usize>,
    /// What it is.
    pub(crate) kind: LiteralKind,
}

/// A flag in an argument array whose value is a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CredentialFlag<'a> {
    /// The flag's name without its dashes: `api-key`.
    pub(crate) name: &'a str,
    /// Where its value starts in the argument, for `--flag=value`; `None` when the value is
    /// the next argument.
    pub(crate) inline: Option<usize>,
}

/// A kept definition holds credentials written literally: every field, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "server \"{alias}\" holds a credential written literally in {}, and a definition that is \
     kept must not: put each value in an environment variable, write ${{NAME}} in its place, \
     and have the operator list NAME in PLURNK_MCP_WORKSPACE_ENV; nothing was added or changed",
    super::error::and_list(fields)
)]
pub struct LiteralCredentials {
    /// The server.
    pub alias: String,
    /// Each field, such as `env."CLIENT_SECRET"` or `args[3] (the value of --token)`.
    pub fields: Vec<String>,
}

/// Whether a header, environment variable, query parameter or flag name says it holds a
/// credential: `authorization`, `cookie`, anything holding `key`, `token`, `secret`,
/// `password`, `passwd`, `credential` or `bearer`, a word (between `-`, `_` or `.`) `pat`,
/// `pass`, `passphrase` or `pwd` (not `PWD` alone, the working directory), `auth`,
/// `session`, `sid` or `access` as the last word (`X-Auth`, `BASIC_AUTH`, `SESSION`,
/// `X-Session`, `X-Access`, but not `AUTH_URL` or `ACCESS_LOG`), or `session` before `id`
/// (`SESSION_ID`).
pub(crate) fn is_credential_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if name == "authorization" || name == "proxy-authorization" || name == "cookie" {
        return true;
    }
    if [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "bearer",
    ]
    .iter()
    .any(|word| name.contains(word))
    {
        return true;
    }
    let words: Vec<&str> = name
        .split(['-', '_', '.'])
        .filter(|word| !word.is_empty())
        .collect();
    words
        .iter()
        .any(|word| matches!(*word, "pat" | "pass" | "passphrase" | "cookie"))
        || (words.len() > 1 && words.contains(&"pwd"))
        || words
            .last()
            .is_some_and(|last| matches!(*last, "auth" | "session" | "sid" | "access"))
        || words.windows(2).any(|pair| pair == ["session", "id"])
        || words.contains(&"sessionid")
}

/// Whether `value` is a long hexadecimal token: [`MIN_HEX_TOKEN_LEN`] hexadecimal digits or
/// more, in one case, with at least one letter and one digit (so a run of one digit is not).
pub(crate) fn is_hex_token(value: &str) -> bool {
    let digits = value.trim();
    digits.len() >= MIN_HEX_TOKEN_LEN
        && digits.bytes().all(|b| b.is_ascii_hexdigit())
        && (digits.bytes().all(|b| !b.is_ascii_uppercase())
            || digits.bytes().all(|b| !b.is_ascii_lowercase()))
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Whether `arg` is a flag whose value is a credential (`--token`, `--api-key=X`,
/// `--password`, `--client-secret`, `--auth`), and where its value is. The flag's last word
/// decides: `token`, `secret`, `password`, `passwd`, `pwd`, `pass`, `pat`, `apikey`, `auth`,
/// `bearer`, `credential(s)`, or `key` after `api`, `access`, `secret`, `auth`, `master` or
/// `app`; so `--token-file`, `--key-path` and `--ssh-key` name no credential.
pub(crate) fn credential_flag(arg: &str) -> Option<CredentialFlag<'_>> {
    let flag = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let (name, inline) = match flag.find('=') {
        Some(at) => (&flag[..at], Some(arg.len() - flag.len() + at + 1)),
        None => (flag, None),
    };
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['-', '_']).filter(|w| !w.is_empty()).collect();
    let credential = match words.as_slice() {
        [.., last]
            if matches!(
                *last,
                "token"
                    | "secret"
                    | "password"
                    | "passwd"
                    | "pwd"
                    | "pass"
                    | "pat"
                    | "apikey"
                    | "auth"
                    | "bearer"
                    | "credential"
                    | "credentials"
            ) =>
        {
            true
        }
        [.., qualifier, "key"] => matches!(
            *qualifier,
            "api" | "access" | "secret" | "auth" | "master" | "app"
        ),
        _ => false,
    };
    credential.then_some(CredentialFlag { name, inline })
}

/// Whether `word` looks like a token: a well-known prefix followed by at least 12 token
/// characters, one of them a digit; a JWT (`eyJ….….…`); or a word of at least 32 token
/// characters mixing upper case, lower case and digits with at least 4 bits of entropy a
/// character. Paths (a leading `/`), dotted names, hexadecimal digests and UUIDs (one case
/// only) are not tokens.
pub fn looks_like_token(word: &str) -> bool {
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if let Some(prefix) = TOKEN_PREFIXES
        .iter()
        .find(|prefix| word.starts_with(**prefix))
    {
        let rest = &word[prefix.len()..];
        return rest.len() >= MIN_AFTER_PREFIX
            && rest.chars().all(token_char)
            && rest.chars().any(|c| c.is_ascii_digit());
    }
    if is_jwt(word) {
        return true;
    }
    let body = word.trim_end_matches('=');
    body.len() >= MIN_HIGH_ENTROPY_LEN
        && !body.starts_with(['/', '-'])
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/'))
        && body.chars().any(|c| c.is_ascii_uppercase())
        && body.chars().any(|c| c.is_ascii_lowercase())
        && body.chars().any(|c| c.is_ascii_digit())
        && entropy(body) >= MIN_ENTROPY_BITS
}

/// A JSON Web Token: three base64url parts, the first a JSON object (`eyJ`).
fn is_jwt(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    let base64url = |part: &str| {
        part.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    };
    matches!(parts.as_slice(), [header, payload, signature]
        if header.starts_with("eyJ")
            && header.len() >= 10
            && payload.len() >= 10
            && parts.iter().all(|part| base64url(part))
            && (signature.is_empty() || signature.len() >= 10))
}

/// Shannon entropy in bits per character.
fn entropy(word: &str) -> f64 {
    let mut counts = [0usize; 128];
    let mut total = 0usize;
    for byte in word.bytes().filter(u8::is_ascii) {
        counts[usize::from(byte)] += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    let total = total as f64;
    counts
        .iter()
        .filter(|&&count| count > 0)
        .map(|&count| {
            let p = count as f64 / total;
            -p * p.log2()
        })
        .sum()
}

/// Every credential written literally into `s`: in each white-space-separated word (and in
/// what follows the first `=` of one, as in `--db=postgres://...`), a URL's password or
/// credential-named query value, or a token-shaped word. A `${NAME}` reference is never one.
pub(crate) fn literals_in(s: &str) -> Vec<Literal> {
    let mut found = Vec::new();
    let mut at = 0;
    for word in s.split(char::is_whitespace) {
        let start = at;
        at += word.len() + 1;
        // What follows `name=` is a value of its own: `--db=postgres://...`, `KEY=ghp_...`.
        let value = word
            .split_once('=')
            .filter(|(name, _)| !name.contains("://"))
            .map(|(name, value)| (start + name.len() + 1, value));
        if let Some((offset, url)) = value
            .filter(|(_, value)| value.contains("://"))
            .or_else(|| word.contains("://").then_some((start, word)))
        {
            found.extend(url_literals(url).into_iter().map(|literal| Literal {
                range: literal.range.start + offset..literal.range.end + offset,
                kind: literal.kind,
            }));
            continue;
        }
        let token = [(start, word)]
            .into_iter()
            .filter(|(_, word)| !word.starts_with('-'))
            .chain(value)
            .find(|(_, candidate)| !candidate.contains("${") && looks_like_token(candidate));
        if let Some((offset, candidate)) = token {
            found.push(Literal {
                range: offset..offset + candidate.len(),
                kind: LiteralKind::Token,
            });
        }
    }
    found
}

/// A URL's password, credential-named query values and token-shaped path segments that are
/// not one reference each; a webhook URL whose path is its secret, whole.
fn url_literals(url: &str) -> Vec<Literal> {
    let mut found = Vec::new();
    let Some(scheme_end) = url.find("://") else {
        return found;
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_end = authority_start + rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &url[authority_start..authority_end];
    let path_end = url[authority_end..]
        .find(['?', '#'])
        .map_or(url.len(), |end| authority_end + end);
    let path = &url[authority_end..path_end];
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !url.contains("${")
        && WEBHOOKS.iter().any(|(hook, prefix)| {
            host == *hook && path.len() > prefix.len() && path.starts_with(prefix)
        })
    {
        found.push(Literal {
            range: 0..url.len(),
            kind: LiteralKind::Webhook,
        });
        return found;
    }
    let mut at = authority_end;
    for segment in path.split('/') {
        let start = at;
        at += segment.len() + 1;
        if !segment.contains("${") && looks_like_token(segment) {
            found.push(Literal {
                range: start..start + segment.len(),
                kind: LiteralKind::Token,
            });
        }
    }
    if let Some(at) = authority.rfind('@')
        && let Some(colon) = authority[..at].find(':')
    {
        let password = authority_start + colon + 1..authority_start + at;
        if !password.is_empty() && !is_single_reference(&url[password.clone()]) {
            found.push(Literal {
                range: password,
                kind: LiteralKind::Password,
            });
        }
    }
    let Some(query_start) = url[authority_end..]
        .find('?')
        .map(|q| authority_end + q + 1)
    else {
        return found;
    };
    let query_end = url[query_start..]
        .find('#')
        .map_or(url.len(), |hash| query_start + hash);
    let mut at = query_start;
    for pair in url[query_start..query_end].split('&') {
        let start = at;
        at += pair.len() + 1;
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        if is_credential_name(name) && !value.is_empty() && !is_single_reference(value) {
            let value_start = start + name.len() + 1;
            found.push(Literal {
                range: value_start..value_start + value.len(),
                kind: LiteralKind::Query(name.to_owned()),
            });
        }
    }
    found
}

/// Whether a credential-named entry's value refers to its credential: one `${NAME}`, after
/// an optional scheme word (`Bearer ${TOKEN}`).
fn is_referenced(value: &str) -> bool {
    let reference = match value.split_once(' ') {
        Some((scheme, rest))
            if !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphabetic()) =>
        {
            rest
        }
        _ => value,
    };
    is_single_reference(reference)
}

/// One place that holds a credential written literally: the field, and what in it is the
/// credential when that is not the whole value. Never the value.
struct Found {
    /// `env."CLIENT_SECRET"`, `authorization.clientSecret`, `args[3]`.
    field: String,
    /// `its password`, `the value of --token`, `a token-shaped value`; `None` when the whole
    /// field is the credential.
    what: Option<String>,
}

impl Found {
    fn whole(field: String) -> Self {
        Self { field, what: None }
    }

    fn part(field: String, what: String) -> Self {
        Self {
            field,
            what: Some(what),
        }
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.what {
            None => f.write_str(&self.field),
            Some(what) => write!(f, "{} ({what})", self.field),
        }
    }
}

/// Every place in `definition` (the wire JSON of any kind, as it is stored) that holds a
/// credential written literally, by field: `env."CLIENT_SECRET"`, `url (its password)`,
/// `args[3] (the value of --token)`, `declaration.env."A" (a token-shaped value)`. Empty
/// when it may be kept.
pub fn literal_credentials(definition: &Value) -> Vec<String> {
    found_in(definition)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Every credential `variable` writes literally in the authorization it holds (the
/// `PLURNK_MCP_<server>_AUTHORIZATION` companion, whose credentials are the operator's
/// environment's to hold), found by the same reading as [`literal_credentials`], as
/// configuration faults naming `<variable>.<field>`: a credential field that is not one
/// `${NAME}`, and a token, a URL's password or a credential-named query value anywhere else.
pub(crate) fn literal_authorization(variable: &str, authorization: &Value) -> Vec<ConfigError> {
    let wrapped = serde_json::json!({ "authorization": authorization });
    found_in(&wrapped)
        .into_iter()
        .map(|found| {
            let field = found
                .field
                .strip_prefix("authorization.")
                .unwrap_or(&found.field);
            let variable = format!("{variable}.{field}");
            match found.what {
                None => ConfigError::CredentialNotReference { variable },
                Some(what) => ConfigError::LiteralCredential { variable, what },
            }
        })
        .collect()
}

fn found_in(definition: &Value) -> Vec<Found> {
    let mut found = Vec::new();
    for (path, field) in CREDENTIAL_FIELDS {
        match path
            .iter()
            .try_fold(definition, |value, key| value.get(key))
        {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if is_single_reference(s) => {}
            Some(_) => found.push(Found::whole((*field).to_owned())),
        }
    }
    walk(definition, "", None, &mut found);
    found
}

/// Visits `value` at `path`; `parent` is the key it sits under.
fn walk(value: &Value, path: &str, parent: Option<&str>, found: &mut Vec<Found>) {
    if CREDENTIAL_FIELDS.iter().any(|(_, field)| *field == path) {
        return;
    }
    match value {
        Value::String(s) => strings(s, path, found),
        Value::Array(items) => {
            let arguments = matches!(parent, Some("args" | "versionArgs"));
            let mut value_of: Option<String> = None;
            for (index, item) in items.iter().enumerate() {
                let at = format!("{path}[{index}]");
                let Some(arg) = item.as_str() else {
                    value_of = None;
                    walk(item, &at, None, found);
                    continue;
                };
                if let Some(flag) = value_of.take()
                    && !arg.starts_with('-')
                    && !arg.is_empty()
                {
                    if !is_single_reference(arg) {
                        found.push(Found::part(at, format!("the value of {flag}")));
                    }
                    continue;
                }
                if arguments && let Some(flag) = credential_flag(arg) {
                    match flag.inline {
                        Some(start) => {
                            let value = &arg[start..];
                            if !value.is_empty() && !is_single_reference(value) {
                                found.push(Found::part(
                                    at,
                                    format!("the value of {}", &arg[..start - 1]),
                                ));
                            }
                        }
                        None => value_of = Some(arg.to_owned()),
                    }
                    continue;
                }
                strings(arg, &at, found);
            }
        }
        Value::Object(fields) => {
            let entries = matches!(parent, Some("env" | "headers"));
            for (key, item) in fields {
                let at = match (entries, path.is_empty()) {
                    (true, _) => format!("{path}.{key:?}"),
                    (false, true) => key.clone(),
                    (false, false) => format!("{path}.{key}"),
                };
                if entries && is_credential_name(key) {
                    if !item.as_str().is_some_and(is_referenced) {
                        found.push(Found::whole(at));
                    }
                    continue;
                }
                if entries && item.as_str().is_some_and(is_hex_token) {
                    found.push(Found::part(at, LiteralKind::Token.to_string()));
                    continue;
                }
                walk(item, &at, (!entries).then_some(key.as_str()), found);
            }
        }
        _ => {}
    }
}

/// The credentials written into one string at `path`.
fn strings(s: &str, path: &str, found: &mut Vec<Found>) {
    for literal in literals_in(s) {
        found.push(Found::part(path.to_owned(), literal.kind.to_string()));
    }
}

// === impl ServerDefinition ===

impl ServerDefinition {
    /// Every credential this definition holds written literally, by field
    /// ([`literal_credentials`] on its wire form); an in-process server holds none.
    pub fn literal_credentials(&self) -> Vec<String> {
        if matches!(self.transport(), Transport::InProcess) {
            return Vec::new();
        }
        McpServerDefinition::try_from(self)
            .ok()
            .and_then(|wire| serde_json::to_value(wire).ok())
            .map(|wire| literal_credentials(&wire))
            .unwrap_or_default()
    }

    /// Refuses a definition that holds a credential written literally: the check every
    /// action that keeps a definition runs before anything connects.
    ///
    /// # Errors
    ///
    /// Every such field at once, never a value.
    pub fn refuse_literal_credentials(&self) -> Result<(), LiteralCredentials> {
        let fields = self.literal_credentials();
        if fields.is_empty() {
            return Ok(());
        }
        Err(LiteralCredentials {
            alias: self.alias().to_owned(),
            fields,
        })
    }
}

impl fmt::Display for LiteralKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Password => f.write_str("its password"),
            Self::Query(name) => write!(f, "its query value {name:?}"),
            Self::Token => f.write_str("a token-shaped value"),
            Self::Webhook => f.write_str("a webhook URL, whose path is its secret"),
        }
    }
}
