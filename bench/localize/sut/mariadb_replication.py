"""mariadb-replication: a MariaDB primary and a read-only replica that follows it by
asynchronous binlog replication (Debian's `mariadb-server`: C++, a thread per connection,
the replica's IO thread reading the binlog and its SQL thread applying it), a writer and
two readers on PyMySQL (the MySQL client/server protocol: length-prefixed packets).

Ports: primary = p[0], replica = p[1]. Both servers start from one data directory made by
`mariadb-install-db` once per machine (`template()`, outside every recording: bootstrapping
takes seconds) and copied per run. The writer inserts N rows `k<i>` on the primary in
autocommit mode and bumps a counter row every third step; the reader `--name 1` reads them
back from the replica (replication lag included: a key not there yet is waited for, up to a
second), the reader `--name 2` runs range selects and an aggregate on the primary. Every
client has 2 s connect/read/write timeouts, counts a failed request, makes a new connection
and goes on. The replica notices a silent primary after `slave_net_timeout` (3 s) and
reconnects every second.
"""

import fcntl
import os
import shutil
import subprocess
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port, wait_readers

DB = "suite"
TEMPLATE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-localize-mariadb-template")
# Small InnoDB files: the template is copied twice per run.
INNODB = ["--innodb-log-file-size=4M", "--innodb-data-file-path=ibdata1:4M:autoextend"]

CNF = """[mariadbd]
user=root
datadir={dir}
port={port}
bind-address=127.0.0.1
socket={dir}.sock
pid-file={dir}.pid
log-error={dir}.err
server-id={sid}
skip-name-resolve
performance-schema=0
innodb-buffer-pool-size=32M
innodb-log-file-size=4M
innodb-flush-log-at-trx-commit=2
sync-binlog=0
max-connections=50
slave-net-timeout=3
{role}
"""
PRIMARY = "log-bin=primary-bin\nbinlog-format=ROW"
REPLICA = "relay-log=replica-relay\nread-only=1\nskip-slave-start"


def template():
    """The data directory both servers start from, made once (under a lock: two suite
    runs may start together)."""
    if os.path.isfile(os.path.join(TEMPLATE, "ibdata1")):
        return TEMPLATE
    with open(TEMPLATE + ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if not os.path.isfile(os.path.join(TEMPLATE, "ibdata1")):
            tmp = TEMPLATE + ".new"
            shutil.rmtree(tmp, ignore_errors=True)
            r = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={tmp}", "--user=root",
                                "--auth-root-authentication-method=normal", "--skip-test-db", *INNODB],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            if r.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {r.stdout.decode(errors='replace')[-2000:]}")
            os.rename(tmp, TEMPLATE)
    return TEMPLATE


def _connect(port, db=DB):
    import pymysql

    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database=db,
                           connect_timeout=2, read_timeout=2, write_timeout=2, autocommit=True)


def _errors():
    import pymysql

    return (pymysql.err.Error, OSError, ValueError, IndexError, KeyError, TypeError, AttributeError)


def _close(c):
    try:
        if c is not None:
            c.close()
    except Exception:
        pass


def reader(name):
    """Helper process `mdb-reader --name 1|2`: 1 follows the writer's keys on the replica, 2
    selects ranges and a count on the primary; both leave at the `stop` key or after the
    workload's time."""
    primary, replica = ports("mariadb-replication")[:2]
    port = replica if name == "1" else primary
    errs = _errors()
    c, got, missed, failed, i, stop = None, 0, 0, 0, 0, False
    end = time.monotonic() + WORKLOAD_S + 5
    since = time.monotonic()
    term = terminated()
    while not stop and not term.is_set() and time.monotonic() < end:
        try:
            if c is None:
                c = _connect(port)
            with c.cursor() as cur:
                if name == "1":
                    cur.execute("SELECT v, pad FROM kv WHERE k = %s", (f"k{i}",))
                    rows = cur.fetchall()
                    if rows or time.monotonic() - since > 1.0:
                        # A key the writer failed to write (or that never came) is given up.
                        got, missed, i, since = got + bool(rows), missed + (not rows), i + 1, time.monotonic()
                    else:
                        cur.execute("SELECT 1 FROM kv WHERE k = 'stop'")
                        stop = bool(cur.fetchall())
                        time.sleep(0.02)
                else:
                    cur.execute("SELECT k, v FROM kv WHERE k >= %s ORDER BY k LIMIT 5", (f"k{i}",))
                    rows = cur.fetchall()
                    cur.execute("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM kv")
                    cur.fetchone()
                    cur.execute("SELECT 1 FROM kv WHERE k = 'stop'")
                    stop = bool(cur.fetchall())
                    got, i = got + len(rows), i + 1
                    time.sleep(0.05)
        except errs as e:
            failed += 1
            log(f"reader {name}: request failed: {e!r}")
            _close(c)
            c = None
            time.sleep(0.2)
    log(f"mariadb reader {name}: {got} reads, {missed} keys never seen, {failed} failed, stop={stop}"
        f"{' (told to stop)' if term.is_set() else ''}")


