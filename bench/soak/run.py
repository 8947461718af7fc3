#!/usr/bin/env python3
"""Always on (issue 30): a traced redis (master + 2 replicas) under redis-benchmark for a
long time, recorded with a flight recorder (`culprit record --keep`) and watched
(`culprit watch`), with one fault injected at a random moment.

    python3 bench/soak/run.py --culprit target/release/culprit [--minutes 30] [--keep 256M]
                              [--seed S] [--no-fault] [--out DIR] [--json F]
                              [--watch-arg ARG]... [--interleave ROUNDS] [--model M]

Steps:
1. untraced baseline: the same three servers and load, `--baseline-seconds` long:
   requests per second (redis-benchmark's own figure);
2. `--learn-runs` (3) short normal runs (`--learn-seconds` each) recorded whole (no `--keep`: the model
   needs every unit from its beginning; a flight recorder's first unit of each thread is
   cut at its start and not learned) and learned into a model;
3. the soak: `culprit record --keep SIZE` of the three servers for `--minutes`, the load
   for the whole time, `culprit watch --model M --json --keep-around 5s` on the directory,
   and — unless `--no-fault` — a reset of the first replica's replication link
   (`read:errno=ECONNRESET` on its n-th read of the master's port, n drawn at random so that
   it falls inside the run). Every second: the directory's size.

Printed (and written with --json): the directory's largest size against the budget
(+ one sub-buffer per drain thread and the live copier); entries recorded, rotated away
and lost (the manifest's and rotated.json's counts: recorded = kept + rotated, lost
counted apart; the warnings of a reading of the final directory, which would name any
sequence gap); watch's reports — whether the first one holds the injection (its
`injections` is not empty), the delay from each unit's end to its report (p50, p99) and
where it went (the reports' `delay_ns` stages, and the printing: report made → line read
here), and the watch's own timing of every unit that completed (`watch_timing`) —,
the snapshots taken and whether one holds the injected unit (ranked again); watch's CPU
time as a share of one core; and redis's throughput traced (with --keep and watch) over
untraced, as a ratio from this one run, with the load averages of both phases (the
machine is shared).

`--model M` uses the model an earlier run learned (its `normal.cpm`) instead of step 2.
With `--interleave ROUNDS` the run measures overhead instead of soaking: after learning
(step 2), ROUNDS times in turn an untraced segment and a traced one (`record --keep` and
`watch`), `--segment-seconds` of load each: the throughput ratio is traced over untraced
summed over the rounds, so both sides see the same (shared) machine; watch's CPU time
over the traced segments' time; the load average after every segment. Apart from the
throughput, which depends on everything else running on the machine, the overhead inside
redis: the servers' own CPU time (user + system, from /proc) per request, traced over
untraced — what the tracer adds to each request —, and the share of a core that
`culprit record` (with its reader) and `culprit watch` take from the same cores.

Loopback only, ports from SOAK_PORT_BASE (default 31000). Installs redis-server and
redis-tools from Debian if missing. Not part of the default test run.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BASE = int(os.environ.get("SOAK_PORT_BASE", "31000"))
PORTS = (BASE, BASE + 1, BASE + 2)


def log(*a):
    print("soak:", *a, file=sys.stderr, flush=True)


def setup():
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        return
    log("apt-get install redis-server redis-tools")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                    "redis-server", "redis-tools"], check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def servers_script(tmp):
    """A shell script that starts the master and two replicas and waits for them."""
    lines = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null; wait' TERM INT EXIT"]
    for i, p in enumerate(PORTS):
        args = [f"--port {p}", "--bind 127.0.0.1", "--save ''", "--appendonly no",
                f"--dir {tmp}", f"--dbfilename d{i}.rdb", "--protected-mode no"]
        if i > 0:
            args.append(f"--replicaof 127.0.0.1 {PORTS[0]}")
        lines.append("redis-server " + " ".join(args) + " &")
    lines.append("wait")
    path = os.path.join(tmp, "servers.sh")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def wait_ports(deadline=20):
    import socket
    end = time.monotonic() + deadline
    for p in PORTS:
        while True:
            try:
                socket.create_connection(("127.0.0.1", p), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > end:
                    raise RuntimeError(f"redis on {p} did not start")
                time.sleep(0.1)


def load(seconds, requests=200000):
    """redis-benchmark against the master for about `seconds` (at least one run of
    `requests` SETs then as many GETs); returns requests/s."""
    end = time.monotonic() + seconds
    total, spent = 0, 0.0
    while time.monotonic() < end:
        t = time.monotonic()
        subprocess.run(
            ["redis-benchmark", "-p", str(PORTS[0]), "-c", "50", "-n", str(requests),
             "-t", "set,get", "-q", "--csv"],
            capture_output=True, text=True, timeout=300)
        spent += time.monotonic() - t
        total += 2 * requests
    return total / spent if spent else 0.0


def run_servers(culprit, tmp, out=None, extra=()):
    script = servers_script(tmp)
    if out is None:
        cmd = ["bash", script]
    else:
        cmd = [culprit, "record", "-o", out, *extra, "--", "bash", script]
    p = subprocess.Popen(cmd, start_new_session=True, stderr=subprocess.PIPE, text=True)
    wait_ports()
    return p


def stop(p, timeout=60):
    try:
        os.killpg(p.pid, signal.SIGTERM) if p.args[0] == "bash" else p.send_signal(signal.SIGINT)
    except ProcessLookupError:
        pass
    try:
        _, err = p.communicate(timeout=timeout)
        return err or ""
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return ""


def dir_bytes(d):
    n = 0
    for root, _, files in os.walk(d):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def redis_pids():
    """The pids of the redis servers on PORTS (and their forked children): processes whose
    command line names redis and one of the ports (redis rewrites its title to
    `redis-server 127.0.0.1:PORT`)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"redis" in cmd and b"redis-benchmark" not in cmd and \
                any(f":{p}".encode() in cmd or f"--port {p}".encode() in cmd for p in PORTS):
            out.append(int(d))
    return out


