"""culprit_trace — Culprit's Python tracing shim.

Records every Python call, return and exception, and every call of a C function
(builtin) from Python, into the shared-memory pool of ``libtrace.so`` (Culprit's
``LD_PRELOAD`` library), from every thread, with a C profile callback
(``PyEval_SetProfile``) that does no string work per event.

Two ways in:

* ``culprit record -- python3 prog.py ARGS…``: the ``culprit_trace.pth`` start-up hook
  installed with the package sees ``CULPRIT_POOL`` and libtrace's symbols and starts
  tracing before ``prog.py`` runs — in every Python process of the job, including
  children of ``subprocess``, ``multiprocessing`` (fork and spawn) and ``os.fork``.
* ``python3 -m culprit_trace prog.py ARGS…`` / ``python3 -m culprit_trace -m module ARGS…``:
  runs the program under tracing (re-executing the interpreter with ``LD_PRELOAD`` if
  libtrace.so is not loaded yet).

Library use::

    import culprit_trace
    if culprit_trace.start():       # False: libtrace.so not loaded, nothing recorded
        ...
"""

__all__ = ["start", "stop", "available", "active", "flush", "backend"]

import os as _os

_native_error = None
try:
    if _os.environ.get("CULPRIT_PY_FALLBACK") == "1":
        raise ImportError("CULPRIT_PY_FALLBACK=1")
    from . import _native
except ImportError as e:  # depends on the build
    _native = None
    _native_error = e

_started = False
_backend = None
_mode = None


def mode():
    """'profile' (PyEval_SetProfile: Python calls, returns, exceptions and builtins) or
    'frames' (PEP 523 frame evaluation: Python frames only, about half the cost, exception
    types known). Chosen with CULPRIT_PY_MODE; the default is 'profile'."""
    global _mode
    if _mode is None:
        want = _os.environ.get("CULPRIT_PY_MODE", "profile")
        if want == "frames" and _native is not None and getattr(_native, "PY311_INTERNALS", 0):
            _mode = "frames"
        else:
            if want not in ("profile", "frames"):
                import sys
                sys.stderr.write("culprit_trace: unknown CULPRIT_PY_MODE=%s; using profile\n" % want)
            elif want == "frames":
                import sys
                sys.stderr.write("culprit_trace: frames mode needs the C extension on CPython 3.11; "
                                 "using profile\n")
            _mode = "profile"
    return _mode


def backend():
    """'native', 'python' (the pure-Python fallback) or None if not started."""
    return _backend


def available():
    """True if libtrace.so's C ABI is present in this process."""
    if _native is not None:
        return _native.available()
    from . import _fallback
    return _fallback.available()


def _prepare():
    """Chooses the backend and makes every thread started from now on traced, without
    tracing the calling thread yet. Returns False if libtrace.so is not loaded."""
    global _backend
    if _backend is not None:
        return True
    import sys
    import _thread
    if _native is not None:
        if not _native.available():
            return False
        if mode() == "profile":
            _native.wrap_threads(_thread, sys.modules.get("threading"))
            _native.wrap_sys(sys)
        _hide_own_code()
        _backend = "native"
        return True
    from . import _fallback
    if not _fallback.available():
        return False
    sys.stderr.write("culprit_trace: the C extension cannot be loaded (%s); using the "
                     "pure-Python fallback (slower, same entries)\n" % (_native_error,))
    _fallback.wrap_threads()
    _backend = "python"
    return True


def start():
    """Starts tracing in this process: the calling thread now, every thread started
    later through ``_thread``/``threading``. Returns False (and records nothing) if
    libtrace.so is not loaded. Idempotent."""
    global _started
    if _started:
        return True
    if not _prepare():
        return False
    if _backend == "native":
        if mode() == "frames":
            _native.start_frames()
        else:
            _native.start()
    else:
        from . import _fallback
        _fallback.start()
    _started = True
    return True


def _hide_own_code():
    """The shim's functions are never recorded (frames mode and profile mode)."""
    import sys
    import types
    for modname in ("culprit_trace", "culprit_trace.__main__", "__main__"):
        m = sys.modules.get(modname)
        if m is None or not getattr(m, "__file__", "").startswith(_os.path.dirname(__file__)):
            continue
        for v in list(vars(m).values()):
            if isinstance(v, types.FunctionType):
                _native.hide(v.__code__)


def resume():
    """Traces the calling thread again after `call_traced` (frames already running are
    not recorded)."""
    if _backend == "native":
        if mode() == "frames":
            return  # still installed: it serves every thread
        _native.start()
    elif _backend == "python":
        from . import _fallback
        _fallback.start()


def call_traced(func, *args):
    """Calls ``func(*args)`` traced on the calling thread, as a root of the trace (the
    caller's frames are not recorded), then stops tracing this thread. Used by
    ``python3 -m culprit_trace`` to record exactly what the program does."""
    if not _prepare():
        raise RuntimeError("libtrace.so is not loaded")
    if _backend == "native":
        return _native.call_traced(func, args, mode() == "frames")
    from . import _fallback
    return _fallback.call_traced(func, args)


def stop():
    """Stops tracing on the calling thread (other threads keep their callback)."""
    if _backend == "native":
        if mode() == "frames":
            _native.stop_frames()
        else:
            _native.stop()
    elif _backend == "python":
        from . import _fallback
        _fallback.stop()


def active():
    """True if the calling thread is being traced."""
    if _backend == "native":
        return _started if mode() == "frames" else _native.active()
    if _backend == "python":
        from . import _fallback
        return _fallback.active()
    return False


def flush():
    """Publishes the calling thread's current sub-buffer so readers see it now."""
    if _native is not None:
        _native.flush()
