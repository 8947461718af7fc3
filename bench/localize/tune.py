#!/usr/bin/env python3
"""Tuning loop of the localizer on the suite's recordings: rank every recorded case with
one binary (evidence score only, no baselines), compare two binaries case by case, and
list the misses with the units that beat the faulty one.

    python3 bench/localize/tune.py rank --culprit BIN --tag T --recordings DIR [--systems a,b]
    python3 bench/localize/tune.py cmp --results DIR A B
    python3 bench/localize/tune.py misses --results DIR T [--systems a,b]

DIR holds one directory per system as `run.py --record-only --out DIR` leaves it
(`normal1..N`, `control`, one directory per case). `rank` learns a model from the normal
runs (`--work DIR/models/T/`), ranks every other run and writes `--work DIR/results/T.json`:
per system and case the rank of the faulty unit by `run.py`'s judge (the same ground truth
as the suite), its score, the top unit, and for a miss the first units and the faulty one
with their start relative to the first injected unit. Only the tuning half's recordings
belong here: the validation half is ranked by `run.py` on a frozen method.
"""

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import judge  # noqa: E402  (the suite's ground truth)


def brief(i, u, t0):
    return {"i": i + 1, "id": u["id"], "s": round(u["score"], 4), "dt_ms": round((u["t_start_unix_ns"] - t0) / 1e6, 1),
            "kind": u.get("kind"), "inj": bool(u["injections"]), "why": (u.get("why") or [""])[0][:200]}


def rank_one(culprit, model, trial):
    r = subprocess.run([culprit, "rank", "--model", model, trial, "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=900)
    if r.returncode:
        return {"error": r.stderr.decode(errors="replace")[-400:]}
    units = json.loads(r.stdout)
    rk, sc, fired = judge(units)
    top = units[0] if units else {}
    out = {"rank": rk, "score": sc, "fired": fired, "units": len(units), "top": top.get("score"),
           "top_id": top.get("id"), "why": (top.get("why") or [])[:2]}
    if rk != 1:
        t0 = min((u["t_start_unix_ns"] for u in units if u["injections"]), default=0)
        out["head"] = [brief(i, u, t0) for i, u in enumerate(units[:4])]
        if rk:
            out["root"] = brief(rk - 1, units[rk - 1], t0)
    return out


def cmd_rank(a):
    systems = a.systems.split(",") if a.systems else sorted(os.listdir(a.recordings))
    models = os.path.join(a.work, "models", a.tag)
    os.makedirs(models, exist_ok=True)
    os.makedirs(os.path.join(a.work, "results"), exist_ok=True)
    path = os.path.join(a.work, "results", f"{a.tag}.json")
    res = json.load(open(path)) if os.path.exists(path) else {}
    for s in systems:
        d = os.path.join(a.recordings, s)
        if not os.path.isdir(d):
            continue
        runs = sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)) and not x.endswith(".scratch"))
        normals = [os.path.join(d, x) for x in runs if x.startswith("normal")]
        trials = [x for x in runs if not x.startswith("normal")]
        model = os.path.join(models, f"{s}.cpm")
        r = subprocess.run([a.culprit, "learn", *normals, "-o", model], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        if r.returncode:
            print(f"{s}: culprit learn failed: {r.stderr.decode(errors='replace')[-300:]}", file=sys.stderr)
            continue
        with ThreadPoolExecutor(a.jobs) as pool:
            got = dict(zip(trials, pool.map(lambda t: rank_one(a.culprit, model, os.path.join(d, t)), trials)))
        res[s] = got
        ok = [v for k, v in got.items() if k != "control" and v.get("fired")]
        print(f"{s:22} {sum(v['rank'] == 1 for v in ok):3}/{len(ok):3} first, "
              f"{sum(1 for v in ok if v['rank'] and v['rank'] <= 3):3} in the top 3; control top "
              f"{got.get('control', {}).get('top')}", flush=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=0)
    faulty = [v for s in res.values() for k, v in s.items() if k != "control" and v.get("fired")]
    print(f"total {sum(v['rank'] == 1 for v in faulty)}/{len(faulty)} first, "
          f"{sum(1 for v in faulty if v['rank'] and v['rank'] <= 3)} in the top 3 ({path})")


def load(a, tag):
    with open(os.path.join(a.results, f"{tag}.json")) as f:
        return json.load(f)


def cmd_cmp(a):
    A, B = load(a, a.a), load(a, a.b)
    ta = tb = n = 0
    for s in sorted(set(A) & set(B)):
        ca = {k: v for k, v in A[s].items() if k != "control" and v.get("fired")}
        a1 = sum(v["rank"] == 1 for v in ca.values())
        b1 = sum(B[s].get(k, {}).get("rank") == 1 for k in ca)
        ta, tb, n = ta + a1, tb + b1, n + len(ca)
        moved = [f"{k}:{v['rank']}->{B[s].get(k, {}).get('rank')}" for k, v in ca.items()
                 if v["rank"] != B[s].get(k, {}).get("rank")]
        print(f"{s:22} {a1:3} -> {b1:3} /{len(ca):3}  " + " ".join(moved))
    print(f"total {ta} -> {tb} / {n} first")


def cmd_misses(a):
    R = load(a, a.tag)
    only = set(a.systems.split(",")) if a.systems else None
    for s, cs in R.items():
        if only and s not in only:
            continue
        for k, v in cs.items():
            if k == "control" or not v.get("fired") or v["rank"] == 1:
                continue
            r = v.get("root") or {}
            print(f"## {s} {k} rank {v['rank']} score {v['score'] and round(v['score'], 3)} at {r.get('dt_ms')} ms "
                  f"[{r.get('id')}] {r.get('why', '')[:120]}")
            for h in v.get("head", [])[:3]:
                print(f"   {h['i']}. {h['s']} {h['dt_ms']:>9} ms {h['id']:<22} {'INJ ' if h['inj'] else ''}{h['why'][:120]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rank")
    r.add_argument("--culprit", required=True)
    r.add_argument("--tag", required=True)
    r.add_argument("--recordings", required=True)
    r.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-tune"))
    r.add_argument("--systems")
    r.add_argument("--jobs", type=int, default=2)
    c = sub.add_parser("cmp")
    c.add_argument("--results", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-tune", "results"))
    c.add_argument("a")
    c.add_argument("b")
    m = sub.add_parser("misses")
    m.add_argument("--results", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "culprit-tune", "results"))
    m.add_argument("tag")
    m.add_argument("--systems")
    a = ap.parse_args()
    {"rank": cmd_rank, "cmp": cmd_cmp, "misses": cmd_misses}[a.cmd](a)


if __name__ == "__main__":
    main()
