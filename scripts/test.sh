#!/usr/bin/env bash
# The whole test suite, as CI runs it: third-party peers, formatting, lints, every test.
#
#   scripts/test.sh
#
# Installs what the tests need into the git-ignored .cache/ (scripts/install-peers.sh:
# Node 22, npm and PyPI peers), builds once, then runs every test binary of the workspace.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-peers.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
