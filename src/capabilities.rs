//! The accountable capability matrix (§mcp-capability-matrix): one row per MCP surface or
//! extension with its disposition and the tests that prove it. The client capabilities this
//! host advertises on the wire are derived from it, so nothing reaches the wire that a row
//! does not claim.

use serde_json::{Map, Value, json};

/// How far the host supports a surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Every layer of the surface is implemented and covered.
    Supported,
    /// Implemented in part; the row's note says what is missing.
    Partial,
    /// Deliberately not implemented (deprecated, removed, or out of scope).
    Excluded,
    /// Not implemented yet.
    Deferred,
}

/// Whether a row puts anything into the advertised client capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advertisement {
    /// Always advertised, with this capability JSON under this key.
    Always(&'static str, &'static str),
    /// Advertised only when the connection speaks 2026-07-28 (`server/discover`): the
    /// surface has no such shape in 2025-11-25, which a legacy `initialize` offers.
    Modern(&'static str, &'static str),
    /// Advertised under `extensions` only by a connection that authorizes with the OAuth
    /// client-credentials grant (the extension says the client can take part in it).
    Grant(&'static str),
    /// Never advertised (server-side surfaces need no client capability).
    Never,
}

/// One row of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The surface or extension.
    pub surface: &'static str,
    /// Where its contract comes from.
    pub authority: &'static str,
    /// How far it is supported.
    pub disposition: Disposition,
    /// What it advertises.
    pub advertisement: Advertisement,
    /// Test functions (by name) that prove it; required for supported rows.
    pub evidence: &'static [&'static str],
    /// For each mode the row advertises (a key of its capability JSON: `form`, `url`, an
    /// extension's name), the test under `crates/cli/tests` that drives it end to end
    /// against a real server.
    pub end_to_end: &'static [(&'static str, &'static str)],
    /// What is missing, for partial and deferred rows; why, for excluded ones.
    pub note: &'static str,
}

