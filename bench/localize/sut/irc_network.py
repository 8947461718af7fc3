"""irc-network: two ngircd servers linked into one network, a sender client on server 1
and two listener clients (one on each server) in a channel (C daemons, Python clients).

Ports: server 1 = p[0], server 2 = p[1] (server 2 connects to server 1; the link carries
every channel message from one to the other). The sender posts N messages to `#bench`;
each listener counts them and answers every fifth with a private message to the sender,
which therefore crosses the link back. Clients reconnect (new nick, rejoin) after any
failure; the listeners leave on a `STOP` message or when idle.
"""

import os
import socket
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

IDLE_S = 6.0


class IrcClient:
    """A line-oriented IRC client that registers, joins #bench and reconnects."""

    def __init__(self, base_nick, port):
        self.base, self.port = base_nick, port
        self.sock, self.buf, self.errors, self.gen = None, b"", 0, 0
        self.nick = base_nick

    def connect(self):
        self.close()
        self.gen += 1
        self.nick = self.base if self.gen == 1 else f"{self.base}{self.gen}"
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
        self.buf = b""
        self.send(f"NICK {self.nick}")
        self.send(f"USER {self.nick} 0 * :bench client")
        while True:  # until the welcome (001); PINGs answered
            cmd, args = self.read()
            if cmd == "001":
                break
            if cmd == "433":
                raise ValueError("nick in use")
        self.send("JOIN #bench")
        while self.read()[0] != "366":  # end of NAMES: joined
            pass

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def send(self, line):
        self.sock.sendall(line.encode() + b"\r\n")

    def read(self):
        """The next message (command, parameters); answers PING itself."""
        while True:
            while b"\r\n" not in self.buf:
                data = self.sock.recv(4096)
                if not data:
                    raise ConnectionError("end of stream")
                self.buf += data
            raw, self.buf = self.buf.split(b"\r\n", 1)
            line = raw.decode(errors="replace")
            prefix = ""
            if line.startswith(":"):
                prefix, _, line = line[1:].partition(" ")
            head, _, trail = line.partition(" :")
            parts = head.split()
            if not parts:
                continue
            if parts[0] == "PING":
                self.send("PONG :" + trail)
                continue
            return parts[0], (prefix, parts[1:], trail)

    def safely(self, fn):
        try:
            if self.sock is None:
                self.connect()
            return fn()
        except (OSError, ConnectionError, ValueError) as e:
            self.errors += 1
            log(f"{self.base}: failed: {e!r}")
            self.close()
            time.sleep(0.2)  # back off before reconnecting, as IRC clients do
            return None


def client(name):
    """Helper process `irc-client --name 1|2`: a listener on server 2 (1) or server 1 (2)."""
    port = ports("irc-network")[1 if name == "1" else 0]
    c = IrcClient(f"listen{name}", port)
    seen, last, stop = 0, time.monotonic(), False
    end = time.monotonic() + 60
    while not stop and time.monotonic() < end and time.monotonic() - last < IDLE_S:

        def one():
            nonlocal seen, stop
            c.sock.settimeout(1.0)
            try:
                cmd, (prefix, params, text) = c.read()
            except socket.timeout:
                return
            if cmd == "PRIVMSG" and params[:1] == ["#bench"]:
                if text == "STOP":
                    stop = True
                    return
                seen += 1
                if seen % 5 == 0:
                    c.send(f"PRIVMSG {prefix.split('!')[0]} :ack {seen}")

        before = seen
        c.safely(one)
        if seen != before:
            last = time.monotonic()
    c.safely(lambda: c.send("QUIT :done"))
    c.close()
    log(f"irc listener {name}: {seen} messages, {c.errors} failures")


def run(tmp, n):
    p1, p2 = ports("irc-network")[:2]
    with Daemons(tmp) as d:
        for i, port, peer_port in ((1, p1, p2), (2, p2, p1)):
            conf = os.path.join(tmp, f"ngircd{i}.conf")
            peer = 3 - i
            with open(conf, "w") as f:
                f.write(
                    "[Global]\n"
                    f"Name = irc{i}.bench\nInfo = bench server {i}\nListen = 127.0.0.1\nPorts = {port}\n"
                    f"MotdPhrase = bench\nPidFile = {tmp}/ngircd{i}.pid\nServerUID = 0\nServerGID = 0\n"
                    "[Limits]\nMaxPenaltyTime = 0\nMaxConnectionsIP = 0\nPingTimeout = 30\nPongTimeout = 10\nConnectRetry = 1\n"
                    "MaxNickLength = 20\n"
                    "[Options]\nDNS = no\nIdent = no\nPAM = no\n"
                    "[Server]\n"
                    f"Name = irc{peer}.bench\nHost = 127.0.0.1\nMyPassword = pw{i}\nPeerPassword = pw{peer}\n"
                    + (f"Port = {peer_port}\n" if i == 2 else "Passive = yes\n")
                )
            p = d.start(f"ngircd{i}", ["ngircd", "-n", "-f", conf])
            wait_port(port, p)
        time.sleep(1.5)  # server 2 links to server 1
        s = IrcClient("sender", p1)
        s.safely(lambda: None)  # connected and in #bench before the listeners come
        listeners = [d.start(f"listener{i}", [PY, LAUNCHER, "irc-client", "--name", str(i)]) for i in (1, 2)]

        def joined():  # both listeners' JOINs, seen within 15 s
            seen, end = set(), time.monotonic() + 15
            s.sock.settimeout(0.5)
            while len(seen) < 2 and time.monotonic() < end:
                try:
                    cmd, (prefix, _, _) = s.read()
                except socket.timeout:
                    continue
                if cmd == "JOIN" and prefix.startswith("listen"):
                    seen.add(prefix.split("!")[0])
            s.sock.settimeout(2.0)

        s.safely(joined)
        ok = acks = 0
        for i in steps(n):

            def post():
                s.send(f"PRIVMSG #bench :message {i} " + "w" * (i % 30))
                s.sock.settimeout(0.02)
                got = 0
                try:
                    while True:
                        cmd, (_, params, text) = s.read()
                        if cmd == "PRIVMSG" and text.startswith("ack"):
                            got += 1
                except socket.timeout:
                    pass
                s.sock.settimeout(2.0)
                return got

            r = s.safely(post)
            if r is not None:
                ok += 1
                acks += r
        s.safely(lambda: s.send("PRIVMSG #bench :STOP"))
        time.sleep(0.3)
        s.safely(lambda: s.send("QUIT :done"))
        s.close()
        for p in listeners:
            try:
                p.wait(timeout=IDLE_S + 5)
            except Exception:
                log("a listener did not stop")
        log(f"irc-network: {ok}/{n} messages posted, {acks} acks, {s.errors} failures")
