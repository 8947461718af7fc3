#!/usr/bin/env python3
"""The multi-tier systems of the demand suite (bench/demand/run.py), each started, loaded
with phases of intensity and mix, faulted and stopped by `systems.py run SYSTEM ...`
(what `culprit record` runs), plus the tiers themselves (`systems.py TIER ...`).

Systems (bench/demand/split.json):
- webapp-cache-db: a Python web application (http.server, 2 pre-forked workers) ->
  memcached (cache) and a Python database server over sqlite3.
- haproxy-apps: haproxy -> 3 Python application servers burning a known CPU time per
  request type (light 1 ms, heavy 6 ms of thread CPU time).
- job-queue: a Python broker dispatching jobs to 2 Python workers that compute and write
  each result to a sqlite3 file (fsync per commit).
- api-pool-pg: nginx -> gunicorn (a pool of 3 sync workers on one port, `pgapp.py`,
  burning a known CPU time per request type) -> PostgreSQL (one backend per worker).
- shop-uwsgi-mariadb: nginx -> uWSGI (3 workers, `shopapp.py`, burning a known CPU time
  per request type) -> MariaDB; its tiers and faults are in `shop.py`.
- blog-lighttpd-php: lighttpd -> php-cgi (3 children, `blog.php`, burning a known CPU time
  per request type) -> memcached and MariaDB; phases every 30 s; in `blog.py`.
- wiki-apache-node: Apache httpd (mod_proxy_http) -> a Node.js cluster (3 workers,
  `wiki.js`, burning a known CPU time per request type) -> Redis and MariaDB; phases every
  30 s; in `wiki.py`.
- cms-varnish-perl: Varnish (passing every request) -> Starman (3 Perl workers, `cms.psgi`,
  burning a known CPU time per request type) -> memcached and PostgreSQL; phases every
  30 s; in `cms.py`.
- catalog-haproxy-tomcat: HAProxy -> 2 Apache Tomcat 10 servers (JVMs, 4 request threads
  each, `catalog/CatalogServlet.java`, burning a known CPU time per request type) ->
  MariaDB through JDBC; phases every 30 s; in `catalog.py`.
- forum-squid-puma: Squid (a reverse proxy passing every request) -> Puma (Ruby, 3 workers
  of one request thread, `forum.ru`, burning a known CPU time per request type) -> Redis and
  PostgreSQL; phases every 30 s; in `forum.py`.
- job-rabbit-workers: a pre-forked Python HTTP front (6 children, `jobq_front.py`) turning
  each request into a job published to RabbitMQ and waiting for its reply -> 3 Python
  workers (pika consumers, prefetch 1, `jobq_worker.py`, burning a known CPU time per job
  type) -> MariaDB; phases every 30 s; in `jobq.py`.
- grpc-fanout-mariadb: an aiohttp gateway (`fanout_gateway.py`) calling two gRPC services
  (grpcio thread-pool servers, each its own process): `profile` (`fanout_profile.py`) ->
  MariaDB, and `search` (`fanout_search.py`, burning a known CPU time per call); a request
  type calls one or both (in parallel); phases every 30 s; in `fanout.py`.

`run` writes a truth file (JSON): the pids of each tier, the phases, the fault (which
tiers, when) and the known CPU demands. Loopback only; every process is bounded by the
run's length and killed at its end.
"""

import argparse
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import socketserver
import sqlite3
import subprocess
import sys
import threading
import time

import blog
import catalog
import cms
import fanout
import forum
import jobq
import nginx
import shop
import wiki

HERE = os.path.dirname(os.path.abspath(__file__))
ME = os.path.abspath(__file__)


def burn(cpu_s):
    """Burns `cpu_s` seconds of this thread's CPU time."""
    end = time.thread_time() + cpu_s
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def recv_line(f):
    line = f.readline()
    if not line:
        raise EOFError
    return line.decode().rstrip("\n")


# ---------------------------------------------------------------- webapp-cache-db tiers

