//! Definitions made by hand, as `add` and the cascade make them: a target read into a
//! definition, and every member of a definition checked and kept.

use super::*;

#[test]
fn from_target_picks_the_transport() {
    let local = ServerDefinition::from_target("local", "/usr/bin/my server").unwrap();
    assert_eq!(
        local.transport(),
        &Transport::Stdio(StdioDefinition::new("/usr/bin/my server"))
    );
    assert_eq!(local.tools(), None);
    let web = ServerDefinition::from_target("web", "https://h/mcp").unwrap();
    assert_eq!(web.transport().kind(), TransportKind::Http);

    let errors = ServerDefinition::from_target("Bad Name", "http:/x").unwrap_err();
    let text = errors.to_string();
    assert_eq!(errors.errors().len(), 2, "{text}");
    assert!(text.contains("\"Bad Name\" (the alias) is not a valid server name"));
    assert!(text.contains("the target starts like an http(s) URL"));
}

#[test]
fn new_validates_parts_under_canonical_names() {
    let mut parts = DefinitionParts::new(
        "chrome-devtools",
        Transport::Http(HttpDefinition {
            url: "https://h/mcp".into(),
            authorization: Some(Authorization::bearer("${T}")),
            headers: BTreeMap::from([("Authorization".into(), "x".into())]),
        }),
    );
    parts.tools = Some(vec!["a".into()]);
    parts.read = vec!["b".into()];
    parts.tool_summaries = BTreeMap::from([
        ("Take-Shot".into(), "x".into()),
        ("take_shot".into(), "y".into()),
    ]);
    let errors = ServerDefinition::new(parts.clone()).unwrap_err();
    let variables: Vec<&str> = errors.errors().iter().map(ConfigError::variable).collect();
    assert_eq!(
        variables,
        [
            "PLURNK_MCP_CHROME_DEVTOOLS_TAKE_SHOT_SUMMARY",
            "PLURNK_MCP_CHROME_DEVTOOLS_BEARER",
            "PLURNK_MCP_CHROME_DEVTOOLS_READ",
        ],
        "{errors}"
    );

    parts.tool_summaries = BTreeMap::from([("Take-Shot".into(), "x".into())]);
    parts.read = vec!["a".into()];
    if let Transport::Http(http) = &mut parts.transport {
        http.headers.clear();
    }
    let definition = ServerDefinition::new(parts).unwrap();
    assert_eq!(definition.tool_summary("take-shot"), Some("x"));
    let round_trip = ServerDefinition::new(definition.clone().into_parts()).unwrap();
    assert_eq!(round_trip, definition);
}

#[test]
fn fault_details_at_the_edges() {
    // Two spellings of one tool's summary.
    let fault = only_fault(
        &[
            ("PLURNK_MCP_GITHUB", "/bin/g"),
            ("PLURNK_MCP_GITHUB_A.B_SUMMARY", "x"),
            ("PLURNK_MCP_GITHUB_A_B_SUMMARY", "y"),
        ],
        "PLURNK_MCP_GITHUB_A.B_SUMMARY",
    );
    assert!(
        fault.to_string().contains("summary of tool \"a_b\""),
        "{fault}"
    );
    // Any global name is reserved, not just ENABLED.
    only_fault(
        &[("PLURNK_MCP_CONNECT_TIMEOUT_SUMMARY", "x")],
        "PLURNK_MCP_CONNECT_TIMEOUT_SUMMARY",
    );
    // A badly named server's companions are not orphans as well.
    only_fault(
        &[("PLURNK_MCP_9X", "/bin/x"), ("PLURNK_MCP_9X_ARGS", "[]")],
        "PLURNK_MCP_9X",
    );
    // Nor is a bad target reported again through its companions.
    let fault = only_fault(
        &[
            ("PLURNK_MCP_X", "https:/x"),
            ("PLURNK_MCP_X_ARGS", "[]"),
            ("PLURNK_MCP_X_BEARER", "${T}"),
            ("T", "t"),
        ],
        "PLURNK_MCP_X",
    );
    assert!(matches!(fault, ConfigError::NotAbsoluteUrl { .. }));
    let fault = only_fault(
        &[
            ("PLURNK_MCP_CLI", "/bin/cli"),
            ("PLURNK_MCP_CLI_BEARER", "${T}"),
            ("T", "t"),
        ],
        "PLURNK_MCP_CLI_BEARER",
    );
    assert_eq!(
        fault.to_string(),
        "PLURNK_MCP_CLI_BEARER applies only to http servers, but server \"cli\" is a stdio \
         server (see PLURNK_MCP_CLI): remove PLURNK_MCP_CLI_BEARER"
    );
}

