"""The job-rabbit-workers system of the demand suite (added 2026-11-29 to the validation half,
branch demand-val7, before any method was run on it):
an HTTP front (`jobq_front.py`: a pre-forked server of Python's standard library, a parent
and 6 children accepting on one socket, one request at a time each) that turns each request
into a job published to RabbitMQ and waits for its reply (RPC over the child's own reply
queue; pika) -> RabbitMQ (Debian `rabbitmq-server` 3.10 on Erlang/OTP 25: one BEAM node
started privately in the run's directory, with its own epmd) -> 3 worker processes
(`jobq_worker.py`: pika consumers of the queue `jobs`, prefetch 1, burning a known CPU time
per job type) -> MariaDB (Debian `mariadb-server`, a fresh data directory, one server thread
per connection; each worker keeps one connection, PyMySQL).

Unlike the suite's other systems the application tier is reached through a message broker:
the workers connect out to RabbitMQ and their jobs arrive on that connection (no port of
theirs serves requests), a queue forms in the broker when the workers are busy, and the
front waits for replies that come back through the broker. The job types differ in how many
queries they make (1, 2, 3). The load changes phase every 30 s (intensity and mix), as
forum-squid-puma's.

Ports (from `base`): the front on base, RabbitMQ's AMQP listener on base+1, MariaDB on
base+2, epmd on base+3 (ERL_EPMD_PORT), the node's Erlang distribution on base+4
(RABBITMQ_DIST_PORT). RabbitMQ's node name, mnesia, log, configuration and Erlang cookie
(HOME) are all in the run's directory (tmp/rabbit); no plugin is enabled.

`systems.py run job-rabbit-workers` calls `start` to bring the tiers up and get the load's
request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the assets' code index dropped (every `resize` lookup scans the table);
- `lock`: lock contention on the assets table (a session holding `LOCK TABLES assets WRITE`
  20 ms of every 80: every job type waits for it);
- `dbread`: MariaDB's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=mariadbd'` (run.py
  computes T; the load starts at `--start-at`) — nothing to do here;
- `hog`: CPU taken from one worker (at the fault, it and three busy loops are put on CPU 0,
  the worker at nice 19: `shop.take_cpu`; that worker is the tier `worker-hogged` in every
  run).
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import zlib

import shop

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "job-rabbit-workers"
FAULTS = ["index", "lock", "dbread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "dbread": ["database"], "hog": ["worker-hogged"]}
CPU_DEMAND_S = {"worker": {"resize": 0.001, "report": 0.004, "notify": 0.0006}}
WORKERS = 3
FRONT_PROCS = 6
# The rule run.py passes to `culprit record --inject` for the `dbread` fault.
DBREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=mariadbd"
# A phase every 30 s (as forum-squid-puma).
PHASE_S = 30.0
RABBIT = "/usr/lib/rabbitmq/bin/rabbitmq-server"
SCHEMA = (
    "CREATE DATABASE jobs",
    "USE jobs",
    "CREATE TABLE jobs.grps (id INT PRIMARY KEY, name VARCHAR(32)) ENGINE=InnoDB",
    "INSERT INTO jobs.grps(id, name) SELECT seq, CONCAT('group ', seq) FROM seq_0_to_149",
    "CREATE TABLE jobs.assets (id INT AUTO_INCREMENT PRIMARY KEY, code VARCHAR(16), grp INT,"
    " title VARCHAR(64), size INT, hits INT NOT NULL DEFAULT 0, body VARCHAR(400)) ENGINE=InnoDB",
    "INSERT INTO jobs.assets(code, grp, title, size, body) SELECT CONCAT('c', LPAD(seq, 6, '0')),"
    " seq % 150, CONCAT('asset ', seq), seq % 5000, REPEAT('z', 100 + seq % 300) FROM seq_1_to_60000",
    "CREATE INDEX assets_code ON jobs.assets(code)",
    "CREATE INDEX assets_grp ON jobs.assets(grp)",
    "CREATE TABLE jobs.events (id INT AUTO_INCREMENT PRIMARY KEY, asset INT, kind INT) ENGINE=InnoDB",
    "ANALYZE TABLE jobs.assets",
)


def rabbit_env(tmp, base):
    """RabbitMQ's environment: everything of the node in tmp/rabbit, its ports from `base`."""
    d = os.path.join(tmp, "rabbit")
    home = os.path.join(d, "home")
    os.makedirs(home, exist_ok=True)
    conf = os.path.join(d, "rabbitmq.conf")
    with open(conf, "w") as f:
        f.write("listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\n"
                "log.file.level = warning\nlog.console = false\n" % (base + 1))
    plugins = os.path.join(d, "enabled_plugins")
    with open(plugins, "w") as f:
        f.write("[].\n")
    empty = os.path.join(d, "rabbitmq-env.conf")
    open(empty, "w").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
    env.update(
        HOME=home,
        RABBITMQ_NODENAME="jobq@localhost",
        RABBITMQ_USE_LONGNAME="false",
        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
        RABBITMQ_NODE_PORT=str(base + 1),
        RABBITMQ_DIST_PORT=str(base + 4),
        ERL_EPMD_PORT=str(base + 3),
        ERL_EPMD_ADDRESS="127.0.0.1",
        RABBITMQ_CONF_ENV_FILE=empty,
        RABBITMQ_CONFIG_FILE=conf,
        RABBITMQ_ADVANCED_CONFIG_FILE=os.path.join(d, "advanced.config"),
        RABBITMQ_ENABLED_PLUGINS_FILE=plugins,
        RABBITMQ_MNESIA_BASE=os.path.join(d, "mnesia"),
        RABBITMQ_LOG_BASE=os.path.join(d, "log"),
        RABBITMQ_PID_FILE=os.path.join(d, "rabbit.pid"),
        # Schedulers not bound to CPUs (the `hog` fault puts loops on CPU 0: they must take
        # the CPU from the hogged worker, not from a scheduler of the broker); no busy wait.
        RABBITMQ_SCHEDULER_BIND_TYPE="u",
        RABBITMQ_SCHEDULER_BUSY_WAIT_THRESHOLD="none",
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
    )
    return env