def db_server(port, path):
    """A database server: one thread per connection, a line protocol over sqlite3.
    `item K` (indexed lookup), `list` (a join), `save V` (an insert, committed).
    SIGUSR1 drops the index of items.code (the fault)."""
    drop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: drop.set())

    class H(socketserver.StreamRequestHandler):
        def handle(self):
            db = sqlite3.connect(path, timeout=30)
            while True:
                try:
                    q = recv_line(self.rfile)
                except (EOFError, ConnectionError):
                    return
                if drop.is_set():
                    db.execute("DROP INDEX IF EXISTS items_code")
                    db.commit()
                op, _, arg = q.partition(" ")
                if op == "item":
                    rows = db.execute(
                        "SELECT id, code, body FROM items WHERE code = ?", (arg,)
                    ).fetchall()
                elif op == "list":
                    rows = db.execute(
                        "SELECT i.id, i.code, c.name FROM items i JOIN cats c ON c.id = i.cat "
                        "WHERE i.cat = ? ORDER BY i.id LIMIT 20",
                        (int(arg) % 50,),
                    ).fetchall()
                else:
                    db.execute("INSERT INTO log(v) VALUES (?)", (arg,))
                    db.commit()
                    rows = []
                body = json.dumps(rows).encode()
                self.wfile.write(b"%d\n" % len(body) + body)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), H) as s:
        s.serve_forever()


def init_db(path):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE cats(id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, code TEXT, cat INTEGER, body TEXT)")
    db.execute("CREATE TABLE log(id INTEGER PRIMARY KEY, v TEXT)")
    db.executemany("INSERT INTO cats VALUES (?, ?)", [(i, "cat%d" % i) for i in range(50)])
    rnd = random.Random(1)
    db.executemany(
        "INSERT INTO items(code, cat, body) VALUES (?, ?, ?)",
        [("c%06d" % i, rnd.randrange(50), "x" * rnd.randrange(50, 400)) for i in range(60000)],
    )
    db.execute("CREATE INDEX items_code ON items(code)")
    db.execute("CREATE INDEX items_cat ON items(cat)")
    db.commit()
    db.close()


class Conn:
    """A persistent line-protocol connection."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def query(self, q):
        self.s.sendall(q.encode() + b"\n")
        n = int(recv_line(self.f))
        return self.f.read(n)


class Memcache:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def get(self, k):
        self.s.sendall(b"get %s\r\n" % k.encode())
        line = self.f.readline()
        if line.startswith(b"VALUE"):
            n = int(line.split()[3])
            v = self.f.read(n + 2)[:-2]
            self.f.readline()  # END
            return v
        return None

    def set(self, k, v):
        self.s.sendall(b"set %s 0 30 %d\r\n%s\r\n" % (k.encode(), len(v), v))
        self.f.readline()


def web_app(port, workers, mc_port, db_port):
    """A web application: pre-forked workers on one listening socket."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(128)
    kids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            web_worker(ls, mc_port, db_port)
            os._exit(0)
        kids.append(pid)
    signal.signal(signal.SIGTERM, lambda *_: [os.kill(k, signal.SIGTERM) for k in kids] and os._exit(0))
    for k in kids:
        os.waitpid(k, 0)


def web_worker(ls, mc_port, db_port):
    mc = Memcache(mc_port)
    db = Conn(db_port)

    def item_view(k):
        v = mc.get("item:" + k)
        if v is None:
            v = db.query("item c%06d" % int(k))
            mc.set("item:" + k, v)
        return b"<html><body>" + v + b"</body></html>"

    def list_view(cat):
        rows = json.loads(db.query("list " + cat))
        return ("<ul>" + "".join("<li>%s %s</li>" % (r[1], r[2]) for r in rows) + "</ul>").encode()

    def save_view(v):
        db.query("save " + v)
        return b"saved"

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def do_GET(self):
            parts = self.path.strip("/").split("/")
            if parts[0] == "item":
                body = item_view(parts[1])
            elif parts[0] == "list":
                body = list_view(parts[1])
            else:
                body = save_view(parts[1] if len(parts) > 1 else "v")
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.HTTPServer(("127.0.0.1", 0), H, bind_and_activate=False)
    srv.socket.close()
    srv.socket = ls
    srv.serve_forever()


# ---------------------------------------------------------------- haproxy-apps tiers

LIGHT_S = 0.001
HEAVY_S = 0.006


