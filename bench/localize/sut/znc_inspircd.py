"""znc-inspircd: an IRC bouncer, ZNC 1.8 (Debian `znc`: C++, one process, its own socket
loop), holding two users' connections to an IRC server, InspIRCd 3 (Debian `inspircd`:
C++, one process, epoll), and three Python IRC clients: two through the bouncer, one
straight to the server, all in one channel.

Ports: InspIRCd = p[0], ZNC = p[1]. InspIRCd runs in the foreground (`--nofork`,
`--runasroot`) from a private configuration (one client listener on 127.0.0.1, a connect
class without flood limits, no DNS lookups of clients, no modules beyond the core). ZNC
runs in the foreground (`--foreground --datadir DIR`) from a private data directory whose
`configs/znc.conf` is written here (no `--makeconf`): one IRC listener on 127.0.0.1, two
users, alice and bob (SHA-256 salted passwords), each with one network, the InspIRCd
above, whose channel #bench it joins and buffers while no client is attached (flood
control raised so that ZNC passes every line on at once, no timestamps added to played
back lines). ZNC refuses to run as root without a 30-s pause, so it runs in a user
namespace of its own in which the launcher's uid (root) is mapped to uid 1000 (`unshare
--user --map-user=1000 --map-group=1000`): ZNC sees an ordinary user that owns its data
directory (and the recorder's pool), and no privilege is given up.

Clients (each one TCP connection, 2 s timeout; after a failure it logs, waits 200 ms,
connects again — a new nick when the old one is still taken —, joins again and goes on):
the launcher is `alice` through ZNC (PASS alice:…), the helper `irc-bnc-client --name 2`
is `bob` through ZNC, the helper `irc-bnc-client --name 3` is `carol` straight to
InspIRCd. Each waits (at most 20 s) until the three are in #bench, then posts its
messages to the channel, one every 150 ms (the launcher N/2, the helpers 60 each): `m
WHO I DIGEST PAYLOAD`, DIGEST the first 12 hex digits of the SHA-1 of PAYLOAD, whose
length varies with I; between posts it reads what arrives and checks every message of the
others (digest, and each number once). At the end it posts `done WHO N F` (N messages,
F the numbers it failed to send) and reads until it has the end marks of the other two and
every message they sent, or 8 s have passed; it says how many messages it sent, how many
of the others' it received intact out of how many they sent, how many with a wrong
digest, how many are missing and how many came twice (a bouncer plays back what it
buffered while its client was away).
"""

import hashlib
import os
import re
import socket
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, terminated, wait_port, wait_readers

SALT = "localizebenchsalt202"
USERS = ("alice", "bob")
WHO = {"1": "alice", "2": "bob", "3": "carol"}
REQUESTS = 60
PAUSE = 0.15
MSG = re.compile(r"\bm (\w+) (\d+) ([0-9a-f]{12}) (\S+)")
DONE = re.compile(r"\bdone (\w+) (\d+) ([\d,]*)")

INSPIRCD_CONF = """<server name="irc.bench" description="localize bench server" network="Bench">
<admin name="bench" nick="bench" email="bench@irc.bench">
<bind address="127.0.0.1" port="{port}" type="clients">
<connect allow="127.0.0.1" timeout="20" threshold="1000" commandrate="1000000" fakelag="off"
         pingfreq="120" hardsendq="1048576" softsendq="262144" recvq="65536" localmax="50"
         globalmax="50" useident="no" limit="100" maxchans="20" resolvehostnames="no">
<channels users="20" opers="60">
<dns timeout="1">
<pid file="{dir}/inspircd.pid">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="{dir}/inspircd.log">
<options prefixquit="Quit: " syntaxhints="no" announcets="yes" pingwarning="15" defaultmodes="nt">
<performance netbuffersize="10240" somaxconn="128" softlimit="1024" clonesonconnect="no" quietbursts="yes">
<security announceinvites="dynamic" hideserver="" maxtargets="20" userstats="Pu" customversion="">
<limits maxnick="30" maxchan="64" maxmodes="20" maxident="11" maxquit="255" maxtopic="307"
        maxkick="255" maxreal="128" maxgecos="128" maxaway="200">
<path moduledir="/usr/lib/inspircd/modules" datadir="{dir}" logdir="{dir}" configdir="{dir}">
"""

ZNC_USER = """<User {name}>
    Admin = false
    Nick = {name}
    AltNick = {name}_
    Ident = {name}
    RealName = localize bench {name}
    Buffer = 500
    AutoClearChanBuffer = true
    PrependTimestamp = false
    AppendTimestamp = false
    MaxNetworks = 1
    <Pass password>
        Method = SHA256
        Hash = {hash}
        Salt = {salt}
    </Pass>
    <Network bench>
        Server = 127.0.0.1 {ircd}
        FloodRate = 1000.00
        FloodBurst = 1000
        JoinDelay = 0
        <Chan #bench>
        </Chan>
    </Network>
</User>
"""

