#!/usr/bin/env python3
"""Python tracing cost per event: Culprit's shim next to a no-op ``sys.setprofile``
function and VizTracer, on one interpreter, in one run (the method of ../shared/bench-anchors).

    python3 bench/python/run.py [--python PATH] [--n 25] [--rounds 7] [--culprit target/release/culprit]

Workload: ``fib.py`` (recursive fib(N), the anchors' src/fib.py): one event = one entry or
one exit of ``fib``, 2·(2·F(N+1)−1) per run, exact. Every round runs every configuration
once in a shuffled order;

    ns/event = (t_traced − median(t_plain)) / events

over the whole process (wall, fork to exit: start-up, tracing of the interpreter's own
start-up, trace and JSON writing) and over the workload's own timer around fib(N)
("work": the hot path). Rows:

* ``sys.setprofile(no-op Python function)`` — the floor of any Python-level profiler;
* ``culprit_trace`` in its default mode (monitor on CPython 3.12+, frames on 3.11, profile
  before) and in each other mode the interpreter has, recording into the stand-in libtrace
  (python-hook/tests/standin.c: the real C ABI and writer protocol into tmpfs-backed mapped
  files) and, with ``--culprit PATH``, under ``culprit record`` with the real pool and readers;
* the API floors: the shim's callback installed but returning at once (stand-in disabled);
* ``viztracer --quiet`` with ``--tracer_entries`` raised so nothing is dropped.

Nothing is installed into the interpreter: the shim is found the way ``culprit record``
provides it (a bootstrap copy on ``PYTHONPATH``, the extension built for the interpreter's ABI
under --work). The number of recorded ``fib`` calls and returns is checked against the formula
for every Culprit row. VizTracer is installed into a venv of the interpreter under --work on
first use.
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


def setup(work, python):
    os.makedirs(work, exist_ok=True)
    ver = sh([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()
    venv = os.path.join(work, "venv-" + ver)
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        sh([python, "-m", "venv", venv])
    if not os.path.exists(os.path.join(venv, "bin", "viztracer")):
        sh([py, "-m", "pip", "install", "-q", "viztracer"])
    so = os.path.join(work, "libstandin.so")
    src = os.path.join(REPO, "python-hook", "tests", "standin.c")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(src):
        sh(["cc", "-O2", "-shared", "-fPIC", "-pthread", "-I", os.path.join(REPO, "tracer-preload", "include"),
            src, "-o", so])
    # The bootstrap copy, laid out as python-hook's cache (boot/, src/, ext/), fresh each run.
    root = os.path.join(work, "shim")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(REPO, "python-hook", "culprit_trace"), os.path.join(root, "boot", "culprit_trace"),
                    ignore=shutil.ignore_patterns("__pycache__", "_native*"))
    shutil.copy(os.path.join(REPO, "python-hook", "boot", "sitecustomize.py"), os.path.join(root, "boot"))
    os.makedirs(os.path.join(root, "src"))
    shutil.copy(os.path.join(REPO, "python-hook", "src", "native.c"), os.path.join(root, "src"))
    shutil.copy(os.path.join(REPO, "tracer-preload", "include", "culprit.h"), os.path.join(root, "src"))
    sh([py, "-S", os.path.join(root, "boot", "culprit_trace", "_bootstrap.py")])
    vz = sh([py, "-c", "import viztracer; print(viztracer.__version__)"]).strip()
    return py, venv, so, vz, ver, os.path.join(root, "boot")


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
    ap.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    ap.add_argument("--work", default="/tmp/culprit-bench-python")
    ap.add_argument("--culprit", default=None, help="path of the culprit binary (real pool rows)")
    a = ap.parse_args()
    py, venv, so, vz_version, ver, boot = setup(a.work, a.python)
    minor = int(ver.split(".")[1])
    default_mode = "monitor" if minor >= 12 else "frames" if minor == 11 else "profile"
    n = a.n
    events = 2 * calls(n)
    shm = "/dev/shm/culprit-bench-python"
    shutil.rmtree(shm, ignore_errors=True)
    os.makedirs(shm)
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("LD_PRELOAD", "CULPRIT_POOL", "PYTHONPATH") and not k.startswith("CULPRIT_PY")}
    shim_env = dict(base_env, PYTHONPATH=boot)

    def standin_env(extra=None):
        e = dict(shim_env, STANDIN_OUT=os.path.join(shm, "t"), CULPRIT_POOL=os.path.join(shm, "pool"),
                 LD_PRELOAD=so)
        e.update(extra or {})
        return e

    fib = [py, FIB, "plain", str(n)]
    configs = {
        "plain": (fib, lambda: base_env, None),
        "setprofile": ([py, FIB, "setprofile", str(n)], lambda: base_env, None),
        "culprit": (fib, standin_env, "standin"),
    }
    other_modes = [m for m in ("profile", "frames", "monitor") if m != default_mode
                   and (m == "profile" or (m == "frames" and minor == 11) or (m == "monitor" and minor >= 12))]
    for m in other_modes:
        configs["culprit_" + m] = (fib, lambda m=m: standin_env({"CULPRIT_PY_MODE": m}), "standin")
    if minor >= 12:
        configs["culprit_monitor_builtins"] = (
            fib, lambda: standin_env({"CULPRIT_PY_MODE": "monitor", "CULPRIT_PY_BUILTINS": "1"}), "standin")
    configs["culprit_sampled"] = (fib, lambda: standin_env({"CULPRIT_CLOCK": "sampled"}), "standin")
    configs["culprit_nofast"] = (fib, lambda: standin_env({"CULPRIT_PY_NOFAST": "1"}), "standin")
    # The stand-in without STANDIN_OUT is disabled: the callback is installed and returns at
    # once — what the interpreter's API costs by itself.
    noop = dict(shim_env, CULPRIT_POOL=os.path.join(shm, "pool"), LD_PRELOAD=so)
    configs["c_noop"] = (fib, lambda: dict(noop, CULPRIT_PY_MODE=default_mode), None)
    if default_mode != "profile":
        configs["c_noop_profile"] = (fib, lambda: dict(noop, CULPRIT_PY_MODE="profile"), None)
    configs["viztracer"] = ([os.path.join(venv, "bin", "viztracer"), "--quiet", "--tracer_entries",
                             str(calls(n) + 1000), "-o", os.path.join(shm, "vz.json"), FIB, "plain", str(n)],
                            lambda: base_env, None)
    if a.culprit:
        rec = [a.culprit, "record", "-o", os.path.join(shm, "rec"), "--"] + fib
        configs["culprit_record"] = (rec, lambda: base_env, None)
        configs["culprit_record_profile"] = (rec, lambda: dict(base_env, CULPRIT_PY_MODE="profile"), None)
        configs["culprit_record_sampled"] = (rec, lambda: dict(base_env, CULPRIT_CLOCK="sampled"), None)
    # Check the recorded event count of every Culprit row once before timing.
    for k in [k for k, c in configs.items() if c[2] == "standin"]:
        os.makedirs(os.path.join(shm, "t"))
        run_one(configs[k][0], configs[k][1]())
        got = count_standin(os.path.join(shm, "t"))
        ok = got == (calls(n), calls(n))
        print("[%s] %s recorded fib calls/returns: %d/%d, formula %d" % (
            "ok" if ok else "MISMATCH", k, got[0], got[1], calls(n)))
        if not ok:
            raise SystemExit(1)
        shutil.rmtree(os.path.join(shm, "t"))
    for k in ("culprit_record", "culprit_record_profile", "culprit_record_sampled"):
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
        "culprit": "culprit_trace, default mode (%s; stand-in libtrace)" % default_mode,
        "culprit_profile": "culprit_trace, CULPRIT_PY_MODE=profile (PyEval_SetProfile; builtins)",
        "culprit_frames": "culprit_trace, CULPRIT_PY_MODE=frames (PEP 523; no builtins)",
        "culprit_monitor": "culprit_trace, CULPRIT_PY_MODE=monitor (sys.monitoring; no builtins)",
        "culprit_monitor_builtins": "culprit_trace, monitor + CULPRIT_PY_BUILTINS=1 (builtins too)",
        "culprit_sampled": "culprit_trace, default mode, CULPRIT_CLOCK=sampled (rdtsc every 16th entry)",
        "culprit_record_sampled": "`culprit record` with CULPRIT_CLOCK=sampled",
        "culprit_nofast": "culprit_trace, default mode, CULPRIT_PY_NOFAST=1 (every entry via culprit_emit_*)",
        "c_noop": "the default mode's callback returning at once (the API's own cost)",
        "c_noop_profile": "PyEval_SetProfile C callback returning at once (the API's own cost)",
        "culprit_record": "`culprit record -- python fib.py` (default mode; real libtrace.so, pool, readers)",
        "culprit_record_profile": "`culprit record` with CULPRIT_PY_MODE=profile",
        "viztracer": "viztracer %s --quiet (JSON written at exit)" % vz_version,
    }
    vz = per_ev("viztracer")
    print()
    print("CPython %s, Python fib(%d): %d events/run, %d rounds; plain: %.1f ns/ev work CPU, %.1f ns/ev work "
          "wall; load after: %s" % (ver, n, events, a.rounds, plain_cpu / events, plain_work / events,
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
