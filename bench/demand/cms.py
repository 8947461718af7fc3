"""The cms-varnish-perl system of the demand suite (added 2026-11-28 to the validation half,
branch demand-val4, before any method was run on it):
Varnish (Debian `varnish`: a manager process and a cache child of worker threads; every
request passed to the backend, nothing cached, a new backend connection per request) ->
Starman (Debian `starman`: a preforking Perl PSGI server, a master and 3 worker processes
accepting on one socket, `cms.psgi`, burning a known CPU time per request type) ->
memcached (Debian; a cache of documents) and PostgreSQL (Debian; one backend process per
connection; each worker keeps one connection to each, PostgreSQL through DBD::Pg).

Unlike the suite's other systems its front server is a caching proxy (told to pass every
request), its application tier is Perl, and its database PostgreSQL with a cache before it.
PostgreSQL runs as postgres, so run.py records this system with `--shared-writers`. The
load changes phase every 30 s (intensity and mix), as blog-lighttpd-php's.

`systems.py run cms-varnish-perl` calls `start` to bring the tiers up and get the load's
request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the documents' category index dropped (every search scans the table and sorts);
- `lock`: lock contention on the documents table (a session holding `LOCK TABLE docs IN
  ACCESS EXCLUSIVE MODE` 20 ms of every 80: document misses, searches and votes wait);
- `cacheread`: memcached's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=memcached'` (run.py
  computes T; the load starts at `--start-at`);
- `hog`: CPU taken from one Starman worker (at the fault, it and three busy loops are put on
  CPU 0, the worker at nice 19: `shop.take_cpu`; that worker is the tier `app-hogged` in
  every run).
"""

import os
import subprocess
import sys
import time

import blog
import shop

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "cms-varnish-perl"
FAULTS = ["index", "lock", "cacheread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "cacheread": ["cache"], "hog": ["app-hogged"]}
CPU_DEMAND_S = {"app": {"doc": 0.0012, "search": 0.0035, "vote": 0.0006}}
WORKERS = 3
# The rule run.py passes to `culprit record --inject` for the `cacheread` fault.
CACHEREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=memcached"
# A phase every 30 s (as blog-lighttpd-php).
PHASE_S = 30.0
SCHEMA = (
    "CREATE TABLE docs (id serial PRIMARY KEY, slug text, cat int, title text, body text,"
    " votes int NOT NULL DEFAULT 0)",
    "INSERT INTO docs(slug, cat, title, body) SELECT 'd' || lpad(g::text, 6, '0'), g % 150,"
    " 'title ' || md5(g::text), repeat('z', 100 + g % 300) FROM generate_series(1, 60000) g",
    "CREATE INDEX docs_slug ON docs(slug)",
    "CREATE INDEX docs_cat ON docs(cat)",
    "ANALYZE docs",
)


def varnish_vcl(tmp, upstream):
    """Every request passed to the application (nothing cached), a new backend connection
    each (`Connection: close` to the backend)."""
    path = os.path.join(tmp, "cms.vcl")
    with open(path, "w") as f:
        f.write(
            "vcl 4.1;\n"
            'backend app { .host = "127.0.0.1"; .port = "%d"; }\n'
            "sub vcl_recv { return (pass); }\n"
            'sub vcl_backend_fetch { set bereq.http.Connection = "close"; }\n' % upstream
        )
    return path


def start(tmp, base, procs, spawn, wait_port, http_get, moved, pg_start):
    """Starts the tiers (Varnish on `base`, Starman on base+1, memcached on base+2,
    PostgreSQL on base+3) into `procs`; returns the load's `send(first, k)`. The worker the
    `hog` fault is made on is put in `moved`."""
    procs["database"] = [pg_start(tmp, base + 3, SCHEMA)]
    mc = ["memcached", "-l", "127.0.0.1", "-p", str(base + 2), "-U", "0", "-t", "2", "-m", "64"]
    if os.getuid() == 0:
        mc += ["-u", "root"]
    procs["cache"] = [spawn(mc)]
    wait_port(base + 2)
    env = dict(os.environ, CMS_MC_PORT=str(base + 2), CMS_PG_PORT=str(base + 3), CMS_STATS=tmp)
    procs["app"] = [spawn(["starman", "--listen", "127.0.0.1:%d" % (base + 1), "--workers", str(WORKERS),
                           "--max-requests", "100000000", "--disable-keepalive", os.path.join(HERE, "cms.psgi")],
                          env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(tmp, "starman.log"), "w"))]
    wait_port(base + 1, 60)
    end = time.time() + 60
    while len(shop.children(procs["app"][0].pid)) < WORKERS:
        if time.time() > end or procs["app"][0].poll() is not None:
            raise RuntimeError("Starman did not start %d workers: see %s" % (WORKERS, os.path.join(tmp, "starman.log")))
        time.sleep(0.2)
    # -j none: no jail, the cache child runs as this user (the pool stays writable for it).
    procs["varnish"] = [spawn(["varnishd", "-F", "-j", "none", "-n", os.path.join(tmp, "varnish"),
                               "-a", "127.0.0.1:%d" % base, "-T", "none", "-f", varnish_vcl(tmp, base + 1),
                               "-s", "malloc,16m", "-p", "thread_pools=1", "-p", "thread_pool_min=10",
                               "-p", "thread_pool_max=64"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "varnish.log"), "w"))]
    wait_port(base, 60)
    # Every worker answers (and has its connections) before the load begins.
    for k in range(6 * WORKERS):
        http_get(base, "/doc/%d" % k)
        http_get(base, "/vote/%d" % k)
        http_get(base, "/search/%d" % k)
    moved["app-hogged"] = [shop.children(procs["app"][0].pid)[0]]

    # The first type's keys spread over its whole key space.
    return shop.sender(http_get, base, "/doc/%d", "/search/%d", "/vote/%d", lambda k: k * 7919)


def fault(kind, tmp, base, extra, spawn, moved, pg_sql):
    """Makes fault `kind` now (the workers keep their CPU after it apart: cms.psgi)."""
    open(os.path.join(tmp, "fault"), "w").close()
    py = sys.executable
    if kind == "index":
        pg_sql(base + 3, "DROP INDEX docs_cat")
    elif kind == "lock":
        extra.append(spawn([py, os.path.join(HERE, "systems.py"), "pglocker", "--port", str(base + 3),
                            "--table", "docs"]))
    elif kind == "hog":
        shop.hog(moved["app-hogged"][0], extra, spawn)
    elif kind != "cacheread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp):
    """The workers' own CPU per request before the fault (app-PID.tsv) as sums and counts
    per type in app-PID.json (what run.py pools)."""
    blog.stats(tmp, "app", CPU_DEMAND_S["app"])


def type_of(name):
    """The request type (of CPU_DEMAND_S) a Starman service found by `culprit demand` is, from
    its name's downstream calls: the ports are laid out as blog-lighttpd-php's (application
    base+1, cache base+2, database base+3) and the calls alike — no cache call, a search; one
    cache call and no database call, a document from the cache; two cache calls and the
    database's, a document read from the database; one cache call (delete) and the
    database's, a vote."""
    return {"feed": "search", "article": "doc", "comment": "vote"}.get(blog.type_of(name))
