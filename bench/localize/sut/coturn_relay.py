"""coturn-relay: a TURN relay (Debian `coturn` 4.6: `turnserver`, C on libevent, one
process: a listener thread and relay threads) between two Python TURN clients and a Python
UDP peer; every datagram goes client → relay → peer → relay → client, over UDP.

Ports: TURN = p[0] (UDP only), peer = p[1] (UDP), relayed addresses = p[4]..p[9] (coturn's
relay port range). Each client (the launcher, and the helper `turn-client --name 2`)
allocates a relayed address (anonymous: `--no-auth`; REQUESTED-TRANSPORT UDP, a 120 s
lifetime), binds a channel to the peer (ChannelBind), then sends numbered messages as
ChannelData and waits 1 s for each answer; a STUN request is sent again after 0.5 s (3
tries). The peer (helper `turn-peer`) answers each datagram with it and its SHA-1 digest;
the client checks the answer (its own message, the digest), skips late answers to
earlier messages, counts a failure, and after 3 failures in a row allocates again from a
new socket (a new 5-tuple: the relay keeps the old allocation until its lifetime ends).
Both clients and the peer say at the end what they saw.
"""

import hashlib
import os
import socket
import struct
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, terminated, wait_readers, wait_udp

MAGIC = 0x2112A442
ALLOCATE, CHANNEL_BIND = 0x0003, 0x0009
SUCCESS = 0x0100
XOR_PEER, XOR_RELAYED, LIFETIME, TRANSPORT, CHANNEL, ERROR = 0x0012, 0x0016, 0x000D, 0x0019, 0x000C, 0x0009
STEPS2 = 120


def stun(kind, attrs, tid):
    """A STUN message: header, then attributes (type, length, value, padding to 4)."""
    body = b"".join(struct.pack(">HH", t, len(v)) + v + b"\0" * (-len(v) % 4) for t, v in attrs)
    return struct.pack(">HHI", kind, len(body), MAGIC) + tid + body


def parse_stun(data):
    """(type, transaction id, {attribute: value}) of a STUN message; ValueError if it is none."""
    if len(data) < 20:
        raise ValueError(f"a {len(data)}-byte STUN message")
    kind, n, magic = struct.unpack(">HHI", data[:8])
    if magic != MAGIC or 20 + n > len(data):
        raise ValueError(f"not STUN: {data[:8].hex()}")
    attrs, i = {}, 20
    while i + 4 <= 20 + n:
        t, ln = struct.unpack(">HH", data[i:i + 4])
        attrs[t] = data[i + 4:i + 4 + ln]
        i += 4 + ln + (-ln % 4)
    return kind, data[8:20], attrs


def xor_address(host, port):
    ip = struct.unpack(">I", socket.inet_aton(host))[0]
    return struct.pack(">BBHI", 0, 1, port ^ (MAGIC >> 16), ip ^ MAGIC)


def unxor_address(v):
    _, _, port, ip = struct.unpack(">BBHI", v[:8])
    return socket.inet_ntoa(struct.pack(">I", ip ^ MAGIC)), port ^ (MAGIC >> 16)


def answer(payload):
    """What the peer sends back for `payload`."""
    return payload + b" " + hashlib.sha1(payload).hexdigest()[:16].encode()


