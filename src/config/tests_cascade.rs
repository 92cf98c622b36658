//! Tests of the wire shapes, the options, the overlay and the configuration cascade.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::*;

fn config(vars: &[(&str, &str)]) -> HostConfig {
    match HostConfig::from_env(vars.iter().copied()) {
        Ok(config) => config,
        Err(errors) => panic!("configuration faults:\n{errors}"),
    }
}

fn overlay(vars: &[(&str, &str)]) -> Overlay {
    match Overlay::from_env_map(vars.iter().copied()) {
        Ok(overlay) => overlay,
        Err(errors) => panic!("overlay faults:\n{errors}"),
    }
}

fn options(value: serde_json::Value) -> McpServerOptions {
    match McpServerOptions::from_value(&value) {
        Ok(options) => options,
        Err(errors) => panic!("option faults:\n{errors}"),
    }
}

/// The variables the faults name, in order.
fn variables(errors: &ConfigErrors) -> Vec<&str> {
    errors.iter().map(ConfigError::variable).collect()
}

fn stdio_of(definition: &ServerDefinition) -> &StdioDefinition {
    match definition.transport() {
        Transport::Stdio(stdio) => stdio,
        _ => panic!("{} is not stdio", definition.alias()),
    }
}

fn http_of(definition: &ServerDefinition) -> &HttpDefinition {
    match definition.transport() {
        Transport::Http(http) => http,
        _ => panic!("{} is not http", definition.alias()),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A service environment with one server of each transport.
fn service() -> HostConfig {
    config(&[
        ("PLURNK_MCP_FS", "/opt/mcp/fs server"),
        ("PLURNK_MCP_FS_ARGS", r#"["--root", "${HOME}/data"]"#),
        ("PLURNK_MCP_FS_CWD", "/srv"),
        (
            "PLURNK_MCP_FS_ENV",
            r#"{"API_KEY": "${KEY}", "MODE": "ro"}"#,
        ),
        ("PLURNK_MCP_FS_TOOLS", r#"["read_file", "write_file"]"#),
        ("PLURNK_MCP_FS_READ", r#"["read_file"]"#),
        ("PLURNK_MCP_FS_SUMMARY", "Files under ${HOME}"),
        ("PLURNK_MCP_FS_READ_FILE_SUMMARY", "Read one file"),
        ("PLURNK_MCP_GITHUB", "https://api.example.com/mcp/"),
        ("PLURNK_MCP_GITHUB_BEARER", "${GH_TOKEN}"),
        (
            "PLURNK_MCP_GITHUB_HEADERS",
            r#"{"X-Toolsets": "repos", "X-Trace": "${TRACE}"}"#,
        ),
        ("PLURNK_MCP_GITHUB_TOOLS", r#"["search", "create_issue"]"#),
        ("HOME", "/home/me"),
        ("KEY", "k"),
        ("GH_TOKEN", "ghp_SECRETTOKEN"),
        ("TRACE", "t"),
    ])
}

fn server(config: &HostConfig, alias: &str) -> ServerDefinition {
    match config.server(alias) {
        Some(definition) => definition.clone(),
        None => panic!("no server {alias}"),
    }
}

// === the wire definition ===

#[test]
fn wire_round_trip_from_the_environment() {
    let config = service();
    for (alias, definition) in config.servers() {
        let wire = McpServerDefinition::try_from(definition).unwrap();
        let text = serde_json::to_string(&wire).unwrap();
        let read = McpServerDefinition::from_json(&text).unwrap();
        assert_eq!(read, wire, "{alias}");
        let back = ServerDefinition::try_from(read).unwrap();
        assert_eq!(&back, definition, "{alias}");
        // Stored text reads back to the same text.
        let again = serde_json::to_string(&McpServerDefinition::try_from(&back).unwrap()).unwrap();
        assert_eq!(again, text, "{alias}");
        assert_eq!(definition.to_durable().unwrap(), wire, "{alias}");
    }
}

#[test]
fn wire_shape_is_unexpanded_and_lossless() {
    let service = service();
    assert_eq!(
        serde_json::to_value(McpServerDefinition::try_from(&server(&service, "github")).unwrap())
            .unwrap(),
        json!({
            "transport": "http",
            "name": "github",
            "url": "https://api.example.com/mcp/",
            "headers": {"X-Toolsets": "repos", "X-Trace": "${TRACE}"},
            "authorization": {"type": "bearer", "token": "${GH_TOKEN}"},
            "tools": ["search", "create_issue"],
        })
    );
    assert_eq!(
        serde_json::to_value(McpServerDefinition::try_from(&server(&service, "fs")).unwrap())
            .unwrap(),
        json!({
            "transport": "stdio",
            "name": "fs",
            "command": "/opt/mcp/fs server",
            "args": ["--root", "${HOME}/data"],
            "cwd": "/srv",
            "env": {"API_KEY": "${KEY}", "MODE": "ro"},
            "tools": ["read_file", "write_file"],
            "read": ["read_file"],
            "summary": "Files under ${HOME}",
            "toolSummaries": {"read_file": "Read one file"},
        })
    );
    // `tools: []` (none enabled) survives, distinct from absent (all enabled).
    let none = config(&[("PLURNK_MCP_X", "/bin/x"), ("PLURNK_MCP_X_TOOLS", "[]")]);
    let wire = McpServerDefinition::try_from(&server(&none, "x")).unwrap();
    let back = ServerDefinition::try_from(&wire).unwrap();
    assert_eq!(back.tools(), Some(&[][..]));
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn every_authorization_round_trips() {
    let cases = [
        json!({"type": "bearer", "token": "${T}"}),
        json!({"type": "oauth", "redirectUrl": "http://127.0.0.1:3000/cb"}),
        json!({
            "type": "oauth",
            "redirectUrl": "http://127.0.0.1:3000/cb",
            "clientMetadataUrl": "https://client.example/meta.json",
            "scope": "repo",
        }),
        json!({
            "type": "oauth",
            "redirectUrl": "myapp:/cb",
            "clientId": "abc",
            "clientSecret": "${OAUTH_SECRET}",
        }),
        json!({
            "type": "client-credentials",
            "clientId": "svc",
            "clientSecret": "${CC_SECRET}",
            "scope": "mcp",
            "issuer": "https://auth.example",
        }),
    ];
    for authorization in cases {
        let value = json!({
            "transport": "http",
            "name": "web",
            "url": "https://h/mcp",
            "authorization": authorization,
        });
        let wire = McpServerDefinition::from_value(&value).unwrap();
        let definition = ServerDefinition::try_from(&wire).unwrap();
        let out =
            serde_json::to_value(McpServerDefinition::try_from(&definition).unwrap()).unwrap();
        assert_eq!(out, value);
        assert_eq!(definition.to_durable().unwrap(), wire);
    }
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn credentials_must_be_one_reference() {
    let wire = |authorization: serde_json::Value| {
        McpServerDefinition::from_value(&json!({
            "transport": "http", "name": "web", "url": "https://h/mcp",
            "authorization": authorization,
        }))
        .unwrap()
    };
    let cases = [
        (
            json!({"type": "bearer", "token": "hunter2"}),
            "web.authorization.token",
        ),
        (
            json!({"type": "bearer", "token": "Bearer ${T}"}),
            "web.authorization.token",
        ),
        (
            json!({"type": "oauth", "redirectUrl": "http://l/cb", "clientId": "a",
                   "clientSecret": "hunter2"}),
            "web.authorization.clientSecret",
        ),
        (
            json!({"type": "client-credentials", "clientId": "a", "clientSecret": "${A}${B}"}),
            "web.authorization.clientSecret",
        ),
        (
            json!({"type": "workload-identity", "assertion": "eyJhbGciOi.hunter2.sig"}),
            "web.authorization.assertion",
        ),
    ];
    for (authorization, variable) in cases {
        let errors = ServerDefinition::try_from(wire(authorization)).unwrap_err();
        assert_eq!(variables(&errors), [variable], "{errors}");
        assert!(matches!(
            errors.errors()[0],
            ConfigError::CredentialNotReference { .. }
        ));
        assert!(!errors.to_string().contains("hunter2"), "{errors}");
        assert!(errors.to_string().contains("${NAME}"), "{errors}");
    }

    // Options and overlays are held to the same rule.
    let base = ServerDefinition::from_target("web", "https://h/mcp").unwrap();
    let errors = base
        .with_options(&options(
            json!({"authorization": {"type": "bearer", "token": "hunter2"}}),
        ))
        .unwrap_err();
    assert_eq!(variables(&errors), ["options.authorization.token"]);
    assert!(!errors.to_string().contains("hunter2"));
    let errors = Overlay::from_env_map([
        ("PLURNK_MCP_WEB", "https://h/mcp"),
        ("PLURNK_MCP_WEB_BEARER", "hunter2"),
        ("PLURNK_MCP_GITHUB_BEARER", "hunter2"),
    ])
    .unwrap_err();
    assert_eq!(
        variables(&errors),
        ["PLURNK_MCP_GITHUB_BEARER", "PLURNK_MCP_WEB_BEARER"],
        "{errors}"
    );
    assert!(!errors.to_string().contains("hunter2"));

    // The service environment may hold a literal bearer, but it is never stored.
    let literal = config(&[
        ("PLURNK_MCP_LIT", "https://h/mcp"),
        ("PLURNK_MCP_LIT_BEARER", "hunter2"),
    ]);
    let errors = server(&literal, "lit").to_durable().unwrap_err();
    assert_eq!(variables(&errors), ["PLURNK_MCP_LIT_BEARER"]);
    assert!(!errors.to_string().contains("hunter2"));
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn wire_definitions_get_the_environment_checks() {
    let check = |value: serde_json::Value| -> Vec<String> {
        let wire = McpServerDefinition::from_value(&value).unwrap();
        match ServerDefinition::try_from(wire) {
            Ok(definition) => panic!("accepted {definition:?}"),
            Err(errors) => errors.iter().map(|e| e.variable().to_owned()).collect(),
        }
    };
    assert_eq!(
        check(json!({"transport": "stdio", "name": "Bad_Name", "command": "x"})),
        ["definition.name"]
    );
    assert_eq!(
        check(json!({"transport": "stdio", "name": "enabled", "command": "x"})),
        ["enabled.name"]
    );
    assert_eq!(
        check(json!({"transport": "stdio", "name": "x", "command": "x",
                     "tools": ["a"], "read": ["a", "b"]})),
        ["x.read"]
    );
    assert_eq!(
        check(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                     "headers": {"authorization": "Basic ${B}"},
                     "authorization": {"type": "bearer", "token": "${T}"}})
        ),
        ["x.authorization"]
    );
    assert_eq!(
        check(json!({"transport": "http", "name": "x", "url": "/not/a/url"})),
        ["x.url"]
    );
    assert_eq!(
        check(json!({"transport": "stdio", "name": "x", "command": "https://h/mcp"})),
        ["x.command"]
    );
    assert_eq!(
        check(json!({"transport": "stdio", "name": "x", "command": "x",
                     "env": {"A=B": "c"}, "cwd": " ", "args": ["${"]})),
        ["x.args element 1", "x.cwd", "x.env"]
    );
    // OAuth's pairs and exclusions.
    let oauth = |fields: serde_json::Value| {
        let mut authorization = json!({"type": "oauth", "redirectUrl": "http://l/cb"});
        if let (Some(target), Some(extra)) = (authorization.as_object_mut(), fields.as_object()) {
            target.extend(extra.clone());
        }
        check(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                     "authorization": authorization}),
        )
    };
    assert_eq!(
        oauth(json!({"clientId": "a"})),
        ["x.authorization.clientId"]
    );
    assert_eq!(
        oauth(json!({"clientSecret": "${S}"})),
        ["x.authorization.clientSecret"]
    );
    assert_eq!(
        oauth(json!({"clientMetadataUrl": "https://c/m", "clientId": "a", "clientSecret": "${S}"})),
        ["x.authorization.clientMetadataUrl"]
    );
    assert_eq!(
        oauth(json!({"redirectUrl": "not a url", "clientMetadataUrl": "ftp://c/m", "scope": ""})),
        [
            "x.authorization.redirectUrl",
            "x.authorization.clientMetadataUrl",
            "x.authorization.scope"
        ]
    );
    assert_eq!(
        check(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                     "authorization": {"type": "client-credentials", "clientId": " ",
                                       "clientSecret": "${S}", "issuer": "issuer"}})
        ),
        ["x.authorization.clientId", "x.authorization.issuer"]
    );
    assert_eq!(
        check(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                     "authorization": {"type": "workload-identity", "assertion": "${T}",
                                       "clientId": " ", "scope": "", "issuer": "issuer"}})
        ),
        [
            "x.authorization.clientId",
            "x.authorization.scope",
            "x.authorization.issuer"
        ]
    );
}

#[test]
fn wire_shape_faults_name_the_field_and_quote_no_value() {
    let faults = |value: serde_json::Value| -> Vec<ConfigError> {
        match McpServerDefinition::from_value(&value) {
            Ok(wire) => panic!("accepted {wire:?}"),
            Err(errors) => errors.into_vec(),
        }
    };
    let all = [
        faults(json!({"transport": "stdio", "name": "x", "command": "c",
                      "headers": {"X": "hunter2"}, "bogus": "hunter2"})),
        faults(json!({"transport": "stdio", "name": "x", "args": "hunter2"})),
        faults(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                      "authorization": {"type": "basic", "password": "hunter2"}}),
        ),
        faults(
            json!({"transport": "http", "name": "x", "url": "https://h/",
                      "authorization": {"type": "oauth", "clientSecret": "hunter2",
                                        "extra hunter2": 1}}),
        ),
        faults(json!({"transport": "carrier-pigeon", "name": "x", "headers": ["hunter2"]})),
        faults(json!(["hunter2"])),
    ];
    let shown: Vec<Vec<&str>> = all
        .iter()
        .map(|faults| faults.iter().map(ConfigError::variable).collect())
        .collect();
    assert_eq!(
        shown,
        [
            vec!["x", "x.headers"],
            vec!["x.args", "x"],
            vec!["x.authorization.type"],
            vec!["x.authorization"],
            vec!["x.transport", "x.headers"],
            vec!["definition"],
        ]
    );
    let texts: Vec<String> = all.iter().flatten().map(ToString::to_string).collect();
    for text in &texts {
        assert!(!text.contains("hunter2"), "{text}");
    }
    assert!(texts[0].contains("has no field \"bogus\": use only name, transport, command"));
    assert!(
        texts[1]
            .contains("x.headers applies only to http servers, but server \"x\" is a stdio server")
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("x needs the field \"command\""))
    );
    // Invalid JSON names the position, not the text.
    let error = McpServerDefinition::from_json(r#"{"name": "hunter2"#).unwrap_err();
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[test]
fn wire_debug_prints_no_secret() {
    let wire = McpServerDefinition::from_value(&json!({
        "transport": "http", "name": "x",
        "url": "https://h/api/PATHKEY/mcp",
        "headers": {"X-Key": "HEADERSECRET"},
        "authorization": {"type": "oauth", "redirectUrl": "http://l/cb", "clientId": "a",
                          "clientSecret": "${S}"},
    }))
    .unwrap();
    let stdio = McpServerDefinition::from_value(&json!({
        "transport": "stdio", "name": "y", "command": "c", "env": {"K": "ENVSECRET"},
    }))
    .unwrap();
    let literal = McpAuthorization::Bearer {
        token: "LITERALTOKEN".into(),
    };
    let opts = options(json!({"env": {"K": "ENVSECRET"}, "headers": {"X": "HEADERSECRET"}}));
    let text = format!("{wire:?} {stdio:#?} {literal:?} {opts:?}");
    for secret in ["PATHKEY", "HEADERSECRET", "ENVSECRET", "LITERALTOKEN"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains("${S}"), "{text}");
}

// === options ===

#[test]
fn options_cannot_repeat_alias_target_or_transport() {
    for field in ["name", "alias", "target", "transport", "command", "url"] {
        let errors = McpServerOptions::from_value(&json!({ field: "x" })).unwrap_err();
        assert!(
            matches!(&errors.errors()[0], ConfigError::RepeatedInOptions { field: f, .. } if f == field),
            "{errors}"
        );
        assert!(
            errors
                .to_string()
                .contains(&format!("options cannot set \"{field}\""))
        );
        // Plain serde says so too, through deny_unknown_fields.
        let serde_error = serde_json::from_value::<McpServerOptions>(json!({ field: "x" }))
            .unwrap_err()
            .to_string();
        assert!(
            serde_error.contains(&format!("unknown field `{field}`")),
            "{serde_error}"
        );
    }
    let errors =
        McpServerOptions::from_json(r#"{"tools": ["a"], "bogus": 1, "env": ["x"]}"#).unwrap_err();
    assert_eq!(variables(&errors), ["options", "options.env"]);
    assert!(errors.to_string().contains(
        "options has no field \"bogus\": use only args, cwd, env, sandbox, headers, authorization, tools, read"
    ));
    assert!(McpServerOptions::from_json("{}").unwrap().is_empty());
}

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn options_replace_arrays_and_maps() {
    let fs = server(&service(), "fs");
    let result = fs
        .clone()
        .with_options(&options(json!({
            "args": ["--verbose"],
            "env": {"OTHER": "1"},
            "tools": ["read_file"],
        })))
        .unwrap();
    let stdio = stdio_of(&result);
    assert_eq!(stdio.args, ["--verbose"]);
    assert_eq!(stdio.env, map(&[("OTHER", "1")]));
    // Untouched fields stay.
    assert_eq!(stdio.cwd.as_deref(), Some("/srv"));
    assert_eq!(stdio.command, "/opt/mcp/fs server");
    assert_eq!(result.read(), ["read_file"]);
    assert_eq!(result.summary(), fs.summary());
    // Empty arrays and maps replace too.
    let emptied = fs
        .with_options(&options(
            json!({"args": [], "env": {}, "tools": [], "read": []}),
        ))
        .unwrap();
    assert!(stdio_of(&emptied).args.is_empty() && stdio_of(&emptied).env.is_empty());
    assert_eq!(emptied.tools(), Some(&[][..]));

    let github = server(&service(), "github");
    let result = github
        .with_options(&options(json!({
            "headers": {"X-Other": "1"},
            "authorization": {"type": "client-credentials", "clientId": "svc",
                              "clientSecret": "${CC}"},
        })))
        .unwrap();
    let http = http_of(&result);
    assert_eq!(http.headers, map(&[("X-Other", "1")]));
    assert_eq!(
        http.authorization,
        Some(Authorization::ClientCredentials(ClientCredentials::new(
            "svc", "${CC}"
        )))
    );
}

#[test]
fn options_for_the_other_transport_are_rejected() {
    let github = server(&service(), "github");
    let errors = github
        .with_options(&options(
            json!({"args": ["a"], "cwd": "/", "env": {}, "tools": []}),
        ))
        .unwrap_err();
    assert_eq!(
        variables(&errors),
        ["options.args", "options.cwd", "options.env"]
    );
    assert_eq!(
        errors.errors()[0].to_string(),
        "options.args applies only to stdio servers, but server \"github\" is an http server \
         (see PLURNK_MCP_GITHUB): remove options.args"
    );
    let fs = server(&service(), "fs");
    let errors = fs
        .with_options(&options(json!({
            "headers": {},
            "authorization": {"type": "bearer", "token": "${T}"},
        })))
        .unwrap_err();
    assert_eq!(
        variables(&errors),
        ["options.headers", "options.authorization"]
    );
    // An added server: options apply to the definition made from the target.
    let added = ServerDefinition::from_target("local", "/usr/bin/local mcp")
        .unwrap()
        .with_options(&options(json!({"headers": {"X": "y"}})))
        .unwrap_err();
    assert_eq!(variables(&added), ["options.headers"]);
}

#[test]
fn option_faults_name_the_option() {
    let fs = server(&service(), "fs");
    // `read` from the service no longer fits the narrower `tools` option.
    let errors = fs
        .clone()
        .with_options(&options(json!({"tools": ["write_file"]})))
        .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "PLURNK_MCP_FS_READ names \"read_file\", which is not in options.tools: add it to _TOOLS \
         or remove it from _READ"
    );
    let errors = fs
        .with_options(&options(json!({"env": {"A=B": "x"}, "cwd": ""})))
        .unwrap_err();
    assert_eq!(variables(&errors), ["options.cwd", "options.env"]);
    let github = server(&service(), "github");
    let errors = github
        .with_options(&options(
            json!({"headers": {"Authorization": "Basic ${B}"}}),
        ))
        .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "PLURNK_MCP_GITHUB_BEARER and the \"Authorization\" entry of options.headers both set \
         authorization: keep only one of them"
    );
}

