"""syslog-ng-relay: a log-shipping chain of two syslog-ng daemons (Debian `syslog-ng-core`
3.38: C on ivykis, a main loop and worker threads). Senders write to the relay over TCP
(RFC 3164 lines, LF framing) and over UDP (one datagram a message); the relay forwards every
message over TCP in RFC 5424 syslog framing (octet counting) to the central daemon, which
writes each message's text to a file; a tailer reads that file and checks every message.

Ports: relay TCP and UDP input = p[0], central input = p[1]. The launcher is sender 1 (a
socket of its own, N messages over TCP; a failed send is counted, the connection made
again after 0.2 s, and the workload goes on); the helper `ng-sender --name 2` sends through
the standard library's `logging.handlers.SysLogHandler` over UDP; the helper `ng-tailer`
follows the central daemon's file and checks each message: its payload carries its own
length and a CRC-32, so a message that arrives garbled or cut is counted as damaged. The
tailer reports how many of each sender's messages arrived whole, and leaves once both
senders' `stop` messages arrived (or at the deadline). The relay reopens a lost connection
to the central daemon after 1 s (`time-reopen(1)`) and holds up to 10 000 messages
meanwhile; both daemons run in the foreground (`-F`) as root with their persist, pid and
control files in the run's directory.
"""

import logging
import logging.handlers
import os
import re
import socket
import time
import zlib

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port

RELAY = """@version: 3.35
options {{ time-reopen(1); log-fifo-size(10000); keep-hostname(yes); }};
source s_tcp {{ network(ip("127.0.0.1") port({relay}) transport("tcp")); }};
source s_udp {{ network(ip("127.0.0.1") port({relay}) transport("udp")); }};
destination d_central {{ syslog("127.0.0.1" port({central}) transport("tcp")); }};
log {{ source(s_tcp); source(s_udp); destination(d_central); }};
"""

CENTRAL = """@version: 3.35
options {{ keep-hostname(yes); }};
source s_relay {{ syslog(ip("127.0.0.1") port({central}) transport("tcp")); }};
destination d_file {{ file("{out}" template("$MSG\\n") flush-lines(1)); }};
log {{ source(s_relay); destination(d_file); }};
"""

FORMAT = logging.Formatter("suite sender2: %(message)s")
SEEN = re.compile(r"sender=(\d) seq=(\d+|stop)(?: len=(\d+) crc=([0-9a-f]{8}) (\S*))?")


def payload(who, i):
    """Message i of sender `who`: its sequence number, then the length and CRC-32 of a
    filler whose size varies with i."""
    fill = ("%s%d" % ("abcdefghij"[i % 10], i)) * (1 + i % 40)
    return f"sender={who} seq={i} len={len(fill)} crc={zlib.crc32(fill.encode()):08x} {fill}"


class Sender:
    """Sender 1: syslog lines over one TCP connection, a new connection after any failure."""

    def __init__(self, port):
        self.port = port
        self.sock = None

    def send(self, text):
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
        line = f"<14>{time.strftime('%b %d %H:%M:%S')} suite sender1: {text}\n"
        self.sock.sendall(line.encode())

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None


class Handler(logging.handlers.SysLogHandler):
    """The standard handler, except that a failed emit reaches the sender's loop (the
    exception being handled is raised again) instead of logging's report on stderr."""

    def handleError(self, record):
        raise


def sender(name):
    """Helper process `ng-sender --name 2`: logs through SysLogHandler over UDP."""
    relay = ports("syslog-ng-relay")[0]
    term = terminated()
    h, ok, failed = None, 0, 0
    rec = logging.getLogger("suite")
    rec.propagate = False
    rec.setLevel(logging.INFO)
    end = time.monotonic() + WORKLOAD_S
    i = 0
    while not term.is_set() and time.monotonic() < end and i < 200:
        try:
            if h is None:
                h = Handler(("127.0.0.1", relay), socktype=socket.SOCK_DGRAM)
                h.append_nul = False
                h.setFormatter(FORMAT)
            h.emit(rec.makeRecord("suite", logging.INFO, __file__, 0, "%s", (payload(name, i),), None))
            ok, i = ok + 1, i + 1
        except OSError as e:
            failed, i = failed + 1, i + 1
            log(f"sender {name}: send failed: {e!r}")
            if h is not None:
                h.close()
            h = None
            time.sleep(0.2)
        time.sleep(0.08)
    try:
        h = h or Handler(("127.0.0.1", relay), socktype=socket.SOCK_DGRAM)
        h.append_nul = False
        h.setFormatter(FORMAT)
        h.emit(rec.makeRecord("suite", logging.INFO, __file__, 0, f"sender={name} seq=stop", (), None))
        h.close()
    except OSError as e:
        log(f"sender {name}: could not send the stop message: {e!r}")
    log(f"ng sender {name}: {ok}/{i} messages sent, {failed} failed{' (told to stop)' if term.is_set() else ''}")


