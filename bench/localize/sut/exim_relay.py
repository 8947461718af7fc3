"""exim-relay: two Exim 4.96 instances (Debian `exim4-daemon-light`: C; a listening daemon
that forks a child per SMTP connection, which forks a delivery process per message, which
forks its transport; a queue runner forked every 2 s) in the foreground with private
configurations — a relay that routes every message over SMTP on loopback to a second Exim,
the sink, which delivers it into a maildir — two Python `smtplib` senders and a Python
reader of the maildir.

Ports: relay = p[0], sink = p[1]. Each Exim runs as `exim4 -bdf -q2s -C CONF` (daemon in
the foreground, a queue run every 2 s) in a process group of its own, which the launcher
SIGKILLs 3 s after the daemons' SIGTERM (a reception child or delivery stopped by SIGSTOP
would otherwise outlive them). The relay accepts mail from 127.0.0.1 only and routes every
address (`manualroute` to 127.0.0.1, `self = send`) to the sink's port with its `smtp`
transport (1 s to connect, 2 s per command and for the data, one message a connection, as
Debian-exim); the sink accepts mail for `sink.test` and delivers it with `appendfile` in
maildir format as Debian-exim. Delivery is immediate (a message is delivered by a process
forked by the one that received it); a delivery that fails is deferred and tried again by
a queue run once its retry time (2 s: `F,10m,2s`) has passed. No DNS, no ident, no TLS.

Exim gives up root for a `-C` file unless the file is named in its compiled-in
TRUSTED_CONFIG_LIST (/etc/exim4/trusted_configs): the configurations are written to a
fixed root-owned directory per port base (home(), which also holds the spools, logs and
the maildir, emptied at each run) and named there. Its daemon also runs as its own user
(Debian-exim) by default and re-execs the setuid-root binary for every delivery and queue
run: an image whose LD_PRELOAD the dynamic loader ignores (secure execution), so that
those processes would not be recorded. `exim_user = root` keeps the daemon root, so that
every process of an instance is a fork of a recorded one; the transports still run as
Debian-exim (root is a fixed never-user of Debian's build), which owns the spool's hints
directory. exim4-daemon-light conflicts with postfix (both are a mail-transport-agent),
which the suite also runs: setup.sh unpacks its files and exim4-base's under
/opt/culprit/exim4 (the binary is found there), installs their libraries with apt, and
makes the system user Debian-exim that the binary's compiled-in EXIM_USER names, as
exim4-base's postinst does.

The launcher's sender sends N/2 messages (one every 100 ms) over one SMTP session; the
helper `exim-sender --name 2` sends 30 (one every 150 ms) in sessions of 5 messages (QUIT,
then a new connection, as a batch-sending client does); each (`smtplib`, 2 s timeout)
logs a failure, closes, connects again and goes on. Every message carries its number and
the SHA-1 of its body in its header (X-Seq, X-Body-Sha1); at the end each sender writes
the numbers the relay accepted to `accepted-<name>` in the scratch directory. The reader
(`exim-reader`) reads every new file of the maildir's `new/` every 200 ms, checks its body
against its digest, and, once both senders have written their lists, waits up to 10 s for
the rest; it says how many of the accepted messages arrived intact, how many with a wrong
digest, how many did not arrive, how many arrived twice and how many files it could not
read.
"""

import hashlib
import os
import pwd
import shutil
import smtplib
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, terminated, wait_port, wait_readers
from .postfix_relay import _end_group

EXIM = "/opt/culprit/exim4/usr/sbin/exim4"
USER = "Debian-exim"
REQUESTS2 = 30
BATCH2 = 5
DOMAIN = "sink.test"

COMMON = """primary_hostname = {name}.test
exim_path = {exim}
spool_directory = {dir}/spool
log_file_path = {dir}/log/%slog
pid_file_path = {dir}/exim.pid
daemon_smtp_ports = {port}
local_interfaces = 127.0.0.1
host_lookup =
rfc1413_hosts =
smtp_accept_queue_per_connection = 0
smtp_accept_max = 20
keep_environment =
exim_user = root
exim_group = root
tls_advertise_hosts =
acl_smtp_rcpt = acl_check_rcpt
"""

RELAY = """domainlist local_domains =
begin acl
acl_check_rcpt:
  accept hosts = 127.0.0.1
  deny
begin routers
to_sink:
  driver = manualroute
  route_list = * 127.0.0.1
  self = send
  transport = remote_smtp
begin transports
remote_smtp:
  driver = smtp
  port = {sink}
  user = {user}
  connection_max_messages = 1
  allow_localhost
  hosts_avoid_tls = *
  connect_timeout = 1s
  command_timeout = 2s
  data_timeout = 2s
  final_timeout = 2s
begin retry
* * F,10m,2s
"""

