"""thrift-chain: a Thrift front service that keeps nothing and forwards every call to a
Thrift store service, and two Thrift clients (PyPI `thrift` 0.25, the Apache Thrift Python
library: binary protocol, buffered transport over TCP; CPython threads).

Ports: front = p[0], store = p[1]. The IDL (`IDL` below: a `Store` service with `put(key,
value)` answering the value's length and the first 16 hex digits of its SHA-1, and
`get(key)` answering the value or raising `Missing`) is compiled once by setup.sh, outside
every recording, with Debian's Thrift compiler (`thrift --gen py`, package
`thrift-compiler` 0.17) into a directory named for the IDL's digest (`generated_dir`);
every process imports the generated package `kvchain` from there. The store (helper `thrift-store`) is a `TThreadPoolServer` of 4
threads holding the values in a dict. The front (helper `thrift-front`) is a
`TThreadedServer` (a thread per client connection) serving the same interface: each call
takes one of 2 pooled client connections to the store (at most 5 s' wait for one; 1.5 s
timeout on the socket), makes the same call there and returns its answer; a failure of
the store (a broken or timed-out connection, an answer that does not decode) closes that
pooled connection, to be made again by the next call that takes it, and becomes a
`TApplicationException` to the client. Client 1 (the launcher) and client 2 (helper
`thrift-client --name 2`) each take steps through the front: a step puts a value made for
it (80 to 6 000 bytes) under a key of its own and reads it back, checking the answer to
the put and the value's length and SHA-1; every call is bounded by a 3 s socket timeout;
after a failure the client logs it, closes its connection, connects again and goes on.
Front and store say at their end (SIGTERM) how many calls they answered.
"""

import hashlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

IDL = """namespace py kvchain

exception Missing {
  1: string key
}

service Store {
  string put(1: string key, 2: binary value),
  binary get(1: string key) throws (1: Missing missing),
}
"""
POOL = 2
STORE_TIMEOUT_MS = 1500
CLIENT_TIMEOUT_MS = 3000
REQUESTS2 = 60


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def value(name, i):
    """The value client `name` puts at step i."""
    size = 80 + (i * 389 + int(name) * 131) % 5900
    head = f"client {name} step {i}:".encode()
    return (head + bytes(range(97, 123)) * (size // 26 + 1))[:size]


def generated_dir():
    """Where the generated Python code lives: a directory named for the IDL's digest."""
    tag = hashlib.sha1(IDL.encode()).hexdigest()[:12]
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"culprit-localize-thrift-{tag}")


def build():
    """Compiles the IDL once (setup.sh), outside every recording."""
    out = generated_dir()
    if os.path.exists(os.path.join(out, "kvchain", "Store.py")):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(tmp, "kv.thrift"), "w") as f:
        f.write(IDL)
    subprocess.run(["thrift", "--gen", "py", "-out", tmp, os.path.join(tmp, "kv.thrift")], check=True, timeout=60)
    os.replace(tmp, out)
    return out


def generated():
    """The generated package (kvchain.Store, kvchain.ttypes)."""
    if generated_dir() not in sys.path:
        sys.path.insert(0, generated_dir())
    from kvchain import Store, ttypes

    return Store, ttypes


def connect(port, timeout_ms):
    """(transport, Store.Client) on a new connection to 127.0.0.1:port."""
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    Store, _ = generated()
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(timeout_ms)
    transport = TTransport.TBufferedTransport(sock)
    transport.open()
    return transport, Store.Client(TBinaryProtocol.TBinaryProtocol(transport))


def serve(make_server, processor, port, counts, who):
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    def bye(*_):
        log(f"thrift-chain {who}: {counts['put']} puts and {counts['get']} gets answered (told to stop)")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    server = make_server(processor, TSocket.TServerSocket(host="127.0.0.1", port=port),
                         TTransport.TBufferedTransportFactory(), TBinaryProtocol.TBinaryProtocolFactory(), daemon=True)
    return server


