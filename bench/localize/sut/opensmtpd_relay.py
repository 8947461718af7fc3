"""opensmtpd-relay: two OpenSMTPD instances, a relay and a sink, two Python SMTP clients
and a checker (Debian `opensmtpd` 6.8: C on libevent, privilege-separated: a parent, a
control process, a lookup process, a queue, a scheduler and the "pony express" process
that holds the SMTP sessions in and out, and an `mail.maildir` agent per delivery).

OpenSMTPD conflicts with postfix (both provide mail-transport-agent), which the suite runs
too: setup.sh unpacks the package under /opt/culprit/opensmtpd and makes its two users
(`opensmtpd`, `opensmtpq`) and its chroot directory as the package's postinst would. Its
spool (/var/spool/smtpd), control socket (/run/smtpd.sock) and delivery agents
(/usr/libexec/opensmtpd) are compiled in, so each instance runs in a mount namespace of its
own (`unshare -m`, the shell exec'ing smtpd) where the scratch directory's spool and run
directories are bound over /var/spool and /run, the unpacked agents over
/usr/libexec/opensmtpd, and a resolv.conf naming 127.0.0.1 over /etc/resolv.conf (any
DNS query of the lookup process stays on loopback, where nothing answers port 53; the
lookups seen, getaddrinfo's, go to /etc/hosts and netlink only); smtpd runs as root in the foreground (`-d`).

Ports: relay = p[0], sink = p[1]. The relay accepts mail for anyone and relays it, plain
SMTP, to the sink (`relay host smtp+notls://`); the sink delivers everything to a maildir
in the scratch directory (user `opensmtpd`). Client 1 (the launcher) and client 2 (helper
`smtpd-client --name 2`) send messages to the relay with `smtplib` (3 s timeout), 5
messages a session: each message's body (200 to 6 000 bytes of text) is made for it, and
its headers carry its length and SHA-1; a refused or failed message is logged, the
session closed, a new one made, and the workload goes on. At the end the launcher checks
the maildir (waiting up to 10 s for messages still on their way): every delivered body
against its headers (length and SHA-1), and the count against the messages the relay
accepted.
"""

import email
import hashlib
import os
import pwd
import signal
import smtplib
import time

from .common import LAUNCHER, PY, Daemons, descendants, log, ports, steps, wait_port, wait_readers

OPT = "/opt/culprit/opensmtpd"
SMTPD = f"{OPT}/usr/sbin/smtpd"
RCPT = "opensmtpd@sink.test"
REQUESTS2 = 60
SESSION = 5


def body(name, i):
    """The body client `name` sends at step i: lines of text, 200 to 6 000 bytes."""
    size = 200 + (i * 389 + int(name) * 131) % 5800
    line = f"client {name} message {i} " + "abcdefghijklmnopqrstuvwxyz0123456789" * 2
    out = ""
    while len(out) < size:
        out += line[: 40 + (len(out) % 37)] + "\n"
    return out[:size - 1] + "\n"


def sha1(text):
    return hashlib.sha1(text.encode()).hexdigest()


