//! Connection parameters with every `${NAME}` expanded: what a transport needs to connect, printed without a secret.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use super::authorization::{
    Authorization, ClientCredentials, OAuthAuthorization, PreparedAuthorization, WorkloadIdentity,
};
use super::check::SettingNames;
use super::definition::ServerDefinition;
use super::environment::Environment;
use super::error::ConfigError;
use super::keys::Suffix;
use super::literal::is_credential_name;
use super::secret::Bare;
use super::target;
use super::transport::{
    HttpDefinition, RedactedValues, SourceDefinition, StdioDefinition, Transport,
};

/// A server definition expanded against an environment, ready to connect.
///
/// It exists only while a connection is being prepared (secrets have one
/// owner: the operator environment), so never store or persist it. `Debug`
/// prints its shape, never an expanded value: every string that came out of
/// expansion may hold a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct PreparedServer {
    /// The server's name.
    pub alias: String,
    /// The expanded connection parameters.
    pub transport: PreparedTransport,
    /// An OAuth or client-credentials authorization with its secret expanded,
    /// for the connection to run the flow. `None` for no authorization and for
    /// a bearer, which is already an `Authorization` header in `transport`.
    pub authorization: Option<PreparedAuthorization>,
    /// The authored server summary, expanded.
    pub summary: Option<String>,
    /// Authored tool summaries, expanded, keyed by [`tool_summary_key`](super::tool_summary_key).
    pub tool_summaries: BTreeMap<String, String>,
    /// Every value that may be a credential, for the secret registry
    /// ([`crate::redact::register`]): what each `${NAME}` expanded to in the arguments,
    /// environment, headers, bearer, URL, client secrets and summaries; the URL's userinfo and
    /// query values; and whole values of credential-named headers and environment entries
    /// (`Authorization`, `*key*`, `*token*`, `*secret*`, `*password*`, `cookie`) even when
    /// written literally. The command, working directory and URL origin are not secrets.
    pub secrets: Vec<String>,
}

/// Expanded connection parameters.
#[derive(Clone, PartialEq, Eq)]
pub enum PreparedTransport {
    /// Spawn `command` with `args` (no shell), in `cwd`, with `env` added to the
    /// inherited environment.
    Stdio {
        /// The executable.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its working directory, when not the host's.
        cwd: Option<PathBuf>,
        /// Variables added to its environment.
        env: Vec<(String, String)>,
        /// Its own sandbox policy, paths expanded; the host-wide policy where `None`.
        sandbox: Option<super::SandboxPolicy>,
    },
    /// POST to `url` with `headers` on every request.
    Http {
        /// The endpoint.
        url: String,
        /// Configured headers, then `Authorization: Bearer <token>` when a bearer is configured.
        headers: Vec<(String, String)>,
    },
    /// Open the embedder's in-process connector registered for the alias.
    InProcess,
    /// Open this tool source (its declaration with every `${NAME}` expanded) and serve it
    /// in-process.
    Source {
        /// Its kind (`cli`, `script` or `openapi`).
        kind: super::TransportKind,
        /// The declaration, expanded.
        declaration: serde_json::Value,
        /// Where it was declared.
        origin: String,
    },
}

