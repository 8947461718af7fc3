"""The catalog-haproxy-tomcat system of the demand suite (added 2026-11-29 to the validation
half, branch demand-val5, before any method was run on it):
HAProxy (Debian `haproxy`: one process, one thread; round robin over the two application
servers, at most 4 requests at a time to each, the rest queued; keep-alive connections to
them, reused) -> two Apache Tomcat 10 servers (Debian `tomcat10`: a JVM each, the NIO
connector's acceptor and poller threads and a pool of at most 4 request threads, running
`catalog/CatalogServlet.java`, burning a known CPU time per request type) -> MariaDB
(Debian `mariadb-server`, a fresh data directory, one server thread per connection) through
JDBC (Debian `libmariadb-java`, MariaDB Connector/J; each request thread keeps one
connection).

Unlike the suite's other systems its application tier is a JVM (many threads in one
process, a JIT compiler and a garbage collector beside the requests), its pool is two
servers behind a load balancer, and the request types differ in how many queries they make
(1, 2, 3). The load changes phase every 30 s (intensity and mix), as blog-lighttpd-php's.

`systems.py run catalog-haproxy-tomcat` calls `start` to bring the tiers up and get the
load's request function, `fault` at the fault's time and `stats` at the end. Faults:

- `index`: the items' SKU index dropped (every item lookup scans the table);
- `lock`: lock contention on the items table (a session holding `LOCK TABLES items WRITE`
  20 ms of every 80: every request type waits for it);
- `dbread`: MariaDB's socket reads delayed 2 ms each from the fault's instant on, by
  `culprit record --inject 'recv|read|recvfrom|recvmsg:delay=2ms,at=T,exe=mariadbd'` (run.py
  computes T; the load starts at `--start-at`);
- `hog`: CPU taken from the second Tomcat (at the fault, every thread of its JVM and three
  busy loops are put on CPU 0, the JVM at nice 19: `shop.take_cpu`; it is the tier
  `app-hogged` in every run).

The servlet is compiled once by `build()` (from setup.sh, outside every recording).
"""

import hashlib
import http.client
import os
import re
import shutil
import subprocess
import sys
import time

import blog
import shop

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "catalog", "CatalogServlet.java")
NAME = "catalog-haproxy-tomcat"
FAULTS = ["index", "lock", "dbread", "hog"]
FAULT_TIERS = {"index": ["database"], "lock": ["database"], "dbread": ["database"], "hog": ["app-hogged"]}
CPU_DEMAND_S = {"app": {"item": 0.001, "browse": 0.004, "rate": 0.0007}}
SERVERS = 2
THREADS = 4
# The rule run.py passes to `culprit record --inject` for the `dbread` fault.
DBREAD_RULE = "recv|read|recvfrom|recvmsg:delay=2ms,at={at},exe=mariadbd"
# A phase every 30 s (as blog-lighttpd-php).
PHASE_S = 30.0
TOMCAT = "/usr/share/tomcat10"
JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"
SCHEMA = (
    "CREATE DATABASE catalog",
    "USE catalog",
    "CREATE TABLE catalog.categories (id INT PRIMARY KEY, name VARCHAR(32)) ENGINE=InnoDB",
    "INSERT INTO catalog.categories SELECT seq, CONCAT('category ', seq) FROM seq_0_to_99",
    "CREATE TABLE catalog.items (id INT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(16), category INT,"
    " title VARCHAR(48), price INT, rating BIGINT NOT NULL DEFAULT 0, descr VARCHAR(300)) ENGINE=InnoDB",
    "INSERT INTO catalog.items(sku, category, title, price, descr) SELECT CONCAT('s', LPAD(seq, 7, '0')),"
    " seq % 100, CONCAT('item ', MD5(seq)), seq % 997, REPEAT('y', 60 + seq % 200) FROM seq_1_to_30000",
    "CREATE INDEX items_sku ON catalog.items(sku)",
    "CREATE INDEX items_category ON catalog.items(category)",
    "CREATE TABLE catalog.ratings (id INT AUTO_INCREMENT PRIMARY KEY, item INT, stars INT) ENGINE=InnoDB",
    "ANALYZE TABLE catalog.items",
)

