"""spamd-prefork: SpamAssassin's `spamd` 4.0 (Debian `spamd`/`spamassassin`: Perl, a parent
that preforks children, tells an idle one to accept each connection and replaces a child
after a fixed number of connections) checked by the C client `spamc` (Debian `spamc`, a
process per message, run by a Python driver) and by a Python client speaking the SPAMD
protocol itself.

Port: spamd = p[0]. spamd runs in the foreground (no `-d`) from a private configuration in
the scratch directory: `--configpath` holds one local rules file (five body and header
rules, required score 5, `report_safe 0` so that the body comes back as it was sent, no
Bayes, no DNS, no network tests: `-L`), `--siteconfigpath` one `init.pre` that loads the
rule engine's `Check` plugin only (no `sa-update`, no rules from /usr/share or
/var/lib/spamassassin); no user configuration (`-x`), its helper home in the scratch
directory, logging to standard error. It keeps one child at a time (`--min-children 1
--max-children 1`: with two, which child takes a connection shifts with timing, and no
SPEC could name one of them) and replaces it after CONN_PER_CHILD (110) connections, so the
first child serves the first 61 % of a run and its replacement the rest; the parent and
its child talk over a socketpair (the parent's orders to accept, the child's state
reports). A child stopped by SIGSTOP is killed at the end (the parent waits for it).

Every message is made at set-up from its index: spam (rules worth 5.5 or 6.5 points) or
ham (-1 or 1.5 points), with a body of varying length. The Python client (the launcher)
sends each message on a new connection (one request a connection, as the protocol has it;
3 s timeout), cycling through CHECK, SYMBOLS, REPORT and PROCESS, and checks the answer
against the message it sent: the verdict and score, the rule names, the report, the
processed message's body (length and SHA-1) and every Content-length. The driver (helper
`spamc-driver --name 2`) runs `spamc -x` (no safe fallback; 3 s timeout, one connection
try; its size limit `-s 5000NN` names message NN) per message, cycling through the full
mode (the returned message's X-Spam-Flag and X-Spam-Status rules and body, length and
SHA-1), `-c` (the exit code and the score) and `-y` (the rule names); a failed command is
logged and counted and the driver goes on.
"""

import hashlib
import os
import re
import signal
import socket
import subprocess
import time

from .common import LAUNCHER, PY, Daemons, descendants, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60
CONN_PER_CHILD = 110
CLIENT_TIMEOUT_S = 3.0
RULES = """required_score 5.0
report_safe 0
use_bayes 0
bayes_auto_learn 0
dns_available no
add_header spam Flag _YESNOCAPS_
add_header all Status _YESNO_, score=_SCORE_ required=_REQD_ tests=_TESTS_ autolearn=_AUTOLEARN_
clear_report_template
report Content analysis details:   (_SCORE_ points, _REQD_ required)
report _SUMMARY_
body LOCAL_PILLS /\\bcheap pills\\b/i
score LOCAL_PILLS 3.0
body LOCAL_LOTTERY /\\blottery winner\\b/i
score LOCAL_LOTTERY 2.5
header LOCAL_SUBJ_MONEY Subject =~ /\\bfree money\\b/i
score LOCAL_SUBJ_MONEY 2.0
body LOCAL_WIRE /\\bwire transfer now\\b/i
score LOCAL_WIRE 1.5
body LOCAL_MEETING /\\bproject meeting\\b/i
score LOCAL_MEETING -1.0
"""
# Kind of message i (i % 4): (subject, phrases in the body, rules that hit, score).
KINDS = [
    ("offer {i}", ["cheap pills", "lottery winner"], ["LOCAL_LOTTERY", "LOCAL_PILLS"], 5.5),
    ("minutes {i}", ["project meeting"], ["LOCAL_MEETING"], -1.0),
    ("free money {i}", ["cheap pills", "wire transfer now"], ["LOCAL_PILLS", "LOCAL_SUBJ_MONEY", "LOCAL_WIRE"], 6.5),
    ("invoice {i}", ["wire transfer now"], ["LOCAL_WIRE"], 1.5),
]
FILLER = ["the", "quarterly", "report", "is", "attached", "please", "review", "numbers", "before", "friday"]


