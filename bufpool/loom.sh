#!/bin/sh
# Model-checks the sub-buffer handoff protocol (bufpool/src/slots.rs, `loom_model`) with loom.
# Explores every interleaving (no preemption bound unless LOOM_MAX_PREEMPTIONS is set).
# Usage: bufpool/loom.sh [extra cargo test args]
set -eu
cd "$(dirname "$0")/.."
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" exec cargo test -p bufpool --release --lib loom "$@"
