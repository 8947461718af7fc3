"""kea-dhcp: ISC Kea 2.2 (Debian `kea-dhcp4-server`, `kea-ctrl-agent`: C++ on Boost.Asio),
a DHCPv4 server answering relayed requests and its HTTP control agent, driven by two
Python DHCP relays and a Python control client.

Ports: kea-dhcp4 = p[0] (UDP), kea-ctrl-agent = p[1] (HTTP), relay 1 = p[2], relay 2 = p[3]
(UDP). Both daemons run in the foreground from a private configuration in the scratch
directory (memfile lease database and the control UNIX socket there, lock and pid files
there, logging to standard output, no service). kea-dhcp4 listens on `lo` with a UDP
socket (`dhcp-socket-type udp`, server port `-p p[0]`) and serves one subnet,
10.72.0.0/16 (dynamic pool 10.72.1.0 - 10.72.4.255, 600 s leases), selected by the relay
address 127.0.0.1; it loads the `lease_cmds` hook library. kea-ctrl-agent takes JSON
commands over HTTP and forwards each to kea-dhcp4 over its UNIX control socket.

Each relay (the launcher, and the helper `kea-relay --name 2`) stands for a DHCP relay
agent: for a new client MAC each step it sends a DISCOVER with giaddr 127.0.0.1, hops 1, a
client identifier carrying a digest, and a Relay Agent Information option with the relay
port sub-option (RFC 8357, so that Kea answers to the relay's own UDP port instead of 67),
waits 1 s for the OFFER, sends the REQUEST for the offered address, waits 1 s for the ACK,
and checks both answers: transaction ID, chaddr, the address in the pool and the same in
both, the server identifier, the echoed client identifier (length and digest), the lease
time, mask and router; then it RELEASEs the lease. A step that fails is logged and counted,
the relay's socket is made again and the relay goes on. The control client (helper
`kea-control`) talks to the agent over one keep-alive `http.client` connection (2 s
timeout, made again after a failure): each step adds a lease of its own outside the pool
(`lease4-add` with a hostname holding the step's digest), reads it back (`lease4-get`,
checking address, hardware address, hostname, subnet), reads the server's `pkt4-received`
statistic (`statistic-get`, checking it never goes down) and deletes the lease
(`lease4-del`).
"""

import hashlib
import http.client
import json
import os
import socket
import struct
import time

from .common import LAUNCHER, PY, Daemons, drop_http, log, ports, steps, wait_port, wait_readers, wait_udp

REQUESTS2 = 60
CONTROL_STEPS = 60
REPLY_TIMEOUT_S = 1.0
HTTP_TIMEOUT_S = 2.0
LEASE_S = 600
HOOKS = "/usr/lib/x86_64-linux-gnu/kea/hooks"
MAGIC = b"\x63\x82\x53\x63"
DISCOVER, OFFER, REQUEST, DECLINE, ACK, NAK, RELEASE = 1, 2, 3, 4, 5, 6, 7


def dhcp4_conf(tmp, port):
    return {"Dhcp4": {
        "interfaces-config": {"interfaces": ["lo"], "dhcp-socket-type": "udp"},
        "control-socket": {"socket-type": "unix", "socket-name": os.path.join(tmp, "kea4.sock")},
        "lease-database": {"type": "memfile", "persist": True, "name": os.path.join(tmp, "leases4.csv"),
                           "lfc-interval": 0},
        "hooks-libraries": [{"library": os.path.join(HOOKS, "libdhcp_lease_cmds.so")}],
        "valid-lifetime": LEASE_S, "renew-timer": 300, "rebind-timer": 500,
        "subnet4": [{"id": 1, "subnet": "10.72.0.0/16", "pools": [{"pool": "10.72.1.0 - 10.72.4.255"}],
                     "relay": {"ip-addresses": ["127.0.0.1"]},
                     "option-data": [{"name": "routers", "data": "10.72.0.1"}]}],
        "loggers": [{"name": "kea-dhcp4", "output_options": [{"output": "stdout"}], "severity": "INFO"}],
    }}


def agent_conf(tmp, port):
    return {"Control-agent": {
        "http-host": "127.0.0.1", "http-port": port,
        "control-sockets": {"dhcp4": {"socket-type": "unix", "socket-name": os.path.join(tmp, "kea4.sock")}},
        "loggers": [{"name": "kea-ctrl-agent", "output_options": [{"output": "stdout"}], "severity": "WARN"}],
    }}


def in_pool(addr):
    a = struct.unpack("!I", socket.inet_aton(addr))[0]
    lo = struct.unpack("!I", socket.inet_aton("10.72.1.0"))[0]
    hi = struct.unpack("!I", socket.inet_aton("10.72.4.255"))[0]
    return lo <= a <= hi


