"""uwsgi-tornado: uWSGI (Debian `uwsgi-core` with its `http` router and its Python 3
plugin: C) — a master process, its HTTP router process and 3 preforked worker processes
running a WSGI application (`sut/uwsgi/kvapp.py`, in Debian's embedded CPython) — that keeps
its data in a Tornado store service (PyPI `tornado`: CPython on Tornado's IOLoop), and two
Python clients (`http.client`).

Ports: uWSGI's HTTP router = p[0], the store = p[2], and two uwsgi sockets: p[1], mapped to
worker 1 only, and p[3], shared by workers 2 and 3 (`--map-socket`). The router process
accepts the clients' HTTP/1.1 connections (keep-alive) and passes each request over the
uwsgi protocol (a new connection per request) to the two sockets in turn (`--http-to`
twice: round robin), so worker 1 serves half of the requests and workers 2 and 3 share the
other half (whichever is free accepts); the master watches the workers and forks a new one when one dies (`harakiri`
kills a worker stuck for 5 s on one request). The application speaks the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`) and keeps one keep-alive connection per
worker to the store (1 s timeout, made again after a failure; a failure is a 502). The store
(`tornado-store`) is a Tornado web application over a dict: `PUT /kv/K` answers the
value's digest, `GET /kv/K` the value. The launcher's client puts then reads back N keys
every 20 ms, the helper `uwsgi-client --name 2` 60 keys every 60 ms; each on one keep-alive
connection (2 s timeout), checking the answers, counting failures, connecting again and
going on. The store says at its exit (SIGTERM) how many requests it served; each worker in
its `atexit`.
"""

import hashlib
import os
import signal

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "uwsgi")
REQUESTS2 = 60
WORKERS = 3


def digest(v):
    return hashlib.sha1(v).hexdigest()[:16]


class Store:
    """The store's data: key -> value."""

    def __init__(self):
        self.data = {}
        self.served = self.missing = 0

    def put(self, k, v):
        self.data[k] = v
        self.served += 1
        return digest(v)

    def get(self, k):
        v = self.data.get(k)
        if v is None:
            self.missing += 1
        else:
            self.served += 1
        return v


def store(name):
    """Helper process `tornado-store`."""
    import tornado.ioloop
    import tornado.web

    data = Store()

    class StoreHandler(tornado.web.RequestHandler):
        def put(self, k):
            self.write(data.put(k, self.request.body))

        def get(self, k):
            v = data.get(k)
            if v is None:
                raise tornado.web.HTTPError(404)
            self.write(v)

    app = tornado.web.Application([(r"/kv/(\d+)", StoreHandler)], log_function=lambda h: None)
    app.listen(ports("uwsgi-tornado")[2], address="127.0.0.1")
    loop = tornado.ioloop.IOLoop.current()

    def bye(*_):
        log(f"tornado store: {data.served} requests ok, {data.missing} missing keys (told to stop)")
        loop.add_callback_from_signal(loop.stop)

    signal.signal(signal.SIGTERM, bye)
    loop.start()


def client(name):
    """Helper process `uwsgi-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("uwsgi-tornado")[0], name, REQUESTS2, 0.06)
    log(f"uwsgi client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, sock1, sport, sock2 = ports("uwsgi-tornado")[:4]
    env = dict(os.environ, KV_STORE_PORT=str(sport), PYTHONUNBUFFERED="1")
    uwsgi = ["uwsgi", "--plugin", "http,python3", "--master", "--processes", str(WORKERS),
             "--http", f"127.0.0.1:{front}", "--http-keepalive",
             "--http-to", f"127.0.0.1:{sock1}", "--http-to", f"127.0.0.1:{sock2}",
             "--socket", f"127.0.0.1:{sock1}", "--socket", f"127.0.0.1:{sock2}",
             "--map-socket", "0:1", "--map-socket", "1:2,3",
             "--pythonpath", HERE, "--module", "kvapp:app", "--need-app", "--lazy-apps",
             "--harakiri", "5", "--die-on-term", "--disable-logging", "--worker-reload-mercy", "3"]
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "tornado-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("uwsgi", uwsgi, env=env)
        wait_port(front, p, timeout=30)
        wait_port(sock1, p, timeout=30)
        wait_port(sock2, p, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "uwsgi-client", "--name", "2"], env=env)
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"uwsgi-tornado: {ok}/{n} steps ok, {errors} failed")
