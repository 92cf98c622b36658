#!/usr/bin/env bash
# The library's cargo features, each alone and none at all: every combination an embedder
# may pick compiles, lint-clean (clippy -D warnings on the library itself; dependencies as
# they come).
#
#   scripts/features.sh            # none, then each feature alone
#   scripts/features.sh oauth      # the named features, each alone
#
# The whole set together is what the command line builds (crates/cli enables every feature),
# which the test command's clippy and tests cover.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Every feature of the library but the default set's name itself.
FEATURES=(stdio http sqlite postgres oauth gateway sources exec import prometheus sandbox test-hooks otel)
[[ $# -gt 0 ]] && FEATURES=("$@")

log() { echo "features: $*" >&2; }

check() { # label, cargo arguments...
  local label="$1" start=$SECONDS
  shift
  cargo clippy --locked --quiet -p plurnk-mcp --lib --no-default-features "$@" -- -D warnings
  log "$label: clean in $((SECONDS - start)) s"
}

[[ $# -eq 0 ]] && check "no features"
for feature in "${FEATURES[@]}"; do
  check "$feature alone" --features "$feature"
done
