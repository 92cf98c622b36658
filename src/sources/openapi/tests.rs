//! Tests of the OpenAPI source against a real HTTP server on 127.0.0.1: a pet store that
//! serves its own document, and a second origin that records whatever reaches it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::*;
use crate::config::Environment;
use crate::sources::{SourceError, ToolSource};

// === harness ===

/// The bearer every test source carries; it must never be seen outside the request.
const TOKEN: &str = "sk-openapi-test-bearer-5f1c9e";

/// The pet store's document; `servers` is relative, so the base URL comes from the spec URL.
fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Pets", "version": "1.0.0"},
        "servers": [{"url": "/v1"}],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List pets.",
                    "description": "At most `limit` of them.",
                    "parameters": [
                        {"name": "limit", "in": "query", "description": "How many.",
                         "schema": {"type": "integer"}},
                        {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}
                    ]
                },
                "post": {
                    "operationId": "createPet",
                    "parameters": [
                        {"name": "X-Request-Id", "in": "header", "required": true, "schema": {"type": "string"}},
                        {"name": "Authorization", "in": "header", "schema": {"type": "string"}}
                    ],
                    "requestBody": {
                        "required": true,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
                    }
                }
            },
            "/pets/{id}": {
                "parameters": [{"$ref": "#/components/parameters/PetId"}],
                "get": {"operationId": "showPetById", "summary": "One pet."}
            },
            "/pets/{id}/photo": {
                "post": {
                    "operationId": "uploadPhoto",
                    "parameters": [{"$ref": "#/components/parameters/PetId"}],
                    "requestBody": {"required": true, "content": {"multipart/form-data": {"schema": {}}}}
                }
            },
            "/health": {"get": {"summary": "Alive?"}},
            "/fail": {"get": {"operationId": "fail"}},
            "/slow": {"get": {"operationId": "slow"}},
            "/huge": {"get": {"operationId": "huge"}},
            "/endless": {"get": {"operationId": "endless"}},
            "/away": {"get": {"operationId": "away"}},
            "/here": {"get": {"operationId": "here"}}
        },
        "components": {
            "parameters": {
                "PetId": {"name": "id", "in": "path", "required": true,
                          "description": "The pet.", "schema": {"type": "string"}}
            },
            "schemas": {
                "Pet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
                    }
                }
            }
        }
    })
}

/// The pet store and a second origin, each on its own port.
struct Api {
    /// `http://127.0.0.1:<port>`, serving `/openapi.json` and the API under `/v1`.
    origin: String,
    /// The second origin, which answers `stolen` to anything.
    other: String,
    /// What reached the second origin: one `Authorization` header (or `-`) per request.
    elsewhere: Arc<Mutex<Vec<String>>>,
}

/// A document of one operation, `GET /pets` (`listPets`), whose server is `server`.
fn served_at(server: &str) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Elsewhere", "version": "1"},
        "servers": [{"url": server}],
        "paths": {"/pets": {"get": {"operationId": "listPets"}}}
    })
}

/// Header parameters a model must never set, beside one it may (`X-Trace`).
const HEADER_PARAMETERS: [&str; 17] = [
    "Host",
    "Content-Length",
    "Content-Type",
    "Accept",
    "Cookie",
    "Authorization",
    "Proxy-Authorization",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "Forwarded",
    "X-Real-IP",
    "Connection",
    "Transfer-Encoding",
    "TE",
    "Upgrade",
    "Keep-Alive",
    "X-Trace",
];

/// A document whose one operation (`echoHeaders`) declares every header of
/// [`HEADER_PARAMETERS`] as a required parameter.
fn header_document() -> Value {
    let parameters: Vec<Value> = HEADER_PARAMETERS
        .iter()
        .map(|name| json!({"name": name, "in": "header", "required": true, "schema": {"type": "string"}}))
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Headers", "version": "1"},
        "servers": [{"url": "/v1"}],
        "paths": {"/headers": {"get": {"operationId": "echoHeaders", "parameters": parameters}}}
    })
}