impl ServerDefinition {
    /// Expands every `${NAME}` (target, arguments, working directory,
    /// environment values, header values, bearer, summaries) against `env`.
    ///
    /// Stops at the first fault; [`check_references`](Self::check_references)
    /// reports them all. Faults name settings by their canonical variable.
    ///
    /// # Errors
    ///
    /// A malformed or missing reference, a target, working directory or bearer
    /// that expands to nothing, a URL that is no longer absolute, or a header
    /// value that gained a line break.
    pub fn prepare(&self, env: &Environment) -> Result<PreparedServer, ConfigError> {
        let names = SettingNames::canonical(self.alias());
        let mut secrets = Secrets::new(env);
        let mut authorization = None;
        let transport = match self.transport() {
            Transport::Stdio(stdio) => prepare_stdio(stdio, &names, env, &mut secrets)?,
            Transport::Http(http) => {
                let (transport, prepared) = prepare_http(http, &names, env, &mut secrets)?;
                authorization = prepared;
                transport
            }
            Transport::InProcess => PreparedTransport::InProcess,
            Transport::Source(source) => prepare_source(source, env, &mut secrets)?,
        };
        let summary = self
            .summary()
            .map(|summary| {
                secrets.referenced(summary);
                env.expand_setting(&names.companion(Suffix::Summary), summary)
            })
            .transpose()?;
        let tool_summaries = self
            .tool_summaries()
            .iter()
            .map(|(key, summary)| {
                secrets.referenced(summary);
                Ok((
                    key.clone(),
                    env.expand_setting(&names.tool_summary(key), summary)?,
                ))
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(PreparedServer {
            alias: self.alias().to_owned(),
            transport,
            authorization,
            summary,
            tool_summaries,
            secrets: secrets.into_values(),
        })
    }
}

/// A stdio server's command, arguments, working directory and environment, expanded.
fn prepare_stdio(
    stdio: &StdioDefinition,
    names: &SettingNames,
    env: &Environment,
    secrets: &mut Secrets<'_>,
) -> Result<PreparedTransport, ConfigError> {
    let command = non_empty(env, names.target(), &stdio.command)?;
    let args_variable = names.companion(Suffix::Args);
    let args = stdio
        .args
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            secrets.referenced(arg);
            env.expand_setting(&format!("{args_variable} element {}", i + 1), arg)
        })
        .collect::<Result<_, _>>()?;
    let cwd = stdio
        .cwd
        .as_deref()
        .map(|cwd| non_empty(env, &names.companion(Suffix::Cwd), cwd))
        .transpose()?
        .map(PathBuf::from);
    let env_variable = names.companion(Suffix::Env);
    let vars = stdio
        .env
        .iter()
        .map(|(name, value)| {
            let variable = format!("{env_variable} entry {name:?}");
            let expanded = env.expand_setting(&variable, value)?;
            secrets.referenced(value);
            secrets.named(name, &expanded);
            Ok((name.clone(), expanded))
        })
        .collect::<Result<_, ConfigError>>()?;
    let sandbox = stdio
        .sandbox
        .as_ref()
        .map(|policy| {
            policy.expand(&names.companion(Suffix::Sandbox), &|name, path| {
                env.expand_setting(name, path)
            })
        })
        .transpose()?;
    Ok(PreparedTransport::Stdio {
        command,
        args,
        cwd,
        env: vars,
        sandbox,
    })
}

