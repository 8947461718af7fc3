"""paramiko-sftp: an SFTP server on paramiko (PyPI `paramiko`: CPython threads — an accept
loop, a `Transport` thread per SSH connection and a thread per SFTP subsystem) whose files
live in a Python store service (`socketserver.ThreadingTCPServer`, a thread per
connection), and two paramiko SFTP clients.

Ports: SFTP server = p[0], store = p[1]. The server's RSA host key is made at set-up (in
the scratch directory, before any process starts); clients log in with a password. Every
SFTP session opens a connection of its own to the store (1 s timeout; after a failure the
next operation connects again) and keeps no file itself: a file opened for writing is
buffered and stored whole at its close (`PUT name len` + the bytes, answered with the
length and SHA-1 the store computed, checked by the server), a file opened for reading is
fetched whole at its open (`GET name`), `stat` asks the store (`STAT name`); a failure of
the store becomes an SFTP failure status. The launcher's client uploads then reads back
N/2 files (names `c1-NNNN.dat`, contents of name-dependent length, 300 to 24 000 bytes)
every 20 ms on one SSH connection; the helper `sftp-client --name 2` does 30 files every
60 ms in sessions of 5 files (a new SSH connection each). Each checks the length and SHA-1
of every file it reads back, counts failures (3 s timeout on the channel), connects again
after any and goes on. The store and the server say at their exit (SIGTERM) what they
served.
"""

import hashlib
import io
import os
import signal
import socket
import socketserver
import sys
import threading
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers
from .rsyncd_mirror import content

STORE_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 3.0
USER, PASSWORD = "sftp", "culprit-localize"
REQUESTS2 = 30
SESSION2 = 5


# --- the store service ---------------------------------------------------------------


