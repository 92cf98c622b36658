//! The redactor: a registered secret, embedded in any text in any spelling it knows (as is,
//! upper or lower case, percent-encoded, JSON- or Debug-escaped), never survives a scrub.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plurnk_mcp::redact::{MIN_SECRET_LEN, REDACTED, Redactor};

fn percent(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    // The secret is the input's first line, its surroundings the rest; the placeholder's own
    // characters are kept out of the secret (a secret made of `<redacted>` is no secret).
    let (secret, around) = text.split_once('\n').unwrap_or((&text, ""));
    let secret: String = secret.chars().filter(|c| *c != '<' && *c != '>').collect();
    // A secret the placeholder itself spells ("redacted") would be "found" in it.
    if secret.chars().count() < MIN_SECRET_LEN
        || REDACTED
            .to_ascii_lowercase()
            .contains(&secret.to_ascii_lowercase())
    {
        return;
    }
    let spelled = match choice % 6 {
        0 => secret.clone(),
        1 => secret.to_uppercase(),
        2 => secret.to_lowercase(),
        3 => percent(&secret),
        4 => {
            let quoted = serde_json::Value::String(secret.clone()).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        }
        _ => {
            let quoted = format!("{secret:?}");
            quoted[1..quoted.len() - 1].to_owned()
        }
    };
    // Unicode case mapping can change a string beyond ASCII; only ASCII-case spellings are
    // promised.
    if (choice % 6 == 1 || choice % 6 == 2) && !secret.is_ascii() {
        return;
    }
    let middle = around
        .char_indices()
        .nth(around.chars().count() / 2)
        .map_or(around.len(), |(i, _)| i);
    let (before, after) = around.split_at(middle);
    let haystack = format!("{before}{spelled}{after}");
    let mut redactor = Redactor::default();
    redactor.register([secret.as_str()]);
    let clean = redactor.scrub(&haystack);
    assert!(
        !clean
            .to_ascii_lowercase()
            .contains(&spelled.to_ascii_lowercase()),
        "the secret survived in spelling {}: {clean:?}",
        choice % 6
    );
});
