"""postfix-relay: a private Postfix instance (Debian `postfix`, 3.7: C, a `master` process and
the services it forks on demand — an `smtpd` per client connection, `cleanup`,
`trivial-rewrite`, `qmgr`, one `smtp` delivery agent, `scache`, `pickup`, `proxymap`, `postlogd`,
`bounce`/`defer` when a delivery fails — talking over UNIX sockets in its queue directory)
relaying every message to a second SMTP hop, a sink on `aiosmtpd` (CPython asyncio), and two
Python `smtplib` clients.

Ports: smtpd for client 1 = p[0], smtpd for client 2 = p[1] (two listeners of one master, so
that each client's smtpd is known by its port), the sink's SMTP = p[2], the sink's query port
= p[3]. The instance has its own configuration directory, queue and data directory under the
scratch directory (made here, with the owners and modes `postfix check` would give them);
the master runs in the foreground (`master -c DIR -s`) as root and logs through `postlogd`
to its standard output. Every message goes to `relayhost = [127.0.0.1]:p[2]`; the smtp client
gives up on the sink after 2 s (every `smtp_*_timeout`), a deferred message is tried again
after 2–4 s. Postfix keeps its own defaults elsewhere: a service process serves 100
connections (`max_use`) and is forked again, so `cleanup` processes are replaced during a
run (the one smtp agent is kept: see MASTER_CF). The master passes SIGTERM on to its
services and exits; 3 s later the launcher SIGKILLs what is left of its process group (a
service stopped by SIGSTOP).

Each client (the launcher on p[0], the helper `postfix-client --name 2` on p[1]) sends N
messages with Message-IDs of its own over one SMTP session (`smtplib`, 2 s timeout; after a
failure it logs, connects again and goes on), and after each message asks the sink (one
keep-alive line connection: `HAVE <id>` → `YES`/`NO`) whether a message sent four steps
earlier has arrived; at the end it waits up to 8 s for the rest. It says how many messages
were accepted, how many failed, how many reached the sink and how many did not. The sink
says at the end (SIGTERM) how many messages it received.
"""

import asyncio
import grp
import os
import pwd
import signal
import smtplib
import time

from .common import LAUNCHER, PY, Daemons, LineClient, log, ports, steps, terminated, wait_port, wait_readers

MAIN_CF = """compatibility_level = 3.6
config_directory = {dir}/etc
queue_directory = {dir}/queue
data_directory = {dir}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = relay.localize.test
mydomain = localize.test
myorigin = $myhostname
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:{sink}
smtpd_relay_restrictions = permit_mynetworks, reject
smtpd_peername_lookup = no
alias_maps =
alias_database =
local_transport = error:no local delivery here
maillog_file = /dev/stdout
in_flow_delay = 0s
smtp_connect_timeout = 2s
smtp_helo_timeout = 2s
smtp_mail_timeout = 2s
smtp_rcpt_timeout = 2s
smtp_data_init_timeout = 2s
smtp_data_xfer_timeout = 2s
smtp_data_done_timeout = 2s
smtp_quit_timeout = 2s
smtpd_timeout = 5s
queue_run_delay = 2s
minimal_backoff_time = 2s
maximal_backoff_time = 4s
biff = no
smtputf8_enable = no
"""

# Debian's master.cf without the services this instance has no use for (local delivery,
# maildrop, uucp, ...), and without chroot: the queue is under the scratch directory. One
# smtp delivery agent, kept for the whole run (max_use), as a relay limited to one
# connection at a time to its next hop has: a fault injected into "the smtp process" then
# names one process.
MASTER_CF = """127.0.0.1:{p1} inet n - n - - smtpd
127.0.0.1:{p2} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       1       smtp -o max_use=10000
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""

QUEUE_DIRS = "active bounce corrupt defer deferred flush hold incoming private saved trace".split()
REQUESTS = 120
LAG = 4  # a client asks the sink for the message it sent this many steps earlier
FINAL_WAIT_S = 8.0


def instance(tmp):
    """Writes the instance's configuration and makes its queue and data directories."""
    p = ports("postfix-relay")
    etc = os.path.join(tmp, "etc")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "main.cf"), "w") as f:
        f.write(MAIN_CF.format(dir=tmp, sink=p[2]))
    with open(os.path.join(etc, "master.cf"), "w") as f:
        f.write(MASTER_CF.format(p1=p[0], p2=p[1]))
    uid, gid = pwd.getpwnam("postfix").pw_uid, grp.getgrnam("postfix").gr_gid
    postdrop = grp.getgrnam("postdrop").gr_gid
    q = os.path.join(tmp, "queue")
    os.makedirs(q, exist_ok=True)
    os.chmod(q, 0o755)
    for name in QUEUE_DIRS:
        os.mkdir(os.path.join(q, name), 0o700)
        os.chown(os.path.join(q, name), uid, gid)
    for name, mode in (("maildrop", 0o730), ("public", 0o710)):
        os.mkdir(os.path.join(q, name))
        os.chmod(os.path.join(q, name), mode)
        os.chown(os.path.join(q, name), uid, postdrop)
    os.mkdir(os.path.join(q, "pid"), 0o755)
    os.mkdir(os.path.join(tmp, "data"), 0o700)
    os.chown(os.path.join(tmp, "data"), uid, gid)
    # The services run as `postfix`: every directory above the queue must let them through.
    os.chmod(tmp, 0o755)
    return etc