class Files:
    """The store's files (a lock, a dict)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.files = {}
        self.served = 0

    def put(self, name, body):
        with self.lock:
            self.files[name] = body
            self.served += 1

    def get(self, name):
        with self.lock:
            self.served += 1
            return self.files.get(name)

    def list(self):
        with self.lock:
            return [(x, len(self.files[x])) for x in sorted(self.files)]


def store(_name):
    """Helper process `sftp-store`: names -> bytes, a thread per connection."""
    port = ports("paramiko-sftp")[1]
    files = Files()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                line = self.rfile.readline(512)
                if not line:
                    return
                words = line.decode(errors="replace").split()
                if not words:
                    return
                out = self.one(words)
                if out is None:
                    return
                self.wfile.write(out)
                self.wfile.flush()

        def one(self, words):
            op, args = words[0], words[1:]
            if op == "PUT" and len(args) == 2:
                n = int(args[1])
                body = self.rfile.read(n)
                if len(body) != n:
                    return None
                files.put(args[0], body)
                return f"OK {n} {hashlib.sha1(body).hexdigest()}\n".encode()
            if op in ("GET", "STAT") and len(args) == 1:
                body = files.get(args[0])
                if body is None:
                    return b"NO\n"
                return f"OK {len(body)}\n".encode() + (body if op == "GET" else b"")
            if op == "LIST":
                names = files.list()
                return f"OK {len(names)}\n".encode() + b"".join(f"{x} {n}\n".encode() for x, n in names)
            return b"ERR\n"

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)

    def bye(*_):
        log(f"sftp store: {files.served} requests served, {len(files.files)} files (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server.serve_forever()


class StoreConn:
    """The SFTP server's connection to the store for one SFTP session; made again after a
    failure."""

    def __init__(self):
        self.port = ports("paramiko-sftp")[1]
        self.sock = None
        self.rfile = None

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = self.rfile = None

    def _line(self):
        line = self.rfile.readline(512)
        if not line.endswith(b"\n"):
            raise ConnectionError("store: end of stream")
        return line.decode(errors="replace").split()

    def _exact(self, n):
        body = self.rfile.read(n)
        if len(body) != n:
            raise ConnectionError(f"store: {len(body)} of {n} bytes")
        return body

    def call(self, head, body=b"", want_body=False):
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=STORE_TIMEOUT_S)
                self.rfile = self.sock.makefile("rb")
            self.sock.sendall(head.encode() + b"\n" + body)
            words = self._line()
            if words[:1] == ["NO"]:
                return None
            if words[:1] != ["OK"]:
                raise ValueError(f"store: {' '.join(words)[:60]!r}")
            return words, (self._exact(int(words[1])) if want_body else None)
        except Exception:
            self.close()
            raise

    def put(self, name, body):
        words, _ = self.call(f"PUT {name} {len(body)}", body)
        if int(words[1]) != len(body) or words[2] != hashlib.sha1(body).hexdigest():
            raise ValueError(f"store kept {name} damaged: {words[1:3]}")

    def get(self, name):
        r = self.call(f"GET {name}", want_body=True)
        return None if r is None else r[1]

    def stat(self, name):
        r = self.call(f"STAT {name}")
        return None if r is None else int(r[0][1])

    def list(self):
        r = self.call("LIST")
        return [] if r is None else [self._line() for _ in range(int(r[0][1]))]


# --- the SFTP server -------------------------------------------------------------------


def server(_name):
    """Helper process `sftp-server`: paramiko's SFTP subsystem on the store."""
    import paramiko
    from paramiko.sftp import SFTP_FAILURE, SFTP_NO_SUCH_FILE, SFTP_OK

    tmp = os.environ["SFTP_DIR"]
    port = ports("paramiko-sftp")[0]
    key = paramiko.RSAKey(filename=os.path.join(tmp, "host_key"))
    count = {"sessions": 0, "failures": 0}

    def attrs(name, size):
        a = paramiko.SFTPAttributes()
        a.filename, a.st_size, a.st_mode = name, size, 0o100644
        a.st_uid = a.st_gid = 0
        a.st_atime = a.st_mtime = int(time.time())
        return a

    def failed(what, e):
        count["failures"] += 1
        print(f"sftp server: {what}: {e!r}", file=sys.stderr, flush=True)
        return SFTP_FAILURE

    class WriteHandle(paramiko.SFTPHandle):
        def __init__(self, store, name, flags):
            super().__init__(flags)
            self.store, self.name, self.buf = store, name, bytearray()

        def write(self, offset, data):
            if offset > len(self.buf):
                self.buf.extend(b"\0" * (offset - len(self.buf)))
            self.buf[offset:offset + len(data)] = data
            return SFTP_OK

        def stat(self):
            return attrs(self.name, len(self.buf))

        def close(self):
            # Raised, not returned: paramiko answers an exception of close() with a failure.
            self.store.put(self.name, bytes(self.buf))

    class ReadHandle(paramiko.SFTPHandle):
        def __init__(self, name, body, flags):
            super().__init__(flags)
            self.name, self.size, self.readfile = name, len(body), io.BytesIO(body)

        def stat(self):
            return attrs(self.name, self.size)

    class StoreSFTP(paramiko.SFTPServerInterface):
        def session_started(self):
            self.store = StoreConn()
            count["sessions"] += 1

        def session_ended(self):
            self.store.close()

        @staticmethod
        def name(path):
            return os.path.basename(path.rstrip("/"))

        def open(self, path, flags, attr):
            name = self.name(path)
            if flags & (os.O_WRONLY | os.O_RDWR):
                return WriteHandle(self.store, name, flags)
            try:
                body = self.store.get(name)
            except Exception as e:
                return failed(f"open {name}", e)
            return SFTP_NO_SUCH_FILE if body is None else ReadHandle(name, body, flags)

        def stat(self, path):
            name = self.name(path)
            if name in ("", "."):
                a = attrs(name, 0)
                a.st_mode = 0o40755
                return a
            try:
                size = self.store.stat(name)
            except Exception as e:
                return failed(f"stat {name}", e)
            return SFTP_NO_SUCH_FILE if size is None else attrs(name, size)

        lstat = stat

        def list_folder(self, path):
            try:
                return [attrs(n, int(s)) for n, s in self.store.list()]
            except Exception as e:
                return failed("list", e)

    class Auth(paramiko.ServerInterface):
        def check_auth_password(self, username, password):
            ok = username == USER and password == PASSWORD
            return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

        def get_allowed_auths(self, username):
            return "password"

        def check_channel_request(self, kind, chanid):
            return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def serve(conn):
        t = paramiko.Transport(conn)
        t.add_server_key(key)
        t.set_subsystem_handler("sftp", paramiko.SFTPServer, StoreSFTP)
        try:
            t.start_server(server=Auth())
            # The session channel stays in the transport's queue (never taken: the
            # subsystem runs on it) until the transport ends.
            t.join()
        except (paramiko.SSHException, OSError, EOFError) as e:
            print(f"sftp server: connection: {e!r}", file=sys.stderr, flush=True)
        finally:
            t.close()

    def bye(*_):
        log(f"sftp server: {count['sessions']} SFTP sessions, {count['failures']} store failures (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(16)
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError as e:
            print(f"sftp server: accept: {e!r}", file=sys.stderr, flush=True)
            time.sleep(0.05)
            continue
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


# --- the clients -----------------------------------------------------------------------


class SftpClient:
    """One SSH connection with an SFTP session (paramiko), made again after any failure."""

    def __init__(self, name):
        self.name = name
        self.port = ports("paramiko-sftp")[0]
        self.ssh = self.sftp = None
        self.errors = 0

    def connect(self):
        import paramiko

        self.close()
        self.ssh = paramiko.SSHClient()
        self.ssh.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        self.ssh.connect("127.0.0.1", self.port, username=USER, password=PASSWORD, timeout=CLIENT_TIMEOUT_S,
                         banner_timeout=CLIENT_TIMEOUT_S, auth_timeout=CLIENT_TIMEOUT_S,
                         channel_timeout=CLIENT_TIMEOUT_S, look_for_keys=False, allow_agent=False)
        self.sftp = self.ssh.open_sftp()
        self.sftp.get_channel().settimeout(CLIENT_TIMEOUT_S)

    def close(self):
        if self.ssh is not None:
            self.ssh.close()
        self.ssh = self.sftp = None

    def step(self, i):
        """Uploads file i, reads it back and checks its length and SHA-1: True if all went
        right; a failure is logged and counted and the connection is made again."""
        import paramiko

        fname = f"c{self.name}-{i:04}.dat"
        want = content(fname)
        try:
            if self.sftp is None:
                self.connect()
            self.sftp.putfo(io.BytesIO(want), fname)
            got = io.BytesIO()
            self.sftp.getfo(fname, got)
            got = got.getvalue()
            if len(got) != len(want) or hashlib.sha1(got).digest() != hashlib.sha1(want).digest():
                raise ValueError(f"{fname}: read back {len(got)} bytes, SHA-1 {hashlib.sha1(got).hexdigest()[:12]}, "
                                 f"wanted {len(want)}, {hashlib.sha1(want).hexdigest()[:12]}")
            return True
        except (OSError, EOFError, paramiko.SSHException, ValueError) as e:
            self.errors += 1
            log(f"sftp client {self.name}: step {i} failed: {e!r}")
            self.close()
            return False


def workload(name, n, pause, session=0):
    """n steps, `pause` seconds apart; a new SSH connection every `session` steps (0: one
    for all); (steps that went right, failures)."""
    c = SftpClient(name)
    ok = 0
    try:
        for i in steps(n):
            if session and i and i % session == 0:
                c.close()
            ok += c.step(i)
            time.sleep(pause)
    finally:
        c.close()
    return ok, c.errors


def client(name):
    """Helper process `sftp-client --name N`: REQUESTS2 files, every 60 ms, sessions of
    SESSION2."""
    ok, errors = workload(name, REQUESTS2, 0.06, SESSION2)
    log(f"sftp client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    import paramiko

    front, back = ports("paramiko-sftp")[:2]
    paramiko.RSAKey.generate(2048).write_private_key_file(os.path.join(tmp, "host_key"))
    env = dict(os.environ, SFTP_DIR=tmp, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("store", [PY, LAUNCHER, "sftp-store"], env=env)
        wait_port(back, p)
        p = d.start("server", [PY, LAUNCHER, "sftp-server"], env=env)
        wait_port(front, p, timeout=15)
        helper = d.start("client2", [PY, LAUNCHER, "sftp-client", "--name", "2"], env=env)
        files = n // 2  # 60 for the suite's 120 steps
        ok, errors = workload("1", files, 0.02)
        wait_readers([helper], seconds=25)
        log(f"paramiko-sftp: {ok}/{files} steps ok, {errors} failed")
