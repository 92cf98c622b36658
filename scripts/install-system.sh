#!/usr/bin/env bash
# The Debian packages the replica tests (crates/cli/tests/replicas.rs) run for real:
# PostgreSQL's server binaries (initdb, pg_ctl: the tests start their own server in target/)
# and HAProxy (the load balancer in front of the gateway replicas, deploy/haproxy.cfg).
#
#   scripts/install-system.sh
#
# Idempotent: when both are there it only looks and returns. It installs through apt-get
# (as root, or with sudo), and keeps Debian's postgresql package from creating and starting a
# cluster of its own: the tests want no server they did not start.
set -euo pipefail

need=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
if ((${#need[@]} == 0)); then
  exit 0
fi

run() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
export DEBIAN_FRONTEND=noninteractive
echo "install-system.sh: installing ${need[*]}" >&2
run apt-get update -qq
if [[ " ${need[*]} " == *" postgresql "* ]]; then
  # No main cluster: the package would otherwise create one and start it on port 5432.
  run apt-get install -y -qq --no-install-recommends postgresql-common
  run sed -i 's/^#\?\s*create_main_cluster.*/create_main_cluster = false/' \
    /etc/postgresql-common/createcluster.conf
fi
run apt-get install -y -qq --no-install-recommends "${need[@]}"