// === the overlay ===

#[test]
fn overlay_is_read_like_the_environment() {
    // No references here, so the service environment reads the same map alike.
    let vars = [
        ("PLURNK_MCP_CHROME_DEVTOOLS", "npx"),
        (
            "PLURNK_MCP_CHROME_DEVTOOLS_ARGS",
            r#"["chrome-devtools-mcp"]"#,
        ),
        ("PLURNK_MCP_chrome_devtools_TOOLS", r#"["take_screenshot"]"#),
        (
            "PLURNK_MCP_CHROME_DEVTOOLS_TAKE_SCREENSHOT_SUMMARY",
            "Capture",
        ),
        ("PLURNK_MCP_WEB", "https://h/mcp"),
        ("PLURNK_MCP_WEB_HEADERS", r#"{"X-A": "b"}"#),
    ];
    let from_overlay = overlay(&vars);
    let from_env = config(&vars);
    assert_eq!(from_overlay.definitions(), from_env.servers());
    assert_eq!(
        from_overlay.server("web"),
        Some(OverlayServer::Definition(server(&from_env, "web")))
    );

    // The same faults, by the same code.
    let errors = Overlay::from_env_map([
        ("PLURNK_MCP_GitHub", "https://h/"),
        ("PLURNK_MCP_GITHUB", "https://h/"),
        ("PLURNK_MCP_X", "/bin/x"),
        ("PLURNK_MCP_X_ARGS", "[1"),
        ("PLURNK_MCP_X_HEADERS", "{}"),
        ("PLURNK_MCP_9", "/bin/9"),
    ])
    .unwrap_err();
    assert_eq!(
        variables(&errors),
        [
            "PLURNK_MCP_9",
            "PLURNK_MCP_GITHUB",
            "PLURNK_MCP_X_ARGS",
            "PLURNK_MCP_X_HEADERS"
        ],
        "{errors}"
    );
}

#[test]
fn overlay_carries_no_service_controls() {
    let errors = Overlay::from_env_map([
        ("PLURNK_MCP_ENABLED", r#"["x"]"#),
        ("PLURNK_MCP_EXPANDED", "[]"),
        ("PLURNK_MCP_CONNECT_TIMEOUT", "5"),
        ("PLURNK_MCP_REQUEST_TIMEOUT", "5"),
        ("PLURNK_MCP_DISCOVER_TIMEOUT", "5"),
        ("PATH", "/bin"),
        ("PLURNK_MCP_X", "/bin/x"),
    ])
    .unwrap_err();
    assert_eq!(
        variables(&errors),
        [
            "PATH",
            "PLURNK_MCP_CONNECT_TIMEOUT",
            "PLURNK_MCP_DISCOVER_TIMEOUT",
            "PLURNK_MCP_ENABLED",
            "PLURNK_MCP_EXPANDED",
            "PLURNK_MCP_REQUEST_TIMEOUT",
        ]
    );
    let text = errors.to_string();
    assert!(text.contains(
        "PLURNK_MCP_ENABLED is a service control, which a client configuration overlay cannot set"
    ));
    assert!(text.contains("\"PATH\" is not a PLURNK_MCP_ variable"));
}

#[test]
fn overlay_references_resolve_only_in_the_service() {
    // `${TOKEN}` is not in the overlay; it resolves against the service
    // environment when the connection is prepared.
    let overlay = overlay(&[
        ("PLURNK_MCP_WEB", "https://h/mcp"),
        ("PLURNK_MCP_WEB_BEARER", "${TOKEN}"),
        ("PLURNK_MCP_GITHUB_HEADERS", r#"{"X-A": "${TRACE}"}"#),
    ]);
    let web = &overlay.definitions()["web"];
    assert!(web.check_references(service().env()).is_err());
    let env = Environment::new([("TOKEN", "t")]);
    assert!(web.check_references(&env).is_ok());
    // Malformed references are still faults.
    let errors = Overlay::from_env_map([("PLURNK_MCP_GITHUB_CWD", "${")]).unwrap_err();
    assert_eq!(variables(&errors), ["PLURNK_MCP_GITHUB_CWD"]);
}

#[test]
fn overlay_companions_without_a_target_specialize() {
    let overlay = overlay(&[
        ("PLURNK_MCP_GITHUB_TOOLS", r#"["search"]"#),
        ("PLURNK_MCP_GITHUB_CREATE_ISSUE_SUMMARY", "Open an issue"),
        ("PLURNK_MCP_GITHUB_SUMMARY", "GitHub"),
    ]);
    assert_eq!(
        overlay.aliases().into_iter().collect::<Vec<_>>(),
        ["github"]
    );
    assert!(overlay.definitions().is_empty());
    let Some(OverlayServer::Specialization(github)) = overlay.server("github") else {
        panic!("no specialization");
    };
    assert_eq!(github.alias(), "github");
    assert_eq!(github.variables().len(), 3);
    assert_eq!(overlay.server("fs"), None);

    let resolved = resolve(
        Some(&server(&service(), "github")),
        None,
        overlay.server("github").as_ref(),
        None,
    )
    .unwrap();
    assert_eq!(resolved.tools(), Some(&strings(&["search"])[..]));
    assert_eq!(resolved.summary(), Some("GitHub"));
    assert_eq!(resolved.tool_summary("create_issue"), Some("Open an issue"));
    // Everything else is the service's.
    assert_eq!(http_of(&resolved), http_of(&server(&service(), "github")));
}

// === the cascade ===

/// A stdio definition of `fs` with `tools` as given.
fn fs_with_tools(command: &str, tools: &[&str]) -> ServerDefinition {
    let mut parts = DefinitionParts::new("fs", Transport::Stdio(StdioDefinition::new(command)));
    parts.tools = Some(strings(tools));
    ServerDefinition::new(parts).unwrap()
}

#[test]
fn each_layer_takes_precedence_over_the_one_below() {
    let service = server(&service(), "fs");
    let workspace = fs_with_tools("/opt/workspace-fs", &["w"]);
    let specialize = overlay(&[
        ("PLURNK_MCP_FS_TOOLS", r#"["o"]"#),
        ("PLURNK_MCP_FS_READ", "[]"),
    ]);
    let spec = specialize.server("fs");
    let opts = options(json!({"tools": ["p"]}));

    // Service environment alone.
    assert_eq!(resolve(Some(&service), None, None, None).unwrap(), service);
    // Durable workspace specialization over the service.
    assert_eq!(
        resolve(Some(&service), Some(&workspace), None, None).unwrap(),
        workspace
    );
    // Client overlay over the workspace.
    let with_overlay = resolve(Some(&service), Some(&workspace), spec.as_ref(), None).unwrap();
    assert_eq!(with_overlay.tools(), Some(&strings(&["o"])[..]));
    assert_eq!(stdio_of(&with_overlay).command, "/opt/workspace-fs");
    // Explicit options over the overlay.
    let with_options =
        resolve(Some(&service), Some(&workspace), spec.as_ref(), Some(&opts)).unwrap();
    assert_eq!(with_options.tools(), Some(&strings(&["p"])[..]));
    assert_eq!(stdio_of(&with_options).command, "/opt/workspace-fs");
    // Options straight over the service, the overlay straight over the service.
    let direct = resolve(Some(&service), None, None, Some(&opts));
    assert!(direct.is_err(), "read [read_file] no longer fits tools [p]");
    let over_service = resolve(Some(&service), None, spec.as_ref(), Some(&opts)).unwrap();
    assert_eq!(over_service.tools(), Some(&strings(&["p"])[..]));
    assert_eq!(stdio_of(&over_service).args, stdio_of(&service).args);
    // A workspace-only (added) server.
    assert_eq!(
        resolve(None, Some(&workspace), None, None).unwrap(),
        workspace
    );
}

#[test]
fn a_target_replaces_the_whole_lower_definition() {
    let service = server(&service(), "fs");
    // The workspace definition has no tools, args or env: nothing is inherited.
    let workspace = ServerDefinition::from_target("fs", "/opt/other").unwrap();
    let resolved = resolve(Some(&service), Some(&workspace), None, None).unwrap();
    assert_eq!(resolved.tools(), None);
    assert!(stdio_of(&resolved).args.is_empty() && stdio_of(&resolved).env.is_empty());
    assert_eq!(resolved.summary(), None);

    // An overlay target replaces both, even across transports, before its own
    // companions apply; options then specialize the result.
    let client = overlay(&[
        ("PLURNK_MCP_FS", "https://files.example/mcp"),
        ("PLURNK_MCP_FS_HEADERS", r#"{"X-Team": "a"}"#),
    ]);
    let resolved = resolve(
        Some(&service),
        Some(&workspace),
        client.server("fs").as_ref(),
        Some(&options(json!({"tools": ["list"]}))),
    )
    .unwrap();
    let http = http_of(&resolved);
    assert_eq!(http.url, "https://files.example/mcp");
    assert_eq!(http.headers, map(&[("X-Team", "a")]));
    assert_eq!(http.authorization, None);
    assert_eq!(resolved.tools(), Some(&strings(&["list"])[..]));
    assert!(resolved.read().is_empty());
    assert_eq!(resolved.tool_summaries(), &BTreeMap::new());

    // A client-only definition (no service or workspace layer).
    let alone = resolve(None, None, client.server("fs").as_ref(), None).unwrap();
    assert_eq!(alone, client.definitions()["fs"]);
}

#[test]
fn arrays_and_maps_replace_never_merge() {
    let github = server(&service(), "github");
    let service = server(&service(), "fs");
    let client = overlay(&[
        ("PLURNK_MCP_FS_ARGS", r#"["--overlay"]"#),
        ("PLURNK_MCP_FS_ENV", r#"{"OVERLAY": "1"}"#),
    ]);
    let resolved = resolve(Some(&service), None, client.server("fs").as_ref(), None).unwrap();
    assert_eq!(stdio_of(&resolved).args, ["--overlay"]);
    assert_eq!(stdio_of(&resolved).env, map(&[("OVERLAY", "1")]));
    let resolved = resolve(
        Some(&service),
        None,
        client.server("fs").as_ref(),
        Some(&options(json!({"env": {"OPTION": "2"}}))),
    )
    .unwrap();
    assert_eq!(stdio_of(&resolved).args, ["--overlay"]);
    assert_eq!(stdio_of(&resolved).env, map(&[("OPTION", "2")]));

    let client = overlay(&[("PLURNK_MCP_GITHUB_HEADERS", r#"{"X-Only": "1"}"#)]);
    let resolved = resolve(Some(&github), None, client.server("github").as_ref(), None).unwrap();
    assert_eq!(http_of(&resolved).headers, map(&[("X-Only", "1")]));
    // The bearer is a separate field and stays.
    assert_eq!(
        http_of(&resolved).bearer(),
        Some(&Secret::new("${GH_TOKEN}"))
    );
}

#[test]
fn cascade_faults_name_the_layer_field() {
    let github = server(&service(), "github");
    // A target-less overlay companion for the other transport.
    let client = overlay(&[("PLURNK_MCP_GITHUB_ARGS", r#"["x"]"#)]);
    let errors = resolve(Some(&github), None, client.server("github").as_ref(), None).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "PLURNK_MCP_GITHUB_ARGS applies only to stdio servers, but server \"github\" is an http \
         server (see PLURNK_MCP_GITHUB): remove PLURNK_MCP_GITHUB_ARGS"
    );
    // Options for the other transport, named as options.
    let errors = resolve(
        Some(&github),
        None,
        None,
        Some(&options(json!({"cwd": "/tmp"}))),
    )
    .unwrap_err();
    assert_eq!(variables(&errors), ["options.cwd"]);
    // An overlay `_BEARER` against an options `Authorization` header.
    let client = overlay(&[("PLURNK_MCP_GITHUB_BEARER", "${OTHER}")]);
    let errors = resolve(
        Some(&github),
        None,
        client.server("github").as_ref(),
        Some(&options(json!({"headers": {"authorization": "x"}}))),
    )
    .unwrap_err();
    assert_eq!(variables(&errors), ["PLURNK_MCP_GITHUB_BEARER"]);
    assert!(errors.to_string().contains("options.headers"), "{errors}");
}

#[test]
fn a_specialization_needs_something_below_it() {
    let client = overlay(&[("PLURNK_MCP_NEW_TOOLS", "[]")]);
    let errors = resolve(None, None, client.server("new").as_ref(), None).unwrap_err();
    assert_eq!(variables(&errors), ["PLURNK_MCP_NEW_TOOLS"]);
    assert!(matches!(
        errors.errors()[0],
        ConfigError::NothingToSpecialize { .. }
    ));
    let errors = resolve(None, None, None, Some(&McpServerOptions::default())).unwrap_err();
    assert!(matches!(
        errors.errors()[0],
        ConfigError::NoDefinition { .. }
    ));
    assert!(resolve(None, None, None, None).is_err());
}

#[test]
fn layers_must_agree_on_the_alias() {
    let fs = server(&service(), "fs");
    let github = server(&service(), "github");
    let errors = resolve(Some(&fs), Some(&github), None, None).unwrap_err();
    assert!(matches!(
        errors.errors()[0],
        ConfigError::AliasMismatch { .. }
    ));
    let client = overlay(&[("PLURNK_MCP_GITHUB_TOOLS", "[]")]);
    let errors = resolve(Some(&fs), None, client.server("github").as_ref(), None).unwrap_err();
    assert!(matches!(
        errors.errors()[0],
        ConfigError::AliasMismatch { .. }
    ));
}

#[test]
fn overlay_debug_prints_no_value() {
    let client = overlay(&[
        ("PLURNK_MCP_WEB", "https://h/api/PATHKEY/mcp"),
        ("PLURNK_MCP_WEB_HEADERS", r#"{"X-Key": "HEADERSECRET"}"#),
        ("PLURNK_MCP_FS_ENV", r#"{"K": "ENVSECRET"}"#),
    ]);
    let text = format!("{client:?} {:?}", client.server("fs"));
    for secret in ["PATHKEY", "HEADERSECRET", "ENVSECRET"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains("PLURNK_MCP_FS_ENV"), "{text}");
}

// === preparing OAuth ===

// Its definitions carry OAuth authorizations, which only the `oauth` build admits.
#[cfg(feature = "oauth")]
#[test]
fn oauth_and_client_credentials_prepare_their_secret() {
    let definition = |authorization: serde_json::Value| {
        ServerDefinition::try_from(
            McpServerDefinition::from_value(&json!({
                "transport": "http", "name": "web", "url": "https://h/mcp",
                "authorization": authorization,
            }))
            .unwrap(),
        )
        .unwrap()
    };
    let env = Environment::new([("CC_SECRET", "EXPANDEDSECRET")]);
    let grant = definition(json!({"type": "client-credentials", "clientId": "svc",
                                  "clientSecret": "${CC_SECRET}", "issuer": "https://a/"}));
    let prepared = grant.prepare(&env).unwrap();
    assert_eq!(
        prepared.authorization,
        Some(PreparedAuthorization::ClientCredentials {
            client_id: "svc".into(),
            client_secret: "EXPANDEDSECRET".into(),
            scope: None,
            issuer: Some("https://a/".into()),
        })
    );
    // No bearer header for a flow the connection runs itself.
    let PreparedTransport::Http { headers, .. } = &prepared.transport else {
        panic!("not http");
    };
    assert!(headers.is_empty());
    assert!(!format!("{prepared:?}").contains("EXPANDEDSECRET"));
    let fault = grant.prepare(&Environment::default()).unwrap_err();
    assert_eq!(fault.variable(), "web.authorization.clientSecret");

    let dcr = definition(json!({"type": "oauth", "redirectUrl": "http://l/cb"}));
    let prepared = dcr.prepare(&Environment::default()).unwrap();
    assert!(matches!(
        prepared.authorization,
        Some(PreparedAuthorization::OAuth {
            client_secret: None,
            ..
        })
    ));
    let env = Environment::new([("RUNNER_JWT", "EXPANDEDIDENTITY")]);
    let workload = definition(
        json!({"type": "workload-identity", "assertion": "${RUNNER_JWT}",
                                     "clientId": "runner", "scope": "mcp"}),
    );
    let prepared = workload.prepare(&env).unwrap();
    assert_eq!(
        prepared.authorization,
        Some(PreparedAuthorization::WorkloadIdentity {
            assertion: "EXPANDEDIDENTITY".into(),
            client_id: Some("runner".into()),
            scope: Some("mcp".into()),
            issuer: None,
        })
    );
    assert!(!format!("{prepared:?}").contains("EXPANDEDIDENTITY"));
    let fault = workload.prepare(&Environment::default()).unwrap_err();
    assert_eq!(fault.variable(), "web.authorization.assertion");
    // The wire form round-trips, the reference unexpanded.
    let wire = McpServerDefinition::try_from(&workload).unwrap();
    let text = serde_json::to_string(&wire).unwrap();
    assert!(text.contains(r#""type":"workload-identity""#), "{text}");
    assert!(text.contains(r#""assertion":"${RUNNER_JWT}""#), "{text}");
    assert_eq!(ServerDefinition::try_from(wire).unwrap(), workload);

    // A bearer stays a header, as before.
    let bearer = server(&service(), "github")
        .prepare(service().env())
        .unwrap();
    assert_eq!(bearer.authorization, None);
}

// === the JSON Schemas ===

#[test]
fn schemas_match_the_types() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
    let update = std::env::var("UPDATE_SCHEMAS").is_ok_and(|v| v == "1");
    let schemas = [
        (
            "McpServerDefinition",
            schemars::schema_for!(McpServerDefinition),
        ),
        ("McpServerOptions", schemars::schema_for!(McpServerOptions)),
    ];
    let mut drifted = Vec::new();
    for (name, schema) in schemas {
        let path = directory.join(format!("{name}.schema.json"));
        let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if update {
            std::fs::create_dir_all(&directory).unwrap();
            std::fs::write(&path, &generated).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(generated.as_str()) {
            drifted.push(path.display().to_string());
        }
    }
    assert!(
        drifted.is_empty(),
        "the checked-in JSON Schemas differ from the Rust types: {}; run \
         `UPDATE_SCHEMAS=1 cargo test --lib config::` and commit the result",
        drifted.join(", ")
    );
}

#[test]
fn schemas_are_closed_unions() {
    let definition = serde_json::to_value(schemars::schema_for!(McpServerDefinition)).unwrap();
    let variants = definition["oneOf"].as_array().unwrap();
    let transports: Vec<&serde_json::Value> = variants
        .iter()
        .map(|v| &v["properties"]["transport"]["const"])
        .collect();
    assert_eq!(
        transports,
        [
            &json!("stdio"),
            &json!("http"),
            &json!("cli"),
            &json!("script"),
            &json!("openapi")
        ]
    );
    for variant in variants {
        assert_eq!(variant["additionalProperties"], json!(false));
    }
    let authorization = &definition["$defs"]["McpAuthorization"]["oneOf"];
    let kinds: Vec<&serde_json::Value> = authorization
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["properties"]["type"]["const"])
        .collect();
    assert_eq!(
        kinds,
        [
            &json!("bearer"),
            &json!("oauth"),
            &json!("client-credentials"),
            &json!("workload-identity")
        ]
    );
    let options = serde_json::to_value(schemars::schema_for!(McpServerOptions)).unwrap();
    assert_eq!(options["additionalProperties"], json!(false));
    let mut fields: Vec<&String> = options["properties"].as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "args",
            "authorization",
            "cwd",
            "env",
            "headers",
            "read",
            "sandbox",
            "tools"
        ]
    );
}

#[test]
fn an_in_process_server_takes_a_tool_policy_but_no_connection_setting_and_is_never_stored() {
    let embedded = ServerDefinition::in_process("embedded").unwrap();
    assert_eq!(embedded.transport().kind(), TransportKind::InProcess);
    assert_eq!(embedded.transport().kind().to_string(), "in-process");
    // Its tool policy can be customized like any server's.
    let narrowed = resolve(
        Some(&embedded),
        None,
        None,
        Some(&options(json!({"tools": ["echo"]}))),
    )
    .unwrap();
    assert_eq!(narrowed.tools(), Some(&strings(&["echo"])[..]));
    assert_eq!(narrowed.transport().kind(), TransportKind::InProcess);
    // A command or connection setting is refused, naming the setting and the server.
    for setting in [
        json!({"args": ["--verbose"]}),
        json!({"env": {"A": "b"}}),
        json!({"headers": {"X-A": "b"}}),
    ] {
        let errors = resolve(Some(&embedded), None, None, Some(&options(setting.clone())))
            .expect_err("a connection setting for an in-process server");
        assert!(
            errors
                .iter()
                .all(|error| matches!(error, ConfigError::InProcessNotConfigurable { .. })),
            "{setting}: {errors}"
        );
        let message = errors.to_string();
        assert!(message.contains("\"embedded\""), "{message}");
        assert!(
            message.contains("inside the embedding process"),
            "{message}"
        );
    }
    // Nothing about it can be written to a state file.
    let refused = embedded.to_durable().expect_err("no wire definition");
    assert!(refused.to_string().contains("\"embedded\""), "{refused}");
}