def store(_name):
    """Helper process `thrift-store`: the values, a TThreadPoolServer of 4 threads."""
    from thrift.server import TServer

    Store, ttypes = generated()
    counts = {"put": 0, "get": 0}
    lock = threading.Lock()
    data = {}

    class Handler:
        def put(self, key, val):
            with lock:
                data[key] = val
                counts["put"] += 1
            return f"{len(val)} {digest(val)}"

        def get(self, key):
            with lock:
                counts["get"] += 1
                if key not in data:
                    raise ttypes.Missing(key=key)
                return data[key]

    server = serve(TServer.TThreadPoolServer, Store.Processor(Handler()), ports("thrift-chain")[1], counts, "store")
    server.setNumThreads(4)
    server.serve()


class Pool:
    """The front's client connections to the store: POOL of them, each made when a call
    takes it and finds none, closed after any failure."""

    def __init__(self, port):
        self.port = port
        self.free = queue.Queue()
        for _ in range(POOL):
            self.free.put(None)
        self.failed = 0

    def call(self, method, *args):
        from thrift.Thrift import TApplicationException

        Store, ttypes = generated()
        try:
            conn = self.free.get(timeout=5)
        except queue.Empty:
            raise TApplicationException(TApplicationException.INTERNAL_ERROR, "no store connection within 5 s")
        try:
            if conn is None:
                conn = connect(self.port, STORE_TIMEOUT_MS)
            return getattr(conn[1], method)(*args)
        except ttypes.Missing:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the store is the client's error
            self.failed += 1
            log(f"store call failed: {e!r:.200}")
            if conn is not None:
                conn[0].close()
            conn = None
            raise TApplicationException(TApplicationException.INTERNAL_ERROR, f"store: {e!r:.100}")
        finally:
            self.free.put(conn)


def front(_name):
    """Helper process `thrift-front`: forwards each call to the store (TThreadedServer)."""
    from thrift.server import TServer

    Store, _ = generated()
    counts = {"put": 0, "get": 0}
    pool = Pool(ports("thrift-chain")[1])

    class Handler:
        def put(self, key, val):
            counts["put"] += 1
            return pool.call("put", key, val)

        def get(self, key):
            counts["get"] += 1
            return pool.call("get", key)

    server = serve(TServer.TThreadedServer, Store.Processor(Handler()), ports("thrift-chain")[0], counts, "front")
    server.serve()


class Client:
    def __init__(self, name):
        self.name = name
        self.conn = None
        self.errors = 0

    def step(self, i):
        from thrift.Thrift import TException

        key = f"c{self.name}-{i % 30}"
        v = value(self.name, i)
        try:
            if self.conn is None:
                self.conn = connect(ports("thrift-chain")[0], CLIENT_TIMEOUT_MS)
            c = self.conn[1]
            want = f"{len(v)} {digest(v)}"
            got = c.put(key, v)
            if got != want:
                raise ValueError(f"put {key} step {i}: {got!r:.60}, wanted {want!r}")
            back = c.get(key)
            if len(back) != len(v) or digest(back) != digest(v):
                raise ValueError(f"get {key} step {i}: {len(back)} bytes (SHA-1 {digest(back)}), "
                                 f"wanted {len(v)} ({digest(v)})")
            return True
        except (OSError, ValueError, EOFError, TException) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            self.close()
            return False

    def close(self):
        if self.conn is not None:
            self.conn[0].close()
            self.conn = None


def workload(name, n, pause):
    c = Client(name)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `thrift-client --name N`: REQUESTS2 steps through the front, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"thrift-chain client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("thrift-chain")[:2]
    build()  # made by setup.sh already: nothing to do inside a recording
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        s = d.start("store", [PY, LAUNCHER, "thrift-store"], env=env)
        wait_port(sport, s, timeout=20)
        fr = d.start("front", [PY, LAUNCHER, "thrift-front"], env=env)
        wait_port(fport, fr, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "thrift-client", "--name", "2"], env=env)
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"thrift-chain: {ok}/{n} steps ok, {errors} failed")