impl Api {
    async fn start() -> Self {
        let elsewhere = Arc::new(Mutex::new(Vec::new()));
        let seen = elsewhere.clone();
        let other = axum::Router::new().fallback(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
                    .to_owned();
                seen.lock().unwrap().push(auth);
                "stolen"
            }
        });
        let other = serve(other).await;

        let away = format!("{other}/steal");
        let cross = served_at(&format!("{other}/v1"));
        let api = axum::Router::new()
            .route(
                "/openapi.json",
                get(|| async { json_response(StatusCode::OK, &document()) }),
            )
            .route(
                "/cross.json",
                get(move || async move { json_response(StatusCode::OK, &cross) }),
            )
            .route(
                "/metadata.json",
                get(|| async {
                    json_response(StatusCode::OK, &served_at("http://169.254.169.254/latest"))
                }),
            )
            .route(
                "/headers.json",
                get(|| async { json_response(StatusCode::OK, &header_document()) }),
            )
            .route("/v1/headers", get(echo_headers))
            .route("/v1/pets", get(list).post(create))
            .route("/v1/pets/{id}", get(show))
            .route("/v1/health", get(|| async { "ok" }))
            .route(
                "/v1/fail",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "database on fire") }),
            )
            .route(
                "/v1/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            )
            .route("/v1/huge", get(|| async { "x".repeat(2 * 1024 * 1024) }))
            .route("/v1/endless", get(|| async { endless() }))
            .route(
                "/v1/away",
                get(move || {
                    let away = away.clone();
                    async move {
                        (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, away)]).into_response()
                    }
                }),
            )
            .route(
                "/v1/here",
                get(|| async {
                    (StatusCode::FOUND, [(header::LOCATION, "/v1/pets/7")]).into_response()
                }),
            );
        let origin = serve(api).await;
        Self {
            origin,
            other,
            elsewhere,
        }
    }

    fn spec(&self) -> String {
        format!("{}/openapi.json", self.origin)
    }

    /// A declaration of this API with the bearer and `extra` fields.
    fn declaration(&self, extra: Value) -> OpenApiDeclaration {
        let mut value = json!({"name": "pets", "spec": self.spec(), "bearer": "${PETS_TOKEN}"});
        if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
            object.extend(extra);
        }
        OpenApiDeclaration::parse(&value, "pets.json").unwrap()
    }

    async fn open(&self, extra: Value) -> OpenApiSource {
        self.declaration(extra).open(&expand).await.unwrap()
    }
}

async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

/// A body without a length that never ends: only counting what arrives bounds it.
fn endless() -> Response {
    let chunks = futures::stream::repeat_with(|| {
        Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 64 * 1024]))
    });
    axum::body::Body::from_stream(chunks).into_response()
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn list(RawQuery(query): RawQuery) -> Response {
    json_response(
        StatusCode::OK,
        &json!({"pets": [{"name": "rex"}], "query": query}),
    )
}

async fn show(Path(id): Path<String>, uri: Uri) -> Response {
    if id == "404" {
        return (StatusCode::NOT_FOUND, "no such pet").into_response();
    }
    json_response(StatusCode::OK, &json!({"id": id, "path": uri.path()}))
}

/// Every header the request arrived with, names in lower case.
async fn echo_headers(headers: HeaderMap) -> Response {
    let received: Map<String, Value> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                Value::String(value.to_str().unwrap_or("?").to_owned()),
            )
        })
        .collect();
    json_response(StatusCode::OK, &Value::Object(received))
}

/// Echoes what it was sent, the credential included, as a careless API would.
async fn create(headers: HeaderMap, body: Bytes) -> Response {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let received: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    json_response(
        StatusCode::CREATED,
        &json!({
            "received": received,
            "request-id": text("x-request-id"),
            "content-type": text("content-type"),
            "authorization": text("authorization"),
        }),
    )
}

fn expand(s: &str) -> Result<String, crate::config::ConfigError> {
    Environment::new([("PETS_TOKEN", TOKEN), ("API_KEY", "key-0123456789abcdef")]).expand(s)
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

const DEADLINE: Duration = Duration::from_secs(10);

/// A folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "plurnk-mcp-openapi-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Writes `document` as `openapi.json` and declares it with an absolute base URL.
    fn declare(&self, document: &str, extra: Value) -> OpenApiDeclaration {
        std::fs::write(self.0.join("openapi.json"), document).unwrap();
        let mut value =
            json!({"name": "pets", "spec": "openapi.json", "baseUrl": "http://127.0.0.1:9/v1"});
        if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
            object.extend(extra);
        }
        let origin = self.0.join("pets.decl.json");
        OpenApiDeclaration::parse(&value, &origin.display().to_string()).unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The faults of opening `document` from a file, as `(origin ends with, field, problem)`.
async fn faults_of(document: &str, extra: Value) -> Vec<DeclarationError> {
    let dir = TempDir::new();
    match dir.declare(document, extra).open(&expand).await {
        Ok(source) => panic!("opened {source:?}"),
        Err(faults) => faults,
    }
}

// === tools ===

#[tokio::test]
async fn every_operation_becomes_a_tool_named_by_its_operation_id() {
    let api = Api::start().await;
    let source = api.open(json!({})).await;
    let names: Vec<String> = source.tools().into_iter().map(|t| t.name).collect();
    // uploadPhoto needs a multipart body and is left out; /health has no operationId.
    assert_eq!(
        names,
        [
            "away",
            "createPet",
            "endless",
            "fail",
            "get_health",
            "here",
            "huge",
            "listPets",
            "showPetById",
            "slow"
        ]
    );
    let tool = |name: &str| source.tools().into_iter().find(|t| t.name == name).unwrap();

    let list = tool("listPets");
    assert_eq!(
        list.description.as_deref(),
        Some("List pets.\n\nAt most `limit` of them.")
    );
    assert_eq!(
        Value::Object(list.input_schema),
        json!({
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "description": "How many."},
                "tag": {"type": "array", "items": {"type": "string"}}
            },
            "additionalProperties": false
        })
    );
    // A path parameter through a path item's `$ref`, required whatever it says.
    assert_eq!(
        Value::Object(tool("showPetById").input_schema),
        json!({
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The pet."}},
            "required": ["id"],
            "additionalProperties": false
        })
    );
    // The body's schema resolved, its cycle cut; `Authorization` is not a parameter.
    let create = Value::Object(tool("createPet").input_schema);
    assert_eq!(create["required"], json!(["X-Request-Id", "body"]));
    assert_eq!(create["properties"]["body"]["required"], json!(["name"]));
    assert_eq!(
        create["properties"]["body"]["properties"]["children"]["items"],
        json!({})
    );
    assert!(create["properties"].get("Authorization").is_none());
    assert_eq!(tool("get_health").description.as_deref(), Some("Alive?"));
}

