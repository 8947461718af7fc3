#!/usr/bin/env bash
# The `perfetto` package from PyPI: it ships `perfetto_trace_pb2`, the official protobuf
# schema of Perfetto traces, with which the tests decode `culprit export --format perfetto`.
set -euo pipefail
python3 -c 'from perfetto.protos.perfetto.trace import perfetto_trace_pb2' 2>/dev/null && exit 0
echo "setup: pip install perfetto" >&2
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore perfetto
