#!/usr/bin/env bash
# The load benchmark of BENCHMARKS.md, with every peer it compares against.
#
#   scripts/bench.sh                      # default sizes (under 10 minutes on 2 cores)
#   scripts/bench.sh --quick              # tiny sizes, one repetition (well under a minute)
#   scripts/bench.sh --json out.json …    # any other argument goes to the benchmark
#   scripts/bench.sh --gateway [--quick]  # the gateway benchmark instead: plurnk-mcp serve
#                                         # beside npm's mcp-proxy and supergateway, PyPI's
#                                         # mcp-proxy and ContextForge's translate bridge
#                                         # (examples/gateway.rs)
#   scripts/bench.sh --zoo [--runs N]     # the zoo benchmark instead: ten published servers
#                                         # brought up under a burner, the host beside the
#                                         # Python SDK's client (examples/zoo.rs)
#   scripts/bench.sh --only seq-otel --json target/bench/otel.json --no-figures
#                                         # the host with OpenTelemetry export off, on to a live
#                                         # OTLP receiver and on to a collector that is down
#   scripts/bench.sh --instructions       # instructions per call, counted (valgrind): a table,
#                                         # and target/bench/instructions.json
#   scripts/bench.sh --sandbox [ARGS]     # the sandbox's cost: 200 stdio servers to all-ready
#                                         # under the default policy and with it off, side by
#                                         # side (examples/sandbox.rs; target/bench/sandbox.json)
#
# 1. scripts/install-peers.sh: Node 22 (and the test peers) into .cache/
# 2. the official TypeScript v2 client, @modelcontextprotocol/client, into .cache/bench-npm
#    (exact version, skipped when its stamp matches)
# 3. the fixture server binary, release build (BENCH_PROFILE=debug: the debug build)
# 4. cargo run --release --example load -- "$@"  (table on stdout, JSON under target/bench/)
# 5. bench/plot.py on that JSON: the SVG figures of BENCHMARKS.md (matplotlib, in
#    .cache/plot-venv): into bench/figures/ with a copy of the JSON for a full release run at
#    the default sizes, else into target/bench/figures/; --no-figures skips them
#
# With --gateway: steps 1 to 3, the other gateways (supergateway into .cache/bench-gateways,
#    PyPI's mcp-proxy into .cache/bench-pyproxy, ContextForge into .cache/bench-contextforge,
#    each its own prefix or venv, exact versions, skipped when its stamp matches), plurnk-mcp
#    itself in the same profile, then
#    cargo run --release --example gateway -- "$@"  (table on stdout, JSON under target/bench/)
#
# The Criterion micro-benchmarks are separate: `cargo bench --bench host` (CI=1 shrinks them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# `npm view @modelcontextprotocol/client versions` lists 2.4.0 as the only 2.4.x release.
TS_CLIENT_VERSION="2.4.0"
# The gateways the gateway benchmark puts beside plurnk-mcp serve (npm's mcp-proxy is a test
# peer, installed by install-peers.sh), each its newest release on 2026-12-07.
SUPERGATEWAY_SPEC="supergateway@4.0.0"
PY_PROXY_SPEC="mcp-proxy==0.13.0"
CONTEXTFORGE_SPEC="mcp-contextforge-gateway==1.0.7.post20260921"

log() { echo "bench: $*" >&2; }

