"""quart-hypercorn: a Quart key-value front (PyPI `quart`, the ASGI sibling of Flask) served
by Hypercorn (PyPI `hypercorn`: its asyncio worker, h11 for HTTP/1.1) that keeps its data
in an asyncio store service, and two Python HTTP clients (`http.client`). CPython asyncio
throughout the chain (one event loop a process).

Ports: front = p[0], store = p[1]. The store (helper `quart-store`: `asyncio.start_server`)
reads requests framed as a 4-byte big-endian length and a JSON body (`{"op": "put"|"get",
"k": K, "v": V}`) and answers the same way (`{"k": K, "stored": LEN}` or `{"k": K, "v":
V|null}`). The front (helper `quart-front`) serves the API of `sut/kv_http.py` (`PUT
/item/K`, `GET /item/K`); each call takes a store connection from a pool (asyncio streams,
1 s timeout; a connection that failed is closed, a good one goes back), and a store failure
(an exception, a timeout, an answer for another key) becomes a 502. Each client (the
launcher, and the helper `quart-client --name 2`) puts then reads back keys of its own on
one keep-alive connection (2 s timeout), checks the answers, counts failures, connects
again and goes on. The front and the store say at the end (on SIGTERM) how many requests
they served and how many failed.
"""

import asyncio
import hashlib
import json
import os
import signal
import struct
import sys

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60
STORE_TIMEOUT_S = 1.0


async def read_frame(reader):
    """One length-prefixed JSON frame; EOFError at a clean end of stream."""
    head = await reader.readexactly(4)
    (n,) = struct.unpack(">I", head)
    if n > 1 << 20:
        raise ValueError(f"frame of {n} bytes")
    return json.loads(await reader.readexactly(n))


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


class Store:
    """The store's data and its request handler."""

    def __init__(self):
        self.data = {}
        self.served = self.failed = 0

    def handle(self, req):
        k = str(req["k"])
        if req["op"] == "put":
            v = str(req["v"])
            self.data[k] = v
            self.served += 1
            return {"k": k, "stored": len(v)}
        if req["op"] == "get":
            self.served += 1
            return {"k": k, "v": self.data.get(k)}
        raise ValueError(f"unknown op {req['op']!r:.40}")

    async def connection(self, reader, writer):
        try:
            while True:
                try:
                    req = await read_frame(reader)
                except asyncio.IncompleteReadError:
                    break
                writer.write(frame(self.handle(req)))
                await writer.drain()
        except Exception as e:  # a garbled frame, a reset: this connection ends
            self.failed += 1
            log(f"quart store: connection dropped: {e!r:.120}")
        finally:
            writer.close()


def store(_name):
    """Helper process `quart-store`."""
    s = Store()

    def bye(*_):
        log(f"quart store: {s.served} calls ok, {s.failed} connections failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    async def main():
        signal.signal(signal.SIGTERM, bye)
        server = await asyncio.start_server(s.connection, "127.0.0.1", ports("quart-hypercorn")[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class StorePool:
    """Store connections (asyncio streams), one taken per call, made again after a failure."""

    def __init__(self, port):
        self.port = port
        self.free = []

    async def call(self, req):
        if self.free:
            reader, writer = self.free.pop()
        else:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port),
                                                    STORE_TIMEOUT_S)
        try:
            writer.write(frame(req))
            await writer.drain()
            out = await asyncio.wait_for(read_frame(reader), STORE_TIMEOUT_S)
            if out.get("k") != str(req["k"]):
                raise ValueError(f"answer for key {out.get('k')!r:.20}, not {req['k']}")
        except BaseException:
            writer.close()
            raise
        self.free.append((reader, writer))
        return out


def make_app(pool, counts):
    from quart import Quart, request

    app = Quart("quart-front")

    @app.route("/item/<k>", methods=["GET", "PUT"])
    async def item(k):
        try:
            n = int(k)
        except ValueError:
            return {"error": "no such item"}, 404
        try:
            if request.method == "PUT":
                v = (await request.get_data()).decode()
                out = await pool.call({"op": "put", "k": k, "v": v})
                if out.get("stored") != len(v):
                    raise ValueError(f"stored {out.get('stored')} bytes of {len(v)}")
                body = {"item": n, "stored": len(v)}
            else:
                out = await pool.call({"op": "get", "k": k})
                v = out.get("v")
                if v is None:
                    raise KeyError(k)
                body = {"item": n, "len": len(v), "digest": hashlib.sha1(v.encode()).hexdigest()[:16]}
        except Exception as e:
            counts["failed"] += 1
            log(f"quart front: item {k}: store failed: {e!r:.120}")
            return {"error": repr(e)[:200]}, 502
        counts["served"] += 1
        return body

    return app


def front(_name):
    """Helper process `quart-front`: Hypercorn's asyncio worker serving the Quart app."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    fport, sport = ports("quart-hypercorn")[:2]
    counts = {"served": 0, "failed": 0}
    app = make_app(StorePool(sport), counts)
    config = Config()
    config.bind = [f"127.0.0.1:{fport}"]
    config.keep_alive_timeout = 10
    config.accesslog = None

    def bye(*_):
        log(f"quart front: {counts['served']} requests ok, {counts['failed']} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    async def main():
        signal.signal(signal.SIGTERM, bye)
        await serve(app, config, shutdown_trigger=asyncio.Event().wait)

    asyncio.run(main())


def client(name):
    """Helper process `quart-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("quart-hypercorn")[0], name, REQUESTS2, 0.06)
    log(f"quart client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("quart-hypercorn")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "quart-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "quart-front"], env=env)
        wait_port(fport, p, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "quart-client", "--name", "2"])
        ok, errors = workload(fport, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"quart-hypercorn: {ok}/{n} steps ok, {errors} failed")
