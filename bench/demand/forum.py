"""The forum-squid-puma system of the demand suite (added 2026-11-29 to the validation half,
branch demand-val6, before any method was run on it):
Squid (Debian `squid` 5: one process, `-N`, as a reverse proxy — `accel` — passing every
request to its origin server, nothing cached, a new origin connection per request; it runs
as the user `proxy`) -> Puma (Debian `puma` 5.6 on Ruby MRI 3.1, cluster mode: a master and
3 worker processes accepting on one socket, one request thread each, `forum.ru`, burning a
known CPU time per request type) -> Redis (Debian `redis-server`; a cache of topics) and
PostgreSQL (Debian; one backend process per connection; each worker keeps one connection to
each, PostgreSQL through Debian's ruby-pg).

Unlike the suite's other systems its front tier is Squid and its application runtime Ruby.
Squid runs as proxy and PostgreSQL as postgres, so run.py records this system with
`--shared-writers`. The load changes phase every 30 s (intensity and mix), as
blog-lighttpd-php's.

`systems.py run forum-squid-puma` calls `start` to bring the tiers up and get the load's
request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the topics' board index dropped (every board listing scans the table and sorts);
- `lock`: lock contention on the topics table (a session holding `LOCK TABLE topics IN
  ACCESS EXCLUSIVE MODE` 20 ms of every 80: topic misses, board listings and replies wait);
- `cacheread`: Redis's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=redis-*'` (run.py
  computes T; the load starts at `--start-at`);
- `hog`: CPU taken from one Puma worker (at the fault, it and three busy loops are put on
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
NAME = "forum-squid-puma"
FAULTS = ["index", "lock", "cacheread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "cacheread": ["cache"], "hog": ["app-hogged"]}
CPU_DEMAND_S = {"app": {"topic": 0.0013, "board": 0.0038, "reply": 0.0006}}
WORKERS = 3
# The rule run.py passes to `culprit record --inject` for the `cacheread` fault.
CACHEREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=redis-*"
# A phase every 30 s (as blog-lighttpd-php).
PHASE_S = 30.0
SCHEMA = (
    "CREATE TABLE topics (id serial PRIMARY KEY, slug text, board int, title text, body text,"
    " replies int NOT NULL DEFAULT 0)",
    "INSERT INTO topics(slug, board, title, body) SELECT 't' || lpad(g::text, 6, '0'), g % 150,"
    " 'topic ' || md5(g::text), repeat('f', 120 + g % 280) FROM generate_series(1, 60000) g",
    "CREATE INDEX topics_slug ON topics(slug)",
    "CREATE INDEX topics_board ON topics(board)",
    "ANALYZE topics",
)


def squid_conf(tmp, port, upstream):
    """Squid as a reverse proxy on `port` passing every request to the Puma cluster on
    `upstream` (nothing cached, a new origin connection per request); its files in
    tmp/squid, writable by the user it runs as (proxy)."""
    d = os.path.join(tmp, "squid")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o777)
    path = os.path.join(d, "squid.conf")
    with open(path, "w") as f:
        f.write(
            "http_port 127.0.0.1:%d accel defaultsite=forum no-vhost\n"
            "cache_peer 127.0.0.1 parent %d 0 no-query no-digest originserver name=app\n"
            "cache_peer_access app allow all\nnever_direct allow all\n"
            "http_access allow all\ncache deny all\ncache_mem 8 MB\n"
            "server_persistent_connections off\nclient_persistent_connections off\n"
            "pid_filename {0}/squid.pid\ncache_log {0}/cache.log\naccess_log none\n"
            "coredump_dir {0}\ncache_effective_user proxy\npinger_enable off\nicp_port 0\n"
            "htcp_port 0\nnetdb_filename none\nshutdown_lifetime 1 seconds\n"
            "connect_timeout 30 seconds\nread_timeout 30 seconds\n".replace("{0}", d) % (port, upstream)
        )
    return path


def puma_conf(tmp, port):
    """Cluster mode: WORKERS workers of one request thread each, reading their requests
    themselves (`queue_requests false`), on one socket."""
    path = os.path.join(tmp, "puma.rb")
    with open(path, "w") as f:
        f.write(
            "workers %d\nthreads 1, 1\nqueue_requests false\nbind 'tcp://127.0.0.1:%d'\n"
            "environment 'production'\nworker_timeout 120\nworker_boot_timeout 120\n"
            "pidfile '%s/puma.pid'\n" % (WORKERS, port, tmp)
        )
    return path


def start(tmp, base, procs, spawn, wait_port, http_get, moved, pg_start):
    """Starts the tiers (Squid on `base`, Puma on base+1, Redis on base+2, PostgreSQL on
    base+3) into `procs`; returns the load's `send(first, k)`. The worker the `hog` fault is
    made on is put in `moved`."""
    procs["database"] = [pg_start(tmp, base + 3, SCHEMA)]
    procs["cache"] = [spawn(["redis-server", "--port", str(base + 2), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                             "--logfile", os.path.join(tmp, "redis.log")], stdout=subprocess.DEVNULL)]
    wait_port(base + 2)
    env = dict(os.environ, FORUM_REDIS_PORT=str(base + 2), FORUM_PG_PORT=str(base + 3), FORUM_STATS=tmp)
    log = os.path.join(tmp, "puma.log")
    procs["app"] = [spawn(["puma", "-C", puma_conf(tmp, base + 1), os.path.join(HERE, "forum.ru")],
                          env=env, cwd=tmp, stdout=open(log, "w"), stderr=subprocess.STDOUT)]
    wait_port(base + 1, 60)
    end = time.time() + 60
    while len(shop.children(procs["app"][0].pid)) < WORKERS:
        if time.time() > end or procs["app"][0].poll() is not None:
            raise RuntimeError("Puma did not start %d workers: see %s" % (WORKERS, log))
        time.sleep(0.2)
    procs["squid"] = [spawn(["squid", "-N", "-f", squid_conf(tmp, base, base + 1)], cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "squid.log"), "w"))]
    wait_port(base, 60)
    # Every worker answers (and has its connections) before the load begins.
    for k in range(6 * WORKERS):
        for path in ("/topic/%d", "/reply/%d", "/board/%d"):
            status = http_get(base, path % k)
            if status != 200:
                raise RuntimeError("forum-squid-puma: GET %s answered %d: see %s and %s/squid/cache.log"
                                   % (path % k, status, log, tmp))
    moved["app-hogged"] = [shop.children(procs["app"][0].pid)[0]]

    # The first type's keys spread over its whole key space.
    return shop.sender(http_get, base, "/topic/%d", "/board/%d", "/reply/%d", lambda k: k * 7919)


def fault(kind, tmp, base, extra, spawn, moved, pg_sql):
    """Makes fault `kind` now (the workers keep their CPU after it apart: forum.ru)."""
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        pg_sql(base + 3, "DROP INDEX topics_board")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "systems.py"), "pglocker", "--port", str(base + 3),
                            "--table", "topics"]))
    elif kind == "hog":
        shop.hog(moved["app-hogged"][0], extra, spawn)
    elif kind != "cacheread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp):
    """The workers' own CPU per request before the fault (app-PID.tsv) as sums and counts
    per type in app-PID.json (what run.py pools)."""
    blog.stats(tmp, "app", CPU_DEMAND_S["app"])


def type_of(name):
    """The request type (of CPU_DEMAND_S) a Puma service found by `culprit demand` is, from
    its name's downstream calls: the ports are laid out as blog-lighttpd-php's (application
    base+1, cache base+2, database base+3) and the calls alike — no cache call, a board
    listing; one cache call and no database call, a topic from the cache; two cache calls and
    the database's, a topic read from the database; one cache call (DEL) and the database's,
    a reply."""
    return {"feed": "board", "article": "topic", "comment": "reply"}.get(blog.type_of(name))
