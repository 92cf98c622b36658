#!/usr/bin/env bash
# Mutation testing of the code that enforces the host's invariants (TESTING.md names it).
#
#   scripts/mutants.sh                 # every group, every shard, one after another
#   scripts/mutants.sh GROUP [k/n]     # one group (actors, calls, catalog, secrets, model), one shard
#   scripts/mutants.sh --list [GROUP]  # the mutants each group would try, nothing built
#   MUTANTS_SLOT=b scripts/mutants.sh GROUP   # beside another run (own tree and target)
#   scripts/mutants.sh --recheck GROUP # the group's last missed mutants again, on this commit
#
# Each group mutates its own functions and runs only the test binaries that guard them.
# cargo-mutants (exact version, installed into .cache/cargo-mutants) works in place on a
# copy of the last commit under .cache/mutants/tree, with its own target directory there,
# so dependencies are built once per machine and each mutant is an incremental build
# (profile `mutants`: the test profile without debug info). Results land in
# .cache/mutants/out/GROUP-K-of-N/mutants.out; a summary line per shard is appended to
# .cache/mutants/summary.txt. Exits 0 only when every missed mutant of the shards run is
# listed in TESTING.md under "Equivalent mutants" (exactly, in backquotes), with its reason.
#
# Not part of scripts/test.sh: a full run takes hours on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

MUTANTS_VERSION="27.1.0"
CACHE="$ROOT/.cache"
BIN="$CACHE/cargo-mutants/bin"
WORK="$CACHE/mutants"
# MUTANTS_SLOT=b runs beside another run, in a tree and target directory of its own (its
# first build is a cold one).
SLOT="${MUTANTS_SLOT:-}"
TREE="$WORK/tree${SLOT:+-$SLOT}"
TARGET="$WORK/target${SLOT:+-$SLOT}"

log() { echo "mutants: $*" >&2; }

# The groups: which files and functions are mutated, which shards they are cut into (so that
# each shard stays well within an hour on 2 cores), and which tests guard them.
group_files() {
  case "$1" in
    actors) echo "src/actors/attachment.rs src/actors/workspace.rs src/actors/supervisor.rs" ;;
    calls) echo "src/protocol/call.rs src/protocol/session.rs src/host.rs" ;;
    catalog) echo "src/protocol/catalog.rs src/protocol/stdio.rs" ;;
    secrets) echo "src/redact.rs src/config/prepared.rs src/model.rs" ;;
    model) echo "src/projection.rs src/exec.rs" ;;
    *) return 1 ;;
  esac
}
group_shards() {
  case "$1" in
    actors) echo 4 ;;
    calls) echo 3 ;;
    catalog) echo 2 ;;
    secrets) echo 2 ;;
    model) echo 8 ;;
  esac
}
# Functions excluded from a group (regexes over cargo-mutants' mutant names): Debug output
# and other code that enforces no invariant, each named in TESTING.md.
group_excludes() {
  local common=('impl std::fmt::Debug' 'impl Debug' 'impl fmt::Debug')
  case "$1" in
    actors) printf '%s\n' "${common[@]}" 'AttachmentState::kind ' ;;
    calls) printf '%s\n' "${common[@]}" ;;
    catalog) printf '%s\n' "${common[@]}" 'describe_exit' ;;
    secrets) printf '%s\n' "${common[@]}" 'src/config/prepared.rs:.*(prepare_oauth|prepare_client_credentials|non_empty|header_value)' ;;
    model) printf '%s\n' "${common[@]}" ;;
  esac
}
# Functions a group is limited to (a regex over mutant names), when not whole files: in
# host.rs only the call path and the choke points where Problems, errors and results are
# scrubbed; the rest of it is start-up plumbing.
group_includes() {
  case "$1" in
    calls) echo 'src/protocol/call.rs|src/protocol/session.rs|src/host.rs:.*(Workspace::(run|run_unscrubbed|action|list_with)|Host::shutdown)( |$)' ;;
    # In model.rs only the scrubbing of what leaves the host.
    secrets) echo 'src/redact.rs|src/config/prepared.rs|src/model.rs:.*(scrub|rebuild_if_dirty|Elicitation::shown)' ;;
  esac
}
group_tests() {
  case "$1" in
    actors) echo "--lib --test=host --test=workspaces" ;;
    calls) echo "--lib --test=host --test=surfaces --test=sealed --test=workspaces" ;;
    catalog) echo "--lib --test=host --test=surfaces --test=sealed" ;;
    secrets) echo "--lib --test=sealed" ;;
    model) echo "--lib --test=projection --test=surfaces --test=cli" ;;
  esac
}
# How long one mutant's tests may run before it counts as caught by hanging: several times
# the group's unmutated test time on a busy 2-core machine (actors 11 s, secrets 1 s, catalog
# and calls up to 40 s with the peers), so a slow but passing mutant is still seen as missed.
group_timeout() {
  case "$1" in
    actors) echo 45 ;;
    secrets) echo 30 ;;
    *) echo 90 ;;
  esac
}
ALL_GROUPS=(actors calls catalog secrets model)

