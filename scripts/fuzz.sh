#!/usr/bin/env bash
# Fuzzing with cargo-fuzz (libFuzzer, nightly): the environment parser, definition JSON,
# stdio framing, the redactor, the signature renderer, EXEC ops and OpenAPI documents
# (fuzz/fuzz_targets/).
#
#   scripts/fuzz.sh                          # every target for FUZZ_SECONDS (default 10)
#   FUZZ_SECONDS=600 scripts/fuzz.sh redactor   # one target, longer
#
# cargo-fuzz (exact version) is installed into .cache/cargo-fuzz; builds, corpora and any
# crash artifacts stay under .cache/fuzz. Each target's figures (runs, seconds, corpus
# entries) are printed and appended to .cache/fuzz/figures.txt. Exits non-zero when a
# target finds a failure (its input is kept in .cache/fuzz/artifacts/TARGET/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

FUZZ_VERSION="0.13.2"
CACHE="$ROOT/.cache"
WORK="$CACHE/fuzz"
SECONDS_EACH="${FUZZ_SECONDS:-10}"
TARGETS=(env_config definition_json framing redactor signature exec_op openapi_document)
# Targets whose memory is part of their property: libFuzzer fails a run whose resident
# memory passes this many MiB (its default is 2048).
declare -A RSS_LIMIT_MB=([openapi_document]=256)
[[ $# -gt 0 ]] && TARGETS=("$@")

log() { echo "fuzz: $*" >&2; }

if ! grep -qF "cargo-fuzz $FUZZ_VERSION " "$CACHE/cargo-fuzz/.crates.toml" 2>/dev/null; then
  log "installing cargo-fuzz $FUZZ_VERSION into .cache/cargo-fuzz"
  cargo install cargo-fuzz --locked --version "$FUZZ_VERSION" --root "$CACHE/cargo-fuzz" >&2
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  log "the nightly toolchain is missing: rustup toolchain install nightly"
  exit 1
fi
export PATH="$CACHE/cargo-fuzz/bin:$PATH"
mkdir -p "$WORK"
# Safe Rust: what is looked for is a panic or a broken property, so no sanitizer (which
# would also rebuild the bundled SQLite under ASan for nothing).
# Built in parallel code units (cargo-fuzz's default is one): the targets run for seconds here,
# where building them is most of the cost; fuzz/Cargo.toml's release profile is opt-level 1.
common=(--fuzz-dir fuzz --target-dir "$WORK/target" --sanitizer none --codegen-units 16)
# Every target is built in one cargo invocation, so the shared dependencies are compiled once
# and the targets link side by side; each run below then finds its binary built.
start=$SECONDS
if [[ $# -gt 0 ]]; then
  for target in "${TARGETS[@]}"; do cargo +nightly fuzz build "${common[@]}" "$target" >&2; done
else
  cargo +nightly fuzz build "${common[@]}" >&2
fi
log "built ${#TARGETS[@]} target(s) in $((SECONDS - start)) s"
fuzz=(cargo +nightly fuzz run "${common[@]}")
failed=0
for target in "${TARGETS[@]}"; do
  mkdir -p "$WORK/corpus/$target" "$WORK/artifacts/$target"
  log "$target for ${SECONDS_EACH} s"
  out="$WORK/$target.log"
  limits=()
  [[ -n "${RSS_LIMIT_MB[$target]:-}" ]] && limits+=("-rss_limit_mb=${RSS_LIMIT_MB[$target]}")
  if "${fuzz[@]}" "$target" "$WORK/corpus/$target" -- \
      -max_total_time="$SECONDS_EACH" -artifact_prefix="$WORK/artifacts/$target/" \
      -print_final_stats=1 "${limits[@]}" >"$out" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
    tail -40 "$out" >&2
  fi
  runs=$({ grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" || true; } | grep -o '[0-9]*$' | tail -1 || true)
  corpus=$(find "$WORK/corpus/$target" -type f | wc -l)
  line=$(printf '%s %-16s %-6s %10s runs in %4s s, corpus %5s' \
    "$(date -u +%FT%TZ)" "$target" "$status" "${runs:-?}" "$SECONDS_EACH" "$corpus")
  echo "$line" | tee -a "$WORK/figures.txt"
done
exit "$failed"