class Sink:
    """The sink's aiosmtpd handler: keeps the Message-ID of every message it accepts."""

    seen = set()

    async def handle_DATA(self, server, session, envelope):
        mid = None
        for line in envelope.content.split(b"\r\n"):
            if not line:
                break
            if line.lower().startswith(b"message-id:"):
                mid = line.split(b":", 1)[1].strip().strip(b"<>").decode(errors="replace")
        if mid is None:
            return "550 5.6.0 no Message-ID"
        self.seen.add(mid)
        return "250 2.0.0 OK: queued as " + mid


def sink(name):
    """Helper process `smtp-sink`: the second hop. aiosmtpd on p[2] keeps the Message-ID of
    every message it accepts; a line server on p[3] answers `HAVE <id>` with YES or NO."""
    from aiosmtpd.smtp import SMTP

    p = ports("postfix-relay")
    seen = Sink.seen

    async def query(reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                words = line.split()
                if len(words) != 2 or words[0] != b"HAVE":
                    writer.write(b"ERR\r\n")
                else:
                    writer.write(b"YES\r\n" if words[1].decode(errors="replace") in seen else b"NO\r\n")
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        handler = Sink()
        s1 = await loop.create_server(lambda: SMTP(handler, hostname="sink.localize.test", timeout=10),
                                      "127.0.0.1", p[2])
        s2 = await asyncio.start_server(query, "127.0.0.1", p[3])
        await stop.wait()
        s1.close()
        s2.close()

    asyncio.run(main())
    log(f"smtp sink: {len(seen)} messages received (told to stop)")


class Sender:
    """One client: an SMTP session to its smtpd, and a line connection to the sink."""

    def __init__(self, name, port):
        self.name = name
        self.port = port
        self.smtp = None
        self.sink = LineClient(ports("postfix-relay")[3], timeout=2.0)
        self.accepted = []
        self.failed = 0
        self.arrived = set()

    def mid(self, i):
        return f"c{self.name}-{i}@client{self.name}.localize.test"

    def send(self, i):
        msg = (f"From: client{self.name}@client.localize.test\r\nTo: box@dest.localize.test\r\n"
               f"Subject: message {i} of client {self.name}\r\nMessage-ID: <{self.mid(i)}>\r\n\r\n"
               + f"line {i}\r\n" * (1 + i % 7))
        try:
            if self.smtp is None:
                self.smtp = smtplib.SMTP("127.0.0.1", self.port, local_hostname=f"client{self.name}.localize.test",
                                         timeout=2.0)
            self.smtp.sendmail(f"client{self.name}@client.localize.test", ["box@dest.localize.test"], msg)
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

    def have(self, i):
        """Asks the sink whether message i arrived (None when the sink did not answer)."""
        def ask(c):
            c.sock.sendall(f"HAVE {self.mid(i)}\r\n".encode())
            line = c.line()
            if line not in (b"YES", b"NO"):
                raise ValueError(f"sink answered {line[:40]!r}")
            return line == b"YES"

        got = self.sink.request(ask)
        if got:
            self.arrived.add(i)
        return got

    def run(self, n, term=None, pause=0.02):
        done = 0
        for i in steps(n):
            if term is not None and term.is_set():
                break
            self.send(i)
            done += 1
            if i - LAG in self.accepted:
                self.have(i - LAG)
            time.sleep(pause)
        if self.smtp is not None:
            try:
                self.smtp.quit()
            except (OSError, smtplib.SMTPException):
                pass
            self.smtp = None
        end = time.monotonic() + FINAL_WAIT_S
        while time.monotonic() < end and not (term is not None and term.is_set()):
            missing = [i for i in self.accepted if i not in self.arrived]
            for i in missing:
                self.have(i)
            if all(i in self.arrived for i in self.accepted):
                break
            time.sleep(0.5)
        self.sink.close()
        lost = len(self.accepted) - len(self.arrived)
        return f"{len(self.accepted)}/{done} messages ok, {self.failed} failed, {len(self.arrived)} relayed, {lost} not relayed"


def client(name):
    """Helper process `postfix-client --name 2`."""
    term = terminated()
    said = Sender(name, ports("postfix-relay")[int(name) - 1]).run(REQUESTS, term)
    log(f"postfix client {name}: {said}{' (told to stop)' if term.is_set() else ''}")


def _group_alive(pgid):
    """The pids of the process group's members that are not zombies (from /proc)."""
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(name))
    return alive


def _end_group(pgid, grace=3.0):
    """After the master's SIGTERM (it passes SIGTERM on to its services and exits), waits up
    to `grace` seconds for the services of its process group to end, then SIGKILLs what is
    left: a service stopped by SIGSTOP never takes the SIGTERM, and a recording ends only
    when every traced process has."""
    end = time.monotonic() + grace
    while _group_alive(pgid):
        if time.monotonic() > end:
            log(f"postfix: {len(_group_alive(pgid))} service(s) left after the master: killed")
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.1)


def run(tmp, n):
    p = ports("postfix-relay")
    etc = instance(tmp)
    group = None
    try:
        with Daemons(tmp) as d:
            s = d.start("sink", [PY, LAUNCHER, "smtp-sink"])
            wait_port(p[2], s, timeout=20)
            wait_port(p[3], s, timeout=20)
            # The master makes itself a session (and process group) leader: its services
            # are in the group of its pid.
            m = d.start("postfix", ["/usr/lib/postfix/sbin/master", "-c", etc, "-s"])
            group = m.pid
            wait_port(p[0], m, timeout=20)
            wait_port(p[1], m, timeout=20)
            helper = d.start("client2", [PY, LAUNCHER, "postfix-client", "--name", "2"])
            said = Sender("1", p[0]).run(n)
            wait_readers([helper], seconds=30)
            log(f"postfix-relay: {said}")
    finally:
        if group is not None:
            _end_group(group)