class TurnClient:
    """One allocation on the relay and a channel to the peer, made again after failures."""

    def __init__(self, name, turn_port, peer_port):
        self.name = name
        self.turn = ("127.0.0.1", turn_port)
        self.peer = ("127.0.0.1", peer_port)
        self.sock = None
        self.channel = 0x4000 + int(name)
        self.errors = self.allocations = 0
        self.failed_in_row = 0

    def request(self, kind, attrs):
        """Sends a STUN request (again after 0.5 s, 3 tries): the success answer's attributes."""
        tid = os.urandom(12)
        msg = stun(kind, attrs, tid)
        for _ in range(3):
            self.sock.send(msg)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                self.sock.settimeout(max(0.01, end - time.monotonic()))
                try:
                    data = self.sock.recv(2048)
                except socket.timeout:
                    break
                if data[:1] >= b"\x40":
                    continue  # a late ChannelData answer
                got, got_tid, got_attrs = parse_stun(data)
                if got_tid != tid:
                    continue
                if got == kind | SUCCESS:
                    return got_attrs
                err = got_attrs.get(ERROR, b"\0\0\0\0")
                raise ConnectionError(f"STUN {kind:#06x}: error {err[2] * 100 + err[3]} {err[4:60]!r}")
        raise TimeoutError(f"STUN {kind:#06x}: no answer from the relay")

    def setup(self):
        """A new socket, an allocation and a channel to the peer."""
        if self.sock is not None:
            self.sock.close()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(self.turn)
        attrs = self.request(ALLOCATE, [(TRANSPORT, bytes([17, 0, 0, 0])), (LIFETIME, struct.pack(">I", 120))])
        relayed = unxor_address(attrs[XOR_RELAYED])
        self.request(CHANNEL_BIND, [(CHANNEL, struct.pack(">HH", self.channel, 0)),
                                    (XOR_PEER, xor_address(*self.peer))])
        self.allocations += 1
        log(f"turn client {self.name}: relayed address {relayed[0]}:{relayed[1]}, channel {self.channel:#x}")

    def exchange(self, seq):
        """Sends message `seq` through the channel and checks the peer's answer."""
        payload = b"c%s %06d " % (self.name.encode(), seq) + b"m" * (20 + seq % 200)
        self.sock.send(struct.pack(">HH", self.channel, len(payload)) + payload)
        want = answer(payload)
        end = time.monotonic() + 1.0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"message {seq}: no answer in 1 s")
            self.sock.settimeout(left)
            data = self.sock.recv(4096)
            if data[:1] < b"\x40":
                continue  # a late STUN answer
            ch, n = struct.unpack(">HH", data[:4])
            got = data[4:4 + n]
            if ch != self.channel or len(got) != n:
                raise ValueError(f"message {seq}: ChannelData {ch:#x} of {len(got)}/{n} bytes")
            if got == want:
                return True
            if got.startswith(b"c%s " % self.name.encode()) and got[len(self.name) + 2:len(self.name) + 8] < b"%06d" % seq:
                continue  # the answer to an earlier message that timed out
            raise ValueError(f"message {seq}: answer {got[:40]!r} is not the peer's")

    def step(self, seq):
        try:
            if self.sock is None or self.failed_in_row >= 3:
                self.failed_in_row = 0
                self.setup()
            self.exchange(seq)
            self.failed_in_row = 0
            return True
        except (OSError, ConnectionError, ValueError) as e:
            self.errors += 1
            self.failed_in_row += 1
            log(f"turn client {self.name}: {e!r}")
            return False


def workload(name, n, pause):
    turn, peer = ports("coturn-relay")[:2]
    c = TurnClient(name, turn, peer)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    if c.sock is not None:
        c.sock.close()
    return ok, c.errors, c.allocations


def client(name):
    """Helper process `turn-client --name N`: STEPS2 messages, every 60 ms."""
    ok, errors, allocs = workload(name, STEPS2, 0.06)
    log(f"turn client {name}: {ok}/{STEPS2} messages ok, {errors} failed, {allocs} allocation(s)")


def peer(_name):
    """Helper process `turn-peer`: answers every datagram with it and its digest."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", ports("coturn-relay")[1]))
    sock.settimeout(0.5)
    stop = terminated()
    served = 0
    sources = set()
    while not stop.is_set():
        try:
            data, addr = sock.recvfrom(4096)
        except socket.timeout:
            continue
        except OSError as e:
            log(f"turn peer: {e!r}")
            continue
        sock.sendto(answer(data), addr)
        served += 1
        sources.add(addr)
    log(f"turn peer: {served} messages answered, from {len(sources)} relayed address(es)")


def run(tmp, n):
    turn, peer_port = ports("coturn-relay")[:2]
    relay_lo, relay_hi = ports("coturn-relay")[4], ports("coturn-relay")[9]
    argv = ["turnserver", "-n", "--listening-ip=127.0.0.1", f"--listening-port={turn}",
            "--relay-ip=127.0.0.1", f"--min-port={relay_lo}", f"--max-port={relay_hi}",
            "--no-auth", "--no-tcp", "--no-tls", "--no-dtls", "--no-tcp-relay", "--allow-loopback-peers",
            "--no-cli", "--relay-threads=2", "--max-allocate-lifetime=120", "--log-file=stdout",
            "--simple-log", f"--pidfile={tmp}/turnserver.pid", f"--userdb={tmp}/turndb", "--realm=culprit",
            "--no-rfc5780", "--no-stun-backward-compatibility", "--no-software-attribute"]
    with Daemons(tmp) as d:
        pp = d.start("peer", [PY, LAUNCHER, "turn-peer"])
        wait_udp(peer_port, pp)
        pt = d.start("turnserver", argv)
        wait_udp(turn, pt)
        helper = d.start("client2", [PY, LAUNCHER, "turn-client", "--name", "2"])
        ok, errors, allocs = workload("1", 2 * n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"coturn-relay: {ok}/{2 * n} messages ok, {errors} failed, {allocs} allocation(s)")