SERVER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- catalog-haproxy-tomcat's private server.xml (no Debian /etc/tomcat10, no shutdown port). -->
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="{port}" address="127.0.0.1" protocol="org.apache.coyote.http11.Http11NioProtocol"
               maxThreads="{threads}" minSpareThreads="{threads}" acceptCount="64" connectionTimeout="30000"
               keepAliveTimeout="60000" maxKeepAliveRequests="-1"/>
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
    <servlet-name>catalog</servlet-name>
    <servlet-class>CatalogServlet</servlet-class>
    <load-on-startup>1</load-on-startup>
  </servlet>
  <servlet-mapping>
    <servlet-name>catalog</servlet-name>
    <url-pattern>/</url-pattern>
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
    with open(SRC, "rb") as f:
        tag = hashlib.sha1(f.read()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-demand-catalog-%s" % tag)


def build():
    """Compiles CatalogServlet.java once (setup.sh), outside every recording."""
    out = classes()
    if os.path.exists(os.path.join(out, "CatalogServlet.class")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["javac", "-nowarn", "-cp", os.path.join(TOMCAT, "lib", "servlet-api.jar"), "-d", tmp, SRC],
                   check=True)
    os.replace(tmp, out)
    return out


def haproxy_cfg(tmp, port, servers):
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as f:
        f.write(
            "global\n  nbthread 1\n  maxconn 256\n"
            "defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n"
            "  timeout queue 30s\n  option http-keep-alive\n"
            "frontend fe\n  bind 127.0.0.1:%d\n  default_backend be\n"
            "backend be\n  balance roundrobin\n  http-reuse always\n" % port
        )
        for i, s in enumerate(servers):
            f.write("  server tomcat%d 127.0.0.1:%d maxconn %d\n" % (i, s, THREADS))
    return path


def tomcat_base(tmp, i, port, cls):
    """Tomcat's private CATALINA_BASE tmp/tomcatI: its server.xml (one connector on `port`)
    and one web application, ROOT, with the servlet and the JDBC driver."""
    base = os.path.join(tmp, "tomcat%d" % i)
    app = os.path.join(base, "webapps", "ROOT")
    shutil.rmtree(base, ignore_errors=True)
    for d in ("conf", "logs", "temp", "work", os.path.join(app, "WEB-INF", "lib"), os.path.join(app, "META-INF")):
        os.makedirs(os.path.join(base, d))
    shutil.copytree(cls, os.path.join(app, "WEB-INF", "classes"))
    shutil.copy(os.path.realpath(JDBC_JAR), os.path.join(app, "WEB-INF", "lib", "mariadb-java-client.jar"))
    for path, text in ((os.path.join(base, "conf", "server.xml"), SERVER_XML.format(port=port, threads=THREADS)),
                       (os.path.join(base, "conf", "logging.properties"), LOGGING),
                       (os.path.join(app, "META-INF", "context.xml"), CONTEXT_XML),
                       (os.path.join(app, "WEB-INF", "web.xml"), WEB_XML)):
        with open(path, "w") as f:
            f.write(text)
    return base


def java_cmd(base):
    return ["java", "-Xms64m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
            "-XX:-UsePerfData", "-Djava.awt.headless=true",
            "-Djava.util.logging.config.file=%s/conf/logging.properties" % base,
            "-Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager",
            "-Dcatalina.home=%s" % TOMCAT, "-Dcatalina.base=%s" % base, "-Djava.io.tmpdir=%s/temp" % base,
            "-cp", "%s/bin/bootstrap.jar:%s/bin/tomcat-juli.jar" % (TOMCAT, TOMCAT),
            "org.apache.catalina.startup.Bootstrap", "start"]


def start(tmp, base, procs, spawn, wait_port, http_get, moved):
    """Starts the tiers (HAProxy on `base`, Tomcat on base+1 and base+2, MariaDB on base+3)
    into `procs`; returns the load's `send(first, k)`. The Tomcat the `hog` fault is made on
    is put in `moved`."""
    shop.maria_start(tmp, base + 3, spawn, procs, SCHEMA)
    cls = classes()
    if not os.path.exists(os.path.join(cls, "CatalogServlet.class")):
        print("catalog: the servlet was not built by setup.sh; compiling it now", file=sys.stderr)
        cls = build()
    env = dict(os.environ, CATALOG_DB_PORT=str(base + 3), CATALOG_STATS=tmp)
    servers = [base + 1 + i for i in range(SERVERS)]
    procs["app"] = []
    for i, port in enumerate(servers):
        d = tomcat_base(tmp, i, port, cls)
        procs["app"].append(spawn(java_cmd(d), env=env, cwd=d, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(tmp, "tomcat%d.log" % i), "w")))
    # Tomcat listens before its application is deployed: each answers a request first.
    end = time.time() + 120
    for i, port in enumerate(servers):
        while True:
            try:
                if http_get(port, "/item/1") == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            if time.time() > end or procs["app"][i].poll() is not None:
                raise RuntimeError("Tomcat %d does not answer on 127.0.0.1:%d: see %s"
                                   % (i, port, os.path.join(tmp, "tomcat%d.log" % i)))
            time.sleep(0.3)
    procs["haproxy"] = [spawn(["haproxy", "-db", "-f", haproxy_cfg(tmp, base, servers)],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "haproxy.log"), "w"))]
    wait_port(base)
    # Every request thread of each server has its connection, and the JIT compiler has seen
    # each request type, before the load begins.
    for k in range(20 * SERVERS * THREADS):
        http_get(base, "/item/%d" % k)
        http_get(base, "/browse/%d" % k)
        http_get(base, "/rate/%d" % k)
    # The servlet's measures of CPU per request from here on are the load's (CatalogServlet).
    open(os.path.join(tmp, "load"), "w").close()
    moved["app-hogged"] = [procs["app"][1].pid]

    # The first type's keys spread over its whole key space.
    return shop.sender(http_get, base, "/item/%d", "/browse/%d", "/rate/%d", lambda k: k * 7919)


