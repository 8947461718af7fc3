"""ejabberd-chat: an XMPP server on the Erlang VM — Debian's `ejabberd` (BEAM: schedulers
and async I/O threads, an Erlang process per connection, Mnesia in a private spool
directory; started without Erlang distribution, as `erl -noinput ... -s ejabberd`) — and
three XMPP clients on PyPI's `slixmpp` (CPython, asyncio).

Ports: client-to-server = p[0], ejabberd's HTTP API = p[1] (the launcher registers the
three accounts through it, `POST /api/register`, before the workload). The users `bob` and
`carol` (`ejabberd-peer --name bob|carol`) answer every `echo I TEXT` with `ack I LEN`;
the user `alice` (the launcher, the `Alice` client of `sut/xmpp_chat.py`) first waits
(bounded) until both answer, then for each of N steps sends an echo to bob and one to
carol, each awaited with a 2 s timeout (a reply of type error, or none in time, is a failed
request). Every client connects again 0.5 s after a lost stream and says at the end what it
saw.
"""

import asyncio
import json
import os
import shutil
import time
import urllib.request

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, wait_port
from .xmpp_chat import USERS, Alice, _quiet, echo_peer

HOST = "localhost"
PASSWORDS = {**USERS, "carol": "carol-pw"}
PEERS = ("bob", "carol")
LIBS = "/usr/lib/x86_64-linux-gnu"

CONF = """# ejabberd for the fault suite: plain c2s and the HTTP API, on loopback only.
hosts:
  - {host}
loglevel: warning
certfiles: []
listen:
  -
    port: {c2s}
    ip: "127.0.0.1"
    module: ejabberd_c2s
    starttls_required: false
  -
    port: {api}
    ip: "127.0.0.1"
    module: ejabberd_http
    request_handlers:
      /api: mod_http_api
auth_method: internal
auth_password_format: plain
acl:
  local:
    user_regexp: ""
access_rules:
  local:
    allow: local
api_permissions:
  "register from loopback":
    who:
      ip: 127.0.0.1/8
    what:
      - register
shaper_rules:
  c2s_shaper: none
modules:
  mod_roster: {{}}
  mod_disco: {{}}
  mod_ping: {{}}
"""


def peer(name):
    """Helper process `ejabberd-peer --name bob|carol`: answers alice's echoes."""
    echo_peer("ejabberd", ports("ejabberd-chat")[0], name, PASSWORDS[name])

async def _alice(n, c2s):
    stopping = asyncio.Event()
    a = Alice(c2s, stopping)
    a.x.connect("127.0.0.1", c2s)
    end = time.monotonic() + 20
    ready = set()
    while len(ready) < len(PEERS) and time.monotonic() < end:
        for who in set(PEERS) - ready:
            try:
                await a.ask(f"{who}@{HOST}", "echo-hello", "echo hello x")
                ready.add(who)
            except (asyncio.TimeoutError, ValueError):
                await asyncio.sleep(0.2)
    if len(ready) < len(PEERS):
        log(f"only {sorted(ready)} answered within 20 s")
    ok = failed = 0
    for i in steps(n):
        text = "t" * (i % 40)
        for who in PEERS:
            mid = f"echo-{i}"
            try:
                got = await a.ask(f"{who}@{HOST}", mid, f"echo {i} {text}")
                if got != f"ack {i} {len(text)}":
                    raise ValueError(f"{who} {mid}: {got[:60]!r}")
                ok += 1
            except Exception as e:  # noqa: BLE001 — slixmpp's own errors too; a client goes on
                failed += 1
                log(f"request failed: {e!r}")
        await asyncio.sleep(0.05)
    stopping.set()
    a.x.disconnect()
    await asyncio.sleep(0.2)
    return ok, failed


def register(api, timeout=30.0):
    """Registers the three accounts through ejabberd's HTTP API (retried until it answers)."""
    end = time.monotonic() + timeout
    for user, pw in PASSWORDS.items():
        body = json.dumps({"user": user, "host": HOST, "password": pw}).encode()
        while True:
            req = urllib.request.Request(f"http://127.0.0.1:{api}/api/register", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    r.read()
                break
            except OSError as e:
                if time.monotonic() > end:
                    raise RuntimeError(f"ejabberd did not register {user}: {e!r}") from e
                time.sleep(0.3)


def run(tmp, n):
    c2s, api = ports("ejabberd-chat")[:2]
    spool = os.path.join(tmp, "spool")
    os.makedirs(spool, exist_ok=True)
    conf = os.path.join(tmp, "ejabberd.yml")
    with open(conf, "w") as f:
        f.write(CONF.format(host=HOST, c2s=c2s, api=api))
    env = dict(os.environ, EJABBERD_CONFIG_PATH=conf, ERL_LIBS=LIBS, HOME=tmp)
    erl = ["erl", "-noinput", "-noshell", "+K", "true", "-mnesia", "dir", f'"{spool}"',
           "-kernel", "logger_level", "warning", "-s", "ejabberd"]
    _quiet()
    with Daemons(tmp) as d:
        for attempt in (1, 2):
            p = d.start("ejabberd" if attempt == 1 else "ejabberd-again", erl, env=env, cwd=tmp)
            try:
                wait_port(c2s, p, timeout=60)
                break
            except RuntimeError as e:
                # Seen once in about 80 starts: ejabberd's supervisor gave up at start-up
                # (its ETS cache NIF said "Maximum number (0) of ETS cache tables has
                # reached"); a supervisor of the service would start it again, as here.
                if attempt == 2 or p.poll() is None:
                    raise
                log(f"ejabberd-chat: {e}; starting it again")
                shutil.rmtree(spool)
                os.makedirs(spool)
        wait_port(api, p, timeout=10)
        register(api)
        for who in PEERS:
            d.start(who, [PY, LAUNCHER, "ejabberd-peer", "--name", who])
        ok, failed = asyncio.run(_alice(n, c2s))
        log(f"ejabberd-chat: {ok}/{2 * n} requests ok, {failed} failed (deadline {WORKLOAD_S:.0f} s)")
