#!/usr/bin/env python3
"""Culprit's public fault suite: does the localizer put the root cause first on unmodified
third-party distributed programs, on systems nothing was tuned on?

    python3 bench/localize/run.py --half tuning|validation --json F [--systems a,b]
                                  [--reuse] [--normal 3] [--out DIR] [--check | --record-only]

The systems (`systems.py`, one module each in `sut/`) are split in `split.json` into a
**tuning** half — every constant of the method is chosen on it — and a **validation** half,
run only on a frozen method and reported per system. For each system of the half (or of
`--systems`) this records `--normal` runs that go right, learns a model from them
(`culprit learn`), records one more normal run (the **control**) and one run per fault
case of `faults.py` (injected with `culprit record --inject`), then ranks every trial with
the method's score (`evidence`) and with each baseline (`paper`, `rarest`, `longest`,
`ochiai`, `simplerca`). One line per case shows its progress: the rank of the faulty unit
under every score, the units, and the seconds the case took.

**Ground truth** comes from the trace, per category:

- `reset`, `corrupt`, `short`, `delay`, `exhaust`, `code`: the injection is recorded in the
  thread that made the disturbed call (or, for `code`, raised the exception), inside the
  unit that was running then. The faulty units are the units that hold an injection
  record, and the later units of the same process (what the fault did next in the process
  it was injected into: a unit started at or after the first injected unit).
- `kill` (SIGKILL at the n-th call): the tracer records the injection, publishes it, then
  the process dies inside that call; the root is the killed process's **last unit**, the
  one holding the record — the process has no later units.
- `stop` (SIGSTOP at the n-th call): the same record, then the process hangs inside the
  call until the run ends (its unit never finishes, and nothing fails anywhere but by
  timeouts elsewhere); the root is the stopped process's last, unfinished unit, the one
  holding the record.

So one rule serves every category: a case is a *hit at rank r* when the first unit, in
ranking order, that holds an injection record or belongs to an injected process and
started at or after its first injected unit is the r-th. A case whose injection never
fired (no record in the trial) is not counted; it is listed under `not_fired`.

Figures per system and score: AC@k, the share of cases whose faulty unit is within the
first k, and Avg@5, the mean of AC@1..AC@5. Controls: the highest score of any unit of the
fault-free run against the lowest score a faulty unit was ranked with (method's score).
`--json F` writes `{"<system>": {"cases": N, "ac1": x, "ac3": x, "avg5": x, "baselines":
{"paper": {"ac1", "ac3", "avg5"}, "rarest": …, "longest": …, "ochiai": …, "simplerca": …},
"controls": {"highest_control": x, "lowest_faulty": y}, "ranks": {case: rank},
"not_fired": [...]}}`; every case's detail goes to `DIR/cases-<half>.json`.

`--check` records the control and the fault runs only and reports, per case, whether the
injection fired (`culprit dump` shows its record) and how many requests the clients saw
fail — no model, no ranking: what may be looked at on a validation system before the
method is frozen. `--record-only` records everything a run ranks (the normal runs, the control,
every case) and stops before the model: the recordings of a validation run can be made while
the method is still being tuned elsewhere, and ranked once it is frozen (`--reuse`).

Every run is bounded (`--run-timeout`, default 75 s; each workload stops after 20 s of
requests) and uses loopback only, on ports from `LOCALIZE_PORT_BASE`. Set-up (Debian and
PyPI packages) is `bench/localize/setup.sh`, which this script runs first. Not part of the
default test run.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import faults  # noqa: E402
import systems  # noqa: E402

METHOD = "evidence"
BASELINES = ["paper", "rarest", "longest", "ochiai", "simplerca"]


def sh(argv, timeout, log=None):
    """Runs argv in its own session; after `timeout` seconds the whole session is killed
    (a recording's daemons with it)."""
    t0 = time.monotonic()
    with open(log or os.devnull, "wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            rc = "timeout"
    return rc, time.monotonic() - t0


def record(a, system, out, inject=None):
    if a.reuse and os.path.isdir(out):
        return
    shutil.rmtree(out, ignore_errors=True)
    argv = [a.culprit, "record", "-o", out]
    if inject:
        argv += ["--inject", inject]
    argv += ["--", sys.executable, os.path.join(HERE, "systems.py"), system, "--dir", out + ".scratch",
             "--requests", str(a.requests)]
    rc, _ = sh(argv, a.run_timeout, out + ".log")
    # Keep what the helper processes and daemons said (the scratch directory goes).
    with open(out + ".helpers.log", "wb") as keep:
        for name in sorted(os.listdir(out + ".scratch")) if os.path.isdir(out + ".scratch") else []:
            if name.endswith(".log"):
                with open(os.path.join(out + ".scratch", name), "rb") as f:
                    keep.write(f"--- {name}\n".encode() + f.read()[-20000:])
    shutil.rmtree(out + ".scratch", ignore_errors=True)
    if rc != 0:
        print(f"run: {out}: culprit record exited {rc} (see {out}.log)", file=sys.stderr, flush=True)


def rank(a, model, trial, score):
    argv = [a.culprit, "rank", "--model", model, trial, "--json", "--score", score]
    t0 = time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"culprit rank {trial} --score {score}: {r.stderr.decode(errors='replace')}")
    return json.loads(r.stdout), time.monotonic() - t0


def judge(units):
    """(rank of the first faulty unit (1-based) or None, its score, fired?) — see the module
    documentation for the ground truth."""
    inj = [u for u in units if u["injections"]]
    if not inj:
        return None, None, False
    first = min(inj, key=lambda u: u["t_start_unix_ns"])
    pids = {(u["host"], u["pid"]) for u in inj}
    for i, u in enumerate(units):
        if u["injections"] or ((u["host"], u["pid"]) in pids and u["t_start_unix_ns"] >= first["t_start_unix_ns"]):
            return i + 1, u["score"], True
    return None, None, True


def client_summary(trial):
    """What the clients of a run said at the end: the summary lines (`N/M ok, K failed`) of
    the launcher and of its helper processes."""
    lines = []
    for path in (trial + ".log", trial + ".helpers.log"):
        try:
            with open(path, errors="replace") as f:
                lines += [l.strip()[len("systems: "):] for l in f
                          if l.startswith("systems: ") and ("ok" in l or "messages" in l or "jobs" in l
                                                          or "reads" in l or "did not" in l or "deadline" in l
                                                          or "failed" in l)]
        except OSError:
            pass
    return "; ".join(lines)


def injections_recorded(a, trial):
    r = subprocess.run([a.culprit, "dump", trial], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=300)
    return sum(1 for line in r.stdout.decode(errors="replace").splitlines() if "# injected by rule" in line)


def check_system(a, system, d, cases):
    for name, kind, spec in [("control", "none", None)] + cases:
        trial = os.path.join(d, name)
        t0 = time.monotonic()
        record(a, system, trial, spec)
        fired = injections_recorded(a, trial) if os.path.isdir(trial) else 0
        print(f"{system:19} {name:18} {kind:8} injections {fired:3}  {time.monotonic() - t0:5.1f} s  "
              f"{client_summary(trial)}", flush=True)


def record_system(a, system, d, cases):
    """The recordings `run_system` ranks, without ranking them (`--record-only`)."""
    runs = [(f"normal{i}", None) for i in range(1, a.normal + 1)]
    for name, spec in runs + [("control", None)] + [(c[0], c[2]) for c in cases]:
        t0 = time.monotonic()
        record(a, system, os.path.join(d, name), spec)
        print(f"{system:19} {name:18} recorded in {time.monotonic() - t0:5.1f} s", flush=True)


def run_system(a, system, d, cases, pool):
    normals = [os.path.join(d, f"normal{i}") for i in range(1, a.normal + 1)]
    for n in normals:
        t0 = time.monotonic()
        record(a, system, n)
        print(f"{system:19} {os.path.basename(n):18} recorded in {time.monotonic() - t0:5.1f} s", flush=True)
    model = os.path.join(d, "model.cpm")
    # Learned again even with --reuse: the model file belongs to the binary that ranks.
    rc, _ = sh([a.culprit, "learn", *normals, "-o", model], 600, model + ".log")
    if rc != 0:
        sys.exit(f"run: culprit learn failed for {system} (see {model}.log)")
    out = []
    for name, kind, spec in [("control", "none", None)] + cases:
        trial = os.path.join(d, name)
        t0 = time.monotonic()
        record(a, system, trial, spec)
        case = {"system": system, "case": name, "kind": kind, "inject": spec, "scores": {}}
        jobs = {s: pool.submit(rank, a, model, trial, s) for s in [METHOD] + BASELINES}
        for s, job in jobs.items():
            units, dt = job.result()
            r, sc, fired = judge(units)
            case["units"] = len(units)
            case["fired"] = fired
            case["scores"][s] = {"rank": r, "score": sc, "seconds": round(dt, 2),
                                 "top_score": units[0]["score"] if units else None,
                                 "top_id": units[0]["id"] if units else None,
                                 "top_why": units[0]["why"][:2] if units else []}
        case["seconds"] = round(time.monotonic() - t0, 1)
        print_case(case)
        out.append(case)
    return out


def print_case(c):
    cells = []
    for s, x in c["scores"].items():
        if c["kind"] == "none":
            cells.append(f"{s} max {x['top_score']:.3f}" if x["top_score"] is not None else f"{s} -")
        else:
            cells.append(f"{s} {x['rank'] if x['rank'] else '-'}")
    note = "" if c["kind"] == "none" or c["fired"] else "  (injection did not fire)"
    print(f"{c['system']:19} {c['case']:18} {c['kind']:8} {c['units']:6} units {c['seconds']:5.1f} s  "
          + "  ".join(cells) + note, flush=True)


def figures(ranks):
    n = len(ranks)
    ac = [sum(1 for r in ranks if r is not None and r <= k) / n if n else 0.0 for k in range(1, 6)]
    return {"ac1": round(ac[0], 4), "ac3": round(ac[2], 4), "avg5": round(sum(ac) / 5, 4)}


def summarize(cases):
    out = {}
    for system in dict.fromkeys(c["system"] for c in cases):
        mine = [c for c in cases if c["system"] == system]
        faulty = [c for c in mine if c["kind"] != "none" and c["fired"]]
        s = {"cases": len(faulty), **figures([c["scores"][METHOD]["rank"] for c in faulty])}
        s["baselines"] = {b: figures([c["scores"][b]["rank"] for c in faulty]) for b in BASELINES}
        ctrl = [c["scores"][METHOD]["top_score"] for c in mine if c["kind"] == "none"]
        low = [c["scores"][METHOD]["score"] for c in faulty if c["scores"][METHOD]["score"] is not None]
        s["controls"] = {"highest_control": max((x for x in ctrl if x is not None), default=None),
                         "lowest_faulty": min(low, default=None)}
        s["ranks"] = {c["case"]: c["scores"][METHOD]["rank"] for c in faulty}
        s["not_fired"] = [c["case"] for c in mine if c["kind"] != "none" and not c["fired"]]
        out[system] = s
    return out


def print_table(summary):
    head = f"{'system':19} {'cases':>5}  {METHOD:>17}  " + "  ".join(f"{b:>17}" for b in BASELINES)
    print("\nAC@1 / AC@3 / Avg@5 per system\n" + head)
    for system, s in summary.items():
        cells = [f"{s['ac1']:.2f}/{s['ac3']:.2f}/{s['avg5']:.2f}"]
        cells += [f"{s['baselines'][b]['ac1']:.2f}/{s['baselines'][b]['ac3']:.2f}/{s['baselines'][b]['avg5']:.2f}"
                  for b in BASELINES]
        c = s["controls"]
        print(f"{system:19} {s['cases']:5}  " + "  ".join(f"{x:>17}" for x in cells)
              + f"   control max {c['highest_control']} vs faulty min {c['lowest_faulty']}"
              + (f"   not fired: {', '.join(s['not_fired'])}" if s["not_fired"] else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=["tuning", "validation"], help="run one half of split.json")
    ap.add_argument("--systems", help="comma-separated systems (instead of, or within, --half)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-localize"))
    ap.add_argument("--normal", type=int, default=3, help="normal runs learned from, per system")
    ap.add_argument("--requests", type=int, default=120, help="client requests per run")
    ap.add_argument("--culprit", default=os.path.join(ROOT, "target", "release", "culprit"))
    ap.add_argument("--run-timeout", type=float, default=75)
    ap.add_argument("--reuse", action="store_true", help="keep traces already recorded in --out")
    ap.add_argument("--json", help="write the per-system figures to this file")
    ap.add_argument("--cases", help="comma-separated case names: only these (and the control)")
    ap.add_argument("--check", action="store_true", help="record and check the injections only (no ranking)")
    ap.add_argument("--record-only", action="store_true",
                    help="record the normal runs, the control and every case, and stop: no model, no ranking "
                         "(a later --reuse ranks them, e.g. with a method frozen after the recording)")
    ap.add_argument("--no-setup", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(HERE, "split.json")) as f:
        split = json.load(f)
    chosen = split[a.half] if a.half else list(systems.SYSTEMS)
    if a.systems:
        want = a.systems.split(",")
        unknown = [s for s in want if s not in systems.SYSTEMS]
        if unknown:
            sys.exit(f"run: unknown system(s) {', '.join(unknown)}; known: {', '.join(systems.SYSTEMS)}")
        chosen = [s for s in want if s in chosen] if a.half else want
    skipped = {s: why for s, why in split.get("not_run", {}).items() if s in chosen}
    for s, why in skipped.items():
        print(f"run: {s} is not run here: {why}", file=sys.stderr)
    chosen = [s for s in chosen if s not in skipped]
    if not a.no_setup:
        subprocess.run(["bash", os.path.join(HERE, "setup.sh")], check=True)
    if not os.access(a.culprit, os.X_OK):
        sys.exit(f"run: {a.culprit} not built (cargo build --release -p cli -p tracer-preload)")
    table = faults.table()
    if a.cases:
        want = set(a.cases.split(","))
        table = {s: [c for c in cs if c[0] in want] for s, cs in table.items()}
    cases = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for system in chosen:
            d = os.path.join(a.out, system)
            os.makedirs(d, exist_ok=True)
            print(f"== {system}: {len(table[system])} fault cases", file=sys.stderr, flush=True)
            if a.check:
                check_system(a, system, d, table[system])
            elif a.record_only:
                record_system(a, system, d, table[system])
            else:
                cases += run_system(a, system, d, table[system], pool)
    print(f"\n{len(chosen)} systems in {time.monotonic() - t0:.0f} s", flush=True)
    if a.check or a.record_only:
        return
    summary = summarize(cases)
    print_table(summary)
    with open(os.path.join(a.out, f"cases-{a.half or 'all'}.json"), "w") as f:
        json.dump(cases, f, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
