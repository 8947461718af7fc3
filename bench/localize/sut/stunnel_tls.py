"""stunnel-tls: TLS offload with stunnel (Debian's `stunnel4`: C on OpenSSL, one process, a
thread per connection) on both ends of a link: a client-side gateway that wraps plain TCP
in TLS and a server-side terminator that unwraps it in front of a key-value store (the
standard library's `socketserver`, a thread per connection), and two clients that write
and read values.

Ports: gateway = p[0] (plain in, TLS out to the terminator, which it verifies against the
run's self-signed certificate), terminator = p[1] (TLS in, plain out to the store), store
= p[2]. Client 1 (the launcher) speaks plain TCP to the gateway (gateway → terminator →
store); client 2 (`tls-client --name 2`) speaks TLS itself, straight to the terminator, and
checks the certificate and the host name. The store's protocol is a line protocol:
`SET key n` + n bytes → `STORED <digest>`, `GET key` → `VALUE n` + n bytes or `MISSING`.
Each client writes values of its own keys (50 B to 3 KB) and reads them back, half the
requests each, and checks every answer (the digest of what it wrote; a read against the
last value it wrote, or either of two when a write failed without an answer). A client
waits 2 s for an answer, then counts a failure, connects again and goes on; it also
connects again every 25 requests (a recycled connection). The stunnels give up on a
connect after 2 s.
"""

import hashlib
import os
import socket
import socketserver
import ssl
import subprocess
import threading
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, LineClient, log, ports, steps, terminated, wait_port

KEYS = 24
RECYCLE = 25

GATEWAY = """foreground = yes
pid =
syslog = no
debug = notice
[gateway]
client = yes
accept = 127.0.0.1:{gw}
connect = 127.0.0.1:{term}
verifyPeer = yes
CAfile = {dir}/cert.pem
checkHost = localhost
TIMEOUTconnect = 2
TIMEOUTclose = 0
"""

TERMINATOR = """foreground = yes
pid =
syslog = no
debug = notice
[terminator]
accept = 127.0.0.1:{term}
connect = 127.0.0.1:{store}
cert = {dir}/cert.pem
key = {dir}/key.pem
TIMEOUTconnect = 2
TIMEOUTclose = 0
"""


def value(who, key, version):
    """The bytes a client writes as version `version` of its key."""
    seed = hashlib.sha1(f"{who} {key} {version}".encode()).hexdigest().encode()
    return (seed * 80)[: 50 + (97 * key + 131 * version) % 2950]


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def store(_name):
    """Helper process `tls-store`: the key-value store behind the terminator."""
    term = terminated()
    data, lock = {}, threading.Lock()
    counts = {"SET": 0, "GET": 0, "bad": 0}

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                line = self.rfile.readline(512)
                if not line:
                    return
                words = line.decode(errors="replace").split()
                if len(words) == 3 and words[0] == "SET" and words[2].isdigit():
                    body = self.rfile.read(int(words[2]) + 2)
                    if len(body) != int(words[2]) + 2 or not body.endswith(b"\r\n"):
                        counts["bad"] += 1
                        self.wfile.write(b"ERROR bad value\r\n")
                        return
                    with lock:
                        data[words[1]] = body[:-2]
                    counts["SET"] += 1
                    self.wfile.write(f"STORED {digest(body[:-2])}\r\n".encode())
                elif len(words) == 2 and words[0] == "GET":
                    with lock:
                        v = data.get(words[1])
                    counts["GET"] += 1
                    self.wfile.write(b"MISSING\r\n" if v is None else f"VALUE {len(v)}\r\n".encode() + v + b"\r\n")
                else:
                    counts["bad"] += 1
                    self.wfile.write(b"ERROR unknown command\r\n")
                    return

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    srv = Server(("127.0.0.1", ports("stunnel-tls")[2]), Handler)
    srv.timeout = 0.2
    while not term.is_set():
        srv.handle_request()
    srv.server_close()
    log(f"tls store: {counts['SET']} writes, {counts['GET']} reads, {counts['bad']} bad requests, "
        f"{len(data)} keys (told to stop)")


