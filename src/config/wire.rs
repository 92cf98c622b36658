//! The wire shapes: [`McpServerDefinition`], the normalized durable definition, and [`McpServerOptions`], the closed supplement that add and customized enable accept.
//!
//! Both are plain serde types whose JSON Schemas are generated from them
//! (`schema/*.schema.json` in the repository). They hold the unexpanded text
//! exactly, credentials included (as their `${NAME}` references), so that what
//! is stored reads back equal; their `Debug` never prints a value that could be
//! a secret.
//!
//! Reading them from untrusted JSON goes through [`McpServerDefinition::from_json`]
//! and [`McpServerOptions::from_json`], whose faults name the field and never
//! quote a value (serde's own messages do). Turning a wire definition into a
//! [`ServerDefinition`] runs the same checks as the environment, and requires
//! every credential to be one `${NAME}` reference.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::authorization::{
    Authorization, ClientCredentials, OAuthAuthorization, WorkloadIdentity,
};
use super::check::SettingNames;
use super::definition::{DefinitionParts, ServerDefinition};
use super::environment::is_single_reference;
use super::error::{ConfigError, ConfigErrors};
use super::json;
use super::sandbox::SandboxPolicy;
use super::secret::{Bare, Secret};
use super::shape;
use super::target;
use super::target::TransportKind;
use super::transport::{HttpDefinition, RedactedValues, StdioDefinition, Transport};

/// The normalized, unexpanded MCP server definition: a closed union on `transport`.
///
/// `tools` absent enables every tool the server lists and `[]` enables none;
/// `read` is a subset of the enabled tools. Credentials are each one `${NAME}`
/// reference to a service environment variable; other strings may hold
/// `${NAME}` references, expanded only while a connection is prepared.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum McpServerDefinition {
    /// A child process speaking MCP on its standard input and output.
    Stdio(McpStdioDefinition),
    /// A Streamable HTTP endpoint.
    Http(McpHttpDefinition),
    /// A command-line program whose declared subcommands are its tools.
    Cli(McpSourceDefinition),
    /// A script whose header declares its parameters.
    Script(McpSourceDefinition),
    /// An OpenAPI 3.x document: one tool per operation.
    #[serde(rename = "openapi")]
    OpenApi(McpSourceDefinition),
}

/// A tool source's definition: its declaration (read by its kind's reader, see the README's
/// "Tool sources") and the same tool policy and summaries as a server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpSourceDefinition {
    /// The source alias, `[a-z][a-z0-9-]*`.
    pub name: String,
    /// The declaration: the fields of its kind.
    pub declaration: Value,
    /// The exact tool names enabled; absent enables every listed tool, `[]` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The enabled tools classified read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// An authored one-line orientation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Authored one-line tool orientations, by tool summary key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_summaries: BTreeMap<String, String>,
}

impl std::fmt::Debug for McpSourceDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSourceDefinition")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

/// A stdio server definition.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpStdioDefinition {
    /// The server alias, `[a-z][a-z0-9-]*`.
    pub name: String,
    /// One exact executable, never split on white space or run through a shell.
    pub command: String,
    /// The argument array.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables added to the child's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The sandbox it runs in; absent takes the host-wide policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxPolicy>,
    /// The exact tool names enabled; absent enables every listed tool, `[]` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The enabled tools classified read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// An authored one-line server orientation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Authored one-line tool orientations, by tool summary key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_summaries: BTreeMap<String, String>,
}

/// A Streamable HTTP server definition.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpHttpDefinition {
    /// The server alias, `[a-z][a-z0-9-]*`.
    pub name: String,
    /// The absolute `http://` or `https://` endpoint.
    pub url: String,
    /// Supplementary request headers; no `Authorization` entry when `authorization` is set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How requests are authorized; absent sends no credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<McpAuthorization>,
    /// The exact tool names enabled; absent enables every listed tool, `[]` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The enabled tools classified read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// An authored one-line server orientation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Authored one-line tool orientations, by tool summary key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_summaries: BTreeMap<String, String>,
}