SINK = """domainlist local_domains = {domain}
begin acl
acl_check_rcpt:
  accept domains = +local_domains
  deny
begin routers
local:
  driver = accept
  domains = +local_domains
  transport = to_maildir
begin transports
to_maildir:
  driver = appendfile
  directory = {maildir}
  maildir_format
  create_directory
  user = {user}
  group = {user}
  mode = 0644
  envelope_to_add
  return_path_add
begin retry
* * F,10m,2s
"""


def scratch():
    """The scratch directory of the run (the helpers find it in the environment)."""
    return os.environ["EXIM_RELAY_DIR"]


def body(name, i):
    """The body of sender `name`'s message i (its length varies with i), without its final
    newline; the SHA-1 of this text is in the message's header."""
    return "\n".join([f"message {i} of sender {name}"] + [f"line {j} " + "x" * ((i + j) % 30) for j in range(i % 9)])


def sha1(text):
    return hashlib.sha1(text.encode()).hexdigest()


class Sender:
    """One SMTP session to the relay; connects again after any failure."""

    def __init__(self, name, batch=None):
        self.name = name
        self.batch = batch
        self.smtp = None
        self.accepted = []
        self.failed = 0

    def send(self, i):
        text = body(self.name, i)
        msg = (f"From: sender{self.name}@client.test\nTo: box@{DOMAIN}\nSubject: message {i} of sender {self.name}\n"
               f"X-Seq: {self.name}-{i}\nX-Body-Sha1: {sha1(text)}\n\n{text}\n")
        try:
            if self.smtp is None:
                self.smtp = smtplib.SMTP("127.0.0.1", ports("exim-relay")[0], local_hostname=f"sender{self.name}.test",
                                         timeout=2.0)
            self.smtp.sendmail(f"sender{self.name}@client.test", [f"box@{DOMAIN}"], msg)
            self.accepted.append(i)
            return True
        except (OSError, smtplib.SMTPException, ValueError) as e:
            self.failed += 1
            log(f"request failed: message {i}: {e!r}")
            self.close()
            return False

    def close(self):
        if self.smtp is not None:
            try:
                self.smtp.close()
            except OSError:
                pass
            self.smtp = None

    def quit(self):
        """Ends the session politely (QUIT); the next message opens a new one."""
        if self.smtp is not None:
            try:
                self.smtp.quit()
            except (OSError, smtplib.SMTPException) as e:
                log(f"sender {self.name}: QUIT failed: {e!r}")
            self.close()

    def run(self, n, pause, term=None):
        done = 0
        for i in steps(n):
            if term is not None and term.is_set():
                break
            self.send(i)
            done += 1
            if self.batch and (i + 1) % self.batch == 0:
                self.quit()
            time.sleep(pause)
        self.quit()
        tmp = os.path.join(scratch(), f"accepted-{self.name}.tmp")
        with open(tmp, "w") as f:
            f.write("".join(f"{i}\n" for i in self.accepted))
        os.replace(tmp, os.path.join(scratch(), f"accepted-{self.name}"))
        return f"{len(self.accepted)}/{done} messages accepted, {self.failed} failed"


def sender(name):
    """Helper process `exim-sender --name 2`."""
    term = terminated()
    said = Sender(name, batch=BATCH2).run(REQUESTS2, 0.15, term)
    log(f"exim sender {name}: {said}{' (told to stop)' if term.is_set() else ''}")


