"""pyro-rpc: a Pyro5 name server, two Pyro5 servers and a client (CPython, threads)."""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port


def pyro_env():
    env = dict(os.environ)
    env["PYRO_SERVERTYPE"] = "multiplex"
    env["PYRO_COMMTIMEOUT"] = "1.0"
    return env


def pyro_server_main(name):
    """The helper process `pyro-server --name N`."""
    pyro_server(name, ports("pyro-rpc")[int(name)])


def pyro_server(name, port):
    import Pyro5.api

    ns_port = ports("pyro-rpc")[0]

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
    ns_port, s1, s2 = ports("pyro-rpc")[:3]
    env = pyro_env()
    os.environ.update(env)
    import Pyro5.api
    import Pyro5.errors

    with Daemons(tmp) as d:
        p = d.start("nameserver", [PY, "-m", "Pyro5.nameserver", "-n", "127.0.0.1", "-p", str(ns_port)], env=env)
        wait_port(ns_port, p)
        for i, port in ((1, s1), (2, s2)):
            p = d.start(f"server{i}", [PY, LAUNCHER, "pyro-server", "--name", str(i)], env=env)
            wait_port(port, p)
        time.sleep(0.3)
        ok = errors = 0
        proxies = {}
        for i in steps(n):
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
