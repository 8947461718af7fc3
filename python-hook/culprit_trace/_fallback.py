"""Pure-Python fallback of the shim, for interpreters where ``_native`` cannot load.

It records the same entries as the C callback (through libtrace.so's
``culprit_emit_call`` / ``culprit_emit_return`` / ``culprit_emit_code``, called with
ctypes) from a ``sys.setprofile`` function, so it costs a Python function call plus
ctypes calls per event — several times the native path. ``culprit_trace.start()`` says
on stderr when it is used. Differences from the native path: builtins are keyed by
(module, qualname) instead of their PyMethodDef, so a method is named after the class it
was looked up on; call sites use ``frame.f_lasti // 2``.
"""
import ctypes
import os
import sys
import _thread

_PYCALL, _PYRETURN, _PYEXC, _PYCCALL, _PYCRETURN = 3, 4, 5, 6, 7
_CODE, _BUILTIN = 0, 1

try:
    _lib = ctypes.CDLL(None)
    _emit_call = _lib.culprit_emit_call
    _emit_return = _lib.culprit_emit_return
    _emit_code = _lib.culprit_emit_code
    _emit_call.argtypes = [ctypes.c_uint8, ctypes.c_uint64, ctypes.c_uint64]
    _emit_call.restype = None
    _emit_return.argtypes = [ctypes.c_uint8, ctypes.c_uint64, ctypes.c_uint16]
    _emit_return.restype = None
    _emit_code.argtypes = [ctypes.c_uint32, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_char_p,
                           ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    _emit_code.restype = None
    _ok = True
except (OSError, AttributeError):
    _ok = False

_indices = {}      # code object or builtin key -> index
_recorded = set()  # indices named in this process
_next = [1]


def _after_fork():
    _recorded.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def available():
    return _ok


def _index(key, kind, name, file, line):
    i = _indices.get(key)
    if i is None:
        i = _indices[key] = _next[0]
        _next[0] += 1
    if i not in _recorded:
        n = name.encode("utf-8", "replace")
        f = file.encode("utf-8", "replace")
        _emit_code(i, kind, line, n, len(n), f, len(f))
        _recorded.add(i)
    return i


def _code_index(frame):
    co = frame.f_code
    i = _indices.get(co)
    if i is not None and i in _recorded:
        return i
    mod = frame.f_globals.get("__name__", "?")
    return _index(co, _CODE, "%s.%s" % (mod, co.co_qualname), co.co_filename, co.co_firstlineno)


def _builtin_index(fn):
    self = getattr(fn, "__self__", None)
    if self is not None and not isinstance(self, type(sys)):
        t = type(self)
        name = "%s.%s.%s" % (t.__module__, t.__qualname__, fn.__name__)
    else:
        name = "%s.%s" % (getattr(fn, "__module__", None) or "builtins", fn.__name__)
    i = _indices.get(name)
    if i is not None and i in _recorded:
        return i
    return _index(name, _BUILTIN, name, "", 0)


def _site(frame):
    if frame is None:
        return 0
    return (_code_index(frame) << 16) | min(max(frame.f_lasti, 0) // 2, 0xffff)


def _make_profiler(boundary=None):
    depth = [0]

    def profile(frame, event, arg):
        if event == "call":
            back = frame.f_back
            site = 0 if back is None or back is boundary else _site(back)
            depth[0] += 1
            _emit_call(_PYCALL, site, _code_index(frame))
        elif event == "return":
            if depth[0] <= 0:
                return
            depth[0] -= 1
            # sys.setprofile cannot tell a return of None from an exception exit.
            _emit_return(_PYRETURN, _code_index(frame), 0)
        elif event == "c_call":
            depth[0] += 1
            _emit_call(_PYCCALL, _site(frame), _builtin_index(arg))
        elif event in ("c_return", "c_exception"):
            if depth[0] <= 0:
                return
            depth[0] -= 1
            _emit_return(_PYCRETURN, _builtin_index(arg), 1 if event == "c_exception" else 0)

    profile._culprit = True
    return profile


def start():
    p = sys.getprofile()
    if getattr(p, "_culprit", False):
        return
    sys.setprofile(_make_profiler())


def stop():
    if getattr(sys.getprofile(), "_culprit", False):
        sys.setprofile(None)


def active():
    return getattr(sys.getprofile(), "_culprit", False)


def call_traced(func, args):
    sys.setprofile(None)
    sys.setprofile(_make_profiler(sys._getframe(0)))
    try:
        return func(*args)
    finally:
        sys.setprofile(None)


_orig_start_new_thread = None


def _thread_entry(func, args, kwargs=None):
    start()
    try:
        func(*args, **(kwargs or {}))
    except SystemExit:
        pass


def wrap_threads():
    global _orig_start_new_thread
    if _orig_start_new_thread is not None:
        return
    _orig_start_new_thread = orig = _thread.start_new_thread

    def start_new_thread(function, args, kwargs=None):
        if not isinstance(args, tuple) or (kwargs is not None and not isinstance(kwargs, dict)):
            return orig(function, args, *([kwargs] if kwargs is not None else []))
        return orig(_thread_entry, (function, args, kwargs))

    _thread.start_new_thread = start_new_thread
    if hasattr(_thread, "start_new"):
        _thread.start_new = start_new_thread
    threading = sys.modules.get("threading")
    if threading is not None and getattr(threading, "_start_new_thread", None) is orig:
        threading._start_new_thread = start_new_thread
