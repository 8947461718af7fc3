#!/bin/sh
# Fuzzes every input format Culprit reads, with cargo-fuzz (libFuzzer), SECONDS seconds in
# all (default 72), split evenly between the targets:
#   decode    the entry decoder and its fast paths
#   chunk     chunk files of records with valid checksums and garbage entries, read back by
#             TraceDir, its summary, the analyses' decoding and `learn`
#   manifest  manifest.json, parsed and stood in for when damaged
#   model     model files
#   cios      IO-sample files (`culprit iosample`), parsed per record and into a SampleLog
#   cputsv    the reader's cpu.tsv, and the CPU time per interval built from it
# Each run is bounded in time (-max_total_time), input size (-max_len) and memory
# (-rss_limit_mb); a panic, a hang (-timeout) or an allocation over the limit fails it.
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly compiler flags; on a stable
# toolchain RUSTC_BOOTSTRAP=1 unlocks them.
# Usage: bufpool/fuzz/run.sh [SECONDS] [TARGET...]
set -eu
secs="${1:-72}"
[ $# -gt 0 ] && shift
targets="${*:-decode chunk manifest model cios cputsv}"
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
        chunk|cios|cputsv)
            (cd ../.. && CULPRIT_FUZZ_SEED_DIR="$PWD/bufpool/fuzz/corpus" \
                cargo test -q -p analyzer --test fuzz_seeds write_fuzz_seeds -- --ignored >/dev/null) ;;
        esac
    fi
    # stderr of the target closed (-close_fd_mask=2) where it warns about the damage it
    # is fed; libFuzzer's own report still goes out.
    quiet=""
    case "$t" in
    decode) max=4096 ;;
    chunk) max=16384; quiet="-close_fd_mask=2" ;;
    cios|cputsv) max=16384 ;;
    *) max=65536 ;;
    esac
    echo "== fuzzing $t for $each s" >&2
    cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$each" -max_len="$max" \
        -timeout=10 -rss_limit_mb=2048 $quiet
done
