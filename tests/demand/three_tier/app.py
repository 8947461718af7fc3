"""The application tier of the three-tier system: a WSGI app under gunicorn.

/a looks one key up, /b sums a range of 50 keys; each endpoint has a PostgreSQL
connection of its own (so each backend process serves one kind of query).
"""
import os

import psycopg2

_conns = {}


def _conn(kind):
    c = _conns.get(kind)
    if c is None:
        c = psycopg2.connect(
            host="127.0.0.1", port=int(os.environ["PGPORT"]), user="postgres", dbname="postgres"
        )
        c.autocommit = True
        _conns[kind] = c
    return c


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    qs = environ.get("QUERY_STRING", "k=1")
    k = int(qs.split("=", 1)[1]) if "=" in qs else 1
    if path == "/a":
        cur = _conn("a").cursor()
        cur.execute("SELECT v FROM kv WHERE k = %s", (k,))
        body = str(cur.fetchone()).encode()
    elif path == "/b":
        cur = _conn("b").cursor()
        cur.execute("SELECT sum(v) FROM kv WHERE k BETWEEN %s AND %s", (k, k + 50))
        body = str(cur.fetchone()).encode()
    else:
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
