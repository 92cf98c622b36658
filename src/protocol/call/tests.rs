//! The call path's pure parts: progress routes, elicitations and their answers, result checks, error naming.

use std::sync::Mutex;

use super::interaction::elicitation_of;
use super::progress::EARLY_REPORTS;
use super::result::check_result;
use super::*;
use rmcp::model::{InputRequest, ProgressToken};

use crate::model::{Elicitation, ElicitationAnswer, Progress};

#[test]
fn a_refused_token_is_named_without_the_servers_challenge() {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    #[derive(Debug)]
    struct Outer(Box<dyn std::error::Error + Send + Sync>);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "transport: {}", self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.0.as_ref())
        }
    }
    let challenge = "Bearer error=\"invalid_token\", error_description=\"SERVER-TEXT\"";
    let refused = Outer(Box::new(AuthRequiredError::new(challenge.into())));
    assert_eq!(
        error_kind(&refused),
        "the server refused the token (HTTP 401)"
    );
    let scope = Outer(Box::new(InsufficientScopeError::new(
        challenge.into(),
        None,
    )));
    assert_eq!(
        error_kind(&scope),
        "the server asked for more scope (HTTP 403)"
    );
    let long = Outer(Box::new(std::io::Error::other("x".repeat(10_000))));
    assert!(error_kind(&long).len() < 1_000);
}

#[test]
fn a_progress_route_lives_exactly_as_long_as_its_request() {
    let routes = ProgressRoutes::default();
    let token = ProgressToken(rmcp::model::NumberOrString::Number(7));
    let seen = Arc::new(Mutex::new(0));
    let counter = seen.clone();
    let sink: ProgressSink = Arc::new(move |_| {
        if let Ok(mut seen) = counter.lock() {
            *seen += 1;
        }
    });
    let report = || Progress {
        progress: 1.0,
        total: None,
        message: None,
    };
    {
        routes.insert(token.clone(), sink);
        let _guard = RouteGuard {
            routes: &routes,
            token: Some(token.clone()),
        };
        routes.deliver(&token, report());
    }
    // Settled: the route is gone, and a late report reaches nobody.
    routes.deliver(&token, report());
    assert_eq!(*seen.lock().expect("lock"), 1);
    assert!(
        routes.0.lock().expect("lock").sinks.is_empty(),
        "the route leaked"
    );
}

#[test]
fn a_report_read_before_its_route_is_made_reaches_it_first_and_in_order() {
    let routes = ProgressRoutes::default();
    let token = |n| ProgressToken(rmcp::model::NumberOrString::Number(n));
    let report = |progress| Progress {
        progress,
        total: None,
        message: None,
    };
    // Reports for a request whose route is not made yet, and for one nobody routes.
    routes.deliver(&token(1), report(1.0));
    routes.deliver(&token(2), report(9.0));
    routes.deliver(&token(1), report(2.0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    routes.insert(
        token(1),
        Arc::new(move |progress: Progress| {
            if let Ok(mut seen) = into.lock() {
                seen.push(progress.progress);
            }
        }),
    );
    routes.deliver(&token(1), report(3.0));
    assert_eq!(*seen.lock().expect("lock"), vec![1.0, 2.0, 3.0]);
    // What nobody claims is bounded: the oldest go first.
    for n in 0..(EARLY_REPORTS as i64 * 2) {
        routes.deliver(&token(100 + n), report(1.0));
    }
    let early = &routes.0.lock().expect("lock").early;
    assert_eq!(early.len(), EARLY_REPORTS);
    assert_eq!(
        early.front().map(|(t, _)| t.clone()),
        Some(token(100 + EARLY_REPORTS as i64))
    );
}

fn form() -> Elicitation {
    Elicitation::Form {
        message: "who?".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "color": {"type": "string", "enum": ["red", "blue"]}
            },
            "required": ["name"]
        }),
    }
}

fn accept(content: Value) -> ElicitationAnswer {
    ElicitationAnswer::Accept {
        content: content.as_object().cloned(),
    }
}

#[test]
fn form_answers_are_checked_against_the_schema() {
    assert!(validate(&form(), &accept(json!({"name": "ada", "age": 36}))).is_ok());
    assert!(validate(&form(), &ElicitationAnswer::Decline).is_ok());
    let missing = validate(&form(), &accept(json!({"age": 3})))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("\"name\""), "{missing}");
    let wrong = validate(&form(), &accept(json!({"name": "a", "age": "old"})))
        .unwrap_err()
        .to_string();
    assert!(wrong.contains("integer"), "{wrong}");
    let outside = validate(&form(), &accept(json!({"name": "a", "color": "green"})))
        .unwrap_err()
        .to_string();
    assert!(outside.contains("enum"), "{outside}");
    let extra = validate(&form(), &accept(json!({"name": "a", "x": 1})))
        .unwrap_err()
        .to_string();
    assert!(extra.contains("\"x\""), "{extra}");
}

