"""cherrypy-rpyc: a CherryPy HTTP front service (PyPI `CherryPy` on the cheroot server: a
pool of worker threads) that keeps its data in an RPyC key-value service (PyPI `rpyc`: a
`ThreadedServer`, a thread per connection, brine-serialized calls framed by RPyC's
channel), and two Python HTTP clients (`http.client`). Python threads throughout.

Ports: front = p[0], store = p[1]. The store (helper `rpyc-store`) exposes `put(k, v)`
(answers the stored length) and `get(k)` (the value, or None) on a dict under a lock. The
front (helper `cherrypy-front`: 4 cheroot worker threads) serves the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`); each call takes an RPyC connection from a
pool (1 s synchronous-request timeout; a connection that failed is closed, a good one goes
back), and a store failure (an exception, a remote exception, an answer for another key)
becomes a 502. Each client (the launcher, and the helper `cherrypy-client --name 2`) puts
then reads back keys of its own on one keep-alive connection (2 s timeout), checks the
answers, counts failures, connects again and goes on. The front and the store say at the
end (on SIGTERM) how many requests they served and how many failed.
"""

import hashlib
import json
import os
import queue
import signal
import sys
import threading

import rpyc

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60
RPC_TIMEOUT_S = 1.0


class Store(rpyc.Service):
    """The store's data: key -> value, served over RPyC."""

    data = {}
    lock = threading.Lock()
    served = 0
    missing = 0

    def exposed_put(self, k, v):
        v = str(v)
        with Store.lock:
            Store.data[str(k)] = v
            Store.served += 1
        return len(v)

    def exposed_get(self, k):
        with Store.lock:
            v = Store.data.get(str(k))
            if v is None:
                Store.missing += 1
            else:
                Store.served += 1
        return v


def store(_name):
    """Helper process `rpyc-store`."""
    from rpyc.utils.server import ThreadedServer

    server = ThreadedServer(Store, hostname="127.0.0.1", port=ports("cherrypy-rpyc")[1],
                            protocol_config={"allow_public_attrs": False, "sync_request_timeout": 5})

    def bye(*_):
        log(f"rpyc store: {Store.served} calls ok, {Store.missing} missing keys (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server.start()


class StorePool:
    """RPyC connections to the store, one taken per call, made again after a failure."""

    def __init__(self, port):
        self.port = port
        self.free = queue.LifoQueue()

    def call(self, name, *args):
        try:
            conn = self.free.get_nowait()
        except queue.Empty:
            conn = rpyc.connect("127.0.0.1", self.port,
                                config={"sync_request_timeout": RPC_TIMEOUT_S, "allow_public_attrs": False})
        try:
            out = getattr(conn.root, name)(*args)
        except BaseException:
            try:
                conn.close()
            except Exception:
                pass
            raise
        self.free.put(conn)
        return out


class Front:
    """The CherryPy application: the key-value API in front of the RPyC store."""

    def __init__(self, pool):
        self.pool = pool
        self.served = self.failed = 0
        self.lock = threading.Lock()

    def counted(self, ok):
        with self.lock:
            if ok:
                self.served += 1
            else:
                self.failed += 1

    def item(self, k):
        import cherrypy

        cherrypy.response.headers["Content-Type"] = "application/json"
        try:
            n = int(k)
        except ValueError:
            raise cherrypy.HTTPError(404, "no such item")
        try:
            if cherrypy.request.method == "PUT":
                v = cherrypy.request.body.read().decode()
                stored = self.pool.call("put", k, v)
                if stored != len(v):
                    raise ValueError(f"stored {stored} bytes of {len(v)}")
                out = {"item": n, "stored": stored}
            else:
                v = self.pool.call("get", k)
                if v is None:
                    raise KeyError(k)
                v = str(v)
                out = {"item": n, "len": len(v), "digest": hashlib.sha1(v.encode()).hexdigest()[:16]}
        except Exception as e:
            self.counted(False)
            log(f"cherrypy front: item {k}: store failed: {e!r:.120}")
            cherrypy.response.status = 502
            return json.dumps({"error": repr(e)[:200]}).encode()
        self.counted(True)
        return json.dumps(out).encode()

    item.exposed = True


def front(_name):
    """Helper process `cherrypy-front`: 4 cheroot worker threads."""
    import cherrypy

    fport, sport = ports("cherrypy-rpyc")[:2]
    app = Front(StorePool(sport))
    cherrypy.config.update({"environment": "production", "server.socket_host": "127.0.0.1",
                            "server.socket_port": fport, "server.thread_pool": 4,
                            "engine.autoreload.on": False, "log.screen": False,
                            "server.socket_timeout": 10})
    cherrypy.tree.mount(app, "/", {"/": {"request.methods_with_bodies": ("PUT",)}})

    def bye(*_):
        log(f"cherrypy front: {app.served} requests ok, {app.failed} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    cherrypy.engine.start()
    signal.signal(signal.SIGTERM, bye)
    cherrypy.engine.block()


def client(name):
    """Helper process `cherrypy-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("cherrypy-rpyc")[0], name, REQUESTS2, 0.06)
    log(f"cherrypy client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("cherrypy-rpyc")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "rpyc-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "cherrypy-front"], env=env)
        wait_port(fport, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "cherrypy-client", "--name", "2"])
        ok, errors = workload(fport, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"cherrypy-rpyc: {ok}/{n} steps ok, {errors} failed")
