#!/bin/sh
# Model-checks the sub-buffer handoff protocol (bufpool/src/slots.rs, `loom_model`) and the
# live copy of an owned sub-buffer (bufpool/src/live_model.rs) with loom.
# Explores every interleaving (no preemption bound unless LOOM_MAX_PREEMPTIONS is set; the live
# model, with four parties, at most 3 preemptions unless it is set).
# Usage: bufpool/loom.sh [extra cargo test args]
set -eu
cd "$(dirname "$0")/.."
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" exec cargo test -p bufpool --release --lib loom "$@"
