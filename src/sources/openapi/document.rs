//! An OpenAPI 3.x document read into operations: local `$ref`s resolved (a cycle cut, a
//! remote reference refused), each operation's tool name, description and input schema
//! built, and every fault in the document reported at once with its JSON path.
//!
//! The document may come from a server, so it is an adversary like any other: its size is
//! bounded by the caller, and resolving references is bounded here in depth, in the number of
//! values, and in bytes (a small document whose references fan out — each level referring
//! twice to the one below — would otherwise expand into gigabytes). Only what becomes a tool
//! is resolved (a path item, its parameters and JSON request body), and what is resolved is
//! counted as it is produced, so a document past a bound is refused after at most that much
//! work. The bounds are on bytes written out, not only on memory: every tool's input schema
//! is copied into the snapshot, the model's documents and the gateway's `tools/list`, so
//! sharing resolved schemas inside the host would bound nothing that leaves it.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use serde_json::{Map, Value, json};

use crate::sources::{DeclarationError, SourceTool};

/// The methods an OpenAPI path item may hold, in the order tools are listed.
const METHODS: [(&str, reqwest::Method); 8] = [
    ("get", reqwest::Method::GET),
    ("put", reqwest::Method::PUT),
    ("post", reqwest::Method::POST),
    ("delete", reqwest::Method::DELETE),
    ("options", reqwest::Method::OPTIONS),
    ("head", reqwest::Method::HEAD),
    ("patch", reqwest::Method::PATCH),
    ("trace", reqwest::Method::TRACE),
];

/// How many references may be open inside one another while one value is resolved.
const MAX_REF_DEPTH: usize = 64;

/// How many JSON values resolving all operations may produce.
const MAX_RESOLVED_VALUES: usize = 1_000_000;

/// The longest tool name.
const MAX_TOOL_NAME: usize = 64;

/// The bounds reading a document meets, in bytes of JSON as a tool is written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most one tool may take: its name, description and input schema, references
    /// resolved (the declaration's `maxToolBytes`).
    pub tool_bytes: usize,
    /// The most resolving may produce for the whole document, the tools together (the
    /// declaration's `maxCatalogBytes`).
    pub catalog_bytes: usize,
}

/// A document read into operations.
#[derive(Debug)]
pub(super) struct Document {
    /// `info.version`, when the document has one.
    pub(super) version: Option<String>,
    /// The first `servers[].url`, as written.
    pub(super) server: Option<String>,
    /// Every operation offered, in a stable order (path, then method).
    pub(super) operations: Vec<Operation>,
}

/// One operation, ready to be called.
#[derive(Debug)]
pub(super) struct Operation {
    /// The tool it is offered as.
    pub(super) tool: SourceTool,
    /// The HTTP method, upper case.
    pub(super) method: reqwest::Method,
    /// The path template (`/pets/{id}`).
    pub(super) path: String,
    /// Its path, query and header parameters.
    pub(super) parameters: Vec<Parameter>,
    /// Whether it takes a JSON body, and whether the body is required.
    pub(super) body: Option<Required>,
}

/// Whether a parameter or body must be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Required {
    /// It must be given.
    Yes,
    /// It may be left out.
    No,
}

/// One parameter of an operation.
#[derive(Debug)]
pub(super) struct Parameter {
    /// Its name, which is also its argument's name.
    pub(super) name: String,
    /// Where it goes.
    pub(super) location: Location,
    /// Whether it must be given.
    pub(super) required: Required,
}

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Location {
    /// Into the path template.
    Path,
    /// Appended to the query; an array as repeated keys.
    Query,
    /// A request header.
    Header,
}

