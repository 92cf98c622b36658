//! What the gateway refuses at start and at its door: no bearer off loopback, unprefixed
//! serving of more than one server, bounds out of range.

#[allow(unused_imports)]
use super::*;

#[test]
fn off_loopback_the_gateway_needs_a_bearer_token_and_checks_it_without_showing_it() {
    let mut env = fixture("solo", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["solo"]).to_string()));
    // Off loopback without a token: refused before anything listens.
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-refused.sqlite"))
        .args(["serve", "--transport", "http", "--listen", "0.0.0.0:0"])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("not loopback") && said.contains("--bearer-env"),
        "{said}"
    );

    // With a token: a request without it is 401, with it answered; the token is never shown.
    let token = "gateway-sentinel-token-7a1c9e";
    let mut vars = env.clone();
    vars.push(("GATEWAY_TOKEN".into(), token.into()));
    let served = Served::start(
        &[
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--bearer-env",
            "GATEWAY_TOKEN",
        ],
        &vars,
        true,
    );
    let url = served.url.clone().expect("url");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": modern_meta()}});
    let (status, body) = raw_post(&url, &list, &[("Mcp-Method", "tools/list")]);
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains(token));
    let (status, _) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", "Bearer wrong-token-000000"),
        ],
    );
    assert_eq!(status, 401);
    let bearer = format!("Bearer {token}");
    let (status, body) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", bearer.as_str()),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("solo_echo"), "{body}");
    // A page a browser was tricked into sending is refused (DNS rebinding).
    let (status, _) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", bearer.as_str()),
            ("Origin", "http://evil.example.com"),
        ],
    );
    assert_eq!(status, 403);
    assert!(!served.stderr().contains(token), "{}", served.stderr());

    // A token short enough to guess: refused before anything listens, naming the variable
    // and not the token.
    let mut vars = env.clone();
    vars.push(("SHORT_TOKEN".into(), "guessable-12".into()));
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-short.sqlite"))
        .args([
            "serve",
            "--transport",
            "http",
            "--bearer-env",
            "SHORT_TOKEN",
        ])
        .env_clear()
        .envs(vars.iter().cloned())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("--bearer-env SHORT_TOKEN")
            && said.contains("12 bytes")
            && said.contains("at least 16"),
        "{said}"
    );
    assert!(!said.contains("guessable-12"), "{said}");
}

#[test]
fn unprefixed_serving_needs_exactly_one_enabled_server() {
    let mut env = fixture("one", &[]);
    env.extend(fixture("two", &[]));
    env.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["one", "two"]).to_string(),
    ));
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-unprefixed.sqlite"))
        .args(["serve", "--unprefixed"])
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("exactly one") && said.contains("one, two"),
        "{said}"
    );
}

#[test]
fn gateway_bounds_out_of_range_are_all_refused_at_start() {
    let mut env = fixture("solo", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["solo"]).to_string()));
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-bounds.sqlite"))
        .args([
            "serve",
            "--transport",
            "http",
            "--max-connections",
            "0",
            "--header-timeout-ms",
            "0",
            "--max-body-bytes",
            "10",
        ])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "--max-connections is 0: give 1 or more",
        "--header-timeout-ms is 0 ms: give between 1 and 86400000 milliseconds",
        "--max-body-bytes is 10: give 1024 or more",
    ] {
        assert!(said.contains(expected), "{expected} in {said}");
    }
    // Over stdio they mean nothing, and saying so beats ignoring them.
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-bounds.sqlite"))
        .args(["serve", "--max-sessions", "5"])
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--transport http only"), "{said}");
}
