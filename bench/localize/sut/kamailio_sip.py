"""kamailio-sip: a Kamailio SIP proxy (C; a main process that forks a UDP receiver per
listening socket, a timer, a slow timer and helper processes, all sharing the transaction
table in shared memory) forwarding, transaction-stateful (`tm`), to two SIP user-agent
servers picked round-robin by the `dispatcher` module, and two SIP user-agent clients.

Ports (all UDP): the proxy listens on p[0] (client 1's) and p[1] (client 2's), one receiver
process each, and forwards from the socket a request came in on; UAS = p[2], p[3]; UAC =
p[4] (the launcher), p[5] (`sip-uac --name 2`). The UAS (`sip-uas --name 1|2`) answer MESSAGE with 200 OK and a body naming
the message's digest and themselves, OPTIONS with 200 OK, and INVITE with 180 Ringing and
then 200 OK (retransmitted until the ACK comes, RFC 3261 § 13.3.1.4); an in-dialog BYE ends
the call with 200 OK. The proxy record-routes INVITEs, so the ACK and the BYE come back
through it (loose routing). A UAC sends one transaction at a time: mostly MESSAGE (the
answer's digest is checked), every fifth request an OPTIONS, every fourth an INVITE dialog
(INVITE → 200 → ACK → BYE → 200). Requests are retransmitted after T1 (here 250 ms),
doubling up to T2 (4 s), and a transaction that gets no final answer within 16·T1 = 4 s
fails: the UAC logs it and goes on with the next request. The proxy gives up on a UAS after
1.5 s (`fr_timer`; 3 s for an INVITE) and tries the other one (`ds_next_dst`) on a timeout
or a 5xx.
"""

import hashlib
import os
import random
import signal
import socket
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_udp

T1, T2, TIMER_F = 0.25, 4.0, 4.0

CFG = """#!KAMAILIO
debug=1
log_stderror=yes
children=1
exit_timeout=3
disable_tcp=yes
auto_aliases=no
dns=no
rev_dns=no
use_dns_cache=no
listen=udp:127.0.0.1:{proxy}
listen=udp:127.0.0.1:{proxy2}
alias="127.0.0.1:{proxy}"
alias="127.0.0.1:{proxy2}"
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"

loadmodule "corex.so"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "sanity.so"
loadmodule "dispatcher.so"

modparam("tm", "fr_timer", 1500)
modparam("tm", "fr_inv_timer", 3000)
modparam("dispatcher", "list_file", "{dir}/dispatcher.list")
modparam("dispatcher", "flags", 2)
modparam("dispatcher", "ds_ping_interval", 0)

request_route {{
    if (!mf_process_maxfwd_header("10")) {{
        sl_send_reply("483", "Too Many Hops");
        exit;
    }}
    if (!sanity_check("1511", "7")) {{
        xlog("L_WARN", "malformed $rm from $si:$sp\\n");
        exit;
    }}
    if (has_totag()) {{
        if (loose_route()) {{
            route(RELAY);
        }}
        if (is_method("ACK") && t_check_trans()) {{
            route(RELAY);
        }}
        if (!is_method("ACK")) {{
            sl_send_reply("404", "No such dialog");
        }}
        exit;
    }}
    if (is_method("CANCEL")) {{
        if (t_check_trans()) {{
            route(RELAY);
        }}
        exit;
    }}
    t_check_trans();
    if (is_method("INVITE")) {{
        record_route();
    }}
    if (!ds_select_dst("1", "4")) {{
        sl_send_reply("503", "No destination");
        exit;
    }}
    t_on_failure("FAILOVER");
    route(RELAY);
}}

route[RELAY] {{
    if (!t_relay()) {{
        sl_reply_error();
    }}
    exit;
}}

failure_route[FAILOVER] {{
    if (t_is_canceled()) {{
        exit;
    }}
    if (t_check_status("408|5[0-9][0-9]") && ds_next_dst()) {{
        xlog("L_WARN", "$rm $ci: no answer or 5xx from a UAS, trying $du\\n");
        t_on_failure("FAILOVER");
        t_relay();
    }}
}}
"""


