#!/usr/bin/env bash
# Install the third-party MCP test peers into <repo>/.cache/ (git-ignored).
#
#   scripts/install-peers.sh          # install what is missing, then write .cache/peers.env
#   scripts/install-peers.sh --force  # reinstall everything
#
# Installs (only from the package registries, by name, exact versions):
#   .cache/node22  Node 22 from npm (`node` package), for the conformance CLI (needs fs.globSync)
#   .cache/npm     @modelcontextprotocol/server-everything, @modelcontextprotocol/conformance,
#                  @modelcontextprotocol/client (the TypeScript v2 client, crates/cli/tests/peers/gateway_client.mjs),
#                  oidc-provider and @modelcontextprotocol/sdk (crates/cli/tests/peers/oauth_world.mjs)
#   .cache/venv    Python venv with the MCP Python SDK (crates/cli/tests/peers/python_server.py)
#   .cache/otel-venv  the MCP Python SDK with OpenTelemetry's Python SDK and OTLP/HTTP exporter
#                  (crates/cli/tests/peers/otel_peer.py, the traced client and server)
#   .cache/mcp-proxy  npm's mcp-proxy, the gateway users already run, which the gateway
#                  benchmark (scripts/bench.sh --gateway) puts beside `plurnk-mcp serve`
#   .cache/zoo-npm, .cache/zoo-venv, .cache/zoo-sqlite
#                  the zoo: published servers people install (crates/cli/tests/zoo.rs and the
#                  zoo benchmark): from npm server-filesystem, server-memory,
#                  server-sequential-thinking and @playwright/mcp (server-everything is above);
#                  from PyPI mcp-server-time, mcp-server-git, mcp-server-fetch and
#                  excel-mcp-server in one venv, and mcp-server-sqlite in a venv of its own,
#                  since it crashes on `mcp` 2.x
# and writes .cache/peers.env with absolute paths: NODE22, SERVER_EVERYTHING, CONFORMANCE,
# TS_CLIENT_DIR (the npm prefix holding node_modules/@modelcontextprotocol/client), PYTHON_MCP,
# MCP_PROXY (its entry point), OTEL_PYTHON (the otel-venv's python), and the peer scripts PYTHON_PEER, PYTHON_SURFACES,
# GATEWAY_TS_CLIENT, GATEWAY_PY_CLIENT, and the zoo's ZOO_NPM (its node_modules/.bin holds the
# npm servers' commands), ZOO_VENV and ZOO_SQLITE (their bin/ the PyPI servers' commands).
# Each part has a stamp file holding its version spec, so a second run only checks stamps and
# files (well under a second). Source peers.env in tests/CI:
#   . .cache/peers.env
set -euo pipefail

NODE22_VERSION="22.23.3"
SERVER_EVERYTHING_VERSION="2026.8.31"
CONFORMANCE_VERSION="0.2.0-alpha.11"
# The same client version scripts/bench.sh installs into .cache/bench-npm.
TS_CLIENT_VERSION="2.4.0"
# crates/cli/tests/oauth.rs: a certified OpenID provider, and the TypeScript SDK's Streamable HTTP server
# behind it (crates/cli/tests/peers/oauth_world.mjs).
OIDC_PROVIDER_VERSION="9.13.3"
TS_SDK_VERSION="1.32.2"
PY_MCP_VERSION="2.3.0"
# crates/cli/tests/telemetry.rs: the Python SDK with OpenTelemetry's own SDK and OTLP/HTTP exporter
# (crates/cli/tests/peers/otel_peer.py), in a venv of their own so the other Python peers run as
# users run them, without an SDK installed.
OTEL_PY_SPEC="mcp==$PY_MCP_VERSION opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2"
# The latest release (`npm view mcp-proxy version`); a prefix of its own, so adding it never
# reinstalls the npm peers above.
MCP_PROXY_VERSION="6.7.19"
# The zoo, each pinned to its newest release on 2026-12-07.
ZOO_NPM_SPEC="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31 @modelcontextprotocol/server-sequential-thinking@2026.8.31 @playwright/mcp@0.0.86"
ZOO_PY_SPEC="mcp-server-time==2026.10.19 mcp-server-git==2026.10.19 mcp-server-fetch==2026.10.24 excel-mcp-server==2.2.2"
ZOO_SQLITE_SPEC="mcp-server-sqlite==2025.4.25 mcp<2"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
FORCE=0
case "${1:-}" in
  --force) FORCE=1 ;;
  "") ;;
  -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