# Instructions per sequential echo call of the client process, counted by callgrind rather
# than timed (a shared machine cannot blur a count): the marginal cost between a 2,000- and a
# 6,000-call trial, so start-up and warm-up cancel out. PLURNK_BENCH_LOAD and
# PLURNK_BENCH_FIXTURE measure other builds (nothing is built then).
if [[ "${1:-}" == "--instructions" ]]; then
  command -v valgrind >/dev/null || { log "valgrind is needed (apt-get install valgrind)"; exit 1; }
  target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
  if [[ -z "${PLURNK_BENCH_LOAD:-}" ]]; then
    cargo build --release --locked --example load -p plurnk-mcp
    cargo build --release --locked -p plurnk-mcp-fixture
  fi
  load="${PLURNK_BENCH_LOAD:-$target_dir/release/examples/load}"
  fixture="${PLURNK_BENCH_FIXTURE:-$target_dir/release/plurnk-mcp-fixture}"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  counted() { # client, calls -> instructions of the trial process
    local spec
    spec="{\"client\":\"$1\",\"workload\":{\"kind\":\"calls\",\"n\":$2,\"c\":1,\"servers\":1,\"warmup\":200,\"host_identity\":false},\"fixture\":\"$fixture\",\"node\":\"/nonexistent\",\"ts_dir\":\"/nonexistent\",\"ts_driver\":\"/nonexistent\"}"
    valgrind --tool=callgrind --callgrind-out-file="$work/$1.$2" "$load" --trial "$spec" \
      >"$work/$1.$2.out" 2>"$work/$1.$2.log" || { cat "$work/$1.$2.log" >&2; exit 1; }
    # A trial that failed counts nothing worth reading.
    grep -q '"error":null' "$work/$1.$2.out" || { log "$1 $2: $(tail -c 2000 "$work/$1.$2.out")"; exit 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$work/$1.$2"
  }
  mkdir -p target/bench
  json="target/bench/instructions.json"
  echo "{" >"$json"
  printf '%-8s %16s %16s %14s\n' client "2000 calls" "6000 calls" "per call" >&2
  first=1
  for client in host rmcp; do
    small="$(counted "$client" 2000)"
    large="$(counted "$client" 6000)"
    per=$(( (large - small) / 4000 ))
    printf '%-8s %16s %16s %14s\n' "$client" "$small" "$large" "$per" >&2
    [[ $first == 1 ]] || echo "," >>"$json"
    first=0
    printf '  "%s": {"instructions_2000": %s, "instructions_6000": %s, "per_call": %s}' \
      "$client" "$small" "$large" "$per" >>"$json"
  done
  printf '\n}\n' >>"$json"
  log "figures written to $json"
  exit 0
fi
gateway=0
if [[ "${1:-}" == "--gateway" ]]; then gateway=1; shift; fi
sandbox=0
if [[ "${1:-}" == "--sandbox" ]]; then sandbox=1; shift; fi

bash scripts/install-peers.sh

# The zoo benchmark needs the peers and Debian's chromium (Playwright's browser), nothing else.
if [[ "${1:-}" == "--zoo" ]]; then
  shift
  bash scripts/install-chromium.sh >/dev/null
  profile=(--release)
  if [[ "${BENCH_PROFILE:-release}" == "debug" ]]; then profile=(); fi
  exec cargo run "${profile[@]}" --locked --features sandbox --example zoo -- "$@"
fi

CACHE="$PWD/.cache"
BENCH_NPM="$CACHE/bench-npm"
spec="@modelcontextprotocol/client@$TS_CLIENT_VERSION"
client_pkg="$BENCH_NPM/node_modules/@modelcontextprotocol/client/package.json"
if [[ -f "$CACHE/bench-npm.stamp" && "$(cat "$CACHE/bench-npm.stamp")" == "$spec" && -f "$client_pkg" ]]; then
  log "$spec ok"
else
  log "installing $spec into .cache/bench-npm"
  rm -rf "$BENCH_NPM" "$CACHE/bench-npm.stamp"
  mkdir -p "$BENCH_NPM"
  npm install --prefix "$BENCH_NPM" --no-audit --no-fund --save-exact --loglevel=error "$spec" >&2
  got="$(node -p "require('$client_pkg').version")"
  [[ "$got" == "$TS_CLIENT_VERSION" ]] || { log "expected $TS_CLIENT_VERSION, got '$got'"; exit 1; }
  echo "$spec" > "$CACHE/bench-npm.stamp"
fi

# shellcheck disable=SC1091
. "$CACHE/peers.env"
export PLURNK_BENCH_NODE="$NODE22"
export PLURNK_BENCH_TS_DIR="$BENCH_NPM"

# BENCH_PROFILE=debug reuses the test build (the test suite runs `--quick` so it cannot rot);
# figures worth reading come from the default release profile.
profile=(--release); dir=release
if [[ "${BENCH_PROFILE:-release}" == "debug" ]]; then profile=(); dir=debug; fi
cargo build "${profile[@]}" -p plurnk-mcp-fixture
# The binary just built, wherever cargo puts it (CARGO_TARGET_DIR and config included).
target_dir="$(cargo metadata --format-version 1 --no-deps | "$NODE22" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')"
export PLURNK_BENCH_FIXTURE="$target_dir/$dir/plurnk-mcp-fixture"
[[ -x "$PLURNK_BENCH_FIXTURE" ]] || { log "the fixture was not built at $PLURNK_BENCH_FIXTURE"; exit 1; }
if [[ $sandbox -eq 1 ]]; then
  exec cargo run "${profile[@]}" --features sandbox --example sandbox -- \
    --fixture "$PLURNK_BENCH_FIXTURE" "$@"
fi
if [[ $gateway -eq 1 ]]; then
  GATEWAYS_NPM="$CACHE/bench-gateways"
  supergateway="$GATEWAYS_NPM/node_modules/supergateway/dist/index.js"
  if [[ -f "$CACHE/bench-gateways.stamp" && "$(cat "$CACHE/bench-gateways.stamp")" == "$SUPERGATEWAY_SPEC" && -f "$supergateway" ]]; then
    log "$SUPERGATEWAY_SPEC ok"
  else
    log "installing $SUPERGATEWAY_SPEC into .cache/bench-gateways"
    rm -rf "$GATEWAYS_NPM" "$CACHE/bench-gateways.stamp"
    mkdir -p "$GATEWAYS_NPM"
    npm install --prefix "$GATEWAYS_NPM" --no-audit --no-fund --save-exact --loglevel=error "$SUPERGATEWAY_SPEC" >&2
    [[ -f "$supergateway" ]] || { log "missing $supergateway"; exit 1; }
    echo "$SUPERGATEWAY_SPEC" > "$CACHE/bench-gateways.stamp"
  fi
  # bench_venv NAME SPEC: a venv .cache/NAME holding SPEC (its stamp names SPEC).
  bench_venv() {
    local dir="$CACHE/$1" stamp="$CACHE/$1.stamp" spec="$2"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$spec" && -x "$dir/bin/python" ]]; then
      log "$spec ok"
      return
    fi
    log "creating .cache/$1 with $spec"
    rm -rf "$dir" "$stamp"
    python3 -m venv "$dir"
    # shellcheck disable=SC2086
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check $spec >&2
    echo "$spec" > "$stamp"
  }
  bench_venv bench-pyproxy "$PY_PROXY_SPEC"
  bench_venv bench-contextforge "$CONTEXTFORGE_SPEC"
  [[ -x "$CACHE/bench-pyproxy/bin/mcp-proxy" ]] || { log "missing .cache/bench-pyproxy/bin/mcp-proxy"; exit 1; }
  export PLURNK_BENCH_SUPERGATEWAY="$supergateway"
  export PLURNK_BENCH_PY_PROXY="$CACHE/bench-pyproxy/bin/mcp-proxy"
  export PLURNK_BENCH_CONTEXTFORGE="$CACHE/bench-contextforge/bin/python"
  export PLURNK_BENCH_TS_CLIENT="$CACHE/npm"
  cargo build "${profile[@]}" -p plurnk-mcp-cli --bin plurnk-mcp
  export PLURNK_BENCH_PLURNK="$target_dir/$dir/plurnk-mcp"
  export PLURNK_BENCH_MCP_PROXY="$MCP_PROXY"
  export PLURNK_BENCH_PYTHON="$PYTHON_MCP"
  exec cargo run "${profile[@]}" --example gateway -- "$@"
fi
# The figures of BENCHMARKS.md, drawn from the JSON the run just wrote (bench/plot.py, with
# matplotlib in a venv of its own under .cache/). A full run at the default sizes draws them
# into bench/figures/ beside a copy of its JSON, which BENCHMARKS.md shows with the run's
# table; any other run into target/bench/figures/. --no-figures skips them (the test
# command's quick run, which need not install matplotlib; it checks the committed ones).
figures=1; json=""; partial=0; args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-figures) figures=0 ;;
    --json) json="$2"; args+=("$1" "$2"); shift ;;
    --quick|--only|--clients|--reps) partial=1; args+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
