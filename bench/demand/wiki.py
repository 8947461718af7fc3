"""The wiki-apache-node system of the demand suite (added 2026-11-28 to the validation half,
branch demand-val3, before any method was run on it):
Apache httpd (Debian `apache2`: mpm_event, one child process of 32 threads, mod_proxy_http,
a new backend connection per request) -> a Node.js cluster (Debian `nodejs`: a primary and 3
workers accepting on one socket, `wiki.js`, burning a known CPU time per request type) ->
Redis (Debian `redis-server`; a cache of pages) and MariaDB (Debian `mariadb-server`, a fresh
data directory, one server thread per connection; each worker keeps one connection to each,
MariaDB through the npm `mysql2` driver).

Unlike the suite's other application tiers, a Node.js worker serves many requests at once
(one thread, an event loop): a request's downstream calls are awaited while others run.
Apache's child runs as www-data, so run.py records this system with `--shared-writers`.
The load changes phase every 30 s (intensity and mix), as blog-lighttpd-php's.

`systems.py run wiki-apache-node` calls `start` to bring the tiers up and get the load's
request function and `fault` at the fault's time. Faults:

- `index`: the pages' tag index dropped (every tag listing scans the table and sorts);
- `lock`: lock contention on the pages table (a session holding `LOCK TABLES pages WRITE`
  20 ms of every 80: page misses, tag listings and edits wait for it);
- `cacheread`: Redis's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=redis-*'` (run.py
  computes T; the load starts at `--start-at`). Debian's `redis-server` is a symlink to
  `redis-check-rdb` (the executable `exe=` sees), hence `redis-*`;
- `hog`: CPU taken from one Node.js worker (at the fault, it and three busy loops are put on
  CPU 0, the worker at nice 19: `shop.take_cpu`; that worker is the tier `node-hogged` in
  every run).

Every fault signals the workers (SIGUSR2) at its instant: each keeps its own CPU per request
type before and after it apart (wiki.js), written at the end to node-PID.json (what run.py
pools as the tier's measured CPU) and after-node-PID.json.
"""

import os
import re
import signal
import subprocess
import sys
import time

