#!/usr/bin/env bash
# The whole test suite, as CI runs it: third-party peers, formatting, lints, every test.
#
#   scripts/test.sh
#
# Installs what the tests need into the git-ignored .cache/ (scripts/install-peers.sh:
# Node 22, npm and PyPI peers), from Debian (scripts/install-system.sh: PostgreSQL's binaries,
# HAProxy; scripts/install-chromium.sh: chromium), builds once, runs every test binary of the
# workspace (the short chaos run included), the doctests, the subtree example, the load
# benchmark at tiny sizes, the check that BENCHMARKS.md's figures and tables are of one run,
# each fuzz target briefly, then the official conformance suite: its client scenarios against
# the host, and its server scenarios against the gateway (`plurnk-mcp serve`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# A run of this script builds everything once from cold: incremental compilation would only
# write its query caches (several GiB under target/debug/incremental) for a rebuild that never
# comes, and a full disk fails the run. A developer's own cargo commands keep the default.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Each step runs in turn and the first failure stops the run; every step's wall time is
# printed as it ends and again in a table at the end, so a slow CI run says where it went.
timings=()
step() {
  local name="$1" start=$SECONDS
  shift
  echo "test.sh: step $name" >&2
  "$@"
  timings+=("$(printf '%-20s %5d s' "$name" $((SECONDS - start)))")
  echo "test.sh: step $name took $((SECONDS - start)) s" >&2
}

step peers bash scripts/install-peers.sh
# PostgreSQL's binaries and HAProxy from Debian, for crates/cli/tests/replicas.rs (a look when
# they are there). That binary prints its own wall time ("finished in") within the tests step.
step system bash scripts/install-system.sh
# Debian's chromium, for the status page's browser test (crates/cli/tests/gateway/, which
# runs the same script; here so its first install is timed on its own).
step chromium bash scripts/install-chromium.sh
step fmt cargo fmt --all -- --check
step clippy cargo clippy --workspace --all-targets --locked -- -D warnings
# The library's features: none at all, and each alone, compile lint-clean; a stdio-only
# embedder's dependency tree holds nothing of the parts it left out.
step features bash scripts/features.sh
step embedder bash scripts/embedder-tree.sh
# Licenses, banned crates and sources of every dependency (deny.toml).
step deny bash scripts/deny.sh
step tests cargo test --workspace --all-targets --locked
# The library's own tests with its default features, as a daemon that adds it gets it (the
# workspace's tests above build it with every feature the command line turns on).
step library cargo test -p plurnk-mcp --lib --locked
# `--all-targets` leaves out doctests: the crate's examples in its docs must compile too.
step doctests cargo test --workspace --doc --locked
# The documentation a docs.rs reader gets, with every feature, warnings denied.
step docs env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features --locked -p plurnk-mcp
# The library packaged as a published crate, and built from that package alone.
step package cargo package -p plurnk-mcp --locked
# The daemon-subtree example runs to its end (it exits non-zero when a step did not happen).
step subtree cargo run --locked --quiet -p plurnk-mcp --features test-hooks --example subtree
# The load benchmark at tiny sizes on the debug build, so it cannot rot (no time asserted;
# it exits non-zero when any trial fails or loses a call).
step bench env BENCH_PROFILE=debug bash scripts/bench.sh --quick --no-figures --json target/bench/load-quick.json
# BENCHMARKS.md's figures and its Results table are of one run: the one bench/figures/load.json
# records (bench/plot.py --check, the standard library only).
step figures python3 bench/plot.py bench/figures/load.json --check bench/figures BENCHMARKS.md
# Every fuzz target for 10 s on nightly (scripts/fuzz.sh; longer runs: FUZZ_SECONDS).
step fuzz bash scripts/fuzz.sh
# The official MCP conformance suite's client scenarios, one at a time, through our host.
step conformance bash scripts/conformance.sh
# The suite's server scenarios, one at a time, against `plurnk-mcp serve` over HTTP in front of
# the conformance fixture.
step conformance-server bash scripts/conformance-server.sh

echo "test.sh: every step passed in $SECONDS s" >&2
printf 'test.sh:   %s\n' "${timings[@]}" >&2