/// The authorization of an HTTP server: a closed union on `type`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum McpAuthorization {
    /// `Authorization: Bearer <token>` on every request.
    Bearer {
        /// One `${NAME}` reference to the credential.
        token: String,
    },
    /// Interactive OAuth: CIMD (`clientMetadataUrl`), pre-registered
    /// (`clientId` and `clientSecret`), or neither for dynamic client registration.
    #[serde(rename = "oauth")]
    OAuth {
        /// Where the authorization server sends the user back; absent, the server is
        /// authorized through the device grant only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        redirect_url: Option<String>,
        /// The client ID metadata document URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_metadata_url: Option<String>,
        /// A pre-registered client identifier.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        /// One `${NAME}` reference to the pre-registered client's secret.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
        /// The scope to request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// The OAuth client-credentials grant.
    ClientCredentials {
        /// The client identifier.
        client_id: String,
        /// One `${NAME}` reference to the client secret.
        client_secret: String,
        /// The scope to request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// The authorization server the credential is bound to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
    /// A workload's identity token exchanged with the JWT-bearer grant (RFC 7523).
    WorkloadIdentity {
        /// One `${NAME}` reference to the identity token (a JWT).
        assertion: String,
        /// The client identifier the authorization server knows the workload by.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        /// The scope to request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// The authorization server the token may be sent to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
}

/// The closed supplement to a definition that add and customized enable accept.
///
/// Each field given replaces the definition's (arrays and maps replace, never
/// merge); it cannot repeat the alias, target or transport. `args`, `cwd` and
/// `env` apply only to stdio servers, `headers` and `authorization` only to
/// http servers.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerOptions {
    /// stdio: the argument array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// stdio: the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// stdio: variables added to the child's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: the sandbox it runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxPolicy>,
    /// http: supplementary request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// http: how requests are authorized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<McpAuthorization>,
    /// The exact tool names enabled; `[]` enables none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The enabled tools classified read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
}

const DEFINITION_SCHEMA: &str =
    "an McpServerDefinition object (see schema/McpServerDefinition.schema.json)";
const OPTIONS_SCHEMA: &str = "an McpServerOptions object (see schema/McpServerOptions.schema.json)";

impl McpServerDefinition {
    /// Reads a definition from JSON text. Faults name the field (`github.args`)
    /// and never quote a value. The result is well-shaped, not yet validated:
    /// convert it with [`ServerDefinition::try_from`].
    ///
    /// # Errors
    ///
    /// Invalid JSON, or every field that does not fit the closed shape.
    pub fn from_json(raw: &str) -> Result<Self, ConfigErrors> {
        let value = json::parse("the definition", raw, DEFINITION_SCHEMA)?;
        Self::from_value(&value)
    }

    /// Reads a definition from a JSON value; see [`from_json`](Self::from_json).
    ///
    /// # Errors
    ///
    /// Every field that does not fit the closed shape.
    pub fn from_value(value: &Value) -> Result<Self, ConfigErrors> {
        let prefix = shape::definition_prefix(value);
        ConfigErrors::check(shape::check_definition(value, &prefix))?;
        serde_json::from_value(value.clone()).map_err(|_| {
            ConfigErrors::from(ConfigError::WrongJsonShape {
                variable: prefix,
                expected: DEFINITION_SCHEMA,
                found: "it does not match that schema".to_owned(),
            })
        })
    }

    /// The server alias.
    pub fn name(&self) -> &str {
        match self {
            Self::Stdio(stdio) => &stdio.name,
            Self::Http(http) => &http.name,
            Self::Cli(source) | Self::Script(source) | Self::OpenApi(source) => &source.name,
        }
    }

    /// Which transport it uses.
    pub fn transport(&self) -> TransportKind {
        match self {
            Self::Stdio(_) => TransportKind::Stdio,
            Self::Http(_) => TransportKind::Http,
            Self::Cli(_) => TransportKind::Cli,
            Self::Script(_) => TransportKind::Script,
            Self::OpenApi(_) => TransportKind::OpenApi,
        }
    }

    /// The JSON Schema generated from this type.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(Self)
    }
}

impl McpServerOptions {
    /// Reads options from JSON text. Faults name the option (`options.args`)
    /// and never quote a value; a field that repeats the alias, target or
    /// transport is refused with a fault saying so.
    ///
    /// # Errors
    ///
    /// Invalid JSON, or every field that does not fit the closed shape.
    pub fn from_json(raw: &str) -> Result<Self, ConfigErrors> {
        let value = json::parse("options", raw, OPTIONS_SCHEMA)?;
        Self::from_value(&value)
    }

