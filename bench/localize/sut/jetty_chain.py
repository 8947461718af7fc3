"""jetty-chain: Eclipse Jetty 9.4 (Debian `jetty9`/`libjetty9-java`: a JVM — Jetty's own
ServerConnector, its acceptor and selector threads, and its QueuedThreadPool of request
threads) running a servlet, `JettyKvServlet` (`sut/jetty/JettyKvServlet.java`, compiled once
by `build()` from `setup.sh` against Jetty's servlet-api-3.1.jar), that keeps its data in a
Python store service, and two Python clients (`http.client`).

Ports: Jetty = p[0], store = p[1]. Jetty is started by hand (`java -jar start.jar`, in the
JVM of the launcher's command, no service, no fork) from a private `jetty.base` (its own
start.ini: the server, http and deploy modules only, the connector on 127.0.0.1, at most 8
pool threads, the deployer's scanner off; one web application, ROOT, a directory with the
servlet on `/item/*`). The servlet speaks the API of `sut/kv_http.py`: `PUT /item/K` stores
the body in the store (`PUT /kv/K`, which answers the first 16 hex digits of the value's
SHA-1: a digest that does not match becomes a 502), `GET /item/K` reads it back (`GET
/kv/K`) and answers its length and digest. It calls the store with the JDK's
`java.net.http` client (HTTP/1.1, a pool of keep-alive connections driven by the client's
selector thread, 1 s to connect and 1 s per call); a store that fails or does not answer in
time gives the client a 502. The store (`jetty-store`) is a `ThreadingHTTPServer` (a thread
per connection, HTTP/1.1 keep-alive) over a dict. The launcher's client puts then reads back
N keys every 20 ms, the helper `jetty-client --name 2` 60 keys every 60 ms; each on one
keep-alive connection (2 s timeout), checking length and digest, counting failures,
connecting again and going on. The store says at its exit (SIGTERM) how many requests it
served; the servlet says it in its `destroy()`.
"""

import hashlib
import os
import shutil
import subprocess

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload
from .tomcat_chain import store as tomcat_store
from .tomcat_chain import wait_http

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jetty")
HOME = "/usr/share/jetty9"
API = os.path.join(HOME, "lib", "servlet-api-3.1.jar")
REQUESTS2 = 60

START_INI = """# jetty-chain's private jetty.base (no Debian /etc/jetty9 start.ini, no service).
--module=server,http,deploy
jetty.http.host=127.0.0.1
jetty.http.port={port}
jetty.http.idleTimeout=5000
jetty.threadPool.minThreads=4
jetty.threadPool.maxThreads=8
jetty.deploy.scanInterval=0
"""

WEB_XML = """<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="http://xmlns.jcp.org/xml/ns/javaee" version="3.1" metadata-complete="true">
  <servlet>
    <servlet-name>kv</servlet-name>
    <servlet-class>JettyKvServlet</servlet-class>
    <load-on-startup>1</load-on-startup>
  </servlet>
  <servlet-mapping>
    <servlet-name>kv</servlet-name>
    <url-pattern>/item/*</url-pattern>
  </servlet-mapping>
</web-app>
"""


def classes():
    """Where the compiled servlet lives: a directory named for the source's digest."""
    with open(os.path.join(HERE, "JettyKvServlet.java"), "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-jetty-{tag}")


def build():
    """Compiles JettyKvServlet.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "JettyKvServlet.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-cp", API, "-d", tmp, os.path.join(HERE, "JettyKvServlet.java")],
                   check=True)
    os.replace(tmp, out)
    return out


def store(name):
    """Helper process `jetty-store`: tomcat-chain's store on jetty-chain's port p[1]."""
    tomcat_store(name, port=ports("jetty-chain")[1], label="jetty store")


def client(name):
    """Helper process `jetty-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("jetty-chain")[0], name, REQUESTS2, 0.06)
    log(f"jetty client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, back = ports("jetty-chain")[:2]
    cls = classes()
    if not os.path.exists(os.path.join(cls, "JettyKvServlet.class")):
        log("jetty-chain: the servlet was not built by setup.sh; compiling it now (inside the run)")
        cls = build()
    base = os.path.join(tmp, "jetty")
    app = os.path.join(base, "webapps", "ROOT")
    for d in ("logs", "temp", os.path.join(app, "WEB-INF")):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    shutil.copytree(cls, os.path.join(app, "WEB-INF", "classes"))
    for path, text in ((os.path.join(base, "start.ini"), START_INI.format(port=front)),
                       (os.path.join(app, "WEB-INF", "web.xml"), WEB_XML)):
        with open(path, "w") as f:
            f.write(text)
    env = dict(os.environ, KV_STORE_PORTS=f"{back}", PYTHONUNBUFFERED="1")
    java = ["java", "-Xms64m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
            "-Djava.awt.headless=true", f"-Djava.io.tmpdir={base}/temp",
            "-jar", os.path.join(HOME, "start.jar"), f"jetty.home={HOME}", f"jetty.base={base}"]
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "jetty-store", "--name", "1"], env=env)
        wait_port(back, p)
        p = d.start("jetty", java, env=env, cwd=base)
        wait_http(front, p, timeout=50)
        helper = d.start("client2", [PY, LAUNCHER, "jetty-client", "--name", "2"], env=env)
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"jetty-chain: {ok}/{n} steps ok, {errors} failed")
