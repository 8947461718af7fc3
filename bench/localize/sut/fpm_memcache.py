"""fpm-memcache: nginx (Debian `nginx-light`: a master and one worker) in front of PHP-FPM
(Debian `php8.2-fpm`: a master and a static pool of three workers, FastCGI over TCP, run in
the foreground with a private configuration) running a PHP script that keeps its data in
memcached (Debian `memcached`, through Debian's `php-memcached` extension on libmemcached),
and two Python HTTP clients (`http.client`).

Ports: nginx = p[0], memcached = p[1], PHP-FPM = p[2]. nginx passes `/item/K` to the pool
over FastCGI (`fastcgi_keep_conn` with an upstream keep-alive cache of 4 connections: a
connection to the pool stays with the worker that accepted it, and a worker serves one
connection at a time; 1 s to connect, 1.5 s to wait for an answer, then a 502/504). The
script (`app.php`) serves the API of `sut/kv_http.py` (`PUT /item/K`, `GET /item/K`) with
a persistent `Memcached` object per worker (one connection to memcached per worker, text
protocol, 1 s to connect, poll or receive; libmemcached marks a server that failed dead for
1 s and connects again after that); a memcached failure (a false result, a value of another
length) becomes a 502 with the library's message, logged by the worker. PHP-FPM's master
kills a worker stuck on one request for 4 s (`request_terminate_timeout`) and forks a new
one for a worker that died. Each client (the launcher, and the helper `fpm-client --name
2`) puts then reads back keys of its own on one keep-alive connection to nginx (2 s
timeout), checks length and SHA-1, counts failures, connects again and goes on.

A gap of the tracer that this system shows (reported, not worked around): PHP loads its
extensions with `dlopen(..., RTLD_DEEPBIND)`, so libmemcached (a dependency of
`memcached.so`) binds `socket`, `connect`, `send`, `recv` and `poll` to libc itself, not to
`libtrace.so`: the pool workers' memcached connections are neither recorded nor open to
`--inject` (`LD_DEBUG=bindings` shows the bindings). The trace has memcached's side of
those connections only.
"""

import os
import signal

from .common import LAUNCHER, PY, Daemons, descendants, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60

APP_PHP = r"""<?php
// The fault suite's fpm-memcache application: the key-value API of sut/kv_http.py, kept
// in memcached through a persistent Memcached object of the worker.
function mc() {
    $m = new Memcached('fpm-suite');
    if (!count($m->getServerList())) {
        $m->setOptions([
            Memcached::OPT_CONNECT_TIMEOUT => 1000,
            Memcached::OPT_POLL_TIMEOUT => 1000,
            Memcached::OPT_RECV_TIMEOUT => 1000000,
            Memcached::OPT_SEND_TIMEOUT => 1000000,
            Memcached::OPT_RETRY_TIMEOUT => 1,
            Memcached::OPT_COMPRESSION => false,
        ]);
        $m->addServer('127.0.0.1', (int)getenv('FPM_MC_PORT'));
    }
    return $m;
}

function fail($m, $what) {
    throw new RuntimeException("$what: " . $m->getResultCode() . ' ' . $m->getResultMessage());
}

header('Content-Type: application/json');
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
if (!preg_match('#^/item/([0-9]+)$#', $path, $mm)) {
    http_response_code(404);
    echo json_encode(['error' => 'no such path']);
    return;
}
$k = $mm[1];
$m = mc();
try {
    if ($_SERVER['REQUEST_METHOD'] === 'PUT') {
        $v = file_get_contents('php://input');
        if (!$m->set("item$k", $v)) {
            fail($m, "set item$k");
        }
        echo json_encode(['item' => (int)$k, 'stored' => strlen($v)]);
    } else {
        $v = $m->get("item$k");
        if ($v === false || !is_string($v)) {
            fail($m, "get item$k");
        }
        echo json_encode(['item' => (int)$k, 'len' => strlen($v), 'digest' => substr(sha1($v), 0, 16)]);
    }
} catch (Throwable $e) {
    error_log("fpm worker " . getmypid() . ": item $k: memcached failed: " . $e->getMessage());
    http_response_code(502);
    echo json_encode(['error' => $e->getMessage()]);
}
"""