#[tokio::test]
async fn the_operations_list_offers_only_those_named() {
    let api = Api::start().await;
    let source = api
        .open(json!({"operations": ["showPetById", "listPets"]}))
        .await;
    let names: Vec<String> = source.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["listPets", "showPetById"]);
}

#[test]
fn tool_names_are_sanitized_and_bounded() {
    use super::document::tool_name;
    assert_eq!(
        tool_name(Some("list pets/all"), "get", "/x"),
        "list_pets_all"
    );
    assert_eq!(
        tool_name(None, "get", "/pets/{id}/photo"),
        "get_pets_id_photo"
    );
    assert_eq!(tool_name(Some("ø"), "delete", "/a.b"), "delete_a.b");
    assert_eq!(tool_name(Some(&"a".repeat(100)), "get", "/").len(), 64);
    assert_eq!(tool_name(None, "get", "/"), "get");
}

// === calls ===

#[tokio::test]
async fn a_call_fills_the_path_the_query_the_headers_and_the_body() {
    let api = Api::start().await;
    let source = api.open(json!({})).await;

    let listed = source
        .call(
            "listPets",
            args(json!({"limit": 2, "tag": ["a", "b c"]})),
            DEADLINE,
        )
        .await
        .unwrap();
    assert!(!listed.is_error);
    assert_eq!(listed.structured.unwrap()["query"], "limit=2&tag=a&tag=b+c");

    let shown = source
        .call("showPetById", args(json!({"id": "a/b?c"})), DEADLINE)
        .await
        .unwrap();
    let shown = shown.structured.unwrap();
    assert_eq!(shown["path"], "/v1/pets/a%2Fb%3Fc");
    assert_eq!(shown["id"], "a/b?c");

    let created = source
        .call(
            "createPet",
            args(json!({"X-Request-Id": "r-1", "body": {"name": "rex"}})),
            DEADLINE,
        )
        .await
        .unwrap();
    assert!(!created.is_error);
    let echoed = created.structured.unwrap();
    assert_eq!(echoed["received"], json!({"name": "rex"}));
    assert_eq!(echoed["request-id"], "r-1");
    assert_eq!(echoed["content-type"], "application/json");
    // The bearer was sent, and the echo of it comes back scrubbed.
    assert_eq!(echoed["authorization"], "<redacted>");
    assert!(!created.text.contains(TOKEN), "{}", created.text);

    let health = source
        .call("get_health", Map::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!((health.text.as_str(), health.structured), ("ok", None));
}

#[tokio::test]
async fn an_error_status_is_an_error_result_that_starts_with_the_status_line() {
    let api = Api::start().await;
    let source = api.open(json!({})).await;
    let failed = source.call("fail", Map::new(), DEADLINE).await.unwrap();
    assert!(failed.is_error);
    assert_eq!(failed.text, "500 Internal Server Error: database on fire");
    let missing = source
        .call("showPetById", args(json!({"id": "404"})), DEADLINE)
        .await
        .unwrap();
    assert!(missing.is_error);
    assert_eq!(missing.text, "404 Not Found: no such pet");
}

#[tokio::test]
async fn arguments_are_checked_before_anything_is_sent() {
    let api = Api::start().await;
    let source = api.open(json!({})).await;
    let call = |tool: &'static str, value: Value| {
        let source = &source;
        async move { source.call(tool, args(value), DEADLINE).await.unwrap_err() }
    };
    assert_eq!(
        call("listPets", json!({"limit": 1, "colour": "red"})).await,
        SourceError::InvalidArguments("\"colour\" is not a parameter of listPets".into())
    );
    assert_eq!(
        call("showPetById", json!({})).await,
        SourceError::InvalidArguments("the required parameter \"id\" is missing".into())
    );
    assert_eq!(
        call("createPet", json!({"X-Request-Id": "r"})).await,
        SourceError::InvalidArguments("the required parameter \"body\" is missing".into())
    );
    assert!(matches!(
        call("showPetById", json!({"id": ".."})).await,
        SourceError::InvalidArguments(text) if text.contains("\"id\" cannot be \"..\"")
    ));
    assert!(matches!(
        call("listPets", json!({"limit": {"a": 1}})).await,
        SourceError::InvalidArguments(text) if text.contains("\"limit\"") && text.contains("an object")
    ));
    assert!(matches!(
        call("createPet", json!({"X-Request-Id": "a\nb", "body": {}})).await,
        SourceError::InvalidArguments(text) if text.contains("line break")
    ));
    assert_eq!(
        call("nope", json!({})).await,
        SourceError::UnknownTool("nope".into())
    );
}

