"""Code-level fault injection: the ``py:`` rules of ``CULPRIT_INJECT``.

``culprit record --inject 'py:MODULE:QUALNAME:raise=EXCEPTION,nth=5'`` makes the Python
function ``QUALNAME`` of module ``MODULE`` (``func``, ``Class.method``; static, class and
``async`` methods included) raise ``EXCEPTION`` (a builtin name such as ``TimeoutError``, or
a dotted ``module.Name``) instead of running, on the calls the rule selects. The keys mean
what they mean for a libc rule (``bufpool::inject``): a per-process counter of the
function's calls (a forked child starts again at zero); ``nth=N`` only the N-th call;
``after=N`` the calls after the N-th; ``count=N`` at most N injections; ``prob=P`` with
``seed=S`` a deterministic splitmix64 draw per call; ``at=T`` only calls from the UNIX time
T on and ``after-s=S`` only calls S seconds or more after the shim started (or the fork),
earlier calls not counted; ``pid=``, ``exe=``, ``argv=`` select
processes. ``culprit record`` has validated the rules; ``libtrace.so`` ignores them.

The function is replaced when its module is imported (at once if it already is), by a
wrapper whose own frames are not recorded (``_native.pass_through``: the function it calls
is recorded as called by the program, so the calls that do not raise look as they did
without the rule); an injected call runs a stand-in with the function's name, file and
first line that raises, so the trace shows the function raising the exception, as a
fault inside it would. Each injection is recorded in the calling thread's
trace like every injection — a ``MetaInject`` record with the rule's index and text
(``culprit_emit_inject`` of libtrace's C ABI) — before the exception is raised. A rule that
cannot be applied (module or function not found, not a Python function, no recording in
this process) is reported in one line on stderr and injects nothing. Never raises into the
program except the injected exception.
"""

import os
import sys

ENV = "CULPRIT_INJECT"
_rules = []  # every py: rule bound to this process
_pending = {}  # module name -> rules waiting for its import
_emit = None  # libtrace's culprit_emit_inject, through ctypes
_hidden = set()


def _say(msg):
    try:
        sys.stderr.write("culprit: --inject: %s\n" % msg)
    except Exception:
        pass


def _glob(pat, text):
    import fnmatch
    # fnmatch also knows [...]: the injector's globs have only * and ?.
    return fnmatch.fnmatchcase(text, pat.replace("[", "[[]"))


