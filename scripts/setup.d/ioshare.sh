#!/usr/bin/env bash
# vsftpd (Debian): the shared file server of the ioshare end-to-end test and benchmark
# (`tests/tests/ioshare_ftp.rs`, `bench/src/bin/ioshare.rs`). Started by the tests
# themselves on 127.0.0.1 with a generated configuration; never as a system service.
set -euo pipefail
[ -x /usr/sbin/vsftpd ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: apt-get install vsftpd" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends vsftpd >/dev/null
