#!/usr/bin/env bash
# The three-tier system, run under `culprit record`: PostgreSQL (as the postgres user),
# gunicorn with app.py, nginx in front, and load.py; everything stops when load.py ends.
# usage: run.sh DIR PGPORT APPPORT NGINXPORT SECONDS SEED   (DIR holds pgdata, made by the test)
set -euo pipefail
DIR=$1 PGPORT=$2 APPPORT=$3 NGINXPORT=$4 SECS=$5 SEED=$6
HERE=$(cd "$(dirname "$0")" && pwd)
export PGPORT
# The pool is writable by the postgres user's processes too: `culprit record --shared-writers`.
PGBIN=$(dirname "$(readlink -f "$(command -v postgres || echo /usr/lib/postgresql/15/bin/postgres)")")
runuser -u postgres -- "$PGBIN/postgres" -D "$DIR/pgdata" -p "$PGPORT" -k "$DIR/pgdata" \
    -c listen_addresses=127.0.0.1 -c fsync=off -c autovacuum=off >"$DIR/pg.log" 2>&1 &
PG=$!
for _ in $(seq 100); do "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" && break; sleep 0.1; done
PY=$(python3 -c 'import sys; print(sys.executable)')
(cd "$HERE" && exec "$PY" -m gunicorn -w 1 -b "127.0.0.1:$APPPORT" app:app) >"$DIR/gunicorn.log" 2>&1 &
GU=$!
cat >"$DIR/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes 1;
user root;
error_log $DIR/nginx.err;
pid $DIR/nginx.pid;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $DIR/ngx_body;
    proxy_temp_path $DIR/ngx_proxy;
    fastcgi_temp_path $DIR/ngx_fcgi;
    uwsgi_temp_path $DIR/ngx_uwsgi;
    scgi_temp_path $DIR/ngx_scgi;
    server {
        listen 127.0.0.1:$NGINXPORT;
        location / { proxy_pass http://127.0.0.1:$APPPORT; }
    }
}
CONF
nginx -c "$DIR/nginx.conf" &
NG=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$NGINXPORT/a?k=1" >/dev/null 2>&1 && break
    sleep 0.1
done
"$PY" "$HERE/load.py" "$NGINXPORT" "$SECS" "$SEED"
kill -QUIT $NG 2>/dev/null || true
kill -TERM $GU 2>/dev/null || true
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/pgdata" -m fast stop >/dev/null 2>&1 || kill -INT $PG
wait