def check(path):
    """(X-Seq, True if the body matches its digest) of one delivered file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    head, _, rest = text.partition("\n\n")
    fields = {}
    for line in head.split("\n"):
        k, sep, v = line.partition(":")
        if sep and not line[:1].isspace():
            fields[k.strip().lower()] = v.strip()
    return fields.get("x-seq"), sha1(rest.rstrip("\n")) == fields.get("x-body-sha1")


def reader(name):
    """Helper process `exim-reader`: checks every delivered message, until both senders'
    lists are written and every accepted message is in (or 10 s more have passed)."""
    term = terminated()
    new = os.path.join(scratch(), "maildir", "new")
    seen, intact, corrupt, twice, unreadable = set(), set(), set(), 0, 0
    lists = [os.path.join(scratch(), f"accepted-{s}") for s in ("1", "2")]
    expected, deadline = None, None
    while not term.is_set():
        try:
            files = sorted(os.listdir(new))
        except FileNotFoundError:
            files = []
        for f in files:
            if f in seen:
                continue
            seen.add(f)
            try:
                seq, ok = check(os.path.join(new, f))
            except (OSError, ValueError) as e:
                unreadable += 1
                log(f"reader: {f}: {e!r}")
                continue
            if seq in intact or seq in corrupt:
                twice += 1
            elif ok:
                intact.add(seq)
            else:
                corrupt.add(seq)
                log(f"reader: message {seq} arrived with a body that does not match its digest")
        if expected is None and all(os.path.exists(p) for p in lists):
            expected = set()
            for s, p in zip(("1", "2"), lists):
                with open(p) as fh:
                    expected |= {f"{s}-{line.strip()}" for line in fh if line.strip()}
            deadline = time.monotonic() + 10
        if expected is not None and (expected <= intact | corrupt or time.monotonic() > deadline):
            break
        time.sleep(0.2)
    expected = expected or set()
    missing = expected - intact - corrupt
    if missing:
        log(f"reader: not delivered: {', '.join(sorted(missing)[:10])}")
    log(f"exim reader: {len(expected & intact)}/{len(expected)} accepted messages delivered intact, "
        f"{len(expected & corrupt)} with a wrong digest, {len(missing)} not delivered, {twice} twice, "
        f"{unreadable} unreadable"
        f"{' (told to stop)' if term.is_set() else ''}")


def home():
    """The fixed, root-owned directory of this port base's two instances: Exim keeps root
    (and so every image it execs can be recorded) only for a `-C` file named in its
    compiled-in TRUSTED_CONFIG_LIST, /etc/exim4/trusted_configs, whose paths are fixed."""
    return f"/var/lib/culprit-localize/exim-relay-{ports('exim-relay')[0]}"


def configs():
    """Writes both configurations into home() (root's, mode 0644) and names them in
    /etc/exim4/trusted_configs (once); (relay.conf, sink.conf)."""
    p = ports("exim-relay")
    h = home()
    texts = {"relay": RELAY.format(sink=p[1], user=USER),
             "sink": SINK.format(domain=DOMAIN, maildir=os.path.join(h, "sink", "maildir"), user=USER)}
    out = []
    for name, port in (("relay", p[0]), ("sink", p[1])):
        d = os.path.join(h, name)
        os.makedirs(d, mode=0o755, exist_ok=True)
        conf = os.path.join(h, f"{name}.conf")
        with open(conf + ".tmp", "w") as f:
            f.write(COMMON.format(name=name, exim=EXIM, dir=d, port=port) + texts[name])
        os.chmod(conf + ".tmp", 0o644)
        os.replace(conf + ".tmp", conf)
        out.append(conf)
    trusted = "/etc/exim4/trusted_configs"
    os.makedirs(os.path.dirname(trusted), mode=0o755, exist_ok=True)
    try:
        with open(trusted) as f:
            have = set(f.read().split())
    except FileNotFoundError:
        have = set()
    if not set(out) <= have:
        with open(trusted, "a") as f:
            f.write("".join(c + "\n" for c in out if c not in have))
        os.chmod(trusted, 0o644)
        log(f"exim-relay: {', '.join(out)} named in {trusted}")
    return out


def fresh(name):
    """Empties one instance's spool, log and (sink) maildir, owned by Debian-exim."""
    d = os.path.join(home(), name)
    pw = pwd.getpwnam(USER)
    for sub in ("spool", "log") + (("maildir",) if name == "sink" else ()):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
        os.makedirs(os.path.join(d, sub))
        os.chown(os.path.join(d, sub), pw.pw_uid, pw.pw_gid)
    os.makedirs(os.path.join(d, "spool", "db"))
    os.chown(os.path.join(d, "spool", "db"), pw.pw_uid, pw.pw_gid)
    for db in ("retry", "wait-remote_smtp"):
        f = os.path.join(d, "spool", "db", db + ".lockfile")
        open(f, "w").close()
        os.chown(f, pw.pw_uid, pw.pw_gid)


def run(tmp, n):
    p = ports("exim-relay")
    relay, sink = configs()
    for name in ("relay", "sink"):
        fresh(name)
    os.symlink(os.path.join(home(), "sink", "maildir"), os.path.join(tmp, "maildir"))
    os.environ["EXIM_RELAY_DIR"] = tmp
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    groups = []
    try:
        with Daemons(tmp) as d:
            for name, conf, port in (("sink", sink, p[1]), ("relay", relay, p[0])):
                e = d.start(name, [EXIM, "-bdf", "-q2s", "-C", conf], env=env, start_new_session=True)
                groups.append(e.pid)
                wait_port(port, e, timeout=20)
            rd = d.start("reader", [PY, LAUNCHER, "exim-reader"], env=env)
            helper = d.start("sender2", [PY, LAUNCHER, "exim-sender", "--name", "2"], env=env)
            said = Sender("1").run(n // 2, 0.1)
            wait_readers([helper, rd], seconds=40)
            log(f"exim-relay: {said}")
    finally:
        for g in groups:
            _end_group(g)
        # The instances' main logs go with the run's other logs (the scratch directory).
        for name in ("relay", "sink"):
            try:
                shutil.copy(os.path.join(home(), name, "log", "mainlog"), os.path.join(tmp, f"{name}-mainlog.log"))
            except OSError:
                pass