/// An HTTP server's URL (still absolute once expanded) and headers, with its
/// authorization prepared: a bearer token becomes one more header.
fn prepare_http(
    http: &HttpDefinition,
    names: &SettingNames,
    env: &Environment,
    secrets: &mut Secrets<'_>,
) -> Result<(PreparedTransport, Option<PreparedAuthorization>), ConfigError> {
    let url = non_empty(env, names.target(), &http.url)?;
    secrets.referenced(&http.url);
    secrets.url(&url);
    if !target::is_absolute_http_url(&url) {
        return Err(ConfigError::NotAbsoluteUrl {
            variable: names.target().to_owned(),
        });
    }
    let headers_variable = names.companion(Suffix::Headers);
    let mut headers = http
        .headers
        .iter()
        .map(|(name, value)| {
            let variable = format!("{headers_variable} entry {name:?}");
            secrets.referenced(value);
            let value = env.expand_setting(&variable, value)?;
            secrets.named(name, &value);
            header_value(&headers_variable, name, value)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let authorization = prepare_authorization(
        http.authorization.as_ref(),
        names,
        env,
        secrets,
        &mut headers,
    )?;
    Ok((PreparedTransport::Http { url, headers }, authorization))
}

/// The authorization's secrets expanded: a bearer token pushed onto `headers`, any other
/// kind prepared for the OAuth client.
fn prepare_authorization(
    authorization: Option<&Authorization>,
    names: &SettingNames,
    env: &Environment,
    secrets: &mut Secrets<'_>,
    headers: &mut Vec<(String, String)>,
) -> Result<Option<PreparedAuthorization>, ConfigError> {
    Ok(match authorization {
        None => None,
        Some(Authorization::Bearer { token }) => {
            let variable = names.companion(Suffix::Bearer);
            let token = non_empty(env, &variable, token.unexpanded())?;
            secrets.value(&token);
            headers.push(header_value(
                &variable,
                "Authorization",
                format!("Bearer {token}"),
            )?);
            None
        }
        Some(other @ Authorization::OAuth(oauth)) => {
            let variable = names.authorization_field(other, "clientSecret");
            let prepared = prepare_oauth(env, &variable, oauth)?;
            if let PreparedAuthorization::OAuth {
                client_secret: Some(secret),
                ..
            } = &prepared
            {
                secrets.value(secret);
            }
            Some(prepared)
        }
        Some(other @ Authorization::ClientCredentials(grant)) => {
            let variable = names.authorization_field(other, "clientSecret");
            let prepared = prepare_client_credentials(env, &variable, grant)?;
            if let PreparedAuthorization::ClientCredentials { client_secret, .. } = &prepared {
                secrets.value(client_secret);
            }
            Some(prepared)
        }
        Some(other @ Authorization::WorkloadIdentity(grant)) => {
            let variable = names.authorization_field(other, "assertion");
            let prepared = prepare_workload_identity(env, &variable, grant)?;
            if let PreparedAuthorization::WorkloadIdentity { assertion, .. } = &prepared {
                secrets.value(assertion);
            }
            Some(prepared)
        }
    })
}

/// A tool source's declaration with every reference in its strings expanded.
fn prepare_source(
    source: &SourceDefinition,
    env: &Environment,
    secrets: &mut Secrets<'_>,
) -> Result<PreparedTransport, ConfigError> {
    let mut declaration = (*source.declaration).clone();
    let mut fault = None;
    super::each_string_mut(&mut declaration, &mut |path, text| {
        if fault.is_some() || !text.contains("${") {
            return;
        }
        secrets.referenced(text);
        match env.expand_setting(&format!("{}: {path}", source.origin), text) {
            Ok(expanded) => *text = expanded,
            Err(error) => fault = Some(error),
        }
    });
    if let Some(fault) = fault {
        return Err(fault);
    }
    Ok(PreparedTransport::Source {
        kind: source.kind,
        declaration,
        origin: source.origin.clone(),
    })
}

/// Collects the values [`PreparedServer::secrets`] lists while a definition is prepared.
struct Secrets<'a> {
    env: &'a Environment,
    values: std::collections::BTreeSet<String>,
}

impl<'a> Secrets<'a> {
    fn new(env: &'a Environment) -> Self {
        Self {
            env,
            values: std::collections::BTreeSet::new(),
        }
    }

    /// What each `${NAME}` in the unexpanded `s` stands for.
    fn referenced(&mut self, s: &str) {
        for piece in super::environment::pieces(s).unwrap_or_default() {
            if let super::environment::Piece::Reference(name) = piece
                && let Some(value) = self.env.get(name)
            {
                self.value(value);
            }
        }
    }

    /// A whole value, and for `Authorization`-style values also the credential after the
    /// scheme word.
    fn value(&mut self, value: &str) {
        if let Some((scheme, credential)) = value.split_once(' ')
            && !scheme.is_empty()
            && scheme.bytes().all(|b| b.is_ascii_alphabetic())
        {
            self.values.insert(credential.trim().to_owned());
        }
        self.values.insert(value.to_owned());
    }

    /// A header or environment entry: its whole value when its name says credential.
    fn named(&mut self, name: &str, value: &str) {
        if is_credential_name(name) {
            self.value(value);
        }
    }

    /// An expanded URL: its userinfo and every query value, as written and decoded.
    fn url(&mut self, url: &str) {
        let Some((_, rest)) = url.split_once("://") else {
            return;
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            for part in userinfo.split(':') {
                self.decoded(part);
            }
        }
        let after = &rest[authority_end..];
        let Some(query_start) = after.find('?') else {
            return;
        };
        let query = &after[query_start + 1..];
        let query = query.split('#').next().unwrap_or_default();
        self.decoded(query);
        for pair in query.split('&') {
            let value = pair.split_once('=').map_or(pair, |(_, value)| value);
            self.decoded(value);
        }
    }

    fn decoded(&mut self, raw: &str) {
        if raw.is_empty() {
            return;
        }
        self.values.insert(raw.to_owned());
        let decoded = percent_decode(raw);
        if decoded != raw {
            self.values.insert(decoded);
        }
    }

    fn into_values(self) -> Vec<String> {
        self.values.into_iter().collect()
    }
}

/// Decodes `%XX` escapes (and `+` as a space); malformed escapes stay as written.
fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, byte) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Expands the client secret of an OAuth authorization.
fn prepare_oauth(
    env: &Environment,
    variable: &str,
    oauth: &OAuthAuthorization,
) -> Result<PreparedAuthorization, ConfigError> {
    Ok(PreparedAuthorization::OAuth {
        redirect_url: oauth.redirect_url.clone(),
        client_metadata_url: oauth.client_metadata_url.clone(),
        client_id: oauth.client_id.clone(),
        client_secret: oauth
            .client_secret
            .as_ref()
            .map(|secret| non_empty(env, variable, secret.unexpanded()))
            .transpose()?,
        scope: oauth.scope.clone(),
    })
}

