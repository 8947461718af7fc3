"""icecast-relay: a streaming chain of two Icecast servers (Debian `icecast2` 2.4: C, a
thread per role — connection acceptor, source reader, listener senders — in one process
each): a Python source streams to the master, a relay Icecast pulls the mount from the
master as a listener and serves it again, and two Python listeners (one on the relay, one
on the master) check every frame they receive.

Ports: master = p[0], relay = p[1]. The source (the launcher) sends `PUT /live` (HTTP
basic authentication, `audio/mpeg`: Icecast's generic pass-through format) and then
frames: `ICEF`, a 4-byte sequence number, a 2-byte length, the payload (bytes derived from
the sequence number) and the CRC-32 of all that, every 20 ms; it connects again 0.5 s
after a failed send and goes on numbering. The relay, started once the master serves
`/live`, pulls it as its `<relay>` entry says (not on demand; Icecast reads the answer's
header one byte a call) and mounts it as its own `/live`. Each listener (the helper
`ice-listener --name 1` on the relay, `--name 2` on the master) reads the stream (2 s
timeout), finds frames by their magic, checks each one's length and CRC and that the
sequence numbers follow one another (a burst of older frames at connection is accepted),
counts new good frames, garbled bytes and gaps, and connects again 0.3 s after a failure;
both stop at the source's end mark. Both servers run as `nobody` (Icecast refuses root;
`changeowner`); the launcher waits for each one's change of user and starts again one
that died on the way or just after (about one start in 30 died so, traced or not); a
mount whose source sends nothing for 3 s is dropped (`source-timeout`), and the relay
tries the master again after a failed pull.
"""

import os
import socket
import struct
import time
import zlib

from .common import LAUNCHER, PY, Daemons, log, ports, steps, terminated, wait_port, wait_readers

PASSWORD = "culprit-source"
MAGIC = b"ICEF"
END = 0xFFFFFFFF
TIMEOUT_S = 2.0

CONF = """<icecast>
    <location>loopback</location>
    <admin>nobody@localhost</admin>
    <limits>
        <clients>50</clients>
        <sources>4</sources>
        <queue-size>524288</queue-size>
        <client-timeout>30</client-timeout>
        <header-timeout>5</header-timeout>
        <source-timeout>3</source-timeout>
        <burst-on-connect>1</burst-on-connect>
        <burst-size>8192</burst-size>
    </limits>
    <authentication>
        <source-password>{password}</source-password>
        <relay-password>{password}</relay-password>
        <admin-user>admin</admin-user>
        <admin-password>{password}</admin-password>
    </authentication>
    <hostname>127.0.0.1</hostname>
    <listen-socket>
        <port>{port}</port>
        <bind-address>127.0.0.1</bind-address>
    </listen-socket>
{relay}    <fileserve>0</fileserve>
    <paths>
        <basedir>/usr/share/icecast2</basedir>
        <logdir>{logdir}</logdir>
        <webroot>/usr/share/icecast2/web</webroot>
        <adminroot>/usr/share/icecast2/admin</adminroot>
        <pidfile>{logdir}/icecast.pid</pidfile>
    </paths>
    <logging>
        <accesslog>access.log</accesslog>
        <errorlog>error.log</errorlog>
        <loglevel>3</loglevel>
    </logging>
    <security>
        <chroot>0</chroot>
        <changeowner>
            <user>nobody</user>
            <group>nogroup</group>
        </changeowner>
    </security>
</icecast>
"""

RELAY = """    <relay>
        <server>127.0.0.1</server>
        <port>{master}</port>
        <mount>/live</mount>
        <local-mount>/live</local-mount>
        <on-demand>0</on-demand>
        <relay-shoutcast-metadata>0</relay-shoutcast-metadata>
    </relay>
"""


def frame(seq):
    """Frame `seq`: magic, sequence number, length, payload, CRC-32."""
    # The end mark is long: Icecast passes a source's bytes on in blocks of a few KB, so a
    # short last frame could wait in a half-filled block until the run ends.
    payload = (b"%08x" % seq) * (8 + seq % 40) if seq != END else b"E" * 6000
    body = MAGIC + struct.pack(">IH", seq, len(payload)) + payload
    return body + struct.pack(">I", zlib.crc32(body))


