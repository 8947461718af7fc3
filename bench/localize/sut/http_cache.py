"""What the two caching-proxy systems (squid-cache, varnish-cache) share: the origin server
behind the cache, and the keep-alive client in front of it."""

import hashlib
import http.client
import time

from .common import WORKLOAD_S, log, steps, terminated

TIMEOUT_S = 3.0


def serve_origin(port, body, label, live_control, origin_name=None):
    """An `http.server` origin on `port` until told to stop: `GET /obj/K` (cacheable,
    revalidated by ETag), `GET /live/K` (not cached: `Cache-Control: live_control`), `POST
    /echo` (the SHA-1 of the body). `origin_name`, when given, is sent as `X-Origin`, so the
    clients can tell a director's origins apart."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    term = terminated()
    served = {"obj": 0, "live": 0, "304": 0, "echo": 0, "bad": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def reply(self, status, data, headers=()):
            self.send_response(status)
            if origin_name is not None:
                self.send_header("X-Origin", origin_name)
            for h, v in headers:
                self.send_header(h, v)
            if status != 304:  # a 304's Content-Length would replace the cached object's
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            parts = self.path.strip("/").split("/")
            if len(parts) != 2 or parts[0] not in ("obj", "live") or not parts[1].isdigit():
                served["bad"] += 1
                return self.reply(404, b"no such object\n")
            data = body(parts[1])
            tag = '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
            if parts[0] == "live":
                served["live"] += 1
                return self.reply(200, data, [("Cache-Control", live_control)])
            if self.headers.get("If-None-Match") == tag:
                served["304"] += 1
                return self.reply(304, b"", [("ETag", tag), ("Cache-Control", "max-age=2")])
            served["obj"] += 1
            self.reply(200, data, [("ETag", tag), ("Cache-Control", "max-age=2")])

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            data = self.rfile.read(n)
            served["echo"] += 1
            self.reply(200, hashlib.sha1(data).hexdigest().encode(), [("Cache-Control", "no-store")])

    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.timeout = 0.2
    while not term.is_set():
        srv.handle_request()
    srv.server_close()
    log(f"{label}: served {served['obj']} objects, {served['304']} not modified, {served['live']} live, "
        f"{served['echo']} echoes, {served['bad']} bad requests (told to stop)")


class Client:
    """A keep-alive HTTP client of a cache on `port`, connected again after any failure.
    `prefix` goes before every path (a forward proxy's absolute URL)."""

    def __init__(self, port, prefix=""):
        self.port = port
        self.prefix = prefix
        self.conn = None
        self.hits = 0
        self.origins = {}

    def fetch(self, method, path, data=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        self.conn.request(method, self.prefix + path, body=data)
        r = self.conn.getresponse()
        got = r.read()
        if "HIT" in (r.getheader("X-Cache") or ""):
            self.hits += 1
        o = r.getheader("X-Origin")
        if o is not None:
            self.origins[o] = self.origins.get(o, 0) + 1
        return r.status, got

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def check(self, i, method, path, want, data=None):
        """One request; True when it came back right."""
        try:
            status, got = self.fetch(method, path, data)
            if status != 200 or got != want:
                raise ValueError(f"{method} {path}: status {status}, {len(got)} bytes")
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            log(f"request {i} failed: {e!r}")
            self.close()
            return False

    def spread(self):
        return ", ".join(f"origin {o}: {n}" for o, n in sorted(self.origins.items()))


def client_loop(c, name, label, body, first_key, keys, post_repeat):
    """A client process's workload: up to 150 requests, every third a POST of its own
    (repeated `post_repeat` ways), the others objects `first_key + i % keys`; then its
    summary line."""
    term = terminated()
    ok = failed = i = 0
    end = time.monotonic() + WORKLOAD_S
    while not term.is_set() and time.monotonic() < end and i < 150:
        if i % 3 == 2:
            data = f"client {name} request {i} ".encode() * (1 + i % post_repeat)
            good = c.check(i, "POST", "/echo", hashlib.sha1(data).hexdigest().encode(), data)
        else:
            k = first_key + i % keys
            good = c.check(i, "GET", f"/obj/{k}", body(k))
        ok, failed, i = ok + good, failed + (not good), i + 1
        time.sleep(0.08)
    c.close()
    spread = f" ({c.spread()})" if c.origins else ""
    log(f"{label} {name}: {ok}/{i} requests ok, {failed} failed, {c.hits} cache hits{spread}"
        f"{' (told to stop)' if term.is_set() else ''}")


def launcher_loop(c, n, body, keys, other, label):
    """The launcher's own client: `n` requests (every fourth a `live` object no cache keeps,
    the others objects `i % keys`), then waits for the other client process `other` and
    prints the summary line."""
    ok = failed = 0
    for i in steps(n):
        k = i % keys
        path = f"/live/{i}" if i % 4 == 3 else f"/obj/{k}"
        good = c.check(i, "GET", path, body(i if i % 4 == 3 else k))
        ok, failed = ok + good, failed + (not good)
        time.sleep(0.06)
    c.close()
    try:
        other.wait(timeout=WORKLOAD_S)
    except Exception:
        log("client 2 did not stop")
    spread = f" ({c.spread()})" if c.origins else ""
    log(f"{label}: {ok}/{n} requests ok, {failed} failed, {c.hits} cache hits{spread}")
