#!/usr/bin/env bash
# Culprit's main job, on the paper's case study (Maruyama & Matsuoka, IPDPS'08 §4): a ring
# of five event-driven Python daemons modelled on MPICH2's MPD (tests/ring/) is recorded
# three times while it works, a model of normal behaviour is learned, then a run is
# recorded in which ONE recv(8) of a message header on node 2 returns 3 bytes (injected
# from outside: the daemons are unchanged). Node 2 takes the short header for a lost
# connection and closes it, node 1 is reset, the ring hangs until the launcher's timeout.
# `culprit rank` then points at the units to look at.
#
#   ./scripts/demo.sh [OUTDIR]       (default: $TMPDIR/culprit-demo, replaced each time)
#
# Exits 0 when the story worked (the top-ranked unit is on node 2, whose connection broke,
# or on node 1, its peer), 1 otherwise. Environment: CULPRIT_DEMO_NODES (5),
# CULPRIT_DEMO_JOBS (20), CULPRIT_DEMO_SKIP_BUILD=1 to use the binaries already built,
# CULPRIT_DEMO_PROFILE (demo; or release),
# CULPRIT_DEMO_PYTHON to record through another interpreter command (`python3` for a
# pyenv shim: its bash and helper processes are then traced too).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-${TMPDIR:-/tmp}/culprit-demo}
NODES=${CULPRIT_DEMO_NODES:-5}
JOBS=${CULPRIT_DEMO_JOBS:-20}
BROKEN=2
PEER=1
# Node 2's receives: hello header, hello body, then header + body per job: the 11th is
# the header of job 4, mid-run.
FAULT="recv:short=3,argv=--id $BROKEN --nodes,nth=11"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
[ -t 1 ] || say() { printf '\n== %s\n' "$*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }

say "Setting up (a C compiler, the Python headers) and building Culprit (optimized: the demo profile)"
# Only what the demo uses: a C compiler and libc headers (to link Culprit and build the
# Python shim) and the interpreter's headers. The tests' browser, servers and Python
# packages are installed by ./scripts/test.sh (scripts/setup.sh), not here.
need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
[ -e "$(cc -print-file-name=crt1.o 2>/dev/null)" ] && [ "$(cc -print-file-name=crt1.o 2>/dev/null)" != crt1.o ] \
    || need_apt+=(libc6-dev)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    2>/dev/null || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "demo: apt-get install ${need_apt[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
# The `demo` profile (Cargo.toml): release code without debug information, in more codegen
# units: a fresh clone builds faster. CULPRIT_DEMO_PROFILE=release uses the release build.
PROFILE=${CULPRIT_DEMO_PROFILE:-demo}
if [ "${CULPRIT_DEMO_SKIP_BUILD:-0}" != 1 ]; then
    cargo build --profile "$PROFILE" --quiet -p cli -p tracer-preload
fi
CULPRIT=$TARGET/$PROFILE/culprit
[ -x "$CULPRIT" ] || fail "$CULPRIT not built"
[ -f "$TARGET/$PROFILE/libtrace.so" ] || fail "$TARGET/$PROFILE/libtrace.so not built"
# The real interpreter, not a wrapper script (a pyenv shim's shells would be traced too).
PY=${CULPRIT_DEMO_PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
# Nothing to install into it: `culprit record` brings the Python shim (python-hook).
RING=(--nodes "$NODES" --jobs "$JOBS")

rm -rf "$OUT"
mkdir -p "$OUT"
echo "demo: everything goes to $OUT"

say "1. Recording 3 normal runs of the ring ($NODES Python daemons, $JOBS jobs each)"
echo "   culprit record traces every daemon: libc socket calls (LD_PRELOAD) and Python calls."
for i in 1 2 3; do
    "$CULPRIT" record -o "$OUT/normal$i" -- "$PY" tests/ring/run_ring.py "${RING[@]}" --timeout 60 \
        >"$OUT/normal$i.log" 2>&1 || { cat "$OUT/normal$i.log"; fail "normal run $i failed"; }
    echo "   run $i: $(grep -h 'went round' "$OUT/normal$i.log" | sed 's/^run_ring: //')"
    echo "          $(grep -h '^culprit: recorded' "$OUT/normal$i.log" | sed 's/^culprit: //')"
done

say "2. Learning a model of normal behaviour"
echo "   Each daemon is cut into execution units (initializer, event-loop handlers, finalizer);"
echo "   the model gives each call-tree node the fraction of units it appears in."
"$CULPRIT" learn "$OUT"/normal{1,2,3} -o "$OUT/ring.model" 2>&1 | sed 's/^/   /'

say "3. Recording the faulty run: one recv(8) on node $BROKEN returns 3 bytes"
echo "   culprit record --inject '$FAULT'"
echo "   (the ring should hang; the launcher gives up after 8 s)"
set +e
"$CULPRIT" record -o "$OUT/faulty" --inject "$FAULT" -- \
    "$PY" tests/ring/run_ring.py "${RING[@]}" --timeout 8 >"$OUT/faulty.log" 2>&1
status=$?
set -e
sed 's/^/   | /' "$OUT/faulty.log"
[ "$status" = 3 ] || fail "the faulty run ended with status $status, not 3 (a hang)"

say "4. Ranking the faulty run's units by suspicion (highest first)"
echo "   Score = how far each unit's call tree is from its model (0 normal .. 1 never seen);"
echo "   INJECTED marks the unit holding the fault we caused (the ground truth, for this demo)."
"$CULPRIT" rank --model "$OUT/ring.model" "$OUT/faulty" --top 5 --mark-injections \
    --html "$OUT/report.html"
"$CULPRIT" rank --model "$OUT/ring.model" "$OUT/faulty" --json >"$OUT/ranking.json"

say "5. Checking the verdict"
verdict=$("$PY" - "$OUT" "$BROKEN" "$PEER" <<'EOF'
import json, sys
out, broken, peer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
units = json.load(open(out + "/ranking.json"))
procs = json.load(open(out + "/faulty/manifest.json"))["processes"]
node = {}
for p in procs:
    a = p.get("argv") or []
    if "--id" in a:
        node[p["pid"]] = int(a[a.index("--id") + 1])
if not units:
    print("FAIL no unit ranked"); sys.exit()
top = units[0]
n = node.get(top["pid"])
where = "node %s" % n if n is not None else "pid %d (not a ring daemon)" % top["pid"]
print("%s top unit %s: %s, %s unit, score %.3f — %s" % (
    "OK" if n in (broken, peer) else "FAIL", top["id"], where, top["kind"], top["score"],
    (top["why"] or ["(no reason given)"])[0]))
EOF
)
echo "   ${verdict#* }"
echo "   HTML report (every unit's score against time; click a point for its call tree):"
echo "   $OUT/report.html"
echo "   Look closer: $CULPRIT show --model $OUT/ring.model $OUT/faulty --unit $(
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["id"])' "$OUT/ranking.json")"
case $verdict in
OK*)
    echo
    echo "demo: the top unit is on node $BROKEN (which closed the connection) or node $PEER (its peer): found."
    say "Next: your own program (a few normal runs, a model, then the run to explain)"
    echo "   $CULPRIT record -o normal1 -- ./your-program ARGS    # again as normal2, normal3"
    echo "   $CULPRIT learn normal1 normal2 normal3 -o normal.model"
    echo "   $CULPRIT record -o bad -- ./your-program ARGS; $CULPRIT rank --model normal.model bad"
    ;;
*) fail "the top unit is not on node $BROKEN or node $PEER" ;;
esac