def wait_broker(port, proc, log, timeout=120):
    """Waits until RabbitMQ accepts an AMQP connection (its port opens before it does)."""
    import pika
    end = time.time() + timeout
    while True:
        try:
            pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0,
                                                              connection_attempts=1)).close()
            return
        except Exception:
            if time.time() > end or proc.poll() is not None:
                raise RuntimeError("RabbitMQ did not start: see %s" % log)
            time.sleep(0.5)


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (the front on `base`, RabbitMQ on base+1, MariaDB on base+2, epmd on
    base+3) into `procs`; returns the load's `send(first, k)`. The worker the `hog` fault is
    made on is put in `moved`."""
    shop.maria_start(tmp, base + 2, spawn, procs, SCHEMA)
    env = rabbit_env(tmp, base)
    log = os.path.join(tmp, "rabbit.log")
    # epmd in the foreground (the node is told not to start one: `-start_epmd false`), a
    # process of the broker's tier stopped with it.
    procs["broker"] = [spawn(["epmd", "-port", str(base + 3), "-address", "127.0.0.1"], env=env,
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "epmd.log"), "w"))]
    wait_port(base + 3)
    procs["broker"].append(spawn([RABBIT], env=env, cwd=tmp, stdout=open(log, "w"), stderr=subprocess.STDOUT))
    wait_broker(base + 1, procs["broker"][1], log)
    py_env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs["worker"] = []
    for i in range(WORKERS):
        procs["worker"].append(spawn([sys.executable, os.path.join(HERE, "jobq_worker.py"), "--broker", str(base + 1),
                                      "--db", str(base + 2), "--stats", tmp], env=py_env, cwd=tmp,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(tmp, "worker%d.log" % i), "w")))
    front_log = os.path.join(tmp, "front.log")
    procs["front"] = [spawn([sys.executable, os.path.join(HERE, "jobq_front.py"), "--port", str(base),
                             "--broker", str(base + 1), "--procs", str(FRONT_PROCS)], env=py_env, cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=open(front_log, "w"))]
    wait_port(base, 60)
    end = time.time() + 60
    while len(shop.children(procs["front"][0].pid)) < FRONT_PROCS:
        if time.time() > end or procs["front"][0].poll() is not None:
            raise RuntimeError("the front did not start %d children: see %s" % (FRONT_PROCS, front_log))
        time.sleep(0.2)
    # Every worker has served jobs of each type before the load begins (the front's children
    # connect to the broker as they start; which child accepts a request is the kernel's
    # choice): four jobs a round, not three, since the broker hands jobs to idle consumers in
    # turn (three a round would give each worker one type).
    for k in range(8 * FRONT_PROCS):
        for path in ("/resize/%d", "/report/%d", "/notify/%d", "/resize/%d"):
            status = http_get(base, path % k)
            if status != 200:
                raise RuntimeError("job-rabbit-workers: GET %s answered %d: see %s and %s/worker*.log"
                                   % (path % k, status, front_log, tmp))
    for i, p in enumerate(procs["worker"]):
        if p.poll() is not None:
            raise RuntimeError("worker %d exited: see %s/worker%d.log" % (i, tmp, i))
    # The workers' measures of CPU per job from here on are the load's (jobq_worker.py).
    open(os.path.join(tmp, "load"), "w").close()
    moved["worker-hogged"] = [procs["worker"][0].pid]

    return sender(http_get, base)


# At the end of a run the tiers are stopped together (systems.py `run`): RabbitMQ may close
# the front's and the workers' connections before they exit ("connection_forced ... shutdown"
# in its log), after the load has ended.
# Requests the load sent per type, those that failed (an exception or a status not 200) and
# the answered ones' latencies (sum, count) before and after the fault, written to
# tmp/load.json by `stats`.
SENT = {}
FAILED = {}
LATENCY = {"before": {}, "after": {}}
FAULT_AT = [None]
_count = threading.Lock()


def sender(http_get, base):
    """The load's `send(first, k)`: a resize when the load draws the phase's first type (its
    keys spread over the whole key space, as the other systems'), else two of three requests
    a report, one a notify — chosen by a hash of k, not by k % 3 as `shop.sender` does: the
    broker hands jobs to its idle consumers in turn, so that with k % 3 each worker would see
    only two of the three types. A status other than 200 is an error of the load."""

    def send(is_first, k):
        if is_first:
            kind, key = "resize", k * 7919
        else:
            kind, key = ("report" if zlib.crc32(b"%d" % k) % 3 else "notify"), k
        ok = False
        t = time.time()
        try:
            ok = http_get(base, "/%s/%d" % (kind, key)) == 200
        finally:
            with _count:
                SENT[kind] = SENT.get(kind, 0) + 1
                FAILED[kind] = FAILED.get(kind, 0) + (not ok)
                if ok:
                    e = LATENCY["after" if FAULT_AT[0] and t >= FAULT_AT[0] else "before"].setdefault(kind, [0.0, 0])
                    e[0] += time.time() - t
                    e[1] += 1
        if not ok:
            raise RuntimeError("job-rabbit-workers: /%s/%d did not answer 200" % (kind, key))

    return send


def fault(kind, tmp, base, extra, spawn, moved):
    """Makes fault `kind` now."""
    FAULT_AT[0] = time.time()
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        shop.sql(base + 2, "DROP INDEX assets_code ON jobs.assets")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 2),
                            "jobs", "assets"]))
    elif kind == "hog":
        shop.hog(moved["worker-hogged"][0], extra, spawn)
    elif kind != "dbread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp):
    """The workers' own CPU per job under the load before the fault (worker-PID.tsv) as sums
    and counts per type in worker-PID.json (what run.py pools); the load's requests and
    errors per type in load.json."""
    for fn in os.listdir(tmp):
        if fn.startswith("worker-") and fn.endswith(".tsv"):
            sums = {k: [0.0, 0] for k in CPU_DEMAND_S["worker"]}
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
    """The job type (of CPU_DEMAND_S) a worker's service found by `culprit demand` is, from
    its name's downstream calls ("… → 2× peer:B+2 (…); …"): the queries it made to MariaDB,
    the highest port the name calls (RabbitMQ's is B+1): one query, a resize; two, a report;
    three, a notify. None otherwise."""
    calls = {}
    for n, port in re.findall(r"(\d+)× peer:(\d+)", name):
        calls[int(port)] = calls.get(int(port), 0) + int(n)
    if not calls:
        return None
    return {1: "resize", 2: "report", 3: "notify"}.get(calls[max(calls)])