#[tokio::test]
async fn a_call_ends_by_the_declared_deadline_or_the_callers() {
    let api = Api::start().await;
    let source = api.open(json!({"timeoutMs": 300})).await;
    assert_eq!(
        source.call("slow", Map::new(), DEADLINE).await.unwrap_err(),
        SourceError::Timeout { timeout_ms: 300 }
    );
    assert_eq!(
        source
            .call("slow", Map::new(), Duration::from_millis(150))
            .await
            .unwrap_err(),
        SourceError::Timeout { timeout_ms: 150 }
    );
}

#[tokio::test]
async fn a_response_past_its_bound_fails_the_call() {
    let api = Api::start().await;
    let source = api.open(json!({"maxResponseBytes": 1024 * 1024})).await;
    assert_eq!(
        source.call("huge", Map::new(), DEADLINE).await.unwrap_err(),
        SourceError::OutputTooLarge { limit: 1024 * 1024 }
    );
    // A body that announces no length is counted as it arrives.
    assert_eq!(
        source
            .call("endless", Map::new(), DEADLINE)
            .await
            .unwrap_err(),
        SourceError::OutputTooLarge { limit: 1024 * 1024 }
    );
    // At the default bound (4 MiB) the same 2 MiB body is a result.
    let source = api.open(json!({})).await;
    let huge = source.call("huge", Map::new(), DEADLINE).await.unwrap();
    assert_eq!(huge.text.len(), 2 * 1024 * 1024);
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed_with_the_credential() {
    let api = Api::start().await;
    let source = api.open(json!({})).await;
    let away = source.call("away", Map::new(), DEADLINE).await.unwrap();
    assert!(away.is_error);
    assert_eq!(
        away.text,
        "307 Temporary Redirect: a redirect to another origin was not followed"
    );
    assert!(
        api.elsewhere.lock().unwrap().is_empty(),
        "the other origin was reached"
    );
    // Within the origin, a redirect is followed.
    let here = source.call("here", Map::new(), DEADLINE).await.unwrap();
    assert!(!here.is_error, "{}", here.text);
    assert_eq!(here.structured.unwrap()["id"], "7");
}

#[tokio::test]
async fn credentials_go_only_to_the_origin_the_declaration_names() {
    let api = Api::start().await;
    let cross = format!("{}/cross.json", api.origin);
    let other = api.other.trim_end_matches('/');
    // With the bearer, a document naming another origin than its own is refused at open.
    let faults = api
        .declaration(json!({"spec": cross}))
        .open(&expand)
        .await
        .unwrap_err();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "baseUrl");
    assert_eq!(
        faults[0].problem,
        format!(
            "the document's servers[0].url is another origin ({other}) than the spec URL's ({}), \
             and the declared headers and bearer go only where the declaration names",
            api.origin
        )
    );
    assert!(
        faults[0].fix.starts_with("write `baseUrl`"),
        "{}",
        faults[0]
    );
    // A declared header is a credential as much as a bearer.
    let header_only = OpenApiDeclaration::parse(
        &json!({"name": "pets", "spec": cross, "headers": {"X-Client": "plurnk"}}),
        "pets.json",
    )
    .unwrap();
    assert_eq!(
        header_only.open(&expand).await.unwrap_err()[0].field,
        "baseUrl"
    );

    // Carrying nothing of ours, the document's server is reached (loopback from a loopback
    // spec URL, under the address rule).
    let bare = OpenApiDeclaration::parse(&json!({"name": "pets", "spec": cross}), "pets.json")
        .unwrap()
        .open(&expand)
        .await
        .unwrap();
    assert_eq!(
        bare.call("listPets", Map::new(), DEADLINE)
            .await
            .unwrap()
            .text,
        "stolen"
    );
    // Named by `baseUrl`, that origin is the operator's choice and gets the bearer.
    let named = api
        .declaration(json!({"spec": cross, "baseUrl": format!("{other}/v1")}))
        .open(&expand)
        .await
        .unwrap();
    named.call("listPets", Map::new(), DEADLINE).await.unwrap();
    assert_eq!(
        *api.elsewhere.lock().unwrap(),
        ["-".to_owned(), format!("Bearer {TOKEN}")]
    );

    // A document read from a file belongs to no origin the declaration names.
    let dir = TempDir::new();
    std::fs::write(
        dir.0.join("openapi.json"),
        served_at("http://127.0.0.1:9/v1").to_string(),
    )
    .unwrap();
    let origin = dir.0.join("pets.decl.json").display().to_string();
    let from_file = OpenApiDeclaration::parse(
        &json!({"name": "pets", "spec": "openapi.json", "bearer": "${PETS_TOKEN}"}),
        &origin,
    )
    .unwrap();
    let faults = from_file.open(&expand).await.unwrap_err();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "baseUrl");
    assert!(
        faults[0].problem.starts_with(
            "the document, read from a file, names the API's server (http://127.0.0.1:9)"
        ),
        "{}",
        faults[0]
    );
}

