"""job-queue: beanstalkd, a producer and two worker processes (C server, Python clients)."""

import subprocess
import time

from .common import LAUNCHER, PY, Daemons, LineClient, log, ports, steps, wait_port


def beanstalk_worker(name):
    """A worker process: reserves jobs, 'works', deletes them; exits on a `stop` job."""
    port = ports("job-queue")[0]
    c = LineClient(port, timeout=3.0)
    done = 0
    idle_until = time.monotonic() + 15
    while time.monotonic() < idle_until:

        def one(c):
            c.sock.sendall(b"watch jobs\r\n")
            if not c.line().startswith(b"WATCHING"):
                raise ValueError("watch")
            c.sock.sendall(b"reserve-with-timeout 1\r\n")
            r = c.line()
            if r == b"TIMED_OUT":
                return "idle"
            if not r.startswith(b"RESERVED "):
                raise ValueError(f"reserve: {r!r}")
            _, jid, size = r.split()
            body = c.exact(int(size) + 2)[:-2]
            c.sock.sendall(b"delete " + jid + b"\r\n")
            r = c.line()
            if r not in (b"DELETED", b"NOT_FOUND"):
                raise ValueError(f"delete: {r!r}")
            return "stop" if body == b"stop" else "job"

        r = c.request(one)
        if r == "stop":
            break
        if r == "job":
            done += 1
            idle_until = time.monotonic() + 15
    c.close()
    log(f"worker {name}: {done} jobs, {c.errors} failed")


def job_queue(tmp, n):
    port = ports("job-queue")[0]
    with Daemons(tmp) as d:
        p = d.start("beanstalkd", ["beanstalkd", "-l", "127.0.0.1", "-p", str(port)])
        wait_port(port, p)
        workers = [d.start(f"worker{i}", [PY, LAUNCHER, "job-queue-worker", "--name", str(i)]) for i in (1, 2)]
        c = LineClient(port)
        ok = 0
        for i in steps(n):
            body = f"job {i} " + "y" * (i % 40)

            def put(c):
                c.sock.sendall(b"use jobs\r\n")
                if not c.line().startswith(b"USING"):
                    raise ValueError("use")
                c.sock.sendall(f"put 0 0 1 {len(body)}\r\n{body}\r\n".encode())
                r = c.line()
                if not r.startswith(b"INSERTED"):
                    raise ValueError(f"put: {r!r}")
                return True

            ok += bool(c.request(put))
            time.sleep(0.005)
        for _ in workers:
            c.request(lambda c: (c.sock.sendall(b"use jobs\r\nput 100 0 1 4\r\nstop\r\n"), c.line(), c.line()))
        c.close()
        for w in workers:
            try:
                w.wait(timeout=25)
            except subprocess.TimeoutExpired:
                log("a worker did not stop")
        log(f"job-queue: {ok}/{n} put ok, {c.errors} failed")