#[test]
fn every_field_type_of_a_form_is_checked() {
    let typed = Elicitation::Form {
        message: "values".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "n": {"type": "number"},
                "i": {"type": "integer"},
                "b": {"type": "boolean"},
                "a": {"type": "array"}
            }
        }),
    };
    let fits = json!({"n": 1.5, "i": -3, "b": true, "a": ["x"]});
    assert_eq!(validate(&typed, &accept(fits)), Ok(()));
    // Unsigned integers past i64 are integers too.
    assert_eq!(validate(&typed, &accept(json!({"i": u64::MAX}))), Ok(()));
    for (field, wrong, kind) in [
        ("n", json!("1.5"), "number"),
        ("i", json!(1.5), "integer"),
        ("b", json!("yes"), "boolean"),
        ("a", json!("x"), "array"),
    ] {
        let refused = validate(&typed, &accept(json!({ field: wrong }))).map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(format!("gives \"{field}\" a value that is not a {kind}"))
        );
    }
}

#[test]
fn an_error_is_told_by_its_innermost_cause() {
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("request to https://user:secret@example.test/mcp failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let error = Outer(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    ));
    assert_eq!(error_kind(&error), "connection refused");
}

#[test]
fn only_elicitations_are_asked_of_the_caller() {
    let request =
        |value: Value| -> InputRequest { serde_json::from_value(value).expect("an input request") };
    let asked = elicitation_of(
        "who",
        request(json!({
            "method": "elicitation/create",
            "params": {"message": "who?", "requestedSchema": {"type": "object", "properties": {}}}
        })),
    );
    assert!(matches!(asked, Ok(Elicitation::Form { .. })), "{asked:?}");
    let sampling = elicitation_of(
        "think",
        request(json!({
            "method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 10}
        })),
    );
    assert_eq!(
        sampling.err().map(|e| e.to_string()).as_deref(),
        Some("input request \"think\" asks for sampling, which this host does not offer")
    );
    let roots = elicitation_of("where", request(json!({"method": "roots/list"})));
    assert_eq!(
        roots.err().map(|e| e.to_string()).as_deref(),
        Some("input request \"where\" asks for roots, which this host does not offer")
    );
}

#[test]
fn url_elicitations_read_and_reject_content() {
    let url = elicitation_from(&json!({
        "mode": "url", "message": "log in", "url": "https://example.test/a", "elicitationId": "e1"
    }))
    .expect("a url elicitation");
    assert!(matches!(url, Elicitation::Url { ref elicitation_id, .. } if elicitation_id == "e1"));
    assert!(validate(&url, &ElicitationAnswer::Accept { content: None }).is_ok());
    assert!(validate(&url, &accept(json!({"a": 1}))).is_err());
    assert!(elicitation_from(&json!({"mode": "telepathy", "message": "x"})).is_none());
}

#[test]
fn answers_serialize_as_the_standard_actions() {
    assert_eq!(
        json!(ElicitationAnswer::Decline),
        json!({"action": "decline"})
    );
    assert_eq!(
        json!(ElicitationAnswer::Cancel),
        json!({"action": "cancel"})
    );
    assert_eq!(
        json!(accept(json!({"name": "ada"}))),
        json!({"action": "accept", "content": {"name": "ada"}})
    );
}

#[test]
fn a_result_is_checked_for_what_the_host_reads_and_handed_on_otherwise() {
    let call = Operation::CallTool {
        name: "t".into(),
        arguments: serde_json::Map::new(),
    };
    // Unknown content block types, unknown fields and a missing content pass.
    let odd = json!({
        "content": [{"type": "hologram", "frames": 3}, {"type": "text", "text": "x", "x": 1}],
        "x-vendor": {"trace": "abc"},
        "isError": true,
    });
    assert_eq!(check_result(&call, &odd), Ok(true));
    assert_eq!(check_result(&call, &json!({})), Ok(false));
    assert_eq!(
        check_result(&call, &json!({"content": [], "resultType": "complete"})),
        Ok(false)
    );
    // What the specification forbids, and what the host reads, is refused by name.
    let refused = |result: Value| check_result(&call, &result).unwrap_err().to_string();
    assert!(
        refused(json!({"content": [{"type": "blob", "blob": "AA=="}]})).contains("standalone blob")
    );
    assert!(
        refused(json!({"content": [{"text": "x"}]})).contains("content block 0 has no \"type\"")
    );
    assert!(refused(json!({"content": {"type": "text"}})).contains("\"content\" is an object"));
    assert!(refused(json!({"isError": "yes"})).contains("\"isError\" is a string"));
    assert!(refused(json!({"resultType": "later"})).contains("resultType \"later\""));
    assert!(refused(json!([1])).contains("an array, not a JSON object"));
    // The other operations' results need the member the host hands on.
    let read = Operation::ReadResource { uri: "u".into() };
    assert_eq!(
        check_result(&read, &json!({"contents": [], "x": 1})),
        Ok(false)
    );
    assert!(check_result(&read, &json!({})).is_err());
    let prompt = Operation::GetPrompt {
        name: "p".into(),
        arguments: serde_json::Map::new(),
    };
    assert!(check_result(&prompt, &json!({"messages": {}})).is_err());
}
