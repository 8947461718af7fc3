"""squid-cache: a caching HTTP proxy — Debian's `squid` (C++, one process on its own event
loop, memory cache only) in front of an origin server on the standard library's
`http.server` (CPython, a thread per connection), and two clients on `http.client`.

Ports: proxy = p[0], origin = p[1]. The origin (`squid-origin`) serves `/obj/K` (a body of
K-dependent size and content, cacheable for 2 s, with an ETag it revalidates with 304),
`/live/K` (`no-store`: every request goes through) and `POST /echo` (the body's SHA-1).
Client 1 (the launcher) asks the proxy for N objects over one keep-alive connection, a mix
of cacheable and live ones; client 2 (`squid-client --name 2`) asks for objects of its own
keys and POSTs to `/echo`. Every reply is checked (status, the body against what the origin
makes for it); a client with a 3 s timeout counts a failed request, connects again and goes
on. Squid gives up on the origin after 2 s (`read_timeout`, `connect_timeout`): a slow or
stopped origin becomes a 504 there, a lost one a 502.
"""

import hashlib
import os

from .common import LAUNCHER, PY, Daemons, ports, wait_port
from .http_cache import Client, client_loop, launcher_loop, serve_origin

CONF = """http_port 127.0.0.1:{proxy}
http_access allow localhost
http_access deny all
cache_mem 16 MB
maximum_object_size_in_memory 256 KB
refresh_pattern . 0 20% 60
pid_filename {dir}/squid.pid
cache_log {dir}/cache.log
access_log stdio:{dir}/access.log
coredump_dir {dir}
cache_effective_user proxy
shutdown_lifetime 1 seconds
pinger_enable off
icp_port 0
netdb_filename none
connect_timeout 2 seconds
read_timeout 2 seconds
request_timeout 5 seconds
client_persistent_connections on
server_persistent_connections on
"""

def body(k):
    """What the origin serves for object k."""
    k = int(k)
    seed = hashlib.sha1(f"object {k}".encode()).hexdigest().encode()
    return (seed * (4 + k % 29))[: 300 + 97 * (k % 23)]


def origin(_name):
    """Helper process `squid-origin`: the origin server."""
    serve_origin(ports("squid-cache")[1], body, "squid origin", "no-store")


def client(name):
    """Helper process `squid-client --name 2`: objects of its own keys and POSTs."""
    proxy, origin_port = ports("squid-cache")[:2]
    client_loop(Client(proxy, f"http://127.0.0.1:{origin_port}"), name, "squid client", body, 100, 11, 9)


def run(tmp, n):
    proxy, origin_port = ports("squid-cache")[:2]
    sq = os.path.join(tmp, "squid")
    os.makedirs(sq, exist_ok=True)
    os.chmod(sq, 0o777)  # squid writes its log and pid file as the user `proxy`
    conf = os.path.join(sq, "squid.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(dir=sq, proxy=proxy))
    with Daemons(tmp) as d:
        p = d.start("origin", [PY, LAUNCHER, "squid-origin"])
        wait_port(origin_port, p, timeout=10)
        p = d.start("squid", ["squid", "-N", "-f", conf], cwd=sq)
        wait_port(proxy, p, timeout=20)
        other = d.start("client2", [PY, LAUNCHER, "squid-client", "--name", "2"])
        c = Client(proxy, f"http://127.0.0.1:{origin_port}")
        launcher_loop(c, n, body, 17, other, "squid-cache")
