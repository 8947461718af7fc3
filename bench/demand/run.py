#!/usr/bin/env python3
"""Culprit's public demand suite: does `culprit demand` stay quiet on fault-free runs of
multi-tier systems nobody tuned it for, alarm on the tier a fault slows (and on no other),
and recover the demand of each request type whatever the mix?

    python3 bench/demand/run.py --half tuning|validation [--minutes 10] [--json F]
                                [--systems a,b] [--out DIR] [--culprit PATH]

For each system of the half (bench/demand/split.json, systems in systems.py) it records
with `culprit record` one fault-free run and one run per fault, each `--minutes` long with
phases of intensity and mix (6 phases; blog-lighttpd-php, wiki-apache-node, cms-varnish-perl, catalog-haproxy-tomcat,
forum-squid-puma, job-rabbit-workers, grpc-fanout-mariadb: a phase every 30 s); the fault begins at 3/4 of the run (after the
longest training window `culprit demand` may take, 2/3). Then `culprit demand --json`
(default services: auto; 1 s intervals) and, for comparison, `--services port`.

Per system it reports: alarms in the fault-free run (and starvation reports, apart); for
each fault whether a faulty tier alarmed within 5 intervals (the alarm raised at most 6 s
after the fault began: 5 whole intervals after the one it began in) and how many alarms
other tiers raised in the run; and, where the suite knows it (haproxy-apps: the CPU each
request type burns), the error of each type's demand — CPU per request (`cpu_demand_s`,
from the reader's CPU samples) and busy time per request (`demand_s`, wall clock: it
includes waiting for a CPU on a loaded machine).

A fault injected by time (`dbread` of shop-uwsgi-mariadb, catalog-haproxy-tomcat, job-rabbit-workers and grpc-fanout-mariadb: MariaDB's
socket reads delayed from the fault's instant on; `cacheread` of blog-lighttpd-php: memcached's; of wiki-apache-node and forum-squid-puma: Redis's; of cms-varnish-perl: memcached's) is passed to `culprit record --inject` with `at=` that
instant; the run's load then starts at a fixed time, SETUP_S after the recording begins.

Set-up (Debian: memcached, haproxy, nginx, PostgreSQL, MariaDB, uWSGI, lighttpd, php-cgi, Apache
httpd, Node.js, Redis, Varnish, Starman with DBD::Pg, Tomcat 10 with a JDK and MariaDB Connector/J, Squid, Puma with ruby-pg, RabbitMQ; PyPI: pika, aiohttp, grpcio, grpcio-tools; npm: mysql2;
sqlite3 is Python's) is `bench/demand/setup.sh`, run first. Loopback only, ports 26000-26099 by default (--port-base). Not part of the default
test run.
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
import blog  # noqa: E402  (bench/demand/blog.py: a system's tiers and faults)
import catalog  # noqa: E402  (bench/demand/catalog.py: a system's tiers and faults)
import cms  # noqa: E402  (bench/demand/cms.py: a system's tiers and faults)
import fanout  # noqa: E402  (bench/demand/fanout.py: a system's tiers and faults)
import forum  # noqa: E402  (bench/demand/forum.py: a system's tiers and faults)
import jobq  # noqa: E402  (bench/demand/jobq.py: a system's tiers and faults)
import shop  # noqa: E402  (bench/demand/shop.py: a system's tiers and faults)
import wiki  # noqa: E402  (bench/demand/wiki.py: a system's tiers and faults)

FAULTS = {
    "webapp-cache-db": ["index"],
    "haproxy-apps": ["hog", "heavy"],
    "job-queue": ["lock", "slow"],
    "api-pool-pg": ["index", "lock", "slow"],
    shop.NAME: shop.FAULTS,
    blog.NAME: blog.FAULTS,
    wiki.NAME: wiki.FAULTS,
    cms.NAME: cms.FAULTS,
    catalog.NAME: catalog.FAULTS,
    forum.NAME: forum.FAULTS,
    jobq.NAME: jobq.FAULTS,
    fanout.NAME: fanout.FAULTS,
}
# Faults injected by `culprit record --inject` from a given time (`at=`): the rule, with
# `{at}` the fault's UNIX time. The load of such a run starts at a fixed instant
# (`systems.py run --start-at`), SETUP_S after the recording begins, so that the instant
# is known before the system starts.
# Systems whose request types run.py cannot tell by a word of the type's name: the type
# (a key of the truth's cpu_demand_s) of a service from its name.
TYPE_OF = {blog.NAME: blog.type_of, wiki.NAME: wiki.type_of, cms.NAME: cms.type_of, catalog.NAME: catalog.type_of,
           forum.NAME: forum.type_of, jobq.NAME: jobq.type_of, fanout.NAME: fanout.type_of}
INJECTED = {(shop.NAME, "dbread"): shop.DBREAD_RULE, (blog.NAME, "cacheread"): blog.CACHEREAD_RULE,
            (wiki.NAME, "cacheread"): wiki.CACHEREAD_RULE, (cms.NAME, "cacheread"): cms.CACHEREAD_RULE,
            (catalog.NAME, "dbread"): catalog.DBREAD_RULE, (forum.NAME, "cacheread"): forum.CACHEREAD_RULE,
            (jobq.NAME, "dbread"): jobq.DBREAD_RULE, (fanout.NAME, "dbread"): fanout.DBREAD_RULE}
SETUP_S = 150.0
# Systems with tiers running as another user (PostgreSQL runs as postgres, Apache's child as
# www-data, Squid as proxy): the pool must be writable by them.
SHARED_WRITERS = {"api-pool-pg", wiki.NAME, cms.NAME, forum.NAME}
INTERVAL_S = 1.0


def culprit_path(arg):
    if arg:
        return arg
    for b in ("release", "debug"):
        p = os.path.join(ROOT, "target", b, "culprit")
        if os.path.exists(p):
            return p
    raise SystemExit("no culprit binary: cargo build --release -p cli -p tracer-preload")


def record(culprit, system, fault, seconds, out, port_base):
    trace = os.path.join(out, "%s-%s" % (system, fault))
    shutil.rmtree(trace, ignore_errors=True)
    work = trace + ".work"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    truth = trace + ".truth.json"
    inject, start = [], []
    if (system, fault) in INJECTED:
        start_at = round(time.time() + SETUP_S, 3)
        at = round(start_at + 0.75 * seconds, 3)
        inject = ["--inject", INJECTED[(system, fault)].format(at="%.3f" % at)]
        start = ["--start-at", "%.3f" % start_at]
    cmd = [
        culprit, "record", *(["--shared-writers"] if system in SHARED_WRITERS else []), "-o", trace, *inject, "--",
        sys.executable, os.path.join(HERE, "systems.py"), "run", system,
        "--seconds", str(seconds), "--fault", fault, "--fault-at", str(0.75 * seconds),
        "--truth", truth, "--workdir", work, "--port-base", str(port_base), *start,
    ]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 180 + SETUP_S)
    if r.returncode != 0 or not os.path.exists(truth):
        raise RuntimeError("%s %s: record failed (%d): %s" % (system, fault, r.returncode, r.stderr.decode()[-2000:]))
    with open(truth) as f:
        t = json.load(f)
    # What each application server measured itself: CPU per request type.
    measured = {}
    for name in t["tiers"]:
        p = os.path.join(work, name + ".json")
        if os.path.exists(p):
            with open(p) as f:
                measured[name] = json.load(f)
        # A pool's workers: sums and counts per worker (api-PID.json), pooled.
        sums = {}
        for fn in sorted(os.listdir(work)):
            if fn.startswith(name + "-") and fn.endswith(".json"):
                with open(os.path.join(work, fn)) as f:
                    for kind, (s, n) in json.load(f).items():
                        e = sums.setdefault(kind, [0.0, 0])
                        e[0] += s
                        e[1] += n
        if sums:
            measured[name] = {k: (s / n if n else None) for k, (s, n) in sums.items()}
    if measured:
        t["measured_cpu_s"] = measured
        with open(truth, "w") as f:
            json.dump(t, f, indent=1)
    return trace, t


def demand(culprit, trace, extra=()):
    r = subprocess.run([culprit, "demand", trace, "--json", *extra],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError("culprit demand %s: %s" % (trace, r.stderr.decode()[-2000:]))
    return json.loads(r.stdout)


def tier_of(truth, pid):
    for name, pids in truth["tiers"].items():
        if pid in pids:
            return name
    return None


def evaluate(report, truth):
    """Alarms by tier, detection of the fault, other tiers' alarms, demand errors."""
    by_tier = {}
    for p in report["processes"]:
        t = tier_of(truth, p["pid"]) or "other:%s" % os.path.basename(p["exe"])
        e = by_tier.setdefault(t, {"alarms": [], "starved": [], "processes": 0})
        e["processes"] += 1
        e["alarms"] += [a["t_unix_ns"] for a in p["alarms"]]
        e["starved"] += [a["t_unix_ns"] for a in p.get("starved", [])]
    # Every alarm: tier, seconds from the fault (from the run's first interval without
    # one), kind.
    ref = (truth.get("fault") or {}).get("t_unix_ns") or report["t0_unix_ns"]
    each = sorted((round((a["t_unix_ns"] - ref) / 1e9, 2), tier_of(truth, p["pid"]) or p["exe"], a.get("kind"))
                  for p in report["processes"] for a in p["alarms"])
    out = {
        "alarm_list": each,
        "alarms": {t: len(v["alarms"]) for t, v in by_tier.items() if v["alarms"]},
        "starved": {t: len(v["starved"]) for t, v in by_tier.items() if v["starved"]},
        "tiers": {t: v["processes"] for t, v in by_tier.items()},
    }
    f = truth.get("fault")
    if f:
        t0 = f["t_unix_ns"]
        limit = t0 + int(6 * INTERVAL_S * 1e9)
        hits, starved = [], []
        for t in f["tiers"]:
            v = by_tier.get(t, {"alarms": [], "starved": []})
            hits += [x for x in v["alarms"] if t0 <= x <= limit]
            starved += [x for x in v["starved"] if t0 <= x <= limit]
        first = min(hits) if hits else None
        out["detected"] = first is not None
        out["delay_s"] = None if first is None else round((first - t0) / 1e9, 2)
        after = [x for t in f["tiers"] for x in by_tier.get(t, {"alarms": []})["alarms"] if x >= t0]
        out["first_alarm_after_s"] = round((min(after) - t0) / 1e9, 2) if after else None
        if f["kind"] == "hog":
            # Until 2026-11-28 a starvation report of the hogged tier counted as detected;
            # since `alone` (starved while its peers were not) it is alarmed instead.
            out["starved_within_window"] = bool(starved)
        out["other_tier_alarms"] = sum(len(v["alarms"]) for t, v in by_tier.items() if t not in f["tiers"])
        late = []
        for t in f["tiers"]:
            late += [x for x in by_tier.get(t, {"alarms": []})["alarms"] if x < t0]
        out["faulty_tier_alarms_before_fault"] = len(late)
    errs = []
    for prefix, known in truth.get("cpu_demand_s", {}).items():
        for p in report["processes"]:
            t = tier_of(truth, p["pid"]) or ""
            if not t.startswith(prefix):
                continue
            for s in p["services"]:
                name = s.get("name") or s["id"]
                classify = TYPE_OF.get(truth.get("system"))
                kinds = [classify(name)] if classify else [k for k in known if k in name]
                kinds = [k for k in kinds if k in known]
                if len(kinds) != 1:
                    continue
                kind = kinds[0]
                truth_s = known[kind]
                row = {"tier": t, "type": kind, "name": name, "requests": s["requests"],
                       "demand_s": s["demand_s"], "busy_err": abs(s["demand_s"] - truth_s) / truth_s}
                # The server's own measure of its CPU per request (burn + HTTP handling).
                m = truth.get("measured_cpu_s", {}).get(t, {}).get(kind)
                if m:
                    row["measured_cpu_s"] = m
                if s.get("cpu_demand_s") is not None:
                    row["cpu_demand_s"] = s["cpu_demand_s"]
                    row["cpu_err"] = abs(s["cpu_demand_s"] - truth_s) / truth_s
                    if m:
                        row["cpu_err_measured"] = abs(s["cpu_demand_s"] - m) / m
                errs.append(row)
    if errs:
        out["demand_errors"] = errs
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", choices=["tuning", "validation", "all"], required=True)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--systems", help="only these (comma-separated)")
    ap.add_argument("--faults", help="only these faults (comma-separated; 'none' is the fault-free run)")
    ap.add_argument("--out", default="/tmp/culprit-demand-suite")
    ap.add_argument("--culprit")
    ap.add_argument("--port-base", type=int, default=26000)
    ap.add_argument("--no-setup", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="analyse the recordings already in --out instead of recording again")
    ap.add_argument("--record-only", action="store_true",
                    help="record, do not analyse (analyse later with --reuse, e.g. on a frozen method)")
    a = ap.parse_args()
    if not a.no_setup:
        subprocess.run(["bash", os.path.join(HERE, "setup.sh")], check=True)
    with open(os.path.join(HERE, "split.json")) as f:
        split = json.load(f)
    names = split["tuning"] + split["validation"] if a.half == "all" else split[a.half]
    if a.systems:
        names = [n for n in names if n in a.systems.split(",")]
    culprit = culprit_path(a.culprit)
    os.makedirs(a.out, exist_ok=True)
    seconds = a.minutes * 60
    results = {"minutes": a.minutes, "half": a.half, "systems": {}}
    for k, system in enumerate(names):
        res = results["systems"].setdefault(system, {"runs": {}})
        for fault in ["none"] + FAULTS[system]:
            if a.faults and fault not in a.faults.split(","):
                continue
            t = time.time()
            trace = os.path.join(a.out, "%s-%s" % (system, fault))
            if a.reuse and os.path.exists(trace + ".truth.json"):
                with open(trace + ".truth.json") as f:
                    truth = json.load(f)
            else:
                trace, truth = record(culprit, system, fault, seconds, a.out, a.port_base + 10 * k)
            if a.record_only:
                print(json.dumps({"system": system, "fault": fault, "recorded": trace,
                                  "seconds": round(time.time() - t, 1)}), flush=True)
                continue
            rep = demand(culprit, trace)
            ev = evaluate(rep, truth)
            ev["port_mode"] = evaluate(demand(culprit, trace, ["--services", "port"]), truth)["alarms"]
            ev["load_errors"] = truth.get("errors", 0)
            ev["notes"] = sorted({p["note"] for p in rep["processes"] if p.get("note")})
            ev["seconds"] = round(time.time() - t, 1)
            res["runs"][fault] = ev
            print(json.dumps({"system": system, "fault": fault, **ev}), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    # Summary.
    print()
    print("%-18s %-7s %-28s %-9s %-10s %s" % ("system", "fault", "alarms by tier", "detected", "delay (s)", "other tiers' alarms"))
    for system, res in results["systems"].items():
        for fault, ev in res["runs"].items():
            print("%-18s %-7s %-28s %-9s %-10s %s" % (
                system, fault, json.dumps(ev["alarms"]) + (" starved " + json.dumps(ev["starved"]) if ev["starved"] else ""),
                ev.get("detected", "-"), ev.get("delay_s", "-"), ev.get("other_tier_alarms", "-")))


if __name__ == "__main__":
    main()
