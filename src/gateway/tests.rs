//! Tests of the gateway's naming and view without a client: served names split back,
//! pages, URIs routed to the one server that claims them, quoted URIs cut.

use super::uri_template::UriTemplate;
use super::view::Unroutable;
use super::*;

#[test]
fn a_served_name_splits_back_at_the_first_separator_whatever_the_name_holds() {
    let naming = Naming::Prefixed;
    for (alias, name) in [
        ("fixture", "echo"),
        ("my-server", "snake_case_tool"),
        ("a", "_leading"),
        ("b", "trailing_"),
        ("c2", "dots.and-dashes"),
    ] {
        let served = served_name(&naming, alias, name);
        assert_eq!(
            route_name(&naming, &served),
            Some((alias, name)),
            "{served}"
        );
    }
    assert_eq!(route_name(&naming, "noseparator"), None);
    assert_eq!(route_name(&naming, "_tool"), None);
    assert_eq!(route_name(&naming, "server_"), None);
}

#[test]
fn a_long_list_comes_in_pages_that_add_up_to_it() {
    let items: Vec<Value> = (0..1_234)
        .map(|n| json!({ "name": format!("t{n}"), "inputSchema": {"type": "object"} }))
        .collect();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let request = cursor.take().map(|cursor| {
            serde_json::from_value::<PaginatedRequestParams>(json!({ "cursor": cursor }))
                .expect("params")
        });
        let listed: ListToolsResult = match page("tools", &items, request) {
            Ok(listed) => listed,
            Err(error) => panic!("a page: {error:?}"),
        };
        assert!(listed.tools.len() <= PAGE_ITEMS);
        seen.extend(listed.tools.iter().map(|tool| tool.name.to_string()));
        match listed.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let expected: Vec<String> = (0..1_234).map(|n| format!("t{n}")).collect();
    assert_eq!(seen, expected);
    let bad =
        serde_json::from_value::<PaginatedRequestParams>(json!({ "cursor": "x" })).expect("params");
    assert!(page::<ListToolsResult>("tools", &items, Some(bad)).is_err());
}

#[test]
fn unprefixed_names_stay_as_the_server_gave_them() {
    let naming = Naming::Unprefixed("only".into());
    assert_eq!(
        served_name(&naming, "only", "test_simple_text"),
        "test_simple_text"
    );
    assert_eq!(
        route_name(&naming, "test_simple_text"),
        Some(("only", "test_simple_text"))
    );
}

fn template(text: &str, alias: &str) -> (Option<UriTemplate>, String, String) {
    (UriTemplate::parse(text), text.to_owned(), alias.to_owned())
}

#[test]
fn a_uri_goes_to_the_one_server_that_claims_it_and_an_ambiguous_one_to_none() {
    let view = View {
        resource_owners: [
            ("test://static".to_owned(), vec!["a".to_owned()]),
            (
                "test://shared".to_owned(),
                vec!["a".to_owned(), "c".to_owned()],
            ),
        ]
        .into(),
        template_owner: vec![
            template("test://{x}", "b"),
            template("test://deep/{y}", "c"),
            template("file:///{+path}", "a"),
            template("file:///{+anything}", "c"),
        ],
        ..View::default()
    };
    let route = |uri| view.resource_route(uri, None);
    assert_eq!(route("test://static"), Ok("a"));
    // A broad template never takes what one server lists, nor a URI it cannot expand to.
    assert_eq!(route("test://deep/1"), Ok("c"));
    assert_eq!(route("test://other"), Ok("b"));
    let both = Err(Unroutable::Ambiguous(vec!["a".into(), "c".into()]));
    assert_eq!(route("test://shared"), both);
    assert_eq!(route("file:///etc/hosts"), both);
    assert_eq!(route("mail://x"), Err(Unroutable::Unclaimed));
    // The client names the server: that one answers, whatever else claims the URI.
    assert_eq!(view.resource_route("test://shared", Some("c")), Ok("c"));
    assert_eq!(
        view.resource_route("test://shared", Some("zz")),
        Err(Unroutable::NotServed("zz".into()))
    );
    assert_eq!(view.template_route("test://deep/{y}"), Some("c"));
    // One server offering resources answers for every URI nobody else claims.
    let single = View {
        resource_owners: [("x://a".to_owned(), vec!["only".to_owned()])].into(),
        ..View::default()
    };
    assert_eq!(single.resource_route("x://unlisted", None), Ok("only"));
}

#[test]
fn a_uri_the_client_sent_is_quoted_cut() {
    let uri = format!("x://{}", "a".repeat(10_000));
    let error = Unroutable::Unclaimed.into_error(&uri);
    assert!(error.message.len() < 400, "{} bytes", error.message.len());
    assert!(error.message.contains("characters)"), "{}", error.message);
    let data = error.data.map(|data| data.to_string()).unwrap_or_default();
    assert!(data.len() < 400, "{} bytes of data", data.len());
}
