"""yaws-dav: the Yaws web server (Debian `yaws` 2.1: Erlang on the BEAM, an Erlang process
per connection, kernel poll) serving a WebDAV document root and reverse-proxying a
key-value API to a Python store, with two Python HTTP clients (`http.client`).

Ports: Yaws = p[0], the store = p[1]. Yaws runs with a configuration of its own (`dav =
true` on the document root; `revproxy = /item http://127.0.0.1:p[1]/`) in the foreground
(`erl -noshell -run yaws`, as `yaws -i` starts it, without a shell); it also opens its
control socket on a loopback port the kernel picks (`yaws --stop` talks to it). The store
(helper `yaws-store`: `http.server.ThreadingHTTPServer`, HTTP/1.1, a thread per
connection) serves the API of `sut/kv_http.py` on the last path segment (`PUT /K`, `GET
/K`). The uploader (the launcher) stores a file per step with a WebDAV `PUT /up/N.bin`
(its bytes follow from N) and reads it back with `GET`, comparing the length and SHA-1;
client 2 (helper `yaws-client --name 2`) puts and reads keys of its own through the proxy
(`/item/K`) and checks each answer. Both keep one connection (2 s timeout), and after a
failure log it, connect again and go on. The store says at the end how many requests it
served.
"""

import hashlib
import http.client
import http.server
import json
import os
import signal
import sys
import time

from .common import LAUNCHER, PY, Daemons, drop_http, log, ports, steps, wait_port, wait_readers
from .kv_http import digest, workload

TIMEOUT_S = 2.0
REQUESTS2 = 60


def content(i):
    """The bytes of file N (300 to 20 300 bytes, following from N)."""
    seed = hashlib.sha256(f"yaws-{i}".encode()).digest()
    n = 300 + int.from_bytes(seed[:2], "big") % 20000
    return (seed * (n // len(seed) + 1))[:n]


class StoreHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    data = {}
    counts = {"served": 0, "failed": 0}

    def log_message(self, *a):
        pass

    def key(self):
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def answer(self, code, body):
        out = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_PUT(self):
        try:
            k = int(self.key())
            v = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        except (ValueError, UnicodeDecodeError) as e:
            self.counts["failed"] += 1
            return self.answer(400, {"error": repr(e)[:100]})
        self.data[k] = v
        self.counts["served"] += 1
        self.answer(200, {"item": k, "stored": len(v)})

    def do_GET(self):
        try:
            k = int(self.key())
        except ValueError:
            self.counts["failed"] += 1
            return self.answer(404, {"error": "no such item"})
        v = self.data.get(k)
        if v is None:
            self.counts["failed"] += 1
            return self.answer(404, {"error": f"no item {k}"})
        self.counts["served"] += 1
        self.answer(200, {"item": k, "len": len(v), "digest": digest(v)})


def store(_name):
    """Helper process `yaws-store`."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", ports("yaws-dav")[1]), StoreHandler)
    srv.daemon_threads = True

    def bye(*_):
        c = StoreHandler.counts
        log(f"yaws store: {c['served']} requests ok, {c['failed']} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    srv.serve_forever()


class DavClient:
    """One keep-alive connection to Yaws for WebDAV PUT and GET, made again after a failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    def call(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        self.conn.request(method, path, body=body)
        r = self.conn.getresponse()
        data = r.read()
        if r.status not in (200, 201, 204):
            raise ValueError(f"{method} {path}: status {r.status}")
        if r.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = None
        return data

    def step(self, i):
        try:
            data = content(i)
            self.call("PUT", f"/up/{i}.bin", data)
            back = self.call("GET", f"/up/{i}.bin")
            if len(back) != len(data) or hashlib.sha1(back).digest() != hashlib.sha1(data).digest():
                raise ValueError(f"file {i}: read back {len(back)} bytes, not the {len(data)} put")
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return False


def client(name):
    """Helper process `yaws-client --name N`: REQUESTS2 key-value steps through the proxy."""
    ok, errors = workload(ports("yaws-dav")[0], name, REQUESTS2, 0.06)
    log(f"yaws client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


CONF = """logdir = {tmp}/logs
max_connections = nolimit
keepalive_timeout = 10000
copy_error_log = true
<server localhost>
  port = {port}
  listen = 127.0.0.1
  docroot = {tmp}/www
  dav = true
  revproxy = /item http://127.0.0.1:{store}/
</server>
"""


def run(tmp, n):
    yport, sport = ports("yaws-dav")[:2]
    for sub in ("www/up", "logs", "home"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    conf = os.path.join(tmp, "yaws.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(tmp=tmp, port=yport, store=sport))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Yaws keeps its control file under $HOME/.yaws: a home of its own in the scratch directory.
    yenv = dict(os.environ, HOME=os.path.join(tmp, "home"))
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "yaws-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("yaws", ["erl", "-noshell", "-noinput", "+K", "true", "-pa", "/usr/lib/yaws/ebin",
                             "-run", "yaws", "-conf", conf, "-yaws", "id", "culprit"], env=yenv)
        wait_port(yport, p, timeout=40)
        helper = d.start("client2", [PY, LAUNCHER, "yaws-client", "--name", "2"], env=env)
        c = DavClient(yport)
        ok = 0
        for i in steps(n):
            ok += c.step(i)
            time.sleep(0.02)
        wait_readers([helper], seconds=25)
        log(f"yaws-dav: {ok}/{n} steps ok, {c.errors} failed")