def burn_app(port, stats_file):
    """An application server: /light burns 1 ms of CPU, /heavy 6 ms (x4 after SIGUSR1).
    It measures the thread CPU time of handling each request (parsing, burning, replying:
    one connection per request) per type, and writes the means to `stats_file` at SIGTERM
    (before SIGUSR1 only: the truth of the fault-free demands)."""
    slow = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: slow.set())
    stats = {"light": [0.0, 0], "heavy": [0.0, 0]}

    def dump(*_):
        with open(stats_file, "w") as f:
            json.dump({k: (v[0] / v[1] if v[1] else None) for k, v in stats.items()}, f)
        os._exit(0)

    signal.signal(signal.SIGTERM, dump)

    def light():
        burn(LIGHT_S)
        return b"light"

    def heavy():
        burn(HEAVY_S * (4 if slow.is_set() else 1))
        return b"heavy" * 200

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def handle(self):
            t = time.thread_time()
            self.kind = None
            super().handle()
            if self.kind and not slow.is_set():
                stats[self.kind][0] += time.thread_time() - t
                stats[self.kind][1] += 1

        def do_GET(self):
            self.kind = "heavy" if self.path.startswith("/heavy") else "light"
            body = heavy() if self.kind == "heavy" else light()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    http.server.HTTPServer.allow_reuse_address = True
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()


def haproxy_cfg(path, port, backends):
    with open(path, "w") as f:
        f.write(
            "global\n  nbthread 1\n  maxconn 256\n"
            "defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n"
            "  option http-server-close\n"
            "frontend fe\n  bind 127.0.0.1:%d\n  default_backend be\n"
            "backend be\n  balance roundrobin\n" % port
        )
        for i, b in enumerate(backends):
            f.write("  server app%d 127.0.0.1:%d\n" % (i, b))


# ---------------------------------------------------------------- job-queue tiers

SMALL_S = 0.002
BIG_S = 0.008


def job_worker(port, path):
    """A worker: serves the broker's jobs (`small N` / `big N`): computes, then writes the
    result to sqlite3 (synchronous=FULL: one fsync per commit). SIGUSR1: computing 4x slower."""
    slow = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: slow.set())
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    db.execute("PRAGMA synchronous=FULL")

    def small(n):
        burn(SMALL_S * (4 if slow.is_set() else 1))
        return "s%d" % n

    def big(n):
        burn(BIG_S * (4 if slow.is_set() else 1))
        return "b%d" % n * 50

    class H(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                try:
                    kind, n = recv_line(self.rfile).split()
                except (EOFError, ConnectionError, ValueError):
                    return
                r = small(int(n)) if kind == "small" else big(int(n))
                db.execute("INSERT INTO results(v) VALUES (?)", (r,))
                db.commit()
                self.wfile.write(b"%d\n" % len(r) + r.encode())

    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), H) as s:
        s.serve_forever()


def init_results(path):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("CREATE TABLE results(id INTEGER PRIMARY KEY, v TEXT)")
    db.commit()
    db.close()


def broker(port, worker_ports):
    """A job broker: clients send `JOB kind n`; the job goes to a free worker over a
    persistent connection; its result goes back to the client."""
    free = __import__("queue").Queue()
    for p in worker_ports:
        free.put(Conn(p))

    class H(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                try:
                    q = recv_line(self.rfile)
                except (EOFError, ConnectionError):
                    return
                _, kind, n = q.split()
                w = free.get()
                try:
                    r = w.query("%s %s" % (kind, n))
                finally:
                    free.put(w)
                self.wfile.write(b"%d\n" % len(r) + r)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), H) as s:
        s.serve_forever()


def locker(path, hold_s, gap_s):
    """Lock contention: holds the database's write lock `hold_s` of every `hold_s+gap_s`."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    while True:
        db.execute("BEGIN EXCLUSIVE")
        time.sleep(hold_s)
        db.execute("COMMIT")
        time.sleep(gap_s)


def pg_sql(port, sql):
    import psycopg2
    c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    c.autocommit = True
    c.cursor().execute(sql)
    c.close()


def hog(cpu):
    os.sched_setaffinity(0, {cpu})
    x = 0
    while True:
        x += 1


# ---------------------------------------------------------------- api-pool-pg tiers

def pg_bin():
    for p in ("/usr/local/bin/postgres", "/usr/lib/postgresql/15/bin/postgres"):
        if os.path.exists(p):
            return os.path.dirname(os.path.realpath(p))
    found = sorted(__import__("glob").glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise SystemExit("no PostgreSQL: bench/demand/setup.sh")
    return os.path.dirname(found[-1])


def as_postgres():
    """Popen keywords that run a command as the postgres user when this is root."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.getuid() == 0 else {}


