#!/usr/bin/env bash
# cargo-deny over the workspace with deny.toml: licenses, banned crates, sources. cargo-deny
# (exact version) is installed into .cache/cargo-deny on first use. The advisory database
# needs the network (GitHub), so advisories are not checked here; see deny.toml.
#
#   scripts/deny.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DENY_VERSION="0.20.2"
CACHE="$PWD/.cache"
if ! grep -qF "cargo-deny $DENY_VERSION " "$CACHE/cargo-deny/.crates.toml" 2>/dev/null; then
  echo "deny: installing cargo-deny $DENY_VERSION into .cache/cargo-deny" >&2
  cargo install cargo-deny --locked --version "$DENY_VERSION" --root "$CACHE/cargo-deny" >&2
fi
exec "$CACHE/cargo-deny/bin/cargo-deny" --locked check licenses bans sources
