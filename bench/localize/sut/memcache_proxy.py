"""memcache-proxy: twemproxy (nutcracker) in front of two memcached, one client (C daemons)."""

import os

from .common import Daemons, LineClient, log, ports, steps, wait_port


def memcache_proxy(tmp, n):
    front, m1, m2 = ports("memcache-proxy")[:3]
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
        for i in steps(n):
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