def mac(relay, i):
    return bytes([0x02, 0x72, int(relay), (i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF])


def client_id(relay, i):
    """The client identifier of relay `relay`'s client i: type 0, a name and a digest (its
    length varies with i)."""
    name = f"relay{relay}-client{i}-" + "q" * (i % 23)
    return b"\x00" + f"{name}-{hashlib.sha1(name.encode()).hexdigest()[:16]}".encode()


def packet(kind, xid, chaddr, cid, relay_port, ciaddr="0.0.0.0", requested=None, server=None):
    """A BOOTREQUEST as a relay forwards it: giaddr 127.0.0.1, hops 1."""
    head = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 1, xid, 0, 0, socket.inet_aton(ciaddr),
                       b"\0" * 4, b"\0" * 4, socket.inet_aton("127.0.0.1"), chaddr, b"", b"")
    opts = bytes([53, 1, kind]) + bytes([61, len(cid)]) + cid
    if requested:
        opts += bytes([50, 4]) + socket.inet_aton(requested)
    if server:
        opts += bytes([54, 4]) + socket.inet_aton(server)
    circuit = f"port{relay_port}".encode()
    rai = bytes([1, len(circuit)]) + circuit + bytes([19, 2]) + struct.pack("!H", relay_port)
    opts += bytes([82, len(rai)]) + rai + b"\xff"
    return head + MAGIC + opts


def parse(data):
    """(fields, options) of a BOOTREPLY; ValueError when it is not one."""
    if len(data) < 240 or data[236:240] != MAGIC:
        raise ValueError(f"not a DHCP message ({len(data)} bytes)")
    op, _, _, _, xid = struct.unpack("!BBBBI", data[:8])
    if op != 2:
        raise ValueError(f"op {op}, not a reply")
    f = {"xid": xid, "yiaddr": socket.inet_ntoa(data[16:20]), "giaddr": socket.inet_ntoa(data[24:28]),
         "chaddr": data[28:34]}
    opts, i = {}, 240
    while i < len(data) and data[i] != 255:
        if data[i] == 0:
            i += 1
            continue
        if i + 2 > len(data) or i + 2 + data[i + 1] > len(data):
            raise ValueError("truncated option")
        opts[data[i]] = data[i + 2:i + 2 + data[i + 1]]
        i += 2 + data[i + 1]
    return f, opts


