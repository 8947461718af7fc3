#!/usr/bin/env bash
# Installs what Culprit's build, tests and demo need on a fresh Debian machine
# (idempotent; skips what is already there). Run as root, or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
command -v make >/dev/null || need_apt+=(make)
command -v python3 >/dev/null || need_apt+=(python3 python3-dev python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Python tracing shim (a C extension; needs the interpreter's headers).
if ! python3 -c 'import culprit_trace._native' 2>/dev/null || [ "${CULPRIT_REINSTALL:-0}" = 1 ] \
    || [ python-hook -nt "$(python3 -c 'import culprit_trace,os;print(os.path.dirname(culprit_trace.__file__))' 2>/dev/null || echo /nonexistent)" ]; then
    echo "setup: pip install ./python-hook" >&2
    python3 -m pip install --quiet --disable-pip-version-check ./python-hook
fi
