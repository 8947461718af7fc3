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

# The Python tracing shim (a C extension; needs the interpreter's headers). Reinstalled
# when it is missing or when any of its sources is newer than the installed copy.
installed=$(python3 -c 'import culprit_trace._native as n; print(n.__file__)' 2>/dev/null || true)
if [ -z "$installed" ] || [ "${CULPRIT_REINSTALL:-0}" = 1 ] || [ -n "$(find python-hook tracer-preload/include \
        -newer "$installed" -type f -not -path '*/build/*' -not -path '*.egg-info*' \
        -not -path '*/__pycache__/*' -print -quit)" ]; then
    echo "setup: pip install ./python-hook" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore ./python-hook
fi

# Further installs, one file per concern (browser for page tests, third-party servers for
# end-to-end tests, ...): each is idempotent and installs only what is missing.
for f in scripts/setup.d/*.sh; do
    [ -e "$f" ] || continue
    bash "$f"
done
