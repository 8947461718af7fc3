#!/usr/bin/env bash
# vsftpd (Debian): the shared file server of the ioshare end-to-end test and benchmark
# (`tests/tests/ioshare_ftp.rs`, `bench/src/bin/ioshare.rs`); nginx (Debian, with its
# WebDAV module): the benchmark's one-process upload server (`--kind http`). Started by the
# tests and the benchmark themselves on 127.0.0.1 with a generated configuration; never
# as a system service.
set -euo pipefail
need=()
[ -x /usr/sbin/vsftpd ] || need+=(vsftpd)
[ -x /usr/sbin/nginx ] || need+=(nginx)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: apt-get install ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
