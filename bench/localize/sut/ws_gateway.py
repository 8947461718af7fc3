"""ws-gateway: a WebSocket gateway in front of a WebSocket key-value store, with a writer and
a reader client — every process on PyPI's `websockets` (its asyncio implementation: CPython,
asyncio on epoll, RFC 6455 framing).

Ports: gateway = p[0], store = p[1]. The store (`ws-service --name store`) keeps a dict
and answers JSON requests `{"id", "op": "put"|"get", "k", "v"}` with `{"id", "ok", "v"}`.
The gateway (`ws-service --name gateway`) holds one WebSocket connection to the store
(made again 0.3 s after it is lost), forwards each client request on it, matched by a
request id of its own, with a 1 s timeout (a failure becomes `{"ok": false, "error"}`), and
after each stored `put` sends `{"event": "put", "k", "digest"}` to every connected client.
The writer (the launcher) puts then gets key K for each of N steps; the reader
(`ws-client --name reader`) gets, every 60 ms for 150 steps, the key of the last put event
it received (none before the first; it counts the events). Each client waits 2 s for a reply, connects again after a lost connection and
goes on; every process says at the end what it saw.
"""

import asyncio
import hashlib
import itertools
import json
import signal

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

REPLY_S = 2.0
STORE_S = 1.0
READS = 150


def digest(k, v):
    return hashlib.sha1(f"{k}={v}".encode()).hexdigest()[:16]


def _stopper():
    ev = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, ev.set)
    return ev


class Store:
    """The store's request handler."""

    def __init__(self):
        self.data = {}
        self.served = self.bad = 0

    def handle(self, text):
        req = json.loads(text)
        if req["op"] == "put":
            self.data[req["k"]] = req["v"]
            out = {"id": req["id"], "ok": True, "v": req["v"]}
        else:
            out = {"id": req["id"], "ok": req["k"] in self.data, "v": self.data.get(req["k"])}
        self.served += 1
        return json.dumps(out)


async def _store(port):
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    s = Store()

    async def conn(ws):
        try:
            async for text in ws:
                try:
                    reply = s.handle(text)
                except (ValueError, KeyError, TypeError) as e:
                    s.bad += 1
                    log(f"store: a request it cannot read: {e!r}")
                    continue
                await ws.send(reply)
        except ConnectionClosed as e:
            log(f"store: connection lost: {e!r}")

    stopping = _stopper()
    async with serve(conn, "127.0.0.1", port):
        await stopping.wait()
    log(f"ws store: {s.served} requests ok, {s.bad} failed, {len(s.data)} keys (told to stop)")


class Upstream:
    """The gateway's one connection to the store, with requests matched by id."""

    def __init__(self, port, stopping):
        self.port = port
        self.stopping = stopping
        self.ws = None
        self.ready = asyncio.Event()
        self.waiting = {}
        self.ids = itertools.count(1)
        self.lost = 0

    async def keep(self):
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        while not self.stopping.is_set():
            try:
                async with connect(f"ws://127.0.0.1:{self.port}", open_timeout=STORE_S) as ws:
                    self.ws = ws
                    self.ready.set()
                    async for text in ws:
                        self.answer(text)
            except (OSError, ConnectionClosed, asyncio.TimeoutError) as e:
                log(f"gateway: store connection lost: {e!r}")
            self.lost += 1
            self.ready.clear()
            self.ws = None
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("store connection lost"))
            self.waiting.clear()
            await asyncio.sleep(0.3)

    def answer(self, text):
        try:
            rep = json.loads(text)
            fut = self.waiting.pop(rep["id"], None)
        except (ValueError, KeyError, TypeError) as e:
            log(f"gateway: a store reply it cannot read: {e!r}")
            return
        if fut is not None and not fut.done():
            fut.set_result(rep)

    async def ask(self, req):
        await asyncio.wait_for(self.ready.wait(), STORE_S)
        rid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        try:
            await self.ws.send(json.dumps({**req, "id": rid}))
            return await asyncio.wait_for(fut, STORE_S)
        finally:
            self.waiting.pop(rid, None)