/// Reads `document` (the parsed JSON of the file or URL `origin`), offering the operations
/// whose `operationId` is in `allow` (all when `None`): the `operations` of the declaration
/// from `declared_in`, whose fault an entry the document lacks is.
///
/// An operation that cannot be offered (a required body that is not JSON, a required cookie
/// parameter, two parameters with one name) is an error when `allow` names it and is left
/// out, with a warning, otherwise: one upload endpoint should not keep a large API away.
pub(super) fn read(
    document: &Value,
    origin: &str,
    declared_in: &str,
    allow: Option<&[String]>,
    bounds: Bounds,
) -> Result<Document, Vec<DeclarationError>> {
    let error = |field: &str, problem: String, fix: &str| {
        DeclarationError::new(origin, field, problem, fix.to_owned())
    };
    let Some(root) = document.as_object() else {
        return Err(vec![error(
            "(document)",
            "the document is not a JSON object".into(),
            "point `spec` at an OpenAPI 3.0 or 3.1 document",
        )]);
    };
    let mut faults = Vec::new();
    let paths = paths(root, origin, &mut faults);
    let version = document
        .pointer("/info/version")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let server = root
        .get("servers")
        .and_then(Value::as_array)
        .and_then(|servers| servers.first())
        .and_then(|server| server.get("url"))
        .and_then(Value::as_str)
        .map(str::to_owned);

    let mut resolver = Resolver {
        root: document,
        origin,
        bounds,
        produced: 0,
        catalog: 0,
        tool: 0,
        operation: String::new(),
    };
    let (operations, seen_ids) = offer(&mut resolver, paths, allow, &mut faults);
    if let (Some(allow), Some(_)) = (allow, paths) {
        for (i, id) in allow.iter().enumerate() {
            if !seen_ids.contains(id) {
                faults.push(DeclarationError::new(
                    declared_in,
                    format!("operations[{i}]"),
                    format!("no operation in the document has the operationId \"{id}\""),
                    "name operations by their operationId in the document, or remove this entry",
                ));
            }
        }
    }
    // A fault in a shared definition is found once for every operation that uses it.
    let mut seen = BTreeSet::new();
    faults.retain(|fault| seen.insert(fault.to_string()));
    if faults.is_empty() {
        Ok(Document {
            version,
            server,
            operations,
        })
    } else {
        Err(faults)
    }
}

/// The document's `paths`, once it says it is OpenAPI 3 and has some; a fault otherwise.
fn paths<'d>(
    root: &'d Map<String, Value>,
    origin: &str,
    faults: &mut Vec<DeclarationError>,
) -> Option<&'d Map<String, Value>> {
    let error = |field: &str, problem: String, fix: &str| {
        DeclarationError::new(origin, field, problem, fix.to_owned())
    };
    match root.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.") => {}
        Some(v) => faults.push(error(
            "openapi",
            format!("the document is OpenAPI {v:?}; only 3.0 and 3.1 are read"),
            "convert it to OpenAPI 3 (a Swagger 2.0 document converts with swagger2openapi)",
        )),
        None => faults.push(error(
            "openapi",
            "the document has no `openapi` version string".into(),
            "point `spec` at an OpenAPI 3.0 or 3.1 document, which starts with \"openapi\": \"3.x.y\"",
        )),
    }
    match root.get("paths").and_then(Value::as_object) {
        Some(paths) if !paths.is_empty() => Some(paths),
        _ => {
            faults.push(error(
                "paths",
                "the document has no paths, so it offers no operations".into(),
                "point `spec` at a document whose `paths` object describes at least one operation",
            ));
            None
        }
    }
}