ZNC_CONF = """Version = 1.8.2
<Listener bench>
    Host = 127.0.0.1
    Port = {port}
    IPv4 = true
    IPv6 = false
    SSL = false
    AllowIRC = true
    AllowWeb = false
</Listener>
ServerThrottle = 0
ConnectDelay = 0
AnonIPLimit = 100
MaxBufferSize = 500
ProtectWebSessions = false
HideVersion = true
"""


def password(name):
    return f"pw-{name}"


def digest(text):
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def payload(who, i):
    return f"{who}-{i}-" + "z" * (i * 7 % 40)


class IrcClient:
    """One IRC connection (raw socket, line protocol) that registers, joins #bench and
    reconnects after any failure; `bouncer` makes it log in to ZNC as that user."""

    def __init__(self, who, port, bouncer):
        self.who, self.port, self.bouncer = who, port, bouncer
        self.sock, self.buf, self.errors, self.gen = None, b"", 0, 0
        self.nick = who

    def connect(self):
        self.close()
        self.gen += 1
        self.nick = self.who if self.gen == 1 or self.bouncer else f"{self.who}{self.gen}"
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
        self.buf = b""
        if self.bouncer:
            self.send(f"PASS {self.who}:{password(self.who)}")
        self.send(f"NICK {self.nick}")
        self.send(f"USER {self.who} 0 * :localize bench client")
        end = time.monotonic() + 10
        while time.monotonic() < end:  # until the welcome (001); PINGs answered
            cmd, args = self.read()
            if cmd == "001":
                break
            if cmd == "433":  # nick in use (the old connection is not gone yet)
                self.nick = f"{self.who}{self.gen}x"
                self.send(f"NICK {self.nick}")
            if cmd in ("464", "ERROR"):
                raise ConnectionError(f"refused: {cmd} {args[2]!r}")
        else:
            raise TimeoutError("no welcome in 10 s")
        self.send("JOIN #bench")

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
        """The next message (command, (prefix, parameters, trailing)); answers PING itself."""
        while True:
            while b"\r\n" not in self.buf:
                data = self.sock.recv(4096)
                if not data:
                    raise ConnectionError("end of stream")
                self.buf += data
            raw, self.buf = self.buf.split(b"\r\n", 1)
            line = raw.decode(errors="replace")
            if line.startswith("@"):  # message tags
                line = line.partition(" ")[2]
            prefix = ""
            if line.startswith(":"):
                prefix, _, line = line[1:].partition(" ")
            head, _, trail = line.partition(" :")
            parts = head.split()
            if not parts:
                continue
            if parts[0] == "PING":
                self.send("PONG :" + (trail or " ".join(parts[1:])))
                continue
            return parts[0], (prefix, parts[1:], trail)


