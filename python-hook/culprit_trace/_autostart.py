"""Imported by ``culprit_trace.pth`` at interpreter start-up when ``CULPRIT_POOL`` is set
(i.e. under ``culprit record``). Starts tracing if libtrace.so is loaded in this process;
otherwise does nothing. Never raises: a tracer must not stop the program."""

try:
    import culprit_trace as _ct
    _ct.start()
except Exception as _e:  # pragma: no cover - defensive
    import os as _os
    if _os.environ.get("CULPRIT_PY_DEBUG"):
        import sys as _sys
        _sys.stderr.write("culprit_trace: not tracing: %r\n" % (_e,))
