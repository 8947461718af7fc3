"""The shop-uwsgi-mariadb system of the demand suite (added 2026-11-28, validation):
nginx (Debian) -> uWSGI (Debian `uwsgi-core` + `uwsgi-plugin-python3`: a master and 3
worker processes on one uwsgi socket, `shopapp.py`, burning a known CPU time per request
type) -> MariaDB (Debian `mariadb-server`, a fresh data directory, one server thread per
connection; each worker keeps one connection).

`systems.py run shop-uwsgi-mariadb` calls `start` to bring the tiers up and get the load's
request function, and `fault` at the fault's time. Faults:

- `index`: the products' SKU index dropped (every product lookup scans the table);
- `lock`: lock contention on the products table (a session holding `LOCK TABLES products
  WRITE` 20 ms of every 80: product lookups and searches wait for it);
- `dbread`: MariaDB's socket reads delayed 3 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=3ms,at=T,exe=mariadbd'` (run.py
  computes T; the load starts at `--start-at`, so T is 3/4 into it) — nothing to do here;
- `hog`: CPU taken from one uWSGI worker (at the fault, it and three busy loops are pinned
  to CPU 0, the worker at nice 19: `take_cpu`; that worker is the tier `api-hogged` in
  every run). Until 2026-11-28 the worker
  was pinned from the start of every run: a process pinned to one CPU is starved alone
  whenever other jobs on the machine land on that CPU, which fault-free runs then showed.
"""

import os
import shutil
import subprocess
import sys
import time

import nginx

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "shop-uwsgi-mariadb"
FAULTS = ["index", "lock", "dbread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "dbread": ["database"], "hog": ["api-hogged"]}
CPU_DEMAND_S = {"api": {"product": 0.001, "search": 0.004, "cart": 0.0005}}
WORKERS = 3
# The rule run.py passes to `culprit record --inject` for the `dbread` fault.
DBREAD_RULE = "recv|read|recvfrom|recvmsg:delay=3ms,at={at},exe=mariadbd"
# The shop's tables.
SCHEMA = (
    "CREATE DATABASE shop",
    "USE shop",
    "CREATE TABLE shop.products (id INT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(16), category INT,"
    " price INT, descr VARCHAR(64)) ENGINE=InnoDB",
    "INSERT INTO shop.products(sku, category, price, descr) SELECT CONCAT('s', LPAD(seq, 7, '0')),"
    " seq % 100, seq % 1000, REPEAT('x', 40) FROM seq_1_to_100000",
    "CREATE INDEX products_sku ON shop.products(sku)",
    "CREATE INDEX products_category ON shop.products(category)",
    "CREATE TABLE shop.carts (id INT AUTO_INCREMENT PRIMARY KEY, product INT, qty INT) ENGINE=InnoDB",
    "ANALYZE TABLE shop.products",
)


def sql(port, *stmts):
    import pymysql
    c = pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=True)
    with c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
    c.close()


