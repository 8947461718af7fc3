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
# libc.a: the mid-stream message tests compile static programs (LD_PRELOAD does not apply).
[ -e "$(cc -print-file-name=libc.a 2>/dev/null)" ] && [ "$(cc -print-file-name=libc.a)" != libc.a ] \
    || need_apt+=(libc6-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-dev python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Further installs, one file per concern (browser for page tests, third-party servers for
# end-to-end tests, ...): each is idempotent and installs only what is missing.
for f in scripts/setup.d/*.sh; do
    [ -e "$f" ] || continue
    bash "$f"
done
