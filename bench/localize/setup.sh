#!/usr/bin/env bash
# Installs the third-party systems of the public fault suite (bench/localize/), only what
# is missing: memcached, twemproxy (nutcracker), haproxy, nginx and beanstalkd from Debian,
# Pyro5 from PyPI. Idempotent. Not run by scripts/setup.sh: the suite is not in the
# default test run.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v memcached >/dev/null || need+=(memcached)
command -v nutcracker >/dev/null || [ -x /usr/sbin/nutcracker ] || need+=(nutcracker)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v beanstalkd >/dev/null || need+=(beanstalkd)
if [ ${#need[@]} -gt 0 ]; then
    echo "localize setup: apt-get install ${need[*]}" >&2
    $SUDO apt-get update -qq
    # Debian starts some of these as services on install; the suite runs its own copies.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
python3 -c 'import Pyro5' 2>/dev/null || {
    echo "localize setup: pip install Pyro5" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore Pyro5
}
