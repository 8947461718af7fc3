"""gevent-chain: a WSGI front service that calls a key-value backend service over a pool of
keep-alive connections speaking a small binary protocol, both on gevent (PyPI `gevent`:
greenlets on libev, the standard library's sockets monkey-patched), and two Python clients
on `http.client`.

Ports: front = p[0], backend = p[1]. The backend is a `gevent.server.StreamServer` (a
greenlet per connection) keeping a dict: each request is a frame `op (1 byte: P or G) · key
length (2 bytes) · value length (4 bytes) · key · value`, each answer `status (1 byte: 0 ok,
1 no such key, 2 bad request) · length (4 bytes) · value` (for a PUT the value is the stored
length in ASCII). The front is a `gevent.pywsgi.WSGIServer` (a greenlet per connection,
HTTP/1.1 keep-alive) with the API of `sut/kv_http.py` (`PUT /item/K`, `GET /item/K`): it
forwards each request to the backend over a pooled socket (the standard `socket` module,
monkey-patched by `gevent.monkey.patch_all()`; 1 s timeout; a connection that failed is
closed, a good one goes back to the pool, at most 4) and answers JSON with the stored
length, or the value's length and SHA-1 digest; a backend failure (an exception, a status
other than ok, an answer that does not parse) becomes a 502. Each client (the launcher and
the helper `gevent-client --name 2`) puts then reads back N keys of its own on one
keep-alive connection (2 s timeout), checks the answers, counts failures, connects again
and goes on. Each service says at the end (SIGTERM) how many requests it served and how
many failed.
"""

import hashlib
import json
import struct

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

HEAD = struct.Struct("!cHI")  # op, key length, value length
ANSWER = struct.Struct("!BI")  # status, length
OK, MISSING, BAD = 0, 1, 2
POOL_MAX = 4
BACKEND_TIMEOUT_S = 1.0
REQUESTS = 120


def _exact(sock, n):
    """n bytes from sock, or ConnectionError at the end of the stream. Each receive waits
    for the socket to be readable first (gevent's `wait_read`, within the socket's timeout),
    so that a receive finds data: gevent's own `recv` tries the call first and waits after
    an EAGAIN."""
    from gevent.socket import wait_read

    chunks = []
    while n:
        wait_read(sock.fileno(), timeout=sock.gettimeout())
        data = sock.recv(min(n, 65536))
        if not data:
            raise ConnectionError("end of stream")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


class Store:
    """The backend's data: one dict (greenlets of one thread: no lock needed)."""

    def __init__(self):
        self.data = {}
        self.served = 0
        self.failed = 0

    def apply(self, op, key, value):
        """(status, answer) for one request."""
        if op == b"P":
            self.data[key] = value
            return OK, str(len(value)).encode()
        if op == b"G":
            v = self.data.get(key)
            return (MISSING, b"") if v is None else (OK, v)
        return BAD, b"unknown op"

    def handle(self, sock, address):
        """One connection of the front's pool: frames until the front closes it."""
        from gevent.socket import wait_read

        try:
            while True:
                wait_read(sock.fileno())
                head = sock.recv(HEAD.size)
                if not head:
                    return
                if len(head) < HEAD.size:
                    head += _exact(sock, HEAD.size - len(head))
                op, klen, vlen = HEAD.unpack(head)
                key = _exact(sock, klen).decode()
                value = _exact(sock, vlen)
                status, answer = self.apply(op, key, value)
                if status == OK:
                    self.served += 1
                else:
                    self.failed += 1
                sock.sendall(ANSWER.pack(status, len(answer)) + answer)
        except (OSError, ConnectionError, UnicodeDecodeError, struct.error) as e:
            self.failed += 1
            log(f"backend: connection from {address[1]} failed: {e!r}")
        finally:
            sock.close()


class Pool:
    """The front's keep-alive connections to the backend."""

    def __init__(self, port):
        import gevent.queue

        self.port = port
        self.idle = gevent.queue.LifoQueue()

    def _get(self):
        import socket

        try:
            return self.idle.get_nowait()
        except Exception:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=BACKEND_TIMEOUT_S)
            s.settimeout(BACKEND_TIMEOUT_S)
            return s

    def call(self, op, key, value=b""):
        """One request to the backend on a pooled connection: (status, answer)."""
        s = self._get()
        try:
            k = key.encode()
            s.sendall(HEAD.pack(op, len(k), len(value)) + k + value)
            status, n = ANSWER.unpack(_exact(s, ANSWER.size))
            if n > 1 << 20:
                raise ValueError(f"answer of {n} bytes")
            answer = _exact(s, n)
        except BaseException:
            s.close()
            raise
        if self.idle.qsize() < POOL_MAX:
            self.idle.put(s)
        else:
            s.close()
        return status, answer


class Front:
    """The WSGI application of the front service."""

    def __init__(self, pool):
        self.pool = pool
        self.served = 0
        self.failed = 0

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD")
        if not path.startswith("/item/") or method not in ("PUT", "GET"):
            return self.reply(start_response, "404 Not Found", {"error": "no such path"})
        k = path[len("/item/"):]
        try:
            if method == "PUT":
                n = int(environ.get("CONTENT_LENGTH") or 0)
                body = environ["wsgi.input"].read(n)
                status, answer = self.pool.call(b"P", k, body)
                if status != OK:
                    raise ValueError(f"backend status {status}")
                out = {"item": int(k), "stored": int(answer)}
            else:
                status, answer = self.pool.call(b"G", k)
                if status != OK:
                    raise ValueError(f"backend status {status}")
                out = {"item": int(k), "len": len(answer), "digest": hashlib.sha1(answer).hexdigest()[:16]}
        except Exception as e:
            self.failed += 1
            log(f"front: item {k}: backend failed: {e!r}")
            return self.reply(start_response, "502 Bad Gateway", {"error": repr(e)})
        self.served += 1
        return self.reply(start_response, "200 OK", out)

    @staticmethod
    def reply(start_response, status, obj):
        body = json.dumps(obj).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def service(name):
    """Helper process `gevent-service --name front|back`."""
    from gevent import monkey

    monkey.patch_all()
    import signal

    import gevent
    from gevent.pywsgi import WSGIServer
    from gevent.server import StreamServer

    front, back = ports("gevent-chain")[:2]
    if name == "back":
        what = Store()
        server = StreamServer(("127.0.0.1", back), what.handle)
    else:
        what = Front(Pool(back))
        server = WSGIServer(("127.0.0.1", front), what, log=None)
    gevent.signal_handler(signal.SIGTERM, server.stop, 1)
    server.serve_forever()
    log(f"gevent {name}: {what.served} requests ok, {what.failed} failed (told to stop)")


def client(name):
    """Helper process `gevent-client --name N`."""
    ok, errors = workload(ports("gevent-chain")[0], name, REQUESTS, 0.02)
    log(f"gevent client {name}: {ok}/{REQUESTS} steps ok, {errors} failed")


def run(tmp, n):
    front, back = ports("gevent-chain")[:2]
    with Daemons(tmp) as d:
        p = d.start("back", [PY, LAUNCHER, "gevent-service", "--name", "back"])
        wait_port(back, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "gevent-service", "--name", "front"])
        wait_port(front, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "gevent-client", "--name", "2"])
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"gevent-chain: {ok}/{n} steps ok, {errors} failed")
