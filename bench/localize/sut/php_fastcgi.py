"""php-fastcgi: lighttpd in front of PHP (Debian's `lighttpd` and `php-cgi`: C, and the Zend
engine) over FastCGI on a UNIX socket — lighttpd spawns `php-cgi`, whose master process forks
the worker that answers and forks a new one when it dies — and two HTTP clients (Python).

Port: lighttpd = p[0]; FastCGI on `DIR/php.sock`. `item.php?k=K` answers K's record as JSON;
`count.php` (POST) adds to a counter file under an exclusive lock and answers its value. The
launcher's client sends N keep-alive GETs, the helper `php-client` N/2 POSTs; each has a 2 s
timeout, checks the answer, counts a failure, opens a new connection and goes on.
"""

import http.client
import json
import os
import signal
import time

from .common import LAUNCHER, PY, Daemons, descendants, drop_http, log, ports, steps, wait_port

COUNTS = 60
ITEM = """<?php
$k = intval($_GET['k'] ?? 0);
header('Content-Type: application/json');
echo json_encode(['k' => $k, 'value' => str_repeat('p', $k % 50)]);
"""
COUNT = """<?php
$n = intval(file_get_contents('php://input'));
$f = fopen(__DIR__ . '/counter', 'c+');
flock($f, LOCK_EX);
$v = intval(stream_get_contents($f)) + $n;
ftruncate($f, 0);
rewind($f);
fwrite($f, strval($v));
flock($f, LOCK_UN);
fclose($f);
header('Content-Type: application/json');
echo json_encode(['total' => $v]);
"""
CONF = """server.document-root = "{www}"
server.port = {port}
server.bind = "127.0.0.1"
server.errorlog = "{tmp}/lighttpd-error.log"
server.max-keep-alive-idle = 10
server.modules = ("mod_fastcgi")
fastcgi.server = ( ".php" => ((
    "socket" => "{tmp}/php.sock",
    "bin-path" => "/usr/bin/php-cgi",
    "max-procs" => 1,
    "bin-environment" => ("PHP_FCGI_CHILDREN" => "1", "PHP_FCGI_MAX_REQUESTS" => "100000"),
    "check-local" => "disable"
)))
"""


class Http:
    """One keep-alive HTTP connection, made again after any failure."""

    def __init__(self, port):
        self.port, self.conn, self.errors = port, None, 0

    def call(self, method, path, body=None):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
            self.conn.request(method, path, body=body)
            r = self.conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise ValueError(f"{path}: status {r.status}")
            return json.loads(data)
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return None


def client(name):
    """Helper process `php-client --name N`: COUNTS POSTs to the counter."""
    c = Http(ports("php-fastcgi")[0])
    ok = 0
    for i in steps(COUNTS):
        r = c.call("POST", "/count.php", body=str(i % 7 + 1))
        ok += r is not None and isinstance(r.get("total"), int)
        time.sleep(0.05)
    log(f"php client {name}: {ok}/{COUNTS} counts ok, {c.errors} failed")



def run(tmp, n):
    port = ports("php-fastcgi")[0]
    www = os.path.join(tmp, "www")
    os.makedirs(www, exist_ok=True)
    for name, text in (("item.php", ITEM), ("count.php", COUNT)):
        with open(os.path.join(www, name), "w") as f:
            f.write(text)
    with open(os.path.join(tmp, "lighttpd.conf"), "w") as f:
        f.write(CONF.format(www=www, port=port, tmp=tmp))
    php = []
    try:
        with Daemons(tmp) as d:
            p = d.start("lighttpd", ["lighttpd", "-D", "-f", os.path.join(tmp, "lighttpd.conf")])
            wait_port(port, p, timeout=20)
            try:
                _workload(port, n, d)
            finally:
                php = descendants(p.pid)
    finally:
        # lighttpd puts php-cgi in a session of its own, and a worker stopped by SIGSTOP
        # never takes the SIGTERM that stops the others: whatever is left is killed.
        for pid in php:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _workload(port, n, d):
    """The two clients; the launcher's is this process."""
    helper = d.start("client2", [PY, LAUNCHER, "php-client", "--name", "2"])
    c = Http(port)
    ok = 0
    for i in steps(n):
        r = c.call("GET", f"/item.php?k={i}")
        if r is not None and r.get("k") == i and len(r.get("value", "")) == i % 50:
            ok += 1
        elif r is not None:
            log(f"item {i}: wrong answer {r!r:.60}")
        time.sleep(0.02)
    try:
        helper.wait(timeout=25)
    except Exception:
        log("the second client did not stop")
    log(f"php-fastcgi: {ok}/{n} requests ok, {c.errors} failed")