/// The matrix.
pub const MATRIX: &[Row] = &[
    Row {
        surface: "base/negotiation",
        authority: "MCP 2026-07-28 server/discover; 2025-11-25 initialize",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &["modern_and_legacy_negotiate_over_stdio_and_http"],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "tools",
        authority: "MCP 2026-07-28 tools/list, tools/call",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "tools_and_read_filter_the_catalog_and_set_effects",
            "deadlines_cancellation_and_tool_errors_settle_calls",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "pagination",
        authority: "MCP 2026-07-28 cursors",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &["pagination_is_drained_and_a_non_converging_server_is_refused"],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "resources",
        authority: "MCP 2026-07-28 resources/list, resources/templates/list, resources/read",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "server_everything_resources_prompts_completion_and_progress",
            "python_peer_resources_prompts_completion_errors_and_content",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "prompts",
        authority: "MCP 2026-07-28 prompts/list, prompts/get",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "server_everything_resources_prompts_completion_and_progress",
            "python_peer_resources_prompts_completion_errors_and_content",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "completion",
        authority: "MCP 2026-07-28 completion/complete",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "server_everything_resources_prompts_completion_and_progress",
            "python_peer_resources_prompts_completion_errors_and_content",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "progress",
        authority: "MCP 2026-07-28 notifications/progress",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "progress_reaches_the_caller_and_can_extend_the_deadline",
            "server_everything_resources_prompts_completion_and_progress",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "cancellation",
        authority: "MCP 2026-07-28 notifications/cancelled; HTTP stream closure; §mcp-setup shutdown order",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "deadlines_cancellation_and_tool_errors_settle_calls",
            "one_deadline_owns_every_round_and_the_task_and_the_server_is_told",
            "a_sigterm_tells_every_server_of_the_work_it_stops",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "mrtr",
        authority: "MCP 2026-07-28 input_required / inputResponses / requestState; §mcp-host-composition one lifecycle",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "elicitation_rounds_go_through_the_interaction",
            "one_deadline_owns_every_round_and_the_task_and_the_server_is_told",
        ],
        end_to_end: &[],
        note: "",
    },
    Row {
        surface: "elicitation",
        authority: "MCP 2026-07-28 elicitation (form, url) through MRTR",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Always("elicitation", r#"{"form":{},"url":{}}"#),
        evidence: &[
            "elicitation_rounds_go_through_the_interaction",
            "a_legacy_peers_elicitation_goes_to_the_hosts_interaction",
            "a_legacy_servers_question_goes_to_the_caller_whose_call_is_in_flight",
            "form_answers_are_checked_against_the_schema",
            "url_elicitations_read_and_reject_content",
        ],
        end_to_end: &[
            ("form", "elicitation_rounds_go_through_the_interaction"),
            ("url", "url_elicitations_reach_the_interaction_end_to_end"),
        ],
        note: "",
    },
    Row {
        surface: "caching",
        authority: "MCP 2026-07-28 ttlMs / cacheScope",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Never,
        evidence: &[
            "resource_reads_honour_the_servers_ttl",
            "a_tool_list_is_fetched_again_when_its_ttl_passes",
            "a_discover_answer_is_kept_whole_and_asked_again_when_its_ttl_passes",
        ],
        end_to_end: &[],
        note: "resources/read honours ttlMs, each answer kept whole per connection (no stale serving, forgotten on resources/updated); every list (tools, resources, templates, prompts) is fetched again when the shortest ttlMs it gave passes (at most once a second) and on change notifications; a discover answer is kept whole (supportedVersions, ttlMs, cacheScope in Negotiated::discovery) and asked again when its ttlMs passes, its new identity, capabilities and instructions published (a server that stops listing the negotiated revision is connected again)",
    },
    Row {
        surface: "subscriptions",
        authority: "MCP 2026-07-28 subscriptions/listen; 2025-11-25 list_changed notifications",
        disposition: Disposition::Partial,
        advertisement: Advertisement::Never,
        evidence: &[
            "a_list_change_commits_only_after_in_flight_calls_settle",
            "resource_updates_reach_the_events_stream",
        ],
        end_to_end: &[],
        note: "list changes and the resource URIs read are in the filter (overlapping replacement, re-listen after a loss); Task ids are not, since Tasks are followed by polling tasks/get",
    },
    Row {
        surface: "io.modelcontextprotocol/tasks",
        authority: "experimental-ext-tasks 2c1425d9",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Modern(
            "extensions",
            r#"{"io.modelcontextprotocol/tasks":{}}"#,
        ),
        evidence: &[
            "tasks_are_driven_to_their_end_through_the_original_call",
            "one_deadline_owns_every_round_and_the_task_and_the_server_is_told",
            "a_sigterm_tells_every_server_of_the_work_it_stops",
            "a_legacy_initialize_offers_only_what_2025_11_25_has",
        ],
        end_to_end: &[(
            "io.modelcontextprotocol/tasks",
            "tasks_are_driven_to_their_end_through_the_original_call",
        )],
        note: "",
    },
    Row {
        surface: "authorization/oauth",
        authority: "MCP 2026-07-28 authorization",
        disposition: Disposition::Partial,
        advertisement: Advertisement::Never,
        evidence: &[
            "a_person_authorizes_through_oauth_complete_and_the_token_is_refreshed_until_revoked",
            "an_application_authorizes_with_client_credentials_bound_to_its_issuer",
            "an_oauth_server_that_cannot_be_authorized_fails_clearly_and_gets_no_secret",
            "a_daemon_without_a_browser_authorizes_with_the_device_grant",
            "a_workload_exchanges_its_identity_token_and_again_once_the_token_expires",
            "only_a_client_credentials_connection_advertises_that_extension",
            "the_command_line_authorizes_through_a_browser_and_with_a_device_code",
        ],
        end_to_end: &[],
        note: "interactive OAuth (oauth_complete) and the client-credentials grant through rmcp's \
               auth, scored by the suite's OAuth scenarios in scripts/conformance.sh; a refused \
               live token re-authorizes from its challenge (step-up, migration); the device \
               grant (authorize_device, poll_device); a workload's identity token through \
               the JWT-bearer grant (workload-identity); DPoP-bound tokens wherever the \
               authorization server advertises ES256 proofs (protocol/auth/dpop.rs)",
    },
    Row {
        surface: "sampling",
        authority: "deprecated (§mcp-exclusions)",
        disposition: Disposition::Excluded,
        advertisement: Advertisement::Never,
        evidence: &[],
        end_to_end: &[],
        note: "deprecated; an input request for sampling fails the call before any interaction",
    },
    Row {
        surface: "roots",
        authority: "deprecated (§mcp-exclusions)",
        disposition: Disposition::Excluded,
        advertisement: Advertisement::Never,
        evidence: &[],
        end_to_end: &[],
        note: "deprecated; a legacy server's roots/list is answered -32601 (method not found), as sampling is",
    },
    Row {
        surface: "logging",
        authority: "deprecated (§mcp-exclusions)",
        disposition: Disposition::Excluded,
        advertisement: Advertisement::Never,
        evidence: &[],
        end_to_end: &[],
        note: "deprecated; server stderr is kept instead",
    },
    Row {
        surface: "mcp-apps",
        authority: "§mcp-apps-exclusion",
        disposition: Disposition::Excluded,
        advertisement: Advertisement::Never,
        evidence: &[],
        end_to_end: &[],
        note: "no sandbox-capable client",
    },
    Row {
        surface: "io.modelcontextprotocol/oauth-client-credentials",
        authority: "MCP extension oauth-client-credentials (§oauth-client-credentials)",
        disposition: Disposition::Supported,
        advertisement: Advertisement::Grant("io.modelcontextprotocol/oauth-client-credentials"),
        evidence: &[
            "an_application_authorizes_with_client_credentials_bound_to_its_issuer",
            "only_a_client_credentials_connection_advertises_that_extension",
        ],
        end_to_end: &[(
            "io.modelcontextprotocol/oauth-client-credentials",
            "an_application_authorizes_with_client_credentials_bound_to_its_issuer",
        )],
        note: "client secret (basic or post) through rmcp's auth, DPoP-bound where offered; \
               private-key JWT client authentication is a non-goal",
    },
    Row {
        surface: "io.modelcontextprotocol/enterprise-managed-authorization",
        authority: "§mcp-ema-deferral",
        disposition: Disposition::Excluded,
        advertisement: Advertisement::Never,
        evidence: &[],
        end_to_end: &[],
        note: "enterprise deployment policy, not host mechanics",
    },
];