#[tokio::test]
async fn a_server_the_document_names_at_a_reserved_address_is_never_reached() {
    let api = Api::start().await;
    let spec = format!("{}/metadata.json", api.origin);
    let faults = OpenApiDeclaration::parse(&json!({"name": "pets", "spec": spec}), "pets.json")
        .unwrap()
        .open(&expand)
        .await
        .unwrap_err();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "spec");
    assert!(
        faults[0].problem.contains("(http://169.254.169.254)")
            && faults[0]
                .problem
                .contains("a link-local or reserved one always"),
        "{}",
        faults[0]
    );
    assert!(
        faults[0].fix.starts_with("write `baseUrl`"),
        "{}",
        faults[0]
    );
    // The operator's own `baseUrl` is theirs to choose.
    let named = OpenApiDeclaration::parse(
        &json!({"name": "pets", "spec": spec, "baseUrl": format!("{}/v1", api.origin)}),
        "pets.json",
    )
    .unwrap();
    assert!(named.open(&expand).await.is_ok());
}

#[tokio::test]
async fn a_model_never_sets_the_framing_credential_or_routing_headers() {
    let api = Api::start().await;
    let source = api
        .open(json!({"spec": format!("{}/headers.json", api.origin)}))
        .await;
    let tool = source.tools().into_iter().next().unwrap();
    // Of the seventeen header parameters the document declares, the model sees one.
    assert_eq!(
        Value::Object(tool.input_schema),
        json!({
            "type": "object",
            "properties": {"X-Trace": {"type": "string"}},
            "required": ["X-Trace"],
            "additionalProperties": false
        })
    );
    for name in HEADER_PARAMETERS.iter().filter(|name| **name != "X-Trace") {
        let refused = source
            .call(
                "echoHeaders",
                args(json!({"X-Trace": "t-1", *name: "evil"})),
                DEADLINE,
            )
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            SourceError::InvalidArguments(format!("\"{name}\" is not a parameter of echoHeaders"))
        );
    }
    let sent = source
        .call("echoHeaders", args(json!({"X-Trace": "t-1"})), DEADLINE)
        .await
        .unwrap()
        .structured
        .unwrap();
    assert_eq!(sent["x-trace"], "t-1");
    assert_eq!(
        sent["host"],
        api.origin.trim_start_matches("http://"),
        "{sent}"
    );
    assert_eq!(sent["authorization"], "<redacted>", "{sent}");
    for never in [
        "cookie",
        "x-forwarded-for",
        "forwarded",
        "x-real-ip",
        "upgrade",
    ] {
        assert!(sent.get(never).is_none(), "{never}: {sent}");
    }
}

#[tokio::test]
async fn the_bearer_never_appears_in_an_error_or_debug() {
    let api = Api::start().await;
    let declaration = api.declaration(json!({"headers": {"X-Api-Key": "${API_KEY}"}}));
    assert!(!format!("{declaration:?}").contains("${API_KEY}"));
    let source = declaration.open(&expand).await.unwrap();
    let shown = format!("{source:?}");
    assert!(
        !shown.contains(TOKEN) && !shown.contains("key-0123456789abcdef"),
        "{shown}"
    );
    assert!(shown.contains("x-api-key"), "{shown}");

    // A connection error prints the URL; a path argument holding the token is scrubbed.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        port
    };
    let declaration = api.declaration(json!({"baseUrl": format!("http://127.0.0.1:{dead}/v1")}));
    let source = declaration.open(&expand).await.unwrap();
    let error = source
        .call("showPetById", args(json!({"id": TOKEN})), DEADLINE)
        .await
        .unwrap_err();
    let SourceError::Unavailable(text) = &error else {
        panic!("{error:?}");
    };
    assert!(text.starts_with("pets: "), "{text}");
    assert!(
        !text.contains(TOKEN) && !format!("{error:?}").contains(TOKEN),
        "{text}"
    );
}