ORDERS_SCHEMA = (
    "CREATE TABLE orders (id serial PRIMARY KEY, customer int, amount int, note text)",
    "INSERT INTO orders(customer, amount, note) SELECT g % 10000, g % 500, "
    "repeat('x', 40) FROM generate_series(1, 300000) g",
    "CREATE INDEX orders_customer ON orders(customer)",
    "ANALYZE orders",
)


def pg_start(tmp, port, schema=ORDERS_SCHEMA):
    """A fresh PostgreSQL cluster in tmp/pg, started on `port`, with the tables `schema`
    makes (api-pool-pg's orders by default): the postmaster's Popen."""
    data = os.path.join(tmp, "pg")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data, mode=0o700)
    if os.getuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    b = pg_bin()
    subprocess.run([os.path.join(b, "initdb"), "-D", data, "-A", "trust", "-U", "postgres"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, **as_postgres())
    p = spawn([os.path.join(b, "postgres"), "-D", data, "-p", str(port), "-k", data,
               "-c", "listen_addresses=127.0.0.1", "-c", "autovacuum=off", "-c", "fsync=off"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **as_postgres())
    end = time.time() + 60
    while True:
        try:
            import psycopg2
            c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
            break
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.2)
    c.autocommit = True
    cur = c.cursor()
    for stmt in schema:
        cur.execute(stmt)
    c.close()
    return p


def pg_locker(port, hold_s, gap_s, table="orders"):
    """Lock contention: holds an exclusive lock on `table` (api-pool-pg's orders by default)
    `hold_s` of every `hold_s+gap_s` (every query of the application on it waits for it)."""
    import psycopg2
    c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    cur = c.cursor()
    while True:
        cur.execute("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE" % table)
        time.sleep(hold_s)
        c.commit()
        time.sleep(gap_s)


def nginx_cfg(tmp, port, upstream):
    return nginx.config(tmp, port, "proxy_pass http://127.0.0.1:%d;" % upstream)


# ---------------------------------------------------------------- the run

def phases(seconds, n=6):
    """Phases of intensity (requests/s) and mix (share of the first type), changing every
    seconds/n: intensity and mix change independently."""
    plan = [(12, 0.8), (24, 0.8), (24, 0.3), (12, 0.3), (18, 0.55), (24, 0.8), (12, 0.3), (18, 0.55)]
    step = seconds / n
    return [(i * step, plan[i % len(plan)][0], plan[i % len(plan)][1]) for i in range(n)]


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("port %d never opened" % port)


def spawn(args, **kw):
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, **kw)


def http_get(port, path):
    """One GET to 127.0.0.1:`port`: its status."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def job(port, kind, n):
    c = Conn(port)
    c.s.sendall(("JOB %s %d\n" % (kind, n)).encode())
    m = int(recv_line(c.f))
    c.f.read(m)
    c.s.close()


def load(seconds, plan, send, stop, errors):
    """Open-loop load: requests issued at each phase's rate, by a pool of client threads."""
    t0 = time.time()
    rnd = random.Random(7)
    sem = threading.Semaphore(16)
    k = 0
    next_t = t0
    while not stop.is_set():
        now = time.time()
        el = now - t0
        if el >= seconds:
            break
        ph = [p for p in plan if p[0] <= el][-1]
        rate, share = ph[1], ph[2]
        first = rnd.random() < share
        k += 1

        def one(first=first, k=k):
            try:
                send(first, k)
            except Exception:
                errors.append(1)
            finally:
                sem.release()

        if sem.acquire(timeout=5):
            threading.Thread(target=one, daemon=True).start()
        next_t += rnd.expovariate(rate)
        d = next_t - time.time()
        if d > 0:
            time.sleep(d)


