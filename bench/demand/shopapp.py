"""The application tier of the demand suite's shop-uwsgi-mariadb system (bench/demand/shop.py):
a WSGI application run by uWSGI (Debian `uwsgi-core` with its Python 3 plugin; a master
and a pool of worker processes on one uwsgi socket behind nginx) over MariaDB.

Three request types, each burning a known thread CPU time before its query:

- `/product/K` burns 1 ms, then reads one product by its SKU (an index lookup);
- `/search/K` burns 4 ms, then aggregates one category's products (an index range);
- `/cart/K` burns 0.5 ms, then inserts one cart line (autocommit).

Each worker measures the thread CPU time of each request from the application's entry to
its return (the view, its database client work, building the reply), per type, and writes
sums and counts to `$SHOP_STATS/api-PID.json` every 5 s of wall time (written from a
request, so the file is current to within 5 s of the worker's last request) — only
before the fault (the file `$SHOP_STATS/fault` exists after it): the truth of the fault-free
demands. Imports only the standard library and PyMySQL (Debian `python3-pymysql`: the
plugin embeds Debian's Python).
"""

import json
import os
import time

import pymysql

BURN_S = {"product": 0.001, "search": 0.004, "cart": 0.0005}
STATS = os.environ.get("SHOP_STATS", "/tmp")
FAULT = os.path.join(STATS, "fault")

_db = []
_stats = {k: [0.0, 0] for k in BURN_S}
_state = {"faulted": False, "written": 0.0}


def burn(cpu_s):
    end = time.thread_time() + cpu_s
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def db():
    if not _db:
        c = pymysql.connect(host="127.0.0.1", port=int(os.environ["SHOP_DB_PORT"]), user="root",
                            database="shop", autocommit=True)
        _db.append(c)
    return _db[0]


def product_view(k):
    burn(BURN_S["product"])
    with db().cursor() as cur:
        cur.execute("SELECT id, price, descr FROM products WHERE sku = %s", ("s%07d" % (k % 100000 + 1),))
        return json.dumps(cur.fetchall()).encode()


def search_view(k):
    burn(BURN_S["search"])
    with db().cursor() as cur:
        cur.execute("SELECT category, COUNT(*), SUM(price) FROM products WHERE category = %s GROUP BY category",
                    (k % 100,))
        return json.dumps([list(map(int, r)) for r in cur.fetchall()]).encode()


def cart_view(k):
    burn(BURN_S["cart"])
    with db().cursor() as cur:
        cur.execute("INSERT INTO carts(product, qty) VALUES (%s, %s)", (k % 100000 + 1, k % 5 + 1))
        return json.dumps([cur.lastrowid]).encode()


VIEWS = {"product": product_view, "search": search_view, "cart": cart_view}


def _account(kind, cpu_s):
    # Checked on every request, so that requests make the same calls before and after.
    if os.path.exists(FAULT):
        _state["faulted"] = True
    if _state["faulted"]:
        return
    _stats[kind][0] += cpu_s
    _stats[kind][1] += 1
    now = time.time()
    if now - _state["written"] >= 5.0:
        _state["written"] = now
        tmp = os.path.join(STATS, ".api-%d.json" % os.getpid())
        with open(tmp, "w") as f:
            json.dump(_stats, f)
        os.replace(tmp, os.path.join(STATS, "api-%d.json" % os.getpid()))


def app(environ, start_response):
    t = time.thread_time()
    parts = environ.get("PATH_INFO", "/").strip("/").split("/")
    view = VIEWS.get(parts[0])
    if view is None or len(parts) < 2:
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    body = view(int(parts[1]))
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    _account(parts[0], time.thread_time() - t)
    return [body]