// === declarations ===

#[test]
fn a_declaration_reads_every_field() {
    let declaration = OpenApiDeclaration::parse(
        &json!({
            "kind": "openapi",
            "name": "pets",
            "spec": "https://api.example.com/openapi.json",
            "baseUrl": "https://api.example.com/v1",
            "headers": {"X-Api-Key": "${API_KEY}", "X-Client": "plurnk"},
            "timeoutMs": 5000,
            "maxResponseBytes": 65536,
            "operations": ["listPets"],
            "version": "1.0.0"
        }),
        "apis/pets.json",
    )
    .unwrap();
    assert_eq!(declaration.name, "pets");
    assert_eq!(declaration.timeout_ms, 5000);
    assert_eq!(declaration.max_response_bytes, 65536);
    assert_eq!(declaration.operations, Some(vec!["listPets".to_owned()]));
    assert_eq!(declaration.bearer, None);
    let defaults = OpenApiDeclaration::parse(&json!({"name": "p", "spec": "p.json"}), "o").unwrap();
    assert_eq!(
        (defaults.timeout_ms, defaults.max_response_bytes),
        (DEFAULT_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES)
    );
}

#[test]
fn every_fault_of_a_declaration_is_reported_at_once_with_its_field_and_fix() {
    let faults = OpenApiDeclaration::parse(
        &json!({
            "name": "Pets!",
            "spec": "",
            "baseUrl": "api.example.com",
            "headers": {"Authorization": "Token abc123456789", "X-Api-Key": "${KEY", "Content-Type": "text/plain"},
            "bearer": "sk-literal-0123456789",
            "timeoutMs": 0,
            "maxResponseBytes": "big",
            "maxToolBytes": 0,
            "maxCatalogBytes": -1,
            "operations": [""],
            "colour": "red"
        }),
        "apis/pets.json",
    )
    .unwrap_err();
    let fields: Vec<&str> = faults.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "colour",
            "maxResponseBytes",
            "maxCatalogBytes",
            "name",
            "spec",
            "baseUrl",
            "headers.Authorization",
            "headers.Authorization",
            "headers.Content-Type",
            "headers.X-Api-Key",
            "bearer",
            "timeoutMs",
            "maxToolBytes",
            "operations[0]"
        ]
    );
    assert!(faults.iter().all(|f| f.origin == "apis/pets.json"));
    let text = |field: &str| {
        faults
            .iter()
            .filter(|f| f.field == field)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" | ")
    };
    assert_eq!(
        text("bearer"),
        "apis/pets.json: bearer: the bearer is not exactly one ${NAME} reference; put the \
         credential in the environment and write ${NAME}, such as \"${API_TOKEN}\""
    );
    assert!(
        text("headers.Authorization").contains("written literally"),
        "{}",
        text("headers.Authorization")
    );
    // No fault repeats a literal credential.
    assert!(faults.iter().all(|f| {
        let shown = f.to_string();
        !shown.contains("abc123456789") && !shown.contains("sk-literal")
    }));
    let missing = OpenApiDeclaration::parse(&json!({}), "x.json").unwrap_err();
    assert_eq!(
        missing.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "x.json: name: missing; write a string such as \"pets\"",
            "x.json: spec: missing; write a file path or an http(s):// URL"
        ]
    );
}

#[tokio::test]
async fn a_reference_that_does_not_expand_names_its_field() {
    let dir = TempDir::new();
    let declaration = dir.declare(&document().to_string(), json!({"bearer": "${NOT_SET}"}));
    let faults = declaration.open(&expand).await.unwrap_err();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].field, "bearer");
    assert!(faults[0].problem.contains("NOT_SET"), "{}", faults[0]);
}

// === documents ===

#[tokio::test]
async fn a_document_from_a_file_is_read_relative_to_the_declaration() {
    let dir = TempDir::new();
    let source = dir
        .declare(&document().to_string(), json!({}))
        .open(&expand)
        .await
        .unwrap();
    assert_eq!(source.base_url.as_str(), "http://127.0.0.1:9/v1");
    assert_eq!(source.tools().len(), 10);
}

#[tokio::test]
async fn a_document_without_paths_is_refused() {
    let faults = faults_of(
        r#"{"openapi": "3.0.3", "info": {"version": "1"}, "paths": {}}"#,
        json!({}),
    )
    .await;
    assert_eq!(faults.len(), 1);
    assert!(faults[0].origin.ends_with("openapi.json"), "{}", faults[0]);
    assert_eq!(faults[0].field, "paths");
    assert!(faults[0].fix.contains("at least one operation"));
}