#[test]
fn a_very_long_server_name_is_refused_with_a_short_message() {
    let long = "a".repeat(65_536);
    let errors = match HostConfig::from_env([(format!("PLURNK_MCP_{long}"), "/bin/x".to_owned())]) {
        Ok(_) => panic!("a 65,536-character name was accepted"),
        Err(errors) => errors,
    };
    let message = errors.to_string();
    assert!(
        message.contains("at most 64 characters"),
        "{}",
        &message[..200]
    );
    assert!(
        message.len() < 1000,
        "the message is {} bytes",
        message.len()
    );
    let definition = ServerDefinition::from_target(&long, "/bin/x");
    let error = definition
        .expect_err("refused as a definition too")
        .to_string();
    assert!(error.len() < 1000, "{} bytes", error.len());
    // 64 characters is still a name.
    let fits = "b".repeat(64);
    assert!(ServerDefinition::from_target(&fits, "/bin/x").is_ok());
}

#[test]
fn preparing_lists_every_credential_value_and_nothing_else() {
    let env = Environment::new([
        ("ARG_VALUE", "arg-value-1234"),
        ("TOKEN", "token-value-5678"),
        ("KEY", "key-value-9012"),
        ("NOT_USED", "unused-value-3456"),
    ]);
    let secrets = |target: &str, options: &str| {
        let options = McpServerOptions::from_json(options).expect("valid options");
        let mut secrets = ServerDefinition::from_target("s", target)
            .and_then(|d| d.with_options(&options))
            .expect("valid")
            .prepare(&env)
            .expect("prepares")
            .secrets;
        secrets.sort();
        secrets
    };
    // stdio: what references expand to in arguments, and credential-named env entries.
    assert_eq!(
        secrets(
            "/bin/x",
            r#"{"args": ["--literal", "--token=${ARG_VALUE}"],
                "env": {"API_KEY": "literal-api-key", "LOG_LEVEL": "debug", "PLAIN": "${KEY}"}}"#
        ),
        ["arg-value-1234", "key-value-9012", "literal-api-key"]
    );
    // http: the bearer with and without its scheme word, credential-named headers, the
    // URL's userinfo and query values (as written and decoded).
    assert_eq!(
        secrets(
            "https://user:pa%20ss@h.example/mcp?token=a%2Fb&v=1+2&bad=%4x%2",
            r#"{"headers": {"X-Api-Key": "${KEY}", "X-Trace": "plain-trace-id",
                            "Authorization": "Basic ${TOKEN}",
                            "X-Auth-Token": "Token literal-cred-value"}}"#
        ),
        [
            "%4x%2",
            "1 2",
            "1+2",
            "Basic token-value-5678",
            "Token literal-cred-value",
            "a%2Fb",
            "a/b",
            "key-value-9012",
            "literal-cred-value",
            "pa ss",
            "pa%20ss",
            "token-value-5678",
            "token=a%2Fb&v=1+2&bad=%4x%2",
            "token=a/b&v=1 2&bad=%4x%2",
            "user",
        ]
    );
}

#[test]
fn credential_names_are_recognised_in_any_case() {
    for name in [
        "Authorization",
        "proxy-authorization",
        "Cookie",
        "X-Api-Key",
        "GITHUB_TOKEN",
        "db_password",
        "client-secret",
        "X-Bearer",
        "PASSWD",
        "Credentials",
    ] {
        assert!(super::literal::is_credential_name(name), "{name}");
    }
    for name in [
        "GH_PAT",
        "X-Auth",
        "BASIC_AUTH",
        "DB_PASS",
        "DB_PWD",
        "SSH_PASSPHRASE",
        "SESSION_COOKIE",
    ] {
        assert!(super::literal::is_credential_name(name), "{name}");
    }
    for name in [
        "Accept",
        "LOG_LEVEL",
        "X-Trace",
        "HOME",
        "PATH",
        "PWD",
        "AUTH_URL",
        "X-Author",
        "OAUTH",
        "BYPASS",
        "PATTERN",
    ] {
        assert!(!super::literal::is_credential_name(name), "{name}");
    }
}