install() {
  if [[ -x "$BIN/cargo-mutants" ]] && grep -qF "cargo-mutants $MUTANTS_VERSION " "$CACHE/cargo-mutants/.crates.toml" 2>/dev/null; then
    return
  fi
  log "installing cargo-mutants $MUTANTS_VERSION into .cache/cargo-mutants"
  cargo install cargo-mutants --locked --version "$MUTANTS_VERSION" --root "$CACHE/cargo-mutants" >&2
}

# A fresh copy of the last commit (what is committed is what the figures speak for); the
# target directory beside it survives between runs. The files are stamped now (tar -m), not
# with the commit's time: cargo rebuilds by modification time, and a source older than the
# last mutant's build would leave that mutant's binary standing in for the baseline.
copy_tree() {
  rm -rf "$TREE"
  mkdir -p "$TREE"
  git archive HEAD | tar -xmf - -C "$TREE"
  git rev-parse --short HEAD > "$TREE/.mutants-commit"
}

mutant_args() {
  local group="$1" file
  local args=()
  for file in $(group_files "$group"); do args+=(-f "$file"); done
  while IFS= read -r pattern; do args+=(-E "$pattern"); done < <(group_excludes "$group")
  local include
  include=$(group_includes "$group")
  [[ -z "$include" ]] || args+=(-F "$include")
  printf '%s\n' "${args[@]}"
}

