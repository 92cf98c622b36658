//! Tests of `PLURNK_MCP_<server>_AUTHORIZATION`: a declared server's authorization, read by
//! the wire's own reader, and every fault of it as its own error naming the variable.

#[cfg(feature = "oauth")]
use serde_json::json;

use super::*;

fn load(vars: &[(&str, String)]) -> Result<HostConfig, ConfigErrors> {
    HostConfig::from_env(vars.iter().map(|(k, v)| (*k, v.clone())))
}

#[cfg(feature = "oauth")]
fn authorization(config: &HostConfig, alias: &str) -> Option<Authorization> {
    match config.server(alias).map(ServerDefinition::transport) {
        Some(Transport::Http(http)) => http.authorization.clone(),
        other => panic!("{alias} is not http: {other:?}"),
    }
}

/// A value that must never appear in an error, in any spelling.
#[cfg(feature = "oauth")]
const LEAK: &str = "tok-LEAK-7531";

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn a_declared_server_takes_every_kind_of_authorization_from_its_companion() {
    let url = "https://mcp.example/mcp".to_owned();
    let vars = [
        ("PLURNK_MCP_PERSON", url.clone()),
        (
            "PLURNK_MCP_PERSON_AUTHORIZATION",
            json!({"type": "oauth", "redirectUrl": "http://127.0.0.1:9/callback",
                   "clientId": "plurnk", "clientSecret": "${PERSON_SECRET}", "scope": "mcp"})
            .to_string(),
        ),
        ("PLURNK_MCP_MACHINE", url.clone()),
        (
            "PLURNK_MCP_MACHINE_AUTHORIZATION",
            json!({"type": "client-credentials", "clientId": "machine",
                   "clientSecret": "${MACHINE_SECRET}", "issuer": "https://as.example"})
            .to_string(),
        ),
        ("PLURNK_MCP_RUNNER", url.clone()),
        (
            "PLURNK_MCP_RUNNER_AUTHORIZATION",
            json!({"type": "workload-identity", "assertion": "${WORKLOAD_JWT}",
                   "clientId": "workload"})
            .to_string(),
        ),
        ("PLURNK_MCP_TOKEN", url.clone()),
        (
            "PLURNK_MCP_TOKEN_AUTHORIZATION",
            json!({"type": "bearer", "token": "${API_TOKEN}"}).to_string(),
        ),
        // The names are the operator's, like `_BEARER`'s: none is handed to workspaces.
        ("PERSON_SECRET", "person-secret-value".to_owned()),
        ("MACHINE_SECRET", "machine-secret-value".to_owned()),
        (
            "WORKLOAD_JWT",
            "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl".to_owned(),
        ),
        ("API_TOKEN", "api-token-value".to_owned()),
    ];
    let config = load(&vars).expect("a valid configuration");
    assert!(!config.allows_runtime_servers());
    assert!(config.workspace_env().is_empty());

    let Some(Authorization::OAuth(oauth)) = authorization(&config, "person") else {
        panic!("person is not oauth");
    };
    assert_eq!(
        oauth.redirect_url.as_deref(),
        Some("http://127.0.0.1:9/callback")
    );
    assert_eq!(oauth.client_id.as_deref(), Some("plurnk"));
    assert_eq!(
        oauth.client_secret.as_ref().map(Secret::unexpanded),
        Some("${PERSON_SECRET}")
    );
    assert_eq!(oauth.scope.as_deref(), Some("mcp"));
    let Some(Authorization::ClientCredentials(grant)) = authorization(&config, "machine") else {
        panic!("machine is not client-credentials");
    };
    assert_eq!(grant.client_id, "machine");
    assert_eq!(grant.issuer.as_deref(), Some("https://as.example"));
    let Some(Authorization::WorkloadIdentity(grant)) = authorization(&config, "runner") else {
        panic!("runner is not workload-identity");
    };
    assert_eq!(grant.assertion.unexpanded(), "${WORKLOAD_JWT}");
    assert_eq!(
        authorization(&config, "token"),
        Some(Authorization::bearer("${API_TOKEN}"))
    );

    // The definition is the one the wire holds: it round-trips, and every credential
    // expands only while a connection is prepared, as a secret.
    for alias in ["person", "machine", "runner", "token"] {
        let definition = config.server(alias).expect("declared");
        let wire = definition.to_durable().expect("references only");
        assert_eq!(&ServerDefinition::try_from(wire).unwrap(), definition);
        assert!(definition.literal_credentials().is_empty(), "{alias}");
        let prepared = definition.prepare(config.env()).expect("prepares");
        assert!(
            !prepared.secrets.is_empty(),
            "{alias}: its credential is a secret"
        );
        let shown = format!("{definition:?} {prepared:?} {config:?}");
        for value in [
            "person-secret-value",
            "machine-secret-value",
            "api-token-value",
        ] {
            assert!(!shown.contains(value), "{alias}: {shown}");
        }
    }
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn every_fault_of_the_authorization_companion_is_its_own_error_naming_the_variable() {
    let oauth = |extra: serde_json::Value| {
        let mut value = json!({"type": "oauth", "redirectUrl": "http://127.0.0.1:9/callback"});
        if let (Some(value), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            value.extend(extra.clone());
        }
        value.to_string()
    };
    let grant = |secret: &str| {
        json!({"type": "client-credentials", "clientId": "m", "clientSecret": secret}).to_string()
    };
    let url = || "https://mcp.example/mcp".to_owned();
    // What is wrong, the variables that make it so, and the variables its faults name (one
    // fault each).
    type Case = (&'static str, Vec<(&'static str, String)>, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "on a stdio server",
            vec![
                ("PLURNK_MCP_LOCAL", "/bin/true".into()),
                ("PLURNK_MCP_LOCAL_AUTHORIZATION", oauth(json!({}))),
            ],
            vec!["PLURNK_MCP_LOCAL_AUTHORIZATION"],
        ),
        (
            "of no declared server",
            vec![("PLURNK_MCP_GHOST_AUTHORIZATION", oauth(json!({})))],
            vec!["PLURNK_MCP_GHOST_AUTHORIZATION"],
        ),
        (
            "not JSON",
            vec![
                ("PLURNK_MCP_PARSE", url()),
                (
                    "PLURNK_MCP_PARSE_AUTHORIZATION",
                    format!("{{\"type\": \"bearer\", \"token\": \"{LEAK}"),
                ),
            ],
            vec!["PLURNK_MCP_PARSE_AUTHORIZATION"],
        ),
        (
            "not an object",
            vec![
                ("PLURNK_MCP_SCALAR", url()),
                ("PLURNK_MCP_SCALAR_AUTHORIZATION", json!(LEAK).to_string()),
            ],
            vec!["PLURNK_MCP_SCALAR_AUTHORIZATION"],
        ),
        (
            "an unknown type",
            vec![
                ("PLURNK_MCP_KIND", url()),
                (
                    "PLURNK_MCP_KIND_AUTHORIZATION",
                    json!({"type": LEAK}).to_string(),
                ),
            ],
            vec!["PLURNK_MCP_KIND_AUTHORIZATION.type"],
        ),
        (
            "a type declined by design",
            vec![
                ("PLURNK_MCP_JWT", url()),
                (
                    "PLURNK_MCP_JWT_AUTHORIZATION",
                    json!({"type": "private-key-jwt"}).to_string(),
                ),
            ],
            vec!["PLURNK_MCP_JWT_AUTHORIZATION.type"],
        ),
        (
            "a required field missing",
            vec![
                ("PLURNK_MCP_HALF", url()),
                (
                    "PLURNK_MCP_HALF_AUTHORIZATION",
                    json!({"type": "client-credentials", "clientId": "m"}).to_string(),
                ),
            ],
            vec!["PLURNK_MCP_HALF_AUTHORIZATION"],
        ),
        (
            "a field the type does not have",
            vec![
                ("PLURNK_MCP_EXTRA", url()),
                (
                    "PLURNK_MCP_EXTRA_AUTHORIZATION",
                    oauth(json!({"token": LEAK})),
                ),
            ],
            vec!["PLURNK_MCP_EXTRA_AUTHORIZATION"],
        ),
        (
            "a client secret written literally",
            vec![
                ("PLURNK_MCP_SECRET", url()),
                ("PLURNK_MCP_SECRET_AUTHORIZATION", grant(LEAK)),
            ],
            vec!["PLURNK_MCP_SECRET_AUTHORIZATION.clientSecret"],
        ),
        (
            "a bearer token written literally",
            vec![
                ("PLURNK_MCP_TOKEN", url()),
                (
                    "PLURNK_MCP_TOKEN_AUTHORIZATION",
                    json!({"type": "bearer", "token": LEAK}).to_string(),
                ),
            ],
            vec!["PLURNK_MCP_TOKEN_AUTHORIZATION.token"],
        ),
        (
            "an identity token written literally",
            vec![
                ("PLURNK_MCP_RUNNER", url()),
                (
                    "PLURNK_MCP_RUNNER_AUTHORIZATION",
                    json!({"type": "workload-identity",
                           "assertion": format!("eyJhbGciOi.{LEAK}.c2ln")})
                    .to_string(),
                ),
            ],
            vec!["PLURNK_MCP_RUNNER_AUTHORIZATION.assertion"],
        ),
        (
            "a token-shaped client id",
            vec![
                ("PLURNK_MCP_SHAPED", url()),
                (
                    "PLURNK_MCP_SHAPED_AUTHORIZATION",
                    json!({"type": "client-credentials",
                           "clientId": "ghp_tokLEAK7531aB3dE5fG7hJ9kL1mN3pQ5rS7",
                           "clientSecret": "${S}"})
                    .to_string(),
                ),
                ("S", "a-secret-value".into()),
            ],
            vec!["PLURNK_MCP_SHAPED_AUTHORIZATION.clientId"],
        ),
        (
            "a password in the redirect URL",
            vec![
                ("PLURNK_MCP_USERINFO", url()),
                (
                    "PLURNK_MCP_USERINFO_AUTHORIZATION",
                    json!({"type": "oauth",
                           "redirectUrl": format!("http://ada:{LEAK}@127.0.0.1:9/cb")})
                    .to_string(),
                ),
            ],
            vec!["PLURNK_MCP_USERINFO_AUTHORIZATION.redirectUrl"],
        ),
        (
            "a reference to a variable that is not set",
            vec![
                ("PLURNK_MCP_UNSET", url()),
                (
                    "PLURNK_MCP_UNSET_AUTHORIZATION",
                    grant("${NOT_SET_ANYWHERE}"),
                ),
            ],
            vec!["PLURNK_MCP_UNSET_AUTHORIZATION.clientSecret"],
        ),
        (
            "a client id without its secret",
            vec![
                ("PLURNK_MCP_PAIR", url()),
                (
                    "PLURNK_MCP_PAIR_AUTHORIZATION",
                    oauth(json!({"clientId": "plurnk"})),
                ),
            ],
            vec!["PLURNK_MCP_PAIR_AUTHORIZATION.clientId"],
        ),
        (
            "an issuer that is not a URL",
            vec![
                ("PLURNK_MCP_ISSUER", url()),
                (
                    "PLURNK_MCP_ISSUER_AUTHORIZATION",
                    json!({"type": "client-credentials", "clientId": "m",
                           "clientSecret": "${S}", "issuer": "as.example"})
                    .to_string(),
                ),
                ("S", "a-secret-value".into()),
            ],
            vec!["PLURNK_MCP_ISSUER_AUTHORIZATION.issuer"],
        ),
        (
            "together with _BEARER",
            vec![
                ("PLURNK_MCP_TWICE", url()),
                ("PLURNK_MCP_TWICE_BEARER", LEAK.into()),
                ("PLURNK_MCP_TWICE_AUTHORIZATION", oauth(json!({}))),
            ],
            vec!["PLURNK_MCP_TWICE_AUTHORIZATION"],
        ),
        (
            "together with an Authorization header",
            vec![
                ("PLURNK_MCP_HEADER", url()),
                (
                    "PLURNK_MCP_HEADER_HEADERS",
                    json!({"Authorization": format!("Basic {LEAK}")}).to_string(),
                ),
                ("PLURNK_MCP_HEADER_AUTHORIZATION", oauth(json!({}))),
            ],
            vec!["PLURNK_MCP_HEADER_AUTHORIZATION"],
        ),
    ];
    let leaks = |text: &str| {
        text.to_ascii_lowercase()
            .contains(&LEAK.to_ascii_lowercase())
            || text.contains("tokLEAK7531")
    };
    let mut expected_total = 0;
    for (what, vars, variables) in &cases {
        let errors = match load(vars) {
            Ok(_) => panic!("{what}: accepted"),
            Err(errors) => errors,
        };
        let named: Vec<&str> = errors.iter().map(ConfigError::variable).collect();
        assert_eq!(&named, variables, "{what}: {errors}");
        for (error, variable) in errors.iter().zip(variables) {
            let message = error.to_string();
            assert!(
                message.contains(variable),
                "{what}: does not name {variable}: {message}"
            );
            assert!(!leaks(&message), "{what}: quotes a value: {message}");
            assert!(
                !leaks(&format!("{error:?}")),
                "{what}: Debug quotes a value"
            );
        }
        expected_total += variables.len();
    }
    // All at once: every fault, each its own.
    let all: Vec<(&str, String)> = cases
        .iter()
        .flat_map(|(_, vars, _)| vars.iter().cloned())
        .collect();
    let errors = load(&all).expect_err("every fault");
    assert_eq!(errors.errors().len(), expected_total, "{errors}");
    assert!(!leaks(&errors.to_string()));

    // Each kind of fault is the one an operator can act on.
    let only = |vars: &[(&str, String)]| {
        let errors = load(vars).expect_err("a fault");
        assert_eq!(errors.errors().len(), 1, "{errors}");
        errors.errors()[0].clone()
    };
    let kinds = [
        (0, "WrongTransport"),
        (1, "OrphanCompanion"),
        (2, "InvalidJson"),
        (3, "WrongJsonShape"),
        (5, "DeclinedAuthorization"),
        (6, "MissingField"),
        (7, "UnknownField"),
        (8, "CredentialNotReference"),
        (9, "CredentialNotReference"),
        (10, "CredentialNotReference"),
        (11, "LiteralCredential"),
        (12, "LiteralCredential"),
        (13, "MissingReference"),
        (14, "FieldNeedsField"),
        (15, "InvalidUrl"),
        (16, "ConflictingFields"),
        (17, "BearerWithAuthorizationHeader"),
    ];
    for (index, kind) in kinds {
        let (what, vars, _) = &cases[index];
        let fault = only(vars);
        assert!(
            format!("{fault:?}").starts_with(kind),
            "{what}: {fault:?} is not {kind}"
        );
    }
    let fault = only(&cases[12].1);
    assert!(fault.to_string().contains("its password"), "{fault}");
    let fault = only(&cases[16].1);
    assert!(
        fault.to_string().contains("PLURNK_MCP_TWICE_BEARER"),
        "{fault}"
    );
    // A faulty value excludes `_BEARER` all the same: both faults at once.
    let errors = load(&[
        ("PLURNK_MCP_BOTH", url()),
        ("PLURNK_MCP_BOTH_BEARER", "${T}".into()),
        (
            "PLURNK_MCP_BOTH_AUTHORIZATION",
            json!({"type": "client-credentials"}).to_string(),
        ),
        ("T", "a-token-value".into()),
    ])
    .expect_err("faults");
    assert!(
        matches!(
            errors.errors(),
            [
                ConfigError::MissingField {
                    field: "clientId",
                    ..
                },
                ConfigError::MissingField {
                    field: "clientSecret",
                    ..
                },
                ConfigError::ConflictingFields { .. }
            ]
        ),
        "{errors}"
    );
}