class Source:
    """The stream's source: one PUT connection to the master, made again after a failure."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.errors = 0
        self.connects = 0

    def connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S)
        import base64

        auth = base64.b64encode(f"source:{PASSWORD}".encode()).decode()
        self.sock.sendall((f"PUT /live HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                           f"Authorization: Basic {auth}\r\nContent-Type: audio/mpeg\r\n"
                           "Ice-Name: culprit\r\nExpect: 100-continue\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.sock.recv(1024)
            if not data:
                raise ConnectionError("the master closed the source connection")
            head += data
        status = head.split(b"\r\n", 1)[0]
        if b" 100 " not in status and b" 200 " not in status:
            raise ConnectionError(f"the master refused the source: {status[:60]!r}")
        self.connects += 1

    def send(self, seq):
        try:
            if self.sock is None:
                self.connect()
            self.sock.sendall(frame(seq))
            return True
        except (OSError, ConnectionError) as e:
            self.errors += 1
            log(f"source: frame {seq}: {e!r}")
            if self.sock is not None:
                self.sock.close()
            self.sock = None
            time.sleep(0.5)
            return False


class Checker:
    """A listener's frame checker: finds frames in the byte stream and checks them."""

    def __init__(self):
        self.buf = b""
        self.last = None
        self.good = self.garbled = self.gaps = 0
        self.ended = False

    def restart(self):
        self.buf = b""
        self.last = None

    def feed(self, data):
        self.buf += data
        while True:
            i = self.buf.find(MAGIC)
            if i < 0:
                self.garbled += max(0, len(self.buf) - 3)
                self.buf = self.buf[-3:]
                return
            if i > 0:
                if self.last is not None:
                    self.garbled += i
                self.buf = self.buf[i:]
            if len(self.buf) < 10:
                return
            seq, n = struct.unpack(">IH", self.buf[4:10])
            if len(self.buf) < 14 + n:
                if n > 6000:
                    self.garbled += 1
                    self.buf = self.buf[1:]
                    continue
                return
            body, crc = self.buf[:10 + n], struct.unpack(">I", self.buf[10 + n:14 + n])[0]
            if zlib.crc32(body) != crc:
                self.garbled += 1
                self.buf = self.buf[1:]
                continue
            self.buf = self.buf[14 + n:]
            self.check(seq)

    def check(self, seq):
        if seq == END:
            self.ended = True
            return
        if self.last is not None and seq > self.last + 1:
            self.gaps += 1
            log(f"listener: frames {self.last + 1}..{seq - 1} missing")
        if self.last is None or seq > self.last:
            self.last = seq
            self.good += 1


