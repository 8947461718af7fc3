#!/usr/bin/env bash
# Debian's stripped daemons redis-server, nginx and memcached: the end-to-end test that
# checks function names against their symbol tables (`tests/tests/names_daemons.rs`).
# Started by the test itself on 127.0.0.1; never as system services (no service is
# started or enabled here beyond what the packages do on their own).
set -euo pipefail
need=()
[ -x /usr/bin/redis-server ] || need+=(redis-server)
[ -x /usr/sbin/nginx ] || need+=(nginx)
[ -x /usr/bin/memcached ] || need+=(memcached)
command -v nm >/dev/null && command -v readelf >/dev/null && command -v objcopy >/dev/null \
    || need+=(binutils)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: apt-get install ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
