"""radius-proxy: a FreeRADIUS proxy (C, one `freeradius` process with a thread pool) that
sends the Access-Requests of realm `bench` to two FreeRADIUS home servers in a
load-balancing pool, and two Python RADIUS clients (UDP, PAP passwords, Message-Authenticator).

Ports: proxy = p[0], home servers = p[1], p[2] (all UDP). The home servers know the users
of a `files` users file (`userK@bench`, a password and a Reply-Message naming the user and
the home server that answered). Client 1 (the launcher) and client 2 (`radius-client
--name 2`) send Access-Requests one at a time: mostly right passwords (Access-Accept with
the user's Reply-Message expected) and every fifth a wrong one (Access-Reject expected).
Every reply is checked (its Response Authenticator, code and Reply-Message); a client
waits 2.5 s for an answer, counts a failure and goes on. The proxy gives up on a home server
after 1 s (`response_window`) and answers that request with an Access-Reject (no
Reply-Message); a home server silent for 3 s (`zombie_period`) is left out of the pool
until it answers again.
"""

import hashlib
import hmac
import os
import socket
import struct
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_udp

SECRET = b"bench-client-secret"
USERS = 40
TIMEOUT_S = 2.5

MAIN = """prefix = /usr
exec_prefix = /usr
sysconfdir = /etc
localstatedir = /var
sbindir = /usr/sbin
logdir = {dir}
raddbdir = {dir}
radacctdir = {dir}
name = freeradius
confdir = {dir}
modconfdir = {dir}
run_dir = {dir}
db_dir = {dir}
libdir = /usr/lib/freeradius
pidfile = {dir}/radiusd.pid
max_request_time = 4
cleanup_delay = 1
max_requests = 4096
hostname_lookups = no
log {{
    destination = stdout
    colourise = no
    auth = no
}}
security {{
    allow_core_dumps = no
    max_attributes = 200
    reject_delay = 0
    status_server = no
}}
thread pool {{
    start_servers = 2
    max_servers = 4
    min_spare_servers = 1
    max_spare_servers = 3
    max_requests_per_server = 0
}}
proxy_requests = {proxying}
{proxy}
client localhost {{
    ipaddr = 127.0.0.1
    secret = {secret}
    require_message_authenticator = no
}}
modules {{
    pap {{
    }}
    files {{
        filename = {dir}/users
    }}
    realm bench {{
        format = suffix
        delimiter = "@"
    }}
}}
server default {{
    listen {{
        type = auth
        ipaddr = 127.0.0.1
        port = {port}
    }}
    authorize {{
        {authorize}
    }}
    authenticate {{
        Auth-Type PAP {{
            pap
        }}
    }}
    post-auth {{
    }}
    pre-proxy {{
    }}
    post-proxy {{
    }}
}}
"""

PROXY = """proxy server {{
    default_fallback = no
}}
home_server home1 {{
    type = auth
    ipaddr = 127.0.0.1
    port = {h1}
    secret = {secret}
    response_window = 1
    zombie_period = 3
    revive_interval = 10
    status_check = none
}}
home_server home2 {{
    type = auth
    ipaddr = 127.0.0.1
    port = {h2}
    secret = {secret}
    response_window = 1
    zombie_period = 3
    revive_interval = 10
    status_check = none
}}
home_server_pool homes {{
    type = load-balance
    home_server = home1
    home_server = home2
}}
realm bench {{
    auth_pool = homes
    nostrip
}}
"""


def password(k):
    return f"pw-{k}-" + hashlib.sha1(f"user {k}".encode()).hexdigest()[:10]


def reply_message(k, home):
    return f"hello user{k} from home {home}"


def _users(path, home):
    with open(path, "w") as f:
        for k in range(USERS):
            f.write(f'user{k}@bench Cleartext-Password := "{password(k)}"\n'
                    f'\tReply-Message := "{reply_message(k, home)}"\n\n')


def _attr(t, v):
    return struct.pack("!BB", t, 2 + len(v)) + v


def _hide(pw, auth):
    """RFC 2865 User-Password hiding."""
    pw = pw.encode()
    pw += b"\0" * (-len(pw) % 16)
    out, last = b"", auth
    for i in range(0, len(pw), 16):
        b = hashlib.md5(SECRET + last).digest()
        last = bytes(x ^ y for x, y in zip(pw[i:i + 16], b))
        out += last
    return out