def _sql(port, statements, db=None, timeout=15):
    """Runs statements on a server that may still be starting (bounded retries)."""
    errs = _errors()
    end = time.monotonic() + timeout
    while True:
        try:
            c = _connect(port, db)
            with c.cursor() as cur:
                for s in statements:
                    cur.execute(s)
            c.close()
            return
        except errs as e:
            if time.monotonic() > end:
                raise RuntimeError(f"set-up on port {port} failed: {e!r}") from e
            time.sleep(0.2)


def run(tmp, n):
    primary, replica = ports("mariadb-replication")[:2]
    src = template()
    for name, port, sid, role in (("primary", primary, 1, PRIMARY), ("replica", replica, 2, REPLICA)):
        d = os.path.join(tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        with open(os.path.join(tmp, f"{name}.cnf"), "w") as f:
            f.write(CNF.format(dir=d, port=port, sid=sid, role=role))
    errs = _errors()
    with Daemons(tmp) as dm:
        p = dm.start("primary", ["mariadbd", f"--defaults-file={os.path.join(tmp, 'primary.cnf')}"], cwd=tmp)
        wait_port(primary, p, timeout=30)
        p = dm.start("replica", ["mariadbd", f"--defaults-file={os.path.join(tmp, 'replica.cnf')}"], cwd=tmp)
        wait_port(replica, p, timeout=30)
        # Everything from here on goes through the binlog: the replica makes it all itself.
        _sql(primary, ["CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl'",
                       "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'",
                       f"CREATE DATABASE {DB}",
                       f"CREATE TABLE {DB}.kv (k VARCHAR(32) PRIMARY KEY, v INT NOT NULL, pad VARCHAR(64))"])
        _sql(replica, [f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary}, MASTER_USER='repl', "
                       "MASTER_PASSWORD='repl', MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1, "
                       "MASTER_USE_GTID=slave_pos",
                       "START SLAVE"])
        # The replica has the table once it has applied the primary's set-up.
        end = time.monotonic() + 15
        while time.monotonic() < end:
            try:
                _sql(replica, ["SELECT 1 FROM kv LIMIT 1"], db=DB, timeout=0)
                break
            except RuntimeError:
                time.sleep(0.2)
        else:
            log("the replica did not catch up with the set-up in 15 s")
        readers = [dm.start(f"reader{i}", [PY, LAUNCHER, "mdb-reader", "--name", str(i)]) for i in (1, 2)]
        c, ok, failed = None, 0, 0
        for i in steps(n):
            try:
                if c is None:
                    c = _connect(primary)
                with c.cursor() as cur:
                    cur.execute("REPLACE INTO kv (k, v, pad) VALUES (%s, %s, %s)", (f"k{i}", i, "t" * (i % 40)))
                    if i % 3 == 0:
                        cur.execute("INSERT INTO kv (k, v) VALUES ('counter', 1) ON DUPLICATE KEY UPDATE v = v + 1")
                ok += 1
            except errs as e:
                failed += 1
                log(f"write failed: {e!r}")
                _close(c)
                c = None
                time.sleep(0.2)
            time.sleep(0.05)
        try:
            _close(c)
            _sql(primary, ["REPLACE INTO kv (k, v) VALUES ('stop', 0)"], db=DB, timeout=3)
        except RuntimeError as e:
            log(f"could not write the stop key: {e!r}")
        wait_readers(readers)
        log(f"mariadb-replication: {ok}/{n} writes ok, {failed} failed")