def fault(kind, tmp, base, extra, spawn, moved):
    """Makes fault `kind` now."""
    open(os.path.join(tmp, "fault"), "w").close()
    if kind == "index":
        shop.sql(base + 3, "DROP INDEX items_sku ON catalog.items")
    elif kind == "lock":
        extra.append(spawn([sys.executable, os.path.join(HERE, "shop.py"), "locker", str(base + 3),
                            "catalog", "items"]))
    elif kind == "hog":
        shop.hog(moved["app-hogged"][0], extra, spawn)
    elif kind != "dbread":
        raise SystemExit("unknown fault %s for %s" % (kind, NAME))


def stats(tmp):
    """The servers' own CPU per request before the fault (app-PID.tsv) as sums and counts
    per type in app-PID.json (what run.py pools)."""
    blog.stats(tmp, "app", CPU_DEMAND_S["app"])


def type_of(name):
    """The request type (of CPU_DEMAND_S) a Tomcat service found by `culprit demand` is, from
    its name's downstream calls ("port:B+1: → 3× peer:B+3 (…); …"; a Tomcat's only
    downstream is MariaDB): one query, an item; two, a browse; three, a rating. None
    otherwise."""
    if not re.match(r"port:\d+", name):
        return None
    n = sum(int(c) for c in re.findall(r"(\d+)× peer:\d+", name))
    return {1: "item", 2: "browse", 3: "rate"}.get(n)


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(build())
    else:
        raise SystemExit("usage: catalog.py build")
