#!/usr/bin/env bash
# Installs what the demand suite (bench/demand/) needs, only what is missing: memcached,
# haproxy, nginx, PostgreSQL, MariaDB, uWSGI with its Python 3 plugin and PyMySQL (for the
# plugin's Debian Python), lighttpd and php-cgi with php-mysql, Apache httpd, Node.js with npm, Redis, Varnish, Starman and Perl's DBD::Pg from Debian
# (sqlite3 is Python's own module), gunicorn, psycopg2 and PyMySQL (for the suite's Python) from PyPI, and the
# npm `mysql2` driver (for wiki.js, into bench/demand/node_modules); Tomcat 10, a JDK (javac) and
# MariaDB Connector/J (libmariadb-java) from Debian; Squid, Puma and Ruby's PG driver (ruby-pg) from
# Debian (forum-squid-puma); RabbitMQ from Debian and pika from PyPI (job-rabbit-workers); aiohttp,
# grpcio and grpcio-tools from PyPI (grpc-fanout-mariadb); and
# catalog-haproxy-tomcat's servlet compiled
# once (catalog.py build). Idempotent. Not run by scripts/setup.sh: the suite is not in the
# default test run.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || need+=(memcached)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v postgres >/dev/null || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
[ -x /usr/bin/uwsgi-core ] || need+=(uwsgi-core)
[ -e /usr/lib/uwsgi/plugins/python3_plugin.so ] || need+=(uwsgi-plugin-python3)
[ -d /usr/lib/python3/dist-packages/pymysql ] || need+=(python3-pymysql)
command -v lighttpd >/dev/null || [ -x /usr/sbin/lighttpd ] || need+=(lighttpd)
command -v php-cgi >/dev/null || need+=(php-cgi)
php-cgi -m 2>/dev/null | grep -qx mysqli || need+=(php-mysql)
{ [ -x /usr/sbin/apache2 ] && [ -e /usr/lib/apache2/modules/mod_proxy_http.so ]; } || need+=(apache2)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v redis-server >/dev/null || need+=(redis-server)
[ -x /usr/sbin/varnishd ] || need+=(varnish)
command -v starman >/dev/null || need+=(starman)
perl -MDBD::Pg -e1 2>/dev/null || need+=(libdbd-pg-perl)
[ -f /usr/share/tomcat10/bin/bootstrap.jar ] || need+=(tomcat10)
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)
[ -x /usr/sbin/squid ] || need+=(squid)
command -v puma >/dev/null || need+=(puma)
ruby -rpg -e1 2>/dev/null || need+=(ruby-pg)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
if [ ${#need[@]} -gt 0 ]; then
    echo "demand setup: apt-get install ${need[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
python3 -c 'import sqlite3' || { echo "demand setup: this Python has no sqlite3 module" >&2; exit 1; }
python3 -c 'import gunicorn, psycopg2' 2>/dev/null || python3 -m pip install -q gunicorn psycopg2-binary
python3 -c 'import pymysql' 2>/dev/null || python3 -m pip install -q pymysql
python3 -c 'import pika' 2>/dev/null || python3 -m pip install -q pika
python3 -c 'import aiohttp, grpc, grpc_tools' 2>/dev/null || python3 -m pip install -q aiohttp grpcio grpcio-tools
here="$(cd "$(dirname "$0")" && pwd)"
[ -d "$here/node_modules/mysql2" ] || npm install --no-save --no-package-lock --no-audit --no-fund --prefix "$here" mysql2@3
id postgres >/dev/null 2>&1 || { echo "demand setup: no postgres user (the postgresql package makes it)" >&2; exit 1; }
# catalog-haproxy-tomcat's servlet is compiled once, outside every recording.
python3 "$here/catalog.py" build >/dev/null