/// Expands the identity token of a workload-identity grant.
fn prepare_workload_identity(
    env: &Environment,
    variable: &str,
    grant: &WorkloadIdentity,
) -> Result<PreparedAuthorization, ConfigError> {
    Ok(PreparedAuthorization::WorkloadIdentity {
        assertion: non_empty(env, variable, grant.assertion.unexpanded())?,
        client_id: grant.client_id.clone(),
        scope: grant.scope.clone(),
        issuer: grant.issuer.clone(),
    })
}

/// Expands the client secret of a client-credentials grant.
fn prepare_client_credentials(
    env: &Environment,
    variable: &str,
    grant: &ClientCredentials,
) -> Result<PreparedAuthorization, ConfigError> {
    Ok(PreparedAuthorization::ClientCredentials {
        client_id: grant.client_id.clone(),
        client_secret: non_empty(env, variable, grant.client_secret.unexpanded())?,
        scope: grant.scope.clone(),
        issuer: grant.issuer.clone(),
    })
}

/// Expands `s`, which must not come out blank.
fn non_empty(env: &Environment, variable: &str, s: &str) -> Result<String, ConfigError> {
    let expanded = env.expand_setting(variable, s)?;
    if expanded.trim().is_empty() {
        return Err(ConfigError::EmptyExpansion {
            variable: variable.to_owned(),
        });
    }
    Ok(expanded)
}

/// An expanded header, refused when expansion brought in a line break: that
/// would let a variable's value inject further headers.
fn header_value(
    variable: &str,
    name: &str,
    value: String,
) -> Result<(String, String), ConfigError> {
    if !target::is_valid_header_value(&value) {
        return Err(ConfigError::InvalidHeaderValue {
            variable: variable.to_owned(),
            header: name.to_owned(),
        });
    }
    Ok((name.to_owned(), value))
}

impl fmt::Debug for PreparedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&String> = self.tool_summaries.keys().collect();
        f.debug_struct("PreparedServer")
            .field("alias", &self.alias)
            .field("transport", &self.transport)
            .field("authorization", &self.authorization)
            .field(
                "summary",
                &self.summary.as_ref().map(|_| Bare("<redacted>")),
            )
            .field("tool_summaries", &RedactedValues(&tools))
            .field(
                "secrets",
                &Bare(&format!("<{} redacted>", self.secrets.len())),
            )
            .finish()
    }
}

impl fmt::Debug for PreparedTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio {
                command: _,
                args,
                cwd,
                env,
                sandbox,
            } => {
                let names: Vec<&String> = env.iter().map(|(name, _)| name).collect();
                f.debug_struct("Stdio")
                    .field("command", &Bare("<redacted>"))
                    .field("args", &Bare(&format!("<{} redacted>", args.len())))
                    .field("cwd", &cwd.as_ref().map(|_| Bare("<redacted>")))
                    .field("env", &RedactedValues(&names))
                    .field("sandbox", &sandbox.is_some())
                    .finish()
            }
            Self::Http { url, headers } => {
                let names: Vec<&String> = headers.iter().map(|(name, _)| name).collect();
                f.debug_struct("Http")
                    .field("url", &target::redact_url(url))
                    .field("headers", &RedactedValues(&names))
                    .finish()
            }
            Self::InProcess => f.write_str("InProcess"),
            Self::Source { kind, origin, .. } => write!(f, "Source({kind}, {origin})"),
        }
    }
}
