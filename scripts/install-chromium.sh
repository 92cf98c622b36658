#!/usr/bin/env bash
# Install Debian's chromium, the headless browser the gateway's status page is tested in
# (crates/cli/tests/gateway/), with apt-get.
#
#   scripts/install-chromium.sh    # prints the browser's path on stdout
#
# Idempotent: when chromium already runs, it only prints its path (well under a second).
# Otherwise `apt-get update` first (a fresh machine's package lists may be empty or old),
# then `apt-get install chromium` without recommended packages. Needs root, as CI has.
set -euo pipefail

log() { echo "install-chromium: $*" >&2; }

# Serialize concurrent runs (test binaries running in parallel): apt holds its own lock and
# would refuse the second one.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ROOT/.cache"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/.cache/install-chromium.lock"
  flock 9
fi

if path="$(command -v chromium 2>/dev/null)" && chromium --version >/dev/null 2>&1; then
  log "chromium ok ($(chromium --version 2>/dev/null))"
  echo "$path"
  exit 0
fi

command -v apt-get >/dev/null || { log "apt-get is needed to install chromium (Debian)"; exit 1; }
log "installing Debian's chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
chromium --version >/dev/null 2>&1 || { log "chromium did not install"; exit 1; }
log "chromium ok ($(chromium --version 2>/dev/null))"
command -v chromium
