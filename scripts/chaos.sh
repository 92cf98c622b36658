#!/usr/bin/env bash
# The long chaos run: stdio and HTTP servers under sustained concurrent calls while servers
# and their children are killed with SIGKILL, servers are disabled and enabled, and HTTP
# servers restart. Prints the figures (and leaves them in chaos.json under cargo's test
# temporary directory); exits non-zero on any call that hung past its deadline, never
# settled or got another call's answer, a server that did not come back, an orphan process,
# or metrics that disagree with the callers.
#
#   scripts/chaos.sh                    # 120 s, 20 stdio + 4 HTTP servers, 64 callers
#   CHAOS_SECONDS=600 scripts/chaos.sh  # any of CHAOS_SECONDS, CHAOS_SERVERS, CHAOS_HTTP,
#                                       # CHAOS_CALLERS overrides the default
#
# The test command runs the same test short (8 s, 4 + 2 servers, 16 callers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CHAOS_SECONDS="${CHAOS_SECONDS:-120}"
export CHAOS_SERVERS="${CHAOS_SERVERS:-20}"
export CHAOS_HTTP="${CHAOS_HTTP:-4}"
export CHAOS_CALLERS="${CHAOS_CALLERS:-64}"
echo "chaos: ${CHAOS_SECONDS} s, ${CHAOS_SERVERS} stdio + ${CHAOS_HTTP} HTTP servers, ${CHAOS_CALLERS} callers" >&2
cargo test --locked --test chaos -- --nocapture
