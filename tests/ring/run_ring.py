"""Starts an MPD-like ring of daemons (ring_node.py) on 127.0.0.1 and waits for its jobs.

    python3 run_ring.py --nodes 5 --jobs 20 --base-port 0 [--loop select|poll] [--timeout 20]

Exit status: 0 when every job went round the ring and every daemon exited 0; 3 when the
ring hung (the global timeout passed: the MPD bug's symptom); 1 when a daemon failed.
Every daemon is killed when the launcher exits, whatever the reason (timeout, error,
SIGINT/SIGTERM). ``--base-port 0`` picks N consecutive free ports.
Under ``culprit record -- python3 run_ring.py …`` every daemon is traced (they are
started with the same interpreter and inherit the environment).
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def unassigned_ports():
    """Ports the kernel never picks on its own: below its ephemeral range (at most 16384)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    if low >= 1024 + 2048:
        return max(1024, low - 16384), low
    return 61000, 65535


def free_base_port(n):
    """A base port P such that P..P+n-1 are free on 127.0.0.1 right now.

    Taken outside the ephemeral range, so that no outgoing connection (a daemon's own,
    or another program's) can be given one of them before the daemons bind them."""
    lo, hi = unassigned_ports()
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        base = rng.randrange(lo, hi - n)
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
            if not ok:
                break
        if ok:
            return base
    raise SystemExit("run_ring: no %d consecutive free ports" % n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--base-port", type=int, default=0)
    ap.add_argument("--loop", choices=["select", "poll"], default="select")
    ap.add_argument("--timeout", type=float, default=20.0, help="global timeout in seconds")
    ap.add_argument("--external", type=int, action="append", default=[], metavar="ID",
                    help="do not start node ID: a test supplies it (e.g. a relay that splits "
                         "TCP writes); its exit is not waited for")
    args = ap.parse_args(argv)
    if args.nodes < 2:
        ap.error("--nodes must be at least 2")
    base = args.base_port or free_base_port(args.nodes)
    print("run_ring: base port %d" % base, flush=True)
    procs = []

    def kill_all(*_):
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def on_signal(signum, _frame):
        kill_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    start = time.monotonic()
    try:
        ids = [i for i in range(args.nodes) if i not in args.external]
        for i in ids:
            cmd = [sys.executable, os.path.join(HERE, "ring_node.py"), "--id", str(i),
                   "--nodes", str(args.nodes), "--base-port", str(base), "--jobs", str(args.jobs),
                   "--window", str(args.window), "--loop", args.loop,
                   "--max-seconds", str(args.timeout + 10)]
            procs.append(subprocess.Popen(cmd))
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            if any(c not in (None, 0) for c in codes):
                break
            if time.monotonic() - start > args.timeout:
                sys.stderr.write("run_ring: timeout after %.1f s: the ring hung (%d of %d daemons "
                                 "still running)\n" % (args.timeout, codes.count(None), len(codes)))
                return 3
            time.sleep(0.02)
        codes = [p.poll() for p in procs]
        bad = [(ids[i], c) for i, c in enumerate(codes) if c != 0]
        if bad:
            sys.stderr.write("run_ring: daemons failed: %s\n" % ", ".join(
                "node %d: %s" % (i, "running" if c is None else "exit %d" % c) for i, c in bad))
            return 1
        print("run_ring: %d jobs went round a ring of %d nodes (%s loop) in %.2f s" % (
            args.jobs, args.nodes, args.loop, time.monotonic() - start))
        return 0
    finally:
        kill_all()


if __name__ == "__main__":
    sys.exit(main())
