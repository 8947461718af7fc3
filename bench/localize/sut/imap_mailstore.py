"""imap-mailstore: a Dovecot IMAP server (Debian's `dovecot-imapd`: C, a master process and
the services it forks — `imap-login` accepting connections, `auth` checking passwords over
UNIX sockets, an `imap` process per session that the login process hands the connection
to, `anvil`, `log`, `config`) with maildir storage, a writer and two readers on the standard
library's `imaplib`.

Ports: IMAP for the writer = p[0], for reader 1 = p[1], for reader 2 = p[2] (three
listeners of one login service: each session's port says whose it is). Users `writer`, `reader1`, `reader2` log in with passwords from a
passwd-file; every mailbox is in the user `nobody`'s maildirs under the scratch directory.
The writer (the launcher) APPENDs N messages `seq <i>` to the shared folder of user `box`
(a master-user login: `box*writer`), the reader `--name 1` follows them (SELECT, SEARCH for
the next subject, FETCH the body; a message not there yet is waited for, up to a second),
the reader `--name 2` polls the folder's STATUS and fetches the newest headers. Every client
has a 2 s socket timeout and counts a failed command; after a socket error (or a reply it
cannot parse) it logs in again, after a NO or BAD it goes on in the same session.
"""

import grp
import imaplib
import os
import pwd
import signal
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port, wait_readers

CONF = """base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.err
info_log_path = {dir}/dovecot.info
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
auth_master_user_separator = *
first_valid_uid = 1
mail_location = maildir:{dir}/mail/%u
mail_uid = nobody
mail_gid = nogroup
default_internal_user = dovecot
default_login_user = dovenull
login_trusted_networks =
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/masters
  master = yes
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/users
}}
userdb {{
  driver = static
  args = home={dir}/mail/%u allow_all_users=yes
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imap_reader1 {{
    address = 127.0.0.1
    port = {port1}
  }}
  inet_listener imap_reader2 {{
    address = 127.0.0.1
    port = {port2}
  }}
  inet_listener imaps {{
    port = 0
  }}
  # One long-lived login process for every connection (Dovecot's "high-performance" mode).
  service_count = 0
  process_min_avail = 1
}}
service imap {{
  process_limit = 20
}}
"""
BOX = "box"
PASSWORD = "secret"
ERRORS = (imaplib.IMAP4.error, imaplib.IMAP4.abort, OSError, ValueError, IndexError, EOFError)


def _login(user):
    # Each client has a listener of its own: a session's port says whose it is.
    port = ports("imap-mailstore")[{"writer": 0, "reader1": 1, "reader2": 2}[user]]
    c = imaplib.IMAP4("127.0.0.1", port, timeout=2.0)
    c.login(f"{BOX}*{user}", PASSWORD)
    return c


def _broken(e):
    """True when the connection is gone or out of step (a socket error, imaplib's abort,
    a protocol error of imaplib's own): the client logs in again. A command the server
    answered NO or BAD failed alone: the session goes on, as a mail client's does."""
    if isinstance(e, imaplib.IMAP4.abort):
        return True
    return not isinstance(e, (Refused, imaplib.IMAP4.error))


class Refused(ValueError):
    """The server answered a command NO (or BAD)."""


def _check(typ, data, what):
    if typ != "OK":
        raise Refused(f"{what}: {typ} {data!r}")
    return data


def _logout(c):
    try:
        if c is not None:
            c.logout()
    except Exception:
        pass


