"""xmlrpc-chain: an XML-RPC front service that keeps nothing and forwards every call to an
XML-RPC store service in another process, and two XML-RPC clients (CPython's standard
library only: `xmlrpc.server.SimpleXMLRPCServer` with `socketserver.ThreadingMixIn`, a
thread per connection, and `xmlrpc.client`).

Ports: front = p[0], store = p[1]. Both services answer `put(key, value)` (value an
XML-RPC base64 binary) with the value's length and the first 16 hex digits of its SHA-1,
and `get(key)` with the value (a Fault when the key is missing). The store (helper
`xmlrpc-store`) holds the values in a dict. The front (helper `xmlrpc-front`) makes each
call on the store through one of 2 pooled `xmlrpc.client.ServerProxy` objects (at most 5 s'
wait for one; 1.5 s timeout on the socket; the server side speaks HTTP/1.0, so every call
is a new connection); a failure of the store (a broken or timed-out connection, an answer
that does not parse, a Fault) drops that proxy, to be made again by the next call that
takes it, and becomes a Fault to the client. Client 1 (the launcher) and client 2 (helper
`xmlrpc-client --name 2`) each take steps through the front: a step puts a value made for
it (80 to 6 000 bytes) under a key of its own and reads it back, checking the answer to the
put and the value's length and SHA-1; every call is bounded by a 3 s socket timeout; after
a failure the client logs it, drops its proxy, makes a new one and goes on. Front and store
say at their end (SIGTERM) how many calls they answered.
"""

import hashlib
import http.client
import os
import queue
import signal
import socketserver
import sys
import threading
import time
import xml.parsers.expat
import xmlrpc.client
import xmlrpc.server

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

POOL = 2
STORE_TIMEOUT = 1.5
CLIENT_TIMEOUT = 3.0
REQUESTS2 = 60


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def value(name, i):
    """The value client `name` puts at step i."""
    size = 80 + (i * 389 + int(name) * 131) % 5900
    head = f"client {name} step {i}:".encode()
    return (head + bytes(range(97, 123)) * (size // 26 + 1))[:size]


class TimeoutTransport(xmlrpc.client.Transport):
    """xmlrpc.client's HTTP transport with a timeout on its socket."""

    def __init__(self, timeout):
        super().__init__()
        self.timeout = timeout

    def make_connection(self, host):
        conn = super().make_connection(host)
        conn.timeout = self.timeout
        return conn


def proxy(port, timeout):
    return xmlrpc.client.ServerProxy(f"http://127.0.0.1:{port}/RPC2", transport=TimeoutTransport(timeout))


class Server(socketserver.ThreadingMixIn, xmlrpc.server.SimpleXMLRPCServer):
    daemon_threads = True


def serve(port, funcs, counts, who):
    def bye(*_):
        log(f"xmlrpc-chain {who}: {counts['put']} puts and {counts['get']} gets answered (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server = Server(("127.0.0.1", port), logRequests=False, allow_none=False)
    for f in funcs:
        server.register_function(f)
    server.serve_forever()


def store(_name):
    """Helper process `xmlrpc-store`: the values."""
    counts = {"put": 0, "get": 0}
    lock = threading.Lock()
    data = {}

    def put(key, val):
        with lock:
            data[key] = val.data
            counts["put"] += 1
        return f"{len(val.data)} {digest(val.data)}"

    def get(key):
        with lock:
            counts["get"] += 1
            if key not in data:
                raise KeyError(key)
            return xmlrpc.client.Binary(data[key])

    serve(ports("xmlrpc-chain")[1], [put, get], counts, "store")


class Pool:
    """The front's proxies to the store: POOL of them, each made when a call takes it and
    finds none, dropped after any failure."""

    def __init__(self, port):
        self.port = port
        self.free = queue.Queue()
        for _ in range(POOL):
            self.free.put(None)
        self.failed = 0

    def call(self, method, *args):
        try:
            p = self.free.get(timeout=5)
        except queue.Empty:
            raise xmlrpc.client.Fault(1, "no store proxy within 5 s")
        try:
            if p is None:
                p = proxy(self.port, STORE_TIMEOUT)
            return getattr(p, method)(*args)
        except Exception as e:  # noqa: BLE001 - any failure of the store is the client's error
            self.failed += 1
            log(f"store call failed: {e!r:.200}")
            p = None
            raise xmlrpc.client.Fault(2, f"store: {e!r:.100}")
        finally:
            self.free.put(p)


def front(_name):
    """Helper process `xmlrpc-front`: forwards each call to the store."""
    counts = {"put": 0, "get": 0}
    pool = Pool(ports("xmlrpc-chain")[1])

    def put(key, val):
        counts["put"] += 1
        return pool.call("put", key, val)

    def get(key):
        counts["get"] += 1
        return pool.call("get", key)

    serve(ports("xmlrpc-chain")[0], [put, get], counts, "front")


class Client:
    def __init__(self, name):
        self.name = name
        self.proxy = None
        self.errors = 0

    def step(self, i):
        key = f"c{self.name}-{i % 30}"
        v = value(self.name, i)
        try:
            if self.proxy is None:
                self.proxy = proxy(ports("xmlrpc-chain")[0], CLIENT_TIMEOUT)
            want = f"{len(v)} {digest(v)}"
            got = self.proxy.put(key, xmlrpc.client.Binary(v))
            if got != want:
                raise ValueError(f"put {key} step {i}: {got!r:.60}, wanted {want!r}")
            back = self.proxy.get(key)
            if not isinstance(back, xmlrpc.client.Binary):
                raise ValueError(f"get {key} step {i}: {type(back).__name__}, wanted base64")
            back = back.data
            if len(back) != len(v) or digest(back) != digest(v):
                raise ValueError(f"get {key} step {i}: {len(back)} bytes (SHA-1 {digest(back)}), "
                                 f"wanted {len(v)} ({digest(v)})")
            return True
        except (OSError, ValueError, EOFError, http.client.HTTPException, xmlrpc.client.Error,
                xml.parsers.expat.ExpatError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            self.proxy = None
            return False


def workload(name, n, pause):
    c = Client(name)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    return ok, c.errors


def client(name):
    """Helper process `xmlrpc-client --name N`: REQUESTS2 steps through the front, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"xmlrpc-chain client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("xmlrpc-chain")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        s = d.start("store", [PY, LAUNCHER, "xmlrpc-store"], env=env)
        wait_port(sport, s, timeout=20)
        fr = d.start("front", [PY, LAUNCHER, "xmlrpc-front"], env=env)
        wait_port(fport, fr, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "xmlrpc-client", "--name", "2"], env=env)
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"xmlrpc-chain: {ok}/{n} steps ok, {errors} failed")
