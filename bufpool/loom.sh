#!/bin/sh
# Model-checks the sub-buffer handoff protocol (bufpool/src/slots.rs, `loom_model`) with loom.
# Usage: bufpool/loom.sh [extra cargo test args]
set -eu
cd "$(dirname "$0")/.."
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    exec cargo test -p bufpool --release --lib loom "$@"