log() { echo "install-peers: $*" >&2; }
mkdir -p "$CACHE"

# Serialize concurrent runs (e.g. parallel test processes calling this script).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/install-peers.lock"
  flock 9
fi

# up_to_date STAMP SPEC FILE... : true when STAMP holds SPEC and every FILE exists.
up_to_date() {
  local stamp="$1" spec="$2"; shift 2
  [[ $FORCE -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$spec" ]] || return 1
  local f; for f in "$@"; do [[ -e "$f" ]] || return 1; done
}

# The system npm runs on the machine's Node (20); that is fine for installing.
NPM_FLAGS=(--no-audit --no-fund --save-exact --loglevel=error)

# 1. Node 22 ------------------------------------------------------------------
NODE22="$CACHE/node22/node_modules/node/bin/node"
spec="node@$NODE22_VERSION"
if up_to_date "$CACHE/node22.stamp" "$spec" "$NODE22"; then
  log "node22 ok ($spec)"
else
  log "installing $spec into .cache/node22"
  rm -rf "$CACHE/node22" "$CACHE/node22.stamp"
  mkdir -p "$CACHE/node22"
  npm install --prefix "$CACHE/node22" "${NPM_FLAGS[@]}" "$spec" >&2
  got="$("$NODE22" --version)"
  if [[ "$got" != "v$NODE22_VERSION" ]]; then
    log "expected v$NODE22_VERSION from $NODE22, got '$got'"; exit 1
  fi
  echo "$spec" > "$CACHE/node22.stamp"
fi

# 2. npm peers ----------------------------------------------------------------
NPM_DIR="$CACHE/npm"
SE_DIR="$NPM_DIR/node_modules/@modelcontextprotocol/server-everything"
CF_DIR="$NPM_DIR/node_modules/@modelcontextprotocol/conformance"
TS_CLIENT_PKG="$NPM_DIR/node_modules/@modelcontextprotocol/client/package.json"
SERVER_EVERYTHING="$SE_DIR/dist/index.js"
spec="@modelcontextprotocol/server-everything@$SERVER_EVERYTHING_VERSION @modelcontextprotocol/conformance@$CONFORMANCE_VERSION @modelcontextprotocol/client@$TS_CLIENT_VERSION oidc-provider@$OIDC_PROVIDER_VERSION @modelcontextprotocol/sdk@$TS_SDK_VERSION"
OIDC_PKG="$NPM_DIR/node_modules/oidc-provider/package.json"
if up_to_date "$CACHE/npm.stamp" "$spec" "$SERVER_EVERYTHING" "$CF_DIR/package.json" "$TS_CLIENT_PKG" "$OIDC_PKG"; then
  log "npm peers ok"
else
  log "installing $spec into .cache/npm"
  rm -rf "$NPM_DIR" "$CACHE/npm.stamp"
  mkdir -p "$NPM_DIR"
  # shellcheck disable=SC2086
  npm install --prefix "$NPM_DIR" "${NPM_FLAGS[@]}" $spec >&2
  [[ -f "$SERVER_EVERYTHING" ]] || { log "missing $SERVER_EVERYTHING"; exit 1; }
  got="$("$NODE22" -p 'require(process.argv[1]).version' "$TS_CLIENT_PKG")"
  [[ "$got" == "$TS_CLIENT_VERSION" ]] || { log "expected client $TS_CLIENT_VERSION, got '$got'"; exit 1; }
  echo "$spec" > "$CACHE/npm.stamp"
fi
# The conformance CLI entry point, from its package.json "bin".
CONFORMANCE="$("$NODE22" -e '
  const dir = process.argv[1];
  const p = require(dir + "/package.json");
  const b = typeof p.bin === "string" ? p.bin : (p.bin.conformance || Object.values(p.bin)[0]);
  console.log(require("path").resolve(dir, b));
' "$CF_DIR")"
[[ -f "$CONFORMANCE" ]] || { log "missing conformance CLI $CONFORMANCE"; exit 1; }

# 3. Python venv with the MCP SDK ---------------------------------------------
VENV="$CACHE/venv"
PYTHON_MCP="$VENV/bin/python"
spec="mcp==$PY_MCP_VERSION"
if up_to_date "$CACHE/venv.stamp" "$spec" "$PYTHON_MCP"; then
  log "venv ok ($spec)"
else
  log "creating .cache/venv with $spec"
  rm -rf "$VENV" "$CACHE/venv.stamp"
  python3 -m venv "$VENV"
  "$PYTHON_MCP" -m pip install --quiet --disable-pip-version-check "$spec" >&2
  got="$("$PYTHON_MCP" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  [[ "$got" == "$PY_MCP_VERSION" ]] || { log "expected mcp $PY_MCP_VERSION, got '$got'"; exit 1; }
  echo "$spec" > "$CACHE/venv.stamp"
fi

# 4. mcp-proxy ----------------------------------------------------------------
PROXY_DIR="$CACHE/mcp-proxy"
MCP_PROXY="$PROXY_DIR/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"
spec="mcp-proxy@$MCP_PROXY_VERSION"
if up_to_date "$CACHE/mcp-proxy.stamp" "$spec" "$MCP_PROXY"; then
  log "mcp-proxy ok ($spec)"
else
  log "installing $spec into .cache/mcp-proxy"
  rm -rf "$PROXY_DIR" "$CACHE/mcp-proxy.stamp"
  mkdir -p "$PROXY_DIR"
  npm install --prefix "$PROXY_DIR" "${NPM_FLAGS[@]}" "$spec" >&2
  [[ -f "$MCP_PROXY" ]] || { log "missing $MCP_PROXY"; exit 1; }
  echo "$spec" > "$CACHE/mcp-proxy.stamp"
fi

# 5. the zoo ------------------------------------------------------------------
ZOO_NPM="$CACHE/zoo-npm"
if up_to_date "$CACHE/zoo-npm.stamp" "$ZOO_NPM_SPEC" "$ZOO_NPM/node_modules/.bin/mcp-server-filesystem" \
  "$ZOO_NPM/node_modules/.bin/mcp-server-memory" "$ZOO_NPM/node_modules/.bin/mcp-server-sequential-thinking" \
  "$ZOO_NPM/node_modules/.bin/playwright-mcp"; then
  log "zoo npm servers ok"
else
  log "installing $ZOO_NPM_SPEC into .cache/zoo-npm"
  rm -rf "$ZOO_NPM" "$CACHE/zoo-npm.stamp"
  mkdir -p "$ZOO_NPM"
  # Playwright's own browsers are not downloaded: the zoo runs Debian's chromium.
  # shellcheck disable=SC2086
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$ZOO_NPM" "${NPM_FLAGS[@]}" $ZOO_NPM_SPEC >&2
  [[ -x "$ZOO_NPM/node_modules/.bin/playwright-mcp" ]] || { log "missing playwright-mcp"; exit 1; }
  echo "$ZOO_NPM_SPEC" > "$CACHE/zoo-npm.stamp"
fi
# zoo_venv DIR STAMP SPEC COMMAND... : a venv at DIR holding SPEC, whose bin/ has each COMMAND.
zoo_venv() {
  local dir="$1" stamp="$2" spec="$3"; shift 3
  local files=() c; for c in "$@"; do files+=("$dir/bin/$c"); done
  if up_to_date "$stamp" "$spec" "${files[@]}"; then
    log "$(basename "$dir") ok"
    return
  fi
  log "creating .cache/$(basename "$dir") with $spec"
  rm -rf "$dir" "$stamp"
  python3 -m venv "$dir"
  # shellcheck disable=SC2086
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check $spec >&2
  for c in "${files[@]}"; do [[ -x "$c" ]] || { log "missing $c"; exit 1; }; done
  echo "$spec" > "$stamp"
}
ZOO_VENV="$CACHE/zoo-venv"
zoo_venv "$ZOO_VENV" "$CACHE/zoo-venv.stamp" "$ZOO_PY_SPEC" \
  mcp-server-time mcp-server-git mcp-server-fetch excel-mcp-server
# mcp-server-fetch simplifies pages with readabilipy, which runs Readability.js on the
# machine's `node` when its own node_modules are there and otherwise runs `npm install` into
# its installation at the first fetch; under the sandbox that installation is read-only and
# the network closed, so that first fetch fails ("Error executing tool fetch"). Its setup
# step, done here once, as an unconfined first run would have done.
READABILIPY_JS="$(echo "$ZOO_VENV"/lib/python3*/site-packages/readabilipy/javascript)"
if [[ -d "$READABILIPY_JS/node_modules/jsdom" ]]; then
  log "readabilipy's Readability.js ok"
else
  log "installing readabilipy's Readability.js into the zoo venv"
  (cd "$READABILIPY_JS" && npm install --no-audit --no-fund --loglevel=error >&2)
fi
ZOO_SQLITE="$CACHE/zoo-sqlite"
zoo_venv "$ZOO_SQLITE" "$CACHE/zoo-sqlite.stamp" "$ZOO_SQLITE_SPEC" mcp-server-sqlite
OTEL_VENV="$CACHE/otel-venv"
zoo_venv "$OTEL_VENV" "$CACHE/otel-venv.stamp" "$OTEL_PY_SPEC" python
OTEL_PYTHON="$OTEL_VENV/bin/python"

# 6. peers.env ----------------------------------------------------------------
tmp="$CACHE/peers.env.tmp.$$"
{
  echo "# written by scripts/install-peers.sh; source it: . .cache/peers.env"
  printf 'NODE22=%q\n' "$NODE22"
  printf 'SERVER_EVERYTHING=%q\n' "$SERVER_EVERYTHING"
  printf 'CONFORMANCE=%q\n' "$CONFORMANCE"
  printf 'TS_CLIENT_DIR=%q\n' "$NPM_DIR"
  printf 'PYTHON_MCP=%q\n' "$PYTHON_MCP"
  printf 'OTEL_PYTHON=%q\n' "$OTEL_PYTHON"
  printf 'OTEL_PEER=%q\n' "$ROOT/crates/cli/tests/peers/otel_peer.py"
  printf 'MCP_PROXY=%q\n' "$MCP_PROXY"
  printf 'PYTHON_PEER=%q\n' "$ROOT/crates/cli/tests/peers/python_server.py"
  printf 'PYTHON_SURFACES=%q\n' "$ROOT/crates/cli/tests/peers/python_surfaces.py"
  printf 'GATEWAY_TS_CLIENT=%q\n' "$ROOT/crates/cli/tests/peers/gateway_client.mjs"
  printf 'GATEWAY_PY_CLIENT=%q\n' "$ROOT/crates/cli/tests/peers/gateway_client.py"
  printf 'ZOO_NPM=%q\n' "$ZOO_NPM"
  printf 'ZOO_VENV=%q\n' "$ZOO_VENV"
  printf 'ZOO_SQLITE=%q\n' "$ZOO_SQLITE"
} > "$tmp"
mv "$tmp" "$CACHE/peers.env"
log "wrote .cache/peers.env"
