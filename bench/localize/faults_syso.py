"""Fault cases of the validation systems added on 2026-11-29 for validation run 10 (branch
loc-syso). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 10 (`run.py --record-only` into
/tmp/val10/loc-syso with the lead's build /tmp/rec11/culprit: 3 normal runs, the control and
every case per system), then checked with `run.py --check --reuse` on those recordings
(injection records and client summaries only, no model, no ranking): every case of the
three systems fired (one injection each, the EAGAIN storms 20 or 25), no normal run or
control holds an injection record, and every normal run and control ended with all steps
ok. In 15 of the 62 cases no client saw a failure (the system absorbed the fault): in
php-builtin the corrupted client receive, both short sends, both EMFILE accepts (the
connection is accepted by the next call) and both EAGAIN storms; in aiosmtpd-relay the
sink's short send (asyncio sends the rest) and both EAGAIN storms; in snmpd-proxy the three
errors on a UDP receive (snmpd ignores the failed call and reads the datagram on the next)
and both EAGAIN storms."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"php-builtin": _php(), "aiosmtpd-relay": _smtp(), "snmpd-proxy": _snmp()}


def _php():
    F, S = ports("php-builtin")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Both servers are `php -S 127.0.0.1:PORT` (one process each, one request
    # at a time, `Connection: close`), told apart by the port in their command lines. The
    # launcher takes 120 steps and client 2 60 (a step is a PUT and a GET): 360 requests.
    # The front accepts 361 connections on F (the launcher's probe and 360 requests),
    # receives each request's head (and a PUT's body) on it: about 540 receives
    # (local-port F), and answers in two sends (headers, body: 720); per request it opens a
    # store connection (socket, connect: 360), sends the request in one send (peer-port S:
    # 360) and reads the answer in about four receives (a MSG_PEEK that may find nothing,
    # the data, two empty reads: which one holds the data shifts with timing, so no SPEC
    # counts them). The store accepts 361 connections on S, receives each request's head
    # once (recvfrom, local-port S: 361; a PUT's body comes through read()) and answers in
    # two sends (720). The front gives up on the store after 1 s; a client on the front
    # after 2 s. Client 2 receives about 283 times; it calls KvClient.get 60 times, the
    # launcher KvClient.put 120 times.
    front, store = f"argv=127.0.0.1:{F}", f"argv=127.0.0.1:{S}"
    c1, c2 = "argv=systems.py php-builtin", "argv=phpb-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=180,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},local-port={F},nth=270,count=1"),
        ("client-drops", "reset", f"{SEND}:close,{front},local-port={F},nth=361,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=180,count=1"),
        ("client-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=140,count=1"),
        ("store-short", "short", f"{SEND}:short=20,{store},local-port={S},nth=361,count=1"),
        ("front-short", "short", f"{SEND}:short=12,{front},peer-port={S},nth=180,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=361,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=361,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=180"),
        ("front-killed", "kill", f"{SEND}:kill=SIGKILL,{front},peer-port={S},nth=180"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=180"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=270"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},local-port={S},nth=180,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=180,count=1"),
        ("front-socket-emfile", "exhaust", f"socket:errno=EMFILE,{front},nth=180,count=1"),
        ("store-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{store},local-port={S},nth=361,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=260,count=20"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=170,count=20"),
        ("client-code", "code", f"py:sut.kv_http:KvClient.put:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=ConnectionResetError,nth=30,{c2}"),
    ]


def _smtp():
    R, S = ports("aiosmtpd-relay")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). The launcher sends 120 messages and client 2 60: 180 messages over two
    # SMTP sessions. The relay's event loop (main thread, local-port R) receives about
    # 1085 times (MAIL, RCPT, DATA and the content of each message, some in more than one
    # piece) and sends about 733 replies (four a message and the greetings); it accepts 3
    # connections (the probe and the two clients: no accept SPEC, none falls mid-run). Its
    # executor thread keeps one smtplib session to the sink (peer-port S): about 900
    # sends (five a message) and 720 receives (four replies a message). The sink (one
    # event loop, local-port S) receives about 722 times and sends 726 replies. The relay
    # gives up on the sink after 1 s, a client on the relay after 2 s. Client 2 receives
    # about 240 times. The sink calls `digest` 180 times, the relay's thread Hop.forward
    # 180 times, the launcher `message` 120 times, client 2 MailClient.send 60 times.
    relay, sink = "argv=smtprelay-relay", "argv=smtprelay-sink"
    c1, c2 = "argv=systems.py aiosmtpd-relay", "argv=smtprelay-client --name 2"
    return [
        ("sink-reset", "reset", f"{RECV}:errno=ECONNRESET,{sink},local-port={S},nth=360,count=1"),
        ("hop-reset", "reset", f"{RECV}:errno=ECONNRESET,{relay},peer-port={S},nth=360,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{relay},local-port={R},nth=540,count=1"),
        ("command-corrupt", "corrupt", f"{RECV}:corrupt=3,{sink},local-port={S},nth=360,count=1"),
        ("reply-corrupt", "corrupt", f"{RECV}:corrupt=4,{relay},peer-port={S},nth=360,count=1"),
        ("client-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=120,count=1"),
        ("sink-short", "short", f"{SEND}:short=5,{sink},local-port={S},nth=360,count=1"),
        ("sink-slow", "delay", f"{SEND}:delay=2s,{sink},local-port={S},nth=360,count=1"),
        ("relay-slow", "delay", f"{SEND}:delay=3s,{relay},local-port={R},nth=360,count=1"),
        ("sink-killed", "kill", f"{RECV}:kill=SIGKILL,{sink},local-port={S},nth=360"),
        ("relay-killed", "kill", f"{RECV}:kill=SIGKILL,{relay},local-port={R},nth=540"),
        ("sink-stopped", "stop", f"{RECV}:kill=SIGSTOP,{sink},local-port={S},nth=360"),
        ("relay-stopped", "stop", f"{SEND}:kill=SIGSTOP,{relay},peer-port={S},nth=450"),
        ("sink-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{sink},local-port={S},nth=360,count=1"),
        ("relay-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{relay},local-port={R},nth=360,count=1"),
        ("sink-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{sink},local-port={S},after=350,count=25"),
        ("hop-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{relay},peer-port={S},after=350,count=20"),
        ("relay-code", "code", f"py:sut.aiosmtpd_relay:Hop.forward:raise=ConnectionResetError,nth=90,{relay}"),
        ("sink-code", "code", f"py:sut.aiosmtpd_relay:digest:raise=ValueError,nth=90,{sink}"),
        ("client-code", "code", f"py:sut.aiosmtpd_relay:message:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.aiosmtpd_relay:MailClient.send:raise=ConnectionResetError,nth=30,{c2}"),
    ]


def _snmp():
    F, B = ports("snmpd-proxy")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Both agents are exe snmpd, told apart by their configuration files in
    # their command lines. The launcher takes 120 steps and client 2 60 (a step is an
    # snmpset and an snmpget, each a process of its own): 360 requests, each proxied. The
    # front receives (recvmsg) the 360 requests on F and the back's 360 answers on its
    # proxy socket, which is not connected (sendmsg with an address: no port key finds
    # it), in that order per request: 720 recvmsg, odd ones from clients, even ones from
    # the back while one request is in flight; it sends (sendmsg) each request on to the
    # back and each answer to its client: 720, odd ones to the back. The back receives 360
    # requests on B (recvmsg) and sends 360 answers (sendmsg). The front gives up on the
    # back after 1 s (no retry); a client command waits 2 s. The launcher calls `step` 120
    # times, client 2 `snmp` 120 times.
    front, back = "exe=snmpd,argv=front.conf", "exe=snmpd,argv=back.conf"
    c1, c2 = "argv=systems.py snmpd-proxy", "argv=snmp-client --name 2"
    return [
        ("back-reset", "reset", f"recvmsg:errno=ECONNRESET,{back},local-port={B},nth=180,count=1"),
        ("front-reset", "reset", f"recvmsg:errno=ECONNRESET,{front},local-port={F},nth=200,count=1"),
        ("answer-refused", "reset", f"recvmsg:errno=ECONNREFUSED,{front},nth=362,count=1"),
        ("request-corrupt", "corrupt", f"recvmsg:corrupt=3,{back},local-port={B},nth=180,count=1"),
        ("front-corrupt", "corrupt", f"recvmsg:corrupt=4,{front},local-port={F},nth=180,count=1"),
        ("answer-corrupt", "corrupt", f"recvmsg:corrupt=4,{front},nth=362,count=1"),
        ("back-short", "short", f"sendmsg:short=20,{back},local-port={B},nth=180,count=1"),
        ("front-short", "short", f"sendmsg:short=30,{front},local-port={F},nth=180,count=1"),
        ("back-slow", "delay", f"sendmsg:delay=2s,{back},local-port={B},nth=180,count=1"),
        ("front-slow", "delay", f"recvmsg:delay=3s,{front},local-port={F},nth=180,count=1"),
        ("back-killed", "kill", f"recvmsg:kill=SIGKILL,{back},local-port={B},nth=180"),
        ("front-killed", "kill", f"recvmsg:kill=SIGKILL,{front},local-port={F},nth=180"),
        ("back-stopped", "stop", f"recvmsg:kill=SIGSTOP,{back},local-port={B},nth=180"),
        ("front-stopped", "stop", f"sendmsg:kill=SIGSTOP,{front},nth=361"),
        ("back-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{back},local-port={B},nth=180,count=1"),
        ("forward-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{front},nth=361,count=1"),
        ("back-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{back},local-port={B},after=170,count=25"),
        ("front-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{front},local-port={F},after=170,count=25"),
        ("client-code", "code", f"py:sut.snmpd_proxy:step:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.snmpd_proxy:snmp:raise=ConnectionResetError,nth=60,{c2}"),
    ]
