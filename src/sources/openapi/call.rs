//! Calling an opened OpenAPI source: a tool's arguments checked against its operation and
//! made into one request (path placeholders percent-encoded into one segment each, query
//! and header parameters, the JSON body; the declared headers and bearer winning over a
//! header parameter), sent within the deadline, and the answer read within its bound and
//! scrubbed.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use super::document::{self, Location, Operation, Required};
use super::{OpenApiSource, header};
use crate::protocol::{Bounded, describe, read_bounded};
use crate::sources::error::status_line;
use crate::sources::{CallFuture, SourceError, SourceResult, SourceTool, ToolSource};

impl OpenApiSource {
    /// The document's `info.version`, when it has one.
    pub fn document_version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The request `operation` makes with `arguments`, checked against its parameters.
    fn request(
        &self,
        operation: &Operation,
        mut arguments: Map<String, Value>,
    ) -> Result<reqwest::RequestBuilder, SourceError> {
        let invalid = SourceError::InvalidArguments;
        let known = |name: &str| {
            operation.parameters.iter().any(|p| p.name == name)
                || (name == "body" && operation.body.is_some())
        };
        if let Some(unknown) = arguments.keys().find(|name| !known(name)) {
            return Err(invalid(format!(
                "\"{unknown}\" is not a parameter of {}",
                operation.tool.name
            )));
        }
        for parameter in &operation.parameters {
            if parameter.required == Required::Yes
                && arguments.get(&parameter.name).is_none_or(Value::is_null)
            {
                return Err(invalid(format!(
                    "the required parameter \"{}\" is missing",
                    parameter.name
                )));
            }
        }
        if operation.body == Some(Required::Yes) && arguments.get("body").is_none_or(Value::is_null)
        {
            return Err(invalid(
                "the required parameter \"body\" is missing".to_owned(),
            ));
        }

        let mut path = String::new();
        let mut rest = operation.path.as_str();
        while let Some(start) = rest.find('{') {
            let Some(end) = rest[start..].find('}') else {
                break;
            };
            path.push_str(&rest[..start]);
            let name = &rest[start + 1..start + end];
            let value = arguments.get(name).map(scalar).transpose().map_err(|kind| {
                invalid(format!("the path parameter \"{name}\" must be a string, number or boolean, not {kind}"))
            })?;
            let value = value.unwrap_or_default();
            // `.` and `..` would be read as dot segments and move the request to another path.
            if value.is_empty() || value == "." || value == ".." {
                return Err(invalid(format!(
                    "the path parameter \"{name}\" cannot be {value:?}"
                )));
            }
            path.push_str(&percent_encode(&value));
            rest = &rest[start + end + 1..];
        }
        path.push_str(rest);
        let mut url = self.base_url.clone();
        let joined = format!("{}{}", url.path().trim_end_matches('/'), path);
        url.set_path(&joined);

        let mut headers = reqwest::header::HeaderMap::new();
        {
            let mut query = url.query_pairs_mut();
            for parameter in &operation.parameters {
                let Some(value) = arguments.get(&parameter.name).filter(|v| !v.is_null()) else {
                    continue;
                };
                match parameter.location {
                    Location::Path => {}
                    Location::Query => {
                        let values = match value {
                            Value::Array(items) => items.iter().map(scalar).collect::<Result<Vec<_>, _>>(),
                            other => scalar(other).map(|v| vec![v]),
                        }
                        .map_err(|kind| invalid(format!("the query parameter \"{}\" must be a scalar or an array of scalars, not {kind}", parameter.name)))?;
                        for value in values {
                            query.append_pair(&parameter.name, &value);
                        }
                    }
                    Location::Header => {
                        let value = scalar(value).map_err(|kind| {
                            invalid(format!("the header parameter \"{}\" must be a string, number or boolean, not {kind}", parameter.name))
                        })?;
                        let (name, value) = header(&parameter.name, &value).ok_or_else(|| {
                            invalid(format!("the header parameter \"{}\" holds a line break or control character", parameter.name))
                        })?;
                        headers.insert(name, value);
                    }
                }
            }
        }
        // An empty `?` reads as a different URL to some servers.
        if url.query() == Some("") {
            url.set_query(None);
        }
        // The declared headers and the bearer win over a header parameter of the same name.
        headers.extend(self.headers.clone());
        let mut request = self
            .client
            .request(operation.method.clone(), url)
            .headers(headers)
            .header(reqwest::header::ACCEPT, "application/json, */*;q=0.5");
        if let Some(body) = arguments.remove("body").filter(|v| !v.is_null()) {
            request = request.json(&body);
        }
        Ok(request)
    }

    /// Sends `request` and reads its answer within the bound.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<SourceResult, SourceError> {
        let response = request.send().await.map_err(|error| {
            SourceError::Unavailable(format!("{}: {}", self.name, describe(&error)))
        })?;
        let status = response.status();
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(document::is_json_media);
        let body = read_bounded(response, self.max_response_bytes)
            .await
            .map_err(|bound| match bound {
                Bounded::TooLarge => SourceError::OutputTooLarge {
                    limit: self.max_response_bytes,
                },
                Bounded::Failed(problem) => {
                    SourceError::Unavailable(format!("{}: {problem}", self.name))
                }
            })?;
        let body = String::from_utf8_lossy(&body);
        let mut structured = json
            .then(|| serde_json::from_str::<Value>(&body).ok())
            .flatten();
        if let Some(structured) = &mut structured {
            crate::redact::scrub_json(structured);
        }
        let body = crate::redact::scrub(&body);
        // A redirect that is still the answer is one to another origin, not followed.
        let is_error =
            status.is_client_error() || status.is_server_error() || status.is_redirection();
        let text = if status.is_redirection() {
            format!(
                "{}: a redirect to another origin was not followed",
                status_line(status)
            )
        } else if is_error {
            format!("{}: {body}", status_line(status))
        } else {
            body.into_owned()
        };
        Ok(SourceResult {
            text,
            structured,
            is_error,
        })
    }
}

impl ToolSource for OpenApiSource {
    fn tools(&self) -> Vec<SourceTool> {
        self.operations.values().map(|op| op.tool.clone()).collect()
    }

    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Map<String, Value>,
        deadline: Duration,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let operation = self
                .operations
                .get(tool)
                .ok_or_else(|| SourceError::UnknownTool(tool.to_owned()))?;
            let request = self.request(operation, arguments)?;
            if let Some(rule) = &self.rule {
                rule.judge(&self.base_url).await.map_err(|why| {
                    SourceError::Unavailable(format!("{}: the API's address: {why}", self.name))
                })?;
            }
            let deadline = deadline.min(self.timeout);
            tokio::time::timeout(deadline, self.send(request))
                .await
                .map_err(|_| SourceError::Timeout {
                    timeout_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
                })?
        })
    }
}

impl fmt::Debug for OpenApiSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenApiSource")
            .field("name", &self.name)
            .field(
                "base_url",
                &crate::config::redact_url(self.base_url.as_str()),
            )
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("tools", &self.operations.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A scalar argument as text; the JSON type's name when it is not a scalar.
fn scalar(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Err("null"),
        Value::Array(_) => Err("an array"),
        Value::Object(_) => Err("an object"),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a path parameter
/// stays one segment (`a/b` is `a%2Fb`).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