    /// Reads options from a JSON value; see [`from_json`](Self::from_json).
    ///
    /// # Errors
    ///
    /// Every field that does not fit the closed shape.
    pub fn from_value(value: &Value) -> Result<Self, ConfigErrors> {
        ConfigErrors::check(shape::check_options(value, OPTIONS))?;
        serde_json::from_value(value.clone()).map_err(|_| {
            ConfigErrors::from(ConfigError::WrongJsonShape {
                variable: OPTIONS.to_owned(),
                expected: OPTIONS_SCHEMA,
                found: "it does not match that schema".to_owned(),
            })
        })
    }

    /// Whether it sets nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The JSON Schema generated from this type.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(Self)
    }
}

/// How options name themselves in faults: `options.args`, ...
pub(crate) const OPTIONS: &str = "options";

const AUTHORIZATION_SCHEMA: &str = "an McpAuthorization object, such as {\"type\": \"oauth\", \
                                    \"redirectUrl\": \"http://127.0.0.1:3000/callback\"} (see \
                                    schema/McpServerDefinition.schema.json)";

impl McpAuthorization {
    /// Reads the union from the JSON text `variable` holds (the
    /// `PLURNK_MCP_<server>_AUTHORIZATION` companion): its shape is checked field by field
    /// before serde sees it, so no fault quotes a value, and each fault names
    /// `<variable>.<field>`. With it, the JSON as written, for checks of its strings.
    pub(crate) fn from_variable(
        variable: &str,
        raw: &str,
        faults: &mut Vec<ConfigError>,
    ) -> Option<(Self, Value)> {
        let value = match json::parse(variable, raw, AUTHORIZATION_SCHEMA) {
            Ok(value) => value,
            Err(fault) => {
                faults.push(fault);
                return None;
            }
        };
        let mut found = shape::check_authorization(&value, variable);
        if !found.is_empty() {
            faults.append(&mut found);
            return None;
        }
        match serde_json::from_value(value.clone()) {
            Ok(authorization) => Some((authorization, value)),
            Err(_) => {
                faults.push(ConfigError::WrongJsonShape {
                    variable: variable.to_owned(),
                    expected: AUTHORIZATION_SCHEMA,
                    found: "it does not match that schema".to_owned(),
                });
                None
            }
        }
    }
}

// === conversions ===

impl From<&Authorization> for McpAuthorization {
    fn from(authorization: &Authorization) -> Self {
        match authorization {
            Authorization::Bearer { token } => Self::Bearer {
                token: token.unexpanded().to_owned(),
            },
            Authorization::OAuth(oauth) => Self::OAuth {
                redirect_url: oauth.redirect_url.clone(),
                client_metadata_url: oauth.client_metadata_url.clone(),
                client_id: oauth.client_id.clone(),
                client_secret: oauth
                    .client_secret
                    .as_ref()
                    .map(|secret| secret.unexpanded().to_owned()),
                scope: oauth.scope.clone(),
            },
            Authorization::ClientCredentials(grant) => Self::ClientCredentials {
                client_id: grant.client_id.clone(),
                client_secret: grant.client_secret.unexpanded().to_owned(),
                scope: grant.scope.clone(),
                issuer: grant.issuer.clone(),
            },
            Authorization::WorkloadIdentity(grant) => Self::WorkloadIdentity {
                assertion: grant.assertion.unexpanded().to_owned(),
                client_id: grant.client_id.clone(),
                scope: grant.scope.clone(),
                issuer: grant.issuer.clone(),
            },
        }
    }
}

impl From<&McpAuthorization> for Authorization {
    /// Unchecked: the definition holding it is validated as a whole.
    fn from(authorization: &McpAuthorization) -> Self {
        match authorization.clone() {
            McpAuthorization::Bearer { token } => Self::Bearer {
                token: Secret::new(token),
            },
            McpAuthorization::OAuth {
                redirect_url,
                client_metadata_url,
                client_id,
                client_secret,
                scope,
            } => Self::OAuth(OAuthAuthorization {
                redirect_url,
                client_metadata_url,
                client_id,
                client_secret: client_secret.map(Secret::new),
                scope,
            }),
            McpAuthorization::ClientCredentials {
                client_id,
                client_secret,
                scope,
                issuer,
            } => Self::ClientCredentials(ClientCredentials {
                client_id,
                client_secret: Secret::new(client_secret),
                scope,
                issuer,
            }),
            McpAuthorization::WorkloadIdentity {
                assertion,
                client_id,
                scope,
                issuer,
            } => Self::WorkloadIdentity(WorkloadIdentity {
                assertion: Secret::new(assertion),
                client_id,
                scope,
                issuer,
            }),
        }
    }
}

