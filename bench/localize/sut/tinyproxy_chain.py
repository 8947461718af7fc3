"""tinyproxy-chain: two tinyproxy (Debian `tinyproxy` 1.11, C, one process each with a
thread per client connection) chained as forward HTTP proxies in front of an origin on the
standard library's `http.server`, and two clients on `http.client`.

Ports: front proxy = p[0], back proxy = p[1], origin = p[2]. The front has `Upstream http
127.0.0.1:BACK`, so every request it takes crosses both proxies (front → back → origin);
the back connects to the origin itself. The origin (`tinyproxy-origin`, the one the
caching-proxy systems use: `sut.http_cache.serve_origin`) serves `/obj/K` (a body of
K-dependent size and content), `/live/K` and `POST /echo` (the body's SHA-1); neither
proxy caches anything. Client 1 (the launcher) sends N requests, objects and live ones,
through the front; client 2 (`tinyproxy-client --name 2`) sends objects of its own keys
and POSTs straight to the back proxy (one hop). Every request names the origin by its
absolute URL, as a client of a forward proxy does, and asks for `Connection: close`:
tinyproxy closes the client connection after each answer anyway, so every request is a new
connection to each proxy and to the origin.
Every reply is checked (status, the body against what the origin makes for it); a client
waits at most 3 s, counts a failed request, connects again and goes on. Both proxies give
up on an idle connection after 2 s (`Timeout 2`) and run in the foreground (`-d`) as
root (no `User`), logging to a file of the scratch directory.
"""

import http.client
import os

from .common import LAUNCHER, PY, Daemons, ports, wait_port
from .http_cache import TIMEOUT_S, Client, client_loop, launcher_loop, serve_origin
from .squid_cache import body

CONF = """Port {port}
Listen 127.0.0.1
Timeout 2
MaxClients 64
LogFile "{dir}/{name}.tinyproxy.log"
LogLevel Info
PidFile "{dir}/{name}.pid"
Allow 127.0.0.1
DisableViaHeader No
{upstream}
"""


class OneShot(Client):
    """`http_cache.Client` with a connection per request: tinyproxy closes the client's
    connection after each answer without saying so (`Connection: close`), so the client
    sends `Connection: close` itself and connects again for the next request."""

    def fetch(self, method, path, data=None):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            self.conn.request(method, self.prefix + path, body=data, headers={"Connection": "close"})
            r = self.conn.getresponse()
            return r.status, r.read()
        finally:
            self.close()


def origin(_name):
    """Helper process `tinyproxy-origin`: the origin server."""
    serve_origin(ports("tinyproxy-chain")[2], body, "tinyproxy origin", "no-store")


def client(name):
    """Helper process `tinyproxy-client --name 2`: objects of its own keys and POSTs, sent
    to the back proxy."""
    back, origin_port = ports("tinyproxy-chain")[1:3]
    client_loop(OneShot(back, f"http://127.0.0.1:{origin_port}"), name, "tinyproxy client", body, 100, 11, 9)


def _conf(tmp, name, port, upstream):
    path = os.path.join(tmp, f"{name}.conf")
    with open(path, "w") as f:
        f.write(CONF.format(port=port, dir=tmp, name=name, upstream=upstream))
    return path


def run(tmp, n):
    front, back, origin_port = ports("tinyproxy-chain")[:3]
    with Daemons(tmp) as d:
        p = d.start("origin", [PY, LAUNCHER, "tinyproxy-origin"])
        wait_port(origin_port, p, timeout=10)
        p = d.start("tinyproxy-back", ["tinyproxy", "-d", "-c", _conf(tmp, "back", back, "")])
        wait_port(back, p, timeout=10)
        p = d.start("tinyproxy-front", ["tinyproxy", "-d", "-c",
                                        _conf(tmp, "front", front, f"Upstream http 127.0.0.1:{back}")])
        wait_port(front, p, timeout=10)
        other = d.start("client2", [PY, LAUNCHER, "tinyproxy-client", "--name", "2"])
        c = OneShot(front, f"http://127.0.0.1:{origin_port}")
        launcher_loop(c, n, body, 17, other, "tinyproxy-chain")