import shop

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "wiki-apache-node"
FAULTS = ["index", "lock", "cacheread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "cacheread": ["cache"], "hog": ["node-hogged"]}
CPU_DEMAND_S = {"node": {"page": 0.0015, "tag": 0.004, "edit": 0.0007}}
WORKERS = 3
# The rule run.py passes to `culprit record --inject` for the `cacheread` fault.
CACHEREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=redis-*"
# A phase every 30 s (as blog-lighttpd-php).
PHASE_S = 30.0
SCHEMA = (
    "CREATE DATABASE wiki",
    "USE wiki",
    "CREATE TABLE wiki.pages (id INT AUTO_INCREMENT PRIMARY KEY, slug VARCHAR(16), tag INT,"
    " title VARCHAR(64), body VARCHAR(500), edits INT NOT NULL DEFAULT 0) ENGINE=InnoDB",
    "INSERT INTO wiki.pages(slug, tag, title, body) SELECT CONCAT('p', LPAD(seq, 6, '0')),"
    " seq % 150, CONCAT('page ', seq), REPEAT('w', 150 + seq % 350) FROM seq_1_to_60000",
    "CREATE INDEX pages_slug ON wiki.pages(slug)",
    "CREATE INDEX pages_tag ON wiki.pages(tag)",
    "ANALYZE TABLE wiki.pages",
)
APACHE_MODULES = "/usr/lib/apache2/modules"


def apache_cfg(tmp, port, upstream):
    """One child process of 32 threads (mpm_event) proxying every request to the Node.js
    cluster over a new connection (disablereuse: the workers' shared socket spreads them)."""
    path = os.path.join(tmp, "apache.conf")
    user = "User www-data\nGroup www-data\n" if os.getuid() == 0 else ""
    with open(path, "w") as f:
        f.write(
            'ServerRoot "/etc/apache2"\nServerName localhost\n'
            + "".join("LoadModule %s_module %s/mod_%s.so\n" % (m, APACHE_MODULES, m)
                      for m in ("mpm_event", "authz_core", "proxy", "proxy_http"))
            + "Listen 127.0.0.1:%d\n" % port
            + 'PidFile "{0}/apache.pid"\nDefaultRuntimeDir "{0}"\nErrorLog "{0}/apache-error.log"\n'.format(tmp)
            + "LogLevel warn\n" + user
            + "StartServers 1\nServerLimit 1\nThreadLimit 32\nThreadsPerChild 32\nMaxRequestWorkers 32\n"
            + "MinSpareThreads 1\nMaxSpareThreads 32\nMaxConnectionsPerChild 0\nKeepAlive Off\n"
            + 'ProxyPass "/" "http://127.0.0.1:%d/" disablereuse=On timeout=30\n' % upstream
        )
    return path


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (Apache on `base`, Node.js on base+1, Redis on base+2, MariaDB on
    base+3) into `procs`; returns the load's `send(first, k)`. The worker the `hog` fault is
    made on is put in `moved`."""
    shop.maria_start(tmp, base + 3, spawn, procs, SCHEMA)
    procs["cache"] = [spawn(["redis-server", "--port", str(base + 2), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                             "--logfile", os.path.join(tmp, "redis.log")], stdout=subprocess.DEVNULL)]
    wait_port(base + 2)
    env = dict(os.environ, WIKI_PORT=str(base + 1), WIKI_REDIS_PORT=str(base + 2), WIKI_DB_PORT=str(base + 3),
               WIKI_STATS=tmp, WIKI_WORKERS=str(WORKERS), NODE_CLUSTER_SCHED_POLICY="none")
    procs["node"] = [spawn(["node", os.path.join(HERE, "wiki.js")], env=env, cwd=HERE, stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(tmp, "node.log"), "w"))]
    end = time.time() + 60
    while not os.path.exists(os.path.join(tmp, "node-ready")):
        if time.time() > end or procs["node"][0].poll() is not None:
            raise RuntimeError("the Node.js cluster did not start %d workers: see %s"
                               % (WORKERS, os.path.join(tmp, "node.log")))
        time.sleep(0.2)
    procs["apache"] = [spawn(["apache2", "-DFOREGROUND", "-f", apache_cfg(tmp, base, base + 1)],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "apache.log"), "w"))]
    wait_port(base, 60)
    for k in range(6 * WORKERS):
        http_get(base, "/page/%d" % k)
        http_get(base, "/edit/%d" % k)
        http_get(base, "/tag/%d" % k)
    moved["node-hogged"] = [shop.children(procs["node"][0].pid)[0]]

    # The first type's keys spread over its whole key space.
    return shop.sender(http_get, base, "/page/%d", "/tag/%d", "/edit/%d", lambda k: k * 7919)


def fault(kind, tmp, base, extra, spawn, moved, procs):
    """Makes fault `kind` now (and tells the workers, which keep their CPU after it apart)."""
    for pid in shop.children(procs["node"][0].pid):
        os.kill(pid, signal.SIGUSR2)
    if kind == "index":
        shop.sql(base + 3, "DROP INDEX pages_tag ON wiki.pages")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 3), "wiki", "pages"]))
    elif kind == "hog":
        shop.hog(moved["node-hogged"][0], extra, spawn)
    elif kind != "cacheread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def type_of(name):
    """The request type (of CPU_DEMAND_S) a Node.js service found by `culprit demand` is, from
    its name's downstream calls ("port:B+1: → 2× peer:B+2 (…); → 1× peer:B+3 (…); …"): no
    Redis call, a tag listing; one Redis call and no MariaDB call, a page from the cache; two
    Redis calls (GET, SET) and MariaDB's, a page read from the database; one Redis call (DEL)
    and MariaDB's, an edit. None otherwise."""
    m = re.match(r"port:(\d+)", name)
    if not m:
        return None
    base = int(m.group(1)) - 1

    def calls(port):
        c = re.search(r"(\d+)× peer:%d\b" % port, name)
        return int(c.group(1)) if c else 0

    cache, db = calls(base + 2), calls(base + 3)
    return {(0, True): "tag", (1, False): "page", (2, True): "page", (1, True): "edit"}.get((cache, db > 0))
