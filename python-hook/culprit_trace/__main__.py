"""``python3 -m culprit_trace [-m module | -c command | script.py] ARGS…`` — run a program under tracing.

The program sees what it would see if started as ``python3 script.py ARGS…`` (or
``python3 -m module ARGS…``): the same ``sys.argv``, a real ``__main__`` module,
``sys.path[0]`` set the same way, the same traceback and exit status 1 on an uncaught
exception. If libtrace.so is not loaded in this process, the interpreter is re-executed
with it in ``LD_PRELOAD`` (found through ``CULPRIT_LIBTRACE`` or next to the ``culprit``
binary). Started outside `culprit record` (no ``CULPRIT_POOL``), it re-executes itself as
``culprit record -- python3 -m culprit_trace …`` (``culprit`` found through ``CULPRIT_BIN`` or
``PATH``). If none of that is possible the reason is printed and nothing runs (exit status 2).
"""
import os
import sys

USAGE = """usage: python3 -m culprit_trace [-m module | -c command | script.py] [args...]

Runs a Python program with Culprit's Python tracer (calls, returns, exceptions and
builtin calls of every thread) recording into libtrace.so's pool. Normally used as
    culprit record -- python3 -m culprit_trace script.py args...
(under `culprit record` plain `python3 script.py` is traced as well, through the
culprit_trace.pth start-up hook).

environment:
  CULPRIT_POOL      the pool to record into (set by `culprit record`)
  CULPRIT_LIBTRACE  path of libtrace.so, if it is not next to the `culprit` binary
"""

_REEXEC = "_CULPRIT_TRACE_REEXEC"


def _fail(msg):
    sys.stderr.write("culprit_trace: %s\n" % msg)
    raise SystemExit(2)


def _find_culprit():
    """The `culprit` binary: $CULPRIT_BIN (empty: none), else on PATH."""
    p = os.environ.get("CULPRIT_BIN")
    if p is not None:
        return p if p and os.access(p, os.X_OK) else None
    import shutil
    return shutil.which("culprit")


def _find_libtrace():
    p = os.environ.get("CULPRIT_LIBTRACE")
    if p:
        return p if os.path.exists(p) else None
    import shutil
    exe = shutil.which("culprit")
    if exe:
        d = os.path.dirname(os.path.realpath(exe))
        for cand in (os.path.join(d, "libtrace.so"), os.path.join(d, "..", "lib", "libtrace.so"),
                     os.path.join(d, "..", "lib", "culprit", "libtrace.so")):
            if os.path.exists(cand):
                return os.path.abspath(cand)
    return None


def _ensure_tracing():
    import culprit_trace
    if culprit_trace.available():
        os.environ.pop(_REEXEC, None)  # the program's environment stays as it was given
        if not os.environ.get("CULPRIT_POOL"):
            sys.stderr.write("culprit_trace: warning: CULPRIT_POOL is not set; libtrace.so decides "
                             "where entries go (run under `culprit record`)\n")
        if not culprit_trace._prepare():
            _fail("libtrace.so is loaded but tracing could not start")
        return
    if os.environ.get(_REEXEC):
        _fail("re-executed (LD_PRELOAD=%s, CULPRIT_POOL=%s) but libtrace.so's symbols are still "
              "missing (is it the right library?)" % (os.environ.get("LD_PRELOAD", ""),
                                                      os.environ.get("CULPRIT_POOL", "")))
    if not os.environ.get("CULPRIT_POOL"):
        # Standalone: let `culprit record` make the pool, start readers and preload libtrace.
        culprit = _find_culprit()
        if culprit is None:
            _fail("not tracing: no pool to record into (CULPRIT_POOL is unset) and no `culprit` "
                  "binary found (PATH, or CULPRIT_BIN). Run\n"
                  "    culprit record -- %s -m culprit_trace %s" % (sys.executable, " ".join(sys.argv[1:])))
        env = dict(os.environ)
        env[_REEXEC] = "1"
        argv = list(getattr(sys, "orig_argv", None) or [sys.executable, "-m", "culprit_trace"] + sys.argv[1:])
        sys.stderr.write("culprit_trace: running under `%s record`\n" % culprit)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(culprit, [culprit, "record", "--", sys.executable] + argv[1:], env)
    lib = _find_libtrace()
    if lib is None:
        _fail("not tracing: libtrace.so is not loaded and was not found (set CULPRIT_LIBTRACE "
              "or put the `culprit` binary with libtrace.so next to it on PATH)")
    env = dict(os.environ)
    pre = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = lib + (" " + pre if pre else "")
    env[_REEXEC] = "1"
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, "-m", "culprit_trace"] + sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def _trimmed(tb):
    """The traceback without this module's frames (the program's own start at the top)."""
    here = os.path.dirname(os.path.abspath(__file__))
    while tb is not None and os.path.dirname(tb.tb_frame.f_code.co_filename) == here:
        tb = tb.tb_next
    return tb


