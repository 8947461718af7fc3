"""xmpp-chat: an XMPP server with an external component — Debian's `prosody` (Lua 5.4 on
its epoll loop, luasocket; accounts in its internal_plain store) and PyPI's `slixmpp`
(CPython, asyncio) for the clients and the component (XEP-0114).

Ports: client-to-server = p[0], component = p[1]. The component `calc.localhost`
(`xmpp-calc`) answers every `job I DATA` message with `done I DIGEST`; the user `bob`
(`xmpp-peer --name bob`) answers every `echo I TEXT` with `ack I LEN`; the user `alice` (the
launcher) first waits (bounded) until both answer, then for each of N steps sends a job to
the component and an echo to bob, each awaited with a 2 s timeout (a reply of type error,
or none in time, is a failed request). Every client and the component connect again after
a lost stream, as chat bots do, and say at the end what they saw. Replies are matched to
requests by the step number they carry (an error reply, by the stanza id it keeps).
"""

import asyncio
import hashlib
import logging
import os
import signal
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, wait_port

HOST = "localhost"
CALC = "calc.localhost"
SECRET = "component-secret"
USERS = {"alice": "alice-pw", "bob": "bob-pw"}
REPLY_S = 2.0
REQUEST = {"done": "job", "ack": "echo"}

CONF = """-- prosody for the fault suite: plain c2s and one external component, on loopback only.
run_as_root = true
pidfile = "{dir}/prosody.pid"
data_path = "{dir}/data"
admins = {{ }}
modules_enabled = {{ "disco"; "roster"; "saslauth"; "ping"; "version"; "uptime"; }}
modules_disabled = {{ "s2s"; }}
authentication = "internal_plain"
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
c2s_ports = {{ {c2s} }}
c2s_interfaces = {{ "127.0.0.1" }}
component_ports = {{ {comp} }}
component_interfaces = {{ "127.0.0.1" }}
s2s_ports = {{ }}
legacy_ssl_ports = {{ }}
log = {{ {{ levels = {{ min = "info" }}, to = "console" }} }}
VirtualHost "{host}"
Component "{calc}"
    component_secret = "{secret}"
"""


def digest(i, text):
    return hashlib.sha1(f"{i}:{text}".encode()).hexdigest()[:20]


def _quiet():
    # slixmpp logs every lost stream and failed handler at ERROR: the helper logs say it once.
    logging.basicConfig(level=logging.CRITICAL)


def _stopper(loop):
    """An asyncio event that SIGTERM sets."""
    ev = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, ev.set)
    return ev


def _reconnecting(xmpp, port, stopping):
    """Connects xmpp again 0.5 s after each lost stream (slixmpp retries a failed connect
    by itself, not a lost stream)."""
    xmpp.lost = 0

    def lost(_why):
        xmpp.lost += 1
        if not stopping.is_set():
            xmpp.loop.call_later(0.5, lambda: stopping.is_set() or xmpp.connect("127.0.0.1", port))

    xmpp.add_event_handler("disconnected", lost)


def calc(_name):
    """Helper process `xmpp-calc`: the external component calc.localhost."""
    import slixmpp

    _quiet()
    comp = ports("xmpp-chat")[1]

    async def main():
        stopping = _stopper(asyncio.get_running_loop())
        x = slixmpp.ComponentXMPP(CALC, SECRET, "127.0.0.1", comp)
        x.register_plugin("xep_0030")
        x.register_plugin("xep_0199")
        seen = {"jobs": 0, "bad": 0}

        def message(msg):
            if msg["type"] == "error":
                return
            parts = msg["body"].split(" ", 2)
            if len(parts) == 3 and parts[0] == "job":
                seen["jobs"] += 1
                msg.reply(f"done {parts[1]} {digest(parts[1], parts[2])}").send()
            else:
                seen["bad"] += 1
                log(f"calc: a message it cannot read: {msg['body'][:60]!r}")

        x.add_event_handler("message", message)
        _reconnecting(x, comp, stopping)
        x.connect("127.0.0.1", comp)
        await stopping.wait()
        x.disconnect()
        log(f"xmpp calc: {seen['jobs']} jobs answered, {seen['bad']} bad messages, "
            f"stream lost {x.lost} times (told to stop)")

    asyncio.run(main())


def peer(name):
    """Helper process `xmpp-peer --name bob`: answers alice's echoes."""
    echo_peer("xmpp", ports("xmpp-chat")[0], name, USERS[name])


def echo_peer(label, c2s, name, password):
    """An XMPP client `name`@localhost on the server's client port `c2s`: answers each
    `echo N TEXT` message with `ack N LEN(TEXT)`, reconnects when its stream is lost, and
    says what it did when told to stop (also ejabberd-chat's peers)."""
    import slixmpp

    _quiet()

    async def main():
        stopping = _stopper(asyncio.get_running_loop())
        x = slixmpp.ClientXMPP(f"{name}@{HOST}/peer", password)
        x.enable_starttls = False
        x.enable_direct_tls = False
        x.enable_plaintext = True
        x["feature_mechanisms"].unencrypted_scram = True
        seen = {"echoes": 0, "bad": 0, "sessions": 0}

        def start(_):
            seen["sessions"] += 1
            x.send_presence()

        def message(msg):
            if msg["type"] == "error":
                return
            parts = msg["body"].split(" ", 2)
            if len(parts) == 3 and parts[0] == "echo":
                seen["echoes"] += 1
                msg.reply(f"ack {parts[1]} {len(parts[2])}").send()
            else:
                seen["bad"] += 1
                log(f"{name}: a message it cannot read: {msg['body'][:60]!r}")

        x.add_event_handler("session_start", start)
        x.add_event_handler("message", message)
        _reconnecting(x, c2s, stopping)
        x.connect("127.0.0.1", c2s)
        await stopping.wait()
        x.disconnect()
        log(f"{label} peer {name}: {seen['echoes']} echoes answered, {seen['bad']} bad messages, "
            f"{seen['sessions']} sessions, stream lost {x.lost} times (told to stop)")

    asyncio.run(main())