#[test]
fn token_shaped_words_are_told_from_paths_digests_and_identifiers() {
    for token in [
        "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "glpat-xY7zQ2mN4pR8sT1vW3kL",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "sk-proj-4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEu",
        "sk-ant-api03-4f9Qz7LmXw2Rt8KpB3nV6y",
        "AKIAIOSFODNN7EXAMPLE1",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "Zq4Xv9Lm2Rt8KpB3nV6yHc1JdS0aEuGi5oWz7Ty",
    ] {
        assert!(looks_like_token(token), "{token}");
    }
    for word in [
        "sk-learn",
        "hf_home",
        "ghp_short1",
        "sk-learn-something-without-digits",
        "/Users/You/Projects/MyServer2024/build/index.js",
        "3f786850e387550fdab836ed7e6dc881de23001b",
        "123e4567-e89b-12d3-a456-426614174000",
        "ThisIsAVeryLongCamelCaseIdentifierName",
        "@modelcontextprotocol/server-filesystem",
        "--max-old-space-size=4096",
        "supercalifragilisticexpialidocious",
        "pa$$w0rd",
    ] {
        assert!(!looks_like_token(word), "{word}");
    }
}

#[test]
fn credential_flags_are_found_by_their_last_word() {
    for (arg, name, inline) in [
        ("--token", "token", None),
        ("--api-key=abc", "api-key", Some(10)),
        ("--password", "password", None),
        ("--client-secret=x", "client-secret", Some(16)),
        ("-auth", "auth", None),
        ("--access_key", "access_key", None),
        ("--github-pat", "github-pat", None),
    ] {
        assert_eq!(
            super::literal::credential_flag(arg),
            Some(super::literal::CredentialFlag { name, inline }),
            "{arg}"
        );
    }
    for arg in [
        "--token-file",
        "--key-path",
        "--ssh-key",
        "--key",
        "--verbose",
        "token",
        "--port=8080",
    ] {
        assert_eq!(super::literal::credential_flag(arg), None, "{arg}");
    }
}

#[test]
fn credentials_inside_a_string_are_found_by_range() {
    let found = |s: &str| -> Vec<(String, String)> {
        super::literal::literals_in(s)
            .into_iter()
            .map(|literal| (s[literal.range].to_owned(), literal.kind.to_string()))
            .collect()
    };
    assert_eq!(
        found("postgres://app:pa55w0rd@db:5432/app"),
        [("pa55w0rd".to_owned(), "its password".to_owned())]
    );
    assert_eq!(
        found("--db=https://u:p%40ss@h/x?api_key=k3y&v=1#api_key=not"),
        [
            ("p%40ss".to_owned(), "its password".to_owned()),
            ("k3y".to_owned(), "its query value \"api_key\"".to_owned()),
        ]
    );
    assert_eq!(
        found("Bearer ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o"),
        [(
            "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o".to_owned(),
            "a token-shaped value".to_owned()
        )]
    );
    assert_eq!(
        found("KEY=ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o"),
        [(
            "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o".to_owned(),
            "a token-shaped value".to_owned()
        )]
    );
    for plain in [
        "https://user@h/mcp",
        "https://u:${P}@h/mcp?token=${T}",
        "https://h/mcp?format=json",
        "mailto:someone@example.test",
        "${GH_TOKEN}",
        "debug",
    ] {
        assert_eq!(found(plain), [], "{plain}");
    }
}

