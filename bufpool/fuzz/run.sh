#!/bin/sh
# Fuzzes the trace decoder for SECONDS seconds (default 20) with cargo-fuzz (libFuzzer).
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly compiler flags; on a stable
# toolchain RUSTC_BOOTSTRAP=1 unlocks them.
# Usage: bufpool/fuzz/run.sh [SECONDS]
set -eu
secs="${1:-20}"
cd "$(dirname "$0")"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
mkdir -p corpus/decode
# Seed the corpus with real entry streams (written by the seed test).
if [ -z "$(ls corpus/decode)" ]; then
    (cd ../.. && CULPRIT_FUZZ_SEED_DIR="$PWD/bufpool/fuzz/corpus/decode" \
        cargo test -q -p bufpool --test format_props write_fuzz_seeds -- --ignored >/dev/null)
fi
export RUSTC_BOOTSTRAP=1
exec cargo fuzz run decode corpus/decode -- -max_total_time="$secs" -max_len=4096
