#!/usr/bin/env bash
# Installs the third-party systems of the public fault suite (bench/localize/), only what
# is missing. Idempotent. Not run by scripts/setup.sh: the suite is not in the default
# test run.
#   Debian: memcached, nutcracker (twemproxy), haproxy, nginx-light, beanstalkd  (tuning half)
#           mosquitto, ngircd, unbound, nsd, gearman-job-server, gearman-tools,
#           zookeeper, rabbitmq-server, default-jre-headless,
#           slapd, tarantool, lighttpd, php-cgi, mariadb-server, rsyslog,
#           rsyslog-relp, dovecot-imapd, prosody, squid, varnish, pdns-recursor,
#           knot, freeradius, nodejs, activemq, kamailio, stunnel4, ruby,
#           ruby-webrick, starman, libplack-perl, libcache-memcached-fast-perl,
#           postfix, apache2, lighttpd-mod-webdav,
#           openssh-server, openssh-client, tomcat10, openjdk-17-jdk-headless,
#           uwsgi-core, uwsgi-plugin-python3, ejabberd, puma, icecast2, coturn, dnsmasq-base,
#           tinyproxy, h2o, krb5-kdc, krb5-admin-server, krb5-user, libmojolicious-perl,
#           php8.2-fpm, php-memcached, unicorn, jetty9, znc, inspircd,
#           exim4-daemon-light (unpacked under /opt/culprit/exim4: it conflicts with postfix),
#           kea-dhcp4-server, kea-ctrl-agent, spamd, spamassassin, spamc,
#           git, libhsqldb-java, thrift-compiler, xrootd-server, xrootd-client,
#           libnetty-java,
#           opensmtpd (unpacked under /opt/culprit/opensmtpd: it conflicts with postfix)
#           (later systems; split.json)
#   PyPI:   Pyro5 (tuning); paho-mqtt, dnspython, aiohttp, kazoo, pika, grpcio, ldap3,
#           tarantool, pymysql, pyzmq, slixmpp, websockets, stomp.py, aiosmtpd,
#           gevent, twisted, tornado, CherryPy, rpyc, quart, hypercorn, h2, gunicorn, falcon,
#           asyncssh, uvicorn, starlette, httpx, trio, aiocoap, paramiko, greenstalk, thrift,
#           pymodbus (validation)
# Installs (only when something is missing) run under the machine's install lock
# (/tmp/culprit-apt.lock, at most 15 minutes' wait), so that two runs, or other installs that
# take the same lock, do not collide; apt also waits for dpkg's own lock.
set -euo pipefail
locked=""
lock() {
    [ -n "$locked" ] && return
    exec 9>/tmp/culprit-apt.lock
    flock -w 900 9 || { echo "localize setup: /tmp/culprit-apt.lock held for 15 minutes" >&2; exit 1; }
    locked=1
}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
need=()
have memcached || need+=(memcached)
have nutcracker || need+=(nutcracker)
have haproxy || need+=(haproxy)
have nginx || need+=(nginx-light)
have beanstalkd || need+=(beanstalkd)
have mosquitto || need+=(mosquitto)
have ngircd || need+=(ngircd)
have unbound || need+=(unbound)
have nsd || need+=(nsd)
have gearmand || need+=(gearman-job-server)
have gearman || need+=(gearman-tools)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
have rabbitmq-server || need+=(rabbitmq-server)
have java || need+=(default-jre-headless)
have epmd || need+=(erlang-base)
have rev || need+=(bsdextrautils)  # gearman-jobs' workers run `rev` per job
have slapd || need+=(slapd)
[ -f /usr/lib/ldap/syncprov.so ] || need+=(slapd)  # ldap-syncrepl's provider overlay
have tarantool || need+=(tarantool)
have lighttpd || need+=(lighttpd)
have php-cgi || need+=(php-cgi)
have mariadbd || need+=(mariadb-server)
have rsyslogd || need+=(rsyslog)
compgen -G '/usr/lib/*/rsyslog/omrelp.so' >/dev/null || need+=(rsyslog-relp)
have dovecot || need+=(dovecot-imapd)
[ -x /usr/lib/dovecot/imap ] || need+=(dovecot-imapd)
have prosody || need+=(prosody)
have squid || need+=(squid)
have varnishd || need+=(varnish)
have pdns_recursor || need+=(pdns-recursor)
have knotd || need+=(knot)
have freeradius || need+=(freeradius)
have node || need+=(nodejs)
[ -f /usr/share/activemq/bin/activemq.jar ] || need+=(activemq)
have kamailio || need+=(kamailio)
have stunnel4 || need+=(stunnel4)
have ruby || need+=(ruby)
ruby -rwebrick -e1 2>/dev/null || need+=(ruby-webrick)
have starman || need+=(starman)
[ -f /usr/share/perl5/Plack.pm ] || need+=(libplack-perl)
perl -MCache::Memcached::Fast -e1 2>/dev/null || need+=(libcache-memcached-fast-perl)
# postfix-relay runs a private instance (its own main.cf); the package's debconf question is
# answered "No configuration", so that nothing is written to /etc/postfix/main.cf.
[ -x /usr/lib/postfix/sbin/master ] || need+=(postfix)
have apache2 || need+=(apache2)
[ -f /usr/lib/apache2/modules/mod_proxy_balancer.so ] || need+=(apache2)
[ -f /usr/lib/lighttpd/mod_webdav.so ] || need+=(lighttpd-mod-webdav)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
have ssh || need+=(openssh-client)
have ssh-keygen || need+=(openssh-client)
[ -f /usr/share/tomcat10/bin/bootstrap.jar ] || need+=(tomcat10)
have javac || need+=(openjdk-17-jdk-headless)  # tomcat-chain's servlet, compiled below
have uwsgi || need+=(uwsgi-core)
[ -f /usr/lib/uwsgi/plugins/http_plugin.so ] || need+=(uwsgi-core)
[ -f /usr/lib/uwsgi/plugins/python3_plugin.so ] || need+=(uwsgi-plugin-python3)
compgen -G '/usr/lib/*/ejabberd-*/ebin/ejabberd.app' >/dev/null || need+=(ejabberd)
have puma || need+=(puma)
have icecast2 || need+=(icecast2)
have turnserver || need+=(coturn)
have dnsmasq || need+=(dnsmasq-base)
have tinyproxy || need+=(tinyproxy)
have h2o || need+=(h2o)
have krb5kdc || need+=(krb5-kdc)
have kadmind || need+=(krb5-admin-server)
have kinit || need+=(krb5-user)
have kvno || need+=(krb5-user)
perl -MMojolicious -e1 2>/dev/null || need+=(libmojolicious-perl)
# Validation run 10, branch loc-sysl: vsftpd-ftp, bind-chain, syslog-ng-relay.
[ -x /usr/sbin/vsftpd ] || need+=(vsftpd)
[ -x /usr/sbin/named ] || need+=(bind9)
# syslog-ng-core conflicts with rsyslog (both provide system-log-daemon) and the suite runs
# both: syslog-ng's own files are unpacked under /opt/culprit/syslog-ng (found there by
# sut/syslog_ng_relay.py), its libraries installed by apt below (they conflict with nothing).
SNG=/opt/culprit/syslog-ng
sng=""
[ -x /usr/sbin/syslog-ng ] || [ -x "$SNG/usr/sbin/syslog-ng" ] || sng=1
[ -f /usr/share/java/h2.jar ] || need+=(libh2-java)  # h2-pgwire (loc-sysm)
[ -d /usr/lib/yaws/ebin ] || need+=(yaws)  # yaws-dav (loc-sysm)
have nghttpx || need+=(nghttp2-proxy)  # nghttpx-proxy
ruby -reventmachine -e1 2>/dev/null || need+=(ruby-eventmachine)  # em-relay
have php || need+=(php-cli)
have snmpd || need+=(snmpd)
have snmpset || need+=(snmp)
have snmpget || need+=(snmp)
have php-fpm8.2 || need+=(php8.2-fpm)  # fpm-memcache (loc-sysq)
[ -f /usr/lib/php/20220829/memcached.so ] || need+=(php-memcached)
have unicorn || need+=(unicorn)  # unicorn-store
# Validation run 11, branch loc-sysp: trafficserver-cache, distcc-farm, rsyncd-mirror.
have traffic_server || need+=(trafficserver)
have distccd || need+=(distcc)
have distcc || need+=(distcc)
have rsync || need+=(rsync)
# Validation run 12, branch loc-sysr: jetty-chain, znc-inspircd, exim-relay.
[ -f /usr/share/jetty9/start.jar ] || need+=(jetty9)
have znc || need+=(znc)
[ -x /usr/sbin/inspircd ] || need+=(inspircd)
# Validation run 13, branch loc-syss: kea-dhcp, spamd-prefork (aiocoap-proxy: pip below).
have kea-dhcp4 || need+=(kea-dhcp4-server)
have kea-ctrl-agent || need+=(kea-ctrl-agent)
have spamd || need+=(spamd spamassassin)
have spamc || need+=(spamc)
# Validation run 13, branch loc-syst: git-daemon-mirror (Debian's git in /usr/bin, whatever
# else PATH holds), hsqldb-front (its front is compiled below with javac).
{ [ -x /usr/bin/git ] && [ -x /usr/lib/git-core/git-daemon ]; } || need+=(git)
[ -f /usr/share/java/hsqldb.jar ] || need+=(libhsqldb-java)
# Validation run 14, branch loc-sysu: thrift-chain's IDL is compiled with Debian's Thrift
# compiler (beanstalkd-workers: beanstalkd above; modbus-gateway: pip below).
have thrift || need+=(thrift-compiler)
# Validation run 14, branch loc-sysv: xrootd-cluster, netty-chain (compiled below with
# javac), drb-chain (ruby, above).
have xrootd || need+=(xrootd-server)
have cmsd || need+=(xrootd-server)
have xrdcp || need+=(xrootd-client)
have xrdfs || need+=(xrootd-client)
[ -f /usr/share/java/netty-codec-http.jar ] || need+=(libnetty-java)
# Validation run 15, branch loc-sysx: rmi-chain (the JDK's rmiregistry; compiled below with
# javac), poe-chain (Perl POE), copas-chain (Copas 1.1.7 is packaged for Lua 5.1 and 5.2
# only: run under Debian's lua5.1, with lua-socket).
have rmiregistry || need+=(openjdk-17-jdk-headless)
perl -MPOE -e 1 2>/dev/null || need+=(libpoe-perl)
have lua5.1 || need+=(lua5.1)
[ -f /usr/share/lua/5.1/copas.lua ] || need+=(lua-copas)
[ -f /usr/share/lua/5.1/socket.lua ] || need+=(lua-socket)
# exim4-daemon-light conflicts with postfix (both provide mail-transport-agent) and the
# suite runs both: exim's own files (and exim4-base's) are unpacked under /opt/culprit/exim4
# (found there by sut/exim_relay.py), its libraries installed by apt below.
EXIM=/opt/culprit/exim4
exim=""
[ -x "$EXIM/usr/sbin/exim4" ] || exim=1
if [ ${#need[@]} -gt 0 ]; then
    lock
    echo "localize setup: apt-get install ${need[*]}" >&2
    mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
    $SUDO apt-get update -qq
    if printf '%s\n' "${need[@]}" | grep -qx postfix; then
        echo "postfix postfix/main_mailer_type select No configuration" | $SUDO debconf-set-selections
    fi
    # Debian starts some of these as services on install (where an init system runs); the
    # suite runs its own copies on its own ports. policy-rc.d stops that where it is honoured.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -n "$sng" ]; then
    lock
    echo "localize setup: syslog-ng-core unpacked into $SNG" >&2
    mapfile -t deps < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances syslog-ng-core | awk '$1 == "Depends:" && $2 !~ /^</ {print $2}')
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${deps[@]}" >/dev/null
    d=$(mktemp -d)
    (cd "$d" && apt-get download -qq syslog-ng-core >/dev/null)
    $SUDO mkdir -p "$SNG"
    $SUDO dpkg-deb -x "$d"/syslog-ng-core_*.deb "$SNG"
    rm -rf "$d"
fi
if [ -n "$exim" ]; then
    lock
    echo "localize setup: exim4-daemon-light and exim4-base unpacked into $EXIM" >&2
    mapfile -t deps < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances exim4-daemon-light | awk '$1 == "Depends:" && $2 !~ /^</ && $2 !~ /^exim4/ {print $2}')
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${deps[@]}" >/dev/null
    d=$(mktemp -d)
    (cd "$d" && apt-get download -qq exim4-daemon-light exim4-base >/dev/null)
    $SUDO mkdir -p "$EXIM"
    for f in "$d"/*.deb; do $SUDO dpkg-deb -x "$f" "$EXIM"; done
    rm -rf "$d"
fi
# The exim binary's compiled-in user (exim4-base's postinst makes it on an installed system).
if ! getent passwd Debian-exim >/dev/null; then
    lock
    $SUDO adduser --system --group --quiet --allow-bad-names --home /var/spool/exim4 --no-create-home Debian-exim
fi
# Validation run 15, branch loc-sysw: opensmtpd-relay. opensmtpd conflicts with postfix too
# (mail-transport-agent): its files are unpacked under /opt/culprit/opensmtpd (found there by
# sut/opensmtpd_relay.py, which binds its compiled-in paths in a mount namespace per
# instance), its libraries installed by apt; its two users and its chroot directory are made
# as its postinst makes them, and /usr/libexec/opensmtpd as the mount point of its agents.
# (xmlrpc-chain: the standard library; node-h2-chain: nodejs above, httpx and h2 below.)
OSMTPD=/opt/culprit/opensmtpd
if [ ! -x "$OSMTPD/usr/sbin/smtpd" ]; then
    lock
    echo "localize setup: opensmtpd unpacked into $OSMTPD" >&2
    mapfile -t deps < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances opensmtpd | awk '$1 == "Depends:" && $2 !~ /^</ {print $2}')
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${deps[@]}" >/dev/null
    d=$(mktemp -d)
    (cd "$d" && apt-get download -qq opensmtpd >/dev/null)
    $SUDO mkdir -p "$OSMTPD"
    $SUDO dpkg-deb -x "$d"/opensmtpd_*.deb "$OSMTPD"
    rm -rf "$d"
fi
for u in opensmtpd opensmtpq; do
    if ! getent passwd "$u" >/dev/null; then
        lock
        getent group "$u" >/dev/null || $SUDO addgroup --system --quiet "$u"
        $SUDO adduser --system --quiet --home /var/lib/opensmtpd/empty --no-create-home \
            --disabled-password --ingroup "$u" "$u"
    fi
done
[ -d /var/lib/opensmtpd/empty ] || $SUDO mkdir -p /var/lib/opensmtpd/empty
[ -d /usr/libexec/opensmtpd ] || $SUDO mkdir -p /usr/libexec/opensmtpd
pips=()
python3 -c 'import Pyro5' 2>/dev/null || pips+=(Pyro5)
python3 -c 'import paho.mqtt' 2>/dev/null || pips+=(paho-mqtt)
python3 -c 'import dns.resolver' 2>/dev/null || pips+=(dnspython)
python3 -c 'import aiohttp' 2>/dev/null || pips+=(aiohttp)
python3 -c 'import kazoo' 2>/dev/null || pips+=(kazoo)
python3 -c 'import pika' 2>/dev/null || pips+=(pika)
python3 -c 'import grpc' 2>/dev/null || pips+=(grpcio)
python3 -c 'import ldap3' 2>/dev/null || pips+=(ldap3)
python3 -c 'import tarantool' 2>/dev/null || pips+=(tarantool)
python3 -c 'import pymysql' 2>/dev/null || pips+=(pymysql)
python3 -c 'import zmq' 2>/dev/null || pips+=(pyzmq)
python3 -c 'import slixmpp' 2>/dev/null || pips+=(slixmpp)
python3 -c 'import websockets.asyncio.server' 2>/dev/null || pips+=('websockets>=14')
python3 -c 'import stomp' 2>/dev/null || pips+=(stomp.py)
python3 -c 'import aiosmtpd' 2>/dev/null || pips+=(aiosmtpd)
python3 -c 'import gevent' 2>/dev/null || pips+=(gevent)
python3 -c 'import twisted.protocols.amp' 2>/dev/null || pips+=(twisted)
python3 -c 'import tornado.web' 2>/dev/null || pips+=(tornado)
python3 -c 'import cherrypy' 2>/dev/null || pips+=(CherryPy)
python3 -c 'import rpyc' 2>/dev/null || pips+=(rpyc)
python3 -c 'import quart' 2>/dev/null || pips+=(quart)
python3 -c 'import hypercorn' 2>/dev/null || pips+=(hypercorn)
python3 -c 'import h2.connection' 2>/dev/null || pips+=(h2)  # h2o-proxy's HTTP/2 client
python3 -c 'import gunicorn' 2>/dev/null || pips+=(gunicorn)
python3 -c 'import falcon' 2>/dev/null || pips+=(falcon)
python3 -c 'import asyncssh' 2>/dev/null || pips+=(asyncssh)
python3 -c 'import uvicorn' 2>/dev/null || pips+=(uvicorn)
python3 -c 'import starlette' 2>/dev/null || pips+=(starlette)
python3 -c 'import httpx' 2>/dev/null || pips+=(httpx)
python3 -c 'import aioftp' 2>/dev/null || pips+=(aioftp)  # aioftp-transfer (loc-sysm)
python3 -c 'import psycopg2' 2>/dev/null || pips+=(psycopg2-binary)  # h2-pgwire (loc-sysm)
python3 -c 'import sanic' 2>/dev/null || pips+=(sanic)  # sanic-waitress
python3 -c 'import waitress' 2>/dev/null || pips+=(waitress)
python3 -c 'import bottle' 2>/dev/null || pips+=(bottle)
python3 -c 'import trio' 2>/dev/null || pips+=(trio)  # trio-chain (loc-sysq)
python3 -c 'import aiocoap' 2>/dev/null || pips+=(aiocoap)  # aiocoap-proxy (loc-syss)
python3 -c 'import paramiko' 2>/dev/null || pips+=(paramiko)  # paramiko-sftp (loc-syst)
python3 -c 'import greenstalk' 2>/dev/null || pips+=(greenstalk)  # beanstalkd-workers (loc-sysu)
python3 -c 'import thrift' 2>/dev/null || pips+=(thrift)  # thrift-chain (loc-sysu)
python3 -c 'import pymodbus' 2>/dev/null || pips+=(pymodbus)  # modbus-gateway (loc-sysu)
if [ ${#pips[@]} -gt 0 ]; then
    lock
    echo "localize setup: pip install ${pips[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${pips[@]}"
fi
# mariadb-replication starts both servers from one data directory made here, once, outside
# every recording (mariadb-install-db bootstraps for seconds).
(cd "$(dirname "$0")" && python3 -c 'from sut.mariadb_replication import template; template()')
# tomcat-chain's servlet is compiled once, outside every recording.
(cd "$(dirname "$0")" && python3 -c 'from sut.tomcat_chain import build; build()')
# jetty-chain's servlet too (against Jetty's servlet-api-3.1.jar).
(cd "$(dirname "$0")" && python3 -c 'from sut.jetty_chain import build; build()')
# hsqldb-front's HTTP front too (the JDK only; HSQLDB's driver is on its class path at run time).
(cd "$(dirname "$0")" && python3 -c 'from sut.hsqldb_front import build; build()')
# thrift-chain's IDL too (Debian's thrift compiler: generated Python code).
(cd "$(dirname "$0")" && python3 -c 'from sut.thrift_chain import build; build()')
# netty-chain's two JVMs too (against Debian's Netty jars).
(cd "$(dirname "$0")" && python3 -c 'from sut.netty_chain import build; build()')
# rmi-chain's JVMs too (the JDK only).
(cd "$(dirname "$0")" && python3 -c 'from sut.rmi_chain import build; build()')
