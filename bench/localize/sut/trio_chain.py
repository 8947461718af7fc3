"""trio-chain: a front service and a store service on **trio** (PyPI `trio`: structured
concurrency on its own epoll loop, no asyncio anywhere), chained over TCP by
length-prefixed frames, and two trio clients.

Ports: front = p[0], store = p[1]. Every message, in both hops, is one frame: a 4-byte
big-endian length and that many bytes of JSON. The store (helper `trio-store`,
`trio.serve_tcp`, a task per connection) keeps a dict: `{"op": "put", "k": K, "v": V}`
answers `{"k": K, "stored": LEN}`, `{"op": "get", "k": K}` answers `{"k": K, "v": V}` (or
`{"k": K, "error": ...}`). The front (helper `trio-front`, a task per client connection)
serves the same frames to its clients and relays each request to the store over a pool of
POOL persistent connections (a free connection is taken from a trio memory channel; each
store call is bounded by `trio.move_on_after(1)`; a connection that failed is closed and
replaced by a new one on its next use); it answers `{"item": K, "stored": LEN}` to a put and
`{"item": K, "len": LEN, "digest": D}` (D: the first 16 hex digits of the value's SHA-1)
to a get, or `{"item": K, "error": ...}` when the store failed. Each client (the
launcher, and the helper `trio-client --name 2`) keeps one connection to the front, puts
then reads back keys of its own (every request bounded by `trio.move_on_after(2)`), checks
length and digest, and after a failure logs it, closes the connection, connects again and
goes on. Front and store say at the end (on SIGTERM) how many requests they served and
how many failed.
"""

import hashlib
import json
import os
import signal
import struct
import sys

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60
POOL = 2
STORE_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 2.0
MAX_FRAME = 1 << 20


def value(k):
    """The value a client stores under key k (its length varies with k)."""
    return f"v{k}:" + "t" * (k % 50)


def digest(v):
    return hashlib.sha1(v.encode()).hexdigest()[:16]


class FrameError(ValueError):
    pass