class Relay:
    """A relay agent's UDP socket on its own port, made again after a failure."""

    def __init__(self, name, port, server_port):
        self.name = name
        self.port = port
        self.server = ("127.0.0.1", server_port)
        self.sock = None
        self.errors = 0

    def open(self):
        self.close()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.settimeout(REPLY_TIMEOUT_S)
        self.sock = s

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, data, xid, want):
        """Sends a request and waits (1 s in all) for the reply of this transaction;
        replies of other transactions (late ones of a step that failed) are skipped."""
        self.sock.sendto(data, self.server)
        end = time.monotonic() + REPLY_TIMEOUT_S
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to xid {xid:#x}")
            self.sock.settimeout(left)
            reply, _ = self.sock.recvfrom(4096)
            f, opts = parse(reply)
            if f["xid"] != xid:
                continue
            kind = opts.get(53, b"\0")[0]
            if kind != want:
                raise ValueError(f"message type {kind}, wanted {want}")
            return f, opts

    def check(self, f, opts, chaddr, cid):
        if f["chaddr"] != chaddr:
            raise ValueError(f"chaddr {f['chaddr'].hex()}, wanted {chaddr.hex()}")
        if f["giaddr"] != "127.0.0.1":
            raise ValueError(f"giaddr {f['giaddr']}")
        if not in_pool(f["yiaddr"]):
            raise ValueError(f"address {f['yiaddr']} not in the pool")
        if opts.get(61) != cid:
            raise ValueError(f"client identifier {opts.get(61)!r:.60} ({len(opts.get(61) or b'')} bytes), "
                             f"wanted {len(cid)} bytes")
        if opts.get(51) != struct.pack("!I", LEASE_S):
            raise ValueError(f"lease time {opts.get(51)!r}")
        if opts.get(1) != socket.inet_aton("255.255.0.0") or opts.get(3) != socket.inet_aton("10.72.0.1"):
            raise ValueError(f"mask {opts.get(1)!r} router {opts.get(3)!r}")
        if len(opts.get(54, b"")) != 4:
            raise ValueError("no server identifier")

    def step(self, i):
        chaddr, cid = mac(self.name, i), client_id(self.name, i)
        xid = (int(self.name) << 24) | (i << 4) | 1
        try:
            if self.sock is None:
                self.open()
            f, opts = self.exchange(packet(DISCOVER, xid, chaddr, cid, self.port), xid, OFFER)
            self.check(f, opts, chaddr, cid)
            offered, server = f["yiaddr"], socket.inet_ntoa(opts[54])
            f, opts = self.exchange(packet(REQUEST, xid + 1, chaddr, cid, self.port, requested=offered,
                                           server=server), xid + 1, ACK)
            self.check(f, opts, chaddr, cid)
            if f["yiaddr"] != offered:
                raise ValueError(f"ACK for {f['yiaddr']}, offered {offered}")
            self.sock.sendto(packet(RELEASE, xid + 2, chaddr, cid, self.port, ciaddr=offered, server=server),
                             self.server)
            return True
        except (OSError, ValueError) as e:
            self.errors += 1
            log(f"request failed: relay {self.name} client {i}: {e!r:.160}")
            self.close()
            return False


def relay_workload(name, n, pause):
    p = ports("kea-dhcp")
    r = Relay(name, p[1 + int(name)], p[0])
    ok = 0
    for i in steps(n):
        ok += r.step(i)
        time.sleep(pause)
    r.close()
    return ok, r.errors


def relay(name):
    """Helper process `kea-relay --name N`: REQUESTS2 clients, every 100 ms."""
    ok, errors = relay_workload(name, REQUESTS2, 0.1)
    log(f"kea-dhcp relay {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


class Control:
    """The control client: JSON commands to kea-ctrl-agent over one keep-alive connection."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0
        self.received = -1

    def command(self, command, arguments):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        body = json.dumps({"command": command, "service": ["dhcp4"], "arguments": arguments}).encode()
        self.conn.request("POST", "/", body=body, headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise ValueError(f"{command}: HTTP {r.status}")
        if r.getheader("Content-Length") is not None and int(r.getheader("Content-Length")) != len(data):
            raise ValueError(f"{command}: {len(data)} bytes, Content-Length {r.getheader('Content-Length')}")
        answer = json.loads(data)
        if not isinstance(answer, list) or len(answer) != 1 or not isinstance(answer[0], dict):
            raise ValueError(f"{command}: answer {data!r:.80}")
        return answer[0]

    def step(self, i):
        addr = f"10.72.9.{1 + i % 250}"
        hw = "02:72:09:00:%02x:%02x" % (i >> 8, i & 0xFF)
        name = f"ctl{i}-" + "w" * (i % 17)
        host = f"{name}-{hashlib.sha1(name.encode()).hexdigest()[:16]}"
        try:
            a = self.command("lease4-add", {"ip-address": addr, "hw-address": hw, "hostname": host})
            if a.get("result") != 0:
                raise ValueError(f"lease4-add {addr}: {a!r:.120}")
            a = self.command("lease4-get", {"ip-address": addr})
            got = a.get("arguments") or {}
            if a.get("result") != 0 or (got.get("ip-address"), got.get("hw-address"), got.get("hostname"),
                                        got.get("subnet-id")) != (addr, hw, host, 1):
                raise ValueError(f"lease4-get {addr}: {a!r:.160}, wanted {hw} {host} ({len(host)} bytes)")
            a = self.command("statistic-get", {"name": "pkt4-received"})
            samples = (a.get("arguments") or {}).get("pkt4-received")
            if a.get("result") != 0 or not samples or not isinstance(samples[0][0], int):
                raise ValueError(f"statistic-get: {a!r:.120}")
            if samples[0][0] < self.received:
                raise ValueError(f"pkt4-received went down: {samples[0][0]} after {self.received}")
            self.received = samples[0][0]
            a = self.command("lease4-del", {"ip-address": addr})
            if a.get("result") != 0:
                raise ValueError(f"lease4-del {addr}: {a!r:.120}")
            return True
        except (OSError, ValueError, http.client.HTTPException) as e:
            drop_http(self, e)
            # A step cut short leaves its lease; the next round of the same address adds
            # it again, so it goes now (best effort, on a new connection).
            try:
                self.command("lease4-del", {"ip-address": addr})
            except (OSError, ValueError, http.client.HTTPException):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
            return False


def control(_name):
    """Helper process `kea-control`: CONTROL_STEPS steps of four commands, every 100 ms."""
    c = Control(ports("kea-dhcp")[1])
    ok = 0
    for i in steps(CONTROL_STEPS):
        ok += c.step(i)
        time.sleep(0.1)
    log(f"kea-dhcp control: {ok}/{CONTROL_STEPS} steps ok, {c.errors} failed")


def run(tmp, n):
    p = ports("kea-dhcp")
    for name, conf in (("kea-dhcp4.conf", dhcp4_conf(tmp, p[0])), ("kea-ctrl-agent.conf", agent_conf(tmp, p[1]))):
        with open(os.path.join(tmp, name), "w") as f:
            json.dump(conf, f, indent=1)
    env = dict(os.environ, KEA_LOCKFILE_DIR=tmp, KEA_PIDFILE_DIR=tmp, KEA_LOGGER_DESTINATION="stdout")
    with Daemons(tmp) as d:
        server = d.start("kea-dhcp4", ["kea-dhcp4", "-c", os.path.join(tmp, "kea-dhcp4.conf"), "-p", str(p[0])],
                         env=env)
        wait_udp(p[0], server, timeout=20)
        agent = d.start("kea-ctrl-agent", ["kea-ctrl-agent", "-c", os.path.join(tmp, "kea-ctrl-agent.conf")],
                        env=env)
        wait_port(p[1], agent, timeout=20)
        helpers = [d.start("relay2", [PY, LAUNCHER, "kea-relay", "--name", "2"]),
                   d.start("control", [PY, LAUNCHER, "kea-control"])]
        ok, errors = relay_workload("1", n, 0.05)
        wait_readers(helpers, seconds=25)
        log(f"kea-dhcp relay 1: {ok}/{n} steps ok, {errors} failed")
