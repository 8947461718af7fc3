"""varnish-cache: Debian's `varnishd` (C; a manager process and a cache child with a pool
of worker threads) in front of two origin servers on the standard library's `http.server`
(CPython, a thread per connection), balanced by a round-robin director, and two clients on
`http.client`.

Ports: varnish = p[0], origin 1 = p[1], origin 2 = p[2]. An origin (`varnish-origin
--name N`) serves `/obj/K` (a body of K-dependent size and content, cacheable for 2 s, with
an ETag that varnish revalidates with a 304 once the grace is over), `/live/K` (`private`:
varnish passes every request through) and `POST /echo` (the body's SHA-1); each reply
names its origin in `X-Origin`. Client 1 (the launcher) asks varnish for N objects over one
keep-alive connection, a mix of cacheable and live ones; client 2 (`varnish-client --name
2`) asks for objects of its own keys and POSTs to `/echo`. Every reply is checked (status,
the body against what an origin makes for it); a client with a 3 s timeout counts a failed
request, connects again and goes on. Varnish gives up on an origin after 2 s
(`first_byte_timeout`, `between_bytes_timeout`) and answers 503 then.
"""

import hashlib
import os
import signal

from .common import LAUNCHER, PY, Daemons, ports, wait_port
from .http_cache import Client, client_loop, launcher_loop, serve_origin

VCL = """vcl 4.1;
import directors;

backend origin1 {{ .host = "127.0.0.1"; .port = "{o1}"; .connect_timeout = 1s;
    .first_byte_timeout = 2s; .between_bytes_timeout = 2s; }}
backend origin2 {{ .host = "127.0.0.1"; .port = "{o2}"; .connect_timeout = 1s;
    .first_byte_timeout = 2s; .between_bytes_timeout = 2s; }}

sub vcl_init {{
    new rr = directors.round_robin();
    rr.add_backend(origin1);
    rr.add_backend(origin2);
}}

sub vcl_recv {{
    set req.backend_hint = rr.backend();
    if (req.url ~ "^/live/") {{
        return (pass);
    }}
}}

sub vcl_backend_response {{
    set beresp.grace = 0s;
    set beresp.keep = 10s;
}}

sub vcl_deliver {{
    if (obj.hits > 0) {{
        set resp.http.X-Cache = "HIT";
    }} else {{
        set resp.http.X-Cache = "MISS";
    }}
}}
"""

def body(k):
    """What an origin serves for object k."""
    k = int(k)
    seed = hashlib.sha256(f"varnish object {k}".encode()).hexdigest().encode()
    return (seed * (3 + k % 31))[: 250 + 89 * (k % 27)]


def origin(name):
    """Helper process `varnish-origin --name N`: origin server N (1 or 2)."""
    serve_origin(ports("varnish-cache")[int(name)], body, f"varnish origin {name}", "private", origin_name=name)


def client(name):
    """Helper process `varnish-client --name 2`: objects of its own keys and POSTs."""
    client_loop(Client(ports("varnish-cache")[0]), name, "varnish client", body, 200, 13, 11)


def run(tmp, n):
    front, o1, o2 = ports("varnish-cache")[:3]
    vd = os.path.join(tmp, "varnish")
    os.makedirs(vd, exist_ok=True)
    os.chmod(vd, 0o777)  # varnishd's child runs as the user `vcache` and reads its work dir
    vcl = os.path.join(vd, "default.vcl")
    with open(vcl, "w") as f:
        f.write(VCL.format(o1=o1, o2=o2))
    os.chmod(vcl, 0o644)
    group = None
    try:
        with Daemons(tmp) as d:
            for k, port in ((1, o1), (2, o2)):
                p = d.start(f"origin{k}", [PY, LAUNCHER, "varnish-origin", "--name", str(k)])
                wait_port(port, p, timeout=10)
            p = d.start("varnishd", [
                "varnishd", "-F", "-n", vd, "-a", f"127.0.0.1:{front}", "-f", vcl, "-T", "none",
                "-s", "malloc,16m", "-p", "thread_pools=1", "-p", "thread_pool_min=8",
                "-p", "thread_pool_max=40", "-p", "timeout_idle=5", "-p", "cli_timeout=30",
            ], start_new_session=True)
            group = p.pid
            wait_port(front, p, timeout=30)
            other = d.start("client2", [PY, LAUNCHER, "varnish-client", "--name", "2"])
            c = Client(front)
            launcher_loop(c, n, body, 19, other, "varnish-cache")
    finally:
        # The manager and its cache child share a process group; a child stopped by SIGSTOP
        # outlives its manager (killed after 5 s): whatever is left is killed.
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
