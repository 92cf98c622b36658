#!/usr/bin/env bash
# What a daemon that embeds plurnk-mcp for stdio servers only compiles: the dependency tree of
# examples/embedders/stdio (`default-features = false, features = ["stdio"]`) holds none of
# the crates that belong to the parts it left out. Reads the tree only; builds nothing.
#
#   scripts/embedder-tree.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

crate=examples/embedders/stdio
# The same versions the workspace is tested with.
cp Cargo.lock "$crate/Cargo.lock"
tree="$(cargo tree --quiet -e normal --prefix none -f '{p}' --manifest-path "$crate/Cargo.toml" | sort -u)"
forbidden=(clap anyhow axum hyper aws-lc-rs aws-lc-sys toml jsonschema metrics-exporter-prometheus
  plurnk-mcp-fixture reqwest rusqlite tokio-postgres opentelemetry opentelemetry_sdk
  opentelemetry-otlp tracing-opentelemetry prost)
found=0
for name in "${forbidden[@]}"; do
  if grep -q "^$name v" <<<"$tree"; then
    echo "embedder-tree: the stdio-only embedder compiles $name" >&2
    found=1
  fi
done
echo "embedder-tree: the stdio-only embedder compiles $(wc -l <<<"$tree") crates (normal dependencies), none of: ${forbidden[*]}" >&2
exit "$found"
