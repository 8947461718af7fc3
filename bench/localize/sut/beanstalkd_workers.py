"""beanstalkd-workers: beanstalkd (Debian `beanstalkd` 1.12: C, one process, one thread on
epoll, its binlog in a private directory of the scratch directory, `-b`) with two Python
worker processes and two Python producers on `greenstalk` (PyPI), all talking through it.

Ports: beanstalkd = p[0]. A producer (the launcher is producer 1; the helper
`bs-producer --name 2` is producer 2) uses the `work` tube and watches only its own
`done-N` tube: at each step it puts a job `N STEP PAYLOAD` (payloads of 100 to 3 000 bytes
made for the step, TTR 5 s), then waits (at most 3 s in all, reserve-with-timeout of 1 s at
a time) for the job's result in `done-N`, deletes it and checks it: the step, the
payload's length and the SHA-1 chain the producer computes itself. A result of an earlier
step (one that came too late) is deleted and skipped. The workers (helpers `bs-worker
--name 1|2`) watch only `work`: each reserves a job (1 s at a time), computes the result
(SHA-1 of the payload hashed again CHAIN times), uses the producer's `done-N` tube, puts
the result `STEP LENGTH HEX` there and deletes the job; a `stop` job (put by the launcher
at the lowest priority after both producers finished) ends a worker, as do 10 s without a
job. Every connection is a socket with a 3 s timeout handed to greenstalk; after any
failure a process logs it, closes its connection, makes a new one and goes on (a job a
worker held when its connection broke goes back to the ready queue: beanstalkd releases
it, or its TTR runs out). Producers and workers say at their end what they did.
"""

import hashlib
import os
import socket
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

CHAIN = 300
SOCKET_TIMEOUT_S = 3.0
RESULT_WAIT_S = 3.0
REQUESTS2 = 60
WORKER_IDLE_S = 10.0


def payload(name, i):
    """The payload producer `name` puts at step i."""
    size = 100 + (i * 211 + int(name) * 57) % 2900
    head = f"producer {name} step {i}:".encode()
    return (head + bytes(range(65, 91)) * (size // 26 + 1))[:size]


def chain(data):
    """The result a worker computes: SHA-1 of the payload, hashed again CHAIN times."""
    h = hashlib.sha1(data).digest()
    for _ in range(CHAIN):
        h = hashlib.sha1(h).digest()
    return h.hex()


def connect(use=None, watch=None):
    import greenstalk

    sock = socket.create_connection(("127.0.0.1", ports("beanstalkd-workers")[0]), timeout=SOCKET_TIMEOUT_S)
    try:
        c = greenstalk.Client(sock, encoding=None)
        if use:
            c.use(use)
        if watch:
            c.watch(watch)
            c.ignore("default")
        return c
    except BaseException:
        sock.close()
        raise


def errors():
    import greenstalk

    return (OSError, ValueError, greenstalk.Error)


class Producer:
    def __init__(self, name):
        self.name = name
        self.tube = f"done-{name}"
        self.c = None
        self.errors = 0
        self.stale = 0

    def drop(self, e):
        self.errors += 1
        log(f"request failed: {e!r:.200}")
        if self.c is not None:
            try:
                self.c.close()
            except OSError:
                pass
        self.c = None

    def step(self, i):
        import greenstalk

        body = payload(self.name, i)
        try:
            if self.c is None:
                self.c = connect(use="work", watch=self.tube)
            self.c.put(f"{self.name} {i} ".encode() + body, ttr=5)
            end = time.monotonic() + RESULT_WAIT_S
            while True:
                if time.monotonic() > end:
                    raise TimeoutError(f"no result for step {i} within {RESULT_WAIT_S:.0f} s")
                try:
                    job = self.c.reserve(timeout=1)
                except greenstalk.TimedOutError:
                    continue
                self.c.delete(job)
                step, length, hexdigest = job.body.decode().split()
                if int(step) != i:
                    self.stale += 1
                    continue
                if int(length) != len(body) or hexdigest != chain(body):
                    raise ValueError(f"step {i}: result {length} {hexdigest[:16]}, wanted {len(body)} "
                                     f"{chain(body)[:16]}")
                return True
        except (*errors(), TimeoutError) as e:
            self.drop(e)
            return False

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def workload(name, n, pause):
    p = Producer(name)
    ok = 0
    for i in steps(n):
        ok += p.step(i)
        time.sleep(pause)
    p.close()
    return ok, p.errors, p.stale


def producer(name):
    """Helper process `bs-producer --name N`: REQUESTS2 jobs, every 60 ms."""
    ok, failed, stale = workload(name, REQUESTS2, 0.06)
    log(f"beanstalkd-workers producer {name}: {ok}/{REQUESTS2} jobs ok, {failed} failed, {stale} late results skipped")


def worker(name):
    """Helper process `bs-worker --name N`: reserves jobs from `work`, puts their results."""
    import greenstalk

    c, done, failed = None, 0, 0
    idle_until = time.monotonic() + WORKER_IDLE_S
    while time.monotonic() < idle_until:
        try:
            if c is None:
                c = connect(watch="work")
            try:
                job = c.reserve(timeout=1)
            except greenstalk.TimedOutError:
                continue
            if job.body == b"stop":
                c.delete(job)
                break
            producer_name, step, body = job.body.split(b" ", 2)
            c.use(f"done-{producer_name.decode()}")
            c.put(f"{step.decode()} {len(body)} {chain(body)}".encode(), ttr=5)
            c.delete(job)
            done += 1
            idle_until = time.monotonic() + WORKER_IDLE_S
        except errors() as e:
            failed += 1
            log(f"request failed: {e!r:.200}")
            if c is not None:
                try:
                    c.close()
                except OSError:
                    pass
            c = None
            time.sleep(0.1)
    if c is not None:
        c.close()
    log(f"beanstalkd-workers worker {name}: {done} jobs done, {failed} failed")


def run(tmp, n):
    port = ports("beanstalkd-workers")[0]
    binlog = os.path.join(tmp, "binlog")
    os.makedirs(binlog, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        b = d.start("beanstalkd", ["beanstalkd", "-l", "127.0.0.1", "-p", str(port), "-b", binlog])
        wait_port(port, b)
        workers = [d.start(f"worker{i}", [PY, LAUNCHER, "bs-worker", "--name", str(i)], env=env) for i in (1, 2)]
        helper = d.start("producer2", [PY, LAUNCHER, "bs-producer", "--name", "2"], env=env)
        ok, failed, stale = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        try:
            c = connect(use="work")
            for _ in workers:
                c.put(b"stop", priority=2**31, ttr=5)
            c.close()
        except errors() as e:
            log(f"stop jobs not put: {e!r:.200}")
        wait_readers(workers, seconds=WORKER_IDLE_S + 5)
        log(f"beanstalkd-workers: {ok}/{n} jobs ok, {failed} failed, {stale} late results skipped")
