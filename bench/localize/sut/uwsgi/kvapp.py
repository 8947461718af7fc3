"""The application of the fault suite's uwsgi-tornado (bench/localize/sut/uwsgi_tornado.py): a
WSGI application run by uWSGI's Python 3 plugin (Debian's Python, the standard library
only) in each preforked worker.

It speaks the API of `sut/kv_http.py`: `PUT /item/K` stores the body in the Tornado store
(`PUT /kv/K` on $KV_STORE_PORT, which answers the value's digest: one that does not match
is a failure), `GET /item/K` reads it back (`GET /kv/K`) and answers its length and
digest. Each worker keeps one keep-alive connection to the store (`http.client`, 1 s
timeout), made after the fork the first time it is needed and made again after any
failure; a failed store call becomes a 502. Each worker says at its exit how many requests
it served and how many failed.
"""

import atexit
import hashlib
import http.client
import json
import os
import re
import sys

PORT = int(os.environ["KV_STORE_PORT"])
PATH = re.compile(r"^/item/(\d{1,9})$")


def digest(v):
    return hashlib.sha1(v).hexdigest()[:16]


class StoreClient:
    """One worker's keep-alive connection to the store."""

    def __init__(self):
        self.conn = None
        self.served = self.failed = 0

    def call(self, method, k, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1.0)
        try:
            self.conn.request(method, f"/kv/{k}", body=body)
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        if r.status != 200:
            raise ValueError(f"store answered {r.status} for {method} {k}")
        return data

    def put(self, k, v):
        got = self.call("PUT", k, v).decode(errors="replace").strip()
        if got != digest(v):
            raise ValueError(f"store answered digest {got[:20]!r} for {digest(v)}")

    def get(self, k):
        return self.call("GET", k)


STORE = StoreClient()


def bye():
    if STORE.served or STORE.failed:
        print(f"systems: uwsgi worker {os.getpid()}: {STORE.served} requests ok, {STORE.failed} failed",
              file=sys.stderr, flush=True)


atexit.register(bye)


def reply(start, status, obj):
    body = json.dumps(obj).encode()
    start(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start):
    m = PATH.match(environ.get("PATH_INFO", ""))
    if not m:
        return reply(start, "404 Not Found", {"error": "no such path"})
    k = int(m.group(1))
    try:
        if environ["REQUEST_METHOD"] == "PUT":
            n = int(environ.get("CONTENT_LENGTH") or 0)
            v = environ["wsgi.input"].read(n)
            if len(v) != n:
                raise ValueError(f"body of {len(v)} bytes, {n} announced")
            STORE.put(k, v)
            out = {"item": k, "stored": len(v)}
        else:
            v = STORE.get(k)
            out = {"item": k, "len": len(v), "digest": digest(v)}
    except (OSError, http.client.HTTPException, ValueError) as e:
        STORE.failed += 1
        print(f"systems: uwsgi worker {os.getpid()}: item {k}: {e!r}", file=sys.stderr, flush=True)
        return reply(start, "502 Bad Gateway", {"error": str(e)})
    STORE.served += 1
    return reply(start, "200 OK", out)