class Client:
    """A RADIUS client on one UDP socket."""

    def __init__(self, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.connect(("127.0.0.1", port))
        self.ident = 0
        self.homes = {}

    def packet(self, user, pw):
        """An Access-Request (code 1) and its Request Authenticator."""
        self.ident = (self.ident + 1) % 256
        auth = os.urandom(16)
        attrs = (_attr(1, user.encode()) + _attr(2, _hide(pw, auth)) + _attr(4, socket.inet_aton("127.0.0.1"))
                 + _attr(80, b"\0" * 16))
        head = struct.pack("!BBH", 1, self.ident, 20 + len(attrs))
        mac = hmac.new(SECRET, head + auth + attrs, hashlib.md5).digest()
        return head + auth + attrs[:-16] + mac, auth

    def ask(self, user, pw):
        """Sends one request; returns (code, Reply-Message) of the checked answer."""
        pkt, auth = self.packet(user, pw)
        self.sock.send(pkt)
        while True:
            data = self.sock.recv(4096)
            code, ident, length = struct.unpack("!BBH", data[:4])
            if ident == self.ident:
                break  # an answer to an earlier, timed-out request is dropped
        if length != len(data) or length < 20:
            raise ValueError(f"reply of {len(data)} bytes says length {length}")
        want = hashlib.md5(data[:4] + auth + data[20:] + SECRET).digest()
        if data[4:20] != want:
            raise ValueError("wrong Response Authenticator")
        msg, i = "", 20
        while i + 2 <= length:
            t, n = data[i], data[i + 1]
            if n < 2:
                raise ValueError("attribute of length < 2")
            if t == 18:
                msg += data[i + 2:i + n].decode(errors="replace")
            i += n
        return code, msg

    def check(self, i, k, wrong):
        try:
            code, msg = self.ask(f"user{k}@bench", password(k) + ("x" if wrong else ""))
            if wrong:
                if code != 3:
                    raise ValueError(f"user{k} with a wrong password: code {code}")
                return True
            if code != 2 or not msg.startswith(f"hello user{k} from home "):
                raise ValueError(f"user{k}: code {code}, message {msg!r}")
            home = msg.rsplit(" ", 1)[1]
            self.homes[home] = self.homes.get(home, 0) + 1
            return True
        except (OSError, ValueError, struct.error) as e:
            log(f"request {i} failed: {e!r}")
            return False

    def spread(self):
        return ", ".join(f"home {h}: {n}" for h, n in sorted(self.homes.items()))


def client(name):
    """Helper process `radius-client --name 2`: requests for the upper half of the users."""
    term = terminated()
    c = Client(ports("radius-proxy")[0])
    ok = failed = i = 0
    end = time.monotonic() + WORKLOAD_S
    while not term.is_set() and time.monotonic() < end and i < 150:
        good = c.check(i, USERS // 2 + i % (USERS // 2), i % 5 == 4)
        ok, failed, i = ok + good, failed + (not good), i + 1
        time.sleep(0.05)
    log(f"radius client {name}: {ok}/{i} requests ok, {failed} failed ({c.spread()})"
        f"{' (told to stop)' if term.is_set() else ''}")


def _instance(tmp, name, port, proxying, proxy, authorize):
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "freeradius.conf"), "w") as f:
        f.write(MAIN.format(dir=d, port=port, proxying=proxying, proxy=proxy, authorize=authorize,
                            secret=SECRET.decode()))
    open(os.path.join(d, "dictionary"), "w").close()
    return d


def run(tmp, n):
    px, h1, h2 = ports("radius-proxy")[:3]
    homes = []
    for k, port in ((1, h1), (2, h2)):
        d = _instance(tmp, f"home{k}", port, "no", "", "files\n        pap")
        _users(os.path.join(d, "users"), k)
        homes.append((k, d, port))
    pd = _instance(tmp, "proxy", px, "yes", PROXY.format(h1=h1, h2=h2, secret=SECRET.decode()), "bench")
    open(os.path.join(pd, "users"), "w").close()
    with Daemons(tmp) as dm:
        for k, d, port in homes:
            p = dm.start(f"home{k}", ["freeradius", "-f", "-d", d, "-n", "freeradius", "-l", "stdout"])
            wait_udp(port, p, step=0.1)
        p = dm.start("proxy", ["freeradius", "-f", "-d", pd, "-n", "freeradius", "-l", "stdout"])
        wait_udp(px, p, step=0.1)
        other = dm.start("client2", [PY, LAUNCHER, "radius-client", "--name", "2"])
        c = Client(px)
        ok = failed = 0
        for i in steps(n):
            good = c.check(i, i % (USERS // 2), i % 5 == 4)
            ok, failed = ok + good, failed + (not good)
            time.sleep(0.05)
        try:
            other.wait(timeout=WORKLOAD_S)
        except Exception:
            log("client 2 did not stop")
        log(f"radius-proxy: {ok}/{n} requests ok, {failed} failed ({c.spread()})")