impl TryFrom<&ServerDefinition> for McpServerDefinition {
    type Error = ConfigErrors;

    /// Lossless: every string unexpanded, exactly as held. An in-process server has no
    /// wire definition: the embedder registers it at start, nothing stores it.
    fn try_from(definition: &ServerDefinition) -> Result<Self, ConfigErrors> {
        let parts = definition.parts();
        Ok(match &parts.transport {
            Transport::Stdio(stdio) => Self::Stdio(McpStdioDefinition {
                name: parts.alias.clone(),
                command: stdio.command.clone(),
                args: stdio.args.clone(),
                cwd: stdio.cwd.clone(),
                env: stdio.env.clone(),
                sandbox: stdio.sandbox.clone(),
                tools: parts.tools.clone(),
                read: parts.read.clone(),
                summary: parts.summary.clone(),
                tool_summaries: parts.tool_summaries.clone(),
            }),
            Transport::Http(http) => Self::Http(McpHttpDefinition {
                name: parts.alias.clone(),
                url: http.url.clone(),
                headers: http.headers.clone(),
                authorization: http.authorization.as_ref().map(McpAuthorization::from),
                tools: parts.tools.clone(),
                read: parts.read.clone(),
                summary: parts.summary.clone(),
                tool_summaries: parts.tool_summaries.clone(),
            }),
            Transport::InProcess => {
                return Err(ConfigErrors::from(ConfigError::InProcessNotConfigurable {
                    variable: "the definition".to_owned(),
                    server: parts.alias.clone(),
                }));
            }
            Transport::Source(source) => {
                let wire = McpSourceDefinition {
                    name: parts.alias.clone(),
                    declaration: (*source.declaration).clone(),
                    tools: parts.tools.clone(),
                    read: parts.read.clone(),
                    summary: parts.summary.clone(),
                    tool_summaries: parts.tool_summaries.clone(),
                };
                match source.kind {
                    TransportKind::Cli => Self::Cli(wire),
                    TransportKind::Script => Self::Script(wire),
                    _ => Self::OpenApi(wire),
                }
            }
        })
    }
}

impl TryFrom<McpServerDefinition> for ServerDefinition {
    type Error = ConfigErrors;

    /// Validates a wire definition with the environment's checks; every
    /// credential must be one `${NAME}` reference. Faults name wire fields
    /// (`github.authorization.token`).
    fn try_from(wire: McpServerDefinition) -> Result<Self, ConfigErrors> {
        let kind = wire.transport();
        let (alias, transport, tools, read, summary, tool_summaries) = match wire {
            McpServerDefinition::Stdio(stdio) => (
                stdio.name,
                Transport::Stdio(StdioDefinition {
                    command: stdio.command,
                    args: stdio.args,
                    cwd: stdio.cwd,
                    env: stdio.env,
                    sandbox: stdio.sandbox,
                }),
                stdio.tools,
                stdio.read,
                stdio.summary,
                stdio.tool_summaries,
            ),
            McpServerDefinition::Http(http) => (
                http.name,
                Transport::Http(HttpDefinition {
                    url: http.url,
                    authorization: http.authorization.as_ref().map(Authorization::from),
                    headers: http.headers,
                }),
                http.tools,
                http.read,
                http.summary,
                http.tool_summaries,
            ),
            McpServerDefinition::Cli(source)
            | McpServerDefinition::Script(source)
            | McpServerDefinition::OpenApi(source) => {
                // Its reader reads the declaration when the source is opened.
                let origin = format!("the {kind} definition \"{}\"", source.name);
                (
                    source.name,
                    Transport::Source(super::transport::SourceDefinition {
                        kind,
                        declaration: std::sync::Arc::new(source.declaration),
                        origin,
                    }),
                    source.tools,
                    source.read,
                    source.summary,
                    source.tool_summaries,
                )
            }
        };
        let prefix = if super::keys::is_alias_syntax(&alias) {
            alias.clone()
        } else {
            "definition".to_owned()
        };
        let names = SettingNames::fields(&alias, &prefix, kind);
        let parts = DefinitionParts {
            alias,
            transport,
            tools,
            read,
            summary,
            tool_summaries,
        };
        ServerDefinition::validate(parts, &names, true)
    }
}

impl TryFrom<&McpServerDefinition> for ServerDefinition {
    type Error = ConfigErrors;

