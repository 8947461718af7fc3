"""The application tier of the demand suite's api-pool-pg system (bench/demand/systems.py):
a WSGI application run by gunicorn (a pool of sync workers on one port) over PostgreSQL.

This file is both the application (`pgapp:app`) and gunicorn's configuration
(`-c python:pgapp`: the request hooks below). Three request types:

- `/lookup/K` burns 1 ms of thread CPU time, then reads one customer's orders (index);
- `/report/K` burns 5 ms, then sums the orders of 200 customers by group (index range);
- `/order/K` burns 0.5 ms, then inserts one order (committed).

Each worker measures the thread CPU time of each request from gunicorn's `pre_request` to
its `post_request` hook (the handler, its database client work, the reply), per type, and
writes sums and counts to `$PGAPP_STATS/api-PID.json` when it exits (before the fault
only: the truth of the fault-free demands). The fault `slow` (a file `$PGAPP_STATS/slow`
exists) makes the burns 3x longer.
"""

import json
import os
import time

import psycopg2

BURN_S = {"lookup": 0.001, "report": 0.005, "order": 0.0005}
STATS = os.environ.get("PGAPP_STATS", "/tmp")
SLOW = os.path.join(STATS, "slow")

_db = []
_stats = {k: [0.0, 0] for k in BURN_S}
_open = {}
_slow = []


def burn(cpu_s):
    end = time.thread_time() + cpu_s
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def db():
    if not _db:
        c = psycopg2.connect(
            host="127.0.0.1", port=int(os.environ["PGPORT"]), user="postgres", dbname="postgres"
        )
        c.autocommit = True
        _db.append(c)
    return _db[0]


def lookup_view(k):
    burn(BURN_S["lookup"] * (3 if _slow else 1))
    cur = db().cursor()
    cur.execute("SELECT id, amount FROM orders WHERE customer = %s", (k % 10000,))
    return json.dumps(cur.fetchall()).encode()


def report_view(k):
    burn(BURN_S["report"] * (3 if _slow else 1))
    cur = db().cursor()
    cur.execute(
        "SELECT customer %% 20, sum(amount) FROM orders WHERE customer BETWEEN %s AND %s "
        "GROUP BY 1 ORDER BY 1",
        (k % 9800, k % 9800 + 200),
    )
    return json.dumps(cur.fetchall()).encode()


def order_view(k):
    burn(BURN_S["order"] * (3 if _slow else 1))
    cur = db().cursor()
    cur.execute(
        "INSERT INTO orders(customer, amount, note) VALUES (%s, %s, 'web') RETURNING id",
        (k % 10000, k % 500),
    )
    return json.dumps(cur.fetchone()).encode()


VIEWS = {"lookup": lookup_view, "report": report_view, "order": order_view}


def app(environ, start_response):
    parts = environ.get("PATH_INFO", "/").strip("/").split("/")
    view = VIEWS.get(parts[0])
    if view is None or len(parts) < 2:
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    body = view(int(parts[1]))
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


# ---------------------------------------------------------------- gunicorn configuration

graceful_timeout = 5
accesslog = None


def pre_request(worker, req):
    # Checked before every request, so that requests make the same calls before and after.
    if os.path.exists(SLOW) and not _slow:
        _slow.append(1)
    _open["t"] = time.thread_time()
    _open["kind"] = req.path.strip("/").split("/")[0]


def post_request(worker, req, environ, resp):
    kind = _open.pop("kind", None)
    t = _open.pop("t", None)
    if kind in _stats and t is not None and not _slow:
        _stats[kind][0] += time.thread_time() - t
        _stats[kind][1] += 1


def worker_exit(server, worker):
    with open(os.path.join(STATS, "api-%d.json" % os.getpid()), "w") as f:
        json.dump(_stats, f)