#[tokio::test]
async fn a_remote_reference_is_refused_never_fetched() {
    let mut doc = document();
    doc["components"]["parameters"]["PetId"] =
        json!({"$ref": "https://example.com/params.json#/PetId"});
    let faults = faults_of(&doc.to_string(), json!({})).await;
    // Two operations use the parameter; the fault is where the reference is written, once.
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "components.parameters.PetId.$ref");
    assert!(
        faults[0]
            .problem
            .contains("remote references are never fetched"),
        "{}",
        faults[0]
    );
    assert!(faults[0].fix.contains("#/components/"));
}

#[tokio::test]
async fn two_operations_with_one_tool_name_are_refused() {
    let mut doc = document();
    doc["paths"]["/fail"]["get"]["operationId"] = json!("listPets");
    let faults = faults_of(&doc.to_string(), json!({})).await;
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "paths./pets.get.operationId");
    assert_eq!(
        faults[0].problem,
        "the tool name \"listPets\" is already taken by paths./fail.get"
    );
    assert_eq!(faults[0].fix, "give each operation its own operationId");
}

#[tokio::test]
async fn yaml_swagger_and_unknown_operations_say_what_to_do() {
    let yaml = faults_of("openapi: 3.1.0\npaths: {}\n", json!({})).await;
    assert_eq!(yaml[0].field, "(document)");
    assert!(yaml[0].fix.contains("convert it to JSON"), "{}", yaml[0]);

    let swagger = faults_of(
        r#"{"swagger": "2.0", "paths": {"/a": {"get": {}}}}"#,
        json!({}),
    )
    .await;
    assert_eq!(swagger[0].field, "openapi");

    let unknown = faults_of(
        &document().to_string(),
        json!({"operations": ["listPets", "feedPets"]}),
    )
    .await;
    assert_eq!(unknown.len(), 1);
    assert!(
        unknown[0].origin.ends_with("pets.decl.json"),
        "{}",
        unknown[0]
    );
    assert_eq!(unknown[0].field, "operations[1]");

    // An operation that cannot be sent is an error only when it is asked for.
    let upload = faults_of(
        &document().to_string(),
        json!({"operations": ["uploadPhoto"]}),
    )
    .await;
    assert_eq!(upload[0].field, "paths./pets/{id}/photo.post.requestBody");
    assert!(
        upload[0].problem.contains("only JSON bodies"),
        "{}",
        upload[0]
    );
}

/// A document whose one operation's body refers to a chain of `levels` schemas, each
/// referring twice to the one below, with a `leaf`-byte string at the bottom: small as
/// written, `2^levels × leaf` bytes resolved.
fn fan_out(levels: usize, leaf: usize) -> Value {
    let mut schemas = Map::new();
    for level in 0..levels {
        let below = json!({"$ref": format!("#/components/schemas/L{}", level + 1)});
        schemas.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": {"a": below, "b": below}}),
        );
    }
    schemas.insert(
        format!("L{levels}"),
        json!({"type": "string", "description": "x".repeat(leaf)}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Fan", "version": "1"},
        "paths": {
            "/deep": {"post": {
                "operationId": "deep",
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/L0"}}}}
            }},
            "/pets": {"get": {"operationId": "listPets"}}
        },
        "components": {"schemas": schemas}
    })
}

#[tokio::test]
async fn a_document_whose_references_fan_out_is_refused_by_its_resolved_size() {
    // 22 KB as written, 2.6 GB resolved: refused at the tool's bound, after about 1 MiB of
    // work, naming the operation, the bound and the fix.
    let doc = fan_out(17, 20_000);
    assert!(doc.to_string().len() < 24_000);
    let faults = faults_of(&doc.to_string(), json!({})).await;
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].origin.ends_with("openapi.json"), "{}", faults[0]);
    assert_eq!(faults[0].field, "paths./deep.post");
    assert_eq!(
        faults[0].problem,
        "the operation's tool, its references resolved, is larger than 1048576 bytes (maxToolBytes)"
    );
    assert!(
        faults[0].fix.contains("raise `maxToolBytes`"),
        "{}",
        faults[0]
    );

    // A higher tool bound meets the document's own.
    let faults = faults_of(&doc.to_string(), json!({"maxToolBytes": 1_000_000_000_u64})).await;
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0].field, "paths./deep.post");
    assert!(
        faults[0].problem.starts_with(
            "the document's tools, their references resolved, come to more than 8388608 bytes (maxCatalogBytes)"
        ),
        "{}",
        faults[0]
    );
    assert!(
        faults[0].fix.contains("raise `maxCatalogBytes`"),
        "{}",
        faults[0]
    );

    // Small enough, the same shape opens: the bound is on size, not on shape.
    let dir = TempDir::new();
    let source = dir
        .declare(&fan_out(4, 100).to_string(), json!({}))
        .open(&expand)
        .await
        .unwrap();
    let deep = source
        .tools()
        .into_iter()
        .find(|t| t.name == "deep")
        .unwrap();
    let body = &deep.input_schema["properties"]["body"];
    assert_eq!(
        body["properties"]["a"]["properties"]["b"]["properties"]["a"]["properties"]["b"]["description"],
        "x".repeat(100)
    );
}