class _Rule(object):
    def __init__(self, index, text):
        self.index = index
        self.text = text
        head, _, keys = text.partition(",")
        _py, self.module, self.qualname, effect = head.split(":", 3)
        self.exception = effect.partition("=")[2]
        self.keys = {}
        for kv in keys.split(",") if keys else ():
            k, _, v = kv.partition("=")
            self.keys[k] = v
        self.nth = int(self.keys["nth"]) if "nth" in self.keys else None
        self.after = int(self.keys["after"]) if "after" in self.keys else None
        self.count = int(self.keys.get("count", "0"))
        self.seed = int(self.keys.get("seed", "0"))
        self.at = float(self.keys["at"]) if "at" in self.keys else None
        self.after_s = float(self.keys["after-s"]) if "after-s" in self.keys else None
        self.threshold = None
        if "prob" in self.keys:
            p = float(self.keys["prob"])
            self.threshold = None if p >= 1.0 else int(p * 18446744073709551616.0)
        self.reset()

    def reset(self):
        import _thread
        import time
        self.lock = _thread.allocate_lock()
        self.seen = 0
        self.fired = 0
        start = time.time()
        self.from_t = max(self.at or 0.0, start + self.after_s if self.after_s is not None else 0.0)

    def applies(self):
        if "pid" in self.keys and int(self.keys["pid"]) != os.getpid():
            return False
        if "exe" in self.keys:
            pat = self.keys["exe"]
            try:
                exe = os.readlink("/proc/self/exe")
            except OSError:
                exe = sys.executable or ""
            if not _glob(pat, exe if "/" in pat else os.path.basename(exe)):
                return False
        if "argv" in self.keys:
            try:
                with open("/proc/self/cmdline", "rb") as f:
                    raw = f.read()
                line = " ".join(a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1])
            except OSError:
                line = " ".join(sys.argv)
            if not _glob("*" + self.keys["argv"] + "*", line):
                return False
        return True

    def decide(self):
        """Counts one call; True when this call is to raise."""
        if self.from_t:
            import time
            if time.time() < self.from_t:
                return False
            self.from_t = 0.0
        with self.lock:
            self.seen += 1
            c = self.seen
            if self.nth is not None and c != self.nth:
                return False
            if self.after is not None and c <= self.after:
                return False
            if self.threshold is not None and _splitmix64_nth(self.seed, c) >= self.threshold:
                return False
            if self.count and self.fired >= self.count:
                return False
            self.fired += 1
            return True

    def exception_class(self):
        name = self.exception
        if "." not in name:
            import builtins
            exc = getattr(builtins, name, None)
        else:
            import importlib
            modname, _, attr = name.rpartition(".")
            exc = getattr(importlib.import_module(modname), attr, None)
        if not (isinstance(exc, type) and issubclass(exc, BaseException)):
            raise LookupError("%s is not an exception class" % name)
        return exc

    def fire(self):
        """Records the injection, then returns the exception to raise (None: not applied)."""
        try:
            exc = self.exception_class()
        except Exception as e:
            _say("rule %d (%s): %s; not injected" % (self.index, self.text, e))
            return None
        spec = self.text.encode("utf-8", "surrogateescape")
        _emit(self.index, spec, len(spec))
        return exc("injected by culprit (rule %d: %s)" % (self.index, self.text))


