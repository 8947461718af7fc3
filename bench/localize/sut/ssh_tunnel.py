"""ssh-tunnel: OpenSSH port forwarding (Debian `openssh-server`, `openssh-client`: C) in
front of a memcached, and two memcached clients (Python) that reach it only through the
tunnel.

Ports: sshd = p[0], memcached = p[1], the tunnel's local end = p[2]. A private sshd (its own
configuration, host key and authorized key; public-key login as root, no PAM, started as
`sshd -D -e -f CONF`: a listener that re-executes itself for each connection, a privilege-
separated pre-authentication child, then the session in the connection's monitor process)
accepts one SSH connection from an `ssh -N -L p2:127.0.0.1:p1` client started by the
launcher. Every TCP connection a client makes to p2 becomes a channel of that one encrypted
connection (chacha20-poly1305 or AES-GCM, each packet authenticated), which sshd opens
to memcached; both clients' channels are multiplexed on it. The ssh client sends a
keep-alive every second and gives up after 3 unanswered ones; the launcher starts it again
0.3 s after it exits (as autossh would), so a broken tunnel is made again. Each client (the
launcher, and the helper `tunnel-client --name 2`) writes versions of its own keys (40 B to
2 KB) with `set` and reads each back with `get`, on one connection (2 s timeout), checks
the answers (the bytes against what it wrote), counts a failure, connects again and goes
on. At the end the launcher says how many times the tunnel was made.
"""

import hashlib
import os
import signal
import subprocess
import threading
import time

from .common import LAUNCHER, PY, Daemons, LineClient, log, ports, steps, wait_port, wait_readers

KEYS = 16
REQUESTS2 = 60

SSHD = """# ssh-tunnel's private sshd (no Debian sshd_config).
Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding local
PermitOpen 127.0.0.1:{mport}
X11Forwarding no
PrintMotd no
ClientAliveInterval 2
ClientAliveCountMax 3
LogLevel INFO
"""


def value(who, k, version):
    """The bytes client `who` writes as version `version` of key k."""
    seed = hashlib.sha1(f"{who} {k} {version}".encode()).hexdigest().encode()
    return (seed * 60)[: 40 + (83 * k + 151 * version) % 1960]


class Client(LineClient):
    """One memcached connection through the tunnel, made again after any failure."""

    def __init__(self, port, who):
        super().__init__(port, timeout=2.0)
        self.who = who
        self.version = {}

    def put_get(self, key, data):
        self.sock.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(data), data))
        line = self.line()
        if line != b"STORED":
            raise ValueError(f"set {key.decode()}: {line[:40]!r}")
        self.sock.sendall(b"get %s\r\n" % key)
        head = self.line().split()
        if len(head) != 4 or head[0] != b"VALUE" or head[1] != key:
            raise ValueError(f"get {key.decode()}: {b' '.join(head)[:40]!r}")
        got = self.exact(int(head[3]) + 2)[:-2]
        if self.line() != b"END":
            raise ValueError(f"get {key.decode()}: no END")
        if got != data:
            raise ValueError(f"get {key.decode()}: {len(got)} bytes, not the {len(data)} written")
        return True

    def step(self, k):
        """Writes the next version of key k and reads it back: True if both went right."""
        ver = self.version.get(k, 0) + 1
        self.version[k] = ver
        data = value(self.who, k, ver)
        key = f"{self.who}-{k}".encode()
        return bool(self.request(lambda c: c.put_get(key, data)))


def workload(name, n, pause):
    c = Client(ports("ssh-tunnel")[2], f"c{name}")
    ok = 0
    for i in steps(n):
        ok += c.step((i * 5) % KEYS)
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `tunnel-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"tunnel client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


class Tunnel:
    """The ssh client, started again 0.3 s after it exits until `stop()`."""

    def __init__(self, d, tmp, sport, mport, lport):
        self.d, self.tmp = d, tmp
        self.argv = ["ssh", "-N", "-F", "/dev/null", "-p", str(sport), "-i", os.path.join(tmp, "user_key"),
                     "-L", f"127.0.0.1:{lport}:127.0.0.1:{mport}",
                     "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                     "-o", f"UserKnownHostsFile={tmp}/known_hosts", "-o", "ExitOnForwardFailure=yes",
                     "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=3",
                     "-o", "ConnectTimeout=2", "root@127.0.0.1"]
        self.lport = lport
        self.starts = 0
        self.done = threading.Event()
        self.proc = None
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self):
        self.proc = self.d.start(f"ssh-{self.starts + 1}", self.argv)
        self.starts += 1

    def loop(self):
        while not self.done.is_set():
            rc = self.proc.wait()
            if self.done.is_set():
                return
            log(f"ssh-tunnel: the ssh client exited with {rc}; starting it again")
            if self.done.wait(0.3):
                return
            self.start()

    def stop(self):
        self.done.set()


def children(pid):
    """The processes whose parent is `pid`."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    return out


def reap(listener, seconds=3.0):
    """Once the ssh client is gone, waits up to `seconds` for sshd's per-connection
    processes to end, and kills those left (sshd's listener leaves them running when it
    exits: a stopped session, SIGSTOP, would hold the recording open until its timeout)."""
    end = time.monotonic() + seconds
    while children(listener) and time.monotonic() < end:
        time.sleep(0.1)
    for pid in children(listener):
        log(f"ssh-tunnel: sshd process {pid} still there after the ssh client left: killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run(tmp, n):
    sport, mport, lport = ports("ssh-tunnel")[:3]
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    for key in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(tmp, key)], check=True)
    with open(os.path.join(tmp, "user_key.pub")) as f, open(os.path.join(tmp, "authorized_keys"), "w") as out:
        out.write(f.read())
    conf = os.path.join(tmp, "sshd_config")
    with open(conf, "w") as f:
        f.write(SSHD.format(port=sport, d=tmp, mport=mport))
    with Daemons(tmp) as d:
        p = d.start("memcached", ["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", str(mport), "-U", "0", "-t", "2"])
        wait_port(mport, p)
        sshd = d.start("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", conf])
        wait_port(sport, sshd)
        try:
            tunnel(d, tmp, n, sport, mport, lport)
        finally:
            reap(sshd.pid)


def tunnel(d, tmp, n, sport, mport, lport):
    t = Tunnel(d, tmp, sport, mport, lport)
    t.start()
    wait_port(lport, t.proc, timeout=15)
    t.thread.start()
    helper = d.start("client2", [PY, LAUNCHER, "tunnel-client", "--name", "2"])
    ok, errors = workload("1", n, 0.02)
    wait_readers([helper], seconds=25)
    t.stop()
    if t.proc.poll() is None:
        t.proc.terminate()
        try:
            t.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            t.proc.kill()
    log(f"ssh-tunnel: {ok}/{n} steps ok, {errors} failed; the tunnel was made {t.starts} time(s)")