def reader(name):
    """Helper process `imap-reader --name 1|2`: 1 follows the writer's messages one by one,
    2 polls the folder's status and the newest headers; both leave when the message `seq
    stop` is there or after the workload's time."""
    term = terminated()
    c, got, missed, failed, i, stop = None, 0, 0, 0, 0, False
    end = time.monotonic() + WORKLOAD_S + 5
    since = time.monotonic()
    while not stop and not term.is_set() and time.monotonic() < end:
        try:
            if c is None:
                c = _login(f"reader{name}")
                _check(*c.select("INBOX", readonly=True), "select")
            if name == "1":
                data = _check(*c.search(None, "SUBJECT", f'"seq {i}"'), "search")
                nums = data[0].split()
                if nums:
                    _check(*c.fetch(nums[0], "(BODY.PEEK[TEXT])"), "fetch")
                if nums or time.monotonic() - since > 1.0:
                    # A message the writer failed to append (or that never came) is given up.
                    got, missed, i, since = got + bool(nums), missed + (not nums), i + 1, time.monotonic()
                else:
                    _check(*c.noop(), "noop")
                    stop = bool(_check(*c.search(None, "SUBJECT", '"seq stop"'), "search")[0].split())
                    time.sleep(0.05)
            else:
                data = _check(*c.status("INBOX", "(MESSAGES UIDNEXT)"), "status")
                _check(*c.noop(), "noop")
                n = int(data[0].split(b"MESSAGES ")[1].split()[0].rstrip(b")"))
                if n:
                    _check(*c.fetch(f"{max(1, n - 2)}:{n}", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])"), "fetch")
                stop = bool(_check(*c.search(None, "SUBJECT", '"seq stop"'), "search")[0].split())
                got, i = got + 1, i + 1
                time.sleep(0.1)
        except ERRORS as e:
            failed += 1
            log(f"reader {name}: command failed: {e!r}")
            if _broken(e):
                _logout(c)
                c = None
            time.sleep(0.2)
    _logout(c)
    log(f"imap reader {name}: {got} reads, {missed} messages never seen, {failed} failed, stop={stop}"
        f"{' (told to stop)' if term.is_set() else ''}")


def _message(i):
    pad = "x" * (i % 80) if isinstance(i, int) else ""
    return (f"From: writer@suite\r\nTo: box@suite\r\nSubject: seq {i}\r\n"
            f"Message-ID: <{i}.{os.getpid()}@suite>\r\n\r\nbody {i} {pad}\r\n").encode()


def run(tmp, n):
    port = ports("imap-mailstore")[0]
    for sub in ("run", "state", "mail"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    os.chmod(tmp, 0o755)
    # The imap processes run as nobody: the mail directory is theirs.
    os.chown(os.path.join(tmp, "mail"), pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid)
    with open(os.path.join(tmp, "users"), "w") as f:
        f.write(f"{BOX}:{{PLAIN}}{PASSWORD}\n")
    with open(os.path.join(tmp, "masters"), "w") as f:
        for u in ("writer", "reader1", "reader2"):
            f.write(f"{u}:{{PLAIN}}{PASSWORD}\n")
    conf = os.path.join(tmp, "dovecot.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(dir=tmp, port=port, port1=port + 1, port2=port + 2))
    group = None
    try:
        with Daemons(tmp) as d:
            p = d.start("dovecot", ["dovecot", "-F", "-c", conf], cwd=tmp, start_new_session=True)
            group = p.pid
            wait_port(port, p, timeout=20)
            # The first login makes the maildir.
            end = time.monotonic() + 10
            while True:
                try:
                    c = _login("writer")
                    c.logout()
                    break
                except ERRORS as e:
                    if time.monotonic() > end:
                        raise RuntimeError(f"dovecot: no login in 10 s: {e!r}") from e
                    time.sleep(0.2)
            readers = [d.start(f"reader{i}", [PY, LAUNCHER, "imap-reader", "--name", str(i)]) for i in (1, 2)]
            c, ok, failed = None, 0, 0
            for i in steps(n):
                try:
                    if c is None:
                        c = _login("writer")
                    _check(*c.append("INBOX", None, None, _message(i)), "append")
                    ok += 1
                except ERRORS as e:
                    failed += 1
                    log(f"append failed: {e!r}")
                    if _broken(e):
                        _logout(c)
                        c = None
                    time.sleep(0.2)
                time.sleep(0.05)
            try:
                _logout(c)
                c = _login("writer")
                c.append("INBOX", None, None, _message("stop"))
                c.logout()
            except ERRORS as e:
                log(f"could not append the stop message: {e!r}")
            wait_readers(readers)
            log(f"imap-mailstore: {ok}/{n} appends ok, {failed} failed")
    finally:
        # Dovecot's processes share its process group; an imap process stopped by SIGSTOP
        # never takes the SIGTERM that stops the others: whatever is left is killed.
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
