"""Fault cases of the validation systems added on 2026-11-28 for validation run 5 (branch
loc-sysc): no method has been run on them. Same form as `faults.py`: per system,
(case name, category, `--inject` SPEC), each narrowed to one process and one call, mid-run.
"""

from sut.common import ports


def cases():
    return {"stunnel-tls": _stunnel(), "kamailio-sip": _kamailio()}


def _stunnel():
    G, T, S = ports("stunnel-tls")[:3]
    # Counted with strace on a run without the tracer: each stunnel serves a connection in
    # a thread of its own (one process each, so argv names the process). The gateway reads
    # client 1's plain side (local-port G) about 125 times and writes it 120, reads its TLS
    # side (peer-port T) about 300 times and writes it 140; it accepts 6 connections.
    # The terminator carries both clients (client 2 speaks TLS to it directly): it reads
    # its TLS side (local-port T) about 760 times and writes it 360, reads and writes the
    # store (peer-port S) about 320 times each, and accepts about 15 connections. The store
    # (socketserver, a thread per connection; CPython calls libc's recv and send) receives
    # about 335 times and sends 320; it calls `digest` once per write (about 185). Client
    # 2 calls SSLSocket.recv about once per request (200). A client gives up on an answer
    # after 2 s.
    gw, tm = "exe=stunnel4,argv=gateway.conf", "exe=stunnel4,argv=terminator.conf"
    st, c2 = "argv=tls-store", "argv=tls-client --name 2"
    return [
        ("store-reset", "reset", f"read:errno=ECONNRESET,{tm},peer-port={S},nth=160,count=1"),
        ("tls-reset", "reset", f"read:errno=ECONNRESET,{gw},peer-port={T},nth=150,count=1"),
        ("tls-record-corrupt", "corrupt", f"read:corrupt=3,{tm},local-port={T},nth=380,count=1"),
        ("store-answer-corrupt", "corrupt", f"read:corrupt=4,{tm},peer-port={S},nth=160,count=1"),
        ("request-short", "short", f"write:short=20,{tm},peer-port={S},nth=170,count=1"),
        ("answer-short", "short", f"send:short=6,{st},local-port={S},nth=160,count=1"),
        ("store-slow", "delay", f"send:delay=3s,{st},local-port={S},nth=170,count=1"),
        ("gateway-slow", "delay", f"write:delay=3s,{gw},local-port={G},nth=60,count=1"),
        ("store-killed", "kill", f"recv:kill=SIGKILL,{st},local-port={S},nth=170"),
        ("gateway-killed", "kill", f"read:kill=SIGKILL,{gw},local-port={G},nth=60"),
        ("terminator-stopped", "stop", f"read:kill=SIGSTOP,{tm},local-port={T},nth=380"),
        ("terminator-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{tm},nth=7,count=1"),
        ("terminator-enospc", "exhaust", f"write:errno=ENOSPC,{tm},local-port={T},nth=180,count=1"),
        ("client-code", "code", f"py:ssl:SSLSocket.recv:raise=ConnectionResetError,nth=100,{c2}"),
        ("store-code", "code", f"py:sut.stunnel_tls:digest:raise=ValueError,nth=90,{st}"),
    ]


def _kamailio():
    P1, P2, U1, U2 = ports("kamailio-sip")[:4]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at): Kamailio has one UDP receiver process per listening socket (children=1),
    # so local-port names one process: the receiver of client 1's socket (P1) receives
    # (recvfrom) about 360 datagrams and sends (sendto) about 390, the receiver of client
    # 2's socket (P2, a client with more transactions) about 600 and 650. Its other
    # processes (main, timers) send only retransmissions and failovers. Each UAS (Python,
    # one socket) receives and sends about 240 datagrams; the second client's UAC calls
    # Uac.transaction about 250 times, the second UAS `parse` about 230. The proxy gives up
    # on a UAS after 1.5 s and tries the other one; a client gives up on a transaction
    # after 4 s.
    r1, r2 = f"exe=kamailio,local-port={P1}", f"exe=kamailio,local-port={P2}"
    uas1, uas2 = f"argv=sip-uas --name 1,local-port={U1}", f"argv=sip-uas --name 2,local-port={U2}"
    return [
        ("client-reset", "reset", f"recvfrom:errno=ECONNRESET,{r2},nth=300,count=1"),
        ("forward-refused", "reset", f"sendto:errno=ECONNREFUSED,{r1},nth=180,count=1"),
        ("request-corrupt", "corrupt", f"recvfrom:corrupt=3,{r1},nth=180,count=1"),
        ("uas-request-corrupt", "corrupt", f"recvfrom:corrupt=4,{uas2},nth=120,count=1"),
        ("request-short", "short", f"recvfrom:short=40,{r2},nth=320,count=1"),
        ("answer-short", "short", f"sendto:short=60,{uas1},nth=120,count=1"),
        ("uas-slow", "delay", f"sendto:delay=2s,{uas2},nth=120,count=1"),
        ("proxy-slow", "delay", f"sendto:delay=5s,{r2},nth=320,count=1"),
        ("uas-killed", "kill", f"recvfrom:kill=SIGKILL,{uas1},nth=120"),
        ("receiver-killed", "kill", f"recvfrom:kill=SIGKILL,{r1},nth=180"),
        ("receiver-stopped", "stop", f"recvfrom:kill=SIGSTOP,{r2},nth=300"),
        ("proxy-enobufs", "exhaust", f"sendto:errno=ENOBUFS,{r1},nth=200,count=1"),
        ("proxy-eagain-storm", "exhaust", f"sendto:errno=EAGAIN,{r2},after=300,count=25"),
        ("uac-code", "code", "py:sut.kamailio_sip:Uac.transaction:raise=TimeoutError,nth=100,argv=sip-uac --name 2"),
        ("uas-code", "code", "py:sut.kamailio_sip:parse:raise=ValueError,nth=120,argv=sip-uas --name 2"),
    ]
