#!/usr/bin/env python3
"""Culprit's public fault suite: does the localizer put the root cause first on unmodified
third-party distributed programs?

    python3 bench/localize/run.py [--out DIR] [--normal 3] [--systems a,b] [--reuse]
                                  [--scores evidence,paper,rarest,longest,ochiai]

For each system of `systems.py` (memcached behind twemproxy, nginx behind haproxy, a
beanstalkd work queue, a Pyro5 RPC system) it records `--normal` runs that go right, learns
a model from them, records one more normal run (the **control**) and one run per fault
injected with `culprit record --inject` (a connection reset, a corrupted frame that
desynchronizes the protocol, a delay past the peer's timeout, the connection closed under
the peer), then ranks every trial with every score of `culprit rank --score`.

Ground truth comes from the trace: the units that hold an injection record. A case is a
*hit at rank r* when the first unit, in ranking order, that holds an injection — or that
belongs to the process the fault was injected into and started at or after the injection
(what the fault did next in its own process) — is the r-th. Printed per case: that rank
for every score, the number of units, and the time `culprit rank --json` took; then per
score the top-1 and top-3 rates over all fault cases, and for the controls the highest
score any unit of a fault-free run reached against the lowest score a faulty unit was
ranked with.

Every run is bounded in time (`--run-timeout`, default 90 s) and uses loopback only. Set-up
(Debian: memcached nutcracker haproxy nginx-light beanstalkd; PyPI: Pyro5) is done by
`bench/localize/setup.sh`, which this script runs first. Not part of the default test run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import systems  # noqa: E402

F, M1, M2 = systems.PORTS["memcache-proxy"]
H, B1, B2 = systems.PORTS["http-proxy"]
Q = systems.PORTS["job-queue"][0]
NS, S1, S2 = systems.PORTS["pyro-rpc"]

# Per system: (fault name, kind, --inject SPEC). Injections hit one call, mid-run.
FAULTS = {
    "memcache-proxy": [
        ("reset", "reset", f"read:errno=ECONNRESET,exe=*nutcracker,peer-port={M1},nth=30,count=1"),
        ("corrupt-reply", "corrupt", f"read:corrupt=4,exe=*nutcracker,peer-port={M1},nth=30,count=1"),
        ("slow-backend", "delay", f"sendmsg:delay=1s,exe=*memcached,local-port={M1},nth=30,count=1"),
        ("backend-drops", "close", f"read:close,exe=*memcached,local-port={M2},nth=30,count=1"),
    ],
    "http-proxy": [
        ("reset", "reset", f"recv:errno=ECONNRESET,exe=*haproxy,peer-port={B1},nth=20,count=1"),
        ("corrupt-reply", "corrupt", f"recv:corrupt=6,exe=*haproxy,peer-port={B1},nth=20,count=1"),
        ("slow-backend", "delay", f"recv:delay=1s,exe=*nginx,local-port={B2},nth=20,count=1"),
        ("backend-drops", "close", f"recv:close,exe=*nginx,local-port={B2},nth=20,count=1"),
    ],
    "job-queue": [
        ("reset", "reset", "read:errno=ECONNRESET,exe=*beanstalkd,nth=100,count=1"),
        ("corrupt-command", "corrupt", "read:corrupt=3,exe=*beanstalkd,nth=100,count=1"),
        ("stall", "delay", "read:delay=3500ms,exe=*beanstalkd,nth=100,count=1"),
        ("server-drops", "close", "read:close,exe=*beanstalkd,nth=100,count=1"),
    ],
    "pyro-rpc": [
        ("reset", "reset", "recv:errno=ECONNRESET,argv=*pyro-server --name 1*,nth=30,count=1"),
        ("corrupt-header", "corrupt", "recv:corrupt=4,argv=*pyro-server --name 1*,nth=30,count=1"),
        ("slow-reply", "delay", "send:delay=1500ms,argv=*pyro-server --name 2*,nth=20,count=1"),
        ("server-drops", "close", "recv:close,argv=*pyro-server --name 2*,nth=30,count=1"),
    ],
}

SCORES = ["evidence", "paper", "rarest", "longest", "ochiai"]


def sh(argv, timeout, log=None, env=None):
    t0 = time.monotonic()
    with open(log or os.devnull, "wb") as out:
        r = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, env=env)
    return r.returncode, time.monotonic() - t0


def record(a, system, out, inject=None):
    if a.reuse and os.path.isdir(out):
        return
    shutil.rmtree(out, ignore_errors=True)
    argv = [a.culprit, "record", "-o", out]
    if inject:
        argv += ["--inject", inject]
    argv += ["--", sys.executable, os.path.join(HERE, "systems.py"), system, "--dir", out + ".scratch", "--requests", str(a.requests)]
    rc, dt = sh(argv, a.run_timeout, out + ".log")
    shutil.rmtree(out + ".scratch", ignore_errors=True)
    if rc != 0:
        print(f"run: {out}: culprit record exited {rc} (see {out}.log)", file=sys.stderr)
    print(f"  recorded {os.path.basename(out)} in {dt:.1f} s", file=sys.stderr, flush=True)


def rank(a, model, trial, score):
    argv = [a.culprit_rank or a.culprit, "rank", "--model", model, trial, "--json"]
    if score != "paper-old":
        argv += ["--score", score]
    t0 = time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"culprit rank {trial} --score {score}: {r.stderr.decode(errors='replace')}")
    return json.loads(r.stdout), dt


def judge(units):
    """(rank of the first faulty unit (1-based) or None, its score, the faulty unit ids)."""
    inj = [u for u in units if u["injections"]]
    if not inj:
        return None, None, set()
    first = min(inj, key=lambda u: u["t_start_unix_ns"])
    pids = {(u["host"], u["pid"]) for u in inj}
    ok = set()
    for u in units:
        if u["injections"] or ((u["host"], u["pid"]) in pids and u["t_start_unix_ns"] >= first["t_start_unix_ns"]):
            ok.add(u["id"])
    for i, u in enumerate(units):
        if u["id"] in ok:
            return i + 1, u["score"], ok
    return None, None, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-localize"))
    ap.add_argument("--normal", type=int, default=3, help="normal runs learned from, per system")
    ap.add_argument("--requests", type=int, default=120, help="client requests per run")
    ap.add_argument("--systems", default=",".join(systems.SYSTEMS))
    ap.add_argument("--scores", default=",".join(SCORES))
    ap.add_argument("--culprit", default=os.path.join(ROOT, "target", "release", "culprit"))
    ap.add_argument("--culprit-rank", help="another culprit binary to rank with (old/new comparisons)")
    ap.add_argument("--run-timeout", type=float, default=90)
    ap.add_argument("--reuse", action="store_true", help="keep traces already recorded in --out")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument("--no-setup", action="store_true")
    a = ap.parse_args()
    if not a.no_setup:
        subprocess.run(["bash", os.path.join(HERE, "setup.sh")], check=True)
    if not os.access(a.culprit, os.X_OK):
        sys.exit(f"run: {a.culprit} not built (cargo build --release -p cli -p tracer-preload)")
    scores = a.scores.split(",")
    cases = []
    for system in a.systems.split(","):
        d = os.path.join(a.out, system)
        os.makedirs(d, exist_ok=True)
        print(f"== {system}", file=sys.stderr, flush=True)
        normals = [os.path.join(d, f"normal{i}") for i in range(1, a.normal + 1)]
        for n in normals:
            record(a, system, n)
        model = os.path.join(d, "model.cpm")
        # Learned again even with --reuse: the model file belongs to the binary that ranks.
        rc, _ = sh([a.culprit, "learn", *normals, "-o", model], 600, model + ".log")
        if rc != 0:
            sys.exit(f"run: culprit learn failed for {system} (see {model}.log)")
        trials = [("control", "none", None)] + FAULTS[system]
        for name, kind, spec in trials:
            trial = os.path.join(d, name)
            record(a, system, trial, spec)
            case = {"system": system, "case": name, "kind": kind, "inject": spec, "scores": {}}
            for s in scores:
                units, dt = rank(a, model, trial, s)
                r, sc, ok = judge(units)
                top = units[0]["score"] if units else None
                case["units"] = len(units)
                case["scores"][s] = {"rank": r, "score": sc, "top_score": top, "seconds": dt,
                                     "top_id": units[0]["id"] if units else None,
                                     "top_why": units[0]["why"][:2] if units else []}
                if kind != "none" and not ok:
                    case["note"] = "no injection record in the trial"
            cases.append(case)
            print_case(case, scores)
    print_totals(cases, scores)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cases, f, indent=1)


def print_case(c, scores):
    cells = []
    for s in scores:
        x = c["scores"][s]
        if c["kind"] == "none":
            cells.append(f"{s}: max {x['top_score']:.3f}")
        else:
            cells.append(f"{s}: {x['rank'] if x['rank'] else '-'}")
    t = c["scores"][scores[0]]["seconds"]
    print(f"{c['system']:15} {c['case']:16} {c['units']:6} units  {t:6.2f} s  " + "  ".join(cells), flush=True)


def print_totals(cases, scores):
    faults = [c for c in cases if c["kind"] != "none"]
    print(f"\n{len(faults)} fault cases, {len(cases) - len(faults)} controls")
    for s in scores:
        ranks = [c["scores"][s]["rank"] for c in faults]
        top1 = sum(1 for r in ranks if r == 1)
        top3 = sum(1 for r in ranks if r is not None and r <= 3)
        faulty = [c["scores"][s]["score"] for c in faults if c["scores"][s]["score"] is not None]
        ctrl = [c["scores"][s]["top_score"] for c in cases if c["kind"] == "none" and c["scores"][s]["top_score"] is not None]
        print(
            f"{s:9} top-1 {top1}/{len(faults)} ({100 * top1 / max(1, len(faults)):.0f} %)  "
            f"top-3 {top3}/{len(faults)} ({100 * top3 / max(1, len(faults)):.0f} %)  "
            f"controls' highest {max(ctrl) if ctrl else float('nan'):.3f} vs faulty units' lowest "
            f"{min(faulty) if faulty else float('nan'):.3f}"
        )


if __name__ == "__main__":
    main()