class TlsClient(LineClient):
    """The store's client over TLS, straight to the terminator (certificate checked)."""

    def __init__(self, port, cafile):
        super().__init__(port)
        self.ctx = ssl.create_default_context(cafile=cafile)

    def connect(self):
        self.close()
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        try:
            self.sock = self.ctx.wrap_socket(raw, server_hostname="localhost")
        except BaseException:
            raw.close()
            raise
        self.buf = b""


class Workload:
    """One client's keys, what it wrote last and what a read may return."""

    def __init__(self, who, conn):
        self.who, self.c = who, conn
        self.version = {}
        self.allowed = {}  # key -> the values a read may return (None: never written)

    def put(self, c, k):
        ver = self.version.get(k, 0) + 1
        self.version[k] = ver
        data = value(self.who, k, ver)
        old = self.allowed.get(k, {None})
        self.allowed[k] = old | {data}  # until the store's answer says which it holds
        c.sock.sendall(f"SET {self.who}-{k} {len(data)}\r\n".encode() + data + b"\r\n")
        line = c.line().decode(errors="replace")
        if line != f"STORED {digest(data)}":
            raise ValueError(f"SET {k}: answer {line[:60]!r}")
        self.allowed[k] = {data}
        return True

    def get(self, c, k):
        c.sock.sendall(f"GET {self.who}-{k}\r\n".encode())
        line = c.line().decode(errors="replace")
        if line == "MISSING":
            got = None
        elif line.startswith("VALUE ") and line[6:].isdigit():
            got = c.exact(int(line[6:]) + 2)[:-2]
        else:
            raise ValueError(f"GET {k}: answer {line[:60]!r}")
        if got not in self.allowed.get(k, {None}):
            raise ValueError(f"GET {k}: {len(got or b'')} bytes, not what was written")
        return True

    def run(self, n, term=None, pause=0.08):
        ok = failed = done = 0
        for i in steps(n):
            if term is not None and term.is_set():
                break
            if i % RECYCLE == 0:
                self.c.close()
            k = (i * 7) % KEYS
            r = self.c.request(lambda c: self.put(c, k) if i % 2 == 0 or k not in self.allowed else self.get(c, k))
            ok, failed, done = ok + (r is True), failed + (r is not True), done + 1
            time.sleep(pause)
        return ok, failed, done


def client(name):
    """Helper process `tls-client --name 2`: TLS straight to the terminator."""
    term = terminated()
    cafile = os.path.join(os.environ["TLS_BENCH_DIR"], "cert.pem")
    ok, failed, done = Workload(f"c{name}", TlsClient(ports("stunnel-tls")[1], cafile)).run(200, term, 0.05)
    log(f"tls client {name}: {ok}/{done} requests ok, {failed} failed{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    gw, term, st = ports("stunnel-tls")[:3]
    sd = os.path.join(tmp, "stunnel")
    os.makedirs(sd, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", os.path.join(sd, "key.pem"), "-out", os.path.join(sd, "cert.pem")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    for name, text in (("gateway", GATEWAY), ("terminator", TERMINATOR)):
        with open(os.path.join(sd, f"{name}.conf"), "w") as f:
            f.write(text.format(gw=gw, term=term, store=st, dir=sd))
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "tls-store"])
        wait_port(st, p)
        p = d.start("terminator", ["stunnel4", os.path.join(sd, "terminator.conf")])
        wait_port(term, p)
        p = d.start("gateway", ["stunnel4", os.path.join(sd, "gateway.conf")])
        wait_port(gw, p)
        other = d.start("client2", [PY, LAUNCHER, "tls-client", "--name", "2"], env={**os.environ, "TLS_BENCH_DIR": sd})
        ok, failed, done = Workload("c1", LineClient(gw)).run(n)
        try:
            other.wait(timeout=WORKLOAD_S)
        except Exception:
            log("client 2 did not stop")
        log(f"stunnel-tls: {ok}/{done} requests ok, {failed} failed")
