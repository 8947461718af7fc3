"""tomcat-chain: Apache Tomcat 10 (Debian `tomcat10`: a JVM — the NIO connector's acceptor
and poller threads, a pool of request threads) running a servlet, `KvServlet`
(`sut/tomcat/KvServlet.java`, compiled once by `build()` from `setup.sh`), that keeps its
data in two Python store services, and two Python clients (`http.client`).

Ports: Tomcat = p[0], store 1 = p[1], store 2 = p[2]. Tomcat runs from a private
CATALINA_BASE (its own server.xml: one HTTP/1.1 connector, at most 6 request threads,
keep-alive; one web application, ROOT, with the servlet on `/item/*`; no shutdown port).
The servlet speaks the API of `sut/kv_http.py`: `PUT /item/K` stores the body in store
(K / 2) mod 2 (`PUT /kv/K`, which answers the first 16 hex digits of the value's SHA-1: a
digest that does not match becomes a 502), `GET /item/K` reads it back (`GET /kv/K`) and
answers its length and digest. It calls the stores with the JDK's `java.net.http`
client (HTTP/1.1, a pool of keep-alive connections driven by the client's selector thread,
1 s to connect and 1 s per call); a store that fails or does not answer in time gives the
client a 502. Each store (`tomcat-store --name 1|2`) is a `ThreadingHTTPServer` (a thread
per connection, HTTP/1.1 keep-alive) over a dict. The launcher's client puts then reads
back N keys every 20 ms, the helper `tomcat-client --name 2` 60 keys every 60 ms; each on
one keep-alive connection (2 s timeout), checking the answers, counting failures,
connecting again and going on. Each store says at its exit (SIGTERM) how many requests it
served; Tomcat's servlet says it in its `destroy()`.
"""

import hashlib
import http.client
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tomcat")
HOME = "/usr/share/tomcat10"
REQUESTS2 = 60

SERVER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- tomcat-chain's private server.xml (no Debian /etc/tomcat10, no shutdown port). -->
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="{port}" address="127.0.0.1" protocol="org.apache.coyote.http11.Http11NioProtocol"
               maxThreads="6" minSpareThreads="2" acceptCount="50" connectionTimeout="5000"
               keepAliveTimeout="5000" maxKeepAliveRequests="-1"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/>
    </Engine>
  </Service>
</Server>
"""

CONTEXT_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Context>
  <JarScanner scanClassPath="false" scanManifest="false"/>
</Context>
"""

WEB_XML = """<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true">
  <servlet>
    <servlet-name>kv</servlet-name>
    <servlet-class>KvServlet</servlet-class>
    <load-on-startup>1</load-on-startup>
  </servlet>
  <servlet-mapping>
    <servlet-name>kv</servlet-name>
    <url-pattern>/item/*</url-pattern>
  </servlet-mapping>
</web-app>
"""

LOGGING = """handlers = java.util.logging.ConsoleHandler
.handlers = java.util.logging.ConsoleHandler
.level = INFO
java.util.logging.ConsoleHandler.level = INFO
java.util.logging.ConsoleHandler.formatter = java.util.logging.SimpleFormatter
"""


def classes():
    """Where the compiled servlet lives: a directory named for the source's digest."""
    with open(os.path.join(HERE, "KvServlet.java"), "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-tomcat-{tag}")


def build():
    """Compiles KvServlet.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "KvServlet.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-cp", os.path.join(HOME, "lib", "servlet-api.jar"), "-d", tmp,
                    os.path.join(HERE, "KvServlet.java")], check=True)
    os.replace(tmp, out)
    return out


def digest(v):
    return hashlib.sha1(v).hexdigest()[:16]


class Store:
    """A store's data: key -> value."""

    def __init__(self):
        self.data = {}
        self.lock = threading.Lock()
        self.served = self.missing = 0

    def put(self, key, value):
        with self.lock:
            self.data[key] = value
            self.served += 1
        return digest(value)

    def get(self, key):
        with self.lock:
            v = self.data.get(key)
            if v is None:
                self.missing += 1
            else:
                self.served += 1
            return v


def store(name, port=None, label="tomcat store"):
    """Helper process `tomcat-store --name 1|2` (jetty-chain's store too, with its port)."""
    port = ports("tomcat-chain")[int(name)] if port is None else port
    data = Store()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, body):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def key(self):
            return self.path[len("/kv/"):] if self.path.startswith("/kv/") else None

        def do_PUT(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            k = self.key()
            if k is None or len(body) != n:
                return self.reply(400, b"bad request\n")
            self.reply(200, data.put(k, body).encode())

        def do_GET(self):
            k = self.key()
            v = data.get(k) if k is not None else None
            if v is None:
                return self.reply(404, b"no such key\n")
            self.reply(200, v)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True

    def bye(*_):
        log(f"{label} {name}: {data.served} requests ok, {data.missing} missing keys (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server.serve_forever()


def wait_http(port, proc, timeout):
    """Waits until Tomcat answers HTTP (it listens before its application is deployed)."""
    end = time.monotonic() + timeout
    wait_port(port, proc, timeout=timeout)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/")
            c.getresponse().read()
            c.close()
            return
        except (OSError, http.client.HTTPException):
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError(f"Tomcat does not answer on 127.0.0.1:{port}")
            time.sleep(0.2)


def client(name):
    """Helper process `tomcat-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("tomcat-chain")[0], name, REQUESTS2, 0.06)
    log(f"tomcat client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, s1, s2 = ports("tomcat-chain")[:3]
    cls = classes()
    if not os.path.exists(os.path.join(cls, "KvServlet.class")):
        log("tomcat-chain: the servlet was not built by setup.sh; compiling it now (inside the run)")
        cls = build()
    base = os.path.join(tmp, "tomcat")
    app = os.path.join(base, "webapps", "ROOT")
    for d in ("conf", "logs", "temp", "work", os.path.join(app, "WEB-INF"), os.path.join(app, "META-INF")):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    shutil.copytree(cls, os.path.join(app, "WEB-INF", "classes"))
    for path, text in ((os.path.join(base, "conf", "server.xml"), SERVER_XML.format(port=front)),
                       (os.path.join(base, "conf", "logging.properties"), LOGGING),
                       (os.path.join(app, "META-INF", "context.xml"), CONTEXT_XML),
                       (os.path.join(app, "WEB-INF", "web.xml"), WEB_XML)):
        with open(path, "w") as f:
            f.write(text)
    env = dict(os.environ, KV_STORE_PORTS=f"{s1},{s2}", PYTHONUNBUFFERED="1")
    java = ["java", "-Xms64m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
            "-Djava.awt.headless=true", f"-Djava.util.logging.config.file={base}/conf/logging.properties",
            "-Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager",
            f"-Dcatalina.home={HOME}", f"-Dcatalina.base={base}", f"-Djava.io.tmpdir={base}/temp",
            "-cp", f"{HOME}/bin/bootstrap.jar:{HOME}/bin/tomcat-juli.jar",
            "org.apache.catalina.startup.Bootstrap", "start"]
    with Daemons(tmp) as d:
        for i, port in ((1, s1), (2, s2)):
            p = d.start(f"store{i}", [PY, LAUNCHER, "tomcat-store", "--name", str(i)], env=env)
            wait_port(port, p)
        p = d.start("tomcat", java, env=env)
        wait_http(front, p, timeout=50)
        helper = d.start("client2", [PY, LAUNCHER, "tomcat-client", "--name", "2"], env=env)
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"tomcat-chain: {ok}/{n} steps ok, {errors} failed")
