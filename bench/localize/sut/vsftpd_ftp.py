"""vsftpd-ftp: three vsftpd servers (Debian `vsftpd` 3.0.3, C, standalone mode) sharing one
file tree, and three `ftplib` clients moving files over FTP's control and data connections:
what one client stores through one server, another reads back through a third.

Ports: server A's control port = p[0] (its one passive data port p[3]), server B's = p[1]
(active mode only), server C's = p[2] (its one passive data port p[6]); files are sent
with write(), not sendfile(). Each vsftpd listener
forks a process for every control connection; that process forks again (privilege
separation: a privileged parent that does the login and the data connections' sockets for
it, and an unprivileged child that speaks the protocol and moves the bytes). Anonymous
login only, chrooted into the shared root: `pub/` holds files made by the launcher before
the servers start (read-only), `up/` is writable. Each client keeps one control connection
(2 s timeout) to its own server, makes it again after any failure, counts the failure and
goes on:

- the launcher, on A in passive mode, step i: stores `up/p-i.tmp` (2 to 48 KiB, contents
  from a seed), asks its SIZE, renames it to `up/p-i.bin` (deletes it instead every eighth
  step), reads it back and compares its SHA-256; every fourth step lists `up/`;
- the helper `ftp-client --name active`, the same on B in active mode (PORT: vsftpd
  connects back to the client for every transfer), on `up/a-i.bin`;
- the helper `ftp-client --name reader`, on C in passive mode: lists `up/`, reads the
  newest `.bin` of the writers and checks it against the seed of its name, reads
  `pub/f-K.bin` and checks its length and SHA-256, and asks MDTM of every third.
"""

import ftplib
import hashlib
import io
import os
import random
import re
import signal
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

STEPS_HELPER = 100
PUB_FILES = 12
TIMEOUT_S = 2.0
# client mode -> (server, its control port's index in ports(), passive data ports' indexes)
SERVERS = {"passive": ("a", 0, 3), "active": ("b", 1, None), "reader": ("c", 2, 6)}


def content(tag, k):
    """The deterministic contents of file k of `tag` (2 to 48 KiB)."""
    rnd = random.Random(f"{tag}-{k}")
    return rnd.randbytes(2048 + rnd.randrange(46 * 1024))


class Client:
    """One FTP session with the client's own server, made again after a failure."""

    def __init__(self, mode):
        self.who = f"{mode} client"
        self.port = ports("vsftpd-ftp")[SERVERS[mode][1]]
        self.passive = mode != "active"
        self.ftp = None
        self.errors = 0

    def session(self):
        if self.ftp is None:
            ftp = ftplib.FTP(timeout=TIMEOUT_S)
            try:
                ftp.connect("127.0.0.1", self.port)
                ftp.login("anonymous", "bench@example.test")
                ftp.set_pasv(self.passive)
            except BaseException:
                ftp.close()
                raise
            self.ftp = ftp
        return self.ftp

    def fail(self, i, e):
        self.errors += 1
        log(f"{self.who}: step {i} failed: {e!r}")
        if self.ftp is not None:
            self.ftp.close()
        self.ftp = None

    def fetch(self, path):
        buf = io.BytesIO()
        self.session().retrbinary(f"RETR {path}", buf.write)
        return buf.getvalue()


def check(path, got, want):
    if len(got) != len(want) or hashlib.sha256(got).digest() != hashlib.sha256(want).digest():
        raise ValueError(f"{path}: {len(got)} bytes read, {len(want)} expected, or another digest")


def writer_step(c, prefix, i):
    tmp, path = f"up/{prefix}-{i}.tmp", f"up/{prefix}-{i}.bin"
    data = content(prefix, i)
    c.session().storbinary(f"STOR {tmp}", io.BytesIO(data))
    size = c.session().size(tmp)
    if size != len(data):
        raise ValueError(f"SIZE {tmp}: {size}, {len(data)} stored")
    if i % 8 == 7:
        c.session().delete(tmp)
        return
    c.session().rename(tmp, path)
    check(path, c.fetch(path), data)
    if i % 4 == 3:
        names = c.session().nlst("up")
        if not any(n.endswith(f"{prefix}-{i}.bin") for n in names):
            raise ValueError(f"NLST up: {path} missing from {len(names)} names")


def reader_step(c, i):
    k = i % PUB_FILES
    path = f"pub/f-{k}.bin"
    check(path, c.fetch(path), content("pub", k))
    if i % 3 == 0:
        reply = c.session().sendcmd(f"MDTM {path}")
        if not reply.startswith("213 "):
            raise ValueError(f"MDTM {path}: {reply!r}")
    # The newest file a writer stored (renamed into place whole: never partial).
    stored = [m.groups() for m in map(re.compile(r"(?:.*/)?([pa])-(\d+)\.bin$").match, c.session().nlst("up")) if m]
    if stored:
        prefix, k = max(stored, key=lambda g: (int(g[1]), g[0]))
        path = f"up/{prefix}-{k}.bin"
        check(path, c.fetch(path), content(prefix, int(k)))


