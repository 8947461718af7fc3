# Culprit's start-up hook for Python processes under `culprit record` (no install step).
#
# `culprit record` puts the directory of this file first on PYTHONPATH, so every Python
# process of the traced tree - virtualenvs, interpreters started deep in the tree or by
# exec included - imports it at start-up (through `site`; not under -S, -E or -I). It
# starts Culprit's tracer when CULPRIT_POOL is set, then runs the program's own
# `sitecustomize` (the next one on sys.path) exactly as `site` would have, and takes its
# directory off sys.path again. A process that cannot be traced at function level says so
# in one line on stderr. Written in the syntax (and ASCII) of every Python since 2.7, so an
# old interpreter of the tree does not choke on it.


def _culprit_boot():
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("CULPRIT_POOL"):
        impl = getattr(sys, "implementation", None)
        name = impl.name if impl is not None else "python"
        if name != "cpython" or sys.version_info < (3, 9):
            sys.stderr.write(
                "culprit: %s (%s %d.%d): Python functions not traced (needs CPython 3.9 or "
                "later; its libc calls are recorded)\n" % (sys.executable, name, sys.version_info[0],
                                                  sys.version_info[1]))
        else:
            try:
                import culprit_trace._autostart  # noqa: F401
            except Exception as e:  # never stop the program
                sys.stderr.write("culprit: %s: Python functions not traced: %s\n"
                                 % (sys.executable, e))
    # The program's own sitecustomize, which this file shadows.
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    if os.environ.get("CULPRIT_POOL"):
        sys.path[:] = path  # the program's sys.path, as without culprit
    try:
        import importlib.machinery
    except ImportError:  # Python 2
        import imp
        try:
            found = imp.find_module("sitecustomize", path)
        except ImportError:
            return
        del sys.modules["sitecustomize"]
        try:
            imp.load_module("sitecustomize", *found)
        finally:
            if found[0] is not None:
                found[0].close()
        return
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None:
        return
    try:  # what importlib.util.module_from_spec calls, without importing importlib.util
        from importlib._bootstrap import module_from_spec
    except ImportError:
        from importlib.util import module_from_spec
    mod = module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


_culprit_boot()
del _culprit_boot