/// The operations of `paths` that `allow` lets through, built into tools, and the
/// operationIds it saw; what cannot be offered is a fault, or a warning when `allow` did not
/// name it. Reading stops at the first bound of the whole document.
fn offer<'d>(
    resolver: &mut Resolver<'d>,
    paths: Option<&'d Map<String, Value>>,
    allow: Option<&[String]>,
    faults: &mut Vec<DeclarationError>,
) -> (Vec<Operation>, BTreeSet<String>) {
    let origin = resolver.origin;
    let error = |field: &str, problem: String, fix: &str| {
        DeclarationError::new(origin, field, problem, fix.to_owned())
    };
    let mut operations = Vec::new();
    // Tool name → the JSON path of the operation that took it.
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    // The operationIds of the allowed operations, offered or not.
    let mut seen_ids = BTreeSet::new();
    for (path, item) in paths.into_iter().flatten() {
        let at = format!("paths.{path}");
        let item = match resolver.target(item, &at) {
            Ok(item) => item,
            Err(fault) => {
                faults.push(fault);
                continue;
            }
        };
        let shared = item.get("parameters");
        for (method, verb) in &METHODS {
            let method = *method;
            let Some(op) = item.get(method) else {
                continue;
            };
            let op_at = format!("{at}.{method}");
            let id = op.get("operationId").and_then(Value::as_str);
            let allowed =
                allow.is_none_or(|allow| id.is_some_and(|id| allow.iter().any(|a| a == id)));
            if !allowed {
                continue;
            }
            if let Some(id) = id {
                seen_ids.insert(id.to_owned());
            }
            resolver.begin(&op_at);
            let built = build(resolver, path, (method, verb), op, shared, &op_at)
                .and_then(|operation| resolver.written(operation));
            let operation = match built {
                Ok(operation) => operation,
                Err(Fault::Declaration(fault)) => {
                    faults.push(fault);
                    continue;
                }
                Err(Fault::Exhausted(fault)) => {
                    faults.push(fault);
                    return (operations, seen_ids);
                }
                Err(Fault::Unsupported { field, problem }) => {
                    if allow.is_some() {
                        faults.push(error(
                            &field,
                            problem,
                            "leave this operation out of `operations`",
                        ));
                    } else {
                        tracing::warn!(origin, %field, %problem, "an operation is left out");
                    }
                    continue;
                }
            };
            let name = operation.tool.name.clone();
            if let Some(first) = taken.get(&name) {
                faults.push(error(
                    &format!("{op_at}.operationId"),
                    format!("the tool name \"{name}\" is already taken by {first}"),
                    "give each operation its own operationId",
                ));
                continue;
            }
            taken.insert(name, op_at);
            operations.push(operation);
        }
    }
    (operations, seen_ids)
}

/// Why one operation could not be built.
enum Fault {
    /// The document is wrong (a remote reference, a malformed parameter, a tool past its
    /// bound).
    Declaration(DeclarationError),
    /// The document is past a bound of the whole document: nothing more of it is read.
    Exhausted(DeclarationError),
    /// The document is fine, but the operation needs what a tool here cannot send.
    Unsupported { field: String, problem: String },
}

impl From<DeclarationError> for Fault {
    fn from(fault: DeclarationError) -> Self {
        Self::Declaration(fault)
    }
}

/// Builds the operation `method path` at `at`, with the path item's `shared` parameters,
/// resolving through `resolver` only what the tool takes.
fn build<'d>(
    resolver: &mut Resolver<'d>,
    path: &str,
    (method, verb): (&str, &reqwest::Method),
    op: &'d Value,
    shared: Option<&'d Value>,
    at: &str,
) -> Result<Operation, Fault> {
    let name = tool_name(op.get("operationId").and_then(Value::as_str), method, path);
    let description = [op.get("summary"), op.get("description")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");

    let declared = declared(resolver, path, op, shared, at)?;
    let mut input = Input::default();
    let parameters = parameters(resolver, path, declared, &mut input)?;
    placeholders(resolver.origin, path, at, &parameters)?;
    let body = request_body(resolver, op, at, &mut input)?;
    Ok(Operation {
        tool: SourceTool {
            name,
            description: (!description.is_empty()).then_some(description),
            input_schema: crate::sources::closed_object(input.properties, input.required),
        },
        method: verb.clone(),
        path: path.to_owned(),
        parameters,
        body,
    })
}

/// A parameter as written (a reference, perhaps), the object it stands for, and where it is.
type Entry<'d> = (&'d Value, &'d Value, String);

/// The arguments a tool takes, as its input schema will list them.
#[derive(Default)]
struct Input {
    properties: Map<String, Value>,
    required: Vec<Value>,
}

/// The operation's parameters by name and location, each overriding the path item's
/// `shared` one of the same name and location.
fn declared<'d>(
    resolver: &mut Resolver<'d>,
    path: &str,
    op: &'d Value,
    shared: Option<&'d Value>,
    at: &str,
) -> Result<BTreeMap<(String, String), Entry<'d>>, Fault> {
    let origin = resolver.origin;
    let mut declared: BTreeMap<(String, String), Entry<'d>> = BTreeMap::new();
    for (source, list) in [
        (format!("{at}.parameters"), op.get("parameters")),
        (format!("paths.{path}.parameters"), shared),
    ] {
        let Some(list) = list.and_then(Value::as_array) else {
            continue;
        };
        for (i, written) in list.iter().enumerate() {
            let field = format!("{source}[{i}]");
            let parameter = resolver.target(written, &field)?;
            let name = parameter.get("name").and_then(Value::as_str);
            let location = parameter.get("in").and_then(Value::as_str);
            let (Some(name), Some(location)) = (name, location) else {
                return Err(DeclarationError::new(
                    origin,
                    field,
                    "the parameter has no `name` or no `in`",
                    "give every parameter a `name` and an `in` (path, query, header or cookie)",
                )
                .into());
            };
            declared
                .entry((name.to_owned(), location.to_owned()))
                .or_insert((written, parameter, field));
        }
    }
    Ok(declared)
}

