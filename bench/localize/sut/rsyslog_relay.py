"""rsyslog-relay: a log-shipping chain of two rsyslog daemons (Debian's `rsyslog` and
`rsyslog-relp`: C, a thread per input and per action queue). Senders write syslog messages
to the relay over plain TCP (RFC 6587 LF framing); the relay forwards them, through a
disk-less action queue that retries forever, over RELP (acknowledged transactions) to the
central daemon, which writes them to a file; a tailer reads that file and checks that every
message arrived.

Ports: relay TCP input = p[0], central RELP input = p[1]. The launcher is sender 1 (a socket
of its own, N messages), the helper `syslog-sender --name 2` sends through the standard
library's `logging.handlers.SysLogHandler` over TCP (NUL-terminated frames), the helper
`syslog-tailer` follows the central daemon's file. A sender that fails to send counts the
failure, makes a new connection and goes on; the tailer reports how many of each sender's
messages arrived, and leaves once both senders' `stop` messages arrived (or at the deadline).
"""

import logging
import logging.handlers
import os
import re
import socket
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port

RELAY = """global(workDirectory="{dir}/relay" maxMessageSize="8k")
module(load="imtcp" AddtlFrameDelimiter="0")
input(type="imtcp" port="{relay}" address="127.0.0.1")
module(load="omrelp")
action(type="omrelp" target="127.0.0.1" port="{central}" timeout="2" conn.timeout="2"
       queue.type="LinkedList" queue.size="20000" action.resumeRetryCount="-1"
       action.resumeInterval="1")
"""

CENTRAL = """global(workDirectory="{dir}/central" maxMessageSize="8k")
module(load="imrelp")
input(type="imrelp" port="{central}" address="127.0.0.1")
template(name="line" type="string" string="%msg%\\n")
action(type="omfile" file="{dir}/central.out" template="line" flushOnTXEnd="on" asyncWriting="off")
"""

# A timestamp, a host name and a tag, as a syslog(3) caller writes them (RFC 3164).
FORMAT = logging.Formatter("%(asctime)s suite sender2: %(message)s", datefmt="%b %d %H:%M:%S")
SEEN = re.compile(r"sender=(\d) seq=(\d+|stop)")


class Sender:
    """Sender 1: syslog lines over one TCP connection, a new connection after any failure."""

    def __init__(self, port):
        self.port = port
        self.sock = None

    def send(self, i, text):
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
        line = f"<14>{time.strftime('%b %d %H:%M:%S')} suite sender1: sender=1 seq={i} {text}\n"
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
    """Helper process `syslog-sender --name 2`: logs through SysLogHandler over TCP."""
    relay = ports("rsyslog-relay")[0]
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
                h = Handler(("127.0.0.1", relay), socktype=socket.SOCK_STREAM)
                h.socket.settimeout(2.0)
                h.setFormatter(FORMAT)
            h.emit(rec.makeRecord("suite", logging.INFO, __file__, 0, f"sender={name} seq={i} payload %s",
                                  ("x" * (i % 50),), None))
            ok, i = ok + 1, i + 1
        except (OSError, ConnectionError) as e:
            failed += 1
            log(f"sender {name}: send failed: {e!r}")
            try:
                if h is not None:
                    h.close()
            except OSError:
                pass
            h = None
            time.sleep(0.2)
        time.sleep(0.08)
    try:
        h = h or Handler(("127.0.0.1", relay), socktype=socket.SOCK_STREAM)
        h.setFormatter(FORMAT)
        h.emit(rec.makeRecord("suite", logging.INFO, __file__, 0, f"sender={name} seq=stop", (), None))
        h.close()
    except (OSError, ConnectionError) as e:
        log(f"sender {name}: could not send the stop message: {e!r}")
    log(f"syslog sender {name}: {ok}/{i} messages sent, {failed} failed{' (told to stop)' if term.is_set() else ''}")


class Tailer:
    """Follows the central daemon's output file by polling it."""

    def __init__(self, path):
        self.path = path
        self.f = None
        self.buf = ""

    def poll(self):
        if self.f is None:
            if not os.path.exists(self.path):
                return []
            self.f = open(self.path, errors="replace")
        self.buf += self.f.read()
        *lines, self.buf = self.buf.split("\n")
        return lines


def tailer(path):
    """Helper process `syslog-tailer --name PATH`."""
    term = terminated()
    t = Tailer(path)
    seen, stops, dup, failed = {"1": set(), "2": set()}, set(), 0, 0
    end = time.monotonic() + WORKLOAD_S + 10
    while not term.is_set() and time.monotonic() < end and len(stops) < 2:
        try:
            for line in t.poll():
                m = SEEN.search(line)
                if not m:
                    continue
                who, seq = m.groups()
                if seq == "stop":
                    stops.add(who)
                elif seq in seen[who]:
                    dup += 1
                else:
                    seen[who].add(seq)
        except (OSError, ValueError) as e:
            failed += 1
            log(f"tailer: read failed: {e!r}")
            t = Tailer(path)
        time.sleep(0.05)
    log(f"syslog tailer: {len(seen['1'])} messages of sender 1, {len(seen['2'])} of sender 2 arrived, "
        f"{dup} duplicates, {failed} reads failed, stops {sorted(stops)}{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    relay, central = ports("rsyslog-relay")[:2]
    for name, text in (("relay", RELAY), ("central", CENTRAL)):
        os.makedirs(os.path.join(tmp, name), exist_ok=True)
        with open(os.path.join(tmp, f"{name}.conf"), "w") as f:
            f.write(text.format(dir=tmp, relay=relay, central=central))
    out = os.path.join(tmp, "central.out")
    with Daemons(tmp) as d:
        p = d.start("central", ["rsyslogd", "-n", "-f", os.path.join(tmp, "central.conf"),
                                "-i", os.path.join(tmp, "central.pid")], cwd=tmp)
        wait_port(central, p, timeout=15)
        p = d.start("relay", ["rsyslogd", "-n", "-f", os.path.join(tmp, "relay.conf"),
                              "-i", os.path.join(tmp, "relay.pid")], cwd=tmp)
        wait_port(relay, p, timeout=15)
        tail = d.start("tailer", [PY, LAUNCHER, "syslog-tailer", "--name", out])
        other = d.start("sender2", [PY, LAUNCHER, "syslog-sender", "--name", "2"])
        s, ok, failed = Sender(relay), 0, 0
        for i in steps(n):
            try:
                s.send(i, "x" * (i % 60))
                ok += 1
            except OSError as e:
                failed += 1
                log(f"send failed: {e!r}")
                s.close()
                time.sleep(0.2)
            time.sleep(0.08)
        try:
            s.send("stop", "")
        except OSError as e:
            log(f"could not send the stop message: {e!r}")
        s.close()
        end = time.monotonic() + 12
        for p in (other, tail):
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except Exception:
                log("a helper did not stop")
        log(f"rsyslog-relay: {ok}/{n} messages sent, {failed} failed")