def descendants(root):
    """`root` and every process below it."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_of(pids):
    """CPU seconds (user + system) of each of `pids` still alive, by pid."""
    return {p: c for p in pids if (c := cpu_seconds(p)) is not None}


def cpu_delta(before, after):
    """CPU seconds spent between two `cpu_of` samples by the processes in both (a process
    that started in between counts from 0)."""
    return sum(c - before.get(p, 0.0) for p, c in after.items())


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--culprit", required=True)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--keep", default="256M")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-fault", action="store_true")
    ap.add_argument("--baseline-seconds", type=float, default=30)
    ap.add_argument("--learn-seconds", type=float, default=20)
    ap.add_argument("--learn-runs", type=int, default=3,
                    help="normal runs to learn from (each --learn-seconds long): a start-up is "
                         "seen once per run, so more, shorter runs learn more of them")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--watch-arg", action="append", default=[],
                    help="one more argument for culprit watch (repeatable)")
    ap.add_argument("--interleave", type=int, default=0, metavar="ROUNDS",
                    help="measure overhead: ROUNDS untraced/traced segment pairs, no soak")
    ap.add_argument("--segment-seconds", type=float, default=20)
    ap.add_argument("--model", default=None,
                    help="a model learned by an earlier run (its normal.cpm): no learning")
    a = ap.parse_args()
    setup()
    culprit = os.path.abspath(a.culprit)
    out = a.out or tempfile.mkdtemp(prefix="culprit-soak-")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    res = {"minutes": a.minutes, "keep": a.keep, "seed": a.seed, "watch_args": a.watch_arg,
           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "loadavg_at_start": os.getloadavg()}

    if not a.interleave:
        log("untraced baseline")
        with tempfile.TemporaryDirectory() as tmp:
            p = run_servers(culprit, tmp)
            res["untraced_rps"] = load(a.baseline_seconds)
            res["untraced_loadavg"] = os.getloadavg()
            stop(p)

    model = os.path.abspath(a.model) if a.model else os.path.join(out, "normal.cpm")
    res["model"] = model
    log(f"{a.learn_runs} normal runs of {a.learn_seconds:g} s" if not a.model else f"model {model}")
    normals = []
    for i in range(a.learn_runs if not a.model else 0):
        d = os.path.join(out, f"normal{i}")
        shutil.rmtree(d, ignore_errors=True)
        with tempfile.TemporaryDirectory() as tmp:
            p = run_servers(culprit, tmp, d)
            # Short runs: smaller benchmark runs, so that a run lasts about what was asked.
            load(a.learn_seconds, 200000 if a.learn_seconds >= 20 else 40000)
            err = stop(p)
            if "culprit: recorded" not in err:
                log(f"normal run {i}: culprit record did not end cleanly: {err[-500:]}")
        normals.append(d)
    if not a.model:
        subprocess.run([culprit, "learn", *normals, "-o", model], check=True,
                       stderr=subprocess.DEVNULL, timeout=1800)
        res["learn_seconds"] = a.learn_seconds
        res["learn_runs"] = a.learn_runs

    if a.interleave:
        interleave(a, culprit, out, model, res)
        return

    soak = os.path.join(out, "soak")
    shutil.rmtree(soak, ignore_errors=True)
    extra = ["--keep", a.keep]
    # A replica reads its master link a few hundred times a second under this load: draw
    # the failing read so that it lands in the middle half of the run.
    if not a.no_fault:
        nth = rng.randint(int(a.minutes * 60 * 50), int(a.minutes * 60 * 150))
        spec = (f"read:errno=ECONNRESET,argv=*--port {PORTS[1]}*,peer-port={PORTS[0]},"
                f"nth={nth},count=1")
        extra += ["--inject", spec]
        res["inject"] = spec
    log("soak:", " ".join(extra))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        rec = run_servers(culprit, tmp, soak, extra)
        watch_err = open(os.path.join(out, "watch.err"), "w")
        watch = subprocess.Popen(
            [culprit, "watch", "--model", model, "--json", "--keep-around", "5s",
             *a.watch_arg, "--snapshots", os.path.join(out, "snapshots"), soak],
            stdout=subprocess.PIPE, stderr=watch_err, text=True)
        sizes = []
        rps = []
        loads = []
        # The directory's size, every second, from a thread of its own.
        import threading
        done = threading.Event()
        # watch's reports, read as they come: a pipe left unread fills (64 KiB) and
        # stops the watch in its next write.
        out_lines = []

        received = []

        def drain():
            with open(os.path.join(out, "watch.jsonl"), "w") as f:
                for line in watch.stdout:
                    received.append(time.time_ns())
                    out_lines.append(line)
                    f.write(line)
                    f.flush()
        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()

        def sample():
            while not done.wait(1.0):
                sizes.append(dir_bytes(soak))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        while time.monotonic() - t0 < a.minutes * 60:
            rps.append(load(min(10.0, a.minutes * 60 - (time.monotonic() - t0))))
            loads.append(os.getloadavg()[0])
        res["watch_cpu_s"] = cpu_seconds(watch.pid)
        elapsed = time.monotonic() - t0
        t_stop = time.monotonic()
        err = stop(rec, timeout=300)
        res["record_stop_s"] = time.monotonic() - t_stop
        done.set()
        sampler.join()
        watch.wait(timeout=600)
        drainer.join(timeout=60)
        reports = "".join(out_lines)
        watch_err.close()
    res["watch_stderr_tail"] = folds_said(os.path.join(out, "watch.err"))
    res["traced_loadavg_mean"] = sum(loads) / len(loads) if loads else None
    res["traced_rps"] = sum(rps) / len(rps) if rps else 0
    res["throughput_ratio"] = res["traced_rps"] / res["untraced_rps"] if res["untraced_rps"] else None
    res["watch_core_share"] = (res["watch_cpu_s"] or 0) / elapsed
    res["max_dir_bytes"] = max(sizes) if sizes else 0
    res["size_samples"] = len(sizes)
    m = re.search(r"(\d+)([KMG])", a.keep)
    res["budget_bytes"] = int(m.group(1)) << {"K": 10, "M": 20, "G": 30}[m.group(2)]
    # Two drain threads (culprit record's default) and the live copier, 256 KiB sub-buffers.
    res["budget_allowance_bytes"] = res["budget_bytes"] + 3 * (256 << 10)
    res["within_budget"] = res["max_dir_bytes"] <= res["budget_allowance_bytes"]
    res["record_stderr_tail"] = err.strip().splitlines()[-3:]
    with open(os.path.join(soak, "manifest.json")) as f:
        man = json.load(f)
    rot = {}
    if os.path.exists(os.path.join(soak, "rotated.json")):
        with open(os.path.join(soak, "rotated.json")) as f:
            rot = json.load(f)
    res["entries_kept"] = man["totals"]["entries"]
    res["entries_rotated"] = rot.get("entries", 0)
    res["lost"] = man["totals"]["lost"]
    reps = [json.loads(l) for l in reports.splitlines() if l.strip()]
    res["reports"] = len(reps)
    delays = [(r["reported_unix_ns"] - r["t_end_unix_ns"]) / 1e9 for r in reps]
    res["report_delay_p50_s"] = pct(delays, 0.5)
    res["report_delay_p99_s"] = pct(delays, 0.99)
    # Where the reports' delays went (the watch's `delay_ns` stages, and the printing:
    # from the report's making to this harness reading its line).
    stages = {}
    for k in ("next_unit", "to_poll", "unseen", "read", "rank"):
        xs = [r["delay_ns"][k] / 1e9 for r in reps if "delay_ns" in r]
        stages[k] = {"p50_s": pct(xs, 0.5), "p99_s": pct(xs, 0.99)}
    printing = [(t - r["reported_unix_ns"]) / 1e9 for r, t in zip(reps, received)]
    stages["printing"] = {"p50_s": pct(printing, 0.5), "p99_s": pct(printing, 0.99)}
    res["report_delay_stages"] = stages
    res["loadavg_samples"] = [min(loads), max(loads)] if loads else None
    res["watch_timing"] = watch_timing(os.path.join(out, "watch.err"))
    res["first_report_holds_injection"] = bool(reps and reps[0].get("injections"))
    res["first_report"] = {k: reps[0].get(k) for k in ("id", "score", "why")} if reps else None
    res["reports_with_injection"] = sum(1 for r in reps if r.get("injections"))
    res["reports_head"] = [{k: r.get(k) for k in ("id", "score", "kind", "t_end_unix_ns",
                                                  "reported_unix_ns", "injections", "why")}
                           for r in reps[:5]]
    # A reading of the final directory: any sequence gap (entries lost unaccounted) or
    # damage is a warning.
    chk = subprocess.run([culprit, "rank", "--model", model, "--top", "3", soak],
                         capture_output=True, text=True, timeout=1800)
    res["final_read_warnings"] = [l for l in chk.stderr.splitlines() if "warning" in l]
    # The snapshots watch took, and whether one holds the injected unit.
    snaps = sorted(os.path.join(out, "snapshots", s)
                   for s in os.listdir(os.path.join(out, "snapshots"))) \
        if os.path.isdir(os.path.join(out, "snapshots")) else []
    res["snapshots"] = snaps
    res["snapshot_holding_injection"] = None
    for s in snaps if not a.no_fault else []:
        r = subprocess.run([culprit, "rank", "--model", model, "--json", "--top", "1000000", s],
                           capture_output=True, text=True, timeout=1800)
        try:
            units = json.loads(r.stdout)
        except ValueError:
            continue
        hit = [u for u in units if u.get("injections")]
        if hit:
            res["snapshot_holding_injection"] = {"snapshot": s, "unit": hit[0]["id"],
                                                 "score": hit[0]["score"],
                                                 "rank": units.index(hit[0]) + 1}
            break
    res["ended_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    emit(a, res)


def folds_said(path):
    """What the watch said at its end: units reported, and units folded into the report
    of their process or connection kind with no model."""
    try:
        with open(path) as f:
            return [l.rstrip() for l in f
                    if ("reported" in l or "folded" in l) and "timing:" not in l][-23:]
    except OSError:
        return []


def watch_timing(path):
    """The watch's own timing summary (`culprit watch: timing: {...}`): polls, and the
    delay of every unit that completed, in stages."""
    try:
        with open(path) as f:
            for l in f:
                if l.startswith("culprit: watch: timing: {"):
                    return json.loads(l.split("timing: ", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def emit(a, res):
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def interleave(a, culprit, out, model, res):
    """Untraced and traced (`record --keep` + `watch`) segments in turn: the overhead."""
    rounds = []
    for r in range(a.interleave):
        row = {}
        log(f"round {r + 1}/{a.interleave}: untraced")
        with tempfile.TemporaryDirectory() as tmp:
            p = run_servers(culprit, tmp)
            pids = redis_pids()
            c0 = cpu_of(pids)
            t = time.monotonic()
            row["untraced_rps"] = load(a.segment_seconds)
            row["untraced_s"] = time.monotonic() - t
            row["untraced_redis_cpu_s"] = cpu_delta(c0, cpu_of(pids))
            row["untraced_loadavg"] = os.getloadavg()[0]
            stop(p)
        log(f"round {r + 1}/{a.interleave}: traced")
        d = os.path.join(out, f"traced{r}")
        shutil.rmtree(d, ignore_errors=True)
        with tempfile.TemporaryDirectory() as tmp:
            rec = run_servers(culprit, tmp, d, ["--keep", a.keep])
            err_path = os.path.join(out, f"watch-il{r}.err")
            watch_err = open(err_path, "w")
            watch = subprocess.Popen(
                [culprit, "watch", "--model", model, "--json", *a.watch_arg, d],
                stdout=subprocess.PIPE, stderr=watch_err, text=True)
            lines = []
            import threading
            drainer = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
            drainer.start()
            pids = redis_pids()
            # culprit record and its reader (the redis servers are below it too: left out).
            rec_pids = [q for q in descendants(rec.pid) if q not in pids]
            c0, r0, w0 = cpu_of(pids), cpu_of(rec_pids), cpu_seconds(watch.pid) or 0.0
            t = time.monotonic()
            row["traced_rps"] = load(a.segment_seconds)
            row["traced_s"] = time.monotonic() - t
            row["traced_redis_cpu_s"] = cpu_delta(c0, cpu_of(pids))
            row["record_cpu_s"] = cpu_delta(r0, cpu_of(rec_pids))
            row["watch_cpu_s"] = (cpu_seconds(watch.pid) or 0.0) - w0
            row["traced_loadavg"] = os.getloadavg()[0]
            stop(rec)
            watch.wait(timeout=600)
            drainer.join(timeout=60)
            row["watch_reports"] = len([l for l in lines if l.strip()])
            watch_err.close()
            row["watch_said"] = folds_said(err_path)[:2]
        shutil.rmtree(d, ignore_errors=True)
        log(f"round {r + 1}: {row}")
        rounds.append(row)
    res["rounds"] = rounds
    un = sum(r["untraced_rps"] * r["untraced_s"] for r in rounds)
    tr = sum(r["traced_rps"] * r["traced_s"] for r in rounds)
    un_s = sum(r["untraced_s"] for r in rounds)
    tr_s = sum(r["traced_s"] for r in rounds)
    res["untraced_rps"] = un / un_s
    res["traced_rps"] = tr / tr_s
    res["throughput_ratio"] = res["traced_rps"] / res["untraced_rps"]
    res["watch_core_share"] = sum(r["watch_cpu_s"] or 0 for r in rounds) / tr_s
    # The overhead inside redis: its own CPU time per request, traced over untraced (what
    # the tracer adds to each request, whatever else competes for the cores), and the
    # CPU the recorder and the watch take from the same two cores.
    un_req = un
    tr_req = tr
    res["untraced_redis_cpu_us_per_req"] = \
        1e6 * sum(r["untraced_redis_cpu_s"] for r in rounds) / un_req
    res["traced_redis_cpu_us_per_req"] = \
        1e6 * sum(r["traced_redis_cpu_s"] for r in rounds) / tr_req
    res["redis_cpu_per_req_ratio"] = \
        res["traced_redis_cpu_us_per_req"] / res["untraced_redis_cpu_us_per_req"]
    res["record_cpu_share"] = sum(r["record_cpu_s"] for r in rounds) / tr_s
    res["redis_cpu_share_untraced"] = sum(r["untraced_redis_cpu_s"] for r in rounds) / un_s
    res["redis_cpu_share_traced"] = sum(r["traced_redis_cpu_s"] for r in rounds) / tr_s
    res["untraced_loadavg_mean"] = sum(r["untraced_loadavg"] for r in rounds) / len(rounds)
    res["traced_loadavg_mean"] = sum(r["traced_loadavg"] for r in rounds) / len(rounds)
    res["ended_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    emit(a, res)


if __name__ == "__main__":
    main()
