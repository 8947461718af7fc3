"""Shared helpers of the fault suite's systems: ports, daemons, a reconnecting client."""

import os
import signal
import socket
import subprocess
import sys
import time

BASE = int(os.environ.get("LOCALIZE_PORT_BASE", "23000"))
# Debian puts daemons in /usr/sbin, which a user's PATH may lack.
os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
PY = sys.executable
# The launcher (bench/localize/systems.py): helper processes of a system run it again.
LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "systems.py")


def ports(system):
    """The fixed loopback ports of a system: ten from BASE + 10·slot."""
    b = BASE + 10 * SLOTS[system]
    return tuple(range(b, b + 10))


SLOTS = {
    "memcache-proxy": 0,
    "http-proxy": 1,
    "job-queue": 2,
    "pyro-rpc": 3,
    "mqtt-bridge": 4,
    "irc-network": 5,
    "dns-chain": 6,
    "gearman-jobs": 7,
    "aiohttp-chain": 8,
    "zookeeper-ensemble": 9,
    "rabbitmq-queue": 10,
    "grpc-chain": 11,
    "ldap-syncrepl": 12,
    "tarantool-replicas": 13,
    "php-fastcgi": 14,
    # Slots 15-19: systems added by the helper branch loc-new.
    "zmq-pipeline": 15,
    "xmpp-chat": 16,
    "squid-cache": 17,
    # Slots 18, 19 and 23: systems added by the helper branch loc-sysa.
    "varnish-cache": 18,
    "pdns-knot": 19,
    # Slots 20 and up: systems added by the helper branch loc-fresh (others append below 20).
    "mariadb-replication": 20,
    "rsyslog-relay": 21,
    "imap-mailstore": 22,
    "radius-proxy": 23,  # loc-sysa
    # Slots 24-26: systems added by the helper branch loc-sysb.
    "node-chain": 24,
    "ws-gateway": 25,
    "activemq-stomp": 26,
    # Slots 27-28: systems added by the helper branch loc-sysc.
    "stunnel-tls": 27,
    "kamailio-sip": 28,
    # Slots 29-30: systems added by the helper branch loc-sysd (27-28: loc-sysc).
    "ruby-chain": 29,
    "perl-starman": 30,
    # Slots 31-32: systems added by the helper branch loc-syse.
    "postfix-relay": 31,
    "gevent-chain": 32,
    # Slots 33-34: systems added by the helper branch loc-sysf (validation run 6).
    "apache-balancer": 33,
    "twisted-amp": 34,
    # Slots 35-38: systems added by the helper branch loc-sysg (validation run 7).
    "ssh-tunnel": 35,
    "tomcat-chain": 36,
    "uwsgi-tornado": 37,
    "ejabberd-chat": 38,
    # Slots 39-42: systems added by the helper branch loc-sysh (validation run 8).
    "cherrypy-rpyc": 39,
    "puma-memcache": 40,
    "icecast-relay": 41,
    "coturn-relay": 42,
    # Slots 43-44: systems added by the helper branch loc-sysi (validation run 8).
    "dnsmasq-chain": 43,
    "quart-hypercorn": 44,
    # Slots 45-47: systems added by the helper branch loc-sysj (validation run 9).
    "tinyproxy-chain": 45,
    "h2o-proxy": 46,
    "krb5-kdc": 47,
    # Slots 48-50: systems added by the helper branch loc-sysk (validation run 9).
    "gunicorn-falcon": 48,
    "asyncssh-starlette": 49,
    "mojo-prefork": 50,
    # Slots 51-53: systems added by the helper branch loc-sysl (validation run 10).
    "vsftpd-ftp": 51,
    "syslog-ng-relay": 52,
    "bind-chain": 53,
    # Slots 54-56: systems added by the helper branch loc-sysm (validation run 10).
    "aioftp-transfer": 54,
    "h2-pgwire": 55,
    "yaws-dav": 56,
    # Slots 57-59: systems added by the helper branch loc-sysn (validation run 10).
    "nghttpx-proxy": 57,
    "sanic-waitress": 58,
    "em-relay": 59,
    # Slots 60-62: systems added by the helper branch loc-syso (validation run 10).
    "php-builtin": 60,
    "aiosmtpd-relay": 61,
    "snmpd-proxy": 62,
    # Slots 66-68: systems added by the helper branch loc-sysq (validation run 11).
    "fpm-memcache": 66,
    "unicorn-store": 67,
    "trio-chain": 68,
    # Slots 63-65: systems added by the helper branch loc-sysp (validation run 11).
    "trafficserver-cache": 63,
    "distcc-farm": 64,
    "rsyncd-mirror": 65,
    # Slots 69-71: systems added by the helper branch loc-sysr (validation run 12).
    "jetty-chain": 69,
    "znc-inspircd": 70,
    "exim-relay": 71,
    # Slots 72-74: systems added by the helper branch loc-syss (validation run 13).
    "kea-dhcp": 72,
    "spamd-prefork": 73,
    "aiocoap-proxy": 74,
    # Slots 75-77: systems added by the helper branch loc-syst (validation run 13).
    "git-daemon-mirror": 75,
    "hsqldb-front": 76,
    "paramiko-sftp": 77,
    # Slots 78-80: systems added by the helper branch loc-sysu (validation run 14).
    "beanstalkd-workers": 78,
    "thrift-chain": 79,
    "modbus-gateway": 80,
    # Slots 81-83: systems added by the helper branch loc-sysv (validation run 14).
    "xrootd-cluster": 81,
    "netty-chain": 82,
    "drb-chain": 83,
    # Slots 87-89: systems added by the helper branch loc-sysx (validation run 15).
    "rmi-chain": 87,
    "poe-chain": 88,
    "copas-chain": 89,
    # Slots 84-86: systems added by the helper branch loc-sysw (validation run 15).
    "opensmtpd-relay": 84,
    "xmlrpc-chain": 85,
    "node-h2-chain": 86,
}