def _splitmix64_nth(seed, n):
    m = (1 << 64) - 1
    z = (seed + n * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _hide_code(code):
    """Frames of this code are never recorded (the shim's own work is not the program's)."""
    if code in _hidden:
        return
    _hidden.add(code)
    try:
        from . import _native
        if _native is not None:
            _native.hide(code)
    except Exception:
        pass


def _hide_module():
    import types
    for v in list(globals().values()):
        fns = [v] if isinstance(v, types.FunctionType) else []
        if isinstance(v, type) and v.__module__ == __name__:
            fns = [f for f in vars(v).values() if isinstance(f, types.FunctionType)]
        for f in fns:
            _hide_code(f.__code__)


def _pass_through(code):
    """Frames of this code are not recorded, but the frames it calls are, as called from
    its caller: the wrapper of an injected function is invisible in the trace, and the
    function it calls is recorded as the program called it (hiding the wrapper as the
    shim's own code would hide the function under it too, on every call: every unit that
    calls it would depart from normal)."""
    try:
        from . import _native
        if _native is not None and hasattr(_native, "pass_through"):
            _native.pass_through(code)
            return
    except Exception:
        pass
    _hide_code(code)


def _stand_in(fn, is_async):
    """A function a trace cannot tell from ``fn`` — the same module (its globals), name,
    qualified name, file and first line, which are what key a Python frame in a trace —
    whose body raises the exception it is given: an injected call is recorded as a call
    of ``fn`` that raised, as a fault inside ``fn`` would be. None if it cannot be made
    (the exception is then raised by the wrapper, recorded in the caller)."""
    import types
    if is_async:
        async def raiser(_culprit_exc):
            raise _culprit_exc
    else:
        def raiser(_culprit_exc):
            raise _culprit_exc
    try:
        code = fn.__code__
        same = {"co_name": code.co_name, "co_filename": code.co_filename,
                "co_firstlineno": code.co_firstlineno}
        if hasattr(code, "co_qualname"):
            same["co_qualname"] = code.co_qualname
        out = types.FunctionType(raiser.__code__.replace(**same), fn.__globals__, fn.__name__)
        out.__qualname__ = fn.__qualname__
        return out
    except Exception:
        return None


def _wrap(fn, rule):
    import functools
    import inspect
    is_async = inspect.iscoroutinefunction(fn)
    stand_in = _stand_in(fn, is_async)
    if is_async:
        async def culprit_injected(*args, **kwargs):
            if rule.decide():
                exc = rule.fire()
                if exc is not None:
                    if stand_in is None:
                        raise exc
                    await stand_in(exc)
            return await fn(*args, **kwargs)
    else:
        def culprit_injected(*args, **kwargs):
            if rule.decide():
                exc = rule.fire()
                if exc is not None:
                    if stand_in is None:
                        raise exc
                    stand_in(exc)
            return fn(*args, **kwargs)
    _pass_through(culprit_injected.__code__)
    out = functools.wraps(fn)(culprit_injected)
    out._culprit_rule = rule.index
    return out


def _apply(module, rule):
    import types
    owner = module
    parts = rule.qualname.split(".")
    try:
        for p in parts[:-1]:
            owner = getattr(owner, p)
    except AttributeError:
        _say("rule %d (%s): %s has no %s; not injected"
             % (rule.index, rule.text, rule.module, rule.qualname))
        return
    name = parts[-1]
    raw = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    if raw is None:
        raw = getattr(owner, name, None)
    if isinstance(raw, staticmethod):
        new = staticmethod(_wrap(raw.__func__, rule))
    elif isinstance(raw, classmethod):
        new = classmethod(_wrap(raw.__func__, rule))
    elif isinstance(raw, types.FunctionType):
        new = _wrap(raw, rule)
    else:
        what = "not found" if raw is None else "not a Python function (%s)" % type(raw).__name__
        _say("rule %d (%s): %s.%s is %s; not injected"
             % (rule.index, rule.text, rule.module, rule.qualname, what))
        return
    try:
        setattr(owner, name, new)
    except (AttributeError, TypeError) as e:
        _say("rule %d (%s): cannot replace %s.%s: %s; not injected"
             % (rule.index, rule.text, rule.module, rule.qualname, e))


class _Loader(object):
    """Wraps a module's loader: applies the waiting rules once the module has run."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def __getattr__(self, attr):
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for rule in _pending.pop(self._name, ()):
            _apply(module, rule)


class _Finder(object):
    """A meta-path finder that finds nothing itself: it wraps the loader of the modules
    that rules wait for, as the other finders found them."""

    def find_spec(self, name, path=None, target=None):
        if name not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


def _after_fork():
    for r in _rules:
        r.reset()


def install():
    """Binds the ``py:`` rules of ``CULPRIT_INJECT`` to this process. Called once by the
    shim when tracing is prepared."""
    global _emit
    value = os.environ.get(ENV, "")
    lines = [l for l in value.split("\n") if l]
    mine = [(i, l) for i, l in enumerate(lines) if l.startswith("py:")]
    if not mine or _rules:
        return
    _hide_module()
    try:
        import ctypes
        f = ctypes.CDLL(None).culprit_emit_inject
        f.argtypes = (ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t)
        f.restype = None
        _emit = f
    except (AttributeError, OSError, ImportError) as e:
        _say("py: rules not applied: libtrace.so cannot record them here (%s)" % e)
        return
    for i, text in mine:
        try:
            r = _Rule(i, text)
        except (ValueError, IndexError) as e:
            _say("rule %d (%s) unreadable (%s); not injected" % (i, text, e))
            continue
        if r.applies():
            _rules.append(r)
    if not _rules:
        return
    os.register_at_fork(after_in_child=_after_fork)
    for r in _rules:
        m = sys.modules.get(r.module)
        if m is not None:
            _apply(m, r)
        else:
            _pending.setdefault(r.module, []).append(r)
    if _pending:
        sys.meta_path.insert(0, _Finder())