#[test]
fn a_server_name_cannot_end_in_the_companion_word() {
    let errors = ServerDefinition::from_target("web-authorization", "https://h/mcp")
        .expect_err("an alias the environment could not declare");
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, ConfigError::NameEndsInCompanion { .. })),
        "{errors}"
    );
    // Alone, the variable is a companion of an undeclared server, not a server.
    let errors =
        load(&[("PLURNK_MCP_MY_AUTHORIZATION", "https://h/mcp".into())]).expect_err("an orphan");
    assert!(matches!(
        errors.errors(),
        [ConfigError::OrphanCompanion { .. }]
    ));
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn an_overlay_specializes_a_servers_authorization_by_the_same_reader() {
    let service = ServerDefinition::from_target("web", "https://h/mcp").unwrap();
    let overlay = Overlay::from_env_map([(
        "PLURNK_MCP_WEB_AUTHORIZATION",
        json!({"type": "client-credentials", "clientId": "m", "clientSecret": "${S}"}).to_string(),
    )])
    .expect("a valid overlay");
    let resolved =
        resolve(Some(&service), None, overlay.server("web").as_ref(), None).expect("resolves");
    let Transport::Http(http) = resolved.transport() else {
        panic!("not http");
    };
    assert!(matches!(
        &http.authorization,
        Some(Authorization::ClientCredentials(grant)) if grant.client_id == "m"
    ));
    // On a stdio server below it, the overlay's companion is the wrong transport, named.
    let stdio = ServerDefinition::from_target("web", "/bin/true").unwrap();
    let errors = resolve(Some(&stdio), None, overlay.server("web").as_ref(), None)
        .expect_err("wrong transport");
    assert_eq!(
        errors.iter().map(ConfigError::variable).collect::<Vec<_>>(),
        ["PLURNK_MCP_WEB_AUTHORIZATION"]
    );

    // Its faults are the environment's, each once.
    let errors = Overlay::from_env_map([
        ("PLURNK_MCP_WEB_AUTHORIZATION", {
            json!({"type": "client-credentials", "clientId": "m", "clientSecret": LEAK}).to_string()
        }),
        ("PLURNK_MCP_WEB_BEARER", "${T}".to_owned()),
    ])
    .expect_err("faults");
    let named: Vec<&str> = errors.iter().map(ConfigError::variable).collect();
    assert_eq!(
        named,
        [
            "PLURNK_MCP_WEB_AUTHORIZATION",
            "PLURNK_MCP_WEB_AUTHORIZATION.clientSecret"
        ],
        "{errors}"
    );
    assert!(!errors.to_string().contains(LEAK));
    // What only the one refusal of literal credentials finds, found in an overlay too.
    let errors = Overlay::from_env_map([(
        "PLURNK_MCP_WEB_AUTHORIZATION",
        json!({"type": "oauth", "redirectUrl": format!("http://ada:{LEAK}@127.0.0.1:9/cb")})
            .to_string(),
    )])
    .expect_err("a password in the redirect URL");
    assert!(
        matches!(
            errors.errors(),
            [ConfigError::LiteralCredential { variable, .. }]
                if variable == "PLURNK_MCP_WEB_AUTHORIZATION.redirectUrl"
        ),
        "{errors}"
    );
    assert!(!errors.to_string().contains(LEAK));
}
