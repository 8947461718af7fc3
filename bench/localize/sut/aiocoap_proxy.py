"""aiocoap-proxy: a CoAP key-value store on `aiocoap` (PyPI `aiocoap` 0.4: CoAP over UDP on
asyncio, confirmable messages with retransmission, block-wise transfer) behind aiocoap's
own reverse proxy (`python3 -m aiocoap.cli.proxy`, unmodified), and two aiocoap clients.

Ports: proxy = p[0], store = p[1] (UDP). The store (helper `coap-store`) serves
`/kv/KEY`: a PUT stores the payload and answers 2.04 Changed with its length and the first
16 hex digits of its SHA-1, a GET answers 2.05 Content with the value (4.04 when it has
none); values over 1 KB travel block-wise (Block1 for a PUT, Block2 for a GET), reassembled
by aiocoap on both ends. The proxy is aiocoap's CLI (`--reverse --unconditional`): every
request it receives on p[0] is sent again from its own client context to the store, and
the answer relayed back. Client 1 (the launcher) goes through the proxy, client 2 (helper
`coap-client --name 2`) straight to the store; each takes steps of its own, a step a PUT
of a value made for that step (a quarter of them 2.5 to 5.5 KB, block-wise; the others
200 to 900 bytes) and a GET of the same key, checking the PUT's answer and the value read
back (length and SHA-1). Every request is bounded to 3 s (`asyncio.wait_for` over
aiocoap's own retransmission); after a failure the client logs it, shuts its context down,
makes a new one (a new UDP socket) and goes on. The store says at the end (on SIGTERM) how
many PUTs and GETs it answered.
"""

import asyncio
import hashlib
import os
import signal
import sys
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_readers, wait_udp

REQUESTS2 = 60
REQUEST_TIMEOUT_S = 3.0


def value(name, i):
    """The value client `name` writes at step i."""
    size = 2500 + (i * 101) % 3000 if i % 4 == 3 else 200 + (i * 37) % 700
    head = f"client {name} step {i}:".encode()
    return (head + bytes(range(97, 123)) * (size // 26 + 1))[:size]


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def answer(state, request):
    """The store's answer to one (assembled) request on `/kv/KEY`: a PUT stores, a GET
    reads; `state` holds the data and the counts."""
    import aiocoap

    key = "/".join(request.opt.uri_path)
    if request.code == aiocoap.PUT:
        state["data"][key] = request.payload
        state["put"] += 1
        payload = f"{len(request.payload)} {digest(request.payload)}".encode()
        return aiocoap.Message(code=aiocoap.CHANGED, payload=payload)
    if request.code == aiocoap.GET:
        state["get"] += 1
        if key not in state["data"]:
            return aiocoap.Message(code=aiocoap.NOT_FOUND)
        return aiocoap.Message(code=aiocoap.CONTENT, payload=state["data"][key])
    return aiocoap.Message(code=aiocoap.METHOD_NOT_ALLOWED)


def store(_name):
    """Helper process `coap-store`: the key-value resource tree on aiocoap."""
    import aiocoap
    import aiocoap.resource as resource

    state = {"data": {}, "put": 0, "get": 0}

    class Kv(resource.Resource, resource.PathCapable):
        async def render(self, request):
            return answer(state, request)

    def bye(*_):
        log(f"coap store: {state['put']} PUTs and {state['get']} GETs answered (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    async def main():
        signal.signal(signal.SIGTERM, bye)
        site = resource.Site()
        site.add_resource(["kv"], Kv())
        await aiocoap.Context.create_server_context(site, bind=("127.0.0.1", ports("aiocoap-proxy")[1]))
        await asyncio.get_running_loop().create_future()

    asyncio.run(main())


class CoapClient:
    """An aiocoap client context, made again after a failed request."""

    def __init__(self, name, port):
        self.name = name
        self.base = f"coap://127.0.0.1:{port}/kv"
        self.ctx = None
        self.errors = 0

    async def request(self, code, key, payload=b""):
        import aiocoap

        if self.ctx is None:
            self.ctx = await aiocoap.Context.create_client_context()
        msg = aiocoap.Message(code=code, uri=f"{self.base}/{key}", payload=payload)
        return await asyncio.wait_for(self.ctx.request(msg).response, REQUEST_TIMEOUT_S)

    async def step(self, i):
        import aiocoap

        key = f"c{self.name}-{i % 40}"
        v = value(self.name, i)
        try:
            r = await self.request(aiocoap.PUT, key, v)
            want = f"{len(v)} {digest(v)}".encode()
            if r.code != aiocoap.CHANGED or r.payload != want:
                raise ValueError(f"PUT {key} step {i}: {r.code} {r.payload[:60]!r}, wanted {want!r}")
            r = await self.request(aiocoap.GET, key)
            if r.code != aiocoap.CONTENT or len(r.payload) != len(v) or digest(r.payload) != digest(v):
                raise ValueError(f"GET {key} step {i}: {r.code}, {len(r.payload)} bytes "
                                 f"(SHA-1 {digest(r.payload)}), wanted {len(v)} ({digest(v)})")
            return True
        except (OSError, ValueError, asyncio.TimeoutError, aiocoap.error.Error) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            await self.drop()
            return False

    async def drop(self):
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            try:
                await asyncio.wait_for(ctx.shutdown(), 2)
            except Exception as e:  # noqa: BLE001 - a context that fails to shut down is left
                log(f"client context shutdown: {e!r:.100}")


def workload(name, port, n, pause):
    async def main():
        c = CoapClient(name, port)
        ok = 0
        for i in steps(n):
            ok += await c.step(i)
            await asyncio.sleep(pause)
        await c.drop()
        return ok, c.errors

    return asyncio.run(main())


def client(name):
    """Helper process `coap-client --name N`: REQUESTS2 steps straight to the store, every 80 ms."""
    ok, errors = workload(name, ports("aiocoap-proxy")[1], REQUESTS2, 0.08)
    log(f"aiocoap-proxy client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    pport, sport = ports("aiocoap-proxy")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        s = d.start("store", [PY, LAUNCHER, "coap-store"], env=env)
        wait_udp(sport, s, timeout=20)
        p = d.start("proxy", [PY, "-m", "aiocoap.cli.proxy", "--reverse", "--bind", f"127.0.0.1:{pport}",
                              "--unconditional", f"127.0.0.1:{sport}"], env=env)
        wait_udp(pport, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "coap-client", "--name", "2"], env=env)
        ok, errors = workload("1", pport, n, 0.01)
        wait_readers([helper], seconds=25)
        log(f"aiocoap-proxy: {ok}/{n} steps ok, {errors} failed")
