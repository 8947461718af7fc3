"""Imported by ``culprit_trace.pth`` at interpreter start-up when ``CULPRIT_POOL`` is set
(i.e. under ``culprit record``). Starts tracing if libtrace.so is loaded in this process;
otherwise does nothing. Never raises: a tracer must not stop the program.

Under ``python3 -m culprit_trace prog.py`` it only prepares: the runner starts tracing
exactly where the program starts, so the trace holds what ``python3 prog.py`` would.
"""


def _runner_will_start(argv):
    """True if the command line is `python3 [options] -m culprit_trace ...`."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-") or a in ("-", "--"):
            return False
        for j in range(1, len(a)):
            c = a[j]
            if c == "m":
                mod = a[j + 1:] or (argv[i + 1] if i + 1 < len(argv) else "")
                return mod == "culprit_trace"
            if c == "c":
                return False
            if c in "XW":
                if j + 1 == len(a):
                    i += 1  # the value is the next argument
                break
        i += 1
    return False


def _orig_argv(sys):
    """The interpreter's own command line: sys.orig_argv (3.10+), else /proc/self/cmdline."""
    argv = getattr(sys, "orig_argv", None)
    if argv is not None:
        return argv
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


try:
    import sys as _sys
    import culprit_trace as _ct
    if _runner_will_start(_orig_argv(_sys)):
        _ct._prepare()
    else:
        _ct.start()
except Exception as _e:  # pragma: no cover - defensive
    import os as _os
    if _os.environ.get("CULPRIT_PY_DEBUG"):
        import sys as _sys
        _sys.stderr.write("culprit_trace: not tracing: %r\n" % (_e,))
