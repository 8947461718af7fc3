"""distcc-farm: a distcc compile farm — two `distccd` 3.4 daemons (Debian `distcc`: C; a
preforking parent and its pool of compile children each) and two client processes that
compile small generated C files through Debian's `distcc` client (C: it preprocesses
locally, ships the preprocessed source to a daemon and gets the object file back).

Ports: daemon 1 = p[0], daemon 2 = p[1]. Each daemon runs in the foreground
(`distccd --daemon --no-detach --allow 127.0.0.1 --listen 127.0.0.1 --port P`), as the
package's user `distccd`, with a pool of one preforked child (`--jobs 1`: a child accepts
and serves one job at a time and is replaced by the parent after 50 jobs, distcc's own
rule) that runs gcc on what it receives, and logs to a file of the scratch directory.
Each client (the launcher, and the helper `distcc-client --name 2`) writes C sources of
its own (a function named after the client and the step, a few includes, a table of
step-dependent size) and runs `distcc gcc -c` on each, 8 s at most, with `DISTCC_HOSTS`
listing both daemons with one slot each (the clients share `DISTCC_DIR`, so a client takes
the daemon the other is not using), no local fallback (`DISTCC_FALLBACK=0`, and no local
retry), a 3 s I/O timeout. distcc's own rules stay as they are: a compile that fails on a
daemon for a network or protocol error is tried again by the client on a daemon not in
back-off, and the failed daemon is in back-off for 60 s (the rest of a run: both clients
leave it, as they share the state directory); with both daemons in back-off a compile
fails. A compile is right when distcc exits 0 and `nm` finds the function, defined, in the
object file, with the object's size in range; a failed compile is logged and counted and
the client goes on with the next.
"""

import os
import signal
import subprocess
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, terminated, wait_port

# Compiles per client: few enough that a daemon's first child (50 jobs, then replaced)
# serves nearly every job of a run, so that a SPEC's `nth` falls in one process.
REQUESTS2 = 30


def environment(tmp):
    """The clients' environment: both daemons, no fallback, a shared lock directory."""
    d1, d2 = ports("distcc-farm")[:2]
    env = dict(os.environ)
    env.pop("DISTCC_BACKOFF_PERIOD", None)
    return dict(env, DISTCC_HOSTS=f"127.0.0.1:{d1}/1 127.0.0.1:{d2}/1", DISTCC_FALLBACK="0",
                DISTCC_SKIP_LOCAL_RETRY="1", DISTCC_IO_TIMEOUT="3",
                DISTCC_DIR=os.path.join(tmp, "distcc-state"), TMPDIR=os.path.join(tmp, "tmp"))


def source(name, i):
    """The C source client `name` compiles at step i, and its function's name."""
    fn = f"farm_{name}_{i}"
    table = ", ".join(str((i * 7919 + j * 104729) % 65521) for j in range(8 + i % 40))
    return fn, (f"#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n\n"
                f"static const unsigned table_{i}[] = {{{table}}};\n\n"
                f"int {fn}(const char *s)\n{{\n    unsigned h = {i}u;\n"
                f"    for (size_t k = 0; k < sizeof table_{i} / sizeof *table_{i}; k++)\n"
                f"        h = h * 31u + table_{i}[k] + (unsigned)strlen(s);\n"
                f"    return (int)(h % 1000u) + atoi(s);\n}}\n")


def symbols(obj):
    """What `nm` lists in an object file."""
    nm = subprocess.run(["nm", obj], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=5)
    return nm.stdout.decode(errors="replace")


def compile_one(env, work, name, i):
    """One compile through the farm: True when the object file has the function."""
    src, obj = os.path.join(work, f"c{name}-{i:04}.c"), os.path.join(work, f"c{name}-{i:04}.o")
    try:
        fn, text = source(name, i)
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run(["distcc", "gcc", "-O1", "-c", src, "-o", obj], env=env, cwd=work,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=8)
        if r.returncode != 0:
            raise ValueError(f"distcc exited {r.returncode}: {r.stdout.decode(errors='replace').strip()[-200:]}")
        size = os.path.getsize(obj)
        if not 500 <= size <= 20000:
            raise ValueError(f"object of {size} bytes")
        if f" T {fn}\n" not in symbols(obj):
            raise ValueError(f"nm does not find {fn} in the object")
        return True
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        log(f"compile {i} of client {name} failed: {e!r}"[:400])
        return False


def workload(tmp, name, n, pause, term=None):
    env = environment(tmp)
    work = os.path.join(tmp, f"build{name}")
    os.makedirs(work, exist_ok=True)
    ok = i = 0
    end = time.monotonic() + WORKLOAD_S
    for i in range(n):
        if time.monotonic() > end or (term is not None and term.is_set()):
            log(f"workload deadline ({WORKLOAD_S:.0f} s) reached after {i} of {n} compiles")
            break
        ok += compile_one(env, work, name, i)
        time.sleep(pause)
    else:
        i = n
    return ok, i


def client(name):
    """Helper process `distcc-client --name 2`: REQUESTS2 compiles of its own."""
    term = terminated()
    tmp = os.environ["DISTCC_FARM_DIR"]
    ok, done = workload(tmp, name, REQUESTS2, 0.05, term)
    log(f"distcc-farm client {name}: {ok}/{done} compiles ok, {done - ok} failed"
        f"{' (told to stop)' if term.is_set() else ''}")


def run(tmp, n):
    d1, d2 = ports("distcc-farm")[:2]
    for sub in ("distcc-state", "tmp", "daemon-tmp"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    os.chmod(tmp, 0o777)
    os.chmod(os.path.join(tmp, "daemon-tmp"), 0o1777)
    groups = []
    try:
        with Daemons(tmp) as d:
            for k, port in ((1, d1), (2, d2)):
                logf = os.path.join(tmp, f"distccd{k}-own.log")
                open(logf, "w").close()
                os.chmod(logf, 0o666)
                p = d.start(f"distccd{k}", ["distccd", "--daemon", "--no-detach", "--user", "distccd", "--jobs", "1",
                                             "--allow", "127.0.0.1", "--listen", "127.0.0.1", "--port", str(port),
                                             "--log-file", logf, "--log-level", "notice"],
                            env=dict(os.environ, TMPDIR=os.path.join(tmp, "daemon-tmp")), start_new_session=True)
                groups.append(p.pid)
                wait_port(port, p, timeout=10)
            # The probes above took a job each from the children: they are replaced after 50.
            other = d.start("client2", [PY, LAUNCHER, "distcc-client", "--name", "2"],
                            env=dict(os.environ, DISTCC_FARM_DIR=tmp))
            jobs = n // 4  # 30 for the suite's 120 steps
            ok, done = workload(tmp, "1", jobs, 0.05)
            try:
                other.wait(timeout=WORKLOAD_S + 10)
            except subprocess.TimeoutExpired:
                log("client 2 did not stop")
            log(f"distcc-farm: {ok}/{jobs} compiles ok, {done - ok} failed")
    finally:
        # A daemon's compile child is its own process: a stopped one outlives its parent's
        # SIGTERM and SIGKILL. Each daemon has a process group of its own: what is left of it
        # is killed.
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
