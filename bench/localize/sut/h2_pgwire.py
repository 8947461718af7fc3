"""h2-pgwire: the H2 database engine (Debian `libh2-java`, 2.1: Java) run as a network
server speaking the PostgreSQL wire protocol (`org.h2.tools.Server -pg`: one listener
thread, a thread per connection, the database in files of its own), written by one client
and read by two, all on psycopg2 (libpq) as a Python program would talk to PostgreSQL.

Ports: the PG listener = p[0]. The writer (the launcher) creates the table, then per step
upserts a row (`MERGE INTO item KEY(k)`: the key, the value, its SHA-1) and a line in a
journal table in one transaction, commits, and every other step reads the row back and
compares it with what it wrote. A follower (helper `h2-reader --name 2`) reads the rows
with keys above the last it saw (`ORDER BY k LIMIT 20`) every 50 ms and checks each value
against the one its key determines and against the stored digest; a scanner (helper
`h2-reader --name 3`, a short-lived job: a new connection each round) counts the rows
and the journal and checks the total length of the values (`SUM(LENGTH(v))`) against the
keys it got, every 150 ms. Every wait is bounded: libpq runs in non-blocking mode under a
wait callback (`psycopg2.extensions.set_wait_callback`) that gives up on a connection
after 2 s of silence; a failed statement
is logged, the connection is closed and made again, and the client goes on. The writer
commits a stop mark (key -1) at the end; the readers leave when they see it (or at their
own deadline) and say what they saw.
"""

import hashlib
import os
import select
import time

from .common import WORKLOAD_S, Daemons, log, ports, steps, wait_port, wait_readers, LAUNCHER, PY

JAR = "/usr/share/java/h2.jar"
TIMEOUT_S = 2.0
# Steps of the writer: a step takes about 0.25 s (H2 answers each statement in several
# small writes), so that a run ends before the workload deadline.
STEPS = 50
USER, PASSWORD = "sa", "kv-secret"


def value(k):
    """The value stored under key k (40 to 1 040 characters, following from k)."""
    seed = hashlib.sha1(f"h2-{k}".encode()).hexdigest()
    return (seed * 30)[: 40 + (k * 37) % 1000]


def digest(v):
    return hashlib.sha1(v.encode()).hexdigest()


def wait_bounded(conn):
    """psycopg2 wait callback: libpq's non-blocking steps, each wait 2 s at most."""
    import psycopg2
    from psycopg2 import extensions

    while True:
        state = conn.poll()
        if state == extensions.POLL_OK:
            return
        if state == extensions.POLL_READ:
            r, _, _ = select.select([conn.fileno()], [], [], TIMEOUT_S)
        elif state == extensions.POLL_WRITE:
            _, r, _ = select.select([], [conn.fileno()], [], TIMEOUT_S)
        else:
            raise psycopg2.OperationalError(f"bad poll state {state}")
        if not r:
            raise psycopg2.OperationalError(f"no answer from the server in {TIMEOUT_S} s")


class Db:
    """One psycopg2 connection to the H2 server, made again after any failure."""

    def __init__(self, who):
        import psycopg2
        from psycopg2 import extensions

        extensions.set_wait_callback(wait_bounded)
        self.psycopg2 = psycopg2
        self.who = who
        self.conn = None
        self.errors = 0

    def cursor(self):
        if self.conn is None:
            self.conn = self.psycopg2.connect(host="127.0.0.1", port=ports("h2-pgwire")[0], dbname="kv",
                                              user=USER, password=PASSWORD, connect_timeout=int(TIMEOUT_S))
        return self.conn.cursor()

    def attempt(self, what, fn):
        """Runs fn(cursor): its result, or None after a failure (logged, counted, the
        connection closed)."""
        try:
            return fn(self.cursor())
        except (self.psycopg2.Error, OSError, ValueError) as e:
            self.errors += 1
            log(f"h2 {self.who}: {what} failed: {str(e).strip()!r:.160}")
            if self.conn is not None:
                try:
                    self.conn.close()
                except self.psycopg2.Error:
                    pass
            self.conn = None
            return None


def create(cur):
    cur.execute("CREATE TABLE IF NOT EXISTS item (k INT PRIMARY KEY, v VARCHAR(2000), d VARCHAR(40))")
    cur.execute("CREATE TABLE IF NOT EXISTS journal (n INT PRIMARY KEY, k INT, len INT)")
    cur.connection.commit()
    return True