/// Each declared parameter placed (path, query or header; a framing, credential or routing
/// header left out) with its schema resolved into `input`.
fn parameters<'d>(
    resolver: &mut Resolver<'d>,
    path: &str,
    declared: BTreeMap<(String, String), Entry<'d>>,
    input: &mut Input,
) -> Result<Vec<Parameter>, Fault> {
    let origin = resolver.origin;
    let mut parameters = Vec::new();
    for ((name, location), (written, parameter, field)) in declared {
        let must =
            parameter.get("required").and_then(Value::as_bool) == Some(true) || location == "path";
        let location = match location.as_str() {
            "path" => Location::Path,
            "query" => Location::Query,
            // OpenAPI ignores Accept, Content-Type and Authorization parameters; the host also
            // keeps the request's framing, credentials and routing out of a model's hands.
            "header" if !crate::config::caller_may_set_header(&name) => continue,
            "header" => Location::Header,
            "cookie" if !must => continue,
            "cookie" => {
                return Err(Fault::Unsupported {
                    field,
                    problem: format!("the required cookie parameter \"{name}\" cannot be sent"),
                });
            }
            other => {
                return Err(DeclarationError::new(
                    origin,
                    format!("{field}.in"),
                    format!("\"{other}\" is not a parameter location"),
                    "write path, query, header or cookie",
                )
                .into());
            }
        };
        if location == Location::Path && !path.contains(&format!("{{{name}}}")) {
            return Err(DeclarationError::new(
                origin,
                format!("{field}.name"),
                format!("the path parameter \"{name}\" is not in the path template {path}"),
                "name path parameters as the template's {placeholders} do",
            )
            .into());
        }
        let mut schema = match parameter_schema(parameter) {
            Some((schema, schema_at)) => {
                resolver.resolve(schema, &format!("{field}.{schema_at}"))?
            }
            None => json!({}),
        };
        // A description beside a reference (OpenAPI 3.1) wins over the parameter's own.
        let text = written
            .get("description")
            .or_else(|| parameter.get("description"));
        if let (Some(text), Some(schema)) = (text, schema.as_object_mut()) {
            schema.entry("description").or_insert_with(|| text.clone());
        }
        if input.properties.insert(name.clone(), schema).is_some() {
            return Err(Fault::Unsupported {
                field,
                problem: format!(
                    "two parameters are named \"{name}\", so one argument cannot tell them apart"
                ),
            });
        }
        if must {
            input.required.push(Value::String(name.clone()));
        }
        parameters.push(Parameter {
            name,
            location,
            required: if must { Required::Yes } else { Required::No },
        });
    }
    Ok(parameters)
}

/// Every `{placeholder}` of the path template declared as a path parameter.
fn placeholders(origin: &str, path: &str, at: &str, parameters: &[Parameter]) -> Result<(), Fault> {
    let mut rest = path;
    while let Some((_, after)) = rest.split_once('{') {
        let Some((placeholder, after)) = after.split_once('}') else {
            break;
        };
        if !parameters
            .iter()
            .any(|p| p.location == Location::Path && p.name == placeholder)
        {
            return Err(DeclarationError::new(
                origin,
                format!("{at}.parameters"),
                format!("the path template {path} names {{{placeholder}}}, which no path parameter declares"),
                "declare a parameter with \"in\": \"path\" for every placeholder",
            )
            .into());
        }
        rest = after;
    }
    Ok(())
}

