"""Finds — or builds, once — the shim's C extension for the running interpreter, so that
no install step is needed (issue 17).

``culprit record`` puts a copy of this package in a per-user cache,
``<cache>/python/<key>/boot/culprit_trace/`` (``<key>``: the shim's version and the hash of
its sources), with the extension's sources in ``<key>/src/`` and ``<key>/boot`` on
``PYTHONPATH``. The extension for an interpreter is ``<key>/ext/_native<EXT_SUFFIX>`` — one
file per ABI (``.cpython-312-x86_64-linux-gnu.so``…), so every CPython of the traced tree,
whichever it is and however deep it starts, finds or builds its own. ``culprit record``
builds it beforehand for the interpreter it starts (``python3 _bootstrap.py``); an
interpreter it could not foresee builds it here on first use: one compiler run (about a
second), under a lock so concurrent processes build it once, with ``LD_PRELOAD`` and
``CULPRIT_POOL`` removed from the compiler's environment. Later start-ups only stat the file.

Run as a script (``python3 -S _bootstrap.py``) it builds the extension for that interpreter
and prints its path, or the reason it cannot, on stderr (exit status 1).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # <key>: holds boot/, src/, ext/
_SRC = os.path.join(_ROOT, "src")


def _suffix():
    import importlib.machinery
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def extension_path():
    """Where the extension for this interpreter is (built or not)."""
    return os.path.join(_ROOT, "ext", "_native" + _suffix())


def why_not():
    """Why this interpreter cannot have the C extension, or None."""
    impl = getattr(sys, "implementation", None)
    if impl is None or impl.name != "cpython":
        return "not CPython"
    if sys.version_info < (3, 9):
        return "CPython %d.%d is older than 3.9" % sys.version_info[:2]
    if "t" in getattr(sys, "abiflags", ""):
        return "free-threaded build (not supported)"
    if not os.path.isfile(os.path.join(_SRC, "native.c")):
        return "%s holds no native.c (not a culprit bootstrap copy)" % _SRC
    return None


def _build(path):
    """Compiles src/native.c into `path` (atomically: a temporary file renamed)."""
    import shlex
    import subprocess
    import sysconfig
    inc = sysconfig.get_paths().get("include", "")
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        raise ImportError("Python.h not found in %s: the interpreter's headers are not "
                          "installed (Debian: python3-dev)" % (inc or "its include directory"))
    cc = shlex.split(os.environ.get("CC") or "cc")
    tmp = "%s.%d.tmp" % (path, os.getpid())
    cmd = cc + ["-O2", "-std=gnu11", "-shared", "-fPIC", "-w", "-I", inc, "-I", _SRC,
                os.path.join(_SRC, "native.c"), "-o", tmp, "-ldl"]
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "CULPRIT_POOL", "PYTHONPATH"):
        env.pop(k, None)
    try:
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    except OSError as e:
        raise ImportError("cannot run the C compiler %r: %s" % (cc[0], e.strerror))
    if r.returncode != 0:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        first = next((l for l in err if "error" in l), err[0] if err else "no message")
        raise ImportError("compiling the C extension failed: %s" % first.strip())
    os.rename(tmp, path)


def ensure():
    """The path of this interpreter's extension, built if missing. ImportError (with the
    reason) if it cannot be had."""
    reason = why_not()
    if reason:
        raise ImportError(reason)
    path = extension_path()
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    import fcntl
    with open(os.path.join(os.path.dirname(path), ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
        if not os.path.exists(path):
            _build(path)
    return path


def load():
    """Imports the extension as culprit_trace._native (building it first if needed)."""
    path = ensure()
    import importlib.machinery
    from importlib._bootstrap import module_from_spec  # importlib.util's, without its imports
    name = "culprit_trace._native"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.machinery.ModuleSpec(name, loader, origin=path)
    mod = module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


if __name__ == "__main__":
    try:
        print(ensure())
    except ImportError as e:
        sys.stderr.write("%s\n" % (e,))
        sys.exit(1)
