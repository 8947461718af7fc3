#!/usr/bin/env bash
# The three-tier system of `culprit demand`'s end-to-end test and benchmark
# (tests/tests/demand_three_tier.rs): nginx → gunicorn (a small WSGI app) → PostgreSQL.
# Installs only what is missing.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
PY=$(python3 -c 'import sys; print(sys.executable)')
"$PY" -c 'import gunicorn, psycopg2' 2>/dev/null || {
    echo "setup: pip install gunicorn psycopg2-binary" >&2
    "$PY" -m pip install -q gunicorn psycopg2-binary
}
