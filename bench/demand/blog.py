"""The blog-lighttpd-php system of the demand suite (added 2026-11-28 to the validation half;
run once on the method frozen at 97155c8, then moved to the tuning half):
lighttpd (Debian, mod_fastcgi) -> php-cgi (Debian `php-cgi` + `php-mysql`: a FastCGI parent
and 3 children on one socket, `blog.php`, burning a known CPU time per request type) ->
memcached (Debian; a cache of articles) and MariaDB (Debian `mariadb-server`, a fresh data
directory, one server thread per connection; each child keeps one connection to each).

Unlike the suite's other systems its load changes phase every 30 s (intensity and mix), and
its application tier is PHP (no Python functions to see), with two downstream services.

`systems.py run blog-lighttpd-php` calls `start` to bring the tiers up and get the load's
request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the articles' topic index dropped (every feed scans the table and sorts);
- `lock`: lock contention on the articles table (a session holding `LOCK TABLES articles
  WRITE` 20 ms of every 80: article misses and feeds wait for it);
- `cacheread`: memcached's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=memcached'` (run.py
  computes T; the load starts at `--start-at`) — nothing to do here;
- `hog`: CPU taken from one php-cgi child (at the fault, it and three busy loops are put on
  CPU 0, the child at nice 19: `shop.take_cpu`; that child is the tier `php-hogged` in every
  run).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import shop

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "blog-lighttpd-php"
FAULTS = ["index", "lock", "cacheread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "cacheread": ["cache"], "hog": ["php-hogged"]}
CPU_DEMAND_S = {"php": {"article": 0.001, "feed": 0.003, "comment": 0.0005}}
CHILDREN = 3
# The rule run.py passes to `culprit record --inject` for the `cacheread` fault.
CACHEREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=memcached"
# A phase every 30 s (the suite's other systems: 6 phases a run).
PHASE_S = 30.0
SCHEMA = (
    "CREATE DATABASE blog",
    "USE blog",
    "CREATE TABLE blog.articles (id INT AUTO_INCREMENT PRIMARY KEY, slug VARCHAR(16), topic INT,"
    " title VARCHAR(64), body VARCHAR(400)) ENGINE=InnoDB",
    "INSERT INTO blog.articles(slug, topic, title, body) SELECT CONCAT('a', LPAD(seq, 6, '0')),"
    " seq % 200, CONCAT('title ', seq), REPEAT('y', 100 + seq % 300) FROM seq_1_to_60000",
    "CREATE INDEX articles_slug ON blog.articles(slug)",
    "CREATE INDEX articles_topic ON blog.articles(topic)",
    "CREATE TABLE blog.comments (id INT AUTO_INCREMENT PRIMARY KEY, article INT, body VARCHAR(64))"
    " ENGINE=InnoDB",
    "ANALYZE TABLE blog.articles",
)


def lighttpd_cfg(tmp, port, upstream):
    """Every request rewritten to blog.php?r=PATH, which goes to the FastCGI server."""
    path = os.path.join(tmp, "lighttpd.conf")
    with open(path, "w") as f:
        f.write(
            'server.modules = ("mod_rewrite", "mod_fastcgi")\n'
            'server.document-root = "%s"\nserver.bind = "127.0.0.1"\nserver.port = %d\n'
            'server.errorlog = "%s/lighttpd.err"\nserver.max-worker = 0\n'
            'url.rewrite-once = ("^/(.*)$" => "/blog.php?r=$1")\n'
            'fastcgi.server = (".php" => (("host" => "127.0.0.1", "port" => %d, "check-local" => "disable")))\n'
            % (tmp, port, tmp, upstream)
        )
    return path


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (lighttpd on `base`, php-cgi on base+1, memcached on base+2, MariaDB
    on base+3) into `procs`; returns the load's `send(first, k)`. The child the `hog` fault is
    made on is put in `moved`."""
    shop.maria_start(tmp, base + 3, spawn, procs, SCHEMA)
    mc = ["memcached", "-l", "127.0.0.1", "-p", str(base + 2), "-U", "0", "-t", "2", "-m", "64"]
    if os.getuid() == 0:
        mc += ["-u", "root"]
    procs["cache"] = [spawn(mc)]
    wait_port(base + 2)
    shutil.copy(os.path.join(HERE, "blog.php"), os.path.join(tmp, "blog.php"))
    with open(os.path.join(tmp, "conf.php"), "w") as f:
        f.write("<?php\nconst DB_PORT = %d;\nconst MC_PORT = %d;\nconst STATS = %s;\n"
                % (base + 3, base + 2, json.dumps(tmp)))
    env = dict(os.environ, PHP_FCGI_CHILDREN=str(CHILDREN), PHP_FCGI_MAX_REQUESTS="0")
    procs["php"] = [spawn(["php-cgi", "-b", "127.0.0.1:%d" % (base + 1)], env=env, stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(tmp, "php.log"), "w"))]
    wait_port(base + 1, 60)
    procs["lighttpd"] = [spawn(["lighttpd", "-D", "-f", lighttpd_cfg(tmp, base, base + 1)],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "lighttpd.log"), "w"))]
    wait_port(base)
    end = time.time() + 60
    while len(shop.children(procs["php"][0].pid)) < CHILDREN:
        if time.time() > end:
            raise RuntimeError("php-cgi did not start %d children" % CHILDREN)
        time.sleep(0.2)
    # Every child answers (and has its connections) before the load begins.
    for k in range(6 * CHILDREN):
        http_get(base, "/article/%d" % k)
        http_get(base, "/comment/%d" % k)
    moved["php-hogged"] = [shop.children(procs["php"][0].pid)[0]]

    # The first type's keys spread over its whole key space.
    return shop.sender(http_get, base, "/article/%d", "/feed/%d", "/comment/%d", lambda k: k * 7919)


