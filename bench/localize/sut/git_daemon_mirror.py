"""git-daemon-mirror: two `git daemon` servers (Debian `git` 2.39: C; a listening parent that
forks a `git-daemon --serve` child per connection, which runs `git upload-pack` or `git
receive-pack` on the connection, which run `git pack-objects`, `unpack-objects` or
`index-pack` in turn) and three Python drivers running Debian's `git` client against them
(a process per command, over the git:// protocol): a writer, a mirror between the daemons
and a reader.

Ports: daemon A = p[0], daemon B = p[1]. Each daemon (`/usr/lib/git-core/git-daemon`, the
program `git daemon` runs as its child, started by the launcher itself so that its SIGTERM
and SIGKILL reach the daemon and not a `git` wrapper waiting for it) serves the bare repository
`repo.git` under its own base path in the scratch directory (`--export-all`,
`--enable=receive-pack`, 5 s I/O timeout: A's children run `upload-pack --timeout=5`, B's
`--timeout=6`, which tells them apart). Every repository starts from one seed commit made
at set-up; automatic gc is off everywhere. The writer (the launcher) adds three files a
round to its clone (names `rNNNN-J.dat`, contents of name-dependent length and bytes),
commits them and pushes master to A (what an earlier round failed to push goes with the
next). The mirror (`git-mirror`) fetches A's branches into a bare repository of its own
and pushes them to B, round after round. The reader (`git-reader`) fetches B's master,
round after round, checks it out and checks every new or changed file's length and SHA-1
against what the writer makes for its name. Every git command runs Debian's /usr/bin/git
with `-c localize.cmd=<driver>-<what>-rNNNN` (its driver and round, to name it in a SPEC)
and is killed after 8 s (the git:// protocol has no client timeout); a failed command is
logged and counted and its driver goes on with the next round. The writer writes a stop
mark once its rounds are done; the mirror stops after a round that went right after it
saw the mark and writes a mark of its own, on which the reader does the same (both stop at
the workload deadline at the latest), and the launcher says how many of the files it
committed reached the reader, whole.
"""

import os
import subprocess
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers
from .rsyncd_mirror import check, content, loop

GIT = "/usr/bin/git"
# `git daemon` runs this as a child and waits for it (a stopped daemon would outlive the
# wrapper killed by the launcher): the launcher starts it itself.
DAEMON = "/usr/lib/git-core/git-daemon"
FILES_PER_ROUND = 3
# Debian's git first: a git command runs its helpers (`git pack-objects`, `git
# upload-pack`…) by looking `git` up in PATH, and /usr/local/bin may hold another build.
ENV = dict(os.environ, PATH="/usr/bin:/bin:/usr/lib/git-core:" + os.environ.get("PATH", ""),
           GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
           GIT_AUTHOR_NAME="writer", GIT_AUTHOR_EMAIL="writer@localize.invalid",
           GIT_COMMITTER_NAME="writer", GIT_COMMITTER_EMAIL="writer@localize.invalid")
QUIET_CONFIG = ["-c", "gc.auto=0", "-c", "receive.autogc=false", "-c", "fetch.writeCommitGraph=false",
                "-c", "maintenance.auto=false", "-c", "advice.detachedHead=false"]


def env(tmp):
    return dict(ENV, HOME=tmp, XDG_CONFIG_HOME=os.path.join(tmp, ".config"))


def git(tmp, tag, *args, cwd=None, timeout=8):
    """One git command named `tag` (driver-what-rNNNN): None when it went right, else what
    went wrong."""
    argv = [GIT, "-c", f"localize.cmd={tag}", *QUIET_CONFIG, *args]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd,
                           env=env(tmp))
    except subprocess.TimeoutExpired:
        return "killed after 8 s"
    if p.returncode != 0:
        return f"exit {p.returncode}: {p.stdout.decode(errors='replace').strip()[-200:]}"
    return None


def url(port):
    return f"git://127.0.0.1:{port}/repo.git"


def push(tmp, r):
    """The writer's round r: three new files committed, then master pushed to A."""
    a = ports("git-daemon-mirror")[0]
    work = os.path.join(tmp, "writer")
    for j in range(FILES_PER_ROUND):
        name = f"r{r:04}-{j}.dat"
        with open(os.path.join(work, name), "wb") as f:
            f.write(content(name))
    err = git(tmp, f"writer-add-r{r:04}", "add", "-A", cwd=work)
    err = err or git(tmp, f"writer-commit-r{r:04}", "commit", "-q", "-m", f"round {r}", cwd=work)
    return err or git(tmp, f"writer-push-r{r:04}", "push", "-q", url(a), "master:master", cwd=work)