# Every workload loop stops after this many seconds even if requests remain: a stopped or
# killed daemon makes each request wait for its timeout, and a case must stay bounded.
WORKLOAD_S = float(os.environ.get("LOCALIZE_WORKLOAD_S", "20"))


def steps(n):
    """range(n), cut short once WORKLOAD_S seconds have passed since the first step."""
    end = time.monotonic() + WORKLOAD_S
    for i in range(n):
        if time.monotonic() > end:
            log(f"workload deadline ({WORKLOAD_S:.0f} s) reached after {i} of {n} steps")
            return
        yield i


def terminated():
    """A flag that SIGTERM sets: a helper told to stop ends its loop (within one timeout)
    and still says what it saw, instead of dying silently."""
    import threading

    flag = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: flag.set())
    return flag



def descendants(pid):
    """The processes below pid (from /proc), deepest last."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def log(*a):
    print("systems:", *a, file=sys.stderr, flush=True)


def wait_readers(readers, seconds=8.0):
    """Waits up to `seconds` in all for the reader processes to leave (they stop at the
    writer's stop mark); one that does not is named in the log and left to the launcher."""
    end = time.monotonic() + seconds
    for r in readers:
        try:
            r.wait(timeout=max(0.1, end - time.monotonic()))
        except Exception:
            log("a reader did not stop")


def wait_port(port, proc=None, timeout=10.0):
    """Waits until 127.0.0.1:port accepts connections (or the process died / time ran out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _prctl():
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once here: a forked child (with other threads in the parent) must not import.
_PRCTL = _prctl()


def _die_with_parent():
    """In a started daemon, before exec: SIGKILL when the launcher dies (prctl
    PR_SET_PDEATHSIG = 1), so that a launcher killed from outside leaves nothing behind.
    One system call, nothing imported or allocated in the forked child."""
    if _PRCTL is not None:
        _PRCTL(1, 9, 0, 0, 0)


class Daemons:
    """Started daemons, stopped in reverse order on exit."""

    def __init__(self, logdir):
        self.procs = []
        self.logdir = logdir

    def start(self, name, argv, **kw):
        out = open(os.path.join(self.logdir, f"{name}.log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=_die_with_parent, **kw)
        self.procs.append((name, p))
        return p

    def stop(self):
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 5
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{name} ignored SIGTERM: killed")
                p.kill()
                p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class LineClient:
    """A text-protocol client on one TCP connection that reconnects after any failure."""

    def __init__(self, port, timeout=2.0):
        self.port = port
        self.timeout = timeout
        self.sock = None
        self.buf = b""
        self.errors = 0

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def request(self, fn):
        """Runs fn(self) on a connected client; on failure counts it and reconnects."""
        try:
            if self.sock is None:
                self.connect()
            return fn(self)
        except (OSError, ConnectionError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r}")
            self.close()
            return None


def drop_http(client, e):
    """A failed request of an `http.client` client (`client.conn`, `client.errors`):
    counted and logged, and the connection closed, to be made again by the next request."""
    client.errors += 1
    log(f"request failed: {e!r}")
    if client.conn is not None:
        client.conn.close()
    client.conn = None


def wait_udp(port, proc, timeout=15.0, step=0.05):
    """Waits until `proc` holds UDP port `port` on 127.0.0.1: a datagram server may drop
    a stray packet silently, so the probe is a bind of the port, which fails once the
    server has it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before binding UDP {port}")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return
        finally:
            s.close()
        time.sleep(step)
    raise RuntimeError(f"nothing bound UDP 127.0.0.1:{port} after {timeout} s")