def fault(kind, tmp, base, extra, spawn, moved):
    """Makes fault `kind` now."""
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        shop.sql(base + 3, "DROP INDEX articles_topic ON blog.articles")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 3), "blog", "articles"]))
    elif kind == "hog":
        shop.hog(moved["php-hogged"][0], extra, spawn)
    elif kind != "cacheread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp, tier="php", kinds=CPU_DEMAND_S["php"]):
    """The children's own CPU per request before the fault (TIER-PID.tsv, one line a request)
    as sums and counts per type in TIER-PID.json (what run.py pools); also cms-varnish-perl's."""
    for fn in os.listdir(tmp):
        if fn.startswith(tier + "-") and fn.endswith(".tsv"):
            sums = {k: [0.0, 0] for k in kinds}
            with open(os.path.join(tmp, fn)) as f:
                for line in f:
                    kind, s = line.split()
                    sums[kind][0] += float(s)
                    sums[kind][1] += 1
            with open(os.path.join(tmp, fn[:-4] + ".json"), "w") as f:
                json.dump(sums, f)


def type_of(name):
    """The request type (of CPU_DEMAND_S) a php-cgi service found by `culprit demand` is,
    from its name's downstream calls ("port:B+1: → 2× peer:B+2 (…); → 2× peer:B+3 (…); …"):
    no memcached call, a feed; one memcached call and no MariaDB call, an article from the
    cache; two memcached calls (get, set) and MariaDB's, an article read from the database;
    one memcached call (delete) and MariaDB's, a comment. None otherwise."""
    m = re.match(r"port:(\d+)", name)
    if not m:
        return None
    base = int(m.group(1)) - 1

    def calls(port):
        c = re.search(r"(\d+)× peer:%d\b" % port, name)
        return int(c.group(1)) if c else 0

    cache, db = calls(base + 2), calls(base + 3)
    return {(0, True): "feed", (1, False): "article", (2, True): "article", (1, True): "comment"}.get((cache, db > 0))
