"""zmq-pipeline: a ZeroMQ task pipeline on PyPI's `pyzmq` (CPython over the libzmq it bundles:
C++, one I/O thread per process does every socket's reads and writes, the Python thread talks
to it through a mailbox) — a ventilator, two workers, a lookup service and a sink, the
pattern of the ZeroMQ guide.

Ports: tasks = p[0] (the ventilator's PUSH, bound; the workers' PULLs connect), results =
p[1] (the sink's PULL, bound; the workers' PUSHes connect), lookups = p[2] (the lookup
service's ROUTER, bound; every worker's REQ connects). The launcher is the ventilator: it
waits (bounded) until both workers are connected, then sends N tasks as JSON, one every
50 ms, round-robin over the workers. A worker (`zmq-worker --name 1|2`) takes a task, asks
the lookup service (`zmq-lookup`) for its key's value over REQ -> ROUTER — a 1 s poll for
the reply, and on a timeout the "lazy pirate" retry: the REQ socket is closed and made again,
three tries in all, then the task is given up — and pushes the task's digest to the sink
(`zmq-sink --name N`), which checks every digest against the one it computes itself and
counts good, bad, duplicate and missing results. The sink ends once all N results arrived;
the launcher waits for it (bounded), then stops everyone, and every process says what it saw.
"""

import hashlib
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated

LOOKUP_TIMEOUT_MS = 1000
TRIES = 3


def key(seq):
    return f"k{int(seq) % 37}"


def data(seq):
    return "x" * (int(seq) % 40)


def value(k):
    return hashlib.sha1(k.encode()).hexdigest()[:16]


def digest(seq, val):
    return hashlib.sha1(f"{seq}:{data(seq)}:{val}".encode()).hexdigest()


def _context():
    import zmq

    return zmq.Context(io_threads=1)


def lookup(_name):
    """Helper process `zmq-lookup`: a ROUTER that answers `get KEY` with KEY's value."""
    import zmq

    tasks = ports("zmq-pipeline")[2]
    term = terminated()
    ctx = _context()
    s = ctx.socket(zmq.ROUTER)
    s.setsockopt(zmq.LINGER, 0)
    s.bind(f"tcp://127.0.0.1:{tasks}")
    answered = bad = 0
    while not term.is_set():
        if not s.poll(200):
            continue
        try:
            frames = s.recv_multipart()
            ident, body = frames[0], frames[2:]
            if len(body) != 2 or body[0] != b"get":
                bad += 1
                log(f"lookup: bad request {body[:3]!r}")
                s.send_multipart([ident, b"", b"error", b"bad request"])
                continue
            s.send_multipart([ident, b"", b"ok", value(body[1].decode()).encode()])
            answered += 1
        except (zmq.ZMQError, ValueError, IndexError) as e:
            bad += 1
            log(f"lookup: request failed: {e!r}")
    s.close()
    ctx.term()
    log(f"zmq lookup: {answered} lookups answered, {bad} bad requests")


class Lookups:
    """A worker's REQ socket to the lookup service, made again after a timeout."""

    def __init__(self, ctx, port):
        self.ctx = ctx
        self.port = port
        self.sock = None
        self.timeouts = 0

    def _open(self):
        import zmq

        self.sock = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(f"tcp://127.0.0.1:{self.port}")

    def get(self, k):
        for _ in range(TRIES):
            if self.sock is None:
                self._open()
            self.sock.send_multipart([b"get", k.encode()])
            if self.sock.poll(LOOKUP_TIMEOUT_MS):
                status, val = self.sock.recv_multipart()
                if status != b"ok":
                    raise ValueError(f"lookup of {k} said {status!r}: {val!r}")
                return val.decode()
            self.timeouts += 1
            log(f"lookup of {k} timed out: a new REQ socket")
            self.sock.close()
            self.sock = None
        raise TimeoutError(f"lookup of {k}: no reply after {TRIES} tries")