# The OpenTelemetry export comparison (`--only seq-otel`) needs the host built with `otel`;
# every other run measures the host as a daemon links it by default, without it.
features=()
for arg in "${args[@]}"; do [[ "$arg" == *seq-otel* ]] && features=(--features otel); done
cargo run "${profile[@]}" "${features[@]}" --example load -- "${args[@]}"
[[ $figures -eq 1 ]] || exit 0
if [[ -z "$json" ]]; then
  json="target/bench/load.json"
  for arg in "${args[@]}"; do [[ "$arg" == "--quick" ]] && json="target/bench/load-quick.json"; done
fi
PLOT_VENV="$CACHE/plot-venv"
MATPLOTLIB="matplotlib==3.11.2"
if [[ -f "$CACHE/plot-venv.stamp" && "$(cat "$CACHE/plot-venv.stamp")" == "$MATPLOTLIB" && -x "$PLOT_VENV/bin/python" ]]; then
  log "$MATPLOTLIB ok"
else
  log "installing $MATPLOTLIB into .cache/plot-venv"
  rm -rf "$PLOT_VENV" "$CACHE/plot-venv.stamp"
  python3 -m venv "$PLOT_VENV"
  "$PLOT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$MATPLOTLIB" >&2
  echo "$MATPLOTLIB" > "$CACHE/plot-venv.stamp"
fi
if [[ $partial -eq 0 && "${BENCH_PROFILE:-release}" == "release" ]]; then
  out="bench/figures"
  cp "$json" "$out/load.json" 2>/dev/null || { mkdir -p "$out"; cp "$json" "$out/load.json"; }
else
  out="target/bench/figures"
fi
"$PLOT_VENV/bin/python" bench/plot.py "$json" --out "$out"
