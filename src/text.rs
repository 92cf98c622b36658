//! What of a text a peer or a caller wrote is never shown as written: control characters
//! (an escape sequence drives a terminal, a carriage return overwrites a line) and Unicode
//! format characters, which reorder or hide what a terminal, a page or a document shows. A
//! right-to-left override (U+202E) makes `invoice\u{202E}fdp.exe` read as `invoiceexe.pdf`;
//! zero-width characters make two different names look the same. Every place that escapes
//! control characters (the command line's messages, tables and documents, the status page,
//! the documents the model reads, the EXEC bridge's errors) escapes these too.

/// Whether `c` is shown only escaped: a control character ([`char::is_control`]), a line or
/// paragraph separator (U+2028, U+2029, which break lines where `\n` is not expected), or a
/// Unicode format character (general category Cf: bidirectional embeddings, overrides and
/// isolates, zero-width spaces, the byte order mark, invisible operators, tag characters).
/// The zero-width joiner and non-joiner (U+200C, U+200D) are left: scripts such as Persian
/// and emoji sequences need them, and they reorder nothing.
pub fn is_unshown(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_format(c)
}

/// Unicode's format characters (general category Cf, Unicode 16) but the two joiners.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'
            | '\u{200E}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

/// `text` with every character [`is_unshown`] replaced by `with`.
pub fn replace_unshown(text: &str, with: char) -> String {
    text.chars()
        .map(|c| if is_unshown(c) { with } else { c })
        .collect()
}

/// JSON text (a serializer's output) with every character [`is_unshown`] that it left as
/// written (format characters and separators: JSON escapes only control characters) written
/// as a `\uXXXX` escape instead, a surrogate pair beyond the basic plane: the same JSON, safe
/// on a terminal. Outside a string such a character is not valid JSON, so only strings change.
pub fn escape_json_unshown(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unshown(c) && !c.is_control() {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_overrides_isolates_and_invisible_characters_are_unshown_and_words_are_not() {
        for c in [
            '\u{202E}',
            '\u{202D}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200F}',
            '\u{FEFF}',
            '\u{061C}',
            '\u{00AD}',
            '\u{2028}',
            '\u{E0041}',
            '\u{1B}',
            '\r',
            '\0',
        ] {
            assert!(is_unshown(c), "{:?}", c);
        }
        for c in ['a', 'é', 'ش', '中', '🙂', '\u{200D}', '\u{200C}', ' ', '…'] {
            assert!(!is_unshown(c), "{c:?}");
        }
        assert_eq!(
            replace_unshown("invoice\u{202E}fdp.exe", '?'),
            "invoice?fdp.exe"
        );
        let json = serde_json::to_string("a\u{202E}b\u{E0041}c\n").expect("JSON");
        let escaped = escape_json_unshown(&json);
        assert_eq!(escaped, r#""a\u202eb\udb40\udc41c\n""#);
        let back: String = serde_json::from_str(&escaped).expect("still JSON");
        assert_eq!(back, "a\u{202E}b\u{E0041}c\n");
    }
}
