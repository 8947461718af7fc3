"""gearman-jobs: gearmand (C++) with two `gearman -w` workers from gearman-tools (C++; each
job runs `rev` on its data), and a client speaking Gearman's binary protocol (Python).

Port: gearmand = p[0]. The client submits N/2 foreground jobs (`SUBMIT_JOB`), waits at most
2 s for `WORK_COMPLETE`, checks the result (the data reversed), and reconnects after any
failure, as a Gearman client library does.
"""

import socket
import struct
import time

from .common import Daemons, log, ports, steps, wait_port

REQ, RES = b"\0REQ", b"\0RES"
SUBMIT_JOB, JOB_CREATED, WORK_COMPLETE, WORK_FAIL, ERROR = 7, 8, 13, 14, 19


class GearmanClient:
    def __init__(self, port):
        self.port, self.sock, self.buf, self.errors = port, None, b"", 0

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def packet(self):
        while len(self.buf) < 12 or len(self.buf) < 12 + struct.unpack(">I", self.buf[8:12])[0]:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        magic, kind, size = struct.unpack(">4sII", self.buf[:12])
        if magic != RES:
            raise ValueError(f"bad magic {magic!r}")
        body, self.buf = self.buf[12:12 + size], self.buf[12 + size:]
        return kind, body

    def job(self, fn, unique, data):
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
                self.buf = b""
            body = fn + b"\0" + unique + b"\0" + data
            self.sock.sendall(REQ + struct.pack(">II", SUBMIT_JOB, len(body)) + body)
            kind, handle = self.packet()
            if kind != JOB_CREATED:
                raise ValueError(f"expected JOB_CREATED, got packet {kind}")
            while True:
                kind, body = self.packet()
                if kind == WORK_COMPLETE and body.startswith(handle + b"\0"):
                    return body[len(handle) + 1:]
                if kind in (WORK_FAIL, ERROR):
                    raise ValueError(f"job failed (packet {kind})")
        except (OSError, ConnectionError, ValueError, struct.error) as e:
            self.errors += 1
            log(f"job failed: {e!r}")
            self.close()
            return None


def run(tmp, n):
    port = ports("gearman-jobs")[0]
    with Daemons(tmp) as d:
        p = d.start(
            "gearmand",
            ["gearmand", "--listen", "127.0.0.1", "--port", str(port), "--threads", "1",
             "--log-file", "stderr", "--verbose", "WARNING"],
        )
        wait_port(port, p)
        for i in (1, 2):
            d.start(f"worker{i}", ["gearman", "-w", "-f", "rev", "-h", "127.0.0.1", "-p", str(port), "--", "rev"])
        time.sleep(0.5)
        c = GearmanClient(port)
        ok = 0
        jobs = max(1, n // 2)
        for i in steps(jobs):
            data = f"job {i} " + "r" * (i % 30)
            out = c.job(b"rev", f"u{i}".encode(), data.encode())
            if out is not None and out.rstrip(b"\n") == data[::-1].encode():
                ok += 1
            elif out is not None:
                log(f"job {i}: wrong result {out[:40]!r}")
        c.close()
        log(f"gearman-jobs: {ok}/{jobs} jobs ok, {c.errors} failed")