def message(name, i):
    """(message bytes, body bytes, spam?, rules, score) of client `name`'s message i."""
    subject, phrases, rules, score = KINDS[i % 4]
    words = [FILLER[(i * 7 + k) % len(FILLER)] for k in range(20 + (i * 13) % 200)]
    lines = [" ".join(words[k:k + 12]) for k in range(0, len(words), 12)]
    # Under 2 000 bytes, phrases first: SpamAssassin cuts longer body text into chunks
    # of about 2 KB, and a phrase cut in two matches no rule.
    body = f"client {name} message {i}\n" + "".join(f"{p}\n" for p in phrases) + "\n".join(lines) + "\n"
    head = (f"From: sender{name}@localize.test\nTo: box@localize.test\nSubject: {subject.format(i=i)}\n"
            f"Message-ID: <m{name}-{i}@localize.test>\n\n")
    return (head + body).encode(), body.encode(), score >= 5.0, rules, score


def body_of(processed):
    """The body of a message as spamd or spamc gives it back (after its first empty line)."""
    sep = processed.find(b"\n\n")
    if sep < 0:
        sep = processed.find(b"\r\n\r\n")
        return None if sep < 0 else processed[sep + 4:]
    return processed[sep + 2:]


def same_body(got, want):
    if got is None or len(got) != len(want) or hashlib.sha1(got).digest() != hashlib.sha1(want).digest():
        raise ValueError(f"body of {len(got) if got is not None else None} bytes, wanted {len(want)} "
                         f"(SHA-1 {hashlib.sha1(want).hexdigest()[:12]})")


class SpamdClient:
    """The SPAMD protocol over one new connection a request (3 s timeout)."""

    def __init__(self, port):
        self.port = port
        self.errors = 0

    def request(self, command, msg):
        with socket.create_connection(("127.0.0.1", self.port), timeout=CLIENT_TIMEOUT_S) as s:
            s.sendall(f"{command} SPAMC/1.5\r\nContent-length: {len(msg)}\r\nUser: localize\r\n\r\n".encode() + msg)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if not sep:
            raise ValueError(f"{command}: no end of headers in {len(data)} bytes: {data[:60]!r}")
        lines = head.decode(errors="replace").split("\r\n")
        if not re.match(r"SPAMD/1\.\d 0 EX_OK$", lines[0]):
            raise ValueError(f"{command}: status {lines[0]!r:.60}")
        fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        if "Content-length" in fields and int(fields["Content-length"]) != len(body):
            raise ValueError(f"{command}: {len(body)} bytes, Content-length {fields['Content-length']}")
        return fields, body

    def step(self, name, i):
        msg, body, spam, rules, score = message(name, i)
        command = ["CHECK", "SYMBOLS", "REPORT", "PROCESS"][(i + i // 4) % 4]
        try:
            fields, out = self.request(command, msg)
            verdict = fields.get("Spam", "")
            want = f"{'True' if spam else 'False'} ; {score:.1f} / 5.0"
            if verdict != want:
                raise ValueError(f"{command} {i}: Spam: {verdict!r}, wanted {want!r}")
            if command == "SYMBOLS" and sorted(out.decode(errors="replace").strip().split(",")) != rules:
                raise ValueError(f"SYMBOLS {i}: {out!r:.80}, wanted {rules}")
            if command == "REPORT" and not all(r.encode() in out for r in rules):
                raise ValueError(f"REPORT {i}: {out!r:.80} lacks one of {rules}")
            if command == "PROCESS":
                same_body(body_of(out), body)
            return True
        except (OSError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            return False


def spamc(port, i, argv, msg):
    """One `spamc` process for message i: (exit code, output); killed after 8 s. Its size
    limit (`-s`, far above every message) is 500000 + i, so that each process's command
    line names its message."""
    r = subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), "-x", "-t", "3", "--connect-retries", "1",
                        "-s", str(500000 + i), *argv],
                       input=msg, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=8)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace").strip()


