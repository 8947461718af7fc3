"""The grpc-fanout-mariadb system of the demand suite (added 2026-11-29 to the validation half,
branch demand-val8, before any method was run on it):
an HTTP gateway (`fanout_gateway.py`: one aiohttp process, PyPI) that serves three request
types by calling one or both of two gRPC services (PyPI `grpcio`; each its own process, a
thread-pool server; the messages in `fanout.proto`, compiled at set-up with `grpcio-tools`
into the run's directory) and joining their replies:

- type A `/user/K`: `profile` once (`Profile.Get`: 1 query);
- type B `/find/K`: `search` once (`Search.Lookup`: 0.8 ms of CPU);
- type C `/home/K`: both in parallel (`asyncio.gather` over `grpc.aio` stubs: `Profile.Visit`,
  3 queries, and `Search.Rank`, 3 ms of CPU).

`profile` (`fanout_profile.py`, 4 server threads) reads and writes MariaDB (Debian
`mariadb-server`, a fresh data directory, one server thread per connection; a connection per
`profile` server thread, PyMySQL); `search` (`fanout_search.py`, 4 server threads) burns a
known CPU time per call over an in-memory index, measured per call with `time.thread_time()`
and logged. Unlike the suite's other systems the gateway's calls are gRPC: HTTP/2, one
connection from the gateway to each service carrying every call, many at once (multiplexed
streams), and a type-C request is two calls in flight together. The load changes phase every
30 s (intensity and mix), as job-rabbit-workers'.

Ports (from `base`): the gateway on base, `profile` on base+1, `search` on base+2, MariaDB on
base+3.

`systems.py run grpc-fanout-mariadb` calls `start` to bring the tiers up and get the load's
request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the users' handle index dropped (every `profile` lookup, types A and C, scans);
- `lock`: lock contention on the users table (a session holding `LOCK TABLES users WRITE`
  20 ms of every 80);
- `dbread`: MariaDB's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=mariadbd'` (run.py
  computes T; the load starts at `--start-at`) — nothing to do here;
- `hog`: CPU taken from the `search` process (at the fault, on CPU 0 with three busy loops,
  at nice 19: `shop.hog`). `search` is its tier's only process (the pooled tiers of the other
  systems keep serving on their other processes): from the fault on it gets about 1 % of a CPU,
  less than the B and C calls need in most phases, so they wait seconds (type B 7 ms -> 2.2 s
  in the recording of 2026-11-29) and the load, at most 16 requests in flight, skips some
  (10 228 of 10 827 sent; 0 errors).

The load's latencies in load.json are means over everything before and after the fault, so
they mix phases: compare the services' own logs (profile-PID.tsv, search-PID.tsv) instead.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

import shop

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "grpc-fanout-mariadb"
FAULTS = ["index", "lock", "dbread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "dbread": ["database"], "hog": ["search"]}
# The search service's CPU per call, by method (Lookup: type B; Rank: type C).
CPU_DEMAND_S = {"search": {"lookup": 0.0008, "rank": 0.003}}
# The rule run.py passes to `culprit record --inject` for the `dbread` fault.
DBREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=mariadbd"
# A phase every 30 s (as job-rabbit-workers).
PHASE_S = 30.0
TYPES = {"user": "A", "find": "B", "home": "C"}
SCHEMA = (
    "CREATE DATABASE prof",
    "USE prof",
    "CREATE TABLE prof.users (id INT AUTO_INCREMENT PRIMARY KEY, handle VARCHAR(16), name VARCHAR(64),"
    " visits INT NOT NULL DEFAULT 0, bio VARCHAR(400)) ENGINE=InnoDB",
    "INSERT INTO prof.users(handle, name, bio) SELECT CONCAT('u', LPAD(seq, 6, '0')), CONCAT('user ', seq),"
    " REPEAT('b', 100 + seq % 300) FROM seq_1_to_60000",
    "CREATE INDEX users_handle ON prof.users(handle)",
    "CREATE TABLE prof.visits (id INT AUTO_INCREMENT PRIMARY KEY, user INT, at DATETIME(6)) ENGINE=InnoDB",
    "ANALYZE TABLE prof.users",
)


def compile_proto(tmp):
    """fanout.proto compiled with grpcio-tools into tmp/gen (fanout_pb2.py, fanout_pb2_grpc.py)."""
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", HERE, "--python_out=" + gen,
                    "--grpc_python_out=" + gen, os.path.join(HERE, "fanout.proto")], check=True)
    return gen


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (the gateway on `base`, `profile` on base+1, `search` on base+2, MariaDB
    on base+3) into `procs`; returns the load's `send(first, k)`."""
    shop.maria_start(tmp, base + 3, spawn, procs, SCHEMA)
    gen = compile_proto(tmp)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs["profile"] = [spawn([sys.executable, os.path.join(HERE, "fanout_profile.py"), "--port", str(base + 1),
                               "--db", str(base + 3), "--gen", gen, "--stats", tmp], env=env, cwd=tmp,
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "profile.log"), "w"))]
    procs["search"] = [spawn([sys.executable, os.path.join(HERE, "fanout_search.py"), "--port", str(base + 2),
                              "--gen", gen, "--stats", tmp], env=env, cwd=tmp,
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "search.log"), "w"))]
    wait_port(base + 1, 60)
    wait_port(base + 2, 60)
    gw_log = os.path.join(tmp, "gateway.log")
    procs["gateway"] = [spawn([sys.executable, os.path.join(HERE, "fanout_gateway.py"), "--port", str(base),
                               "--profile", str(base + 1), "--search", str(base + 2), "--gen", gen],
                              env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=open(gw_log, "w"))]
    wait_port(base, 60)
    # Every type answered, and every `profile` server thread has its database connection (8
    # requests of each type at once, twice), before the load begins.
    for r in range(2):
        ths, bad = [], []
        for k in range(8):
            for path in ("/user/%d", "/find/%d", "/home/%d"):
                def one(p=path % (100 * r + k)):
                    status = http_get(base, p)
                    if status != 200:
                        bad.append((p, status))
                ths.append(threading.Thread(target=one))
                ths[-1].start()
        for t in ths:
            t.join()
        if bad:
            raise RuntimeError("%s: %s answered %d: see %s and %s/profile.log, search.log"
                               % (NAME, bad[0][0], bad[0][1], gw_log, tmp))
    # The services' measures from here on are the load's.
    open(os.path.join(tmp, "load"), "w").close()
    return shop.sender(counting(http_get), base, "/user/%d", "/find/%d", "/home/%d", lambda k: k * 7919)


