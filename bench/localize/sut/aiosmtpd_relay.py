"""aiosmtpd-relay: a mail relay and its next hop, both SMTP servers on `aiosmtpd` (PyPI
`aiosmtpd` 1.4: its asyncio SMTP protocol, one event loop a process), and two Python
`smtplib` clients.

Ports: relay = p[0], sink = p[1]. The relay (helper `smtprelay-relay`) accepts every
message and forwards it, in its `handle_DATA`, to the sink over one persistent `smtplib`
session (run in a single executor thread, 1 s timeout; after a failure the session is
closed and made again for the next message); it answers its client with the sink's reply
(`250 relayed: stored LEN SHA`), or `451` when the sink failed or answered anything but
250. The sink (helper `smtprelay-sink`) answers each message with its length and the first
16 hex digits of its SHA-1. Each client (the launcher, and the helper `smtprelay-client
--name 2`) sends messages of its own over one SMTP session (MAIL, RCPT, DATA; 2 s timeout)
and checks that the reply names the length and digest of the message it sent; after a
failure it logs, connects again and goes on. Relay and sink say at the end (on SIGTERM)
how many messages they passed on and how many failed.
"""

import asyncio
import hashlib
import os
import signal
import smtplib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60
HOP_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 2.0


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def serve(handler, port, counts, who):
    """Runs aiosmtpd's SMTP protocol for `handler` on 127.0.0.1:port until SIGTERM."""
    from aiosmtpd.smtp import SMTP

    def bye(*_):
        log(f"{who}: {counts['ok']} messages ok, {counts['failed']} failed (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    async def main():
        signal.signal(signal.SIGTERM, bye)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: SMTP(handler, hostname=f"{who}.localize.test", ident=f"{who} (aiosmtpd)"),
            "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class SinkHandler:
    def __init__(self, counts):
        self.counts = counts

    async def handle_DATA(self, server, session, envelope):
        data = envelope.content
        self.counts["ok"] += 1
        return f"250 stored {len(data)} {digest(data)}"


def sink(_name):
    """Helper process `smtprelay-sink`."""
    counts = {"ok": 0, "failed": 0}
    serve(SinkHandler(counts), ports("aiosmtpd-relay")[1], counts, "sink")


class Hop:
    """The relay's one SMTP session to the sink (blocking smtplib, used from one thread)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def forward(self, mail_from, rcpt_tos, data):
        try:
            if self.conn is None:
                self.conn = smtplib.SMTP("127.0.0.1", self.port, local_hostname="relay.localize.test",
                                         timeout=HOP_TIMEOUT_S)
                self.conn.ehlo()
            code, msg = self.conn.mail(mail_from)
            if code != 250:
                raise smtplib.SMTPResponseException(code, msg)
            for r in rcpt_tos:
                code, msg = self.conn.rcpt(r)
                if code not in (250, 251):
                    raise smtplib.SMTPResponseException(code, msg)
            code, msg = self.conn.data(data)
            if code != 250:
                raise smtplib.SMTPResponseException(code, msg)
            return msg.decode(errors="replace")
        except BaseException:
            if self.conn is not None:
                try:
                    self.conn.close()
                except OSError:
                    pass
            self.conn = None
            raise


class RelayHandler:
    def __init__(self, counts, hop):
        self.counts = counts
        self.hop = hop
        self.pool = ThreadPoolExecutor(max_workers=1)

    async def handle_DATA(self, server, session, envelope):
        loop = asyncio.get_running_loop()
        try:
            reply = await loop.run_in_executor(self.pool, self.hop.forward, envelope.mail_from,
                                               list(envelope.rcpt_tos), envelope.content)
        except Exception as e:
            self.counts["failed"] += 1
            log(f"relay: next hop failed: {e!r:.120}")
            return "451 4.4.1 next hop failed"
        self.counts["ok"] += 1
        return f"250 relayed: {reply}"


def relay(_name):
    """Helper process `smtprelay-relay`."""
    counts = {"ok": 0, "failed": 0}
    serve(RelayHandler(counts, Hop(ports("aiosmtpd-relay")[1])), ports("aiosmtpd-relay")[0], counts, "relay")


def message(name, i):
    """Message i of client `name` (its length varies with i)."""
    body = f"message {i} of client {name}: " + "y" * (i % 70)
    return (f"From: c{name}@localize.test\r\nTo: box@localize.test\r\nSubject: m{name}-{i}\r\n\r\n"
            f"{body}\r\n").encode()


class MailClient:
    """One SMTP session to the relay (`smtplib`, 2 s timeout), made again after a failure."""

    def __init__(self, port, name):
        self.port = port
        self.name = name
        self.conn = None
        self.errors = 0

    def send(self, i):
        if self.conn is None:
            self.conn = smtplib.SMTP("127.0.0.1", self.port, local_hostname=f"client{self.name}.localize.test",
                                     timeout=CLIENT_TIMEOUT_S)
            self.conn.ehlo()
        data = message(self.name, i)
        code, msg = self.conn.mail(f"c{self.name}@localize.test")
        if code != 250:
            raise ValueError(f"MAIL: {code} {msg!r:.60}")
        code, msg = self.conn.rcpt("box@localize.test")
        if code != 250:
            raise ValueError(f"RCPT: {code} {msg!r:.60}")
        code, msg = self.conn.data(data)
        want = f"stored {len(data)} {digest(data)}"
        if code != 250 or want not in msg.decode(errors="replace"):
            raise ValueError(f"message {i}: {code} {msg!r:.80}, wanted {want}")

    def step(self, i):
        try:
            self.send(i)
            return True
        except (OSError, smtplib.SMTPException, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.160}")
            if self.conn is not None:
                try:
                    self.conn.close()
                except OSError:
                    pass
            self.conn = None
            return False


def workload(name, n, pause):
    c = MailClient(ports("aiosmtpd-relay")[0], name)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    if c.conn is not None:
        try:
            c.conn.quit()
        except (OSError, smtplib.SMTPException):
            pass
    return ok, c.errors


def client(name):
    """Helper process `smtprelay-client --name N`: REQUESTS2 messages, every 80 ms."""
    ok, errors = workload(name, REQUESTS2, 0.08)
    log(f"aiosmtpd-relay client {name}: {ok}/{REQUESTS2} messages ok, {errors} failed")


def run(tmp, n):
    rport, sport = ports("aiosmtpd-relay")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("sink", [PY, LAUNCHER, "smtprelay-sink"], env=env)
        wait_port(sport, p, timeout=20)
        p = d.start("relay", [PY, LAUNCHER, "smtprelay-relay"], env=env)
        wait_port(rport, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "smtprelay-client", "--name", "2"])
        ok, errors = workload("1", n, 0.04)
        wait_readers([helper], seconds=25)
        log(f"aiosmtpd-relay: {ok}/{n} messages ok, {errors} failed")
