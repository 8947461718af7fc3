"""rsyncd-mirror: two rsync daemons (Debian `rsync` 3.x: C; `rsync --daemon --no-detach`,
a listening parent that forks a process per connection, which forks again to receive) and
three Python drivers running Debian's `rsync` client against them: a writer, a mirror
between the daemons and a reader.

Ports: daemon A = p[0], daemon B = p[1]. Each daemon has a private rsyncd.conf in the
scratch directory (no chroot, no reverse lookup, 5 s I/O timeout, its own log file) with a
writable module: A's `incoming`, B's `mirror`. The writer (the launcher) adds three files
a round to its staging directory (names `rNNNN-J.dat`, contents of name-dependent length
and bytes) and pushes the directory to A (`rsync -a` to `rsync://127.0.0.1:A/incoming/`:
what an earlier round failed to push goes with the next). The mirror (`rsync-mirror`)
pulls A's module into a directory of its own and pushes that to B's module, round after
round. The reader (`rsync-reader`) pulls B's module, round after round, and checks every
new file's length and SHA-1 against what the writer makes for its name. Every rsync
command has `--contimeout=2 --timeout=3`, a log file of its own named after its driver
and round (`--log-file`), and is killed after 8 s; a failed command is logged and counted
and its driver goes on with the next round. The modules do not serve dot files (`exclude
= .*`): a file being received is one until it is whole. The writer writes a stop mark
once its rounds are done; the mirror stops after a round that went right after it saw the
mark and writes a mark of its own, on which the reader does the same (both stop at the
workload deadline at the latest), and the launcher says how many of the files it pushed
reached the reader, whole.
"""

import hashlib
import os
import subprocess
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port, wait_readers

CONF = """pid file = {d}/rsyncd-{x}.pid
lock file = {d}/rsyncd-{x}.lock
log file = {d}/rsyncd-{x}-own.log
use chroot = no
reverse lookup = no
timeout = 5
uid = root
gid = root

[{module}]
    path = {d}/{x}-data
    read only = no
    # A file being received is a dot file of the module until it is whole: not served.
    exclude = .*
"""
FILES_PER_ROUND = 3