# Requests the load sent per type, those that failed (an exception or a status not 200) and
# the answered ones' latencies (sum, count) before and after the fault, written to
# tmp/load.json by `stats`.
SENT = {}
FAILED = {}
LATENCY = {"before": {}, "after": {}}
FAULT_AT = [None]
_count = threading.Lock()


def counting(http_get):
    """`http_get` counting each request by type (the first word of its path); a status other
    than 200 is an error of the load (raised)."""

    def get(port, path):
        kind = path.split("/")[1]
        ok = False
        t = time.time()
        try:
            ok = http_get(port, path) == 200
        finally:
            with _count:
                SENT[kind] = SENT.get(kind, 0) + 1
                FAILED[kind] = FAILED.get(kind, 0) + (not ok)
                if ok:
                    e = LATENCY["after" if FAULT_AT[0] and t >= FAULT_AT[0] else "before"].setdefault(kind, [0.0, 0])
                    e[0] += time.time() - t
                    e[1] += 1
        if not ok:
            raise RuntimeError("%s: %s did not answer 200" % (NAME, path))
        return 200

    return get


def fault(kind, tmp, base, extra, spawn, procs):
    """Makes fault `kind` now."""
    FAULT_AT[0] = time.time()
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        shop.sql(base + 3, "DROP INDEX users_handle ON prof.users")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 3), "prof", "users"]))
    elif kind == "hog":
        shop.hog(procs["search"][0].pid, extra, spawn)
    elif kind != "dbread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp):
    """The search service's own CPU per call under the load before the fault (search-PID.tsv)
    as sums and counts per method in search-PID.json (what run.py pools); the load's requests
    and errors per type in load.json."""
    for fn in os.listdir(tmp):
        if fn.startswith("search-") and fn.endswith(".tsv"):
            sums = {k: [0.0, 0] for k in CPU_DEMAND_S["search"]}
            with open(os.path.join(tmp, fn)) as f:
                for line in f:
                    kind, cpu = line.split()[:2]
                    sums[kind][0] += float(cpu)
                    sums[kind][1] += 1
            with open(os.path.join(tmp, fn[:-4] + ".json"), "w") as f:
                json.dump(sums, f)
    with _count, open(os.path.join(tmp, "load.json"), "w") as f:
        json.dump({"requests": SENT, "errors": FAILED, "latency_s": LATENCY}, f)


def type_of(name):
    """The method (of CPU_DEMAND_S) a `search` service found by `culprit demand` is, from its
    name: a handler function of one method only ("handler calls `Rank`" or `Lookup`), else
    the reply's size ("reply ~N B": Rank's 60 scored hits are several hundred bytes, Lookup's
    10 hits a few tens). None otherwise."""
    funcs = set(re.findall(r"`(?:[\w.]*\.)?(Lookup|Rank)`", name))
    if len(funcs) == 1:
        return funcs.pop().lower()
    m = re.search(r"reply ~([\d.]+) (B|KB|MB)$", name)
    if not m:
        return None
    size = float(m.group(1)) * {"B": 1, "KB": 1e3, "MB": 1e6}[m.group(2)]
    return "rank" if size >= 250 else "lookup"