def _run_script(path, args):
    import builtins
    import io
    import types
    from importlib.machinery import SourceFileLoader
    sys.argv = [path] + args
    real = os.path.realpath(path)
    if os.path.isdir(real) or not os.path.exists(real) or path.endswith(".zip"):
        # Directories and zip files with a __main__.py, or errors: as runpy does them.
        import runpy
        sys.path[0] = path
        import culprit_trace
        culprit_trace.call_traced(runpy.run_path, path, None, "__main__")
        return
    sys.path[0] = os.path.dirname(real)
    abspath = os.path.abspath(path)
    main = types.ModuleType("__main__")
    main.__file__ = abspath
    main.__builtins__ = builtins
    main.__loader__ = SourceFileLoader("__main__", abspath)
    main.__spec__ = None
    main.__package__ = None
    main.__cached__ = None
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    with io.open_code(abspath) as f:
        source = f.read()
    code = compile(source, abspath, "exec", dont_inherit=True)
    del builtins, io, types, SourceFileLoader, source, f, real
    import culprit_trace
    culprit_trace.call_traced(exec, code, main.__dict__)


def _run_command(command, args):
    """`-c COMMAND`: as python runs it (argv[0] '-c', sys.path[0] '', a fresh __main__)."""
    import builtins
    import types
    from importlib.machinery import BuiltinImporter
    sys.argv = ["-c"] + args
    sys.path[0] = ""
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    main.__loader__ = BuiltinImporter
    main.__spec__ = None
    main.__package__ = None
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    code = compile(command, "<string>", "exec", dont_inherit=True)
    import culprit_trace
    culprit_trace.call_traced(exec, code, main.__dict__)


def _run_module(modname, args):
    import runpy
    import culprit_trace
    sys.argv = [modname] + args
    culprit_trace.call_traced(runpy._run_module_as_main, modname, True)


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        raise SystemExit(0 if argv else 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            _fail("-m needs a module name")
        target = ("module", argv[1], argv[2:])
    elif argv[0] == "-c":
        if len(argv) < 2:
            _fail("-c needs a command")
        target = ("command", argv[1], argv[2:])
    elif argv[0].startswith("-") and argv[0] != "-":
        _fail("unknown option %s (usage: python3 -m culprit_trace [-m module | -c command | script.py] [args...])" % argv[0])
    else:
        target = ("script", argv[0], argv[1:])
    _ensure_tracing()
    import culprit_trace
    if culprit_trace._backend == "native":
        culprit_trace._hide_own_code()
    # The program runs traced as a root (culprit_trace.call_traced); afterwards tracing
    # resumes for what the interpreter does at exit (atexit handlers, thread joins), and
    # this module's own frames are never recorded.
    try:
        if target[0] == "module":
            _run_module(target[1], target[2])
        elif target[0] == "command":
            _run_command(target[1], target[2])
        else:
            _run_script(target[1], target[2])
    except (SystemExit, KeyboardInterrupt):
        culprit_trace.resume()
        raise
    except BaseException as e:
        tb = _trimmed(e.__traceback__)
        e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        culprit_trace.resume()
        raise SystemExit(1)
    culprit_trace.resume()


if __name__ == "__main__":
    main()