#[test]
fn a_kept_definition_is_refused_for_each_literal_credential_at_once() {
    let wire = McpServerDefinition::from_json(
        r#"{"name": "web", "transport": "stdio", "command": "/bin/x",
            "args": ["--token", "t0kenvalue", "--api-key=k3yvalue", "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o"],
            "env": {"CLIENT_SECRET": "pa$$w0rd", "DATABASE_URL": "postgres://a:b@h/d", "LOG": "debug"}}"#,
    )
    .expect("a wire definition");
    let definition = ServerDefinition::try_from(wire).expect("a definition");
    let refused = definition
        .refuse_literal_credentials()
        .expect_err("literal credentials");
    assert_eq!(
        refused.fields,
        [
            "args[1] (the value of --token)",
            "args[2] (the value of --api-key)",
            "args[3] (a token-shaped value)",
            "env.\"CLIENT_SECRET\"",
            "env.\"DATABASE_URL\" (its password)",
        ]
    );
    let message = refused.to_string();
    for said in ["server \"web\"", "${NAME}", "PLURNK_MCP_WORKSPACE_ENV"] {
        assert!(message.contains(said), "{message}");
    }
    for value in ["t0kenvalue", "k3yvalue", "ghp_", "pa$$w0rd", ":b@"] {
        assert!(!message.contains(value), "{message}");
    }
    // References everywhere: nothing to refuse.
    let wire = McpServerDefinition::from_json(
        r#"{"name": "web", "transport": "stdio", "command": "/bin/x",
            "args": ["--token", "${T}", "--api-key=${K}"],
            "env": {"CLIENT_SECRET": "${S}", "DATABASE_URL": "postgres://a:${P}@h/d"}}"#,
    )
    .expect("a wire definition");
    let definition = ServerDefinition::try_from(wire).expect("a definition");
    assert_eq!(definition.refuse_literal_credentials(), Ok(()));
}

#[test]
fn sessions_access_keys_hexadecimal_tokens_and_webhook_urls_are_literal_credentials() {
    const HOOK: &str =
        "https://hooks.slack.com/services/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";
    const HEX: &str = "3f9a0c4e1b7d2a6f8e5c9b0d4a1f7e3c2b6d8a90";
    let stdio = serde_json::json!({
        "name": "web", "transport": "stdio", "command": "/bin/x",
        "args": ["--notify", HOOK, "--rev", HEX,
                 "https://discord.com/api/webhooks/1234567890/AbCdEfGhIjKlMnOpQr-StUvWx"],
        "env": {"SESSION": "s3ss", "SESSION_ID": "abc", "NOTIFY_URL": HOOK, "BUILD": HEX,
                "ACCESS_LOG": "/var/log/x", "GIT_SHA": "v1", "LOG": "debug"}
    });
    assert_eq!(
        literal_credentials(&stdio),
        [
            "args[1] (a webhook URL, whose path is its secret)",
            "args[4] (a webhook URL, whose path is its secret)",
            "env.\"BUILD\" (a token-shaped value)",
            "env.\"NOTIFY_URL\" (a webhook URL, whose path is its secret)",
            "env.\"SESSION\"",
            "env.\"SESSION_ID\"",
        ]
    );
    let http = serde_json::json!({
        "name": "web", "transport": "http", "url": "https://mcp.example/mcp",
        "headers": {"X-Session": "abc", "X-Access": HEX, "X-Sid": "s",
                    "X-Trace": "on", "X-Branch": "main"}
    });
    assert_eq!(
        literal_credentials(&http),
        [
            "headers.\"X-Access\"",
            "headers.\"X-Session\"",
            "headers.\"X-Sid\"",
        ]
    );
    // A token in a URL's path, beside its password.
    let pathed = serde_json::json!({
        "name": "web", "transport": "http",
        "url": "https://mcp.example/t/ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o/mcp"
    });
    assert_eq!(literal_credentials(&pathed), ["url (a token-shaped value)"]);
    for plain in [
        "https://hooks.slack.com/services/",
        "https://hooks.slack.com/services/${SLACK_PATH}",
        "https://discord.com/channels/1/2",
    ] {
        let value = serde_json::json!({"name": "w", "transport": "http", "url": plain});
        assert_eq!(literal_credentials(&value), Vec::<String>::new(), "{plain}");
    }
}