class Mirror:
    """The mirror's rounds: A's branches fetched into its bare repository, pushed to B."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.dir = os.path.join(tmp, "mirror.git")
        self.a, self.b = ports("git-daemon-mirror")[:2]

    def round(self, r):
        err = git(self.tmp, f"mirror-fetch-r{r:04}", "fetch", "-q", url(self.a), "+refs/heads/*:refs/heads/*",
                  cwd=self.dir)
        return err or git(self.tmp, f"mirror-push-r{r:04}", "push", "-q", url(self.b), "refs/heads/*:refs/heads/*",
                          cwd=self.dir)


def whole(path):
    """The reader's check of one file it fetched (rsyncd-mirror's: length and SHA-1 against
    what the writer makes for its name)."""
    check(path)


def mirror(_name):
    """Helper process `git-mirror`: fetches A and pushes to B, round after round."""
    tmp = os.environ["GIT_MIRROR_DIR"]
    r, failed, told = loop(tmp, "mirror", Mirror(tmp).round, done_mark="mirror-done")
    log(f"git-daemon-mirror mirror: {r - failed}/{r} rounds ok, {failed} failed{' (told to stop)' if told else ''}")


def reader(_name):
    """Helper process `git-reader`: fetches B's master, checks it out, checks every new or
    changed file."""
    tmp = os.environ["GIT_MIRROR_DIR"]
    b = ports("git-daemon-mirror")[1]
    mine = os.path.join(tmp, "reader")
    seen = {}

    def one_round(r):
        return (git(tmp, f"reader-fetch-r{r:04}", "fetch", "-q", url(b), "+master:refs/remotes/b/master", cwd=mine)
                or git(tmp, f"reader-checkout-r{r:04}", "reset", "-q", "--hard", "refs/remotes/b/master", cwd=mine))

    def verify():
        for name in sorted(os.listdir(mine)):
            if not name.endswith(".dat") or name == "seed.dat":
                continue
            path = os.path.join(mine, name)
            stamp = os.stat(path).st_mtime_ns
            if seen.get(name, (None,))[0] == stamp:
                continue
            try:
                whole(path)
                seen[name] = (stamp, True)
            except (OSError, ValueError) as e:
                seen[name] = (stamp, False)
                log(f"reader: {e!r}")

    r, failed, told = loop(tmp, "reader", one_round, verify, stop_mark="mirror-done")
    bad = sum(1 for _, good in seen.values() if not good)
    log(f"git-daemon-mirror reader: {r - failed}/{r} fetches ok, {failed} failed, {len(seen) - bad} files whole, "
        f"{bad} damaged{' (told to stop)' if told else ''}")


def seed(tmp):
    """The seed commit and every repository made from it (before any daemon starts)."""
    work = os.path.join(tmp, "writer")
    os.makedirs(work)
    for err in (git(tmp, "seed-init", "init", "-q", "-b", "master", work),
                (open(os.path.join(work, "seed.dat"), "w").write("seed\n") and None),
                git(tmp, "seed-add", "add", "-A", cwd=work),
                git(tmp, "seed-commit", "commit", "-q", "-m", "seed", cwd=work),
                git(tmp, "seed-a", "clone", "-q", "--bare", work, os.path.join(tmp, "a", "repo.git")),
                git(tmp, "seed-b", "clone", "-q", "--bare", work, os.path.join(tmp, "b", "repo.git")),
                git(tmp, "seed-mirror", "clone", "-q", "--bare", work, os.path.join(tmp, "mirror.git")),
                git(tmp, "seed-reader", "clone", "-q", work, os.path.join(tmp, "reader"))):
        if err is not None:
            raise RuntimeError(f"git-daemon-mirror set-up: {err}")
    for repo in ("a/repo.git", "b/repo.git", "mirror.git", "reader", "writer"):
        git(tmp, "seed-config", "config", "gc.auto", "0", cwd=os.path.join(tmp, repo))
        git(tmp, "seed-config", "config", "receive.autogc", "false", cwd=os.path.join(tmp, repo))


def run(tmp, n):
    a, b = ports("git-daemon-mirror")[:2]
    seed(tmp)
    os.makedirs(os.path.join(tmp, ".config"), exist_ok=True)
    hx = dict(env(tmp), GIT_MIRROR_DIR=tmp)
    with Daemons(tmp) as d:
        for x, port, timeout in (("a", a, 5), ("b", b, 6)):
            p = d.start(f"git-daemon-{x}", [DAEMON, "--verbose", "--export-all", "--enable=receive-pack",
                                            "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                                            f"--timeout={timeout}", "--init-timeout=3",
                                            f"--base-path={os.path.join(tmp, x)}", "--informative-errors"],
                        env=hx)
            wait_port(port, p, timeout=10)
        helpers = [d.start("mirror", [PY, LAUNCHER, "git-mirror"], env=hx),
                   d.start("reader", [PY, LAUNCHER, "git-reader"], env=hx)]
        ok = failed = 0
        # 30 for the suite's 120 steps: three git commands a round, which a loaded machine
        # slows to 0.4 s and more under the tracer, so that the rounds end within the deadline.
        rounds = n // 4
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
        written = sorted(x for x in os.listdir(os.path.join(tmp, "writer")) if x.endswith(".dat") and x != "seed.dat")
        arrived = 0
        for name in written:
            try:
                check(os.path.join(tmp, "reader", name))
                arrived += 1
            except (OSError, ValueError):
                pass
        log(f"git-daemon-mirror: {ok}/{rounds} pushes ok, {failed} failed; {arrived} of the {len(written)} files "
            f"written reached the reader whole")
