#!/usr/bin/env bash
# Debian's golang-go: the end-to-end test that names a Go program (which makes its system
# calls itself, not through libc) with what is not recorded of it
# (`tests/tests/names_unseen.rs` builds a tiny Go program into a temporary cache).
set -euo pipefail
[ -x /usr/bin/go ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: apt-get install golang-go" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
