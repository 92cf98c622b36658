#!/usr/bin/env bash
# What embedding plurnk-mcp costs to build, side by side in one run: the crates compiled, the
# cold release build's wall time and the binary's size, for
#   stdio     examples/embedders/stdio: default-features = false, features = ["stdio"]
#   full      examples/embedders/full: the same program with every feature
#   cli       the plurnk-mcp command line (crates/cli)
#   floor     examples/embedders/rmcp-floor: a bare rmcp client over the stdio transport
# Each is built from nothing in a target directory of its own, one after the other, so the
# times compare within the run (absolute times drift on a shared machine). Prints a table and
# writes target/bench/embed-cost.json.
#
#   scripts/embed-cost.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p target/bench

measure() { # name, manifest, binary, cargo arguments...
  local name="$1" manifest="$2" binary="$3"
  shift 3
  local dir
  dir="$(cd "$(dirname "$manifest")" && pwd)"
  # An embedder is a package of its own: it starts from the workspace's lock file, so it
  # builds the same versions, and cargo trims that file to the embedder's own tree (which
  # --locked would refuse); the copy is removed afterwards.
  local locked=(--locked)
  if [[ "$dir" != "$ROOT" ]]; then
    cp Cargo.lock "$dir/Cargo.lock"
    locked=()
  fi
  local start=$SECONDS
  CARGO_TARGET_DIR="$work/$name" cargo build --release "${locked[@]}" --manifest-path "$manifest" "$@" \
    >"$work/$name.log" 2>&1 || { tail -20 "$work/$name.log" >&2; exit 1; }
  [[ "$dir" == "$ROOT" ]] || rm -f "$dir/Cargo.lock"
  local seconds=$((SECONDS - start))
  local crates
  crates="$(grep -c '^ *Compiling ' "$work/$name.log")"
  local bytes
  bytes="$(stat -c %s "$work/$name/release/$binary")"
  local stripped
  cp "$work/$name/release/$binary" "$work/$name.stripped"
  strip "$work/$name.stripped"
  stripped="$(stat -c %s "$work/$name.stripped")"
  printf '%-8s %8s %10s %12s %14s\n' "$name" "$crates" "$seconds" "$bytes" "$stripped"
  echo "\"$name\": {\"crates\": $crates, \"seconds\": $seconds, \"bytes\": $bytes, \"stripped_bytes\": $stripped}" >>"$work/rows"
  rm -rf "${work:?}/$name"
}

printf '%-8s %8s %10s %12s %14s\n' build crates "cold (s)" "binary (B)" "stripped (B)"
measure stdio examples/embedders/stdio/Cargo.toml embedder-stdio
measure full examples/embedders/full/Cargo.toml embedder-full
measure cli Cargo.toml plurnk-mcp -p plurnk-mcp-cli --bin plurnk-mcp
measure floor examples/embedders/rmcp-floor/Cargo.toml embedder-rmcp-floor
{ echo "{"; paste -sd, "$work/rows"; echo "}"; } >target/bench/embed-cost.json
echo "embed-cost: wrote target/bench/embed-cost.json" >&2