class Client:
    def __init__(self, name):
        self.name = name
        self.smtp = None
        self.sent = 0
        self.errors = 0

    def send(self, i):
        try:
            b = body(self.name, i)
            msg = (f"From: client{self.name}@clients.test\nTo: {RCPT}\nSubject: message {self.name}-{i}\n"
                   f"X-Culprit-Length: {len(b)}\nX-Culprit-Sha1: {sha1(b)}\n\n{b}")
            if self.smtp is None:
                self.smtp = smtplib.SMTP("127.0.0.1", ports("opensmtpd-relay")[0], timeout=3)
                self.smtp.ehlo("clients.test")
            refused = self.smtp.sendmail(f"client{self.name}@clients.test", [RCPT], msg)
            if refused:
                raise smtplib.SMTPRecipientsRefused(refused)
            self.sent += 1
            if (i + 1) % SESSION == 0:
                self.smtp.quit()
                self.smtp = None
            return True
        except (OSError, smtplib.SMTPException, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            self.close()
            return False

    def close(self):
        if self.smtp is not None:
            try:
                self.smtp.close()
            except OSError:
                pass
            self.smtp = None


def workload(name, n, pause):
    c = Client(name)
    ok = 0
    for i in steps(n):
        ok += c.send(i)
        time.sleep(pause)
    if c.smtp is not None:
        try:
            c.smtp.quit()
        except (OSError, smtplib.SMTPException):
            pass
        c.close()
    return ok, c.errors


def client(name):
    """Helper process `smtpd-client --name N`: REQUESTS2 messages, every 60 ms; it writes
    how many the relay accepted where the launcher reads it."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"opensmtpd-relay client {name}: {ok}/{REQUESTS2} messages accepted, {errors} failed")
    path = os.environ.get("SMTPD_CLIENT_STATUS")
    if path:
        with open(path, "w") as f:
            f.write(str(ok))


def check(maildir):
    """(bodies that match their headers, bodies that do not) among the delivered messages."""
    good = bad = 0
    new = os.path.join(maildir, "new")
    for fn in sorted(os.listdir(new)) if os.path.isdir(new) else []:
        with open(os.path.join(new, fn), "rb") as f:
            m = email.message_from_bytes(f.read())
        b = m.get_payload()
        b = b.replace("\r\n", "\n") if isinstance(b, str) else ""
        want_len, want_sha = m.get("X-Culprit-Length"), m.get("X-Culprit-Sha1")
        if str(len(b)) == want_len and sha1(b) == want_sha:
            good += 1
        else:
            bad += 1
            log(f"delivered message {m.get('Subject')!r}: {len(b)} bytes (SHA-1 {sha1(b)[:16]}), "
                f"wanted {want_len} ({(want_sha or '')[:16]})")
    return good, bad


def instance(d, tmp, name, conf):
    """Starts one smtpd in a mount namespace of its own (see the module's documentation)."""
    spool, run = os.path.join(tmp, f"spool-{name}"), os.path.join(tmp, f"run-{name}")
    os.makedirs(spool, mode=0o755)
    os.makedirs(run, mode=0o755)
    path = os.path.join(tmp, f"{name}.conf")
    with open(path, "w") as f:
        f.write(conf)
    resolv = os.path.join(tmp, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    script = (f"mount --bind {spool} /var/spool && mount --bind {run} /run && "
              f"mount --bind {resolv} /etc/resolv.conf && "
              f"mount --bind {OPT}/usr/libexec/opensmtpd /usr/libexec/opensmtpd && exec {SMTPD} -d -f {path}")
    return d.start(name, ["unshare", "-m", "--propagation", "private", "--", "sh", "-c", script])


def run(tmp, n):
    relay, sink = ports("opensmtpd-relay")[:2]
    maildir = os.path.join(tmp, "maildir")
    os.makedirs(maildir)
    u = pwd.getpwnam("opensmtpd")
    os.chown(maildir, u.pw_uid, u.pw_gid)
    status = os.path.join(tmp, "client2.status")
    env = dict(os.environ, PYTHONUNBUFFERED="1", SMTPD_CLIENT_STATUS=status)
    left = []
    try:
        with Daemons(tmp) as d:
            k = instance(d, tmp, "sink", f'listen on 127.0.0.1 port {sink} hostname sink.test\n'
                                         f'action "local" maildir "{maildir}"\n'
                                         'match from any for any action "local"\n')
            wait_port(sink, k, timeout=20)
            r = instance(d, tmp, "relay", f'listen on 127.0.0.1 port {relay} hostname relay.test\n'
                                          f'action "out" relay host smtp+notls://127.0.0.1:{sink}\n'
                                          'match from any for any action "out"\n')
            try:
                wait_port(relay, r, timeout=20)
                _drive(tmp, n, maildir, status, env, d)
            finally:
                left = descendants(k.pid) + descendants(r.pid)
    finally:
        # A process of smtpd stopped by SIGSTOP takes no signal, and its parent waits for it:
        # whatever is left of both instances is killed.
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _drive(tmp, n, maildir, status, env, d):
    """The clients, then the check of the maildir."""
    helper = d.start("client2", [PY, LAUNCHER, "smtpd-client", "--name", "2"], env=env)
    ok, errors = workload("1", n, 0.02)
    log(f"opensmtpd-relay client 1: {ok}/{n} messages accepted, {errors} failed")
    wait_readers([helper], seconds=25)
    try:
        with open(status) as f:
            accepted = ok + int(f.read())
    except (OSError, ValueError):
        accepted = ok
        log("client 2 said nothing of what it sent")
    end = time.monotonic() + 10
    good, bad = check(maildir)
    while good + bad < accepted and time.monotonic() < end:
        time.sleep(0.25)
        good, bad = check(maildir)
    log(f"opensmtpd-relay: {good}/{accepted} accepted messages delivered intact, {bad} corrupt, "
        f"{max(0, accepted - good - bad)} not delivered")