FPM_CONF = """; The fault suite's fpm-memcache pool (php-fpm8.2 -F -R -y this file).
[global]
pid = {d}/php-fpm.pid
error_log = {d}/php-fpm-error.log
log_level = notice
daemonize = no
process_control_timeout = 2

[suite]
listen = 127.0.0.1:{fpm}
listen.backlog = 64
pm = static
pm.max_children = 3
request_terminate_timeout = 4s
catch_workers_output = yes
decorate_workers_output = no
clear_env = no
php_admin_value[error_log] = {d}/php-fpm-error.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
"""

LOCATION = """
    location /item/ {{
      fastcgi_pass {up};
      fastcgi_keep_conn on;
      fastcgi_connect_timeout 1s; fastcgi_send_timeout 1500ms; fastcgi_read_timeout 1500ms;
      fastcgi_param SCRIPT_FILENAME {d}/www/app.php;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param REQUEST_URI $request_uri;
      fastcgi_param QUERY_STRING $query_string;
      fastcgi_param CONTENT_TYPE $content_type;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param SERVER_PROTOCOL $server_protocol;
      fastcgi_param REMOTE_ADDR $remote_addr;
      fastcgi_param SERVER_NAME $server_name;
      fastcgi_param SERVER_PORT $server_port;
    }}
"""

NGINX_CONF = """daemon off; master_process on; worker_processes 1; user root;
pid {d}/nginx.pid; error_log {d}/nginx.err warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/nb; proxy_temp_path {d}/np;
  fastcgi_temp_path {d}/nf; uwsgi_temp_path {d}/nu; scgi_temp_path {d}/ns;
  keepalive_timeout 30s; keepalive_requests 10000;
  upstream site1 {{ server 127.0.0.1:{fpm}; keepalive 1; keepalive_requests 10000; keepalive_timeout 60s; }}
  upstream site2 {{ server 127.0.0.1:{fpm}; keepalive 1; keepalive_requests 10000; keepalive_timeout 60s; }}
  server {{
    listen 127.0.0.1:{port1};
{loc1}  }}
  server {{
    listen 127.0.0.1:{port2};
{loc2}  }}
}}
"""


def client(name):
    """Helper process `fpm-client --name N`: REQUESTS2 steps on nginx's second site, every
    60 ms."""
    ok, errors = workload(ports("fpm-memcache")[3], name, REQUESTS2, 0.06)
    log(f"fpm client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")



def run(tmp, n):
    port, mc, fpm, port2 = ports("fpm-memcache")[:4]
    os.makedirs(os.path.join(tmp, "www"), exist_ok=True)
    with open(os.path.join(tmp, "www", "app.php"), "w") as f:
        f.write(APP_PHP)
    for name, text in (("php-fpm.conf", FPM_CONF.format(d=tmp, fpm=fpm)),
                       ("nginx.conf", NGINX_CONF.format(d=tmp, fpm=fpm, port1=port, port2=port2,
                                                       loc1=LOCATION.format(up="site1", d=tmp),
                                                       loc2=LOCATION.format(up="site2", d=tmp)))):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = dict(os.environ, FPM_MC_PORT=str(mc))
    left = []
    try:
        with Daemons(tmp) as d:
            p = d.start("memcached", ["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", str(mc), "-U", "0",
                                      "-t", "2"])
            wait_port(mc, p)
            f = d.start("php-fpm", ["php-fpm8.2", "-F", "-R", "-y", os.path.join(tmp, "php-fpm.conf")], env=env)
            wait_port(fpm, f, timeout=20)
            p = d.start("nginx", ["nginx", "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp, "-e",
                                  os.path.join(tmp, "nginx.err")])
            wait_port(port, p, timeout=20)
            wait_port(port2, p, timeout=20)
            try:
                helper = d.start("client2", [PY, LAUNCHER, "fpm-client", "--name", "2"])
                ok, errors = workload(port, "1", n, 0.02)
                wait_readers([helper], seconds=25)
                log(f"fpm-memcache: {ok}/{n} steps ok, {errors} failed")
            finally:
                left = descendants(f.pid)
    finally:
        # A worker stopped by SIGSTOP takes no signal from its master: whatever is left of
        # the pool is killed.
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
