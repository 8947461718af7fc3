"""xrootd-cluster: an XRootD cluster (Debian `xrootd-server` and `xrootd-client` 5.5: C++)
of a manager (an `xrootd` redirector and its `cmsd`) and two data servers (an `xrootd` and
a `cmsd` each, a private export directory each in the scratch directory), and two Python
drivers running Debian's `xrdcp` and `xrdfs` against the redirector (a process per command).

Ports: manager xrootd = p[0], manager cmsd = p[1], data server 1 xrootd = p[2], data server
2 xrootd = p[3] (each data server's cmsd has no port: it logs into the manager's cmsd and
its xrootd reaches it over a UNIX socket in its admin directory). XRootD refuses to run as
root, so every daemon runs in a user namespace of its own in which the launcher's uid
(root) is mapped to uid 1000 (`unshare --user --map-user=1000 --map-group=1000`, as ZNC in
`znc_inspircd.py`); XRootD has no directive to bind one address, so its listeners are on the
wildcard address, and everything connects to 127.0.0.1. Each daemon runs in the foreground
from a written configuration (`all.role manager|server`, `all.manager 127.0.0.1:p[1]`,
`all.export /data`, `oss.localroot` the data server's own directory, `cms.delay startup 1`,
no DNS lookups), logging to its stderr. Start: the cmsds first (the manager's, then the
servers'), then the xrootds; the launcher waits until the manager's cmsd says that both
data servers logged in and the cluster is active.

A copy through the redirector: `xrdcp` asks the manager's xrootd to open the path; the
redirector asks its cmsd, which asks the data servers' cmsds (a new file: the one with the
most free space and least load; an existing file: the one that has it) and sends the
client on to that data server's xrootd, where the data goes (the redirector answers a
lookup of a path no server has after a 1-s wait: `cms.delay lookup 1`, so an upload takes
about 2 s). Each driver (the launcher with N/12 steps, and the helper `xrootd-driver --name
2` with 9) makes a file a step (`put-D-NNNN` in its own directory, 2 to 40 KB of bytes that
depend on its name), uploads it with `xrdcp -f` to `/data/dD/NNNN`, downloads it again
(`get-D-NNNN`) and checks its length and SHA-1, asks `xrdfs stat` for its size, downloads
the file of its previous step again (`old-D-NNNN`) and checks it, and every fourth step
checks that an `xrdfs ls` of its directory lists every file it wrote so far. The local file
names carry the driver and the step, so that a SPEC can name one `xrdcp` process
(`argv=get-1-0004`). Every command is killed after 8 s (the client's own limits: 5 s a
request, a 2-s connection window, `XRD_CONNECTIONRETRY=1`); a failed command is logged and
counted and the driver goes on with the next step (so does an exception of the driver's
own code in a step). Both drivers say at the end how many steps went right.
"""

import hashlib
import os
import re
import subprocess
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

STEPS2 = 9
CMD_S = 8
USERNS = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
CLIENT_ENV = {"XRD_REQUESTTIMEOUT": "5", "XRD_CONNECTIONWINDOW": "2", "XRD_CONNECTIONRETRY": "1",
              "XRD_STREAMTIMEOUT": "5", "XRD_TIMEOUTRESOLUTION": "1", "XRD_LOGLEVEL": "Error"}