/// The JSON request body, the `body` argument, when the operation takes one.
fn request_body<'d>(
    resolver: &mut Resolver<'d>,
    op: &'d Value,
    at: &str,
    input: &mut Input,
) -> Result<Option<Required>, Fault> {
    Ok(match op.get("requestBody") {
        None => None,
        Some(request) => {
            let body_at = format!("{at}.requestBody");
            let request = resolver.target(request, &body_at)?;
            let must = request.get("required").and_then(Value::as_bool) == Some(true);
            match json_schema(request.get("content")) {
                Some((schema, media)) => {
                    let schema = match schema {
                        Some(schema) => resolver
                            .resolve(schema, &format!("{body_at}.content.{media}.schema"))?,
                        None => json!({}),
                    };
                    if input.properties.insert("body".to_owned(), schema).is_some() {
                        return Err(Fault::Unsupported {
                            field: body_at,
                            problem:
                                "a parameter is named \"body\", the argument the request body takes"
                                    .into(),
                        });
                    }
                    if must {
                        input.required.push(Value::String("body".to_owned()));
                    }
                    Some(if must { Required::Yes } else { Required::No })
                }
                None if must => {
                    return Err(Fault::Unsupported {
                        field: body_at,
                        problem:
                            "the required request body is not JSON, and only JSON bodies are sent"
                                .into(),
                    });
                }
                None => None,
            }
        }
    })
}

/// A parameter's schema and where it is: its `schema`, or the schema of its one `content`
/// entry.
fn parameter_schema(parameter: &Value) -> Option<(&Value, String)> {
    if let Some(schema) = parameter.get("schema") {
        return Some((schema, "schema".to_owned()));
    }
    let (media, entry) = parameter.get("content")?.as_object()?.iter().next()?;
    Some((entry.get("schema")?, format!("content.{media}.schema")))
}

/// The JSON entry of a `content` map (`application/json` or any `+json`): its schema, if it
/// has one, and its media type.
fn json_schema(content: Option<&Value>) -> Option<(Option<&Value>, &str)> {
    let content = content?.as_object()?;
    content
        .iter()
        .find(|(media, _)| is_json_media(media))
        .map(|(media, entry)| (entry.get("schema"), media.as_str()))
}

/// Whether a media type (or a `Content-Type` header) is JSON.
pub(super) fn is_json_media(media: &str) -> bool {
    let essence = media
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// The tool name of an operation: its `operationId`, or `<method>_<path>`, reduced to
/// `[A-Za-z0-9_.-]` (anything else becomes `_`) and cut at 64 characters.
pub(super) fn tool_name(operation_id: Option<&str>, method: &str, path: &str) -> String {
    let sanitized = |s: &str| {
        let mut out = String::new();
        for c in s.chars() {
            let c = if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            };
            // Runs of replaced characters read as one separator.
            if !(c == '_' && out.ends_with('_')) {
                out.push(c);
            }
        }
        out.trim_matches('_')
            .chars()
            .take(MAX_TOOL_NAME)
            .collect::<String>()
    };
    let from_id = operation_id.map(sanitized).unwrap_or_default();
    if !from_id.is_empty() {
        return from_id;
    }
    let from_path = sanitized(&format!("{method}_{path}"));
    if from_path.is_empty() {
        method.to_owned()
    } else {
        from_path
    }
}

/// Resolves local `$ref`s against the document, counting what it produces against the
/// bounds.
struct Resolver<'d> {
    /// The whole document, which `#/...` pointers index.
    root: &'d Value,
    /// The document's file or URL, for errors.
    origin: &'d str,
    /// The bounds of one tool and of the whole document.
    bounds: Bounds,
    /// How many values resolving has produced so far.
    produced: usize,
    /// How many bytes resolving has produced so far, tools refused included: the work done.
    catalog: usize,
    /// How many bytes the tool being built has taken so far.
    tool: usize,
    /// The JSON path of the operation whose tool is being built, for errors.
    operation: String,
}

