"""trafficserver-cache: Apache Traffic Server 9.2 (Debian `trafficserver`: C++, one
`traffic_server` process with its event threads — ET_NET, an accept thread, task and cache
threads) as a caching reverse proxy in front of two origin servers on the standard
library's `http.server` (CPython, a thread per connection), and two clients on
`http.client`.

Ports: proxy = p[0], origin 1 = p[1], origin 2 = p[2]. Traffic Server runs in the
foreground from a private run root in the scratch directory (`runroot.yaml`: its
configuration, cache file, logs and lock there; the programs and plugins of the Debian
package), as the package's user `trafficserver`, without traffic_manager, with two network
threads, a 32 MB cache file and remap rules `/o1/` -> origin 1, `/o2/` -> origin 2. It gives
up on an origin after 2 s (connect and inactivity) without retry. An origin
(`ats-origin --name N`) serves `/obj/K` (cacheable for 2 s, an ETag that Traffic Server
revalidates with a 304 afterwards), `/live/K` (`no-store`: every request goes through) and
`POST /echo` (the body's SHA-1), and names itself in `X-Origin`. Client 1 (the launcher)
asks for N objects over one keep-alive connection, alternating origins, a mix of cacheable
and live objects and POSTs; client 2 (`ats-client --name 2`) the same on keys of its own.
Every reply is checked (status, the origin named, then length and SHA-1 of the body against
what an origin makes for it); a client with a 3 s timeout logs and counts a failed
request, connects again and goes on.
"""

import hashlib
import http.client
import os
import signal
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port
from .http_cache import serve_origin

TIMEOUT_S = 3.0
REQUESTS2 = 150

RECORDS = """CONFIG proxy.config.admin.user_id STRING trafficserver
CONFIG proxy.config.http.server_ports STRING {proxy}:ip-in=127.0.0.1
CONFIG proxy.config.exec_thread.autoconfig INT 0
CONFIG proxy.config.exec_thread.limit INT 2
CONFIG proxy.config.accept_threads INT 1
CONFIG proxy.config.task_threads INT 1
CONFIG proxy.config.cache.threads_per_disk INT 2
CONFIG proxy.config.cache.ram_cache.size INT 8388608
CONFIG proxy.config.url_remap.remap_required INT 1
CONFIG proxy.config.reverse_proxy.enabled INT 1
CONFIG proxy.config.http.insert_response_via_str INT 2
CONFIG proxy.config.http.cache.required_headers INT 2
CONFIG proxy.config.http.connect_attempts_timeout INT 2
CONFIG proxy.config.http.connect_attempts_max_retries INT 0
CONFIG proxy.config.http.connect_attempts_max_retries_dead_server INT 0
CONFIG proxy.config.http.transaction_no_activity_timeout_out INT 2
CONFIG proxy.config.http.transaction_no_activity_timeout_in INT 5
CONFIG proxy.config.http.down_server.cache_time INT 0
CONFIG proxy.config.log.logging_enabled INT 0
CONFIG proxy.config.diags.debug.enabled INT 0
"""
REMAP = """map http://127.0.0.1:{proxy}/o1/ http://127.0.0.1:{o1}/
map http://127.0.0.1:{proxy}/o2/ http://127.0.0.1:{o2}/
"""
RUNROOT = """prefix: /usr
exec_prefix: /usr
bindir: /usr/bin
sbindir: /usr/sbin
sysconfdir: {d}/etc
datadir: {d}/cache
includedir: /usr/include
libdir: /usr/lib/trafficserver
libexecdir: /usr/lib/trafficserver/modules
localstatedir: {d}
runtimedir: {d}/run
logdir: {d}/log
cachedir: {d}/cache
"""
# The package's own configuration files that this set-up keeps as they are.
KEPT = ["cache.config", "hosting.config", "ip_allow.yaml", "logging.yaml", "parent.config", "plugin.config",
        "sni.yaml", "socks.config", "splitdns.config", "ssl_multicert.config", "strategies.yaml",
        "volume.config"]


def body(k):
    """What an origin serves for object k."""
    k = int(k)
    seed = hashlib.sha1(f"ats object {k}".encode()).hexdigest().encode()
    return (seed * (5 + k % 37))[: 280 + 131 * (k % 29)]


def origin(name):
    """Helper process `ats-origin --name N`: origin server N (1 or 2)."""
    serve_origin(ports("trafficserver-cache")[int(name)], body, f"ats origin {name}", "no-store",
                 origin_name=name)