async def _gateway(port, store):
    from websockets.asyncio.server import broadcast, serve
    from websockets.exceptions import ConnectionClosed

    stopping = _stopper()
    up = Upstream(store, stopping)
    keeper = asyncio.create_task(up.keep())
    clients = set()
    seen = {"ok": 0, "failed": 0}

    async def request(ws, text):
        req = None
        try:
            req = json.loads(text)
            rep = await up.ask({"op": req["op"], "k": req["k"], "v": req.get("v")})
            ok = rep["ok"] or req["op"] == "get"
            out = {"id": req["id"], "ok": rep["ok"], "v": rep["v"]}
        except (ValueError, KeyError, TypeError, ConnectionError, asyncio.TimeoutError) as e:
            ok = False
            out = {"id": req.get("id") if isinstance(req, dict) else None, "ok": False, "error": repr(e)}
            log(f"gateway: request failed: {e!r}")
        seen["ok" if ok else "failed"] += 1
        await ws.send(json.dumps(out))
        if ok and req["op"] == "put":  # ok: req is a parsed request
            broadcast(clients, json.dumps({"event": "put", "k": req["k"], "digest": digest(req["k"], req["v"])}))

    async def conn(ws):
        clients.add(ws)
        tasks = set()
        try:
            async for text in ws:
                t = asyncio.create_task(request(ws, text))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        except ConnectionClosed as e:
            log(f"gateway: client connection lost: {e!r}")
        finally:
            clients.discard(ws)

    async with serve(conn, "127.0.0.1", port):
        await stopping.wait()
    keeper.cancel()
    log(f"ws gateway: {seen['ok']} requests ok, {seen['failed']} failed, store connection lost "
        f"{up.lost} times (told to stop)")


def service(name):
    """Helper process `ws-service --name gateway|store`."""
    gw, store = ports("ws-gateway")[:2]
    asyncio.run(_store(store) if name == "store" else _gateway(gw, store))


class Client:
    """A WebSocket client of the gateway: requests matched by id, events counted."""

    def __init__(self, port):
        self.port = port
        self.ws = None
        self.reader = None
        self.waiting = {}
        self.ids = itertools.count(1)
        self.events = self.errors = 0
        self.last_put = None  # the key of the last put event: one the store holds

    async def connect(self):
        from websockets.asyncio.client import connect

        self.ws = await connect(f"ws://127.0.0.1:{self.port}", open_timeout=REPLY_S)
        self.reader = asyncio.create_task(self.read(self.ws))

    async def read(self, ws):
        from websockets.exceptions import ConnectionClosed

        try:
            async for text in ws:
                msg = json.loads(text)
                if "event" in msg:
                    self.events += 1
                    self.last_put = msg["k"]
                    continue
                fut = self.waiting.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except (ConnectionClosed, ValueError) as e:
            log(f"client: connection lost: {e!r}")
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection lost"))

    async def close(self):
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def ask(self, op, k, v=None):
        """The reply to one request, or None after counting and logging the failure."""
        try:
            if self.ws is None or self.reader.done():
                await self.close()
                await self.connect()
            rid = next(self.ids)
            fut = asyncio.get_running_loop().create_future()
            self.waiting[rid] = fut
            await self.ws.send(json.dumps({"id": rid, "op": op, "k": k, "v": v}))
            rep = await asyncio.wait_for(fut, REPLY_S)
            if not rep.get("ok"):
                raise ValueError(f"{op} {k}: {rep.get('error', 'not ok')}")
            return rep
        except Exception as e:  # noqa: BLE001 — websockets' own errors too; a client goes on
            self.errors += 1
            log(f"request failed: {e!r}")
            try:
                await asyncio.wait_for(self.close(), 1.0)
            except Exception:  # noqa: BLE001
                self.ws = None
            return None


async def _writer(n, port):
    c = Client(port)
    ok = 0
    for i in steps(n):
        k, v = f"k{i}", "v" * (i % 40) + str(i)
        if await c.ask("put", k, v) is not None:
            rep = await c.ask("get", k)
            ok += rep is not None and rep.get("v") == v
        await asyncio.sleep(0.03)
    await c.close()
    return ok, c.errors


async def _reader(port):
    c = Client(port)
    ok = asked = 0
    await c.ask("get", "k0")  # connects (k0 may not be stored yet: not counted)
    c.errors = 0
    for _ in steps(READS):
        await asyncio.sleep(0.06)
        if c.last_put is None:  # no put event yet: no key known to be stored
            continue
        k = c.last_put
        asked += 1
        rep = await c.ask("get", k)
        ok += rep is not None and str(rep.get("v")).endswith(k[1:])
    await c.close()
    return ok, asked, c.errors, c.events


def client(name):
    """Helper process `ws-client --name reader`."""
    ok, asked, errors, events = asyncio.run(_reader(ports("ws-gateway")[0]))
    log(f"ws client {name}: {ok}/{asked} reads ok, {errors} failed, {events} put events")


def run(tmp, n):
    gw, store = ports("ws-gateway")[:2]
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "ws-service", "--name", "store"])
        wait_port(store, p, timeout=20)
        p = d.start("gateway", [PY, LAUNCHER, "ws-service", "--name", "gateway"])
        wait_port(gw, p, timeout=20)
        reader = d.start("reader", [PY, LAUNCHER, "ws-client", "--name", "reader"])
        ok, errors = asyncio.run(_writer(n, gw))
        wait_readers([reader], seconds=25)
        log(f"ws-gateway: {ok}/{n} put+get pairs ok, {errors} failed")