def listen(port, name, stop):
    """Reads /live from the server on `port` until the end mark, the flag, or the deadline."""
    c = Checker()
    errors = 0
    end = time.monotonic() + 60
    while not c.ended and not stop.is_set() and time.monotonic() < end:
        sock = None
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
            sock.sendall(f"GET /live HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: culprit-listener/{name}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                data = sock.recv(4096)
                if not data:
                    raise ConnectionError("closed before the headers")
                head += data
            head, rest = head.split(b"\r\n\r\n", 1)
            status = head.split(b"\r\n", 1)[0]
            if b" 200 " not in status:
                raise ConnectionError(f"answer {status[:40]!r}")
            c.restart()
            c.feed(rest)
            while not c.ended and not stop.is_set():
                data = sock.recv(8192)
                if not data:
                    raise ConnectionError("end of stream")
                c.feed(data)
        except (OSError, ConnectionError, ValueError) as e:
            errors += 1
            log(f"listener {name}: {e!r}")
            time.sleep(0.3)
        finally:
            if sock is not None:
                sock.close()
    return c, errors


def listener(name):
    """Helper process `ice-listener --name 1|2` (1 on the relay, 2 on the master)."""
    port = ports("icecast-relay")[0 if name == "2" else 1]
    c, errors = listen(port, name, terminated())
    log(f"icecast listener {name}: {c.good} frames ok, {c.garbled} garbled bytes, {c.gaps} gaps, "
        f"{errors} failed connections, end mark {'seen' if c.ended else 'not seen'}")


def wait_mount(port, proc, timeout=20.0, quiet=False):
    """Waits until the server on `port` serves /live (the relay has pulled the mount);
    `quiet`: answers False instead of raising when the time is up."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"icecast on {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /live HTTP/1.0\r\n\r\n")
                if b" 200 " in s.recv(256).split(b"\r\n", 1)[0]:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    if quiet:
        return False
    raise RuntimeError(f"icecast on {port} does not serve /live after {timeout} s")


def started(proc, tick, timeout=20.0, grace=1.5):
    """Waits until Icecast has changed its user to nobody (the end of its start-up), then
    `grace` seconds more: True, or False if it died first. `tick()` runs every 0.1 s."""
    end = time.monotonic() + timeout
    up = None
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if up is None:
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    if next(l.split()[1] for l in f if l.startswith("Uid:")) != "0":
                        up = time.monotonic()
            except (OSError, StopIteration):
                return False
        elif time.monotonic() - up >= grace:
            return True
        tick()
        time.sleep(0.1)
    raise RuntimeError(f"icecast {proc.pid} did not change its user in {timeout} s")


def start(d, name, conf, port, tick=lambda: None):
    """Starts an Icecast and waits for its start-up to end; one that dies on the way, or
    in the 1.5 s after, is started again (twice at most). An Icecast died (SIGSEGV) within
    about a second of its start in 4 of about 125 traced starts, and in 1 of 15 untraced
    starts with a source connecting at once: a race of Icecast's own start-up."""
    for attempt in range(3):
        p = d.start(name if attempt == 0 else f"{name}-{attempt + 1}", ["icecast2", "-c", conf])
        if started(p, tick):
            wait_port(port, p)
            return p
        log(f"icecast-relay: {name} exited with {p.returncode} during its start-up; starting it again")
    raise RuntimeError(f"icecast-relay: {name} died during its start-up three times")


def warm(src, ready, seq, seconds=20.0):
    """Sends frames from `seq` on, 10 at a time, until `ready()`; the next sequence number."""
    end = time.monotonic() + seconds
    while True:
        for _ in range(10):
            src.send(seq)
            seq += 1
            time.sleep(0.02)
        if ready():
            return seq
        if time.monotonic() > end:
            raise RuntimeError(f"icecast-relay: the mount is not served after {seconds} s")


def run(tmp, n):
    master, relay = ports("icecast-relay")[:2]
    confs = {}
    for name, port, rel in (("master", master, ""), ("relay", relay, RELAY.format(master=master))):
        logdir = os.path.join(tmp, f"{name}-logs")
        os.makedirs(logdir, exist_ok=True)
        os.chmod(logdir, 0o777)
        confs[name] = os.path.join(tmp, f"{name}.xml")
        with open(confs[name], "w") as f:
            f.write(CONF.format(password=PASSWORD, port=port, relay=rel, logdir=logdir))
    frames = 4 * n
    src = Source(master)
    with Daemons(tmp) as d:
        start(d, "icecast-master", confs["master"], master)
        seq = warm(src, lambda: src.connects > 0, 0)
        nxt = [seq]

        def tick():  # the source goes on while the relay starts (silent 3 s, it is dropped)
            src.send(nxt[0])
            nxt[0] += 1

        pr = start(d, "icecast-relay", confs["relay"], relay, tick)
        seq = nxt[0]
        seq = warm(src, lambda: wait_mount(relay, pr, timeout=0.5, quiet=True), seq)
        helpers = [d.start(f"listener{i}", [PY, LAUNCHER, "ice-listener", "--name", str(i)]) for i in (1, 2)]
        time.sleep(1.0)
        sent = 0
        for i in steps(frames):
            sent += src.send(seq + i)
            time.sleep(0.02)
        for _ in range(4):
            src.send(END)
            time.sleep(0.2)
        wait_readers(helpers, seconds=10)
        if src.sock is not None:
            src.sock.close()
        log(f"icecast-relay: {sent}/{frames} frames sent, {src.errors} failed sends, "
            f"{src.connects} source connection(s)")