def check(m):
    """True when a message's filler has the length and CRC-32 its payload states."""
    _, _, n, crc, fill = m.groups()
    return n is not None and int(n) == len(fill) and f"{zlib.crc32(fill.encode()):08x}" == crc


def tailer(path):
    """Helper process `ng-tailer --name PATH`: follows the central daemon's file."""
    term = terminated()
    f, buf = None, ""
    seen, stops, dup, damaged, failed = {"1": set(), "2": set()}, set(), 0, 0, 0
    end = time.monotonic() + WORKLOAD_S + 10
    while not term.is_set() and time.monotonic() < end and len(stops) < 2:
        try:
            if f is None and os.path.exists(path):
                f = open(path, errors="replace")
            if f is not None:
                buf += f.read()
                *lines, buf = buf.split("\n")
                for line in lines:
                    m = SEEN.search(line)
                    if not m:
                        if line.strip():
                            damaged += 1
                            log(f"tailer: a line without a payload: {line[:80]!r}")
                        continue
                    who, seq = m.group(1), m.group(2)
                    if seq == "stop":
                        stops.add(who)
                    elif not check(m):
                        damaged += 1
                        log(f"tailer: sender {who} message {seq} damaged: {line[:80]!r}")
                    elif seq in seen[who]:
                        dup += 1
                    else:
                        seen[who].add(seq)
        except (OSError, ValueError) as e:
            failed += 1
            log(f"tailer: read failed: {e!r}")
            f, buf = None, ""
        time.sleep(0.05)
    log(f"ng tailer: {len(seen['1'])} messages of sender 1, {len(seen['2'])} of sender 2 arrived whole, "
        f"{damaged} damaged, {dup} duplicates, {failed} reads failed, stops {sorted(stops)}"
        f"{' (told to stop)' if term.is_set() else ''}")


# syslog-ng-core conflicts with rsyslog in Debian (both provide system-log-daemon); where
# rsyslog is installed, setup.sh unpacks syslog-ng here instead.
UNPACKED = "/opt/culprit/syslog-ng"


def _command():
    """syslog-ng's argv head and environment: the installed one, else the unpacked copy with
    its libraries and modules."""
    if os.path.exists("/usr/sbin/syslog-ng") or not os.path.exists(UNPACKED + "/usr/sbin/syslog-ng"):
        return ["syslog-ng"], None
    lib = UNPACKED + "/usr/lib/syslog-ng"
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(x for x in (lib, os.environ.get("LD_LIBRARY_PATH")) if x))
    return [UNPACKED + "/usr/sbin/syslog-ng", f"--module-path={lib}/3.38"], env


def _start(d, tmp, name):
    head, env = _command()
    return d.start(name, head + ["-F", "--no-caps", "-f", os.path.join(tmp, f"{name}.conf"),
                                 "-R", os.path.join(tmp, f"{name}.persist"), "-p", os.path.join(tmp, f"{name}.pid"),
                                 "-c", os.path.join(tmp, f"{name}.ctl")], cwd=tmp, env=env)


def run(tmp, n):
    relay, central = ports("syslog-ng-relay")[:2]
    out = os.path.join(tmp, "central.out")
    for name, text in (("relay", RELAY), ("central", CENTRAL)):
        with open(os.path.join(tmp, f"{name}.conf"), "w") as f:
            f.write(text.format(relay=relay, central=central, out=out))
    with Daemons(tmp) as d:
        wait_port(central, _start(d, tmp, "central"), timeout=15)
        wait_port(relay, _start(d, tmp, "relay"), timeout=15)
        tail = d.start("tailer", [PY, LAUNCHER, "ng-tailer", "--name", out])
        other = d.start("sender2", [PY, LAUNCHER, "ng-sender", "--name", "2"])
        s, ok, failed = Sender(relay), 0, 0
        for i in steps(n):
            try:
                s.send(payload(1, i))
                ok += 1
            except OSError as e:
                failed += 1
                log(f"send failed: {e!r}")
                s.close()
                time.sleep(0.2)
            time.sleep(0.08)
        try:
            s.send("sender=1 seq=stop")
        except OSError as e:
            log(f"could not send the stop message: {e!r}")
        s.close()
        end = time.monotonic() + 12
        for p in (other, tail):
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except Exception:
                log("a helper did not stop")
        log(f"syslog-ng-relay: {ok}/{n} messages sent, {failed} failed")
