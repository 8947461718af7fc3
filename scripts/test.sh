#!/usr/bin/env bash
# Runs every test of Culprit: installs what the tests need, builds the whole workspace
# (the end-to-end tests run the built `culprit` and `libtrace.so`), checks lints, runs
# the loom model check and a short fuzzing run, then the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# A clean CI checkout builds once: incremental compilation's caches (several GB for this
# workspace's test binaries) would only take disk. The CI run of 2026-11-28 stopped at the
# build with "No space left on device".
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi

./scripts/setup.sh

echo "== build" >&2
cargo build --workspace --all-targets

echo "== fmt + clippy" >&2
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== doc" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

if [ -x bufpool/loom.sh ]; then
    echo "== loom model check of the sub-buffer handoff" >&2
    bufpool/loom.sh
fi
if [ -x bufpool/fuzz/run.sh ]; then
    echo "== fuzzing: decoder, chunks, manifest, model, .cios, cpu.tsv (${CULPRIT_FUZZ_SECONDS:-72} s)" >&2
    bufpool/fuzz/run.sh "${CULPRIT_FUZZ_SECONDS:-72}"
fi

echo "== tests" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast 2>&1 | tee "$log" || status=$?
# One closing line over every test binary (cargo's last line is often a doc-test run
# of a crate without doc tests). "skipped" counts the parts of end-to-end tests that could
# not run here: each prints one `TEST: SKIPPED PART: WHY` line (`tests::skip`); under CI
# (CI=true) they fail instead, so there it must be 0. Cargo's ignored tests (entry points
# of child processes, the fuzz-seed writer: run by other means) are reported the line before.
# The Python tests run every CPython 3.9-3.13 the machine has (pyenv's, else python3.X on
# PATH: the discovery of tests/tests/python_trace.rs); the versions it lacks are named and
# counted as skipped.
missing=()
for v in 3.9 3.10 3.11 3.12 3.13; do
    ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".*/bin/"python$v" >/dev/null 2>&1 \
        || command -v "python$v" >/dev/null || missing+=("$v")
done
if [ ${#missing[@]} -gt 0 ]; then
    cpython="CPython ${missing[*]}: SKIPPED (not on this machine)"
else
    cpython="CPython 3.9-3.13: all tested"
fi
awk -v cpython="$cpython" -v nmissing="${#missing[@]}" '
     /^test result:/ { p += $4; f += $6; i += $8 }
     /: SKIPPED / { s += 1; print }
     END {
         printf "Ignored by cargo: %d (#[ignore]d entry points and seed writers, run by other means)\n", i
         print cpython
         printf "Tests: %d passed, %d failed, %d skipped\n", p, f, s + nmissing
     }' "$log"
exit "$status"
