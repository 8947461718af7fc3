#!/usr/bin/env bash
# Installs what the demand suite (bench/demand/) needs, only what is missing: memcached and
# haproxy from Debian (sqlite3 is Python's own module). Idempotent. Not run by
# scripts/setup.sh: the suite is not in the default test run.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || need+=(memcached)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
    echo "demand setup: apt-get install ${need[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
python3 -c 'import sqlite3' || { echo "demand setup: this Python has no sqlite3 module" >&2; exit 1; }
