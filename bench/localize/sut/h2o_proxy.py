"""h2o-proxy: the h2o web server (Debian `h2o` 2.2, C on libh2o, run with `-m master`: a
Perl `start_server` master that holds the listening socket and starts, supervises and
restarts one h2o server process of 2 event-loop threads, plus the server's own backtrace
helper) as an HTTP/1.1 and HTTP/2 reverse proxy in front of an origin on the standard
library's `http.server`, and two clients: one on `http.client` (HTTP/1.1, keep-alive) and
one on the `h2` protocol library (HTTP/2 over cleartext with prior knowledge, two streams
at a time on one connection).

Ports: h2o = p[0], origin = p[1]. The origin (`h2o-origin`, `sut.http_cache.serve_origin`,
the origin of the caching-proxy systems) serves `/obj/K` (a body of K-dependent size and
content), `/live/K` and `POST /echo` (the body's SHA-1); h2o caches nothing and keeps its
connections to the origin alive (`proxy.timeout.keepalive` 2 s), giving up on the origin
after 2 s (`proxy.timeout.io`: a 502 or 504 to the client). Client 1 (the launcher) sends
N requests, objects and live ones, over one keep-alive connection; client 2 (`h2o-client
--name 2`) sends, each step, a GET of an object of its own keys and a POST to `/echo` as
two concurrent streams. Every answer is checked (status, the body against what the origin
makes for it); a client waits at most 3 s, counts a failed request, connects again and goes
on. The h2o server process runs as `nobody` (h2o's default when started as root); one that
outlives its master (stopped, so deaf to the master's SIGTERM) is killed at the end.
"""

import hashlib
import os
import signal
import socket
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, terminated, wait_port
from .http_cache import Client, launcher_loop, serve_origin
from .squid_cache import body

CONF = """listen:
  host: 127.0.0.1
  port: {port}
num-threads: 2
pid-file: {dir}/h2o.pid
error-log: {dir}/h2o-error.log
max-connections: 256
hosts:
  "127.0.0.1:{port}":
    paths:
      "/":
        proxy.reverse.url: "http://127.0.0.1:{origin}/"
        proxy.timeout.io: 2000
        proxy.timeout.keepalive: 2000
"""

TIMEOUT_S = 3.0


def origin(_name):
    """Helper process `h2o-origin`: the origin server."""
    serve_origin(ports("h2o-proxy")[1], body, "h2o origin", "no-store")


class H2Client:
    """An HTTP/2 client (the `h2` library) on one cleartext connection with prior
    knowledge; connects again after any failure."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.conn = None

    def connect(self):
        import h2.config
        import h2.connection

        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = self.conn = None

    def exchange(self, requests):
        """Sends every (method, path, body) as a stream of its own, all at once, and reads
        until every stream ended: [(status, body), ...] in the order asked."""
        import h2.events

        if self.conn is None:
            self.connect()
        streams = {}
        for method, path, data in requests:
            sid = self.conn.get_next_available_stream_id()
            headers = [(":method", method), (":path", path), (":scheme", "http"),
                       (":authority", f"127.0.0.1:{self.port}")]
            if data is not None:
                headers.append(("content-length", str(len(data))))
            self.conn.send_headers(sid, headers, end_stream=data is None)
            if data is not None:
                self.conn.send_data(sid, data, end_stream=True)
            streams[sid] = [None, b"", False]
        self.sock.sendall(self.conn.data_to_send())
        deadline = time.monotonic() + TIMEOUT_S
        while not all(s[2] for s in streams.values()):
            if time.monotonic() > deadline:
                raise TimeoutError("streams not ended after 3 s")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("end of stream")
            for ev in self.conn.receive_data(chunk):
                sid = getattr(ev, "stream_id", None)
                if isinstance(ev, h2.events.ResponseReceived) and sid in streams:
                    streams[sid][0] = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived) and sid in streams:
                    streams[sid][1] += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and sid in streams:
                    streams[sid][2] = True
                elif isinstance(ev, h2.events.StreamReset) and sid in streams:
                    raise ConnectionError(f"stream {sid} reset (error {ev.error_code})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise ConnectionError(f"connection terminated (error {ev.error_code})")
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)
        return [(streams[s][0], streams[s][1]) for s in sorted(streams)]


def client(name):
    """Helper process `h2o-client --name 2`: per step, an object of its own keys and a POST
    to /echo as two concurrent HTTP/2 streams."""
    import h2.exceptions

    term = terminated()
    c = H2Client(ports("h2o-proxy")[0])
    ok = failed = i = 0
    end = time.monotonic() + WORKLOAD_S
    while not term.is_set() and time.monotonic() < end and i < 150:
        k = 100 + i % 11
        data = f"client {name} request {i} ".encode() * (1 + i % 9)
        try:
            got = c.exchange([("GET", f"/obj/{k}", None), ("POST", "/echo", data)])
            if got[0] != (200, body(k)):
                raise ValueError(f"GET /obj/{k}: status {got[0][0]}, {len(got[0][1])} bytes")
            if got[1] != (200, hashlib.sha1(data).hexdigest().encode()):
                raise ValueError(f"POST /echo: status {got[1][0]}, {got[1][1][:40]!r}")
            ok += 1
        except (OSError, ValueError, h2.exceptions.H2Error) as e:
            failed += 1
            log(f"h2 step {i} failed: {e!r}")
            c.close()
        i += 1
        time.sleep(0.08)
    c.close()
    log(f"h2o client {name}: {ok}/{i} steps ok (2 streams each), {failed} failed"
        f"{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    port, origin_port = ports("h2o-proxy")[:2]
    os.chmod(tmp, 0o777)  # the h2o server process runs as nobody
    conf = os.path.join(tmp, "h2o.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(port=port, origin=origin_port, dir=tmp))
    with Daemons(tmp) as d:
        p = d.start("origin", [PY, LAUNCHER, "h2o-origin"])
        wait_port(origin_port, p, timeout=10)
        p = d.start("h2o", ["h2o", "-m", "master", "-c", conf])
        servers = []
        try:
            wait_port(port, p, timeout=20)
            other = d.start("client2", [PY, LAUNCHER, "h2o-client", "--name", "2"])
            launcher_loop(Client(port), n, body, 17, other, "h2o-proxy")
        finally:
            servers = _children(p.pid)
    # A stopped h2o server does not act on the master's SIGTERM and outlives the master
    # (killed by the launcher after 5 s): it is killed here, so the run ends.
    for pid in servers:
        try:
            os.kill(pid, signal.SIGKILL)
            log(f"h2o server {pid} outlived its master: killed")
        except ProcessLookupError:
            pass


def _children(ppid):
    """The processes whose parent is ppid now (start_server's h2o servers)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == ppid:
            out.append(int(entry))
    return out