class Member:
    """A client's part of the exchange: what it sent and what it received from the others."""

    def __init__(self, name, n):
        self.who = WHO[name]
        self.n = n
        bouncer = name in ("1", "2")
        p = ports("znc-inspircd")
        self.irc = IrcClient(self.who, p[1] if bouncer else p[0], bouncer)
        self.others = [w for w in WHO.values() if w != self.who]
        self.got = {w: set() for w in self.others}
        self.bad = self.twice = 0
        self.done = {}  # who -> (n, failed numbers)
        self.failed_sends = []
        self.names = set()

    def safely(self, fn):
        try:
            if self.irc.sock is None:
                self.irc.connect()
            return fn()
        except (OSError, ConnectionError, ValueError) as e:
            self.irc.errors += 1
            log(f"{self.who}: request failed: {e!r}")
            self.irc.close()
            time.sleep(0.2)  # back off before connecting again, as IRC clients do
            return None

    def take(self, cmd, prefix, params, text):
        if cmd == "353":  # NAMES
            self.names |= {re.sub(r"^[@+%&~]", "", x) for x in text.split()}
        elif cmd == "JOIN":
            self.names.add(prefix.split("!")[0])
        elif cmd == "PRIVMSG" and params[:1] == ["#bench"]:
            m = DONE.search(text)
            if m and m.group(1) in self.got:
                self.done[m.group(1)] = (int(m.group(2)), {int(x) for x in m.group(3).split(",") if x})
                return
            m = MSG.search(text)
            if not m or m.group(1) not in self.got:
                return
            who, i, d, body = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            if digest(body) != d or body != payload(who, i):
                self.bad += 1
                log(f"{self.who}: message {i} of {who} arrived garbled: {text[:60]!r}")
            elif i in self.got[who]:
                self.twice += 1
            else:
                self.got[who].add(i)

    def pump(self, seconds):
        """Reads and takes what arrives for `seconds`."""
        end = time.monotonic() + seconds

        def one():
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return
                self.irc.sock.settimeout(left)
                try:
                    cmd, (prefix, params, text) = self.irc.read()
                except socket.timeout:
                    return
                finally:
                    if self.irc.sock is not None:
                        self.irc.sock.settimeout(2.0)
                self.take(cmd, prefix, params, text)

        self.safely(one)

    def wait_all(self, seconds=20.0):
        """Until the three are in #bench (asks NAMES every 500 ms)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.names = set()
            self.safely(lambda: self.irc.send("NAMES #bench"))
            self.pump(0.5)
            if all(any(n.startswith(w) for n in self.names) for w in WHO.values()):
                return True
        log(f"{self.who}: not everybody joined #bench in {seconds:.0f} s: {sorted(self.names)}")
        return False

    def post(self, i):
        def one():
            body = payload(self.who, i)
            self.irc.send(f"PRIVMSG #bench :m {self.who} {i} {digest(body)} {body}")
            return True

        if not self.safely(one):
            self.failed_sends.append(i)

    def missing(self):
        out = 0
        for w in self.others:
            if w in self.done:
                n, failed = self.done[w]
                out += len(set(range(n)) - failed - self.got[w])
        return out

    def run(self, term=None):
        self.wait_all()
        done = 0
        for i in steps(self.n):
            if term is not None and term.is_set():
                break
            self.post(i)
            done += 1
            self.pump(PAUSE)
        failed = ",".join(str(i) for i in self.failed_sends)
        self.safely(lambda: self.irc.send(f"PRIVMSG #bench :done {self.who} {done} {failed}"))
        end = time.monotonic() + 8
        while time.monotonic() < end and not (term is not None and term.is_set()):
            if len(self.done) == len(self.others) and self.missing() == 0:
                break
            self.pump(0.3)
        self.safely(lambda: self.irc.send("QUIT :done"))
        self.irc.close()
        expected = sum(self.done[w][0] - len(self.done[w][1]) for w in self.done)
        got = sum(len(self.got[w]) for w in self.done)
        unmarked = [w for w in self.others if w not in self.done]
        return (f"{done - len(self.failed_sends)}/{done} messages sent, {got}/{expected} of the others' received "
                f"intact, {self.bad} with a wrong digest, {self.missing()} missing, {self.twice} twice, "
                f"{self.irc.errors} failed" + (f", no end mark from {','.join(unmarked)}" if unmarked else ""))


def client(name):
    """Helper process `irc-bnc-client --name 2|3` (bob through ZNC, carol straight)."""
    term = terminated()
    said = Member(name, REQUESTS).run(term)
    log(f"irc client {WHO[name]}: {said}{' (told to stop)' if term.is_set() else ''}")


def znc_config(datadir, ircd, port):
    os.makedirs(os.path.join(datadir, "configs"), exist_ok=True)
    text = ZNC_CONF.format(port=port)
    for name in USERS:
        h = hashlib.sha256((password(name) + SALT).encode()).hexdigest()
        text += ZNC_USER.format(name=name, hash=h, salt=SALT, ircd=ircd)
    with open(os.path.join(datadir, "configs", "znc.conf"), "w") as f:
        f.write(text)


def wait_znc_joined(port, timeout=20.0):
    """Waits until ZNC's two users are in #bench on InspIRCd (asked there by a probe
    client that leaves again)."""
    end = time.monotonic() + timeout
    probe = IrcClient("probe", port, False)
    try:
        probe.connect()
        while time.monotonic() < end:
            probe.send("NAMES #bench")
            names = set()
            while True:
                cmd, (_, _, text) = probe.read()
                if cmd == "353":
                    names |= {re.sub(r"^[@+%&~]", "", x) for x in text.split()}
                if cmd == "366":
                    break
            if set(USERS) <= names:
                probe.send("QUIT :probe")
                return
            time.sleep(0.2)
        raise RuntimeError("ZNC's users did not join #bench on InspIRCd")
    finally:
        probe.close()


def run(tmp, n):
    p = ports("znc-inspircd")
    conf = os.path.join(tmp, "inspircd.conf")
    with open(conf, "w") as f:
        f.write(INSPIRCD_CONF.format(port=p[0], dir=tmp))
    datadir = os.path.join(tmp, "znc")
    znc_config(datadir, p[0], p[1])
    with Daemons(tmp) as d:
        i = d.start("inspircd", ["inspircd", "--nofork", "--runasroot", f"--config={conf}"])
        wait_port(p[0], i, timeout=20)
        z = d.start("znc", ["unshare", "--user", "--map-user=1000", "--map-group=1000",
                            "znc", "--foreground", "--datadir", datadir])
        wait_port(p[1], z, timeout=20)
        wait_znc_joined(p[0])
        helpers = [d.start(f"client{k}", [PY, LAUNCHER, "irc-bnc-client", "--name", k]) for k in ("2", "3")]
        said = Member("1", n // 2).run()
        wait_readers(helpers, seconds=40)
        log(f"irc client alice: {said}")