impl<'d> Resolver<'d> {
    /// Starts counting the tool of the operation at `at`.
    fn begin(&mut self, at: &str) {
        self.tool = 0;
        self.operation = at.to_owned();
    }

    /// The object `value` stands for: `value` itself, or what its chain of references points
    /// to. Nothing is copied; a path item, a parameter or a request body is read where it is.
    fn target(&self, value: &'d Value, at: &str) -> Result<&'d Value, DeclarationError> {
        let mut value = value;
        let mut field = at.to_owned();
        let mut seen: Vec<&str> = Vec::new();
        while let Some(Value::String(reference)) = value.get("$ref") {
            if seen.contains(&reference.as_str()) {
                return Err(DeclarationError::new(
                    self.origin,
                    format!("{field}.$ref"),
                    format!("{reference:?} refers, through other references, back to itself"),
                    "point the reference at a definition, not at another reference to it",
                ));
            }
            if seen.len() >= MAX_REF_DEPTH {
                return Err(self.too_deep(&field));
            }
            seen.push(reference);
            value = self.pointee(reference, &field)?;
            field = pointer_path(reference);
        }
        Ok(value)
    }

    /// `value` (at the JSON path `at`) with every local reference replaced by what it
    /// points to. A reference back into one being resolved is cut to `{}` (any value).
    fn resolve(&mut self, value: &Value, at: &str) -> Result<Value, Fault> {
        self.resolve_in(value, at, &mut Vec::new())
    }

    fn resolve_in(
        &mut self,
        value: &Value,
        at: &str,
        open: &mut Vec<String>,
    ) -> Result<Value, Fault> {
        if let Value::Object(object) = value
            && let Some(Value::String(reference)) = object.get("$ref")
        {
            return self.follow(object, reference, at, open);
        }
        // Counted before anything is copied: a long string past the bound is never cloned.
        self.charge(own_bytes(value))?;
        match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.resolve_in(item, &format!("{at}[{i}]"), open))
                .collect::<Result<_, _>>()
                .map(Value::Array),
            Value::Object(object) => object
                .iter()
                .map(|(key, item)| {
                    Ok((
                        key.clone(),
                        self.resolve_in(item, &format!("{at}.{key}"), open)?,
                    ))
                })
                .collect::<Result<_, _>>()
                .map(Value::Object),
            scalar => Ok(scalar.clone()),
        }
    }

    /// The target of `reference` (written in `object` at `at`), with `object`'s other
    /// members (OpenAPI 3.1 allows a `description` beside a `$ref`) laid over it.
    fn follow(
        &mut self,
        object: &Map<String, Value>,
        reference: &str,
        at: &str,
        open: &mut Vec<String>,
    ) -> Result<Value, Fault> {
        if open.iter().any(|r| r == reference) {
            self.charge(2)?;
            return Ok(json!({}));
        }
        if open.len() >= MAX_REF_DEPTH {
            return Err(self.too_deep(at).into());
        }
        let target = self.pointee(reference, at)?;
        open.push(reference.to_owned());
        let resolved = self.resolve_in(target, &pointer_path(reference), open);
        open.pop();
        let mut resolved = resolved?;
        if let Value::Object(target) = &mut resolved {
            for (key, item) in object {
                if key != "$ref" {
                    self.charge(quoted_len(key) + 2)?;
                    let item = self.resolve_in(item, &format!("{at}.{key}"), open)?;
                    target.insert(key.clone(), item);
                }
            }
        }
        Ok(resolved)
    }

    /// What the local `reference`, written at `at`, points to.
    fn pointee(&self, reference: &str, at: &str) -> Result<&'d Value, DeclarationError> {
        let field = format!("{at}.$ref");
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(DeclarationError::new(
                self.origin,
                field,
                format!(
                    "{reference:?} refers outside the document, and remote references are never fetched"
                ),
                "copy what it refers to into the document's components and refer to it as #/components/...",
            ));
        };
        self.root.pointer(pointer).ok_or_else(|| {
            DeclarationError::new(
                self.origin,
                field,
                format!("{reference:?} points at nothing in the document"),
                "refer to a definition that exists, such as #/components/schemas/Pet",
            )
        })
    }

    fn too_deep(&self, at: &str) -> DeclarationError {
        DeclarationError::new(
            self.origin,
            format!("{at}.$ref"),
            format!("references nest more than {MAX_REF_DEPTH} deep"),
            "flatten the chain of references",
        )
    }

    /// Counts `bytes` (and one value) produced for the tool being built, refusing the tool
    /// past its bound and the document past its own.
    fn charge(&mut self, bytes: usize) -> Result<(), Fault> {
        self.produced += 1;
        self.catalog = self.catalog.saturating_add(bytes);
        self.tool = self.tool.saturating_add(bytes);
        if self.produced > MAX_RESOLVED_VALUES {
            return Err(Fault::Exhausted(DeclarationError::new(
                self.origin,
                &self.operation,
                format!("resolving references produced more than {MAX_RESOLVED_VALUES} values"),
                "simplify the document's references, or list fewer `operations`",
            )));
        }
        if self.catalog > self.bounds.catalog_bytes {
            return Err(Fault::Exhausted(self.catalog_fault()));
        }
        if self.tool > self.bounds.tool_bytes {
            return Err(self.tool_fault().into());
        }
        Ok(())
    }

    /// `operation`, if the tool it offers, written out exactly, fits the bounds; the running
    /// count only stops runaway resolving early, this one is exact.
    fn written(&mut self, operation: Operation) -> Result<Operation, Fault> {
        let tool = &operation.tool;
        let mut count = Count(0);
        serde_json::to_writer(&mut count, &tool.input_schema).map_err(|_| self.tool_fault())?;
        let bytes =
            count.0 + quoted_len(&tool.name) + tool.description.as_deref().map_or(0, quoted_len);
        if bytes > self.bounds.tool_bytes {
            return Err(self.tool_fault().into());
        }
        // The exact size replaces the running estimate of this tool in the document's count.
        self.catalog = self.catalog.saturating_sub(self.tool).saturating_add(bytes);
        if self.catalog > self.bounds.catalog_bytes {
            return Err(Fault::Exhausted(self.catalog_fault()));
        }
        Ok(operation)
    }

    fn tool_fault(&self) -> DeclarationError {
        DeclarationError::new(
            self.origin,
            &self.operation,
            format!(
                "the operation's tool, its references resolved, is larger than {} bytes (maxToolBytes)",
                self.bounds.tool_bytes
            ),
            "raise `maxToolBytes` in the declaration if the document is trusted, or name the operations to offer in `operations` without this one",
        )
    }

    fn catalog_fault(&self) -> DeclarationError {
        DeclarationError::new(
            self.origin,
            &self.operation,
            format!(
                "the document's tools, their references resolved, come to more than {} bytes (maxCatalogBytes); nothing more of it was read",
                self.bounds.catalog_bytes
            ),
            "raise `maxCatalogBytes` in the declaration if the document is trusted, or name fewer operations in `operations`",
        )
    }
}

/// The JSON path of a local reference's target, for errors (`#/components/schemas/Pet` →
/// `components.schemas.Pet`).
fn pointer_path(reference: &str) -> String {
    reference
        .trim_start_matches('#')
        .trim_start_matches('/')
        .replace('/', ".")
}

/// The bytes `value` itself takes in JSON, without what it holds: a scalar whole, an array's
/// brackets and commas, an object's braces, keys, colons and commas.
fn own_bytes(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number.to_string().len(),
        Value::String(text) => quoted_len(text),
        Value::Array(items) => 2 + items.len().saturating_sub(1),
        Value::Object(object) => {
            2 + object.len().saturating_sub(1)
                + object.keys().map(|key| quoted_len(key) + 1).sum::<usize>()
        }
    }
}

/// The length of `text` as a JSON string, quotes and escapes included (as serde_json writes
/// it).
fn quoted_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// A writer that only counts.
struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