list() {
  local group chosen=("$@")
  [[ ${#chosen[@]} -gt 0 ]] || chosen=("${ALL_GROUPS[@]}")
  for group in "${chosen[@]}"; do
    mapfile -t args < <(mutant_args "$group")
    local n
    n=$(cd "$ROOT" && "$BIN/cargo-mutants" mutants --list "${args[@]}" | tee "$WORK/list-$group.txt" | wc -l)
    echo "$group: $n mutants in $(group_shards "$group") shard(s), tests: $(group_tests "$group")"
  done
}

# Missed mutants not listed in TESTING.md's equivalents. The match is exact, line and
# column included: a mutant that moved must be looked at again, not waved through.
unexplained() {
  local missed="$1"
  [[ -s "$missed" ]] || return 0
  local equivalents
  equivalents=$(sed -n '/^## Equivalent mutants/,$p' "$ROOT/TESTING.md")
  while IFS= read -r mutant; do
    grep -qF -- "\`$mutant\`" <<<"$equivalents" || echo "$mutant"
  done < "$missed"
}

run_shard() {
  local group="$1" shard="$2"
  local k="${shard%/*}" n="${shard#*/}"
  local out="$WORK/out/$group-$k-of-$n"
  mapfile -t args < <(mutant_args "$group")
  # Given to every cargo call, so each mutant builds only the test targets that run.
  local tests=() target
  for target in $(group_tests "$group"); do tests+=("--cargo-arg=$target"); done
  rm -rf "$out"
  mkdir -p "$out"
  log "$group shard $shard: $(group_tests "$group")"
  local started status=0
  started=$(date +%s)
  (
    cd "$TREE"
    CARGO_TARGET_DIR="$TARGET" PLURNK_MCP_LOG= \
      "$BIN/cargo-mutants" mutants --in-place --no-shuffle --shard "$shard" \
      --profile mutants --timeout "$(group_timeout "$group")" --build-timeout 900 \
      -o "$out" "${args[@]}" "${tests[@]}"
  ) || status=$?
  local elapsed=$(( $(date +%s) - started ))
  local result="$out/mutants.out"
  local caught missed timeout unviable total
  caught=$(wc -l < "$result/caught.txt" 2>/dev/null || echo 0)
  missed=$(wc -l < "$result/missed.txt" 2>/dev/null || echo 0)
  timeout=$(wc -l < "$result/timeout.txt" 2>/dev/null || echo 0)
  unviable=$(wc -l < "$result/unviable.txt" 2>/dev/null || echo 0)
  total=$((caught + missed + timeout + unviable))
  local unexplained_list equivalent
  unexplained_list=$(unexplained "$result/missed.txt")
  local left=0
  [[ -n "$unexplained_list" ]] && left=$(wc -l <<<"$unexplained_list")
  equivalent=$((missed - left))
  local line
  line=$(printf '%s %s %-8s shard %-5s mutants %4d  caught %4d  timeout %3d  unviable %3d  missed %3d (equivalent %3d, unexplained %3d)  %5d s  exit %d' \
    "$(date -u +%FT%TZ)" "$(cat "$TREE/.mutants-commit")" "$group" "$shard" "$total" "$caught" "$timeout" "$unviable" "$missed" "$equivalent" "$left" "$elapsed" "$status")
  echo "$line" | tee -a "$WORK/summary.txt"
  if [[ -n "$unexplained_list" ]]; then
    echo "missed, and not listed as equivalent in TESTING.md:"
    sed 's/^/  /' <<<"$unexplained_list"
    return 1
  fi
  # 0 all caught, 2 missed (all equivalent, checked above), 3 timeouts (caught by hanging).
  case "$status" in 0|2|3) return 0 ;; *) log "cargo-mutants exited $status"; return 1 ;; esac
}

# The mutants a group's last shards missed, tried again on the last commit after tests were
# added for them. Lines move, so each is matched by its file, replacement and function at
# any line: a survivor is only gone if every such mutant is caught now. A survivor whose
# code was rewritten (moved into a new function, or its construct gone) no longer matches:
# the next full run of its shard speaks for it.
recheck() {
  local group="$1" missed pattern patterns=()
  for missed in "$WORK"/out/"$group"-*-of-*/mutants.out/missed.txt; do
    [[ -s "$missed" ]] || continue
    while IFS= read -r mutant; do
      grep -qF -- "\`$mutant\`" <(sed -n '/^## Equivalent mutants/,$p' "$ROOT/TESTING.md") && continue
      pattern=$(sed -E 's/[][\\.*^$+?(){}|]/\\&/g; s/^([^:]+):[0-9]+:[0-9]+:/\1:[0-9]+:[0-9]+:/' <<<"$mutant")
      patterns+=("^$pattern\$")
    done < "$missed"
  done
  if [[ ${#patterns[@]} -eq 0 ]]; then
    echo "$group: no unexplained missed mutant to check again"
    return 0
  fi
  local regex
  regex=$(IFS='|'; echo "${patterns[*]}")
  mapfile -t args < <(mutant_args "$group" | grep -v -- '^-F$' | grep -vxF -- "$(group_includes "$group")")
  local tests=() target
  for target in $(group_tests "$group"); do tests+=("--cargo-arg=$target"); done
  local out="$WORK/out/$group-recheck" started status=0
  rm -rf "$out"
  mkdir -p "$out"
  started=$(date +%s)
  (
    cd "$TREE"
    CARGO_TARGET_DIR="$TARGET" PLURNK_MCP_LOG= \
      "$BIN/cargo-mutants" mutants --in-place --no-shuffle \
      --profile mutants --timeout "$(group_timeout "$group")" --build-timeout 900 \
      -o "$out" "${args[@]}" -F "$regex" "${tests[@]}"
  ) || status=$?
  local result="$out/mutants.out" caught missed timeout unviable
  caught=$(wc -l < "$result/caught.txt" 2>/dev/null || echo 0)
  missed=$(wc -l < "$result/missed.txt" 2>/dev/null || echo 0)
  timeout=$(wc -l < "$result/timeout.txt" 2>/dev/null || echo 0)
  unviable=$(wc -l < "$result/unviable.txt" 2>/dev/null || echo 0)
  printf '%s %s %-8s recheck      mutants %4d  caught %4d  timeout %3d  unviable %3d  missed %3d  %5d s  exit %d\n' \
    "$(date -u +%FT%TZ)" "$(cat "$TREE/.mutants-commit")" "$group" \
    "$((caught + missed + timeout + unviable))" "$caught" "$timeout" "$unviable" "$missed" \
    "$(( $(date +%s) - started ))" "$status" | tee -a "$WORK/summary.txt"
  [[ "$missed" -eq 0 ]] || { sed 's/^/  still missed: /' "$result/missed.txt"; return 1; }
}

mkdir -p "$WORK"
install
case "${1:-}" in
  -h|--help|--list) ;;
  *)
    # The tests that guard the call path talk to the third-party peers.
    bash scripts/install-peers.sh
    # shellcheck disable=SC1091
    . "$CACHE/peers.env"
    ;;
esac
case "${1:-}" in
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
  --list) shift; list "$@"; exit 0 ;;
  --recheck)
    shift
    group_files "${1:-}" >/dev/null || { echo "use --recheck GROUP (${ALL_GROUPS[*]})" >&2; exit 2; }
    copy_tree
    recheck "$1"
    exit $?
    ;;
esac
copy_tree
failed=0
if [[ $# -eq 0 ]]; then
  for group in "${ALL_GROUPS[@]}"; do
    n=$(group_shards "$group")
    for ((k = 0; k < n; k++)); do run_shard "$group" "$k/$n" || failed=1; done
  done
else
  group="$1"
  group_files "$group" >/dev/null || { echo "unknown group $group: use ${ALL_GROUPS[*]}" >&2; exit 2; }
  if [[ $# -ge 2 ]]; then
    run_shard "$group" "$2" || failed=1
  else
    n=$(group_shards "$group")
    for ((k = 0; k < n; k++)); do run_shard "$group" "$k/$n" || failed=1; done
  fi
fi
exit "$failed"
