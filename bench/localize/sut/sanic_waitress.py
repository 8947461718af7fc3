"""sanic-waitress: a Sanic key-value front (PyPI `sanic`: a manager process that spawns one
worker process running Sanic's own HTTP/1.1 server on asyncio) that keeps its data in a
Bottle store served by waitress (PyPI `bottle`, `waitress`: one I/O thread multiplexing the
connections and a pool of 4 worker threads running the WSGI app), reached through an httpx
keep-alive pool, and two Python HTTP clients (`http.client`).

Ports: front = p[0], store = p[1]. The store (helper `sw-store`) offers `PUT /kv/K` (the
body is the value; answers `{"key": K, "stored": LEN}`) and `GET /kv/K` (answers the value
itself, 404 when there is none). The front (`sanic sut.sanic_waitress:make_front --factory
--workers 1`; the launcher waits until the worker answers `GET /ready`) serves the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`): each
request becomes one store request on the worker's pooled `httpx.AsyncClient` (1 s timeout);
a store failure (an exception, a timeout, a wrong key or length) becomes a 502. Each client
(the launcher, and the helper `sw-client --name 2`) puts then reads back keys of its own
on a keep-alive connection (2 s timeout), checks the answers (key, length, SHA-1 digest),
counts failures, connects again after one and goes on. The front's worker and the store
say at the end how many requests they served and how many failed.
"""

import hashlib
import os
import signal
import sys
import time

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload
from .h2o_proxy import _children
from .nghttpx_proxy import kill_leftovers

REQUESTS2 = 60
STORE_TIMEOUT_S = 1.0
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Store:
    """The store's data and its two WSGI routes."""

    def __init__(self):
        self.data = {}
        self.served = 0

    def put(self, k, body):
        self.data[k] = body
        self.served += 1
        return {"key": k, "stored": len(body)}

    def get(self, k):
        self.served += 1
        return self.data.get(k)


def make_store_app(s):
    import bottle

    app = bottle.Bottle()

    @app.put("/kv/<k:int>")
    def put(k):
        return s.put(k, bottle.request.body.read())

    @app.get("/kv/<k:int>")
    def get(k):
        v = s.get(k)
        if v is None:
            bottle.abort(404, f"no key {k}")
        bottle.response.content_type = "application/octet-stream"
        return v

    return app


def store(_name):
    """Helper process `sw-store`: waitress with 4 threads serving the Bottle store."""
    import waitress

    s = Store()

    def bye(*_):
        log(f"waitress store: {s.served} requests ok (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    waitress.serve(make_store_app(s), host="127.0.0.1", port=ports("sanic-waitress")[1], threads=4,
                   channel_timeout=30, connection_limit=100, _quiet=True)


class Front:
    """The front's counts and its pooled client to the store."""

    def __init__(self):
        self.served = self.failed = 0
        self.http = None

    def fail(self, k, e):
        from sanic.response import json as answer

        self.failed += 1
        log(f"sanic front: item {k}: store failed: {e!r:.120}")
        return answer({"error": repr(e)[:200]}, status=502)

    async def store_put(self, k, v):
        r = await self.http.put(f"/kv/{k}", content=v)
        if r.status_code != 200:
            raise ValueError(f"store put {k}: status {r.status_code}")
        body = r.json()
        if body.get("key") != k or body.get("stored") != len(v):
            raise ValueError(f"store put {k}: wrong answer {body!r:.60}")

    async def store_get(self, k):
        r = await self.http.get(f"/kv/{k}")
        if r.status_code != 200:
            raise ValueError(f"store get {k}: status {r.status_code}")
        return r.content


def make_front():
    """The Sanic app (`--factory`): /item/<k> on the store."""
    import httpx
    from sanic import Sanic
    from sanic.response import json as answer

    app = Sanic("sanic_front")
    app.config.REQUEST_TIMEOUT = 10
    app.config.KEEP_ALIVE_TIMEOUT = 10
    front = Front()

    @app.before_server_start
    async def open_pool(_app):
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
        front.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports('sanic-waitress')[1]}",
                                       timeout=STORE_TIMEOUT_S, limits=limits)
        log(f"sanic front: worker {os.getpid()} started")

    @app.after_server_stop
    async def close_pool(_app):
        log(f"sanic front: worker {os.getpid()}: {front.served} requests ok, {front.failed} failed (told to stop)")
        await front.http.aclose()

    @app.get("/ready")
    async def ready(_request):
        return answer({"worker": os.getpid()})

    @app.put("/item/<k:int>")
    async def put(request, k):
        v = request.body
        try:
            await front.store_put(k, v)
        except Exception as e:
            return front.fail(k, e)
        front.served += 1
        return answer({"item": k, "stored": len(v)})

    @app.get("/item/<k:int>")
    async def get(request, k):
        try:
            v = await front.store_get(k)
        except Exception as e:
            return front.fail(k, e)
        front.served += 1
        return answer({"item": k, "len": len(v), "digest": hashlib.sha1(v).hexdigest()[:16]})

    return app


def client(name):
    """Helper process `sw-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("sanic-waitress")[0], name, REQUESTS2, 0.06)
    log(f"sanic client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def wait_ready(port, proc, timeout):
    """Waits until Sanic's worker answers `GET /ready`: the manager binds the port before
    it spawns the worker, so a connection is accepted into the backlog seconds before the
    worker (a fresh interpreter importing Sanic) serves it."""
    import http.client

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sanic exited with {proc.returncode} before its worker was ready")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
        try:
            conn.request("GET", "/ready")
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise RuntimeError(f"sanic's worker did not answer on {port} after {timeout} s")


def run(tmp, n):
    fport, sport = ports("sanic-waitress")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "sw-store"], env=env)
        wait_port(sport, p, timeout=20)
        # Appended, not replaced: a recording puts its Python hook on PYTHONPATH.
        path = os.pathsep.join(x for x in (os.environ.get("PYTHONPATH"), HERE) if x)
        p = d.start("front", [PY, "-m", "sanic", "sut.sanic_waitress:make_front", "--factory",
                              "--host", "127.0.0.1", "--port", str(fport), "--workers", "1",
                              "--no-motd", "--no-access-logs"], env=dict(env, PYTHONPATH=path), cwd=HERE)
        children = []
        try:
            wait_port(fport, p, timeout=40)
            wait_ready(fport, p, timeout=40)
            helper = d.start("client2", [PY, LAUNCHER, "sw-client", "--name", "2"], env=env)
            ok, errors = workload(fport, "1", n, 0.02)
            wait_readers([helper], seconds=25)
            log(f"sanic-waitress: {ok}/{n} steps ok, {errors} failed")
        finally:
            children = _children(p.pid)
    # A stopped worker does not act on the manager's SIGTERM and outlives the manager
    # (killed by the launcher after 5 s): the manager's children are killed here, so the
    # run ends.
    kill_leftovers(children, "sanic process")