    fn try_from(wire: &McpServerDefinition) -> Result<Self, ConfigErrors> {
        Self::try_from(wire.clone())
    }
}

impl ServerDefinition {
    /// The durable wire form, refusing a definition that could not be read
    /// back: one whose bearer is a literal token rather than one `${NAME}`
    /// reference (which the service environment may hold, but which must never
    /// be stored).
    ///
    /// # Errors
    ///
    /// Each credential that is not one `${NAME}` reference, named by its
    /// canonical variable; the value is never quoted.
    pub fn to_durable(&self) -> Result<McpServerDefinition, ConfigErrors> {
        if let Transport::Http(HttpDefinition {
            authorization: Some(authorization),
            ..
        }) = self.transport()
        {
            let names = SettingNames::canonical(self.alias());
            let faults = authorization
                .credentials()
                .into_iter()
                .filter(|(_, secret)| !secret.is_reference())
                .map(|(field, _)| ConfigError::CredentialNotReference {
                    variable: names.authorization_field(authorization, field),
                })
                .collect();
            ConfigErrors::check(faults)?;
        }
        McpServerDefinition::try_from(self)
    }
}

// === printing without secrets ===

/// A credential as `Debug` shows it: the reference, or `<redacted>`.
struct Credential<'a>(&'a str);

impl fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_single_reference(self.0) {
            write!(f, "{:?}", self.0)
        } else {
            f.write_str("<redacted>")
        }
    }
}

impl fmt::Debug for McpServerDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio(stdio) => stdio.fmt(f),
            Self::Http(http) => http.fmt(f),
            Self::Cli(source) | Self::Script(source) | Self::OpenApi(source) => source.fmt(f),
        }
    }
}

impl fmt::Debug for McpStdioDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: Vec<&String> = self.env.keys().collect();
        f.debug_struct("McpStdioDefinition")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &RedactedValues(&env))
            .field("sandbox", &self.sandbox)
            .field("tools", &self.tools)
            .field("read", &self.read)
            .field("summary", &self.summary)
            .field("tool_summaries", &self.tool_summaries)
            .finish()
    }
}

impl fmt::Debug for McpHttpDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&String> = self.headers.keys().collect();
        f.debug_struct("McpHttpDefinition")
            .field("name", &self.name)
            .field("url", &Bare(&target::redact_url(&self.url)))
            .field("headers", &RedactedValues(&headers))
            .field("authorization", &self.authorization)
            .field("tools", &self.tools)
            .field("read", &self.read)
            .field("summary", &self.summary)
            .field("tool_summaries", &self.tool_summaries)
            .finish()
    }
}

impl fmt::Debug for McpAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bearer { token } => f
                .debug_struct("Bearer")
                .field("token", &Credential(token))
                .finish(),
            Self::OAuth {
                redirect_url,
                client_metadata_url,
                client_id,
                client_secret,
                scope,
            } => f
                .debug_struct("OAuth")
                .field("redirect_url", redirect_url)
                .field("client_metadata_url", client_metadata_url)
                .field("client_id", client_id)
                .field("client_secret", &client_secret.as_deref().map(Credential))
                .field("scope", scope)
                .finish(),
            Self::ClientCredentials {
                client_id,
                client_secret,
                scope,
                issuer,
            } => f
                .debug_struct("ClientCredentials")
                .field("client_id", client_id)
                .field("client_secret", &Credential(client_secret))
                .field("scope", scope)
                .field("issuer", issuer)
                .finish(),
            Self::WorkloadIdentity {
                assertion,
                client_id,
                scope,
                issuer,
            } => f
                .debug_struct("WorkloadIdentity")
                .field("assertion", &Credential(assertion))
                .field("client_id", client_id)
                .field("scope", scope)
                .field("issuer", issuer)
                .finish(),
        }
    }
}

impl fmt::Debug for McpServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: Option<Vec<&String>> = self.env.as_ref().map(|env| env.keys().collect());
        let headers: Option<Vec<&String>> = self
            .headers
            .as_ref()
            .map(|headers| headers.keys().collect());
        f.debug_struct("McpServerOptions")
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &env.as_deref().map(RedactedValues))
            .field("headers", &headers.as_deref().map(RedactedValues))
            .field("authorization", &self.authorization)
            .field("sandbox", &self.sandbox)
            .field("tools", &self.tools)
            .field("read", &self.read)
            .finish()
    }
}
