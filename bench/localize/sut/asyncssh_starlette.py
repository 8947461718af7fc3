"""asyncssh-starlette: an SSH gateway (PyPI `asyncssh`: an SSHv2 server on asyncio) whose
commands keep their data in a Starlette store served by uvicorn (PyPI `starlette`,
`uvicorn` on asyncio and h11), and two SSH clients (asyncssh). CPython asyncio throughout
the chain (one event loop a process); the SSH packets are encrypted by OpenSSL through
PyPI `cryptography`.

Ports: gateway = p[0], store = p[1]. The store (helper `starlette-store`) answers `PUT
/kv/K` (the body is the value) with `{"k": K, "stored": LEN}` and `GET /kv/K` with `{"k":
K, "v": V}` (404 when there is none). The gateway (helper `asyncssh-gateway`, a host key
made at its start, no user authentication) runs each SSH session's command itself: `put
K` reads the value from the session's input until end of file, stores it and answers
`stored LEN`; `get K` answers `LEN DIGEST` (the first 16 hex digits of the value's
SHA-1). Its calls to the store go through one `httpx.AsyncClient` (a keep-alive pool, 1 s
timeout); a store failure (an exception, a timeout, a wrong answer) ends the command with
exit status 1 and a message on its standard error. Each client (the launcher, and the
helper `ssh-kv-client --name 2`) keeps one SSH connection, runs a `put` then a `get` per
key of its own (each a new session on that connection, 2 s timeout), checks the exit
status, the length and the digest, counts failures, connects again after one and goes on.
The gateway and the store say at the end (on SIGTERM) how many commands or requests they
served and how many failed.
"""

import asyncio
import hashlib
import os
import signal
import sys
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, wait_port, wait_readers

# Half the steps of the other systems: a recorded run of this chain (asyncssh, httpx and
# Starlette, all in Python) with 120 + 60 steps took 50-95 s on this machine, past the
# suite's 75-s run limit.
REQUESTS2 = 30
STORE_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 2.0


def value(k):
    """The value a client stores under key k (its length varies with k)."""
    return f"v{k}:" + "y" * (k % 70)


def digest(v):
    return hashlib.sha1(v.encode()).hexdigest()[:16]


class Store:
    def __init__(self):
        self.data = {}
        self.served = 0

    async def put_item(self, request):
        from starlette.responses import JSONResponse

        k = request.path_params["k"]
        v = (await request.body()).decode()
        return JSONResponse({"k": k, "stored": self.keep(k, v)})

    def keep(self, k, v):
        self.data[k] = v
        self.served += 1
        return len(v)

    async def get_item(self, request):
        from starlette.responses import JSONResponse

        k = request.path_params["k"]
        self.served += 1
        if k not in self.data:
            return JSONResponse({"k": k, "error": "no such key"}, status_code=404)
        return JSONResponse({"k": k, "v": self.data[k]})


def store(_name):
    """Helper process `starlette-store`: uvicorn (asyncio loop, h11) serving the app."""
    import contextlib

    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Route

    s = Store()

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        log(f"starlette store: {s.served} requests ok (told to stop)")

    app = Starlette(routes=[Route("/kv/{k}", s.put_item, methods=["PUT"]),
                            Route("/kv/{k}", s.get_item, methods=["GET"])], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=ports("asyncssh-starlette")[1], loop="asyncio", http="h11",
                access_log=False, log_level="warning", timeout_keep_alive=10)


class Gateway:
    """The gateway's command handler: one call per SSH session."""

    def __init__(self, http):
        self.http = http
        self.served = self.failed = 0

    async def store_call(self, method, k, body=None):
        r = await self.http.request(method, f"/kv/{k}", content=body)
        return self.check(method, k, r)

    def check(self, method, k, r):
        """The store's answer to a call on key k, checked."""
        if r.status_code != 200:
            raise ValueError(f"{method} /kv/{k}: status {r.status_code}")
        out = r.json()
        if out.get("k") != k:
            raise ValueError(f"answer for key {out.get('k')!r:.20}, not {k}")
        return out

    async def handle(self, process):
        cmd = (process.command or "").split()
        try:
            if len(cmd) != 2 or cmd[0] not in ("put", "get"):
                raise ValueError(f"unknown command {process.command!r:.40}")
            k = str(int(cmd[1]))
            if cmd[0] == "put":
                v = await asyncio.wait_for(process.stdin.read(), STORE_TIMEOUT_S)
                out = await self.store_call("PUT", k, v.encode())
                if out.get("stored") != len(v):
                    raise ValueError(f"stored {out.get('stored')} bytes of {len(v)}")
                process.stdout.write(f"stored {len(v)}\n")
            else:
                v = (await self.store_call("GET", k))["v"]
                process.stdout.write(f"{len(v)} {digest(v)}\n")
            self.served += 1
            process.exit(0)
        except Exception as e:
            self.failed += 1
            log(f"ssh gateway: {process.command!r:.30}: failed: {e!r:.120}")
            process.stderr.write(f"failed: {e!r:.200}\n")
            process.exit(1)


