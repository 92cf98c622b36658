//! Tests of the projection's pure pieces: first sentences and caps, invocation signatures
//! (a property: every signature parses back into its names), worker URIs both ways.

use super::*;
use serde_json::json;

#[test]
fn first_sentences_and_caps() {
    assert_eq!(
        first_sentence("Reads a file. Then more.").as_deref(),
        Some("Reads a file")
    );
    assert_eq!(
        first_sentence("\n\n  Lists   things\nacross lines\n\nSecond paragraph.").as_deref(),
        Some("Lists things across lines")
    );
    assert_eq!(
        first_sentence("Version 1.5 is fine. Next.").as_deref(),
        Some("Version 1.5 is fine")
    );
    assert_eq!(first_sentence("  \n "), None);
    assert_eq!(
        first_sentence("Red \u{1b}[31mtext\u{7}.").as_deref(),
        Some("Red [31mtext")
    );
    let long = "word ".repeat(100);
    let capped = first_sentence(&long).expect("a line");
    assert!(capped.chars().count() <= ONE_LINER_MAX, "{capped}");
    assert!(capped.ends_with('…'));
    let unbroken = "x".repeat(500);
    assert_eq!(cap(&unbroken).chars().count(), ONE_LINER_MAX);
    // Every one-liner ends one way: no full stop, whatever its source wrote; an ellipsis
    // stays.
    assert_eq!(
        cap("Create and edit workbooks."),
        "Create and edit workbooks"
    );
    assert_eq!(cap("Wait for it..."), "Wait for it...");
}

#[test]
fn a_server_one_liner_lists_what_fits_and_counts_the_rest_never_cut_mid_name() {
    let long: Vec<String> = (0..14)
        .map(|i| format!("a_rather_long_tool_name_{i:02}"))
        .collect();
    let names: Vec<&str> = long.iter().map(String::as_str).collect();
    let line = tool_list("files", &names);
    assert!(line.chars().count() <= ONE_LINER_MAX, "{line}");
    assert!(!line.contains('…'), "{line}");
    let listed = line.matches("a_rather_long_tool_name_").count();
    assert!(
        line.ends_with(&format!("and {} more", 14 - listed)),
        "{line}"
    );
    assert_eq!(
        tool_list("t", &["a", "b"]),
        "MCP server t with tools a, b",
        "a short list is whole"
    );
}

#[test]
fn signatures_spell_types_without_inventing_values() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "mode": {"enum": ["r", "w"]},
            "count": {"type": "integer", "default": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "nested": {"$ref": "#/$defs/point"},
            "remote": {"$ref": "https://example.com/schema.json"},
            "fixed": {"const": 7},
            "free": {}
        },
        "required": ["path", "nested"],
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
    });
    assert_eq!(
        signature(&schema),
        r#"{"nested": {"x": number}, "path": string, "count"?: integer, "either"?: string | null, "fixed"?: 7, "free"?: any, "mode"?: "r" | "w", "remote"?: any, "tags"?: [string]}"#
    );
    assert_eq!(signature(&json!({"type": "object"})), "{}");
    // A schema that refers to itself ends in a word, not a stack overflow.
    let cycle = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
    let text = signature(&cycle);
    assert!(text.starts_with(r#"{"next"?: {"next"?: "#), "{text}");
    assert!(text.contains("object"), "{text}");
    // Loops through alternatives and allOf end too, and the document still renders.
    for looping in [
        json!({"anyOf": [{"$ref": "#"}], "type": "object", "properties": {"a": {"$ref": "#"}}}),
        json!({"allOf": [{"$ref": "#"}], "properties": {"a": {"type": "string"}}}),
        json!({"properties": {"a": {"oneOf": [{"$ref": "#/properties/a"}]}}}),
    ] {
        let text = signature(&looping);
        assert!(text.starts_with('{') && !text.contains('\n'), "{text}");
    }
}

#[test]
fn uris_encode_and_resolve_both_ways() {
    assert_eq!(
        tool_uri("git hub", "a/b c"),
        "worker://plurnk/tools/git%20hub/a%2Fb%20c.md"
    );
    assert_eq!(decode(&encode("ü/ %x")).as_deref(), Some("ü/ %x"));
    assert_eq!(decode("%zz"), None);
}

/// A tiny deterministic generator, so the property test needs no extra crate.
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn name(seed: &mut u64) -> String {
    const PIECES: [&str; 14] = [
        "a", "b", "id", "_", "\"", "\\", ",", ": ", "{", "}", "ü", " ", "?", "|",
    ];
    (0..1 + next(seed) % 4)
        .map(|_| PIECES[(next(seed) % PIECES.len() as u64) as usize])
        .collect()
}

fn schema(seed: &mut u64, depth: usize) -> Value {
    match next(seed) % if depth > 2 { 6 } else { 9 } {
        0 => json!({"type": "string"}),
        1 => json!({"type": ["integer", "null"]}),
        2 => json!({"enum": [name(seed), 3, null, "a, b: {c}"]}),
        3 => json!({"const": name(seed)}),
        4 => json!({"type": "boolean", "default": true}),
        5 => json!({"$ref": "#/$defs/shared"}),
        6 => json!({"type": "array", "items": schema(seed, depth + 1)}),
        7 => json!({"anyOf": [schema(seed, depth + 1), schema(seed, depth + 1)]}),
        _ => object(seed, depth + 1).0,
    }
}

/// An object schema, and its property names with their requiredness.
fn object(seed: &mut u64, depth: usize) -> (Value, Vec<(String, bool)>) {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for _ in 0..next(seed) % 6 {
        let key = name(seed);
        if properties.contains_key(&key) {
            continue;
        }
        properties.insert(key.clone(), schema(seed, depth));
        if next(seed).is_multiple_of(2) {
            required.push(key);
        }
    }
    let mut expected: Vec<(String, bool)> = properties
        .keys()
        .map(|key| (key.clone(), required.contains(key)))
        .collect();
    // Required first, each group in name order.
    expected.sort_by_key(|(_, required)| !required);
    let value = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "$defs": {"shared": {"type": "object", "properties": {"k": {"type": "string"}}}}
    });
    (value, expected)
}

/// Reads a signature's top level back: each property's name and whether it is required.
fn parse_back(text: &str) -> Vec<(String, bool)> {
    read_signature(text)
        .expect("a signature")
        .into_iter()
        .map(|field| (field.name, field.required))
        .collect()
}

#[test]
fn property_every_signature_parses_back_into_its_names_and_requiredness() {
    let mut seed = 42;
    for case in 0..2_000 {
        let (schema, expected) = object(&mut seed, 0);
        let text = signature(&schema);
        assert!(!text.contains('\n'), "one line: {text}");
        assert_eq!(
            parse_back(&text),
            expected,
            "case {case}: {text}\nfrom {schema}"
        );
        // Deterministic: the same schema gives the same bytes.
        assert_eq!(signature(&schema), text);
    }
}