# --- a minimal SIP message layer (RFC 3261 over UDP) ---

def parse(data):
    """(first line, {lower-case header: [values]}, body) of one datagram."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    hdrs = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"header line without a colon: {line[:40]!r}")
        hdrs.setdefault(name.strip().lower(), []).append(value.strip())
    n = int(hdrs.get("content-length", ["0"])[0])
    if n > len(body):
        raise ValueError(f"body of {len(body)} bytes, Content-Length {n}")
    return lines[0], hdrs, body[:n]


def build(first, headers, body=b""):
    out = [first] + [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(out).encode() + body


def branch():
    return "z9hG4bK" + os.urandom(6).hex()


def digest(body):
    return hashlib.sha1(body).hexdigest()[:16]


def uas(name):
    """Helper process `sip-uas --name 1|2`: a SIP user-agent server on p[name]."""
    term = terminated()
    k = int(name)
    port = ports("kamailio-sip")[1 + k]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    s.settimeout(T1)
    answered = {}  # (Call-ID, CSeq) -> (response, peer): a retransmitted request gets it again
    pending = {}  # Call-ID -> [200 OK, peer, next retransmission, interval, give-up time]
    counts = {}
    bad = 0
    end = time.monotonic() + WORKLOAD_S + 15
    while not term.is_set() and time.monotonic() < end:
        now = time.monotonic()
        for cid, p in list(pending.items()):
            if now >= p[4]:
                log(f"uas {k}: no ACK for the 200 OK of {cid}")
                del pending[cid]
            elif now >= p[2]:
                s.sendto(p[0], p[1])
                p[3] = min(2 * p[3], T2)
                p[2] = now + p[3]
        try:
            data, peer = s.recvfrom(65535)
        except socket.timeout:
            continue
        except OSError as e:
            log(f"uas {k}: receive failed: {e!r}")
            continue
        try:
            first, h, body = parse(data)
            if first.startswith("SIP/2.0"):
                continue  # no request of ours is forwarded; a stray response
            method = first.split(" ", 1)[0]
            cid, cseq = h["call-id"][0], h["cseq"][0]
            if method == "ACK":
                pending.pop(cid, None)
                continue
            key = (cid, cseq)
            if key in answered:
                s.sendto(answered[key][0], peer)
                continue
            tag = "uas" + digest(cid.encode())[:8]
            to = h["to"][0] if ";tag=" in h["to"][0] else h["to"][0] + f";tag={tag}"
            common = [("Via", v) for v in h["via"]] + [("From", h["from"][0]), ("To", to), ("Call-ID", cid),
                                                        ("CSeq", cseq)]
            contact = ("Contact", f"<sip:uas{k}@127.0.0.1:{port}>")
            if method == "MESSAGE":
                resp = build("SIP/2.0 200 OK", common + [("Content-Type", "text/plain")],
                             f"got {digest(body)} at uas{k}".encode())
            elif method == "OPTIONS":
                resp = build("SIP/2.0 200 OK", common + [("Allow", "INVITE, ACK, BYE, MESSAGE, OPTIONS")])
            elif method == "INVITE":
                rr = [("Record-Route", v) for v in h.get("record-route", [])]
                s.sendto(build("SIP/2.0 180 Ringing", common + rr + [contact]), peer)
                resp = build("SIP/2.0 200 OK", common + rr + [contact, ("Content-Type", "application/sdp")],
                             f"v=0\r\no=uas{k} 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\n"
                             f"t=0 0\r\nm=audio 9 RTP/AVP 0\r\n".encode())
                pending[cid] = [resp, peer, time.monotonic() + T1, T1, time.monotonic() + 16 * T1]
            elif method == "BYE":
                resp = build("SIP/2.0 200 OK", common)
            else:
                resp = build("SIP/2.0 405 Method Not Allowed", common)
            answered[key] = (resp, peer)
            if len(answered) > 400:
                answered.pop(next(iter(answered)))
            s.sendto(resp, peer)
            counts[method] = counts.get(method, 0) + 1
        except (KeyError, IndexError, ValueError) as e:
            bad += 1
            log(f"uas {k}: a malformed request from {peer}: {e!r}")
    log(f"uas {k}: answered " + ", ".join(f"{m} {n}" for m, n in sorted(counts.items()))
        + f"; {bad} malformed{' (told to stop)' if term.is_set() else ''}")


class Uac:
    """A SIP user-agent client on one UDP socket, one transaction at a time."""

    def __init__(self, k):
        p = ports("kamailio-sip")
        self.proxy = ("127.0.0.1", p[k - 1])
        self.port = p[3 + k]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", self.port))
        self.user = f"uac{k}"
        self.cseq = 0
        self.uas = {}

    def headers(self, method, cid, br, to, ftag, route=(), cseq=None):
        if cseq is None:
            self.cseq += 1
            cseq = self.cseq
        return [("Via", f"SIP/2.0/UDP 127.0.0.1:{self.port};branch={br};rport"),
                ("Max-Forwards", "70"), *[("Route", r) for r in route],
                ("From", f"<sip:{self.user}@bench>;tag={ftag}"), ("To", to), ("Call-ID", cid),
                ("CSeq", f"{cseq} {method}"),
                ("Contact", f"<sip:{self.user}@127.0.0.1:{self.port}>")]

    def transaction(self, req, br, dest, invite=False):
        """Sends req and retransmits it (timers A/E) until a final response of this
        transaction comes (returned as (status, headers, body)) or 16·T1 pass."""
        interval, end = T1, time.monotonic() + TIMER_F
        nxt = time.monotonic()
        provisional = False
        while True:
            now = time.monotonic()
            if now >= end:
                raise TimeoutError(f"no final response in {TIMER_F} s")
            if now >= nxt and not (invite and provisional):
                self.sock.sendto(req, dest)
                nxt = now + interval
                interval = min(2 * interval, T2)
            self.sock.settimeout(max(0.01, min(nxt, end) - now) if not (invite and provisional)
                                 else max(0.01, end - now))
            try:
                data, _ = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            first, h, body = parse(data)
            if not first.startswith("SIP/2.0 ") or f"branch={br}" not in h.get("via", [""])[0]:
                continue  # a late answer to an earlier transaction
            code = int(first.split(" ", 2)[1])
            if code < 200:
                provisional = True
                continue
            return code, h, body

    def message(self, i):
        cid, br, ftag = f"m{i}-{os.urandom(4).hex()}@{self.user}", branch(), os.urandom(4).hex()
        body = f"message {i} from {self.user}: {random.random()}".encode()
        req = build(f"MESSAGE sip:svc@127.0.0.1:{self.proxy[1]} SIP/2.0",
                    self.headers("MESSAGE", cid, br, "<sip:svc@bench>", ftag)
                    + [("Content-Type", "text/plain")], body)
        code, _, got = self.transaction(req, br, self.proxy)
        if code != 200:
            raise ValueError(f"MESSAGE {i}: {code}")
        words = got.decode(errors="replace").split()
        if len(words) != 4 or words[1] != digest(body):
            raise ValueError(f"MESSAGE {i}: answer {got[:60]!r} does not name its digest")
        self.uas[words[3]] = self.uas.get(words[3], 0) + 1

    def options(self, i):
        cid, br, ftag = f"o{i}-{os.urandom(4).hex()}@{self.user}", branch(), os.urandom(4).hex()
        req = build(f"OPTIONS sip:svc@127.0.0.1:{self.proxy[1]} SIP/2.0",
                    self.headers("OPTIONS", cid, br, "<sip:svc@bench>", ftag))
        code, _, _ = self.transaction(req, br, self.proxy)
        if code != 200:
            raise ValueError(f"OPTIONS {i}: {code}")

    def call(self, i):
        """INVITE → 200 → ACK → BYE → 200, the ACK and BYE along the Record-Route."""
        cid, br, ftag = f"c{i}-{os.urandom(4).hex()}@{self.user}", branch(), os.urandom(4).hex()
        sdp = f"v=0\r\no={self.user} 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        req = build(f"INVITE sip:svc@127.0.0.1:{self.proxy[1]} SIP/2.0",
                    self.headers("INVITE", cid, br, "<sip:svc@bench>", ftag)
                    + [("Content-Type", "application/sdp")], (sdp + "m=audio 9 RTP/AVP 0\r\n").encode())
        code, h, _ = self.transaction(req, br, self.proxy, invite=True)
        if code != 200:
            raise ValueError(f"INVITE {i}: {code}")
        to = h["to"][0]
        target = h["contact"][0].strip("<>")
        route = list(reversed(h.get("record-route", [])))
        dest = self.proxy if route else _addr(target)
        ack = self.headers("ACK", cid, branch(), to, ftag, route, cseq=int(h["cseq"][0].split()[0]))
        self.sock.sendto(build(f"ACK {target} SIP/2.0", ack), dest)
        br = branch()
        bye = build(f"BYE {target} SIP/2.0", self.headers("BYE", cid, br, to, ftag, route))
        code, _, _ = self.transaction(bye, br, dest)
        if code != 200:
            raise ValueError(f"BYE {i}: {code}")

    def step(self, i):
        if i % 4 == 3:
            return self.call(i)
        if i % 5 == 4:
            return self.options(i)
        return self.message(i)

    def spread(self):
        return ", ".join(f"{u}: {n}" for u, n in sorted(self.uas.items()))


def _addr(uri):
    host = uri.split("@", 1)[-1].split(";", 1)[0]
    h, _, p = host.partition(":")
    return h, int(p or 5060)


def _loop(c, n, who, term=None, pause=0.08):
    ok = failed = done = 0
    for i in steps(n):
        if term is not None and term.is_set():
            break
        try:
            c.step(i)
            ok += 1
        except (OSError, ValueError, KeyError, IndexError) as e:
            failed += 1
            log(f"{who}: request {i} failed: {e!r}")
        done += 1
        time.sleep(pause)
    log(f"{who}: {ok}/{done} transactions ok, {failed} failed (messages answered by {c.spread()})")


def uac(name):
    """Helper process `sip-uac --name 2`: the second SIP client."""
    term = terminated()
    _loop(Uac(int(name)), 200, f"sip uac {name}", term, 0.05)


def run(tmp, n):
    p = ports("kamailio-sip")
    kd = os.path.join(tmp, "kamailio")
    os.makedirs(kd, exist_ok=True)
    with open(os.path.join(kd, "dispatcher.list"), "w") as f:
        f.write(f"1 sip:127.0.0.1:{p[2]}\n1 sip:127.0.0.1:{p[3]}\n")
    cfg = os.path.join(kd, "kamailio.cfg")
    with open(cfg, "w") as f:
        f.write(CFG.format(proxy=p[0], proxy2=p[1], dir=kd))
    with Daemons(tmp) as d:
        for k in (1, 2):
            u = d.start(f"uas{k}", [PY, LAUNCHER, "sip-uas", "--name", str(k)])
            wait_udp(p[1 + k], u)
        k = d.start("kamailio", ["kamailio", "-f", cfg, "-DD", "-E", "-Y", kd, "-P", os.path.join(kd, "k.pid"),
                                 "-m", "32", "-M", "4"])
        kids = []
        try:
            wait_udp(p[0], k)
            wait_udp(p[1], k)
            kids = _children(k.pid)
            other = d.start("uac2", [PY, LAUNCHER, "sip-uac", "--name", "2"])
            _loop(Uac(1), n, "sip uac 1")
            try:
                other.wait(timeout=WORKLOAD_S)
            except Exception:
                log("uac 2 did not stop")
        finally:
            d.stop()
            _reap(kids)


def _children(pid):
    """The processes whose parent is pid (Kamailio's forked children)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _reap(kids):
    """SIGKILL to the children of a Kamailio main process that is gone: main ends its
    children itself (SIGTERM, then SIGKILL after `exit_timeout`), but a main killed while
    it ignores SIGTERM (at its start) leaves them, and they would hold the ports."""
    for pid in kids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "kamailio":
                    continue
            os.kill(pid, signal.SIGKILL)
            log(f"kamailio child {pid} outlived its main process: killed")
        except (OSError, ValueError):
            pass
