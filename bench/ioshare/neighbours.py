#!/usr/bin/env python3
"""Unrelated processes doing IO on the same machine as a file server and its clients, for
the ioshare benchmark (`bench/src/bin/ioshare.rs --neighbours N`): none of them talks to
the server, so each one's true share is 0.

- burst writers: a burst of 0.5-8 MB in 64 KiB writes, then idle for 0.2-4 s (a job
  writing checkpoints, a package being unpacked);
- log writers: a line of 80-300 bytes every 5-100 ms;
- installers: many small files (4-200 KB) written at once, then deleted, then idle;
- a compiler: `gcc -O1 -c` of a generated C file in a loop (cc1 and as come and go);
- short-lived writers: every 0.3-2 s a `dd` that writes 1-16 MB and exits.

N long-lived processes (the kinds in turn: burst, log, installer), plus the compiler loop
and the dd spawner. Runs until SIGTERM (or --duration), then removes its files. Seeded.

usage: neighbours.py --dir DIR --procs N [--seed K] [--duration S]
"""
import argparse, os, random, signal, subprocess, sys, time

BUF = os.urandom(1 << 16)
CAP = 32 << 20  # a file is rewritten from its start past this size


def burst(path, rng, stop):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    pos = 0
    while not stop():
        left = int(rng.uniform(0.5, 8) * 1e6)
        while left > 0:
            pos += os.write(fd, BUF[: min(left, len(BUF))])
            left -= len(BUF)
        if pos > CAP:
            os.lseek(fd, 0, os.SEEK_SET)
            pos = 0
        time.sleep(rng.uniform(0.2, 4.0))
    os.close(fd)


def log(path, rng, stop):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    n = 0
    while not stop():
        line = f"{time.time():.6f} worker {rng.randrange(64)} " + "x" * rng.randrange(60, 280) + "\n"
        n += os.write(fd, line.encode())
        if n > CAP // 4:
            os.ftruncate(fd, 0)
            n = 0
        time.sleep(rng.uniform(0.005, 0.1))
    os.close(fd)


def installer(path, rng, stop):
    os.makedirs(path, exist_ok=True)
    while not stop():
        names = []
        for k in range(rng.randrange(20, 120)):
            p = os.path.join(path, f"f{k}")
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            left = int(rng.uniform(4e3, 2e5))
            while left > 0:
                os.write(fd, BUF[: min(left, len(BUF))])
                left -= len(BUF)
            os.close(fd)
            names.append(p)
        for p in names:
            os.unlink(p)
        time.sleep(rng.uniform(0.5, 5.0))


KINDS = [burst, log, installer]


def compiler_source(path):
    with open(path, "w") as f:
        for i in range(400):
            f.write(f"double f{i}(double x) {{ double s = 0; for (int k = 0; k < {i + 3}; k++) s += x * k / (k + {i + 1}); return s; }}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--procs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=3600)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    children = []
    for i in range(args.procs):
        pid = os.fork()
        if pid == 0:
            rng = random.Random(args.seed * 7919 + i)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            end = time.monotonic() + args.duration
            try:
                KINDS[i % len(KINDS)](os.path.join(args.dir, f"n{i}"), rng, lambda: time.monotonic() > end)
            finally:
                os._exit(0)
        children.append(pid)
    src = os.path.join(args.dir, "unit.c")
    compiler_source(src)
    cc = subprocess.Popen(["sh", "-c", f"while :; do gcc -O1 -c {src} -o {args.dir}/unit.o; done"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    rng = random.Random(args.seed * 7919 + 999)
    end = time.monotonic() + args.duration
    k = 0
    while not stopping and time.monotonic() < end:
        subprocess.run(["dd", "if=/dev/zero", f"of={args.dir}/dd{k % 4}", "bs=64k",
                        f"count={rng.randrange(16, 256)}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        k += 1
        time.sleep(rng.uniform(0.3, 2.0))
    os.killpg(cc.pid, signal.SIGTERM)  # the loop and the gcc it runs (its own group)
    cc.wait()
    for p in children:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in children:
        os.waitpid(p, 0)
    subprocess.run(["rm", "-rf", args.dir])


if __name__ == "__main__":
    sys.exit(main())