def gateway(_name):
    """Helper process `asyncssh-gateway`."""
    import asyncssh
    import httpx

    gport, sport = ports("asyncssh-starlette")[:2]

    class NoAuth(asyncssh.SSHServer):
        def begin_auth(self, username):
            return False  # every user is let in: the gateway is on loopback only

    async def main():
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{sport}", timeout=STORE_TIMEOUT_S,
                                 limits=httpx.Limits(max_keepalive_connections=4))
        g = Gateway(http)

        def bye(*_):
            log(f"ssh gateway: {g.served} commands ok, {g.failed} failed (told to stop)")
            sys.stderr.flush()
            os._exit(0)

        signal.signal(signal.SIGTERM, bye)
        key = asyncssh.generate_private_key("ssh-ed25519")
        await asyncssh.create_server(NoAuth, "127.0.0.1", gport, server_host_keys=[key],
                                     process_factory=g.handle, encoding="utf-8")
        await asyncio.Event().wait()

    asyncio.run(main())


class SshKvClient:
    """One SSH connection to the gateway, made again after any failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    async def command(self, cmd, stdin=None):
        import asyncssh

        if self.conn is None:
            self.conn = await asyncio.wait_for(
                asyncssh.connect("127.0.0.1", self.port, known_hosts=None, username="kv", client_keys=None,
                                 preferred_auth="none"), CLIENT_TIMEOUT_S)
        r = await asyncio.wait_for(self.conn.run(cmd, input=stdin, check=False), CLIENT_TIMEOUT_S)
        if r.exit_status != 0:
            raise ValueError(f"{cmd}: exit status {r.exit_status}: {str(r.stderr).strip()!r:.80}")
        return str(r.stdout).strip()

    async def step(self, k):
        """Puts key k, then reads it back and checks its length and digest: True if both went
        right; a failure is logged and counted and the connection is made again."""
        try:
            v = value(k)
            out = await self.command(f"put {k}", v)
            if out != f"stored {len(v)}":
                raise ValueError(f"put {k}: wrong answer {out!r:.60}")
            out = await self.command(f"get {k}")
            if out != f"{len(v)} {digest(v)}":
                raise ValueError(f"get {k}: wrong answer {out!r:.60}")
            return True
        except Exception as e:
            self.errors += 1
            log(f"request failed: {e!r:.160}")
            if self.conn is not None:
                self.conn.abort()
            self.conn = None
            return False

    def close(self):
        if self.conn is not None:
            self.conn.close()


def workload(port, name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart, stopped after WORKLOAD_S seconds;
    (steps that went right, failures)."""

    async def main():
        c = SshKvClient(port)
        ok = 0
        end = time.monotonic() + WORKLOAD_S
        for i in range(n):
            if time.monotonic() > end:
                log(f"workload deadline ({WORKLOAD_S:.0f} s) reached after {i} of {n} steps")
                break
            ok += await c.step(2 * i + int(name))
            await asyncio.sleep(pause)
        c.close()
        return ok, c.errors

    return asyncio.run(main())


def client(name):
    """Helper process `ssh-kv-client --name N`: REQUESTS2 steps, every 60 ms (the launcher
    takes half of --requests, every 20 ms)."""
    ok, errors = workload(ports("asyncssh-starlette")[0], name, REQUESTS2, 0.06)
    log(f"ssh client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    gport, sport = ports("asyncssh-starlette")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "starlette-store"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("gateway", [PY, LAUNCHER, "asyncssh-gateway"], env=env)
        wait_port(gport, p, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "ssh-kv-client", "--name", "2"])
        steps = max(1, n // 2)
        ok, errors = workload(gport, "1", steps, 0.02)
        wait_readers([helper], seconds=25)
        log(f"asyncssh-starlette: {ok}/{steps} steps ok, {errors} failed")
