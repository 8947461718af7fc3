"""netty-chain: two JVMs on Netty 4.1 (Debian `libnetty-java`; `sut/netty/NettyChain.java`,
compiled once by `build()` from `setup.sh` with the installed JDK), both on NIO event loops
(a boss loop accepting, two worker loops serving every connection: no thread per
connection), and two Python clients (`http.client`).

Ports: front = p[0], backend = p[1]. The backend (`NettyChain backend`) is a key-value
store behind length-prefixed binary frames (`LengthFieldBasedFrameDecoder` and
`LengthFieldPrepender`: a 4-byte length, then op, request id, key, value). The front
(`NettyChain front`) is an HTTP/1.1 server (`HttpServerCodec`, `HttpObjectAggregator`):
`PUT /item/K` (the body is the value) answers `stored K LEN SHA1` with the length and SHA-1
the backend computed of what it stored, `GET /item/K` answers the value itself. It forwards
every request to the backend over a `FixedChannelPool` of at most 3 connections (acquired
within 1 s, 1 s to connect): one call at a time on a connection, its answer matched by
request id, given up after 1 s (the connection is then closed, and the pool makes a new
one); any failure becomes a 502. Each client (the launcher, and the helper `netty-client
--name 2`, which starts 1.5 s later) puts a value a step (300 bytes to 12 KB, bytes that
depend on the key; keys of its own) and gets it back on one keep-alive connection (2 s
timeout), checks the put's answer (key, length, SHA-1) and the value's length and SHA-1,
counts a failure, connects again and goes on. Both JVMs say at their exit (SIGTERM) how many requests they served.
"""

import hashlib
import http.client
import os
import shutil
import subprocess
import time

from .common import LAUNCHER, PY, Daemons, drop_http, log, ports, steps, wait_port, wait_readers
from .tomcat_chain import wait_http

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netty")
JARS = [f"/usr/share/java/netty-{j}.jar" for j in ("common", "buffer", "transport", "codec", "codec-http",
                                                   "handler", "resolver")]
REQUESTS2 = 60
JVM = ["java", "-Xms48m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
       "-Djava.awt.headless=true", "-Dio.netty.noUnsafe=false"]


def classes():
    """Where the compiled program lives: a directory named for the source's digest."""
    with open(os.path.join(HERE, "NettyChain.java"), "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-netty-{tag}")


def build():
    """Compiles NettyChain.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "NettyChain.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-cp", ":".join(JARS), "-d", tmp, os.path.join(HERE, "NettyChain.java")],
                   check=True)
    os.replace(tmp, out)
    return out


def value(k):
    """The bytes a client stores under key k (their length varies with k)."""
    seed = hashlib.sha1(f"netty-{k}".encode()).digest()
    n = 300 + (k * 7919) % 12000
    return (seed * (n // len(seed) + 1))[:n]


class Client:
    """One keep-alive HTTP connection (2 s timeout) to the front; connects again after any
    failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    def _call(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
        self.conn.request(method, path, body=body)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise ValueError(f"{method} {path}: status {r.status}: {data[:80]!r}")
        return data

    def put(self, k, v):
        want = f"stored {k} {len(v)} {hashlib.sha1(v).hexdigest()}\n".encode()
        got = self._call("PUT", f"/item/{k}", v)
        if got != want:
            raise ValueError(f"put {k}: wrong answer {got[:80]!r}")

    def get(self, k, v):
        got = self._call("GET", f"/item/{k}")
        if len(got) != len(v) or hashlib.sha1(got).digest() != hashlib.sha1(v).digest():
            raise ValueError(f"get {k}: {len(got)} bytes, wrong length or SHA-1")

    def step(self, k):
        """Puts key k, reads it back and checks it: True if both went right."""
        v = value(k)
        try:
            self.put(k, v)
            self.get(k, v)
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return False


def workload(name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart: (steps that went right, failures)."""
    c = Client(ports("netty-chain")[0])
    ok = 0
    for i in steps(n):
        ok += c.step(2 * i + int(name))
        time.sleep(pause)
    return ok, c.errors


def client(name):
    """Helper process `netty-client --name N`: REQUESTS2 steps, every 60 ms, from 1.5 s after
    its start (the front accepts its connection mid-run)."""
    time.sleep(1.5)
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"netty client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, backend = ports("netty-chain")[:2]
    cls = classes()
    if not os.path.exists(os.path.join(cls, "NettyChain.class")):
        log("netty-chain: NettyChain was not built by setup.sh; compiling it now (inside the run)")
        cls = build()
    cp = ":".join([cls, *JARS])
    with Daemons(tmp) as d:
        p = d.start("backend", [*JVM, "-cp", cp, "NettyChain", "backend", str(backend)], cwd=tmp)
        wait_port(backend, p, timeout=40)
        p = d.start("front", [*JVM, "-cp", cp, "NettyChain", "front", str(front), str(backend)], cwd=tmp)
        wait_http(front, p, timeout=40)
        helper = d.start("client2", [PY, LAUNCHER, "netty-client", "--name", "2"],
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"netty-chain: {ok}/{n} steps ok, {errors} failed")
