//! The hidden `plurnk-mcp fixture`: the fixture server, the conformance fixture or a hostile
//! server, over stdio or HTTP.

use std::process::ExitCode;

use super::fail;

pub(crate) async fn fixture(
    options: plurnk_mcp_fixture::FixtureOptions,
    http: Option<std::net::SocketAddr>,
) -> ExitCode {
    match http {
        None => finished(plurnk_mcp_fixture::serve_stdio(options).await),
        Some(address) => {
            serve_fixture_http(address, |listener, shutdown| {
                plurnk_mcp_fixture::serve_http(listener, options, shutdown)
            })
            .await
        }
    }
}

/// `plurnk-mcp fixture --conformance [--http ADDR]`: the conformance fixture on stdio, or on
/// `address` (printing the one `listening` line the fixture prints) until ctrl-c.
pub(crate) async fn conformance_fixture(http: Option<std::net::SocketAddr>) -> ExitCode {
    match http {
        None => finished(plurnk_mcp_fixture::conformance::serve_stdio().await),
        Some(address) => {
            serve_fixture_http(address, plurnk_mcp_fixture::conformance::serve_http).await
        }
    }
}

/// Binds `address`, prints the one `listening http://ADDRESS/mcp` line the tests read, and
/// serves with `serve` until ctrl-c.
async fn serve_fixture_http<F, Fut>(address: std::net::SocketAddr, serve: F) -> ExitCode
where
    F: FnOnce(tokio::net::TcpListener, tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => return fail(format!("could not bind {address}: {error}")),
    };
    match listener.local_addr() {
        Ok(bound) => outln!("listening http://{bound}/mcp"),
        Err(error) => return fail(error),
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    finished(serve(listener, shutdown).await)
}

/// A fixture's end as an exit code.
fn finished(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format!("fixture: {error:#}")),
    }
}

/// `plurnk-mcp fixture --hostile MODE --http ADDR`: a hostile HTTP server on `address`, which
/// prints the one `listening` line the good one prints and serves until it is killed.
pub(crate) fn hostile_http(
    mode: plurnk_mcp_fixture::hostile_http::HttpMode,
    address: std::net::SocketAddr,
) -> ExitCode {
    let listener = match std::net::TcpListener::bind(address) {
        Ok(listener) => listener,
        Err(error) => return fail(format!("could not bind {address}: {error}")),
    };
    match listener.local_addr() {
        Ok(bound) => outln!("listening http://{bound}/mcp"),
        Err(error) => return fail(error),
    }
    match plurnk_mcp_fixture::hostile_http::serve(mode, listener) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format!("fixture: {error}")),
    }
}

/// The hidden `fixture` command's flags.
#[derive(clap::Args)]
pub(crate) struct FixtureArgs {
    /// Be a legacy-only peer (answers server/discover with method-not-found).
    #[arg(long)]
    legacy: bool,
    /// Serve the conformance fixture instead: the catalog the MCP conformance suite's
    /// server scenarios call (only --http applies).
    #[arg(long)]
    conformance: bool,
    /// The server name.
    #[arg(long, default_value = "fixture")]
    name: String,
    /// Serve Streamable HTTP on this address instead of stdio.
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// HTTP: require `Authorization: Bearer <TOKEN>`.
    #[arg(long)]
    bearer: Option<String>,
    /// How tools/list pages: single, one-per-page, repeat-cursor, endless.
    #[arg(long, default_value = "single")]
    paging: String,
    /// The ttlMs every tools/list page carries.
    #[arg(long)]
    list_ttl_ms: Option<u64>,
    /// The ttlMs every page of resources/list, resources/templates/list and prompts/list
    /// carries.
    #[arg(long)]
    catalog_ttl_ms: Option<u64>,
    /// The ttlMs of the server/discover answer (whose instructions then count answers).
    #[arg(long)]
    discover_ttl_ms: Option<u64>,
    /// Report to the test probe at this address (127.0.0.1:PORT); enables `gate`.
    #[arg(long)]
    probe: Option<String>,
    /// With --probe: hold every tools/list page until the probe releases it.
    #[arg(long)]
    hold_lists: bool,
    /// Offer tools only (no resources, no prompts).
    #[arg(long)]
    tools_only: bool,
    /// Offer completions (answered empty).
    #[arg(long)]
    completions: bool,
    /// The serverInfo.description to report instead of the fixture's own.
    #[arg(long)]
    description: Option<String>,
    /// Be a hostile stdio server instead: notify-flood, ping-flood, no-read,
    /// stderr-flood, stderr-binary, many-tools, heavy-pages, huge-message, slow-pages,
    /// immortal or escape. With --http, a hostile HTTP server: notify-flood,
    /// huge-message, huge-event or stall.
    #[arg(long)]
    hostile: Option<String>,
}

impl FixtureArgs {
    /// Serves the fixture these flags ask for.
    pub(crate) async fn run(self) -> ExitCode {
        let Self {
            legacy,
            conformance,
            name,
            http,
            bearer,
            paging,
            list_ttl_ms,
            catalog_ttl_ms,
            discover_ttl_ms,
            probe,
            hold_lists,
            tools_only,
            completions,
            description,
            hostile,
        } = self;
        if conformance {
            return conformance_fixture(http).await;
        }
        if let (Some(name), Some(address)) = (&hostile, http) {
            let Some(mode) = plurnk_mcp_fixture::hostile_http::HttpMode::parse(name) else {
                eprintln!(
                    "plurnk-mcp fixture: unknown --hostile {name:?} over HTTP: use notify-flood, huge-message, huge-event or stall"
                );
                return ExitCode::from(2);
            };
            return hostile_http(mode, address);
        }
        if let Some(name) = hostile {
            let Some(mode) = plurnk_mcp_fixture::hostile::Mode::parse(&name) else {
                eprintln!("plurnk-mcp fixture: unknown --hostile {name:?}");
                return ExitCode::from(2);
            };
            return match plurnk_mcp_fixture::hostile::run(mode) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("plurnk-mcp fixture: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        let paging = match paging.as_str() {
            "single" => plurnk_mcp_fixture::Paging::Single,
            "one-per-page" => plurnk_mcp_fixture::Paging::OnePerPage,
            "repeat-cursor" => plurnk_mcp_fixture::Paging::RepeatCursor,
            "endless" => plurnk_mcp_fixture::Paging::Endless,
            other => {
                eprintln!(
                    "plurnk-mcp fixture: unknown --paging {other:?}: use single, one-per-page, repeat-cursor or endless"
                );
                return ExitCode::from(2);
            }
        };
        let options = plurnk_mcp_fixture::FixtureOptions {
            legacy,
            name,
            bearer,
            paging,
            list_ttl_ms,
            catalog_ttl_ms,
            discover_ttl_ms,
            probe,
            hold_lists,
            tools_only,
            completions,
            description,
        };
        fixture(options, http).await
    }
}
