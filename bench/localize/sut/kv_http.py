"""What ruby-chain and perl-starman share: the key-value HTTP client in front of them.

Both services speak the same small API: `PUT /item/K` (the body is the value) answers 200
`{"item": K, "stored": LEN}`; `GET /item/K` answers 200 `{"item": K, "len": LEN, "digest":
D}` with D the first 16 hex digits of the value's SHA-1; any failure behind the service
becomes a 502 (or a 404 for an unknown path).
"""

import hashlib
import http.client
import json
import time

from .common import drop_http, steps

TIMEOUT_S = 2.0


def value(k):
    """The value a client stores under key k (its length varies with k)."""
    return f"v{k}:" + "x" * (k % 50)


def digest(v):
    return hashlib.sha1(v.encode()).hexdigest()[:16]


class KvClient:
    """One keep-alive HTTP connection (`http.client`, 2 s timeout) to a service; connects
    again after any failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    def _call(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        self.conn.request(method, path, body=body)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise ValueError(f"{method} {path}: status {r.status}")
        return json.loads(data)

    def put(self, k):
        v = value(k)
        body = self._call("PUT", f"/item/{k}", v.encode())
        if body.get("item") != k or body.get("stored") != len(v):
            raise ValueError(f"put {k}: wrong answer {body!r:.60}")

    def get(self, k):
        v = value(k)
        body = self._call("GET", f"/item/{k}")
        if body.get("item") != k or body.get("len") != len(v) or body.get("digest") != digest(v):
            raise ValueError(f"get {k}: wrong answer {body!r:.60}")

    def step(self, k):
        """Puts key k, then reads it back and checks its length and digest: True if both went
        right; a failure is logged and counted and the connection is made again."""
        try:
            self.put(k)
            self.get(k)
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return False


def workload(port, name, n, pause):
    """n steps (key 2·i + name: the two clients use keys of their own), `pause` seconds
    between steps; (steps that went right, failures)."""
    c = KvClient(port)
    ok = 0
    for i in steps(n):
        ok += c.step(2 * i + int(name))
        time.sleep(pause)
    return ok, c.errors
