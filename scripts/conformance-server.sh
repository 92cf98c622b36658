#!/usr/bin/env bash
# The official MCP conformance suite (server leg) against plurnk-mcp's gateway, at 2026-07-28.
#
#   scripts/conformance-server.sh                        # the gateway, every scenario
#   scripts/conformance-server.sh --fixture              # the conformance fixture itself
#   scripts/conformance-server.sh --url URL              # any server at URL
#   scripts/conformance-server.sh [...] NAME ...         # only these scenarios
#
# By default it builds plurnk-mcp and starts the gateway, `plurnk-mcp serve --transport http
# --unprefixed`, on a workspace whose one server is the conformance fixture over stdio
# (`plurnk-mcp fixture --conformance`: the catalog the scenarios call, under the suite's names,
# crates/fixture/src/conformance.rs); the suite talks to the gateway only, and everything it
# sees went through the host. With --fixture it starts the fixture over HTTP instead. It reads
# the address the server prints and stops it on exit. Then it runs each scenario alone with
#   conformance server --url <url> --scenario <name> --spec-version 2026-07-28 \
#                      -o target/conformance-server/<name>
# and fails unless, for every scenario, the run exited 0 and its checks.json exists, holds at
# least one check, and has no FAILURE or WARNING check. One summary line per scenario; the
# suite's own output is in target/conformance-server/<name>/run.log, the server's stderr in
# target/conformance-server/server.stderr. Only loopback traffic.
#
# The scenarios are the `server:` list the suite scores for 2026-07-28
# (requirements/2026-07-28.yaml in the suite's package): all 37 apply to a gateway.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

SPEC_VERSION="2026-07-28"
SCENARIOS=(
  server-stateless
  completion-complete
  tools-list
  tools-call-simple-text
  tools-call-image
  tools-call-audio
  tools-call-embedded-resource
  tools-call-mixed-content
  tools-call-error
  tools-call-with-progress
  server-sse-multiple-streams
  resources-list
  resources-read-text
  resources-read-binary
  resources-templates-read
  sep-2164-resource-not-found
  prompts-list
  prompts-get-simple
  prompts-get-with-args
  prompts-get-embedded-resource
  prompts-get-with-image
  dns-rebinding-protection
  caching
  input-required-result-basic-elicitation
  input-required-result-basic-sampling
  input-required-result-basic-list-roots
  input-required-result-request-state
  input-required-result-multiple-input-requests
  input-required-result-multi-round
  input-required-result-missing-input-response
  input-required-result-non-tool-request
  input-required-result-result-type
  input-required-result-unsupported-methods
  input-required-result-tampered-state
  input-required-result-capability-check
  input-required-result-ignore-extra-params
  input-required-result-validate-input
)

URL=""
TARGET="gateway"
picked=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --url)
      [[ $# -ge 2 ]] || { echo "conformance-server: --url needs a value" >&2; exit 2; }
      URL="$2"; shift 2 ;;
    --url=*) URL="${1#--url=}"; shift ;;
    --fixture) TARGET="fixture"; shift ;;
    -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "conformance-server: unknown option $1" >&2; exit 2 ;;
    *) picked+=("$1"); shift ;;
  esac
done
if [[ ${#picked[@]} -gt 0 ]]; then
  SCENARIOS=("${picked[@]}")
fi

log() { echo "conformance-server: $*" >&2; }

bash scripts/install-peers.sh
# shellcheck source=/dev/null
. .cache/peers.env
[[ -x "$NODE22" && -f "$CONFORMANCE" ]] || { log "peers.env names no usable NODE22/CONFORMANCE"; exit 1; }

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET_DIR/conformance-server"
mkdir -p "$OUT"
NODE_BIN="$(dirname "$NODE22")"
# Loopback only: keep any proxy configuration away from the server under test.
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
export NO_PROXY="localhost,127.0.0.1,::1" no_proxy="localhost,127.0.0.1,::1"

FIXTURE_PID=""
stop_fixture() {
  if [[ -n "$FIXTURE_PID" ]] && kill -0 "$FIXTURE_PID" 2>/dev/null; then
    kill "$FIXTURE_PID" 2>/dev/null || true
    wait "$FIXTURE_PID" 2>/dev/null || true
  fi
}
trap stop_fixture EXIT

if [[ -z "$URL" ]]; then
  log "building plurnk-mcp"
  cargo build --quiet -p plurnk-mcp-cli --bin plurnk-mcp
  BIN="$TARGET_DIR/debug/plurnk-mcp"
  [[ -x "$BIN" ]] || { log "missing $BIN after the build"; exit 1; }
  # Each prints where it listens once it is bound: the fixture `listening http://IP:PORT/mcp`
  # on stdout, the gateway `... at http://IP:PORT/mcp` on stderr.
  if [[ "$TARGET" == "fixture" ]]; then
    "$BIN" fixture --conformance --http 127.0.0.1:0 >"$OUT/server.stdout" 2>"$OUT/server.stderr" &
    ANNOUNCED="$OUT/server.stdout"
  else
    rm -f "$OUT/gateway.sqlite"
    env -i PATH="$PATH" HOME="${HOME:-/}" \
      PLURNK_MCP_CONFORMANCE="$BIN" PLURNK_MCP_CONFORMANCE_ARGS='["fixture","--conformance"]' \
      PLURNK_MCP_ENABLED='["conformance"]' \
      "$BIN" --state "$OUT/gateway.sqlite" serve --transport http --listen 127.0.0.1:0 --unprefixed \
      >"$OUT/server.stdout" 2>"$OUT/server.stderr" &
    ANNOUNCED="$OUT/server.stderr"
  fi
  FIXTURE_PID=$!
  URL=""
  for _ in $(seq 300); do
    URL="$(grep -o 'http://[^ ]*/mcp' "$ANNOUNCED" 2>/dev/null | head -n 1 || true)"
    [[ -n "$URL" ]] && break
    kill -0 "$FIXTURE_PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$URL" ]] || {
    log "the $TARGET printed no address (see ${OUT#"$ROOT"/}/server.stderr)"; exit 1; }
  log "$TARGET at $URL"
fi

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
  PATH="$NODE_BIN:$PATH" "$NODE22" "$CONFORMANCE" server \
    --url "$URL" --scenario "$scenario" --spec-version "$SPEC_VERSION" \
    -o "$dir" >"$dir/run.log" 2>&1 || code=$?
  # The suite writes <dir>/<scenario>-<timestamp>/checks.json (or checks.json in <dir>).
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
    failed+=("$scenario")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  log "${#failed[@]} of ${#SCENARIOS[@]} scenario(s) failed: ${failed[*]}"
  exit 1
fi
log "all ${#SCENARIOS[@]} scenario(s) passed against $URL"