def maria_start(tmp, port, spawn, procs, schema=SCHEMA):
    """A fresh MariaDB in tmp/maria on `port` with the tables `schema` makes (the shop's by
    default), its Popen in procs["database"] (at once: stopped with the others if the set-up
    fails)."""
    data = os.path.join(tmp, "maria")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    user = ["--user=root"] if os.getuid() == 0 else []
    # Several installs at once on a loaded machine have failed (once in five); the output
    # goes to tmp/maria-install.log and a failed install is retried on a fresh directory.
    for attempt in range(3):
        with open(os.path.join(tmp, "maria-install.log"), "a") as log:
            r = subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + data, "--skip-test-db",
                                "--auth-root-authentication-method=normal", *user],
                               stdout=log, stderr=subprocess.STDOUT)
        if r.returncode == 0:
            break
        if attempt == 2:
            raise RuntimeError("mariadb-install-db failed 3 times: see %s" % os.path.join(tmp, "maria-install.log"))
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        time.sleep(2)
    p = spawn(["mariadbd", "--no-defaults", "--datadir=" + data, "--socket=" + os.path.join(data, "sock"),
               "--port=%d" % port, "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-log-bin",
               "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2",
               "--performance-schema=OFF", "--thread-handling=one-thread-per-connection",
               "--pid-file=" + os.path.join(data, "pid"), "--log-error=" + os.path.join(tmp, "maria.err"), *user],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs["database"] = [p]
    end = time.time() + 120
    while True:
        try:
            sql(port, "SELECT 1")
            break
        except Exception:
            if time.time() > end or p.poll() is not None:
                raise RuntimeError("MariaDB did not start: see %s" % os.path.join(tmp, "maria.err"))
            time.sleep(0.3)
    sql(port, *schema)


def nginx_cfg(tmp, port, upstream):
    return nginx.config(tmp, port, "include /etc/nginx/uwsgi_params; uwsgi_pass 127.0.0.1:%d;" % upstream)


def take_cpu(pid, cpu):
    """The `hog` fault on process `pid`: every thread of it on CPU `cpu` (threads it starts
    later inherit it) at the lowest priority (nice 19, as a cgroup's lowest CPU weight), so
    that the busy loops put there take the CPU from it and not from the rest of the machine.
    Pinned beside equal loops only, on a machine loaded by other jobs (load 10-15), the
    process waited less per CPU second than its unpinned peers (2026-11-28): the loops took
    the CPU from the whole machine."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            os.sched_setaffinity(int(tid), {cpu})
            os.setpriority(os.PRIO_PROCESS, int(tid), 19)
        except OSError:
            pass  # the thread ended


def hog(pid, extra, spawn):
    """The `hog` fault on process `pid`, as every system of the suite makes it: `pid` on CPU 0
    at nice 19 (take_cpu) beside three busy loops (`systems.py hog`), spawned into `extra`."""
    take_cpu(pid, 0)
    for _ in range(3):
        extra.append(spawn([sys.executable, os.path.join(HERE, "systems.py"), "hog", "--cpu", "0"]))


def sender(http_get, base, first, second, third, first_key=lambda k: k):
    """The load's `send(first, k)` for a system with three request types on paths
    `first % first_key(k)`, `second % k` and `third % k`: the phase's first type when the
    load draws it (`first`), else two of three requests `second`, one `third`."""

    def send(is_first, k):
        if is_first:
            http_get(base, first % first_key(k))
        elif k % 3:
            http_get(base, second % k)
        else:
            http_get(base, third % k)

    return send


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return sorted(int(x) for x in f.read().split())
    except OSError:
        return []


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (nginx on `base`, uWSGI on base+1, MariaDB on base+2) into `procs`;
    returns the load's `send(first, k)`. The worker the `hog` fault is made on is put in `moved`
    (tier name -> pids taken out of the tier they descend from)."""
    maria_start(tmp, base + 2, spawn, procs)
    env = dict(os.environ, SHOP_DB_PORT=str(base + 2), SHOP_STATS=tmp)
    procs["api"] = [spawn(["uwsgi", "--plugin", "python3", "--master", "--processes", str(WORKERS),
                           "--socket", "127.0.0.1:%d" % (base + 1), "--chdir", HERE,
                           "--wsgi-file", os.path.join(HERE, "shopapp.py"), "--callable", "app",
                           "--disable-logging", "--die-on-term", "--need-app", "--lazy-apps"],
                          env=env, stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(tmp, "uwsgi.log"), "w"))]
    wait_port(base + 1, 60)
    procs["nginx"] = [spawn(["nginx", "-c", nginx_cfg(tmp, base, base + 1)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    wait_port(base)
    # Every worker answers (and has its database connection) before the load begins.
    end = time.time() + 60
    while len(children(procs["api"][0].pid)) < WORKERS:
        if time.time() > end:
            raise RuntimeError("uWSGI did not start %d workers" % WORKERS)
        time.sleep(0.2)
    for k in range(4 * WORKERS):
        http_get(base, "/product/%d" % k)
    hogged = children(procs["api"][0].pid)[0]
    moved["api-hogged"] = [hogged]

    return sender(http_get, base, "/product/%d", "/search/%d", "/cart/%d")


def fault(kind, tmp, base, extra, spawn, moved):
    """Makes fault `kind` now."""
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        sql(base + 2, "DROP INDEX products_sku ON shop.products")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 2)]))
    elif kind == "hog":
        hog(moved["api-hogged"][0], extra, spawn)
    elif kind != "dbread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def locker(port, database="shop", table="products", hold_s=0.02, gap_s=0.06):
    """Lock contention: holds a write lock on `table` (the shop's products by default)
    `hold_s` of every `hold_s+gap_s`."""
    import pymysql
    c = pymysql.connect(host="127.0.0.1", port=port, user="root", database=database, autocommit=True)
    cur = c.cursor()
    while True:
        cur.execute("LOCK TABLES %s WRITE" % table)
        time.sleep(hold_s)
        cur.execute("UNLOCK TABLES")
        time.sleep(gap_s)


if __name__ == "__main__":
    if len(sys.argv) in (3, 5) and sys.argv[1] == "locker":
        locker(int(sys.argv[2]), *sys.argv[3:])
    else:
        raise SystemExit("usage: shop.py locker PORT [DATABASE TABLE]")