def spamc_step(port, name, i):
    msg, body, spam, rules, score = message(name, i)
    mode = (i + i // 4) % 3
    if mode == 0:
        rc, out, err = spamc(port, i, [], msg)
        if rc != 0:
            raise ValueError(f"spamc {i}: exit {rc}: {err!r:.100}")
        head = re.sub(r"\n[ \t]+", " ", out[:out.find(b"\n\n")].decode(errors="replace"))
        flag = re.search(r"^X-Spam-Flag: YES", head, re.M) is not None
        m = re.search(r"^X-Spam-Status: (Yes|No), score=(-?[\d.]+) required=5\.0 tests=([\w,\s]*?)\s*(?:autolearn|$)",
                      head, re.M)
        if flag != spam or not m or (m.group(1) == "Yes") != spam or float(m.group(2)) != score:
            status = m.group(0) if m else None
            raise ValueError(f"spamc {i}: flag {flag}, status {status!r:.100}, wanted {spam} {score}")
        if sorted(re.sub(r"\s", "", m.group(3)).split(",")) != rules:
            raise ValueError(f"spamc {i}: tests {m.group(3)!r:.80}, wanted {rules}")
        same_body(body_of(out), body)
    elif mode == 1:
        rc, out, err = spamc(port, i, ["-c"], msg)
        if rc != (1 if spam else 0) or out.decode(errors="replace").strip() != f"{score:.1f}/5.0":
            raise ValueError(f"spamc -c {i}: exit {rc}, {out!r:.40} {err!r:.80}, wanted {score:.1f}/5.0")
    else:
        rc, out, err = spamc(port, i, ["-y"], msg)
        if rc != 0 or sorted(out.decode(errors="replace").strip().split(",")) != rules:
            raise ValueError(f"spamc -y {i}: exit {rc}, {out!r:.60} {err!r:.80}, wanted {rules}")


def spamc_driver(name):
    """Helper process `spamc-driver --name N`: REQUESTS2 messages through spamc, every 100 ms."""
    port = ports("spamd-prefork")[0]
    ok = errors = 0
    for i in steps(REQUESTS2):
        try:
            spamc_step(port, name, i)
            ok += 1
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            errors += 1
            log(f"request failed: {e!r:.200}")
        time.sleep(0.1)
    log(f"spamd-prefork spamc driver {name}: {ok}/{REQUESTS2} messages ok, {errors} failed")


def run(tmp, n):
    port = ports("spamd-prefork")[0]
    rules, site, home = (os.path.join(tmp, d) for d in ("rules", "site", "home"))
    for d in (rules, site, home):
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(rules, "10_local.cf"), "w") as f:
        f.write(RULES)
    with open(os.path.join(site, "init.pre"), "w") as f:
        f.write("loadplugin Mail::SpamAssassin::Plugin::Check\n")
    children = []
    try:
        with Daemons(tmp) as d:
            spamd = d.start("spamd", ["spamd", "--configpath", rules, "--siteconfigpath", site, "-x", "-L",
                                      "--listen", f"127.0.0.1:{port}", "--min-children", "1", "--max-children", "1",
                                      "--max-conn-per-child", str(CONN_PER_CHILD), "--timeout-tcp", "5",
                                      "--timeout-child", "10", "-s", "stderr", "-H", home,
                                      "--pidfile", os.path.join(tmp, "spamd.pid")])
            wait_port(port, spamd, timeout=30)
            try:
                helper = d.start("spamc2", [PY, LAUNCHER, "spamc-driver", "--name", "2"])
                c = SpamdClient(port)
                ok = 0
                for i in steps(n):
                    ok += c.step("1", i)
                    time.sleep(0.05)
                wait_readers([helper], seconds=25)
                log(f"spamd-prefork: {ok}/{n} messages ok, {c.errors} failed")
            finally:
                children = descendants(spamd.pid)
    finally:
        # A child stopped by SIGSTOP takes no SIGTERM (the parent's, then ours), and the
        # parent waits for it: whatever is left of spamd is killed.
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
