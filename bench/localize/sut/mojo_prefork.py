"""mojo-prefork: a Mojolicious front (Debian `libmojolicious-perl`: `sut/mojo/front.pl`, a
Mojolicious::Lite app) run by Mojo's preforking server (a manager that forks one worker,
watches its heartbeats, kills a worker silent for 4 s and forks another) that keeps its
data in a Mojolicious store run by Mojo's single-process daemon (`sut/mojo/store.pl`), and
two Python HTTP clients (`http.client`). Perl on Mojo::IOLoop (epoll through Perl's poll)
in both servers.

Ports: front = p[0], store = p[1]. The store answers `PUT /kv/K` (the body is the value)
with `{"k": K, "stored": LEN}` and `GET /kv/K` with the value (header `X-Key: K`; 404 when
there is none). The front serves the API of `sut/kv_http.py` (`PUT /item/K`, `GET
/item/K`); each request is one non-blocking call to the store through a Mojo::UserAgent
(a keep-alive pool, 1 s timeouts), and a store failure (an error, a timeout, a wrong
answer) becomes a 502. Each client (the launcher, and the helper `mojo-client --name 2`)
puts then reads back keys of its own on one keep-alive connection (2 s timeout), checks
the answers, counts failures, connects again and goes on. The worker and the store say at
the end how many requests they served and how many failed (the front's manager is told to
stop with SIGQUIT, a graceful stop; the store with SIGTERM).
"""

import os
import signal
import subprocess

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60
MOJO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mojo")


def client(name):
    """Helper process `mojo-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("mojo-prefork")[0], name, REQUESTS2, 0.06)
    log(f"mojo client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("mojo-prefork")[:2]
    env = dict(os.environ, MOJO_STORE_PORT=str(sport), MOJO_MODE="production", MOJO_HOME=tmp)
    with Daemons(tmp) as d:
        p = d.start("store", ["perl", os.path.join(MOJO, "store.pl"), "daemon", "-l", f"http://127.0.0.1:{sport}"],
                    env=env)
        wait_port(sport, p, timeout=20)
        front = d.start("front", ["perl", os.path.join(MOJO, "front.pl"), "prefork", "-l", f"http://127.0.0.1:{fport}",
                              "-w", "1", "-I", "1", "-H", "4", "-G", "2", "-P", os.path.join(tmp, "front.pid")],
                    env=env)
        wait_port(fport, front, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "mojo-client", "--name", "2"])
        ok, errors = workload(fport, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        # SIGQUIT: Mojo's manager stops its worker gracefully (SIGTERM would kill it).
        front.send_signal(signal.SIGQUIT)
        try:
            front.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log("mojo front did not stop on SIGQUIT within 5 s")
        log(f"mojo-prefork: {ok}/{n} steps ok, {errors} failed")
