#!/usr/bin/env python3
"""Client workload for the ioshare end-to-end test and benchmark.

N client processes write, each at its own rate, part of their bytes to a local file and
part to an FTP server (STOR on a passive data connection, written with os.write so the
bytes show in the process's wchar like the local ones) or, with --proto http, to a WebDAV
server (HTTP PUT, chunked, a new connection every 2 s). Each client's share beta of bytes
sent to the server changes a few times during the run (piecewise constant, seeded; with
--ramp it drifts linearly from each phase's value to the next one's instead); rates
follow a common slow modulation (partly correlated clients) times a private one.

usage: workload.py --port P --clients N --duration S --seed K --dir LOCALDIR [--rate BYTES/S] [--ramp] [--proto ftp|http]
Prints one JSON line per client at the end: {"pid", "sent", "local", "phases"}.
"""
import argparse, ftplib, json, math, os, random, socket, sys, time

TICK = 0.02


class Ftp:
    """Uploads by FTP: one control connection, a passive data connection per file (STOR)."""

    def __init__(self, port, idx):
        self.idx = idx
        self.ftp = ftplib.FTP()
        self.ftp.connect("127.0.0.1", port, timeout=10)
        self.ftp.login()

    def start(self, k):
        return self.ftp.transfercmd(f"STOR up/c{self.idx}-{k}.bin")

    def write(self, data, b):
        return os.write(data.fileno(), b)

    def finish(self, data):
        data.close()
        self.ftp.voidresp()

    def quit(self):
        self.ftp.quit()


class HttpPut:
    """Uploads by HTTP PUT (a WebDAV server): a connection per file, the body in chunks
    (chunked transfer encoding), each chunk one os.write so that the bytes count in wchar."""

    def __init__(self, port, idx):
        self.port, self.idx = port, idx

    def start(self, k):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        head = (f"PUT /up/c{self.idx}-{k}.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        self._all(s, head.encode())
        return s

    def _all(self, s, b):
        v = memoryview(b)
        while len(v):
            v = v[os.write(s.fileno(), v):]

    def write(self, s, b):
        # The chunk's size line, its data and its end in one write: all of it reaches the
        # server; `sent` counts the data.
        self._all(s, b"%x\r\n" % len(b) + b + b"\r\n")
        return len(b)

    def finish(self, s):
        self._all(s, b"0\r\n\r\n")
        reply = b""
        while True:
            r = s.recv(4096)
            if not r:
                break
            reply += r
        s.close()
        if not (reply.startswith(b"HTTP/1.1 201") or reply.startswith(b"HTTP/1.1 204")):
            raise RuntimeError(f"PUT refused: {reply[:80]!r}")

    def quit(self):
        pass


def client(idx, args, t0):
    rng = random.Random(args.seed * 1000 + idx)
    # Phases: (start_s, beta); a change every phase-min..phase-max seconds.
    phases, t = [], 0.0
    while t < args.duration:
        phases.append((t, rng.choice([0.0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])))
        t += rng.uniform(args.phase_min, args.phase_max)
    base = args.rate * rng.uniform(0.5, 1.5)
    period, phi = rng.uniform(3, 11), rng.uniform(0, 6.28)
    buf = os.urandom(1 << 16)
    local = os.open(os.path.join(args.dir, f"local-{idx}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    up = Ftp(args.port, idx) if args.proto == "ftp" else HttpPut(args.port, idx)
    data, opened, n_files = None, 0.0, 0
    sent = written = 0
    debt_s = debt_l = 0.0
    k = 0
    while True:
        now = time.monotonic() - t0
        if now >= args.duration:
            break
        k_ph = max(j for j, (s, _) in enumerate(phases) if s <= now)
        beta = phases[k_ph][1]
        if args.ramp and k_ph + 1 < len(phases):
            # Drifting shares: from this phase's value to the next one's, linearly.
            (s0, b0), (s1, b1) = phases[k_ph], phases[k_ph + 1]
            beta = b0 + (b1 - b0) * (now - s0) / (s1 - s0)
        common = 1.0 + 0.6 * math.sin(2 * math.pi * now / 13.0)
        own = 1.0 + 0.7 * math.sin(2 * math.pi * now / period + phi)
        # Bursty: some ticks idle, so the columns of X differ.
        burst = 1.0 if rng.random() < 0.7 else 0.0
        amount = base * common * own * burst * TICK / 0.7
        debt_s += amount * beta
        debt_l += amount * (1 - beta)
        if data is None or now - opened > 2.0:
            if data is not None:
                up.finish(data)
            data = up.start(n_files)
            n_files += 1
            opened = now
        while debt_s >= 4096:
            n = up.write(data, buf[: int(min(debt_s, len(buf)))])
            sent += n
            debt_s -= n
        while debt_l >= 4096:
            n = os.write(local, buf[: int(min(debt_l, len(buf)))])
            written += n
            debt_l -= n
        if written > (64 << 20):
            os.lseek(local, 0, os.SEEK_SET)
        k += 1
        next_t = t0 + k * TICK + idx * 0.001
        time.sleep(max(0.0, next_t - time.monotonic()))
    if data is not None:
        up.finish(data)
    up.quit()
    os.close(local)
    # One write per line, whatever the buffering (PYTHONUNBUFFERED makes print() write the
    # line and its newline separately, and concurrent clients would interleave them).
    line = json.dumps({"pid": os.getpid(), "sent": sent, "local": written, "phases": phases})
    os.write(1, (line + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--duration", type=float, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rate", type=float, default=2e6, help="mean bytes/s per client")
    ap.add_argument("--phase-min", type=float, default=6)
    ap.add_argument("--phase-max", type=float, default=15)
    ap.add_argument("--ramp", action="store_true", help="shares drift linearly between phases")
    ap.add_argument("--proto", choices=["ftp", "http"], default="ftp",
                    help="upload by FTP (vsftpd: a process per session) or HTTP PUT (one server process)")
    args = ap.parse_args()
    t0 = time.monotonic() + 0.3
    pids = []
    for i in range(args.clients):
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(max(0.0, t0 - time.monotonic()))
                client(i, args, t0)
                os._exit(0)
            except Exception as e:  # noqa: BLE001 - report and fail the run
                print(f"client {i}: {e!r}", file=sys.stderr, flush=True)
                os._exit(1)
        pids.append(pid)
    bad = 0
    for p in pids:
        _, st = os.waitpid(p, 0)
        bad += st != 0
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
