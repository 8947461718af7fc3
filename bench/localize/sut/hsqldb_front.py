"""hsqldb-front: an HSQLDB 2.7 database server (Debian `libhsqldb-java`: a JVM,
`org.hsqldb.server.Server`, a listener thread and a thread per connection, HSQL protocol)
behind a small Java HTTP front, `HsqlFront` (`sut/hsqldb/HsqlFront.java`, compiled once by
`build()` from `setup.sh` with the installed JDK: `com.sun.net.httpserver` with a fixed
pool of 4 request threads, a pool of 3 JDBC connections), and two Python clients
(`http.client`). Two JVMs talking over TCP.

Ports: front = p[0], HSQLDB = p[1]. The database (`kv`) lives in private files in the
scratch directory (`file:` catalog, created at start). The front speaks the API of
`sut/kv_http.py`: `PUT /item/K` stores the body in table `kv` (a MERGE), `GET /item/K` reads
it back (a SELECT) and answers its length and the first 16 hex digits of its SHA-1. Every
JDBC call (connecting included) is given up after 1 s (the statements also carry a 1 s
query timeout), its connection dropped and a new one opened; a request waits at most 1 s for
a pooled connection; any failure becomes a 502. Before it listens, the front fills its pool
with 20 s a call (the first connection loads the driver, slow on a loaded machine) and runs
both statements once on each connection (key 0, which no client uses). The launcher's client puts then reads back N
keys every 20 ms, the helper `hsqldb-client --name 2` 60 keys every 60 ms; each on one
keep-alive connection (2 s timeout), checking length and digest, counting failures,
connecting again and going on. The front says at its exit (SIGTERM) how many requests it
served.
"""

import hashlib
import os
import shutil
import subprocess

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload
from .tomcat_chain import wait_http

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hsqldb")
JAR = "/usr/share/java/hsqldb.jar"
REQUESTS2 = 60
JVM = ["java", "-Xms48m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
       "-Djava.awt.headless=true"]


def classes():
    """Where the compiled front lives: a directory named for the source's digest."""
    with open(os.path.join(HERE, "HsqlFront.java"), "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-hsqldb-{tag}")


def build():
    """Compiles HsqlFront.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "HsqlFront.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-d", tmp, os.path.join(HERE, "HsqlFront.java")], check=True)
    os.replace(tmp, out)
    return out


def client(name):
    """Helper process `hsqldb-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("hsqldb-front")[0], name, REQUESTS2, 0.06)
    log(f"hsqldb client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, db = ports("hsqldb-front")[:2]
    cls = classes()
    if not os.path.exists(os.path.join(cls, "HsqlFront.class")):
        log("hsqldb-front: the front was not built by setup.sh; compiling it now (inside the run)")
        cls = build()
    data = os.path.join(tmp, "hsqldb")
    os.makedirs(data, exist_ok=True)
    server = [*JVM, "-cp", JAR, "org.hsqldb.server.Server", "--database.0", f"file:{data}/kv", "--dbname.0", "kv",
              "--address", "127.0.0.1", "--port", str(db), "--silent", "true", "--trace", "false",
              "--no_system_exit", "true"]
    fe = [*JVM, "-cp", f"{cls}:{JAR}", "HsqlFront", str(front), f"jdbc:hsqldb:hsql://127.0.0.1:{db}/kv"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("hsqldb", server, cwd=data)
        wait_port(db, p, timeout=40)
        p = d.start("front", fe, env=env, cwd=tmp)
        wait_http(front, p, timeout=40)
        helper = d.start("client2", [PY, LAUNCHER, "hsqldb-client", "--name", "2"], env=env)
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"hsqldb-front: {ok}/{n} steps ok, {errors} failed")
