#!/usr/bin/env bash
# Debian's Chromium: the HTML pages (reports, timeline, charts) are tested by their
# rendered DOM in a real headless browser (`tests/src/browser.rs`).
set -euo pipefail
command -v chromium >/dev/null && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: apt-get install chromium" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
