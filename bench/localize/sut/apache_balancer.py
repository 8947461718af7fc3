"""apache-balancer: Apache httpd (Debian's `apache2`: C on APR, the event MPM — a parent
process and 2 child processes of 4 worker threads each, plus each child's listener thread)
with mod_proxy_balancer in front of 2 lighttpd servers (`lighttpd` with
`lighttpd-mod-webdav`: C, one event loop each) that store files by WebDAV in one shared
directory, and two HTTP clients (Python, `http.client`).

Ports: Apache = p[0], lighttpd 1 = p[1], lighttpd 2 = p[2]. Apache runs from a private
configuration (its own ServerRoot, PidFile, runtime directory and ports; started as
`apache2 -f CONF -DFOREGROUND`, its children as www-data) and passes `/kv/` to the balancer
`balancer://store`: by requests, round robin over the two members, each with a pool of
keep-alive connections per child; a member that cannot be reached is put in error for 1 s
and the request goes to the other one; a member that does not answer within 1 s, or whose
answer breaks off, gives the client a 502. Both lighttpd serve the same directory (the shared store): a
`PUT /kv/NAME` writes the file (201 or 204), a `GET` reads it back, whichever member
serves it. Each client (the launcher, and the helper `balancer-client --name 2`) writes
versions of its own keys (60 B to 3 KB) and reads each one back, on one keep-alive
connection (2 s timeout), checks every answer (status, and the bytes against what it
wrote), counts a failure, connects again and goes on.
"""

import hashlib
import http.client
import os
import time

from .common import drop_http, LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

KEYS = 16
REQUESTS2 = 60

APACHE = """# apache-balancer's private configuration (no Debian apache2.conf, no systemd).
ServerRoot "{root}"
ServerName localhost
PidFile "{root}/apache.pid"
DefaultRuntimeDir "{root}/run"
Mutex file:{root}/run default
Listen 127.0.0.1:{front}
User www-data
Group www-data
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule slotmem_shm_module /usr/lib/apache2/modules/mod_slotmem_shm.so
LoadModule proxy_module /usr/lib/apache2/modules/mod_proxy.so
LoadModule proxy_http_module /usr/lib/apache2/modules/mod_proxy_http.so
LoadModule proxy_balancer_module /usr/lib/apache2/modules/mod_proxy_balancer.so
LoadModule lbmethod_byrequests_module /usr/lib/apache2/modules/mod_lbmethod_byrequests.so
ErrorLog "{root}/error.log"
LogLevel warn
LogFormat "%h \\"%r\\" %>s %b %D %{{BALANCER_WORKER_ROUTE}}e" short
CustomLog "{root}/access.log" short
# Two children, 4 threads each, never more and never fewer (a child that dies is replaced).
StartServers 2
ServerLimit 2
ThreadsPerChild 4
ThreadLimit 4
MaxRequestWorkers 8
MinSpareThreads 1
MaxSpareThreads 8
MaxConnectionsPerChild 0
KeepAlive On
KeepAliveTimeout 5
MaxKeepAliveRequests 0
Timeout 5
<Proxy "balancer://store">
    BalancerMember "http://127.0.0.1:{b1}" route=1 retry=1 timeout=1 connectiontimeout=1
    BalancerMember "http://127.0.0.1:{b2}" route=2 retry=1 timeout=1 connectiontimeout=1
    ProxySet lbmethod=byrequests
</Proxy>
ProxyPass "/kv/" "balancer://store/kv/"
ProxyPassReverse "/kv/" "balancer://store/kv/"
<Location "/">
    Require all granted
</Location>
"""

LIGHTTPD = """server.document-root = "{store}"
server.port = {port}
server.bind = "127.0.0.1"
server.errorlog = "{tmp}/lighttpd-{n}-error.log"
server.max-keep-alive-idle = 10
server.max-keep-alive-requests = 10000
# Two servers share the directory: a cached stat would serve the other one's old version.
server.stat-cache-engine = "disable"
server.modules = ("mod_webdav")
webdav.activate = "enable"
webdav.is-readonly = "disable"
"""


def value(who, k, version):
    """The bytes client `who` writes as version `version` of key k."""
    seed = hashlib.sha1(f"{who} {k} {version}".encode()).hexdigest().encode()
    return (seed * 80)[: 60 + (89 * k + 137 * version) % 2940]


class Client:
    """One keep-alive connection to Apache (2 s timeout), made again after any failure."""

    def __init__(self, port, who):
        self.port, self.who = port, who
        self.conn = None
        self.errors = 0
        self.version = {}

    def call(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
        self.conn.request(method, path, body=body)
        r = self.conn.getresponse()
        return r.status, r.read()

    def step(self, k):
        """Writes the next version of key k and reads it back: True if both went right."""
        ver = self.version.get(k, 0) + 1
        self.version[k] = ver
        data = value(self.who, k, ver)
        path = f"/kv/{self.who}-{k}"
        try:
            status, _ = self.call("PUT", path, data)
            if status not in (201, 204):
                raise ValueError(f"PUT {path}: status {status}")
            status, got = self.call("GET", path)
            if status != 200:
                raise ValueError(f"GET {path}: status {status}")
            if got != data:
                raise ValueError(f"GET {path}: {len(got)} bytes, not the {len(data)} written")
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return False


def workload(name, n, pause):
    c = Client(ports("apache-balancer")[0], f"c{name}")
    ok = 0
    for i in steps(n):
        ok += c.step((i * 5) % KEYS)
        time.sleep(pause)
    return ok, c.errors


def client(name):
    """Helper process `balancer-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"balancer client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, b1, b2 = ports("apache-balancer")[:3]
    root = os.path.join(tmp, "apache")
    store = os.path.join(tmp, "store")
    for d in (root, os.path.join(root, "run"), os.path.join(store, "kv")):
        os.makedirs(d, exist_ok=True)
    conf = os.path.join(root, "apache2.conf")
    with open(conf, "w") as f:
        f.write(APACHE.format(root=root, front=front, b1=b1, b2=b2))
    for i, port in ((1, b1), (2, b2)):
        with open(os.path.join(tmp, f"lighttpd-{i}.conf"), "w") as f:
            f.write(LIGHTTPD.format(store=store, port=port, tmp=tmp, n=i))
    with Daemons(tmp) as d:
        for i, port in ((1, b1), (2, b2)):
            p = d.start(f"lighttpd-{i}", ["lighttpd", "-D", "-f", os.path.join(tmp, f"lighttpd-{i}.conf")])
            wait_port(port, p)
        p = d.start("apache", ["apache2", "-f", conf, "-DFOREGROUND"])
        wait_port(front, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "balancer-client", "--name", "2"])
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"apache-balancer: {ok}/{n} steps ok, {errors} failed")
    # What Apache said (its error log: failed backends, children that died).
    for name in ("error.log",):
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f, open(os.path.join(tmp, "apache-error.log"), "w") as out:
                out.write(f.read()[-20000:])
