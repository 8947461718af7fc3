"""gunicorn-falcon: a Falcon key-value front (PyPI `falcon`, WSGI) served by gunicorn's
prefork arbiter (PyPI `gunicorn`: a master that forks and watches one synchronous worker,
kills a worker that stops sending heartbeats and forks a new one) that keeps its data in
an XML-RPC store (the standard library's `xmlrpc.server`, a thread per request), and two
Python HTTP clients (`http.client`). CPython throughout; no event loop anywhere.

Ports: front = p[0], store = p[1]. The store (helper `xmlrpc-store`) offers `put(k, v)`
(answers the length stored) and `get(k)` (answers the value, or "" when there is none).
The front (gunicorn, `--workers 1 --worker-class sync --timeout 4`, the app
`sut.gunicorn_falcon:app`) serves the API of `sut/kv_http.py` (`PUT /item/K`, `GET
/item/K`); each call to the store is an XML-RPC request on a new connection (1 s timeout),
and a store failure (an exception, a timeout, a wrong length) becomes a 502. The sync
worker closes each client connection after its answer, so the clients connect once per
request. Each client (the launcher, and the helper `gunicorn-client --name 2`) puts then
reads back keys of its own (2 s timeout), checks the answers, counts failures and goes on.
The worker and the store say at the end (on SIGTERM) how many requests they served and how
many failed.
"""

import hashlib
import os
import signal
import socketserver
import sys
import xmlrpc.client
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60
STORE_TIMEOUT_S = 1.0
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Store:
    """The store's data and its two XML-RPC methods."""

    def __init__(self):
        self.data = {}
        self.served = 0

    def put(self, k, v):
        self.data[str(k)] = str(v)
        self.served += 1
        return len(v)

    def get(self, k):
        self.served += 1
        return self.data.get(str(k), "")


class ThreadedXMLRPCServer(socketserver.ThreadingMixIn, SimpleXMLRPCServer):
    daemon_threads = True
    allow_reuse_address = True


class QuietHandler(SimpleXMLRPCRequestHandler):
    def log_message(self, *_):
        pass


def store(_name):
    """Helper process `xmlrpc-store`."""
    s = Store()
    server = ThreadedXMLRPCServer(("127.0.0.1", ports("gunicorn-falcon")[1]), requestHandler=QuietHandler,
                                  logRequests=False, allow_none=False)
    server.register_function(s.put, "put")
    server.register_function(s.get, "get")

    def bye(*_):
        log(f"xmlrpc store: {s.served} calls ok (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server.serve_forever()


class TimeoutTransport(xmlrpc.client.Transport):
    """xmlrpc.client's transport with a socket timeout, one connection per call."""

    def make_connection(self, host):
        conn = super().make_connection(host)
        conn.timeout = STORE_TIMEOUT_S
        return conn


def store_proxy():
    return xmlrpc.client.ServerProxy(f"http://127.0.0.1:{ports('gunicorn-falcon')[1]}/",
                                     transport=TimeoutTransport())


class Item:
    """The Falcon resource /item/{k}: every call goes to the store."""

    def __init__(self):
        self.served = self.failed = 0

    def _fail(self, resp, k, e):
        self.failed += 1
        log(f"gunicorn front: item {k}: store failed: {e!r:.120}")
        resp.status = 502
        resp.media = {"error": repr(e)[:200]}

    def on_put(self, req, resp, k):
        import falcon

        try:
            n = int(k)
        except ValueError:
            raise falcon.HTTPNotFound()
        v = req.bounded_stream.read().decode()
        try:
            stored = store_proxy().put(k, v)
            if stored != len(v):
                raise ValueError(f"stored {stored} bytes of {len(v)}")
        except Exception as e:
            return self._fail(resp, k, e)
        self.served += 1
        resp.media = {"item": n, "stored": len(v)}

    def on_get(self, req, resp, k):
        import falcon

        try:
            n = int(k)
        except ValueError:
            raise falcon.HTTPNotFound()
        try:
            v = store_proxy().get(k)
            if not v:
                raise KeyError(k)
        except Exception as e:
            return self._fail(resp, k, e)
        self.served += 1
        resp.media = {"item": n, "len": len(v), "digest": hashlib.sha1(v.encode()).hexdigest()[:16]}


def make_app():
    import falcon

    item = Item()
    application = falcon.App()
    application.add_route("/item/{k}", item)
    return application, item


def post_worker_init(worker):
    """gunicorn's hook in a new worker: its count at the end (gunicorn sends the worker
    SIGTERM at shutdown and runs `worker_exit` then)."""
    log(f"gunicorn front: worker {os.getpid()} started")


def worker_exit(server, worker):
    log(f"gunicorn front: worker {worker.pid}: {ITEM.served} requests ok, {ITEM.failed} failed (told to stop)")


app, ITEM = (None, None)
if os.environ.get("GUNICORN_FALCON_APP"):
    app, ITEM = make_app()


def client(name):
    """Helper process `gunicorn-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("gunicorn-falcon")[0], name, REQUESTS2, 0.06)
    log(f"gunicorn client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("gunicorn-falcon")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "xmlrpc-store"], env=env)
        wait_port(sport, p, timeout=20)
        conf = os.path.join(tmp, "gunicorn.conf.py")
        with open(conf, "w") as f:
            f.write("from sut.gunicorn_falcon import post_worker_init, worker_exit  # noqa: F401\n")
        # Appended, not replaced: a recording puts its Python hook on PYTHONPATH.
        path = os.pathsep.join(x for x in (os.environ.get("PYTHONPATH"), HERE) if x)
        genv = dict(env, GUNICORN_FALCON_APP="1", PYTHONPATH=path)
        p = d.start("front", [PY, "-m", "gunicorn", "--config", conf, "--chdir", HERE,
                              "--bind", f"127.0.0.1:{fport}", "--workers", "1", "--worker-class", "sync",
                              "--timeout", "4", "--graceful-timeout", "2", "--keep-alive", "2", "--no-control-socket",
                              "sut.gunicorn_falcon:app"], env=genv)
        wait_port(fport, p, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "gunicorn-client", "--name", "2"])
        ok, errors = workload(fport, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"gunicorn-falcon: {ok}/{n} steps ok, {errors} failed")
