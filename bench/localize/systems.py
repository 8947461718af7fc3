#!/usr/bin/env python3
"""The third-party systems of Culprit's public fault suite, each started as a multi-process
system on loopback, driven by a bounded workload, and stopped.

    python3 bench/localize/systems.py SYSTEM --dir DIR [--requests N]

SYSTEM is one of SYSTEMS below. Every daemon is an unmodified program from Debian or PyPI;
the clients are small scripts written here and tolerate failures the way real clients do
(a failed request is logged, the connection is made again, the workload goes on), so that a
fault injected into a daemon by `culprit record --inject` has consequences that the trace
shows. Everything listens on 127.0.0.1, on ports from `LOCALIZE_PORT_BASE` (default 23000)
up; every wait is bounded, and the launcher stops its daemons (SIGTERM, then SIGKILL) on
every exit path.

| system | processes | what it is |
|---|---|---|
| `memcache-proxy` | twemproxy (nutcracker) + 2 memcached + client | a sharding proxy and its backends (C) |
| `http-proxy` | haproxy + 2 nginx (master + worker each) + client | an HTTP load balancer (C) |
| `job-queue` | beanstalkd + producer + 2 worker processes | a work queue (C server, Python clients) |
| `pyro-rpc` | Pyro5 name server + 2 Pyro5 servers + client | Python RPC with a naming service (Python) |
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

BASE = int(os.environ.get("LOCALIZE_PORT_BASE", "23000"))
# Debian puts daemons in /usr/sbin, which a user's PATH may lack.
os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
PY = sys.executable
HERE = os.path.abspath(__file__)

# Ports of each system: (front, backend 1, backend 2).
PORTS = {
    "memcache-proxy": (BASE + 0, BASE + 1, BASE + 2),
    "http-proxy": (BASE + 10, BASE + 11, BASE + 12),
    "job-queue": (BASE + 20, 0, 0),
    "pyro-rpc": (BASE + 30, BASE + 31, BASE + 32),
}


def log(*a):
    print("systems:", *a, file=sys.stderr, flush=True)


def wait_port(port, proc=None, timeout=10.0):
    """Waits until 127.0.0.1:port accepts connections (or the process died / time ran out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class Daemons:
    """Started daemons, stopped in reverse order on exit."""

    def __init__(self, logdir):
        self.procs = []
        self.logdir = logdir

    def start(self, name, argv, **kw):
        out = open(os.path.join(self.logdir, f"{name}.log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
        self.procs.append((name, p))
        return p

    def stop(self):
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 5
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{name} ignored SIGTERM: killed")
                p.kill()
                p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class LineClient:
    """A text-protocol client on one TCP connection that reconnects after any failure."""

    def __init__(self, port, timeout=2.0):
        self.port = port
        self.timeout = timeout
        self.sock = None
        self.buf = b""
        self.errors = 0

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def request(self, fn):
        """Runs fn(self) on a connected client; on failure counts it and reconnects."""
        try:
            if self.sock is None:
                self.connect()
            return fn(self)
        except (OSError, ConnectionError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r}")
            self.close()
            return None


# --- memcache-proxy: twemproxy in front of two memcached ---------------------------------


def memcache_proxy(tmp, n):
    front, m1, m2 = PORTS["memcache-proxy"]
    conf = os.path.join(tmp, "nutcracker.yml")
    with open(conf, "w") as f:
        f.write(
            "alpha:\n"
            f"  listen: 127.0.0.1:{front}\n"
            "  hash: fnv1a_64\n  distribution: modula\n  timeout: 400\n"
            "  server_retry_timeout: 200\n  server_failure_limit: 3\n  auto_eject_hosts: false\n"
            f"  servers:\n   - 127.0.0.1:{m1}:1 mc1\n   - 127.0.0.1:{m2}:1 mc2\n"
        )
    with Daemons(tmp) as d:
        for i, port in ((1, m1), (2, m2)):
            p = d.start(f"memcached{i}", ["memcached", "-u", "root", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1"])
            wait_port(port, p)
        p = d.start("nutcracker", ["nutcracker", "-c", conf, "-o", os.path.join(tmp, "nutcracker.out"), "-s", str(front + 5)])
        wait_port(front, p)
        c = LineClient(front)
        ok = 0
        for i in range(n):
            key, val = f"key:{i % 37}", f"value-{i}-" + "x" * (i % 50)

            def setget(c):
                c.sock.sendall(f"set {key} 0 0 {len(val)}\r\n{val}\r\n".encode())
                r = c.line()
                if r != b"STORED":
                    raise ValueError(f"set: {r!r}")
                c.sock.sendall(f"get {key}\r\n".encode())
                r = c.line()
                if not r.startswith(b"VALUE "):
                    raise ValueError(f"get: {r!r}")
                body = c.exact(int(r.split()[3]) + 2)
                if c.line() != b"END" or body[:-2] != val.encode():
                    raise ValueError("get: bad value")
                return True

            ok += bool(c.request(setget))
        c.close()
        log(f"memcache-proxy: {ok}/{n} set+get ok, {c.errors} failed")


# --- http-proxy: haproxy in front of two nginx -------------------------------------------


def http_proxy(tmp, n):
    import http.client

    front, b1, b2 = PORTS["http-proxy"]
    www = os.path.join(tmp, "www")
    os.makedirs(www, exist_ok=True)
    for i in range(8):
        with open(os.path.join(www, f"page{i}.html"), "w") as f:
            f.write(f"<html><body>page {i} " + "lorem ipsum " * (20 + 30 * i) + "</body></html>\n")
    with Daemons(tmp) as d:
        for i, port in ((1, b1), (2, b2)):
            conf = os.path.join(tmp, f"nginx{i}.conf")
            with open(conf, "w") as f:
                f.write(
                    "daemon off; master_process on; worker_processes 1; user root;\n"
                    f"pid {tmp}/nginx{i}.pid; error_log {tmp}/nginx{i}.err info;\n"
                    "events { worker_connections 64; }\n"
                    "http { access_log off; keepalive_requests 1000;\n"
                    f"  client_body_temp_path {tmp}/b{i}; proxy_temp_path {tmp}/p{i};\n"
                    f"  fastcgi_temp_path {tmp}/f{i}; uwsgi_temp_path {tmp}/u{i}; scgi_temp_path {tmp}/s{i};\n"
                    f"  server {{ listen 127.0.0.1:{port}; root {www}; }} }}\n"
                )
            p = d.start(f"nginx{i}", ["nginx", "-c", conf, "-p", tmp, "-e", f"{tmp}/nginx{i}.err"])
            wait_port(port, p)
        conf = os.path.join(tmp, "haproxy.cfg")
        with open(conf, "w") as f:
            f.write(
                "global\n  maxconn 64\n"
                "defaults\n  mode http\n  timeout connect 1s\n  timeout client 5s\n  timeout server 400ms\n"
                "  option http-keep-alive\n  retries 0\n"
                f"frontend fe\n  bind 127.0.0.1:{front}\n  default_backend be\n"
                "backend be\n  balance roundrobin\n  http-reuse always\n"
                f"  server s1 127.0.0.1:{b1}\n  server s2 127.0.0.1:{b2}\n"
            )
        p = d.start("haproxy", ["haproxy", "-f", conf, "-db"])
        wait_port(front, p)
        ok = errors = 0
        conn = None
        for i in range(n):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", front, timeout=2)
                conn.request("GET", f"/page{i % 8}.html")
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or not body.endswith(b"</html>\n"):
                    raise ValueError(f"status {r.status}, {len(body)} bytes")
                ok += 1
            except (OSError, ValueError, http.client.HTTPException) as e:
                errors += 1
                log(f"request failed: {e!r}")
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()
        log(f"http-proxy: {ok}/{n} GET ok, {errors} failed")


# --- job-queue: beanstalkd, a producer and two workers -----------------------------------


def beanstalk_worker(name):
    """A worker process: reserves jobs, 'works', deletes them; exits on a `stop` job."""
    port = PORTS["job-queue"][0]
    c = LineClient(port, timeout=3.0)
    done = 0
    idle_until = time.monotonic() + 15
    while time.monotonic() < idle_until:

        def one(c):
            c.sock.sendall(b"watch jobs\r\n")
            if not c.line().startswith(b"WATCHING"):
                raise ValueError("watch")
            c.sock.sendall(b"reserve-with-timeout 1\r\n")
            r = c.line()
            if r == b"TIMED_OUT":
                return "idle"
            if not r.startswith(b"RESERVED "):
                raise ValueError(f"reserve: {r!r}")
            _, jid, size = r.split()
            body = c.exact(int(size) + 2)[:-2]
            c.sock.sendall(b"delete " + jid + b"\r\n")
            r = c.line()
            if r not in (b"DELETED", b"NOT_FOUND"):
                raise ValueError(f"delete: {r!r}")
            return "stop" if body == b"stop" else "job"

        r = c.request(one)
        if r == "stop":
            break
        if r == "job":
            done += 1
            idle_until = time.monotonic() + 15
    c.close()
    log(f"worker {name}: {done} jobs, {c.errors} failed")


def job_queue(tmp, n):
    port = PORTS["job-queue"][0]
    with Daemons(tmp) as d:
        p = d.start("beanstalkd", ["beanstalkd", "-l", "127.0.0.1", "-p", str(port)])
        wait_port(port, p)
        workers = [d.start(f"worker{i}", [PY, HERE, "job-queue-worker", "--name", str(i)]) for i in (1, 2)]
        c = LineClient(port)
        ok = 0
        for i in range(n):
            body = f"job {i} " + "y" * (i % 40)

            def put(c):
                c.sock.sendall(b"use jobs\r\n")
                if not c.line().startswith(b"USING"):
                    raise ValueError("use")
                c.sock.sendall(f"put 0 0 1 {len(body)}\r\n{body}\r\n".encode())
                r = c.line()
                if not r.startswith(b"INSERTED"):
                    raise ValueError(f"put: {r!r}")
                return True

            ok += bool(c.request(put))
            time.sleep(0.005)
        for _ in workers:
            c.request(lambda c: (c.sock.sendall(b"use jobs\r\nput 100 0 1 4\r\nstop\r\n"), c.line(), c.line()))
        c.close()
        for w in workers:
            try:
                w.wait(timeout=25)
            except subprocess.TimeoutExpired:
                log("a worker did not stop")
        log(f"job-queue: {ok}/{n} put ok, {c.errors} failed")


# --- pyro-rpc: Pyro5 name server, two servers, a client ----------------------------------


def pyro_env():
    env = dict(os.environ)
    env["PYRO_SERVERTYPE"] = "multiplex"
    env["PYRO_COMMTIMEOUT"] = "1.0"
    return env


def pyro_server(name, port):
    import Pyro5.api

    ns_port = PORTS["pyro-rpc"][0]

    @Pyro5.api.expose
    class Store:
        def __init__(self):
            self.data = {}

        def put(self, k, v):
            self.data[k] = v
            return len(self.data)

        def get(self, k):
            return self.data.get(k)

    daemon = Pyro5.api.Daemon(host="127.0.0.1", port=port)
    uri = daemon.register(Store(), f"store{name}")
    with Pyro5.api.locate_ns("127.0.0.1", ns_port) as ns:
        ns.register(f"bench.store{name}", uri)
    log(f"pyro server {name} at {uri}")
    daemon.requestLoop()


def pyro_rpc(tmp, n):
    ns_port, s1, s2 = PORTS["pyro-rpc"]
    env = pyro_env()
    os.environ.update(env)
    import Pyro5.api
    import Pyro5.errors

    with Daemons(tmp) as d:
        p = d.start("nameserver", [PY, "-m", "Pyro5.nameserver", "-n", "127.0.0.1", "-p", str(ns_port)], env=env)
        wait_port(ns_port, p)
        for i, port in ((1, s1), (2, s2)):
            p = d.start(f"server{i}", [PY, HERE, "pyro-server", "--name", str(i)], env=env)
            wait_port(port, p)
        time.sleep(0.3)
        ok = errors = 0
        proxies = {}
        for i in range(n):
            name = f"bench.store{1 + i % 2}"
            try:
                if name not in proxies:
                    with Pyro5.api.locate_ns("127.0.0.1", ns_port) as ns:
                        proxies[name] = Pyro5.api.Proxy(ns.lookup(name))
                px = proxies[name]
                key = f"k{i % 23}"
                px.put(key, "v" * (i % 60))
                if px.get(key) != "v" * (i % 60):
                    raise ValueError("get: bad value")
                ok += 1
            except (OSError, ValueError, Pyro5.errors.PyroError) as e:
                errors += 1
                log(f"request failed: {e!r}")
                px = proxies.pop(name, None)
                if px is not None:
                    px._pyroRelease()
        for px in proxies.values():
            px._pyroRelease()
        log(f"pyro-rpc: {ok}/{n} calls ok, {errors} failed")


SYSTEMS = {
    "memcache-proxy": memcache_proxy,
    "http-proxy": http_proxy,
    "job-queue": job_queue,
    "pyro-rpc": pyro_rpc,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("system", choices=sorted(SYSTEMS) + ["job-queue-worker", "pyro-server"])
    ap.add_argument("--dir", help="scratch directory for configuration files and logs")
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--name", default="1")
    a = ap.parse_args()
    if a.system == "job-queue-worker":
        return beanstalk_worker(a.name)
    if a.system == "pyro-server":
        return pyro_server(a.name, PORTS["pyro-rpc"][int(a.name)])
    os.makedirs(a.dir, exist_ok=True)
    SYSTEMS[a.system](os.path.abspath(a.dir), a.requests)


if __name__ == "__main__":
    main()
