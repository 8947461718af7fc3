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
    try:
        from . import _native  # built by `pip install ./python-hook`
    except ImportError:
        from . import _bootstrap  # the copy `culprit record` prepared: per-ABI cache
        _native = _bootstrap.load()
except ImportError as e:  # depends on the build
    _native = None
    _native_error = e

_started = False
_backend = None
_mode = None


def _default_mode():
    """The cheapest mode this interpreter has: monitor (3.12+), frames (3.11), profile."""
    if _native is not None and getattr(_native, "MONITORING", 0):
        return "monitor"
    if _native is not None and getattr(_native, "PY311_INTERNALS", 0):
        return "frames"
    return "profile"


def mode():
    """'profile' (PyEval_SetProfile: Python calls, returns, exceptions and builtins),
    'frames' (PEP 523 frame evaluation, CPython 3.11: Python frames only, exception types
    known) or 'monitor' (sys.monitoring callbacks in C, CPython 3.12+: Python frames,
    exception types, and builtins with CULPRIT_PY_BUILTINS=1). Chosen with CULPRIT_PY_MODE;
    the default is the cheapest the interpreter has (see README.md)."""
    global _mode
    if _mode is None:
        want = _os.environ.get("CULPRIT_PY_MODE", "") or _default_mode()
        ok = {
            "profile": True,
            "frames": _native is not None and getattr(_native, "PY311_INTERNALS", 0),
            "monitor": _native is not None and getattr(_native, "MONITORING", 0),
        }
        if ok.get(want):
            _mode = want
        else:
            import sys
            _mode = _default_mode() if _native is not None else "profile"
            if want not in ok:
                sys.stderr.write("culprit_trace: unknown CULPRIT_PY_MODE=%s; using %s\n" % (want, _mode))
            elif _native is not None:
                need = "CPython 3.11" if want == "frames" else "CPython 3.12 or later"
                sys.stderr.write("culprit_trace: %s mode needs %s; using %s\n" % (want, need, _mode))
    return _mode


def _builtins():
    """Monitor mode also records calls of C functions (CULPRIT_PY_BUILTINS=1)."""
    return _os.environ.get("CULPRIT_PY_BUILTINS") == "1"


def _how():
    """The mode as _native.call_traced's number."""
    return {"profile": 0, "frames": 1, "monitor": 3 if _builtins() else 2}[mode()]


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
            _wrap_joinable_threads(_thread, sys.modules.get("threading"))
            _native.wrap_sys(sys)
        _hide_own_code()
        _backend = "native"
        _follow_greenlets()
        _inject_rules()
        return True
    from . import _fallback
    if not _fallback.available():
        return False
    sys.stderr.write("culprit: %s (CPython %d.%d.%d): C extension unavailable (%s); Python "
                     "functions traced by the pure-Python fallback (slower, exception exits "
                     "not told apart)\n" % ((sys.executable,) + tuple(sys.version_info[:3])
                                            + (_native_error,)))
    _fallback.wrap_threads()
    _backend = "python"
    _inject_rules()
    return True


def _follow_greenlets():
    """Greenlet switches reported as suspensions and resumptions (``_greenlets``)."""
    if not hasattr(_native, "watch_greenlets"):
        return
    try:
        from . import _greenlets
        _greenlets.install(_native)
    except Exception as e:  # pragma: no cover - defensive: never stop the program
        import sys
        sys.stderr.write("culprit: greenlet switches not followed: %r\n" % (e,))


def _inject_rules():
    """Applies the ``py:`` rules of ``CULPRIT_INJECT`` (code-level faults, ``_inject``)."""
    if "py:" not in _os.environ.get("CULPRIT_INJECT", ""):
        return
    try:
        from . import _inject
        _inject.install()
    except Exception as e:  # pragma: no cover - defensive: never stop the program
        import sys
        sys.stderr.write("culprit: --inject: py: rules not applied: %r\n" % (e,))


def _wrap_joinable_threads(thread_mod, threading):
    """CPython 3.13's threading starts threads with _thread.start_joinable_thread: its
    threads get the profile callback first thing, as those of start_new_thread do."""
    orig = getattr(thread_mod, "start_joinable_thread", None)
    if orig is None or getattr(orig, "_culprit_wrapped", False):
        return
    import functools
    entry = _native.thread_entry

    def start_joinable_thread(function, *args, **kwargs):
        return orig(functools.partial(entry, function, ()), *args, **kwargs)

    start_joinable_thread._culprit_wrapped = True
    start_joinable_thread.__doc__ = orig.__doc__
    _native.hide(start_joinable_thread.__code__)
    thread_mod.start_joinable_thread = start_joinable_thread
    if threading is not None and getattr(threading, "_start_joinable_thread", None) is orig:
        threading._start_joinable_thread = start_joinable_thread


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
        elif mode() == "monitor":
            _native.start_monitor(_builtins())
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
        if mode() in ("frames", "monitor"):
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
        return _native.call_traced(func, args, _how())
    from . import _fallback
    return _fallback.call_traced(func, args)


def stop():
    """Stops tracing on the calling thread (other threads keep their callback)."""
    if _backend == "native":
        if mode() == "frames":
            _native.stop_frames()
        elif mode() == "monitor":
            _native.stop_monitor()
        else:
            _native.stop()
    elif _backend == "python":
        from . import _fallback
        _fallback.stop()


def active():
    """True if the calling thread is being traced."""
    if _backend == "native":
        return _started if mode() in ("frames", "monitor") else _native.active()
    if _backend == "python":
        from . import _fallback
        return _fallback.active()
    return False


def flush():
    """Publishes the calling thread's current sub-buffer so readers see it now."""
    if _native is not None:
        _native.flush()
