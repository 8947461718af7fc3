"""tarantool-replicas: a Tarantool master and a read-only replica that follows it by
asynchronous replication (Debian's `tarantool`: C with LuaJIT, fibers on libev, an iproto
thread, a WAL thread, a relay thread per replica), a writer and two readers on the `tarantool`
connector (binary iproto protocol, MessagePack).

Ports: master = p[0], replica = p[1]. The writer replaces N tuples `k<i>` on the master and
calls a Lua function (`bump`, a counter) every third step; the reader `--name 1` reads them
back from the replica (replication lag included: a key not there yet is waited for, up to
a second), the reader `--name 2` selects ranges on the master. Every client has a 2 s
socket timeout, counts a failed request, makes a new connection and goes on.
"""

import os
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port, wait_readers

SPACE = "kv"
ITERATOR_GE = 5  # tarantool.const.ITERATOR_GE

MASTER = """
box.cfg{{listen='127.0.0.1:{port}', work_dir='{dir}', log_level=2, memtx_memory=64*1024*1024,
        replication_timeout=0.5, checkpoint_interval=0}}
box.schema.user.grant('guest', 'read,write,execute', 'universe', nil, {{if_not_exists=true}})
box.schema.user.grant('guest', 'replication', nil, nil, {{if_not_exists=true}})
local s = box.schema.space.create('{space}', {{if_not_exists=true}})
s:create_index('pk', {{type='tree', parts={{1, 'string'}}, if_not_exists=true}})
function bump(key)
    local t = box.space.{space}:get(key)
    local n = t and t[2] + 1 or 1
    box.space.{space}:replace({{key, n, ''}})
    return n
end
"""

REPLICA = """
box.cfg{{listen='127.0.0.1:{port}', work_dir='{dir}', log_level=2, memtx_memory=64*1024*1024,
        replication={{'127.0.0.1:{master}'}}, read_only=true, replication_timeout=0.5,
        replication_connect_timeout=10, checkpoint_interval=0}}
"""


def _connect(port):
    import tarantool

    return tarantool.Connection("127.0.0.1", port, socket_timeout=2.0, reconnect_max_attempts=1,
                                reconnect_delay=0.2, connect_now=True)


def _errors():
    import tarantool.error

    return (tarantool.error.Error, OSError, ValueError, IndexError, KeyError)


def reader(name):
    """Helper process `tt-reader --name 1|2`: 1 follows the writer's keys on the replica, 2
    selects ranges on the master; both leave at the `stop` key or after the workload's time."""
    master, replica = ports("tarantool-replicas")[:2]
    port = replica if name == "1" else master
    errs = _errors()
    c, got, missed, failed, i, stop = None, 0, 0, 0, 0, False
    end = time.monotonic() + WORKLOAD_S + 5
    since = time.monotonic()
    term = terminated()
    while not stop and not term.is_set() and time.monotonic() < end:
        try:
            if c is None:
                c = _connect(port)
            if name == "1":
                rows = c.select(SPACE, f"k{i}").data
                if rows or time.monotonic() - since > 1.0:
                    # A key the writer failed to write (or that never came) is given up.
                    got, missed, i, since = got + bool(rows), missed + (not rows), i + 1, time.monotonic()
                else:
                    stop = bool(c.select(SPACE, "stop").data)
                    time.sleep(0.02)
            else:
                # The connector's iterator names do not reach a Tarantool 2.6: the number.
                rows = c.select(SPACE, f"k{i}", iterator=ITERATOR_GE, limit=5).data
                stop = bool(c.select(SPACE, "stop").data)
                got, i = got + len(rows), i + 1
                time.sleep(0.05)
        except errs as e:
            failed += 1
            log(f"reader {name}: request failed: {e!r}")
            try:
                if c is not None:
                    c.close()
            except Exception:
                pass
            c = None
            time.sleep(0.2)
    log(f"tarantool reader {name}: {got} reads, {missed} keys never seen, {failed} failed, stop={stop}{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    master, replica = ports("tarantool-replicas")[:2]
    for name, text in (("master", MASTER), ("replica", REPLICA)):
        os.makedirs(os.path.join(tmp, name), exist_ok=True)
        with open(os.path.join(tmp, f"{name}.lua"), "w") as f:
            port = master if name == "master" else replica
            f.write(text.format(port=port, master=master, dir=os.path.join(tmp, name), space=SPACE))
    errs = _errors()
    with Daemons(tmp) as d:
        p = d.start("master", ["tarantool", os.path.join(tmp, "master.lua")], cwd=tmp)
        wait_port(master, p, timeout=20)
        p = d.start("replica", ["tarantool", os.path.join(tmp, "replica.lua")], cwd=tmp)
        wait_port(replica, p, timeout=20)
        # The replica listens before it has joined: wait until it sees the space.
        end = time.monotonic() + 15
        while time.monotonic() < end:
            try:
                c = _connect(replica)
                c.select(SPACE, "none")
                c.close()
                break
            except errs:
                time.sleep(0.2)
        readers = [d.start(f"reader{i}", [PY, LAUNCHER, "tt-reader", "--name", str(i)]) for i in (1, 2)]
        c, ok, failed = None, 0, 0
        for i in steps(n):
            try:
                if c is None:
                    c = _connect(master)
                c.replace(SPACE, (f"k{i}", i, "t" * (i % 40)))
                if i % 3 == 0:
                    c.call("bump", "counter")
                ok += 1
            except errs as e:
                failed += 1
                log(f"write failed: {e!r}")
                try:
                    if c is not None:
                        c.close()
                except Exception:
                    pass
                c = None
                time.sleep(0.2)
            time.sleep(0.02)
        try:
            c = c or _connect(master)
            c.replace(SPACE, ("stop", 0, ""))
            c.close()
        except errs as e:
            log(f"could not write the stop key: {e!r}")
        wait_readers(readers)
        log(f"tarantool-replicas: {ok}/{n} writes ok, {failed} failed")