class Alice:
    """The launcher's client: requests are messages, answered by a message with their id."""

    def __init__(self, port, stopping):
        import slixmpp

        self.x = x = slixmpp.ClientXMPP(f"alice@{HOST}/launcher", USERS["alice"])
        x.enable_starttls = False
        x.enable_direct_tls = False
        x.enable_plaintext = True
        x["feature_mechanisms"].unencrypted_scram = True
        self.port = port
        self.ready = asyncio.Event()
        self.waiting = {}
        x.add_event_handler("session_start", self.start)
        x.add_event_handler("session_end", lambda _: self.ready.clear())
        x.add_event_handler("disconnected", lambda _: self.ready.clear())
        x.add_event_handler("message", self.message)
        _reconnecting(x, port, stopping)

    def start(self, _):
        self.x.send_presence()
        self.ready.set()

    def message(self, msg):
        # slixmpp's reply() gives a message a new id; the server's error replies keep it.
        mid = msg["id"]
        if msg["type"] != "error":
            parts = msg["body"].split(" ", 2)
            mid = f"{REQUEST.get(parts[0], '?')}-{parts[1] if len(parts) > 1 else '?'}"
        fut = self.waiting.pop(mid, None)
        if fut is None or fut.done():
            return
        if msg["type"] == "error":
            fut.set_exception(ValueError(f"error reply: {msg['error']['condition']}"))
        else:
            fut.set_result(msg["body"])

    async def ask(self, to, mid, body):
        await asyncio.wait_for(self.ready.wait(), REPLY_S)
        fut = asyncio.get_running_loop().create_future()
        self.waiting[mid] = fut
        msg = self.x.make_message(mto=to, mbody=body, mtype="chat")
        msg["id"] = mid
        msg.send()
        try:
            return await asyncio.wait_for(fut, REPLY_S)
        finally:
            self.waiting.pop(mid, None)


async def _alice(n, c2s):
    stopping = asyncio.Event()
    a = Alice(c2s, stopping)
    a.x.connect("127.0.0.1", c2s)
    end = time.monotonic() + 15
    ready = set()
    while len(ready) < 2 and time.monotonic() < end:
        for to in {CALC, f"bob@{HOST}"} - ready:
            body = "job hello x" if to == CALC else "echo hello x"
            try:
                await a.ask(to, body.rsplit(" ", 1)[0].replace(" ", "-"), body)
                ready.add(to)
            except (asyncio.TimeoutError, ValueError):
                await asyncio.sleep(0.2)
    if len(ready) < 2:
        log(f"only {sorted(ready)} answered within 15 s")
    ok = failed = 0
    for i in steps(n):
        text = "t" * (i % 40)
        for to, mid, body, want in ((CALC, f"job-{i}", f"job {i} {text}", f"done {i} {digest(i, text)}"),
                                    (f"bob@{HOST}", f"echo-{i}", f"echo {i} {text}", f"ack {i} {len(text)}")):
            try:
                got = await a.ask(to, mid, body)
                if got != want:
                    raise ValueError(f"{mid}: {got[:60]!r}")
                ok += 1
            except Exception as e:  # noqa: BLE001 — slixmpp's own errors too; a client goes on
                failed += 1
                log(f"request failed: {e!r}")
        await asyncio.sleep(0.05)
    stopping.set()
    a.x.disconnect()
    await asyncio.sleep(0.2)
    return ok, failed


def run(tmp, n):
    c2s, comp = ports("xmpp-chat")[:2]
    acc = os.path.join(tmp, "data", HOST, "accounts")
    os.makedirs(acc, exist_ok=True)
    for user, pw in USERS.items():
        with open(os.path.join(acc, f"{user}.dat"), "w") as f:
            f.write(f'return {{\n\t["password"] = "{pw}";\n}};\n')
    conf = os.path.join(tmp, "prosody.cfg.lua")
    with open(conf, "w") as f:
        f.write(CONF.format(dir=tmp, c2s=c2s, comp=comp, host=HOST, calc=CALC, secret=SECRET))
    _quiet()
    with Daemons(tmp) as d:
        p = d.start("prosody", ["prosody", "-F", "--config", conf], cwd=tmp)
        wait_port(c2s, p, timeout=15)
        wait_port(comp, p, timeout=5)
        d.start("calc", [PY, LAUNCHER, "xmpp-calc"])
        d.start("bob", [PY, LAUNCHER, "xmpp-peer", "--name", "bob"])
        ok, failed = asyncio.run(_alice(n, c2s))
        log(f"xmpp-chat: {ok}/{2 * n} requests ok, {failed} failed (deadline {WORKLOAD_S:.0f} s)")
