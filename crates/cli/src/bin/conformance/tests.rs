use super::scenarios::{fill, sample_arguments};
use super::*;
use plurnk_mcp::{Elicitation, ElicitationAnswer};

#[test]
fn sample_arguments_fill_required_properties_by_type() {
    let schema = json!({
        "type": "object",
        "properties": {
            "region": {"type": "string"},
            "count": {"type": "integer"},
            "flag": {"type": "boolean"},
            "data": {"type": "object"},
            "items": {"type": "array"},
            "nil": {"type": "null"},
            "optional": {"type": "string"}
        },
        "required": ["region", "count", "flag", "data", "items", "nil"]
    });
    assert_eq!(
        sample_arguments(&schema),
        json!({
            "region": "us-west1", "count": 1, "flag": true,
            "data": {}, "items": [], "nil": null
        })
    );
    assert_eq!(sample_arguments(&json!({"type": "object"})), json!({}));
}

#[test]
fn forms_are_accepted_with_fitting_values_and_urls_declined() {
    let form = Elicitation::Form {
        message: "Please confirm".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "confirmed": {"type": "boolean"},
                "count": {"type": "integer"},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string"}
            }
        }),
    };
    let ElicitationAnswer::Accept {
        content: Some(content),
    } = fill(&form)
    else {
        panic!("a form is accepted with content");
    };
    assert_eq!(
        Value::Object(content),
        json!({"confirmed": true, "count": 1, "color": "red", "name": "yes"})
    );
    let url = Elicitation::Url {
        message: "Go".into(),
        url: "https://example.com".into(),
        elicitation_id: "e1".into(),
    };
    assert_eq!(fill(&url), ElicitationAnswer::Decline);
}

#[test]
fn every_scenario_has_a_distinct_name() {
    let mut names = SCENARIOS.to_vec();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SCENARIOS.len());
}
