#!/usr/bin/env bash
# The whole test suite, as CI runs it: third-party peers, formatting, lints, every test.
#
#   scripts/test.sh
#
# Installs what the tests need into the git-ignored .cache/ (scripts/install-peers.sh:
# Node 22, npm and PyPI peers), builds once, runs every test binary of the workspace (the
# short chaos run included), the doctests, the subtree example, the load benchmark at tiny
# sizes, each fuzz target briefly, then the official conformance suite: its client scenarios
# against the host, and its server scenarios against the gateway (`plurnk-mcp serve`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-peers.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
# `--all-targets` leaves out doctests: the crate's examples in its docs must compile too.
cargo test --workspace --doc --locked
# The daemon-subtree example runs to its end (it exits non-zero when a step did not happen).
cargo run --locked --quiet --example subtree
# The load benchmark at tiny sizes on the debug build, so it cannot rot (no time asserted;
# it exits non-zero when any trial fails or loses a call).
BENCH_PROFILE=debug bash scripts/bench.sh --quick --json target/bench/load-quick.json
# Every fuzz target for 10 s on nightly (scripts/fuzz.sh; longer runs: FUZZ_SECONDS).
bash scripts/fuzz.sh
# The official MCP conformance suite's client scenarios, one at a time, through our host.
bash scripts/conformance.sh
# The suite's server scenarios, one at a time, against `plurnk-mcp serve` over HTTP in front of
# the conformance fixture.
bash scripts/conformance-server.sh
