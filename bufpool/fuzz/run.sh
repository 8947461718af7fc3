#!/bin/sh
# Fuzzes the trace decoder, the manifest parser and the model-file reader with cargo-fuzz
# (libFuzzer), SECONDS seconds in all (default 30), split between the three targets.
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly compiler flags; on a stable
# toolchain RUSTC_BOOTSTRAP=1 unlocks them.
# Usage: bufpool/fuzz/run.sh [SECONDS] [TARGET...]   (targets: decode manifest model)
set -eu
secs="${1:-30}"
[ $# -gt 0 ] && shift
targets="${*:-decode manifest model}"
cd "$(dirname "$0")"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
n=$(echo $targets | wc -w)
each=$(( secs / n ))
[ "$each" -ge 1 ] || each=1
export RUSTC_BOOTSTRAP=1
for t in $targets; do
    mkdir -p "corpus/$t"
    # Seed the corpora with real inputs (written by the seed tests).
    if [ -z "$(ls "corpus/$t")" ]; then
        case "$t" in
        decode)
            (cd ../.. && CULPRIT_FUZZ_SEED_DIR="$PWD/bufpool/fuzz/corpus/decode" \
                cargo test -q -p bufpool --test format_props write_fuzz_seeds -- --ignored >/dev/null) ;;
        manifest|model)
            (cd ../.. && CULPRIT_FUZZ_SEED_DIR="$PWD/bufpool/fuzz/corpus" \
                cargo test -q -p analyzer --test model_file_checks write_fuzz_seeds -- --ignored >/dev/null) ;;
        esac
    fi
    case "$t" in
    decode) max=4096 ;;
    *) max=65536 ;;
    esac
    echo "== fuzzing $t for $each s" >&2
    cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$each" -max_len="$max"
done