def run(a):
    procs, extra = {}, []
    try:
        run_system(a, procs, extra)
    finally:
        for p in extra + [p for ps in procs.values() for p in ps]:
            if p.poll() is None:
                p.terminate()
        for p in extra + [p for ps in procs.values() for p in ps]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def run_system(a, procs, extra):
    tmp = a.workdir
    os.makedirs(tmp, exist_ok=True)
    base = a.port_base
    truth = {"system": a.system, "seconds": a.seconds, "fault": None}
    phase_s = {blog.NAME: blog.PHASE_S, wiki.NAME: wiki.PHASE_S, cms.NAME: cms.PHASE_S,
               catalog.NAME: catalog.PHASE_S, forum.NAME: forum.PHASE_S, jobq.NAME: jobq.PHASE_S,
               fanout.NAME: fanout.PHASE_S}.get(a.system)
    plan = phases(a.seconds, max(1, round(a.seconds / phase_s))) if phase_s else phases(a.seconds)
    truth["phases"] = plan
    py = [sys.executable, ME]
    fault_tiers = []
    moved = {}  # tier -> pids taken out of the tier they descend from
    if a.system == "webapp-cache-db":
        dbf = os.path.join(tmp, "web.db")
        init_db(dbf)
        mc = ["memcached", "-l", "127.0.0.1", "-p", str(base + 1), "-U", "0", "-t", "1", "-m", "64"]
        if os.getuid() == 0:
            mc += ["-u", "root"]
        procs["memcached"] = [spawn(mc)]
        procs["database"] = [spawn(py + ["db", "--port", str(base + 2), "--file", dbf])]
        wait_port(base + 1)
        wait_port(base + 2)
        procs["web"] = [spawn(py + ["web", "--port", str(base), "--workers", "2", "--mc", str(base + 1), "--db", str(base + 2)])]
        wait_port(base)
        rnd = random.Random(3)

        def send(first, k):
            if first:
                http_get(base, "/item/%d" % rnd.randrange(3000))
            elif k % 3:
                http_get(base, "/list/%d" % rnd.randrange(50))
            else:
                http_get(base, "/save/v%d" % k)

        if a.fault == "index":
            fault_tiers = ["database"]
        elif a.fault == "dbread":
            fault_tiers = ["database"]
    elif a.system == "haproxy-apps":
        apps = [base + 1 + i for i in range(3)]
        procs["app0"], procs["app1"], procs["app2"] = [], [], []
        for i, p in enumerate(apps):
            procs["app%d" % i] = [spawn(py + ["app", "--port", str(p), "--stats", os.path.join(tmp, "app%d.json" % i)])]
        for p in apps:
            wait_port(p)
        cfg = os.path.join(tmp, "haproxy.cfg")
        haproxy_cfg(cfg, base, apps)
        procs["haproxy"] = [spawn(["haproxy", "-db", "-f", cfg])]
        wait_port(base)

        def send(first, k):
            http_get(base, "/light" if first else "/heavy")

        truth["cpu_demand_s"] = {"app": {"light": LIGHT_S, "heavy": HEAVY_S}}
        if a.fault in ("hog", "heavy"):
            fault_tiers = ["app1"]
    elif a.system == "job-queue":
        res = os.path.join(tmp, "results.db")
        init_results(res)
        wports = [base + 1, base + 2]
        for i, p in enumerate(wports):
            procs["worker%d" % i] = [spawn(py + ["worker", "--port", str(p), "--file", res])]
        for p in wports:
            wait_port(p)
        procs["broker"] = [spawn(py + ["broker", "--port", str(base), "--workers", ",".join(map(str, wports))])]
        wait_port(base)

        def send(first, k):
            job(base, "small" if first else "big", k)

        if a.fault == "lock":
            fault_tiers = ["worker0", "worker1"]
        elif a.fault == "slow":
            fault_tiers = ["worker0"]
    elif a.system == "api-pool-pg":
        procs["database"] = [pg_start(tmp, base + 2)]
        env = dict(os.environ, PGPORT=str(base + 2), PGAPP_STATS=tmp)
        procs["api"] = [spawn([sys.executable, "-m", "gunicorn", "-w", "3", "-b", "127.0.0.1:%d" % (base + 1),
                               "--control-socket", os.path.join(tmp, "gunicorn.ctl"),
                               "--chdir", HERE, "-c", "python:pgapp", "pgapp:app"],
                              env=env, cwd=HERE, stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(tmp, "gunicorn.log"), "w"))]
        wait_port(base + 1, 60)
        procs["nginx"] = [spawn(["nginx", "-c", nginx_cfg(tmp, base, base + 1)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        wait_port(base)
        # Every worker has its database connection before the load begins.
        for k in range(12):
            http_get(base, "/lookup/%d" % k)

        def send(first, k):
            if first:
                http_get(base, "/lookup/%d" % k)
            elif k % 3:
                http_get(base, "/report/%d" % k)
            else:
                http_get(base, "/order/%d" % k)

        truth["cpu_demand_s"] = {"api": {"lookup": 0.001, "report": 0.005, "order": 0.0005}}
        fault_tiers = {"index": ["database"], "lock": ["database"], "slow": ["api"]}.get(a.fault, [])
    elif a.system == shop.NAME:
        send = shop.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = shop.CPU_DEMAND_S
        fault_tiers = shop.FAULT_TIERS.get(a.fault, [])
    elif a.system == blog.NAME:
        send = blog.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = blog.CPU_DEMAND_S
        fault_tiers = blog.FAULT_TIERS.get(a.fault, [])
    elif a.system == wiki.NAME:
        send = wiki.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = wiki.CPU_DEMAND_S
        fault_tiers = wiki.FAULT_TIERS.get(a.fault, [])
    elif a.system == cms.NAME:
        send = cms.start(tmp, base, procs, spawn, wait_port, http_get, moved, pg_start)
        truth["cpu_demand_s"] = cms.CPU_DEMAND_S
        fault_tiers = cms.FAULT_TIERS.get(a.fault, [])
    elif a.system == catalog.NAME:
        send = catalog.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = catalog.CPU_DEMAND_S
        fault_tiers = catalog.FAULT_TIERS.get(a.fault, [])
    elif a.system == forum.NAME:
        send = forum.start(tmp, base, procs, spawn, wait_port, http_get, moved, pg_start)
        truth["cpu_demand_s"] = forum.CPU_DEMAND_S
        fault_tiers = forum.FAULT_TIERS.get(a.fault, [])
    elif a.system == jobq.NAME:
        send = jobq.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = jobq.CPU_DEMAND_S
        fault_tiers = jobq.FAULT_TIERS.get(a.fault, [])
    elif a.system == fanout.NAME:
        send = fanout.start(tmp, base, procs, spawn, wait_port, http_get, moved)
        truth["cpu_demand_s"] = fanout.CPU_DEMAND_S
        fault_tiers = fanout.FAULT_TIERS.get(a.fault, [])
    else:
        raise SystemExit("unknown system %s" % a.system)

    stop = threading.Event()
    errors = []
    if a.start_at:
        # The load starts at a given instant (a fault injected by time, `--inject ...,at=`,
        # was computed from it); a set-up that took longer fails the run.
        late = time.time() - a.start_at
        if late > 0:
            raise SystemExit("set-up ended %.1f s after --start-at" % late)
        time.sleep(a.start_at - time.time())
    t_start = a.start_at or time.time()
    lt = threading.Thread(target=load, args=(a.seconds, plan, send, stop, errors))
    lt.start()
    if a.fault != "none":
        time.sleep(max(0.0, t_start + a.fault_at - time.time()))
        t_fault = time.time_ns()
        if a.fault in ("dbread", "cacheread"):
            # Injected by `culprit record --inject` from this instant (run.py: at=).
            t_fault = int(round((t_start + a.fault_at) * 1e3)) * 1_000_000
        if a.system == shop.NAME:
            shop.fault(a.fault, tmp, base, extra, spawn, moved)
        elif a.system == blog.NAME:
            blog.fault(a.fault, tmp, base, extra, spawn, moved)
        elif a.system == wiki.NAME:
            wiki.fault(a.fault, tmp, base, extra, spawn, moved, procs)
        elif a.system == cms.NAME:
            cms.fault(a.fault, tmp, base, extra, spawn, moved, pg_sql)
        elif a.system == catalog.NAME:
            catalog.fault(a.fault, tmp, base, extra, spawn, moved)
        elif a.system == forum.NAME:
            forum.fault(a.fault, tmp, base, extra, spawn, moved, pg_sql)
        elif a.system == jobq.NAME:
            jobq.fault(a.fault, tmp, base, extra, spawn, moved)
        elif a.system == fanout.NAME:
            fanout.fault(a.fault, tmp, base, extra, spawn, procs)
        elif a.fault == "index" and a.system == "api-pool-pg":
            pg_sql(base + 2, "DROP INDEX orders_customer")
        elif a.fault == "index":
            procs["database"][0].send_signal(signal.SIGUSR1)
        elif a.fault == "hog":
            # CPU taken from app1: it is put on CPU 0 at nice 19 with three busy loops
            # (shop.take_cpu). Not pinned before the fault: a process pinned to one CPU from
            # the start is starved alone whenever other jobs on the machine land on that CPU.
            shop.hog(procs["app1"][0].pid, extra, spawn)
        elif a.fault == "heavy":
            procs["app1"][0].send_signal(signal.SIGUSR1)
        elif a.fault == "lock" and a.system == "api-pool-pg":
            extra.append(spawn(py + ["pglocker", "--port", str(base + 2)]))
        elif a.fault == "lock":
            extra.append(spawn(py + ["locker", "--file", os.path.join(tmp, "results.db")]))
        elif a.fault == "slow" and a.system == "job-queue":
            procs["worker0"][0].send_signal(signal.SIGUSR1)
        elif a.fault == "slow":
            open(os.path.join(tmp, "slow"), "w").close()
        truth["fault"] = {"kind": a.fault, "tiers": fault_tiers, "t_unix_ns": t_fault}
    lt.join()
    stop.set()
    truth["errors"] = len(errors)
    if a.system == blog.NAME:
        blog.stats(tmp)
    elif a.system == cms.NAME:
        cms.stats(tmp)
    elif a.system == catalog.NAME:
        catalog.stats(tmp)
    elif a.system == forum.NAME:
        forum.stats(tmp)
    elif a.system == jobq.NAME:
        jobq.stats(tmp)
    elif a.system == fanout.NAME:
        fanout.stats(tmp)
    # Every process of each tier (a pre-forked pool's children too).
    tiers = {}
    for name, ps in procs.items():
        pids = []
        todo = [p.pid for p in ps]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    todo += [int(x) for x in f.read().split()]
            except OSError:
                pass
        tiers[name] = pids
    for name, pids in moved.items():
        for t in tiers.values():
            t[:] = [p for p in t if p not in pids]
        tiers[name] = list(pids)
    truth["tiers"] = tiers
    truth["t_start_unix_ns"] = int(t_start * 1e9)
    with open(a.truth, "w") as f:
        json.dump(truth, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("system")
    r.add_argument("--seconds", type=float, default=600)
    r.add_argument("--fault", default="none")
    r.add_argument("--fault-at", type=float, default=0)
    r.add_argument("--truth", required=True)
    r.add_argument("--workdir", required=True)
    r.add_argument("--port-base", type=int, default=26000)
    r.add_argument("--start-at", type=float, default=0,
                   help="start the load at this UNIX time (after the set-up)")
    d = sub.add_parser("db")
    d.add_argument("--port", type=int)
    d.add_argument("--file")
    w = sub.add_parser("web")
    w.add_argument("--port", type=int)
    w.add_argument("--workers", type=int)
    w.add_argument("--mc", type=int)
    w.add_argument("--db", type=int)
    p = sub.add_parser("app")
    p.add_argument("--port", type=int)
    p.add_argument("--stats")
    k = sub.add_parser("worker")
    k.add_argument("--port", type=int)
    k.add_argument("--file")
    b = sub.add_parser("broker")
    b.add_argument("--port", type=int)
    b.add_argument("--workers")
    lk = sub.add_parser("locker")
    lk.add_argument("--file")
    pl = sub.add_parser("pglocker")
    pl.add_argument("--port", type=int)
    pl.add_argument("--table", default="orders")
    h = sub.add_parser("hog")
    h.add_argument("--cpu", type=int)
    a = ap.parse_args()
    if a.cmd == "run":
        run(a)
    elif a.cmd == "db":
        db_server(a.port, a.file)
    elif a.cmd == "web":
        web_app(a.port, a.workers, a.mc, a.db)
    elif a.cmd == "app":
        burn_app(a.port, a.stats)
    elif a.cmd == "worker":
        job_worker(a.port, a.file)
    elif a.cmd == "broker":
        broker(a.port, [int(x) for x in a.workers.split(",")])
    elif a.cmd == "locker":
        locker(a.file, 0.03, 0.01)
    elif a.cmd == "pglocker":
        pg_locker(a.port, 0.02, 0.06, a.table)
    elif a.cmd == "hog":
        hog(a.cpu)


if __name__ == "__main__":
    main()