class Client:
    """A keep-alive client of Traffic Server, connected again after any failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.hits = 0

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def check(self, i, method, path, want, o, data=None):
        """One request; True when the reply came from origin `o` (or its cached copy) with
        the length and SHA-1 of `want`. A failure is logged, the connection closed."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            self.conn.request(method, path, body=data)
            r = self.conn.getresponse()
            got = r.read()
            if r.status != 200:
                raise ValueError(f"{method} {path}: status {r.status}")
            if r.getheader("X-Origin") != str(o):
                raise ValueError(f"{method} {path}: from origin {r.getheader('X-Origin')}, not {o}")
            if len(got) != len(want) or hashlib.sha1(got).digest() != hashlib.sha1(want).digest():
                raise ValueError(f"{method} {path}: {len(got)} bytes, SHA-1 {hashlib.sha1(got).hexdigest()[:12]}, "
                                 f"wanted {len(want)} bytes, {hashlib.sha1(want).hexdigest()[:12]}")
            if "cH" in (r.getheader("Via") or ""):
                self.hits += 1
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            log(f"request {i} failed: {e!r}")
            self.close()
            return False


def request(c, i, key0, keys):
    """Request i of a client: every fourth a POST to /echo, every fourth a live object, the
    others cacheable objects key0 + i % keys; the origin changes every four requests."""
    o = 1 + (i // 4) % 2
    if i % 4 == 1:
        data = f"ats post {key0} {i} ".encode() * (1 + i % 23)
        return c.check(i, "POST", f"/o{o}/echo", hashlib.sha1(data).hexdigest().encode(), o, data)
    if i % 4 == 3:
        return c.check(i, "GET", f"/o{o}/live/{key0 + i}", body(key0 + i), o)
    k = key0 + i % keys
    return c.check(i, "GET", f"/o{o}/obj/{k}", body(k), o)


def client(name):
    """Helper process `ats-client --name 2`: REQUESTS2 requests on keys of its own."""
    term = terminated()
    c = Client(ports("trafficserver-cache")[0])
    ok = i = 0
    end = time.monotonic() + WORKLOAD_S
    while not term.is_set() and time.monotonic() < end and i < REQUESTS2:
        ok += request(c, i, 1000, 17)
        i += 1
        time.sleep(0.07)
    c.close()
    log(f"trafficserver-cache client {name}: {ok}/{i} requests ok, {i - ok} failed, {c.hits} cache hits"
        f"{' (told to stop)' if term.is_set() else ''}")


def configure(tmp, proxy, o1, o2):
    """The private run root: configuration, cache file, log and run directories."""
    ts = os.path.join(tmp, "ts")
    for sub in ("etc", "run", "log", "cache"):
        os.makedirs(os.path.join(ts, sub), exist_ok=True)
    etc = os.path.join(ts, "etc")
    for name in KEPT:
        with open(os.path.join("/etc/trafficserver", name), "rb") as f, open(os.path.join(etc, name), "wb") as g:
            g.write(f.read())
    os.symlink("/etc/trafficserver/body_factory", os.path.join(etc, "body_factory"))
    files = {"records.config": RECORDS.format(proxy=proxy), "remap.config": REMAP.format(proxy=proxy, o1=o1, o2=o2),
             "storage.config": f"{ts}/cache 32M\n"}
    for name, text in files.items():
        with open(os.path.join(etc, name), "w") as f:
            f.write(text)
    with open(os.path.join(ts, "runroot.yaml"), "w") as f:
        f.write(RUNROOT.format(d=ts))
    # traffic_server drops to the user `trafficserver`, which writes its cache, logs and lock.
    for root, dirs, names in os.walk(tmp):
        for x in dirs + names:
            if not os.path.islink(os.path.join(root, x)):
                os.chmod(os.path.join(root, x), 0o777 if x in dirs else 0o666)
    os.chmod(tmp, 0o777)
    return os.path.join(ts, "runroot.yaml")


def run(tmp, n):
    proxy, o1, o2 = ports("trafficserver-cache")[:3]
    runroot = configure(tmp, proxy, o1, o2)
    group = None
    try:
        with Daemons(tmp) as d:
            for k, port in ((1, o1), (2, o2)):
                p = d.start(f"origin{k}", [PY, LAUNCHER, "ats-origin", "--name", str(k)])
                wait_port(port, p, timeout=10)
            p = d.start("traffic_server", ["traffic_server", f"--run-root={runroot}"], cwd=tmp,
                        start_new_session=True)
            group = p.pid
            wait_port(proxy, p, timeout=30)
            other = d.start("client2", [PY, LAUNCHER, "ats-client", "--name", "2"])
            c = Client(proxy)
            ok = failed = 0
            for i in steps(n):
                good = request(c, i, 0, 19)
                ok, failed = ok + good, failed + (not good)
                time.sleep(0.05)
            c.close()
            try:
                other.wait(timeout=WORKLOAD_S + 5)
            except Exception:
                log("client 2 did not stop")
            log(f"trafficserver-cache: {ok}/{n} requests ok, {failed} failed, {c.hits} cache hits")
    finally:
        # traffic_server and the crash-log helper it forks share a process group: whatever
        # is left of it (a stopped server outlives its SIGTERM by 5 s) is killed.
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