def config(tmp, name):
    """The configuration file of the manager (`mgr`) or a data server (`ds1`, `ds2`)."""
    x, cms, x1, x2 = ports("xrootd-cluster")[:4]
    adm = os.path.join(tmp, "adm", name)
    os.makedirs(adm, exist_ok=True)
    lines = [f"all.manager 127.0.0.1:{cms}", "all.export /data", f"all.adminpath {adm}", f"all.pidpath {adm}",
             "xrd.network nodnr", "xrootd.trace off"]
    if name == "mgr":
        lines += ["all.role manager", f"xrd.port {x} if exec xrootd", f"xrd.port {cms} if exec cmsd",
                  "cms.delay startup 1 servers 2 lookup 1 qdl 1"]
    else:
        root = os.path.join(tmp, name)
        os.makedirs(os.path.join(root, "data"), exist_ok=True)
        lines += ["all.role server", f"oss.localroot {root}", f"xrd.port {x1 if name == 'ds1' else x2} if exec xrootd",
                  "cms.delay startup 1"]
    path = os.path.join(tmp, f"{name}.cfg")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def content(d, k):
    """The bytes driver d uploads at step k (their length varies with k)."""
    seed = hashlib.sha1(f"xrootd-{d}-{k}".encode()).digest()
    n = 2048 + (k * 7919 + d * 104729) % 38000
    return (seed * (n // len(seed) + 1))[:n]


class Driver:
    """One driver: its commands, failures and scratch files."""

    def __init__(self, tmp, d):
        self.tmp = tmp
        self.d = d
        self.work = os.path.join(tmp, f"driver{d}")
        os.makedirs(self.work, exist_ok=True)
        self.url = f"root://127.0.0.1:{ports('xrootd-cluster')[0]}/"
        self.errors = 0
        self.written = []

    def cmd(self, argv):
        """Runs one xrdcp/xrdfs command: its output when it went right, else None (logged)."""
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=CMD_S,
                               env=dict(os.environ, **CLIENT_ENV), cwd=self.work)
        except subprocess.TimeoutExpired:
            return self.fail(f"{argv[0]} {argv[-1]}: killed after {CMD_S} s")
        if p.returncode != 0:
            return self.fail(f"{argv[0]} {argv[-1]}: exit {p.returncode}: "
                             f"{p.stdout.decode(errors='replace').strip()[-160:]}")
        return p.stdout.decode(errors="replace")

    def fail(self, what):
        self.errors += 1
        log(f"xrootd driver {self.d}: request failed: {what}")
        return None

    def fetch(self, remote, data, local):
        """Downloads `remote` to `local` and checks its length and SHA-1 against `data`."""
        path = os.path.join(self.work, local)
        try:
            if self.cmd(["xrdcp", "-f", "--nopbar", self.url + "/" + remote, path]) is None:
                return False
            with open(path, "rb") as f:
                back = f.read()
        except OSError as e:
            return self.fail(f"get {remote}: {e!r}") or False
        finally:
            if os.path.exists(path):
                os.unlink(path)
        if len(back) != len(data) or hashlib.sha1(back).digest() != hashlib.sha1(data).digest():
            return self.fail(f"get {remote}: {len(back)} bytes, wrong length or SHA-1") or False
        return True

    def step(self, k):
        """Step k: upload, download and check, stat, an earlier file read back again, and
        every fourth step a listing; True if every command of it went right."""
        data = content(self.d, k)
        remote = f"/data/d{self.d}/{k:04}"
        put = os.path.join(self.work, f"put-{self.d}-{k:04}")
        with open(put, "wb") as f:
            f.write(data)
        try:
            if self.cmd(["xrdcp", "-f", "--nopbar", put, self.url + "/" + remote]) is None:
                return False
        finally:
            os.unlink(put)
        self.written.append(f"{k:04}")
        if not self.fetch(remote, data, f"get-{self.d}-{k:04}"):
            return False
        out = self.cmd(["xrdfs", f"127.0.0.1:{ports('xrootd-cluster')[0]}", "stat", remote])
        if out is None:
            return False
        if f"Size:   {len(data)}" not in out:
            return self.fail(f"stat {remote}: size not {len(data)}: {out.strip()[-120:]!r}") or False
        if k > 0 and not self.fetch(f"/data/d{self.d}/{k - 1:04}", content(self.d, k - 1), f"old-{self.d}-{k:04}"):
            return False
        if k % 4 == 3:
            out = self.cmd(["xrdfs", f"127.0.0.1:{ports('xrootd-cluster')[0]}", "ls", f"/data/d{self.d}"])
            if out is None:
                return False
            listed = {line.rsplit("/", 1)[-1] for line in out.split()}
            missing = [w for w in self.written if w not in listed]
            if missing:
                return self.fail(f"ls /data/d{self.d}: {len(missing)} written files missing ({missing[:3]})") or False
        return True


def workload(tmp, d, n, pause):
    """n steps, `pause` seconds apart: (steps that went right, failed commands)."""
    drv = Driver(tmp, d)
    ok = 0
    for k in steps(n):
        try:
            ok += drv.step(k)
        except (OSError, ValueError) as e:
            drv.fail(f"step {k}: {e!r}")
        time.sleep(pause)
    return ok, drv.errors


def driver(name):
    """Helper process `xrootd-driver --name 2` (its scratch directory in XROOTD_SCRATCH)."""
    ok, errors = workload(os.environ["XROOTD_SCRATCH"], int(name), STEPS2, 0.05)
    log(f"xrootd driver {name}: {ok}/{STEPS2} steps ok, {errors} failed")


def wait_cluster(tmp, procs, timeout=30.0):
    """Waits until the manager's cmsd has both data servers logged in and is active."""
    path = os.path.join(tmp, "mgr-cmsd.log")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[-1]} exited with {p.returncode} during start-up")
        with open(path, errors="replace") as f:
            text = f.read()
        states = re.findall(r"Status changed to (\w+)", text)
        if text.count("Primary server") >= 2 and states and states[-1] == "active":
            return
        time.sleep(0.1)
    raise RuntimeError(f"the manager's cmsd did not see both data servers within {timeout} s")


def run(tmp, n):
    x, cms, x1, x2 = ports("xrootd-cluster")[:4]
    cfg = {name: config(tmp, name) for name in ("mgr", "ds1", "ds2")}
    with Daemons(tmp) as d:
        procs = []

        def start(prog, node):
            p = d.start(f"{node}-{prog}", [*USERNS, prog, "-c", cfg[node], "-n", node], cwd=tmp)
            procs.append(p)
            return p

        p = start("cmsd", "mgr")
        wait_port(cms, p, timeout=20)
        start("cmsd", "ds1")
        start("cmsd", "ds2")
        p = start("xrootd", "mgr")
        wait_port(x, p, timeout=20)
        for node, port in (("ds1", x1), ("ds2", x2)):
            p = start("xrootd", node)
            wait_port(port, p, timeout=20)
        wait_cluster(tmp, procs)
        helper = d.start("driver2", [PY, LAUNCHER, "xrootd-driver", "--name", "2"],
                         env=dict(os.environ, PYTHONUNBUFFERED="1", XROOTD_SCRATCH=tmp))
        ok, errors = workload(tmp, 1, n // 12, 0.02)
        wait_readers([helper], seconds=30)
        log(f"xrootd-cluster: {ok}/{n // 12} steps ok, {errors} failed")