def worker(name):
    """Helper process `zmq-worker --name 1|2`: PULL tasks, look the key up, PUSH digests."""
    import zmq

    tasks, results, lookups = ports("zmq-pipeline")[:3]
    term = terminated()
    ctx = _context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.connect(f"tcp://127.0.0.1:{tasks}")
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(f"tcp://127.0.0.1:{results}")
    look = Lookups(ctx, lookups)
    done = failed = 0
    while not term.is_set():
        if not pull.poll(200):
            continue
        try:
            task = pull.recv_json()
            val = look.get(key(task["seq"]))
            push.send_multipart([str(task["seq"]).encode(), name.encode(),
                                 digest(task["seq"], val).encode()])
            done += 1
        except (zmq.ZMQError, ValueError, KeyError, TypeError, OSError) as e:
            failed += 1
            log(f"worker {name}: task failed: {e!r}")
    for s in (pull, push, look.sock):
        if s is not None:
            s.close()
    ctx.term()
    log(f"zmq worker {name}: {done} tasks done, {failed} failed, {look.timeouts} lookups timed out"
        f"{' (told to stop)' if term.is_set() else ''}")


def sink(name):
    """Helper process `zmq-sink --name N`: PULL the N results and check each digest."""
    import zmq

    n = int(name)
    results = ports("zmq-pipeline")[1]
    term = terminated()
    ctx = _context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.bind(f"tcp://127.0.0.1:{results}")
    good, bad, dup, per = set(), 0, 0, {}
    while not term.is_set() and len(good) < n:
        if not pull.poll(200):
            continue
        try:
            seq, who, got = pull.recv_multipart()
            seq, who = int(seq), who.decode()
            if got.decode() != digest(seq, value(key(seq))):
                raise ValueError(f"result {seq} from worker {who}: wrong digest")
            if seq in good:
                dup += 1
            good.add(seq)
            per[who] = per.get(who, 0) + 1
        except (zmq.ZMQError, ValueError, UnicodeDecodeError) as e:
            bad += 1
            log(f"sink: bad result: {e!r}")
    pull.close()
    ctx.term()
    log(f"zmq sink: {len(good)}/{n} results ok, {bad} bad, {dup} duplicates, {n - len(good)} missing, "
        f"per worker {dict(sorted(per.items()))}{' (told to stop)' if term.is_set() else ''}")


def _wait_workers(push, want, timeout):
    """Waits (bounded) until `want` peers have connected to the PUSH socket."""
    import zmq
    from zmq.utils.monitor import recv_monitor_message

    mon = push.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    seen = 0
    end = time.monotonic() + timeout
    while seen < want and time.monotonic() < end:
        if mon.poll(100):
            recv_monitor_message(mon)
            seen += 1
    push.disable_monitor()
    mon.close()
    return seen


def run(tmp, n):
    import zmq

    tasks, results, lookups = ports("zmq-pipeline")[:3]
    with Daemons(tmp) as d:
        ctx = _context()
        push = ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.SNDTIMEO, 2000)
        push.bind(f"tcp://127.0.0.1:{tasks}")
        snk = d.start("sink", [PY, LAUNCHER, "zmq-sink", "--name", str(n)])
        d.start("lookup", [PY, LAUNCHER, "zmq-lookup"])
        for w in ("1", "2"):
            d.start(f"worker{w}", [PY, LAUNCHER, "zmq-worker", "--name", w])
        connected = _wait_workers(push, 2, 15)
        if connected < 2:
            log(f"only {connected} of 2 workers connected after 15 s")
        sent = failed = 0
        for i in steps(n):
            try:
                push.send_json({"seq": i, "key": key(i), "data": data(i)})
                sent += 1
            except (zmq.ZMQError, ValueError, OSError) as e:
                failed += 1
                log(f"task {i} not sent: {e!r}")
            time.sleep(0.05)
        try:
            snk.wait(timeout=min(10.0, WORKLOAD_S))
        except Exception:
            log("the sink did not get every result within 10 s")
        push.close()
        ctx.term()
        log(f"zmq-pipeline: {sent}/{n} tasks sent, {failed} failed")
