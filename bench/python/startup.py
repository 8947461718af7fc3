#!/usr/bin/env python3
"""What the no-install bootstrap costs each Python process at start-up (issue 17).

    python3 bench/python/startup.py [--python PATH] [--runs 30]

Times ``python -c pass`` (fork to exit, wall; median and min of --runs, configurations
interleaved) with: nothing; the bootstrap copy on ``PYTHONPATH`` but no ``CULPRIT_POOL``
(a process outside ``culprit record``: sitecustomize chains the program's own and returns);
the bootstrap starting the tracer into the stand-in libtrace (the extension already in the
cache: ``stat`` + load + start, and the tracing of the rest of the interpreter's start-up);
the same with the extension missing, i.e. built on first use (one run, after which it is
cached). Uses run.py's set-up (bootstrap copy under --work, stand-in libtrace).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def once(cmd, env):
    t0 = time.perf_counter_ns()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter_ns() - t0) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--work", default="/tmp/culprit-bench-python")
    a = ap.parse_args()
    py, _venv, so, _vz, ver, boot = run.setup(a.work, a.python)
    shm = "/dev/shm/culprit-bench-startup"
    shutil.rmtree(shm, ignore_errors=True)
    os.makedirs(shm)
    base = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "CULPRIT_POOL", "PYTHONPATH") and not k.startswith("CULPRIT_PY")}
    traced = dict(base, PYTHONPATH=boot, LD_PRELOAD=so, CULPRIT_POOL=os.path.join(shm, "pool"),
                  STANDIN_OUT=shm)
    configs = {
        "python -c pass": base,
        "bootstrap on PYTHONPATH, not recording": dict(base, PYTHONPATH=boot),
        "bootstrap starting the tracer (extension cached)": traced,
    }
    cmd = [py, "-c", "pass"]
    times = {k: [] for k in configs}
    for _ in range(a.runs):
        for k, env in configs.items():
            times[k].append(once(cmd, env))
            for f in os.listdir(shm):
                os.unlink(os.path.join(shm, f))
    ext = os.path.join(os.path.dirname(boot), "ext")
    for f in os.listdir(ext):
        if f.startswith("_native"):
            os.unlink(os.path.join(ext, f))
    first = once(cmd, traced)
    shutil.rmtree(shm, ignore_errors=True)
    plain = statistics.median(times["python -c pass"])
    print("CPython %s start-up (`python -c pass`, %d runs, wall ms): load %s" % (
        ver, a.runs, " ".join(open("/proc/loadavg").read().split()[:3])))
    print()
    print("| configuration | median ms | min ms | + over plain (median) |")
    print("|---|---|---|---|")
    for k, t in times.items():
        m = statistics.median(t)
        print("| %s | %.1f | %.1f | %+.1f |" % (k, m, min(t), m - plain))
    print("| first start with no extension in the cache (built then) | %.0f | | %+.0f |" % (first, first - plain))


if __name__ == "__main__":
    main()
