"""nghttpx-proxy: nghttpx (Debian `nghttp2-proxy`, C++ on libev: a master process that forks
one worker process, which serves HTTP/1.1 and cleartext HTTP/2 on the front and keeps a pool
of HTTP/1.1 connections to each backend) routing by path to two Python stores, and two
clients, one speaking HTTP/1.1 (`http.client`), one HTTP/2 with prior knowledge (`httpx`
on `h2`).

Ports: nghttpx = p[0], item store = p[1] (the catch-all route `/`), blob store = p[2] (the
route `/blob/`). Each store (helper `ng-store --name item|blob`) is the standard library's
`http.server` (a thread per connection, HTTP/1.1 keep-alive) holding `PUT /item/K` or
`PUT /blob/K` (answers `{"item": K, "stored": LEN}`) and `GET` of the same (answers
`{"item": K, "len": LEN, "digest": D}`, D the first 16 hex digits of the SHA-1 of the value).
nghttpx gives up on a backend after 1 s (read, write, connect) and answers 502/504. Client
1 (the launcher, HTTP/1.1 keep-alive, the API of `sut/kv_http.py`) puts and reads back
items; client 2 (helper `ng-client --name 2`, one HTTP/2 connection) puts and reads back
blobs. Every answer is checked (status, key, length, digest); a failure is logged and
counted, the connection is made again, and the workload goes on.
"""

import hashlib
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers
from .kv_http import digest, value, workload
from .h2o_proxy import _children

REQUESTS2 = 60
TIMEOUT_S = 2.0


def _store_port(name):
    return ports("nghttpx-proxy")[1 if name == "item" else 2]


class StoreHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    data = {}
    lock = threading.Lock()
    counts = {"ok": 0, "bad": 0}

    def log_message(self, *_):
        pass

    def _key(self):
        parts = self.path.split("/")
        if len(parts) != 3 or parts[1] not in ("item", "blob"):
            return None
        try:
            return int(parts[2])
        except ValueError:
            return None

    def _answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        with self.lock:
            self.counts["ok" if status == 200 else "bad"] += 1

    def do_PUT(self):
        k = self._key()
        n = int(self.headers.get("Content-Length") or 0)
        v = self.rfile.read(n)
        if k is None or len(v) != n:
            return self._answer(400, {"error": "bad request"})
        with self.lock:
            self.data[k] = v
        self._answer(200, {"item": k, "stored": len(v)})

    def do_GET(self):
        k = self._key()
        with self.lock:
            v = self.data.get(k)
        if v is None:
            return self._answer(404, {"error": f"no item {k}"})
        self._answer(200, {"item": k, "len": len(v), "digest": hashlib.sha1(v).hexdigest()[:16]})


def store(name):
    """Helper process `ng-store --name item|blob`."""
    server = ThreadingHTTPServer(("127.0.0.1", _store_port(name)), StoreHandler)
    server.daemon_threads = True

    def bye(*_):
        c = StoreHandler.counts
        log(f"{name} store: {c['ok']} requests ok, {c['bad']} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server.serve_forever()


class H2Client:
    """One HTTP/2 connection (httpx, prior knowledge, 2 s timeout) to nghttpx; made again
    after any failure."""

    def __init__(self, port):
        self.port = port
        self.http = None
        self.errors = 0

    def _call(self, method, path, body=None):
        import httpx

        if self.http is None:
            self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", http1=False, http2=True,
                                     timeout=TIMEOUT_S)
        r = self.http.request(method, path, content=body)
        if r.status_code != 200 or r.http_version != "HTTP/2":
            raise ValueError(f"{method} {path}: status {r.status_code} over {r.http_version}")
        return r.json()

    def put(self, k):
        v = value(k)
        body = self._call("PUT", f"/blob/{k}", v.encode())
        if body.get("item") != k or body.get("stored") != len(v):
            raise ValueError(f"put {k}: wrong answer {body!r:.60}")

    def get(self, k):
        v = value(k)
        body = self._call("GET", f"/blob/{k}")
        if body.get("item") != k or body.get("len") != len(v) or body.get("digest") != digest(v):
            raise ValueError(f"get {k}: wrong answer {body!r:.60}")

    def step(self, k):
        import httpx

        try:
            self.put(k)
            self.get(k)
            return True
        except (OSError, httpx.HTTPError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.160}")
            if self.http is not None:
                self.http.close()
            self.http = None
            return False


def client(name):
    """Helper process `ng-client --name N`: REQUESTS2 steps over HTTP/2, every 60 ms."""
    c = H2Client(ports("nghttpx-proxy")[0])
    ok = 0
    for i in steps(REQUESTS2):
        ok += c.step(2 * i + int(name))
        time.sleep(0.06)
    log(f"nghttpx h2 client {name}: {ok}/{REQUESTS2} steps ok, {c.errors} failed")


def run(tmp, n):
    f, s1, s2 = ports("nghttpx-proxy")[:3]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        for name, port in (("item", s1), ("blob", s2)):
            p = d.start(f"store-{name}", [PY, LAUNCHER, "ng-store", "--name", name], env=env)
            wait_port(port, p, timeout=20)
        p = d.start("nghttpx", ["nghttpx", "--conf=/dev/null", f"--frontend=127.0.0.1,{f};no-tls",
                                f"--backend=127.0.0.1,{s1};/;proto=http/1.1",
                                f"--backend=127.0.0.1,{s2};/blob/;proto=http/1.1",
                                "--workers=1", "--backend-read-timeout=1s", "--backend-write-timeout=1s",
                                "--backend-connect-timeout=1s", "--backend-keep-alive-timeout=5s",
                                "--frontend-read-timeout=10s", "--frontend-keep-alive-timeout=10s",
                                "--log-level=WARN", f"--errorlog-file={tmp}/nghttpx-error.log",
                                f"--pid-file={tmp}/nghttpx.pid", "--no-server-push", "--no-ocsp"])
        workers = []
        try:
            wait_port(f, p, timeout=20)
            helper = d.start("client2", [PY, LAUNCHER, "ng-client", "--name", "2"], env=env)
            ok, errors = workload(f, "1", n, 0.02)
            wait_readers([helper], seconds=25)
            log(f"nghttpx-proxy: {ok}/{n} steps ok, {errors} failed")
        finally:
            workers = _children(p.pid)
    # A stopped worker does not act on the master's SIGTERM and outlives the master (killed
    # by the launcher after 5 s): it is killed here, so the run ends.
    kill_leftovers(workers, "nghttpx worker")


def kill_leftovers(pids, what, grace=3.0):
    """SIGKILL to each of pids still alive (not gone, not a zombie) after `grace` seconds:
    a process that a fault stopped outlives its parent's SIGTERM and would hold the
    recording open; the others leave by themselves within the grace time."""

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    end = time.monotonic() + grace
    while any(alive(pid) for pid in pids) and time.monotonic() < end:
        time.sleep(0.1)
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                log(f"{what} {pid} outlived its parent: killed")
            except OSError:
                pass