def content(name):
    """What the writer puts in the file `name` (rNNNN-J.dat): 300 to 24 000 bytes."""
    seed = hashlib.sha256(name.encode()).digest()
    n = 300 + int.from_bytes(seed[:2], "big") % 23700
    return (seed * (n // len(seed) + 1))[:n]


def rsync(tmp, who, r, src, dst):
    """One rsync command of driver `who` in its round r: None when it went right, else what
    went wrong."""
    argv = ["rsync", "-a", "--contimeout=2", "--timeout=3",
            f"--log-file={os.path.join(tmp, 'rsync-logs', f'{who}-r{r:04}.log')}", src, dst]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=8)
    except subprocess.TimeoutExpired:
        return "killed after 8 s"
    if p.returncode != 0:
        return f"exit {p.returncode}: {p.stdout.decode(errors='replace').strip()[-200:]}"
    return None


def push(tmp, r):
    """The writer's round r: three new files, then the staging directory pushed to A."""
    a = ports("rsyncd-mirror")[0]
    stage = os.path.join(tmp, "writer")
    for j in range(FILES_PER_ROUND):
        name = f"r{r:04}-{j}.dat"
        with open(os.path.join(stage, name), "wb") as f:
            f.write(content(name))
    return rsync(tmp, "writer-push", r, stage + "/", f"rsync://127.0.0.1:{a}/incoming/")


class Mirror:
    """The mirror's rounds: A's module pulled into its directory, which is pushed to B."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.dir = os.path.join(tmp, "mirror")
        os.makedirs(self.dir, exist_ok=True)
        self.a, self.b = ports("rsyncd-mirror")[:2]

    def pull(self, r):
        return rsync(self.tmp, "mirror-pull", r, f"rsync://127.0.0.1:{self.a}/incoming/", self.dir + "/")

    def push(self, r):
        return rsync(self.tmp, "mirror-push", r, self.dir + "/", f"rsync://127.0.0.1:{self.b}/mirror/")

    def round(self, r):
        return self.pull(r) or self.push(r)


def check(path):
    """The reader's check of one file: its length and SHA-1 against the writer's."""
    with open(path, "rb") as f:
        got = f.read()
    want = content(os.path.basename(path))
    if len(got) != len(want) or hashlib.sha1(got).digest() != hashlib.sha1(want).digest():
        raise ValueError(f"{os.path.basename(path)}: {len(got)} bytes, SHA-1 {hashlib.sha1(got).hexdigest()[:12]}, "
                         f"wanted {len(want)}, {hashlib.sha1(want).hexdigest()[:12]}")


def loop(tmp, who, one_round, after_round=None, stop_mark="writer-done", done_mark=None):
    """A helper's rounds until one went right after `stop_mark` appeared (or the deadline,
    or SIGTERM), then `done_mark` is written: (rounds, failed rounds, told to stop?)."""
    term = terminated()
    stop = os.path.join(tmp, stop_mark)
    end = time.monotonic() + WORKLOAD_S + 5
    r = failed = 0
    last = False
    while not term.is_set():
        if time.monotonic() > end:
            log(f"{who}: deadline reached after {r} rounds")
            break
        last = os.path.exists(stop)
        r += 1
        try:
            err = one_round(r)
        except (OSError, ValueError) as e:
            err = repr(e)
        if err is not None:
            failed += 1
            log(f"{who} round {r} failed: {err}")
        elif after_round is not None:
            after_round()
        if last and err is None:
            break
        time.sleep(0.15)
    if done_mark is not None:
        with open(os.path.join(tmp, done_mark), "w"):
            pass
    return r, failed, term.is_set()


def mirror(_name):
    """Helper process `rsync-mirror`: pulls A and pushes to B, round after round."""
    tmp = os.environ["RSYNCD_MIRROR_DIR"]
    r, failed, told = loop(tmp, "mirror", Mirror(tmp).round, done_mark="mirror-done")
    log(f"rsyncd-mirror mirror: {r - failed}/{r} rounds ok, {failed} failed{' (told to stop)' if told else ''}")


def reader(_name):
    """Helper process `rsync-reader`: pulls B and checks every new file."""
    tmp = os.environ["RSYNCD_MIRROR_DIR"]
    b = ports("rsyncd-mirror")[1]
    mine = os.path.join(tmp, "reader")
    os.makedirs(mine, exist_ok=True)
    seen = {}

    def verify():
        for name in sorted(os.listdir(mine)):
            path = os.path.join(mine, name)
            stamp = os.stat(path).st_mtime_ns
            if seen.get(name, (None,))[0] == stamp:
                continue
            try:
                check(path)
                seen[name] = (stamp, True)
            except (OSError, ValueError) as e:
                seen[name] = (stamp, False)
                log(f"reader: {e!r}")

    r, failed, told = loop(tmp, "reader", lambda r: rsync(tmp, "reader-pull", r, f"rsync://127.0.0.1:{b}/mirror/",
                                                          mine + "/"), verify, stop_mark="mirror-done")
    bad = sum(1 for _, good in seen.values() if not good)
    log(f"rsyncd-mirror reader: {r - failed}/{r} pulls ok, {failed} failed, {len(seen) - bad} files whole, "
        f"{bad} damaged{' (told to stop)' if told else ''}")


def run(tmp, n):
    a, b = ports("rsyncd-mirror")[:2]
    for sub in ("a-data", "b-data", "writer", "rsync-logs"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    for x, module, port in (("a", "incoming", a), ("b", "mirror", b)):
        with open(os.path.join(tmp, f"rsyncd-{x}.conf"), "w") as f:
            f.write(CONF.format(d=tmp, x=x, module=module))
    env = dict(os.environ, RSYNCD_MIRROR_DIR=tmp)
    with Daemons(tmp) as d:
        for x, port in (("a", a), ("b", b)):
            p = d.start(f"rsyncd-{x}", ["rsync", "--daemon", "--no-detach", f"--config={tmp}/rsyncd-{x}.conf",
                                         "--address=127.0.0.1", f"--port={port}"])
            wait_port(port, p, timeout=10)
        helpers = [d.start("mirror", [PY, LAUNCHER, "rsync-mirror"], env=env),
                   d.start("reader", [PY, LAUNCHER, "rsync-reader"], env=env)]
        ok = failed = 0
        rounds = n // 2  # 60 for the suite's 120 steps
        for r in steps(rounds):
            try:
                err = push(tmp, r + 1)
            except (OSError, ValueError) as e:
                err = repr(e)
            if err is None:
                ok += 1
            else:
                failed += 1
                log(f"writer round {r + 1} failed: {err}")
            time.sleep(0.1)
        with open(os.path.join(tmp, "writer-done"), "w"):
            pass
        wait_readers(helpers, seconds=25)
        pushed = sorted(os.listdir(os.path.join(tmp, "writer")))
        arrived = 0
        for name in pushed:
            try:
                check(os.path.join(tmp, "reader", name))
                arrived += 1
            except (OSError, ValueError):
                pass
        log(f"rsyncd-mirror: {ok}/{rounds} pushes ok, {failed} failed; {arrived} of the {len(pushed)} files written "
            f"reached the reader whole")
