#!/usr/bin/env python3
"""Measures, on the end-to-end stories of issue 5, where the right units rank with the
analyzer's outcome-aware nodes on (the default) and off (`culprit learn --no-outcomes`).

    python3 tests/e2e/measure_outcomes.py [--culprit target/release/culprit] [--runs 3]

For each case (the Python ring with a short header recv; the C ring compiled with
-finstrument-functions, same fault; the uninstrumented C ring whose header read fails with
ECONNRESET), it records N normal runs and one faulty run, learns both ways, ranks, and
prints per mode: the rank (1-based) and score of the unit holding the injection (node 2's
handler), of the first unit on node 1 (the peer, which gets the reset) that is a handler,
of the first unit on node 2 or 1, and the top score. Everything runs on 127.0.0.1 and is
bounded in time (the faulty ring is ended by its launcher's timeout).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKEN, PEER = 2, 1


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def ring_ids(d):
    m = json.load(open(os.path.join(d, "manifest.json")))
    ids = {}
    for p in m["processes"]:
        a = p.get("argv") or []
        if "--id" in a:
            ids[p["pid"]] = int(a[a.index("--id") + 1])
    return ids


def cases(tmp):
    py = sys.executable
    ring = [py, os.path.join(ROOT, "tests/ring/run_ring.py"), "--nodes", "5", "--jobs", "20"]
    src = os.path.join(ROOT, "tests/e2e/ring_node.c")
    inst = os.path.join(tmp, "ring_inst")
    plain = os.path.join(tmp, "ring_plain")
    for out, flags in ((inst, ["-finstrument-functions", "-fno-omit-frame-pointer"]),
                       (plain, ["-DHEADER_READ", "-fno-omit-frame-pointer"])):
        subprocess.run(["cc", "-O1", "-g", "-Wall", "-o", out, src] + flags, check=True)
    c = ["launch", "--nodes", "5", "--jobs", "20"]
    return [
        ("python ring, recv short=3", ring + ["--timeout", "60"], ring + ["--timeout", "8"],
         "recv:short=3,argv=--id 2 --nodes,nth=11"),
        ("C ring -finstrument-functions, recv short=3", [inst] + c + ["--timeout", "60"],
         [inst] + c + ["--timeout", "5"], "recv:short=3,argv=--id 2 --nodes,nth=11"),
        ("C ring LD_PRELOAD only, read ECONNRESET", [plain] + c + ["--timeout", "60"],
         [plain] + c + ["--timeout", "5"], "read:errno=ECONNRESET,argv=--id 2 --nodes,nth=6"),
    ]


def measure(units, ids):
    def first(pred):
        for i, u in enumerate(units):
            if pred(u):
                return i + 1, u["score"]
        return None, None
    inj = first(lambda u: u["injections"] and u["kind"] == "handler")
    peer = first(lambda u: ids.get(u["pid"]) == PEER and u["kind"] == "handler"
                 and any("reset" in w.lower() or "close" in w.lower() for w in u["why"]
                         if not w.startswith("expected")))
    pair = first(lambda u: ids.get(u["pid"]) in (BROKEN, PEER))
    top = units[0] if units else None
    top_desc = "-" if top is None else "node %s %s: %s" % (
        ids.get(top["pid"], "?"), top["kind"], (top["why"] or [""])[0].replace("|", "/"))
    return inj, peer, pair, top["score"] if top else None, top_desc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--culprit", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "culprit"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    cul = args.culprit
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, normal, faulty, fault in cases(tmp):
            d = os.path.join(tmp, str(len(rows)))
            dirs = []
            for i in range(args.runs):
                o = os.path.join(d, "n%d" % i)
                r = run([cul, "record", "-o", o, "--"] + normal)
                if r.returncode != 0:
                    sys.exit("%s: normal run failed:\n%s" % (name, r.stderr))
                dirs.append(o)
            f = os.path.join(d, "faulty")
            r = run([cul, "record", "-o", f, "--inject", fault, "--"] + faulty)
            if r.returncode != 3:
                sys.exit("%s: faulty run ended with %d:\n%s" % (name, r.returncode, r.stderr))
            ids = ring_ids(f)
            for mode, extra in (("outcomes on", []), ("outcomes off", ["--no-outcomes"])):
                model = os.path.join(d, "m-%d.model" % len(extra))
                r = run([cul, "learn"] + dirs + ["-o", model] + extra)
                if r.returncode != 0:
                    sys.exit(r.stderr)
                r = run([cul, "rank", "--model", model, f, "--json"])
                if r.returncode != 0:
                    sys.exit(r.stderr)
                units = json.loads(r.stdout)
                rows.append((name, mode, len(units)) + measure(units, ids))
        print("| case | nodes | units | injected unit (node 2 handler): rank, score | "
              "peer's reset/close handler (node 1): rank, score | first unit on node 2/1 | "
              "top score | top unit |")
        print("|---|---|---|---|---|---|---|---|")
        for name, mode, n, inj, peer, pair, top, top_desc in rows:
            fmt = lambda x: "-" if x[0] is None else "%d, %.3f" % x
            print("| %s | %s | %d | %s | %s | %d | %.3f | %s |" % (
                name, mode, n, fmt(inj), fmt(peer), pair[0] or 0, top, top_desc))


if __name__ == "__main__":
    main()