def put(cur, k, n):
    v = value(k)
    cur.execute("MERGE INTO item KEY(k) VALUES (%s, %s, %s)", (k, v, digest(v)))
    cur.execute("MERGE INTO journal KEY(n) VALUES (%s, %s, %s)", (n, k, len(v)))
    cur.connection.commit()
    return True


def get(cur, k):
    cur.execute("SELECT v, d FROM item WHERE k = %s", (k,))
    row = cur.fetchone()
    cur.connection.commit()
    if row is None or row[0] != value(k) or row[1] != digest(value(k)):
        raise ValueError(f"key {k}: read back {row!r:.60}")
    return True


def writer(db, n):
    ok = 0
    for i in steps(min(n, STEPS)):
        good = db.attempt(f"put {i}", lambda cur: put(cur, i, i))
        if good and i % 2 == 0:
            good = db.attempt(f"get {i}", lambda cur: get(cur, i))
        ok += bool(good)
        time.sleep(0.03)
    for _ in range(3):
        if db.attempt("stop mark", lambda cur: put(cur, -1, -1)):
            break
    return ok, db.errors


def follow(cur, state):
    """The follower's round: rows above the last key seen, each checked; True at the stop mark."""
    cur.execute("SELECT k, v, d FROM item WHERE k > %s OR k = -1 ORDER BY k LIMIT 20", (state["last"],))
    rows = cur.fetchall()
    cur.connection.commit()
    stop = False
    for k, v, d in rows:
        if v != value(k) or d != digest(v):
            raise ValueError(f"key {k}: value of {len(v or '')} characters does not match")
        if k == -1:
            stop = True
        else:
            state["last"] = max(state["last"], k)
            state["rows"] += 1
    return stop


def scan(cur, state):
    """The scanner's round: row count, journal count, total length checked; True at the stop mark."""
    cur.execute("SELECT k FROM item")
    keys = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT COUNT(*), SUM(LENGTH(v)) FROM item")
    count, total = cur.fetchone()
    cur.execute("SELECT COUNT(*) FROM journal WHERE n >= 0")
    (journal,) = cur.fetchone()
    cur.connection.commit()
    if count < len(keys):
        raise ValueError(f"{count} rows counted after {len(keys)} listed")
    want = sum(len(value(k)) for k in keys)
    if count == len(keys) and (total or 0) != want:
        raise ValueError(f"values of {total} characters in all, {want} expected for {len(keys)} keys")
    if journal + (1 if -1 in keys else 0) < len(keys) - 1:
        raise ValueError(f"journal of {journal} lines for {len(keys)} rows")
    state["rows"] = len(keys)
    return -1 in keys


def reader(name):
    """Helper process `h2-reader --name 2` (follower) or `--name 3` (scanner)."""
    import signal

    told = []
    signal.signal(signal.SIGTERM, lambda *_: told.append(1))
    db = Db(f"reader {name}")
    fn, pause = (follow, 0.05) if name == "2" else (scan, 0.15)
    state = {"last": -1, "rows": 0}
    rounds = ok = 0
    stop = False
    end = time.monotonic() + WORKLOAD_S + 15
    while not stop and not told and time.monotonic() < end:
        rounds += 1
        got = db.attempt(f"round {rounds}", lambda cur: fn(cur, state))
        if got is not None:
            ok += 1
            stop = got
        if name != "2" and db.conn is not None:  # the scanner connects anew for each round
            db.conn.close()
            db.conn = None
        time.sleep(pause)
    if not stop:
        log(f"h2 reader {name}: " + ("told to stop" if told else "deadline reached") + " before the stop mark")
    log(f"h2 reader {name}: {ok}/{rounds} rounds ok, {state['rows']} rows checked, {db.errors} failed")


def run(tmp, n):
    port = ports("h2-pgwire")[0]
    base = os.path.join(tmp, "db")
    os.makedirs(base, exist_ok=True)
    # The database is made by the first connection (-ifNotExists), with the password given.
    argv = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
            "-Dh2.bindAddress=127.0.0.1", "-cp", JAR, "org.h2.tools.Server",
            "-pg", "-pgPort", str(port), "-ifNotExists", "-baseDir", base]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("h2", argv)
        wait_port(port, p, timeout=40)
        db = Db("writer")
        for _ in range(5):  # the tables exist before the readers start
            if db.attempt("create", create):
                break
            time.sleep(0.5)
        helpers = [d.start(f"reader{k}", [PY, LAUNCHER, "h2-reader", "--name", k], env=env) for k in ("2", "3")]
        ok, errors = writer(db, n)
        wait_readers(helpers, seconds=25)
        log(f"h2-pgwire: {ok}/{min(n, STEPS)} steps ok, {errors} failed")
