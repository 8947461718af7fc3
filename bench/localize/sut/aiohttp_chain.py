"""aiohttp-chain: an aiohttp front service that calls an aiohttp backend service for every
request, and an asyncio client with four concurrent workers (CPython, asyncio).

Ports: front = p[0], backend = p[1]. `GET /item/K` on the front fetches `/data/K` from the
backend (a pooled keep-alive session, 1 s timeout) and answers JSON; a backend failure
becomes a 502. The client sends N requests (2 s timeout each), checks status and body,
counts failures and goes on; its session reconnects by itself.
"""

import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, wait_port


def service(name):
    """Helper process `aiohttp-service --name front|back`."""
    import asyncio

    from aiohttp import ClientError, ClientSession, ClientTimeout, web

    front, back = ports("aiohttp-chain")[:2]

    async def data(request):
        k = int(request.match_info["k"])
        await asyncio.sleep(0.001)
        return web.json_response({"k": k, "value": "d" * (k % 50)})

    async def item(request):
        k = request.match_info["k"]
        s = request.app["session"]
        try:
            async with s.get(f"http://127.0.0.1:{back}/data/{k}") as r:
                if r.status != 200:
                    raise web.HTTPBadGateway(text=f"backend said {r.status}")
                body = await r.json()
        except (ClientError, asyncio.TimeoutError, ValueError) as e:
            raise web.HTTPBadGateway(text=f"backend failed: {e!r}")
        return web.json_response({"item": k, "len": len(body["value"])})

    async def session(app):
        app["session"] = ClientSession(timeout=ClientTimeout(total=1.0))
        yield
        await app["session"].close()

    app = web.Application()
    if name == "back":
        app.router.add_get("/data/{k}", data)
        port = back
    else:
        app.router.add_get("/item/{k}", item)
        app.cleanup_ctx.append(session)
        port = front
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, handle_signals=True)


async def _client(n, port):
    import asyncio

    from aiohttp import ClientError, ClientSession, ClientTimeout

    ok = errors = 0
    todo = list(range(n))
    end = time.monotonic() + WORKLOAD_S

    async def worker(s):
        nonlocal ok, errors
        while todo and time.monotonic() < end:
            k = todo.pop(0)
            try:
                async with s.get(f"http://127.0.0.1:{port}/item/{k}") as r:
                    body = await r.json() if r.status == 200 else None
                if body is None or body.get("len") != k % 50:
                    raise ValueError(f"item {k}: status {r.status}")
                ok += 1
            except (ClientError, asyncio.TimeoutError, ValueError) as e:
                errors += 1
                log(f"request failed: {e!r}")

    async with ClientSession(timeout=ClientTimeout(total=2.0)) as s:
        await asyncio.gather(*(worker(s) for _ in range(4)))
    return ok, errors


def run(tmp, n):
    import asyncio

    front, back = ports("aiohttp-chain")[:2]
    with Daemons(tmp) as d:
        p = d.start("back", [PY, LAUNCHER, "aiohttp-service", "--name", "back"])
        wait_port(back, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "aiohttp-service", "--name", "front"])
        wait_port(front, p, timeout=20)
        time.sleep(0.2)
        ok, errors = asyncio.run(_client(n, front))
        log(f"aiohttp-chain: {ok}/{n} requests ok, {errors} failed")