/// The extensions a connection authorizing with the client-credentials grant advertises
/// besides [`client_capabilities`], from [`MATRIX`].
pub fn grant_extensions() -> impl Iterator<Item = &'static str> {
    MATRIX.iter().filter_map(|row| match row.advertisement {
        Advertisement::Grant(extension) => Some(extension),
        _ => None,
    })
}

/// The client capabilities advertised on the wire, derived from [`MATRIX`]: on a
/// 2026-07-28 connection, or (`legacy`) on one negotiated through `initialize`, which leaves
/// out the rows only 2026-07-28 has.
pub fn client_capabilities(legacy: bool) -> Value {
    let mut capabilities = Map::new();
    for row in MATRIX {
        let (key, value) = match row.advertisement {
            Advertisement::Always(key, value) => (key, value),
            Advertisement::Modern(key, value) if !legacy => (key, value),
            Advertisement::Modern(..) | Advertisement::Grant(_) | Advertisement::Never => {
                continue;
            }
        };
        if matches!(
            row.disposition,
            Disposition::Supported | Disposition::Partial
        ) {
            let value = serde_json::from_str(value).unwrap_or_else(|_| json!({}));
            capabilities.insert(key.to_owned(), value);
        }
    }
    Value::Object(capabilities)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn rows_are_unique() {
        let mut seen = HashSet::new();
        for row in MATRIX {
            assert!(seen.insert(row.surface), "{} appears twice", row.surface);
        }
    }

    #[test]
    fn excluded_and_deferred_rows_advertise_nothing() {
        for row in MATRIX {
            if matches!(
                row.disposition,
                Disposition::Excluded | Disposition::Deferred
            ) {
                assert_eq!(row.advertisement, Advertisement::Never, "{}", row.surface);
            }
        }
        let advertised = client_capabilities(false);
        for key in ["sampling", "roots", "tasks"] {
            assert!(advertised.get(key).is_none(), "{key} reached the wire");
        }
    }

    #[test]
    fn non_supported_rows_say_why() {
        for row in MATRIX {
            if row.disposition != Disposition::Supported {
                assert!(!row.note.is_empty(), "{} needs a note", row.surface);
            }
        }
    }

    /// The text of every Rust file under `folders` of the repository.
    fn rust_sources(folders: &[&str]) -> String {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut sources = String::new();
        let mut stack: Vec<_> = folders.iter().map(|folder| root.join(folder)).collect();
        while let Some(path) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    sources.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        sources
    }

    #[test]
    fn every_supported_row_cites_tests_that_exist() {
        let sources = rust_sources(&["tests", "crates/cli/tests", "crates/cli/src", "src"]);
        for row in MATRIX {
            if matches!(
                row.disposition,
                Disposition::Supported | Disposition::Partial
            ) {
                assert!(!row.evidence.is_empty(), "{} cites no test", row.surface);
                for test in row.evidence {
                    assert!(
                        sources.contains(&format!("fn {test}(")),
                        "{} cites {test}, which does not exist",
                        row.surface
                    );
                }
            }
        }
    }

    #[test]
    fn the_advertisement_is_exactly_the_matrix() {
        let advertised = client_capabilities(false);
        let expected: Vec<&str> = MATRIX
            .iter()
            .filter_map(|row| match row.advertisement {
                Advertisement::Always(key, _) | Advertisement::Modern(key, _) => Some(key),
                Advertisement::Grant(_) | Advertisement::Never => None,
            })
            .collect();
        let keys: Vec<&str> = advertised
            .as_object()
            .map(|map| map.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys, expected);
        assert_eq!(advertised["elicitation"], json!({"form": {}, "url": {}}));
        assert_eq!(
            advertised["extensions"],
            json!({"io.modelcontextprotocol/tasks": {}})
        );
    }

    #[test]
    fn a_legacy_initialize_offers_only_what_2025_11_25_has() {
        let legacy = client_capabilities(true);
        assert!(legacy.get("extensions").is_none(), "{legacy}");
        assert_eq!(legacy["elicitation"], json!({"form": {}, "url": {}}));
    }

    #[test]
    fn every_mode_the_host_advertises_is_driven_end_to_end() {
        // The integration tests: the library's own (`tests/`) and the command line's.
        let integration = rust_sources(&["tests", "crates/cli/tests"]);
        for row in MATRIX {
            let modes: Vec<String> = match row.advertisement {
                Advertisement::Always(_, value) | Advertisement::Modern(_, value) => {
                    serde_json::from_str::<Value>(value)
                        .ok()
                        .and_then(|value| value.as_object().map(|o| o.keys().cloned().collect()))
                        .unwrap_or_default()
                }
                Advertisement::Grant(extension) => vec![extension.to_owned()],
                Advertisement::Never => continue,
            };
            for mode in modes {
                let test = row
                    .end_to_end
                    .iter()
                    .find(|(named, _)| *named == mode)
                    .map(|(_, test)| *test)
                    .unwrap_or_else(|| {
                        panic!("{} advertises {mode} with no end-to-end test", row.surface)
                    });
                assert!(
                    integration.contains(&format!("fn {test}(")),
                    "{} cites {test} for {mode}, which is no test under crates/cli/tests",
                    row.surface
                );
            }
        }
    }
}