#[tokio::test]
async fn the_tool_and_document_bounds_are_exact_and_settable() {
    // Every operation offered: the work spent on one left out counts against the document too.
    let mut doc = document();
    doc["paths"]
        .as_object_mut()
        .unwrap()
        .remove("/pets/{id}/photo");
    let doc = doc.to_string();
    let dir = TempDir::new();
    let tools = dir
        .declare(&doc, json!({}))
        .open(&expand)
        .await
        .unwrap()
        .tools();
    // What a tool takes written out: its name, description and input schema as JSON.
    let written = |tool: &SourceTool| {
        serde_json::to_string(&tool.name).unwrap().len()
            + tool
                .description
                .as_ref()
                .map_or(0, |d| serde_json::to_string(d).unwrap().len())
            + serde_json::to_string(&tool.input_schema).unwrap().len()
    };
    let largest = tools.iter().map(written).max().unwrap();
    let total: usize = tools.iter().map(written).sum();

    let opens = |extra: Value| {
        let declaration = dir.declare(&doc, extra);
        async move { declaration.open(&expand).await.map(|_| ()) }
    };
    assert!(opens(json!({"maxToolBytes": largest})).await.is_ok());
    let refused = opens(json!({"maxToolBytes": largest - 1}))
        .await
        .unwrap_err();
    assert!(
        refused[0]
            .problem
            .contains(&format!("larger than {} bytes (maxToolBytes)", largest - 1)),
        "{refused:?}"
    );
    assert!(opens(json!({"maxCatalogBytes": total})).await.is_ok());
    let refused = opens(json!({"maxCatalogBytes": total - 1}))
        .await
        .unwrap_err();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0]
            .problem
            .contains(&format!("more than {} bytes (maxCatalogBytes)", total - 1)),
        "{refused:?}"
    );
}

// === check ===

#[tokio::test]
async fn check_finds_the_document_and_its_version() {
    let api = Api::start().await;
    let ready = api.declaration(json!({"version": "1.0.0"})).check().await;
    assert!(
        matches!(&ready, Finding::Ready(text) if text.contains("info.version 1.0.0")),
        "{ready:?}"
    );
    assert_eq!(
        api.declaration(json!({"version": "0.9.0"})).check().await,
        Finding::VersionDrift {
            declared: "0.9.0".into(),
            installed: "1.0.0".into()
        }
    );
    let gone = api
        .declaration(json!({"spec": format!("{}/missing.json", api.origin)}))
        .check()
        .await;
    assert!(
        matches!(&gone, Finding::Missing(text) if text.contains("404 Not Found")),
        "{gone:?}"
    );

    let dir = TempDir::new();
    let declaration = dir.declare("{}", json!({}));
    std::fs::remove_file(dir.0.join("openapi.json")).unwrap();
    let missing = declaration.check().await;
    assert!(
        matches!(&missing, Finding::Missing(text) if text.contains("cannot be read")),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_spec_url_that_fails_is_named_without_the_secret_it_carries() {
    // A spec URL may carry a credential from the environment (a query token): what opening
    // and `check` say of it, and of what the network said, shows it scrubbed, as text and
    // as Debug alike.
    let secret = "spec-url-token-0451";
    crate::redact::register([secret]);
    let api = Api::start().await;
    let client = client(None).expect("a client");
    let refused = format!("{}/missing.json?token={secret}", api.origin);
    let refused = SpecLocation::Url(reqwest::Url::parse(&refused).expect("a URL"));
    let status = load(&client, &refused, DEADLINE).await.expect_err("a 404");
    assert!(
        matches!(&status, OpenError::SpecUrlStatus { status, .. } if status.as_u16() == 404),
        "{status:?}"
    );
    assert_eq!(
        status.to_string(),
        format!(
            "the spec URL {}/missing.json?token={} answered 404 Not Found",
            api.origin,
            crate::redact::REDACTED
        )
    );

    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        port
    };
    let unreachable = format!("http://127.0.0.1:{dead}/openapi.json?token={secret}");
    let unreachable = SpecLocation::Url(reqwest::Url::parse(&unreachable).expect("a URL"));
    let failed = load(&client, &unreachable, DEADLINE)
        .await
        .expect_err("refused");
    assert!(
        matches!(&failed, OpenError::SpecUrlUnreachable { .. }),
        "{failed:?}"
    );
    for error in [&status, &failed] {
        assert!(
            !error.to_string().contains(secret) && !format!("{error:?}").contains(secret),
            "{error}"
        );
    }
}
