"""rmi-chain: Java RMI (the installed JDK 17: `rmiregistry` and `java.rmi`, JRMP over TCP)
with a front server that forwards every put and get to a store server in another JVM, both
remote objects bound in an `rmiregistry`, and two Java clients in JVMs of their own.

Ports: registry = p[0], store object = p[1], front object = p[2]. The JDK's `rmiregistry`
runs in a JVM of its own (the classes of the remote interface on its class path, to read
the stubs bound in it). The store (`RmiChain store`) exports a `Kv` object (put answers
`key length sha1`, get answers the value, a RemoteException for an unknown key) on its port
and binds it as `store`; the front (`RmiChain front`) exports its own `Kv` on its port, binds
it as `front`, looks the store up in the registry at its first call and forwards each call
to it (RMI's transport: a connection per call in flight, kept for reuse; a thread per
connection in each server), each call given up after 1 s (`sun.rmi.transport.tcp.
responseTimeout`, and `handshakeTimeout` for a new connection's JRMP handshake, 60 s by
default, which a stopped server never answers); it checks a put's answer against the value (key, length, SHA-1), and
after any failure looks the store up again at the next call and raises a RemoteException to
its client. Each client (`RmiChain client NAME`: client 1 makes N steps 20 ms apart, client 2
starts 1.5 s later and makes 60 steps 60 ms apart) looks the front up, puts a value a step
(300 bytes to 9 KB, bytes that depend on the key; keys of its own) and reads it back, checks
the put's answer (key, length, SHA-1) and the value's length and SHA-1, every call (and a
new connection's handshake) bounded to 2 s; a failed step is logged and counted, the front looked up again and the client goes
on; both stop at the workload deadline and say how many steps went right. The store and
the front say at their exit (SIGTERM) how many calls they served. The program is compiled
once by setup.sh (javac; the JDK only).
"""

import hashlib
import os
import shutil
import subprocess
import time

from .common import WORKLOAD_S, Daemons, log, ports, wait_port, wait_readers

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rmi")
REQUESTS2 = 60
JVM = ["-Xms32m", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
       "-Djava.awt.headless=true", "-Djava.rmi.server.hostname=127.0.0.1"]


def classes():
    """Where the compiled program lives: a directory named for the source's digest."""
    with open(os.path.join(HERE, "RmiChain.java"), "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-rmi-{tag}")


def build():
    """Compiles RmiChain.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "RmiChain.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-d", tmp, os.path.join(HERE, "RmiChain.java")], check=True)
    os.replace(tmp, out)
    return out


def wait_log(path, text, proc, timeout):
    """Waits until the log at path holds text (or the process died / time ran out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before saying {text!r}")
        try:
            with open(path, errors="replace") as f:
                if text in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{path} does not say {text!r} after {timeout} s")


def run(tmp, n):
    reg, sport, fport = ports("rmi-chain")[:3]
    cls = classes()
    if not os.path.exists(os.path.join(cls, "RmiChain.class")):
        log("rmi-chain: RmiChain was not built by setup.sh; compiling it now (inside the run)")
        cls = build()
    java = ["java", *JVM, "-cp", cls]
    with Daemons(tmp) as d:
        p = d.start("registry", ["rmiregistry", *(f"-J{o}" for o in JVM), f"-J-Djava.class.path={cls}", str(reg)],
                    cwd=tmp)
        wait_port(reg, p, timeout=40)
        p = d.start("store", [*java, "RmiChain", "store", str(reg), str(sport)], cwd=tmp)
        wait_log(os.path.join(tmp, "store.log"), "bound in the registry", p, timeout=40)
        p = d.start("front", [*java, "-Dsun.rmi.transport.tcp.responseTimeout=1000",
                              "-Dsun.rmi.transport.proxy.connectTimeout=1000",
                              "-Dsun.rmi.transport.tcp.handshakeTimeout=1000", "RmiChain", "front", str(reg),
                              str(fport)], cwd=tmp)
        wait_log(os.path.join(tmp, "front.log"), "bound in the registry", p, timeout=40)
        clients = []
        for name, steps, pause in (("1", n, 20), ("2", REQUESTS2, 60)):
            clients.append(d.start(f"client{name}", [*java, "-Dsun.rmi.transport.tcp.responseTimeout=2000",
                                                     "-Dsun.rmi.transport.proxy.connectTimeout=2000",
                                                     "-Dsun.rmi.transport.tcp.handshakeTimeout=2000", "RmiChain",
                                                     "client", name, str(reg), str(steps), str(pause),
                                                     str(WORKLOAD_S)], cwd=tmp))
            # Client 2 comes a little later: the front accepts its connection mid-run.
            time.sleep(1.5 if name == "1" else 0)
        wait_readers(clients, seconds=WORKLOAD_S + 20)
        codes = [c.poll() for c in clients]
        log(f"rmi-chain: clients ended with {codes} (their summaries: client1.log, client2.log)")
