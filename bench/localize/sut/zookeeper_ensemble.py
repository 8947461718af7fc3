"""zookeeper-ensemble: three ZooKeeper servers (Debian's zookeeper, JVM) forming a quorum,
and kazoo clients (Python) — a writer on server 1 and a reader on server 3 (a helper
process) that watches the writer's nodes.

Ports: clients p[0..2], quorum p[3..5], leader election p[6..8]. Every write goes through
the leader and is replicated to a quorum; the reader sees it on another server. kazoo
reconnects (to any server of its connection string) after a failure; an operation that
fails is counted and the workload goes on.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"


def _kazoo(hosts):
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    return KazooClient(
        hosts=hosts,
        randomize_hosts=False,  # the first server of the list first: a fault on its port comes
        timeout=4.0,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1.0),
        command_retry=KazooRetry(max_tries=2, delay=0.1, max_delay=0.5),
    )


def client(name):
    """Helper process `zk-client --name N`: reads /bench/n* through server 3 for N seconds."""
    from kazoo.exceptions import KazooException

    p = ports("zookeeper-ensemble")
    zk = _kazoo(f"127.0.0.1:{p[2]},127.0.0.1:{p[1]}")
    zk.start(timeout=15)
    reads = errors = 0
    end = time.monotonic() + float(name)
    while time.monotonic() < end:
        try:
            for child in zk.get_children("/bench")[:20]:
                zk.get(f"/bench/{child}")
                reads += 1
            if zk.exists("/bench/stop"):
                break
        except (KazooException, OSError) as e:
            errors += 1
            log(f"reader: {e!r}")
        time.sleep(0.05)
    zk.stop()
    zk.close()
    log(f"zk reader: {reads} reads, {errors} failed")


def run(tmp, n):
    from kazoo.exceptions import KazooException

    p = ports("zookeeper-ensemble")
    with Daemons(tmp) as d:
        procs = []
        for i in (1, 2, 3):
            data = os.path.join(tmp, f"zk{i}")
            os.makedirs(data, exist_ok=True)
            with open(os.path.join(data, "myid"), "w") as f:
                f.write(f"{i}\n")
            cfg = os.path.join(tmp, f"zoo{i}.cfg")
            with open(cfg, "w") as f:
                f.write(
                    f"tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={data}\n"
                    f"clientPort={p[i - 1]}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=ruok,stat\n"
                    "preAllocSize=1024\nsnapCount=100000\n"
                    + "".join(f"server.{j}=127.0.0.1:{p[2 + j]}:{p[5 + j]}\n" for j in (1, 2, 3))
                )
            procs.append(
                d.start(
                    f"zk{i}",
                    ["java", "-Xmx96m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                     f"-Dzookeeper.log.dir={tmp}", "-Dzookeeper.root.logger=WARN,CONSOLE",
                     "-cp", CLASSPATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg],
                )
            )
        for i, pr in enumerate(procs):
            wait_port(p[i], pr, timeout=40)
        zk = _kazoo(f"127.0.0.1:{p[0]},127.0.0.1:{p[1]}")
        zk.start(timeout=30)
        zk.ensure_path("/bench")
        reader = d.start("reader", [PY, LAUNCHER, "zk-client", "--name", "25"])
        ok = errors = 0
        for i in steps(n):
            try:
                path = f"/bench/n{i % 20}"
                value = f"v{i}".encode()
                if zk.exists(path):
                    zk.set(path, value)
                else:
                    zk.create(path, value)
                if zk.get(path)[0] != value:
                    raise ValueError("read back a different value")
                ok += 1
            except (KazooException, OSError, ValueError) as e:
                errors += 1
                log(f"writer: {e!r}")
            time.sleep(0.01)
        try:
            zk.create("/bench/stop", b"")
        except (KazooException, OSError) as e:
            log(f"writer: stop: {e!r}")
        zk.stop()
        zk.close()
        try:
            reader.wait(timeout=30)
        except Exception:
            log("the reader did not stop")
        log(f"zookeeper-ensemble: {ok}/{n} writes ok, {errors} failed")