#[test]
fn declined_authorizations_are_refused_with_the_reason() {
    for (kind, what) in [
        (
            "enterprise-managed-authorization",
            "enterprise-managed authorization",
        ),
        ("private-key-jwt", "private-key JWT client authentication"),
    ] {
        let errors =
            McpServerOptions::from_json(&format!(r#"{{"authorization": {{"type": "{kind}"}}}}"#))
                .expect_err("declined");
        let text = errors.to_string();
        assert!(text.contains(what), "{text}");
        assert!(text.contains("declines by design"), "{text}");
        assert!(text.contains("client-credentials"), "{text}");
    }
}

#[test]
fn a_definition_needing_a_feature_the_build_left_out_is_refused_naming_the_feature() {
    use super::check::{Built, Checker, SettingNames};
    let none = Built {
        stdio: false,
        http: false,
        sources: false,
        oauth: false,
        sandbox: false,
    };
    let mut oauth = HttpDefinition::new("https://mcp.example/mcp");
    oauth.authorization = Some(Authorization::OAuth(OAuthAuthorization::new(
        "http://127.0.0.1:8976/callback",
    )));
    let source = Transport::Source(transport::SourceDefinition {
        kind: TransportKind::Cli,
        declaration: std::sync::Arc::new(serde_json::json!({})),
        origin: "tools.json".into(),
    });
    for (transport, feature) in [
        (
            Transport::Stdio(StdioDefinition::new("/usr/bin/server")),
            "stdio",
        ),
        (
            Transport::Http(HttpDefinition::new("https://mcp.example/mcp")),
            "http",
        ),
        (source, "sources"),
        (Transport::Http(oauth), "oauth"),
    ] {
        let names = SettingNames::canonical("gh");
        let mut checker = Checker::new(&names, None).built(Built {
            http: feature == "oauth",
            ..none
        });
        checker.transport(&transport);
        let refused: Vec<String> = checker
            .faults
            .iter()
            .filter(|fault| matches!(fault, ConfigError::FeatureOff { .. }))
            .map(ToString::to_string)
            .collect();
        assert_eq!(refused.len(), 1, "{feature}: {:?}", checker.faults);
        assert!(
            refused[0].contains(&format!("needs the `{feature}` feature of plurnk-mcp")),
            "{}",
            refused[0]
        );
        // The setting is named as the definition's own names spell it.
        assert!(
            refused[0].starts_with("PLURNK_MCP_GH") || refused[0].starts_with("gh.authorization"),
            "{}",
            refused[0]
        );
        // A build with every feature admits it.
        let mut checker = Checker::new(&names, None).built(Built {
            stdio: true,
            http: true,
            sources: true,
            oauth: true,
            sandbox: true,
        });
        checker.transport(&transport);
        assert!(
            !checker
                .faults
                .iter()
                .any(|fault| matches!(fault, ConfigError::FeatureOff { .. })),
            "{feature}: {:?}",
            checker.faults
        );
    }
    // In process needs no feature.
    let names = SettingNames::canonical("mine");
    let mut checker = Checker::new(&names, None).built(none);
    checker.transport(&Transport::InProcess);
    assert!(checker.faults.is_empty(), "{:?}", checker.faults);
}

/// In a build without OAuth, a declared server's OAuth authorization is refused at start,
/// naming its variable and the feature, beside every other fault.
#[cfg(not(feature = "oauth"))]
#[test]
fn without_the_oauth_feature_an_oauth_authorization_is_refused_at_start() {
    let errors = load(&[
        ("PLURNK_MCP_PERSON", "https://mcp.example/mcp"),
        (
            "PLURNK_MCP_PERSON_AUTHORIZATION",
            r#"{"type": "oauth", "redirectUrl": "http://127.0.0.1:8976/callback"}"#,
        ),
        ("PLURNK_MCP_ROBOT", "https://mcp.example/mcp"),
        (
            "PLURNK_MCP_ROBOT_AUTHORIZATION",
            r#"{"type": "client-credentials", "clientId": "robot", "clientSecret": "${SECRET}"}"#,
        ),
    ])
    .expect_err("OAuth needs the feature");
    let shown: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
    for variable in [
        "PLURNK_MCP_PERSON_AUTHORIZATION",
        "PLURNK_MCP_ROBOT_AUTHORIZATION",
    ] {
        assert!(
            shown.iter().any(|error| error.starts_with(variable)
                && error.contains("needs the `oauth` feature of plurnk-mcp")),
            "{shown:?}"
        );
    }
}
