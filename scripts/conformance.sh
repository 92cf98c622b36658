#!/usr/bin/env bash
# The official MCP conformance suite (client leg) against the host, at protocol 2026-07-28.
#
#   scripts/conformance.sh                 # every scenario below, one at a time
#   scripts/conformance.sh tools_call ...  # only these
#
# Installs the peers (scripts/install-peers.sh: Node 22 and @modelcontextprotocol/conformance
# into .cache/), builds the conformance client (crates/cli/src/bin/conformance.rs), then runs each
# scenario alone with
#   conformance client --command <client> --scenario <name> --spec-version <revision> \
#                      [--force] --timeout 120000 -o target/conformance/<name>
# (the revision and --force per scenario: see run_flags below)
# and fails unless, for every scenario, the run exited 0 and its checks.json exists, holds at
# least one check, and has no FAILURE or WARNING check (the suite fails a run on warnings
# too). One summary line per scenario; the suite's own output is in
# target/conformance/<name>/run.log, the client's stderr in .../<name>-<time>/stderr.txt.
# Only loopback traffic: the suite's mock servers listen on localhost.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

SPEC_VERSION="2026-07-28"
TIMEOUT_MS=120000
# Each scenario runs at a revision it applies to: 2026-07-28 unless named below, 2025-11-25
# for those only that revision has, 2025-03-26 for the back-compat ones (removed after it),
# and --force for the extension scenarios, which are on no spec timeline.
SCENARIOS=(
  tools_call
  request-metadata
  sep-2322-client-request-state
  http-standard-headers
  http-custom-headers
  http-invalid-tool-headers
  json-schema-ref-no-deref
  json-schema-2020-12-preservation
  initialize
  sse-retry
  elicitation-sep1034-client-defaults
  auth/metadata-default
  auth/metadata-var1
  auth/metadata-var2
  auth/metadata-var3
  auth/basic-cimd
  auth/scope-from-www-authenticate
  auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined
  auth/scope-step-up
  auth/scope-retry-limit
  auth/token-endpoint-auth-basic
  auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none
  auth/pre-registration
  auth/2025-03-26-oauth-metadata-backcompat
  auth/2025-03-26-oauth-endpoint-fallback
  auth/resource-mismatch
  auth/offline-access-scope
  auth/offline-access-not-supported
  auth/authorization-server-migration
  auth/iss-supported
  auth/iss-not-advertised
  auth/iss-supported-missing
  auth/iss-wrong-issuer
  auth/iss-unexpected
  auth/iss-normalized
  auth/metadata-issuer-mismatch
  auth/client-credentials-basic
  auth/dpop
  auth/dpop-nonce
  auth/wif-jwt-bearer
)
# Declined by the host specification: auth/enterprise-managed-authorization
# (§mcp-ema-deferral) and auth/client-credentials-jwt (private-key JWT client authentication is
# a declared non-goal, §oauth-client-credentials).
# The spec version a scenario runs at, and any extra flag.
run_flags() {
  case "$1" in
    initialize | sse-retry | elicitation-sep1034-client-defaults)
      echo "--spec-version 2025-11-25" ;;
    auth/2025-03-26-*)
      echo "--spec-version 2025-03-26" ;;
    auth/client-credentials-basic | auth/dpop | auth/dpop-nonce | auth/wif-jwt-bearer)
      echo "--spec-version $SPEC_VERSION --force" ;;
    *) echo "--spec-version $SPEC_VERSION" ;;
  esac
}
if [[ $# -gt 0 ]]; then
  SCENARIOS=("$@")
fi

log() { echo "conformance: $*" >&2; }

bash scripts/install-peers.sh
# shellcheck source=/dev/null
. .cache/peers.env
[[ -x "$NODE22" && -f "$CONFORMANCE" ]] || { log "peers.env names no usable NODE22/CONFORMANCE"; exit 1; }

# The command line's crate names its conformance client plurnk-mcp-conformance.
BIN=plurnk-mcp-conformance
log "building $BIN"
cargo build --quiet -p plurnk-mcp-cli --bin "$BIN"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CLIENT="$TARGET_DIR/debug/$BIN"
[[ -x "$CLIENT" ]] || { log "missing $CLIENT after the build"; exit 1; }
# The suite splits --command on spaces.
[[ "$CLIENT" != *" "* ]] || { log "the client path has a space, which the suite cannot run: $CLIENT"; exit 1; }

OUT="$TARGET_DIR/conformance"
NODE_BIN="$(dirname "$NODE22")"
# Loopback only: keep any proxy configuration away from the mock servers.
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
export NO_PROXY="localhost,127.0.0.1,::1" no_proxy="localhost,127.0.0.1,::1"

# count FILE -> "<checks> <success> <failure> <warning>" (or nothing if unreadable)
count() {
  "$NODE22" -e '
    const checks = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    if (!Array.isArray(checks)) process.exit(1);
    const n = (s) => checks.filter((c) => c.status === s).length;
    console.log(`${checks.length} ${n("SUCCESS")} ${n("FAILURE")} ${n("WARNING")}`);
    for (const c of checks)
      if (c.status === "FAILURE" || c.status === "WARNING")
        console.error(`    ${c.status} ${c.id} (${c.name}): ${c.errorMessage ?? c.description}`);
  ' "$1"
}

failed=()
for scenario in "${SCENARIOS[@]}"; do
  dir="$OUT/$scenario"
  rm -rf "$dir"
  mkdir -p "$dir"
  code=0
  # Node 22 first on PATH for the suite run only.
  PATH="$NODE_BIN:$PATH" "$NODE22" "$CONFORMANCE" client \
    --command "$CLIENT" --scenario "$scenario" $(run_flags "$scenario") \
    --timeout "$TIMEOUT_MS" -o "$dir" >"$dir/run.log" 2>&1 || code=$?
  # The suite writes <dir>/<scenario>-<timestamp>/checks.json.
  checks="$(find "$dir" -name checks.json -print -quit)"
  if [[ -z "$checks" ]]; then
    echo "FAIL $scenario: exit $code, no checks.json (see ${dir#"$ROOT"/}/run.log)"
    failed+=("$scenario"); continue
  fi
  if ! read -r total passed nfail nwarn < <(count "$checks" 2>"$dir/problems.txt"); then
    echo "FAIL $scenario: exit $code, unreadable $checks"
    failed+=("$scenario"); continue
  fi
  if [[ $code -eq 0 && $total -gt 0 && $nfail -eq 0 && $nwarn -eq 0 ]]; then
    echo "ok   $scenario: $passed passed, 0 failed ($total checks)"
  else
    echo "FAIL $scenario: exit $code, $passed passed, $nfail failed, $nwarn warnings ($total checks)"
    sed 's/^/  /' "$dir/problems.txt"
    [[ $total -gt 0 ]] || echo "    checks.json has no checks"
    # The client's own verdict, when it failed.
    grep -h 'FAILED:' "$(dirname "$checks")/stderr.txt" 2>/dev/null | sed 's/^/    client: /' || true
    failed+=("$scenario")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  log "${#failed[@]} of ${#SCENARIOS[@]} scenario(s) failed: ${failed[*]}"
  exit 1
fi
log "all ${#SCENARIOS[@]} scenario(s) passed"
