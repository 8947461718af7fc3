#!/usr/bin/env python3
"""Python tracing cost per event: Culprit's shim next to a no-op ``sys.setprofile``
function and VizTracer, in one run (the method of ../shared/bench-anchors).

    python3 bench/python/run.py [--n 25] [--rounds 7] [--work /tmp/culprit-bench-python]

Workload: ``fib.py`` (recursive fib(N), the anchors' src/fib.py): one event = one entry or
one exit of ``fib``, 2·(2·F(N+1)−1) per run, exact. Every round runs every configuration
once in a shuffled order;

    ns/event = (t_traced − median(t_plain)) / events

over the whole process (wall, fork to exit: start-up, tracing of the interpreter's own
start-up, trace and JSON writing) and over the workload's own timer around fib(N)
("work": the hot path). Rows:

* ``sys.setprofile(no-op Python function)`` — the floor of any Python-level profiler;
* ``culprit_trace`` — the C callback (inline append into the thread's sub-buffer),
  recording into the stand-in libtrace (python-hook/tests/standin.c: the real C ABI and
  writer protocol into tmpfs-backed mapped files) and, when ``culprit`` and libtrace.so
  are built (``--culprit PATH``), under ``culprit record`` with the real pool and readers;
* ``culprit_trace, CULPRIT_PY_NOFAST=1`` — every entry through ``culprit_emit_*``;
* ``viztracer --quiet`` with ``--tracer_entries`` raised so nothing is dropped.

The number of recorded ``fib`` calls and returns is checked against the formula for the
stand-in rows. Needs the shim installed (``pip install ./python-hook``); VizTracer is
installed into a venv under --work on first use.
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIB = os.path.join(HERE, "fib.py")


def calls(n):
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1


def sh(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:]))
    return r.stdout


def setup(work):
    os.makedirs(work, exist_ok=True)
    venv = os.path.join(work, "venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        sh([sys.executable, "-m", "venv", "--system-site-packages", venv])
    if not os.path.exists(os.path.join(venv, "bin", "viztracer")):
        sh([py, "-m", "pip", "install", "-q", "viztracer"])
    so = os.path.join(work, "libstandin.so")
    src = os.path.join(REPO, "python-hook", "tests", "standin.c")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(src):
        sh(["cc", "-O2", "-shared", "-fPIC", "-pthread", "-I", os.path.join(REPO, "tracer-preload", "include"),
            src, "-o", so])
    sh([py, "-c", "import culprit_trace._native"])
    vz = sh([py, "-c", "import viztracer; print(viztracer.__version__)"]).strip()
    return py, venv, so, vz


def run_one(cmd, env):
    t0 = time.perf_counter_ns()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t1 = time.perf_counter_ns()
    if r.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-3000:]))
    m = re.search(r"WORK_NS=(\d+)", r.stdout)
    c = re.search(r"WORK_CPU_NS=(\d+)", r.stdout)
    return t1 - t0, int(m.group(1)), int(c.group(1))


def count_standin(trace_dir):
    sys.path.insert(0, os.path.join(REPO, "python-hook", "tests"))
    import standin_decode
    per = standin_decode.named(trace_dir)
    c = r = 0
    for evs in per.values():
        for k, name in evs:
            if name == "__main__.fib":
                c += k == "call"
                r += k == "return"
    return c, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--work", default="/tmp/culprit-bench-python")
    ap.add_argument("--culprit", default=None, help="path of the culprit binary (real pool row)")
    a = ap.parse_args()
    py, venv, so, vz_version = setup(a.work)
    n = a.n
    events = 2 * calls(n)
    shm = "/dev/shm/culprit-bench-python"
    shutil.rmtree(shm, ignore_errors=True)
    os.makedirs(shm)
    base_env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CULPRIT_POOL")}

    def standin_env(extra=None):
        e = dict(base_env, STANDIN_OUT=os.path.join(shm, "t"), CULPRIT_POOL=os.path.join(shm, "pool"),
                 LD_PRELOAD=so)
        e.update(extra or {})
        return e

    configs = {
        "plain": ([py, FIB, "plain", str(n)], lambda: base_env, None),
        "setprofile": ([py, FIB, "setprofile", str(n)], lambda: base_env, None),
        "culprit": ([py, FIB, "plain", str(n)], standin_env, "standin"),
        "culprit_nofast": ([py, FIB, "plain", str(n)], lambda: standin_env({"CULPRIT_PY_NOFAST": "1"}),
                           "standin"),
        "culprit_frames": ([py, FIB, "plain", str(n)], lambda: standin_env({"CULPRIT_PY_MODE": "frames"}),
                           "standin"),
        # The stand-in without STANDIN_OUT is disabled: the callback is installed and
        # returns at once — what CPython 3.11's profile API costs by itself.
        "c_noop": ([py, FIB, "plain", str(n)],
                   lambda: dict(base_env, CULPRIT_POOL=os.path.join(shm, "pool"), LD_PRELOAD=so), None),
        "viztracer": ([os.path.join(venv, "bin", "viztracer"), "--quiet", "--tracer_entries",
                       str(calls(n) + 1000), "-o", os.path.join(shm, "vz.json"), FIB, "plain", str(n)],
                      lambda: base_env, None),
    }
    if a.culprit:
        configs["culprit_record"] = ([a.culprit, "record", "-o", os.path.join(shm, "rec"), "--", py, FIB,
                                      "plain", str(n)], lambda: base_env, None)
        configs["culprit_record_frames"] = (
            [a.culprit, "record", "-o", os.path.join(shm, "rec"), "--", py, FIB, "plain", str(n)],
            lambda: dict(base_env, CULPRIT_PY_MODE="frames"), None)
    # Check the recorded event count of every Culprit row once before timing.
    for k in ("culprit", "culprit_nofast", "culprit_frames"):
        os.makedirs(os.path.join(shm, "t"))
        run_one(configs[k][0], configs[k][1]())
        got = count_standin(os.path.join(shm, "t"))
        ok = got == (calls(n), calls(n))
        print("[%s] %s recorded fib calls/returns: %d/%d, formula %d" % (
            "ok" if ok else "MISMATCH", k, got[0], got[1], calls(n)))
        if not ok:
            raise SystemExit(1)
        shutil.rmtree(os.path.join(shm, "t"))
    for k in ("culprit_record", "culprit_record_frames"):
        if k not in configs:
            continue
        run_one(configs[k][0], configs[k][1]())
        out = subprocess.run([a.culprit, "dump", "--json", os.path.join(shm, "rec")], stdout=subprocess.PIPE,
                             text=True, check=True).stdout
        c = out.count('"kind":"py_call","name":"__main__.fib"')
        r = out.count('"kind":"py_return","name":"__main__.fib"')
        ok = (c, r) == (calls(n), calls(n))
        print("[%s] %s: culprit dump shows fib calls/returns %d/%d, formula %d" % (
            "ok" if ok else "MISMATCH", k, c, r, calls(n)))
        shutil.rmtree(os.path.join(shm, "rec"))
        if not ok:
            raise SystemExit(1)

    results = {k: [] for k in configs}
    for rnd in range(a.rounds):
        order = list(configs)
        random.shuffle(order)
        for k in order:
            cmd, env, kind = configs[k]
            if kind == "standin":
                os.makedirs(os.path.join(shm, "t"))
            results[k].append(run_one(cmd, env()))
            if kind == "standin":
                shutil.rmtree(os.path.join(shm, "t"))
            for f in os.listdir(shm):
                p = os.path.join(shm, f)
                if os.path.isdir(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
        sys.stderr.write("round %d/%d done\n" % (rnd + 1, a.rounds))
    shutil.rmtree(shm, ignore_errors=True)

    plain_wall = statistics.median(w for w, _, _ in results["plain"])
    plain_work = statistics.median(x for _, x, _ in results["plain"])
    plain_cpu = statistics.median(c for _, _, c in results["plain"])

    def per_ev(k):
        wall = [(w - plain_wall) / events for w, _, _ in results[k]]
        work = [(x - plain_work) / events for _, x, _ in results[k]]
        cpu = [(c - plain_cpu) / events for _, _, c in results[k]]
        return (statistics.median(wall), min(wall), max(wall), statistics.median(work),
                statistics.median(cpu), min(cpu), max(cpu))

    names = {
        "setprofile": "sys.setprofile(no-op Python function)",
        "culprit": "culprit_trace (C callback, inline append; stand-in libtrace)",
        "culprit_nofast": "culprit_trace, CULPRIT_PY_NOFAST=1 (every entry via culprit_emit_*)",
        "culprit_frames": "culprit_trace, CULPRIT_PY_MODE=frames (PEP 523; no builtins)",
        "c_noop": "PyEval_SetProfile C callback returning at once (the API's own cost)",
        "culprit_record": "`culprit record -- python3 fib.py` (profile mode; real libtrace.so, pool, readers)",
        "culprit_record_frames": "`culprit record` with CULPRIT_PY_MODE=frames",
        "viztracer": "viztracer %s --quiet (JSON written at exit)" % vz_version,
    }
    vz = per_ev("viztracer")
    print()
    print("Python fib(%d): %d events/run, %d rounds; plain: %.1f ns/ev work CPU, %.1f ns/ev work wall; "
          "load after: %s" % (n, events, a.rounds, plain_cpu / events, plain_work / events,
                              " ".join(open("/proc/loadavg").read().split()[:3])))
    print()
    print("| tracer | hot path ns/ev (work CPU) median | min | max | ÷ VizTracer | hot path ns/ev (work wall) | "
          "whole process ns/ev (wall) median | min | max | ÷ VizTracer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in configs:
        if k == "plain":
            continue
        m, lo, hi, wk, cm, clo, chi = per_ev(k)
        print("| %s | %.1f | %.1f | %.1f | **%.2f** | %.1f | %.1f | %.1f | %.1f | **%.3f** |" % (
            names[k], cm, clo, chi, cm / vz[4], wk, m, lo, hi, m / vz[0]))


if __name__ == "__main__":
    main()
