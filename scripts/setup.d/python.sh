#!/usr/bin/env bash
# What Python tracing needs (issue 17): nothing is installed into Python any more —
# `culprit record` builds the shim's C extension per interpreter into a per-user cache — but
# that build needs a C compiler and the interpreter's headers, and the pip-layout test
# (tests/tests/python_trace.rs builds `python-hook/setup.py` into a private user site)
# needs setuptools. The greenlet test needs PyPI's greenlet. Idempotent: installs only what
# is missing.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
if ! python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    need_apt+=(python3-dev)
fi
python3 -c 'import setuptools' 2>/dev/null || need_apt+=(python3-setuptools)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup.d/python: apt-get install ${need_apt[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
python3 -c 'import greenlet' 2>/dev/null || {
    echo "setup.d/python: pip install greenlet" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore greenlet
}