class Framed:
    """One trio stream carrying length-prefixed JSON frames (a receive buffer of its own)."""

    def __init__(self, stream):
        self.stream = stream
        self.buf = bytearray()

    async def _fill(self, n):
        import trio

        while len(self.buf) < n:
            # Waits until the socket is readable before receiving (trio's receive tries
            # the call first and waits on EAGAIN): one receive per arrival.
            try:
                await trio.lowlevel.wait_readable(self.stream.socket)
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                # trio wraps the socket's error (ECONNRESET, ...): made an OSError again.
                raise ConnectionError(f"receive: {e.__cause__ or e!r}") from None
            if not data:
                raise EOFError("end of stream")
            self.buf += data

    async def read(self):
        await self._fill(4)
        (n,) = struct.unpack(">I", self.buf[:4])
        if n > MAX_FRAME:
            raise FrameError(f"frame of {n} bytes")
        await self._fill(4 + n)
        body = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        try:
            return json.loads(body)
        except ValueError as e:
            raise FrameError(f"bad frame: {e}") from None

    async def write(self, obj):
        import trio

        body = json.dumps(obj).encode()
        try:
            await self.stream.send_all(struct.pack(">I", len(body)) + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise ConnectionError(f"send: {e.__cause__ or e!r}") from None

    async def aclose(self):
        import trio

        with trio.move_on_after(0.5):
            await self.stream.aclose()


def _on_sigterm(who, counts):
    def bye(*_):
        log(f"{who}: {counts['ok']} requests ok, {counts['failed']} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)


class Store:
    """The store's data and its request handler."""

    def __init__(self):
        self.data = {}
        self.counts = {"ok": 0, "failed": 0}

    def handle(self, req):
        k = req.get("k")
        if req.get("op") == "put" and isinstance(req.get("v"), str):
            self.data[k] = req["v"]
            return {"k": k, "stored": len(req["v"])}
        if req.get("op") == "get":
            if k not in self.data:
                raise KeyError(f"no such key {k}")
            return {"k": k, "v": self.data[k]}
        raise ValueError(f"bad request {req!r:.60}")

    async def serve(self, stream):
        conn = Framed(stream)
        while True:
            try:
                req = await conn.read()
            except (EOFError, OSError, FrameError) as e:
                if not isinstance(e, EOFError):
                    log(f"store: connection failed: {e!r:.120}")
                    self.counts["failed"] += 1
                break
            try:
                out = self.handle(req)
                self.counts["ok"] += 1
            except Exception as e:
                self.counts["failed"] += 1
                log(f"store: request failed: {e!r:.120}")
                out = {"k": req.get("k") if isinstance(req, dict) else None, "error": repr(e)[:200]}
            try:
                await conn.write(out)
            except OSError as e:
                log(f"store: answer failed: {e!r:.120}")
                break
        await conn.aclose()


def store(_name):
    """Helper process `trio-store`."""
    import trio

    st = Store()
    _on_sigterm("store", st.counts)
    trio.run(lambda: trio.serve_tcp(st.serve, ports("trio-chain")[1], host="127.0.0.1"))


class Pool:
    """The front's POOL persistent connections to the store: a slot is a Framed or None
    (to be connected on its next use); a failed connection is closed and its slot emptied."""

    def __init__(self, port, size):
        import trio

        self.port = port
        self.send, self.recv = trio.open_memory_channel(size)
        for _ in range(size):
            self.send.send_nowait(None)

    async def call(self, req):
        import trio

        slot = await self.recv.receive()
        try:
            with trio.move_on_after(STORE_TIMEOUT_S) as scope:
                if slot is None:
                    slot = Framed(await trio.open_tcp_stream("127.0.0.1", self.port))
                await slot.write(req)
                out = await slot.read()
            if scope.cancelled_caught:
                raise TimeoutError(f"store: no answer in {STORE_TIMEOUT_S} s")
            if not isinstance(out, dict) or out.get("k") != req["k"]:
                raise FrameError(f"store: answer for another key: {out!r:.60}")
            return out
        except BaseException:
            if slot is not None:
                await slot.aclose()
            slot = None
            raise
        finally:
            self.send.send_nowait(slot)


class Front:
    def __init__(self, pool):
        self.pool = pool
        self.counts = {"ok": 0, "failed": 0}

    async def relay(self, req):
        k = req.get("k")
        if req.get("op") == "put":
            out = await self.pool.call({"op": "put", "k": k, "v": req.get("v")})
            if "error" in out or out.get("stored") != len(req.get("v") or ""):
                raise FrameError(f"store kept {out!r:.60}")
            return {"item": k, "stored": out["stored"]}
        out = await self.pool.call({"op": "get", "k": k})
        if not isinstance(out.get("v"), str):
            raise FrameError(f"store has no value: {out!r:.60}")
        return {"item": k, "len": len(out["v"]), "digest": digest(out["v"])}

    async def serve(self, stream):
        conn = Framed(stream)
        while True:
            try:
                req = await conn.read()
            except (EOFError, OSError, FrameError) as e:
                if not isinstance(e, EOFError):
                    log(f"front: client connection failed: {e!r:.120}")
                    self.counts["failed"] += 1
                break
            try:
                out = await self.relay(req)
                self.counts["ok"] += 1
            except Exception as e:
                self.counts["failed"] += 1
                log(f"front: item {req.get('k') if isinstance(req, dict) else '?'}: store failed: {e!r:.120}")
                out = {"item": req.get("k") if isinstance(req, dict) else None, "error": repr(e)[:200]}
            try:
                await conn.write(out)
            except OSError as e:
                log(f"front: answer failed: {e!r:.120}")
                break
        await conn.aclose()


def front(_name):
    """Helper process `trio-front`."""
    import trio

    fport, sport = ports("trio-chain")[:2]
    fr = Front(None)
    _on_sigterm("front", fr.counts)

    async def main():
        fr.pool = Pool(sport, POOL)
        await trio.serve_tcp(fr.serve, fport, host="127.0.0.1")

    trio.run(main)


class Client:
    """One connection to the front (2 s a request), made again after any failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    async def _call(self, req):
        import trio

        with trio.move_on_after(CLIENT_TIMEOUT_S) as scope:
            if self.conn is None:
                self.conn = Framed(await trio.open_tcp_stream("127.0.0.1", self.port))
            await self.conn.write(req)
            out = await self.conn.read()
        if scope.cancelled_caught:
            raise TimeoutError(f"no answer in {CLIENT_TIMEOUT_S} s")
        return out

    async def put(self, k):
        v = value(k)
        out = await self._call({"op": "put", "k": k, "v": v})
        if out.get("item") != k or out.get("stored") != len(v):
            raise FrameError(f"put {k}: wrong answer {out!r:.80}")

    async def get(self, k):
        v = value(k)
        out = await self._call({"op": "get", "k": k})
        if out.get("item") != k or out.get("len") != len(v) or out.get("digest") != digest(v):
            raise FrameError(f"get {k}: wrong answer {out!r:.80}")

    async def step(self, k):
        """Puts key k and reads it back: True if both went right; a failure is logged and
        counted and the connection is made again on the next request."""
        try:
            await self.put(k)
            await self.get(k)
            return True
        except (OSError, EOFError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.160}")
            if self.conn is not None:
                await self.conn.aclose()
            self.conn = None
            return False


def workload(name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart; (steps ok, failures)."""
    import trio

    async def main():
        c = Client(ports("trio-chain")[0])
        ok = 0
        for i in steps(n):
            ok += await c.step(2 * i + int(name))
            await trio.sleep(pause)
        if c.conn is not None:
            await c.conn.aclose()
        return ok, c.errors

    return trio.run(main)


def client(name):
    """Helper process `trio-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"trio-chain client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("trio-chain")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "trio-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "trio-front"], env=env)
        wait_port(fport, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "trio-client", "--name", "2"])
        ok, errors = workload("1", n, 0.04)
        wait_readers([helper], seconds=25)
        log(f"trio-chain: {ok}/{n} steps ok, {errors} failed")