def _loop(n, mode, pause):
    c = Client(mode)
    ok = 0
    for i in steps(n):
        try:
            if mode == "reader":
                reader_step(c, i)
            else:
                writer_step(c, mode[0], i)
            ok += 1
        except (OSError, EOFError, ValueError, ftplib.Error) as e:
            c.fail(i, e)
        time.sleep(pause)
    if c.ftp is not None:
        try:
            c.ftp.quit()
        except (OSError, EOFError, ftplib.Error):
            c.ftp.close()
    return ok, c.errors


def client(name):
    """Helper process `ftp-client --name active|reader`."""
    ok, errors = _loop(STEPS_HELPER, name, 0.12)
    log(f"ftp {name} client: {ok}/{STEPS_HELPER} steps ok, {errors} failed")


def configure(tmp):
    """The shared anonymous root (`pub/` filled, `up/` writable), an empty directory for
    the sandbox, and a configuration per server; returns {server: its path}."""
    p = ports("vsftpd-ftp")
    root = os.path.join(tmp, "root")
    os.makedirs(os.path.join(root, "pub"), exist_ok=True)
    os.makedirs(os.path.join(root, "up"), exist_ok=True)
    os.makedirs(os.path.join(tmp, "empty"), exist_ok=True)
    for k in range(PUB_FILES):
        with open(os.path.join(root, "pub", f"f-{k}.bin"), "wb") as f:
            f.write(content("pub", k))
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o555)
    os.chmod(os.path.join(root, "up"), 0o777)
    confs = {}
    for server, control, pasv in SERVERS.values():
        data = (f"pasv_enable=YES\npasv_address=127.0.0.1\npasv_min_port={p[pasv]}\npasv_max_port={p[pasv]}\n"
                if pasv else "pasv_enable=NO\n")
        confs[server] = os.path.join(tmp, f"vsftpd-{server}.conf")
        with open(confs[server], "w") as f:
            f.write(
                f"listen=YES\nlisten_address=127.0.0.1\nlisten_port={p[control]}\nbackground=NO\n"
                f"anonymous_enable=YES\nanon_root={root}\nno_anon_password=YES\nlocal_enable=NO\n"
                "write_enable=YES\nanon_upload_enable=YES\nanon_other_write_enable=YES\nanon_umask=022\n"
                f"secure_chroot_dir={os.path.join(tmp, 'empty')}\nseccomp_sandbox=NO\n" + data
                + "port_enable=YES\nconnect_from_port_20=NO\nxferlog_enable=NO\nuse_sendfile=NO\nisolate=NO\nisolate_network=NO\n"
                "max_clients=32\nmax_per_ip=32\nidle_session_timeout=60\ndata_connection_timeout=10\n"
            )
    return confs


def _descendants(pids):
    """Every process descending from `pids` now (the listeners' session processes)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], list(pids)
    while todo:
        ppid = todo.pop()
        kids = [pid for pid, pp in parent.items() if pp == ppid]
        out += kids
        todo += kids
    return out


def _end_sessions(listeners):
    """Kills the session processes still there at the end: a client that quit has ended
    its own; one that a fault stopped (SIGSTOP) or that waits for a stopped child would
    outlive its listener, which SIGTERM ends alone. Waits up to 2 s for sessions that are
    closing."""
    end = time.monotonic() + 2.0
    while _descendants([p.pid for p in listeners]) and time.monotonic() < end:
        time.sleep(0.1)
    for pid in _descendants([p.pid for p in listeners]):
        try:
            os.kill(pid, signal.SIGKILL)
            log(f"vsftpd session process {pid} still there at the end: killed")
        except ProcessLookupError:
            pass


def run(tmp, n):
    confs = configure(tmp)
    p = ports("vsftpd-ftp")
    with Daemons(tmp) as d:
        listeners = []
        try:
            for server, control, _ in SERVERS.values():
                listeners.append(d.start(f"vsftpd-{server}", ["/usr/sbin/vsftpd", confs[server]]))
                wait_port(p[control], listeners[-1])
            helpers = [d.start(f"{m}-client", [PY, LAUNCHER, "ftp-client", "--name", m]) for m in ("active", "reader")]
            ok, errors = _loop(n, "passive", 0.1)
            wait_readers(helpers, seconds=25)
            log(f"vsftpd-ftp: {ok}/{n} steps ok, {errors} failed")
        finally:
            _end_sessions(listeners)
