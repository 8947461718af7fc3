"""squid-cache: a caching HTTP proxy — Debian's `squid` (C++, one process on its own event
loop, memory cache only) in front of an origin server on the standard library's
`http.server` (CPython, a thread per connection), and two clients on `http.client`.

Ports: proxy = p[0], origin = p[1]. The origin (`squid-origin`) serves `/obj/K` (a body of
K-dependent size and content, cacheable for 2 s, with an ETag it revalidates with 304),
`/live/K` (`no-store`: every request goes through) and `POST /echo` (the body's SHA-1).
Client 1 (the launcher) asks the proxy for N objects over one keep-alive connection, a mix
of cacheable and live ones; client 2 (`squid-client --name 2`) asks for objects of its own
keys and POSTs to `/echo`. Every reply is checked (status, the body against what the origin
makes for it); a client with a 3 s timeout counts a failed request, connects again and goes
on. Squid gives up on the origin after 2 s (`read_timeout`, `connect_timeout`): a slow or
stopped origin becomes a 504 there, a lost one a 502.
"""

import hashlib
import http.client
import os
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port

CONF = """http_port 127.0.0.1:{proxy}
http_access allow localhost
http_access deny all
cache_mem 16 MB
maximum_object_size_in_memory 256 KB
refresh_pattern . 0 20% 60
pid_filename {dir}/squid.pid
cache_log {dir}/cache.log
access_log stdio:{dir}/access.log
coredump_dir {dir}
cache_effective_user proxy
shutdown_lifetime 1 seconds
pinger_enable off
icp_port 0
netdb_filename none
connect_timeout 2 seconds
read_timeout 2 seconds
request_timeout 5 seconds
client_persistent_connections on
server_persistent_connections on
"""

TIMEOUT_S = 3.0


def body(k):
    """What the origin serves for object k."""
    k = int(k)
    seed = hashlib.sha1(f"object {k}".encode()).hexdigest().encode()
    return (seed * (4 + k % 29))[: 300 + 97 * (k % 23)]


def origin(_name):
    """Helper process `squid-origin`: the origin server."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    port = ports("squid-cache")[1]
    term = terminated()
    served = {"obj": 0, "live": 0, "304": 0, "echo": 0, "bad": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def reply(self, status, data, headers=()):
            self.send_response(status)
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
                return self.reply(200, data, [("Cache-Control", "no-store")])
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
    log(f"squid origin: served {served['obj']} objects, {served['304']} not modified, {served['live']} live, "
        f"{served['echo']} echoes, {served['bad']} bad requests (told to stop)")


class Client:
    """A keep-alive HTTP client of the proxy, connected again after any failure."""

    def __init__(self, proxy, origin_port):
        self.proxy = proxy
        self.origin = origin_port
        self.conn = None
        self.hits = 0

    def fetch(self, method, path, data=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.proxy, timeout=TIMEOUT_S)
        self.conn.request(method, f"http://127.0.0.1:{self.origin}{path}", body=data)
        r = self.conn.getresponse()
        got = r.read()
        if "HIT" in (r.getheader("X-Cache") or ""):
            self.hits += 1
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


def client(name):
    """Helper process `squid-client --name 2`: objects of its own keys and POSTs."""
    proxy, origin_port = ports("squid-cache")[:2]
    term = terminated()
    c = Client(proxy, origin_port)
    ok = failed = i = 0
    end = time.monotonic() + WORKLOAD_S
    while not term.is_set() and time.monotonic() < end and i < 150:
        if i % 3 == 2:
            data = f"client {name} request {i} ".encode() * (1 + i % 9)
            good = c.check(i, "POST", "/echo", hashlib.sha1(data).hexdigest().encode(), data)
        else:
            k = 100 + i % 11
            good = c.check(i, "GET", f"/obj/{k}", body(k))
        ok, failed, i = ok + good, failed + (not good), i + 1
        time.sleep(0.08)
    c.close()
    log(f"squid client {name}: {ok}/{i} requests ok, {failed} failed, {c.hits} cache hits"
        f"{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    proxy, origin_port = ports("squid-cache")[:2]
    sq = os.path.join(tmp, "squid")
    os.makedirs(sq, exist_ok=True)
    os.chmod(sq, 0o777)  # squid writes its log and pid file as the user `proxy`
    conf = os.path.join(sq, "squid.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(dir=sq, proxy=proxy))
    with Daemons(tmp) as d:
        p = d.start("origin", [PY, LAUNCHER, "squid-origin"])
        wait_port(origin_port, p, timeout=10)
        p = d.start("squid", ["squid", "-N", "-f", conf], cwd=sq)
        wait_port(proxy, p, timeout=20)
        other = d.start("client2", [PY, LAUNCHER, "squid-client", "--name", "2"])
        c = Client(proxy, origin_port)
        ok = failed = 0
        for i in steps(n):
            k = i % 17
            path = f"/live/{i}" if i % 4 == 3 else f"/obj/{k}"
            good = c.check(i, "GET", path, body(i if i % 4 == 3 else k))
            ok, failed = ok + good, failed + (not good)
            time.sleep(0.06)
        c.close()
        try:
            other.wait(timeout=WORKLOAD_S)
        except Exception:
            log("client 2 did not stop")
        log(f"squid-cache: {ok}/{n} requests ok, {failed} failed, {c.hits} cache hits")
