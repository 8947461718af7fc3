"""Greenlet switches followed by the native shim (``src/greenlets.h``).

A greenlet (gevent, eventlet) swaps the thread's Python stack without any profile event:
once the program has imported ``greenlet``, the shim reports each switch as the
suspension of the greenlet switched out and the resumption of the one switched in, as
CPython reports a coroutine that yields and is resumed. This module waits for the import
(a finder on ``sys.meta_path`` that lets the normal finders do the work) and then hands
``greenlet.settrace`` to the native shim. Never raises into the program.
"""

import sys

_native = None


class _GreenletWatch(object):
    """A meta-path finder that finds nothing itself: when ``greenlet`` is imported, it
    wraps the loader the other finders chose so that the module is watched once it has
    run."""

    _busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "greenlet" or self._busy:
            return None
        self._busy = True
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        except Exception:
            return None
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self)
        return spec


class _Loader(object):
    """The chosen loader, with ``watch`` after ``exec_module``."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            sys.meta_path.remove(self._finder)
        except ValueError:
            pass
        watch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def watch(module):
    """Follows the switches of ``module`` (the imported ``greenlet`` package)."""
    settrace = getattr(module, "settrace", None)
    if _native is None or settrace is None:
        return
    try:
        _native.watch_greenlets(settrace)
    except Exception as e:  # pragma: no cover - defensive: never stop the program
        sys.stderr.write("culprit: greenlet switches not followed: %r\n" % (e,))


def install(native):
    """Watches ``greenlet`` now if it is imported already, else when it is."""
    global _native
    _native = native
    for f in (_GreenletWatch.find_spec, _Loader.__init__, _Loader.create_module,
              _Loader.exec_module, _Loader.__getattr__, watch, install):
        native.hide(getattr(f, "__code__", f))
    if "greenlet" in sys.modules:
        watch(sys.modules["greenlet"])
    elif not any(isinstance(f, _GreenletWatch) for f in sys.meta_path):
        sys.meta_path.insert(0, _GreenletWatch())
