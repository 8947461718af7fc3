"""Fault cases of the validation systems added on 2026-11-29 for validation run 13 (branch
loc-syss). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 13 (`run.py --record-only` into
/tmp/val13/loc-syss with the lead's build /tmp/rec12/culprit: 3 normal runs, the control and
every case per system, 81 recordings, none with lost entries), then checked with `run.py
--check --reuse` on those recordings (injection records and client summaries only, no
model, no ranking): every case of the three systems fired, each in one process (one
injection; the EAGAIN storms 20 of 20 in kea-dhcp4, 25 of 25 in the CoAP store and in the
proxy, 19 of 20 in spamd's parent, 1 in spamd's child, which exits at its first failed
accept); no normal run or control holds an injection record, and every normal run and
control ended with all steps ok (kea-dhcp: relays 120/120 and 60/60 steps, control 60/60;
spamd-prefork: 120/120 and 60/60 messages; aiocoap-proxy: 120/120 and 60/60 steps, the
store 180 PUTs and 180 GETs). Changed after a first check and recorded again (or anew):
in kea-dhcp dhcp4-packet-corrupt (its 270th datagram was a RELEASE, which has no answer:
now the 271st, a DISCOVER) and relay2-reply-corrupt, which replaces dhcp4-command-corrupt
(its corruption fell on a receive that found no data, EAGAIN); in spamd-prefork
child-stopped (the stopped child outlived the run and held the recording until run.py's
75-s timeout: the launcher now kills what is left of spamd), launcher-reset (its 150th
receive on peer-port P never came: see `_spamd`) and child-accept-eagain-storm (it fired
in two children: see `_spamd`); in aiocoap-proxy client2-enobufs, which replaces
client2-connect-eaddrnotavail (aiocoap takes that error for a missing route and goes on:
nothing changed). The final check ran on the recordings as they are. In 16 of the 69
cases no client saw a failure (the system absorbed the fault; the reasons given are
presumed, not read in the traces): in kea-dhcp agent-reply-short (Boost.Asio writes the
rest), dhcp4-ctrl-emfile (the agent's connection waits in the backlog for the next
accept) and the EAGAIN storm; in spamd-prefork parent-report-reset, child-reply-short (Perl
writes the rest), child-accept-emfile and the child's EAGAIN storm (the child exits and
its replacement accepts the connection); in aiocoap-proxy both resets and the three
corruptions (a datagram lost or dropped is sent again by CoAP's retransmission within the
clients' 3 s), store-enobufs, proxy-enobufs and both EAGAIN storms. In relay2-killed the
killed relay stops (no summary of its own), and no other client sees a failure."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"kea-dhcp": _kea(), "spamd-prefork": _spamd(), "aiocoap-proxy": _coap()}


def _kea():
    K, A, R1, R2 = ports("kea-dhcp")[:4]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; relays 120/120 and 60/60 steps ok, control 60/60). kea-dhcp4 (one
    # process, one thread) receives the relays' 540 datagrams (recvmsg, local-port K: a
    # DISCOVER, a REQUEST and a RELEASE a step, so its 3k-th receive is a RELEASE, which
    # has no answer; its netlink receives at start-up are recvmsg too, which the port key
    # leaves out) and sends 360 answers (sendmsg: an OFFER and an ACK a step); on its
    # control UNIX socket it accepts the agent's 240 connections (481 accept calls, every
    # other one EAGAIN on the non-blocking listener), receives 244 times (libc recv,
    # strace's recvfrom; 4 of them EAGAIN, but under the tracer a command often arrives
    # after a first EAGAIN: a first recording's corruption of the 121st fell on one, so no
    # corruption is put there) and sends 240 answers: a UNIX socket has no port, but
    # kea-dhcp4 receives with recv nowhere else. The agent
    # (one process) receives on the control client's keep-alive connection (local-port A)
    # 624 times (432 with data, the others EAGAIN: which ones shifts with timing) and sends
    # 240 answers; per command it connects to kea-dhcp4's UNIX socket (240 connects, its
    # only connects after start-up), sends the command and receives twice (one EAGAIN).
    # Relay 1 (the launcher, local-port R1) sends 360 times (sendto) and receives 240
    # (recvfrom), calls Relay.check 240 times; relay 2 (R2) sends 180 and receives 120,
    # calls Relay.exchange 120 times; the control client sends 480 times (head and body
    # of each POST), receives 240 and calls Control.command 240 times. A relay waits 1 s
    # for an answer, the control client 2 s.
    d4, agent = "exe=*kea-dhcp4", "exe=*kea-ctrl-agent"
    r1, r2, ctl = "argv=systems.py kea-dhcp", "argv=kea-relay --name 2", "argv=kea-control"
    return [
        ("agent-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{agent},local-port={A},nth=312,count=1"),
        ("dhcp4-ctrl-reset", "reset", f"{RECV}:errno=ECONNRESET,{d4},nth=122,count=1"),
        ("dhcp4-ctrl-drops", "reset", f"{RECV}:close,{d4},nth=124,count=1"),
        ("dhcp4-packet-corrupt", "corrupt", f"recvmsg:corrupt=8,{d4},local-port={K},nth=271,count=1"),
        ("relay1-reply-corrupt", "corrupt", f"{RECV}:corrupt=4,{r1},local-port={R1},nth=120,count=1"),
        ("relay2-reply-corrupt", "corrupt", f"{RECV}:corrupt=6,{r2},local-port={R2},nth=61,count=1"),
        ("control-reply-corrupt", "corrupt", f"{RECV}:corrupt=2,{ctl},peer-port={A},nth=120,count=1"),
        ("dhcp4-answer-short", "short", f"sendmsg:short=100,{d4},local-port={K},nth=180,count=1"),
        ("agent-reply-short", "short", f"{SEND}:short=20,{agent},local-port={A},nth=120,count=1"),
        ("dhcp4-slow", "delay", f"sendmsg:delay=2s,{d4},local-port={K},nth=180,count=1"),
        ("agent-slow", "delay", f"{SEND}:delay=3s,{agent},local-port={A},nth=120,count=1"),
        ("dhcp4-killed", "kill", f"recvmsg:kill=SIGKILL,{d4},local-port={K},nth=270"),
        ("agent-killed", "kill", f"connect:kill=SIGKILL,{agent},nth=120"),
        ("relay2-killed", "kill", f"sendto:kill=SIGKILL,{r2},local-port={R2},nth=90"),
        ("dhcp4-stopped", "stop", f"recvmsg:kill=SIGSTOP,{d4},local-port={K},nth=270"),
        ("agent-stopped", "stop", f"{RECV}:kill=SIGSTOP,{agent},local-port={A},nth=312"),
        ("dhcp4-ctrl-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{d4},nth=241,count=1"),
        ("dhcp4-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{d4},local-port={K},nth=181,count=1"),
        ("agent-connect-eagain", "exhaust", f"connect:errno=EAGAIN,{agent},nth=121,count=1"),
        ("dhcp4-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{d4},local-port={K},after=260,count=20"),
        ("relay1-enobufs", "exhaust", f"sendto:errno=ENOBUFS,{r1},local-port={R1},nth=180,count=1"),
        ("relay1-code", "code", f"py:sut.kea_dhcp:Relay.check:raise=ValueError,nth=120,{r1}"),
        ("relay2-code", "code", f"py:sut.kea_dhcp:Relay.exchange:raise=TimeoutError,nth=60,{r2}"),
        ("control-code", "code", f"py:sut.kea_dhcp:Control.command:raise=ConnectionResetError,nth=120,{ctl}"),
    ]


def _spamd():
    P = ports("spamd-prefork")[0]
    # Counted with `strace -f -yy` on runs without the tracer (no recording of this system
    # was looked at; strace slows the run enough that the workload's 20 s ended after 117
    # of 120 and 54 of 60 messages, all of them ok; untraced runs and a traced one take
    # every step, 181 connections). The parent (`/usr/bin/perl -T -w /usr/sbin/spamd`) and
    # its one child at a time share that command line (a child is a fork; it renames itself,
    # but `argv=` is read at start-up). Per connection the child accepts once (accept4,
    # local-port P: its k-th accept and its k-th read of a client are the k-th connection
    # it serves), reads the request in one read, writes the answer in 1.7 writes on average
    # (189 for 110 connections), and talks to the parent over their socketpair (2 writes,
    # 2 reads a connection, one of them EAGAIN). It is replaced after 110 connections: the
    # first child serves the launcher's probe and the first 109 requests (61 % of the run),
    # the second the other 71; so a SPEC on the child at its 95th connection (52 % of the
    # run) is reached by the first child only (a child that replaces one killed there
    # serves at most 86). A child whose accept fails with EAGAIN exits (a first recording
    # of an EAGAIN storm from the 91st accept on hit the first child and then, 90
    # connections later, its replacement): the storm starts after the 100th accept, which
    # a replacement (80 connections) does not reach, and it ends the child at its first
    # call. The parent makes no call on a client's connection: it selects
    # (about 3 selects a connection: about 540 in a run, libc select; the first child
    # makes 106) and reads the children's reports (about 540 reads, a third EAGAIN; the
    # first child makes about 326 reads in its life, so only the parent reaches a 401st
    # read). The launcher makes a connection a request (its connects include its probes
    # while spamd starts, so none is named), sends once and receives about 2.5 times (the
    # answer, then the end of stream: 297 for 117 requests); it calls SpamdClient.request
    # 120 times. Under the tracer a receive made after spamd closed its end (the end of
    # stream, and the answer too when it came with the close) matches no port key: a first
    # recording's reset of the launcher's 150th receive on peer-port P never fired, and a
    # probe of ours (a 1-us delay on every such receive, in a scratch recording) counted
    # 105 matching receives in a run, none of them an end of stream; the reset is now on
    # the 52nd. Each spamc is a process of its own, named by its size limit (`-s 5000NN`:
    # message NN of the driver); it connects once, sends twice and receives the answer's
    # head byte by byte (45 receives in `-c` mode, about 70 with `-y` or a full message:
    # its 11th receive is the status code). Message 30 goes through `spamc -c`, 31 `-y`,
    # 34 the full mode. The driver calls `spamc` 60 times. Clients wait 3 s for spamd.
    sa = "exe=*perl,argv=/usr/sbin/spamd"
    child = f"{sa},local-port={P}"
    c1, c2 = "argv=systems.py spamd-prefork", "argv=spamc-driver --name 2"
    spamc = "exe=*spamc,argv=-s 5000"
    return [
        ("child-reset", "reset", f"read:errno=ECONNRESET,{child},nth=95,count=1"),
        ("child-drops", "reset", f"read:close,{child},nth=96,count=1"),
        ("parent-report-reset", "reset", f"read:errno=ECONNRESET,{sa},nth=401,count=1"),
        ("launcher-reset", "reset", f"{RECV}:errno=ECONNRESET,{c1},peer-port={P},nth=52,count=1"),
        ("spamc-reset", "reset", f"{RECV}:errno=ECONNRESET,{spamc}30,nth=20,count=1"),
        ("child-request-corrupt", "corrupt", f"read:corrupt=3,{child},nth=97,count=1"),
        ("spamc-reply-corrupt", "corrupt", f"{RECV}:corrupt=1,{spamc}34,nth=11,count=1"),
        ("child-reply-short", "short", f"write:short=10,{child},nth=163,count=1"),
        ("child-slow", "delay", f"write:delay=4s,{child},nth=163,count=1"),
        ("parent-slow", "delay", f"select|pselect:delay=5s,{sa},nth=270,count=1"),
        ("child-killed", "kill", f"read:kill=SIGKILL,{child},nth=95"),
        ("parent-killed", "kill", f"select|pselect:kill=SIGKILL,{sa},nth=270"),
        ("spamc-killed", "kill", f"{RECV}:kill=SIGKILL,{spamc}31,nth=20"),
        ("child-stopped", "stop", f"read:kill=SIGSTOP,{child},nth=95"),
        ("parent-stopped", "stop", f"select|pselect:kill=SIGSTOP,{sa},nth=270"),
        ("child-enobufs", "exhaust", f"write:errno=ENOBUFS,{child},nth=164,count=1"),
        ("child-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{child},nth=95,count=1"),
        ("child-accept-eagain-storm", "exhaust", f"accept|accept4:errno=EAGAIN,{child},after=100,count=20"),
        ("parent-eagain-storm", "exhaust", f"select|pselect:errno=EAGAIN,{sa},after=260,count=20"),
        ("launcher-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{c1},peer-port={P},nth=60,count=1"),
        ("launcher-code", "code", f"py:sut.spamd_prefork:SpamdClient.request:raise=ConnectionResetError,nth=60,{c1}"),
        ("driver-code", "code", f"py:sut.spamd_prefork:spamc:raise=TimeoutError,nth=30,{c2}"),
    ]


def _coap():
    X, S = ports("aiocoap-proxy")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 120/120 and 60/60 steps ok). aiocoap's UDP transport, when its socket
    # is readable, first reads the socket's error queue (recvmsg with MSG_ERRQUEUE: EAGAIN
    # when empty, as it always is here) and then the datagram: a socket's odd-numbered
    # receives fail with EAGAIN, the even-numbered ones carry the data (a first check
    # whose corruptions fell on odd receives changed nothing). The store (helper
    # `coap-store`, local-port S) receives 1324 times (662 datagrams: client 2's 221 and
    # the proxy's 441) and sends 662 (sendmsg); it calls `answer` 360 times (a PUT and a
    # GET a step, blocks assembled). The proxy (`python3 -m aiocoap.cli.proxy`, transparent
    # to blocks: one forwarded datagram a datagram) receives 882 times on its server socket
    # (local-port X: 441 datagrams) and sends 441 answers there; its client socket (no
    # fixed port) receives 880 times and sends 439; before each forwarded request aiocoap
    # connects a scratch UDP socket to choose the source address (441 connects, the
    # proxy's only ones; aiocoap takes an error there for a missing route and goes on: a
    # first check's EADDRNOTAVAIL on such a connect, in the proxy and in client 2, changed
    # nothing, so none is left); it calls Proxy.render 441 times. Client 1 (the launcher,
    # through the proxy) sends 440 datagrams and receives 882 times, connects 240 times
    # (one a request) and calls CoapClient.request 240 times; client 2 (straight to the
    # store) sends 221, receives 444, connects 120 times, 120 CoapClient.request calls.
    # Every request is bounded to 3 s, aiocoap's retransmissions included.
    store, proxy = "argv=coap-store", "argv=aiocoap.cli.proxy"
    c1, c2 = "argv=systems.py aiocoap-proxy", "argv=coap-client --name 2"
    return [
        ("store-reset", "reset", f"recvmsg:errno=ECONNRESET,{store},local-port={S},nth=662,count=1"),
        ("proxy-reset", "reset", f"recvmsg:errno=ECONNREFUSED,{proxy},local-port={X},nth=442,count=1"),
        ("store-request-corrupt", "corrupt", f"recvmsg:corrupt=4,{store},local-port={S},nth=662,count=1"),
        ("proxy-request-corrupt", "corrupt", f"recvmsg:corrupt=6,{proxy},local-port={X},nth=442,count=1"),
        ("client2-reply-corrupt", "corrupt", f"recvmsg:corrupt=5,{c2},nth=222,count=1"),
        ("store-reply-short", "short", f"sendmsg:short=10,{store},local-port={S},nth=331,count=1"),
        ("proxy-reply-short", "short", f"sendmsg:short=12,{proxy},local-port={X},nth=221,count=1"),
        ("store-slow", "delay", f"sendmsg:delay=3s,{store},local-port={S},nth=331,count=1"),
        ("proxy-slow", "delay", f"recvmsg:delay=3s,{proxy},local-port={X},nth=442,count=1"),
        ("store-killed", "kill", f"recvmsg:kill=SIGKILL,{store},local-port={S},nth=662"),
        ("proxy-killed", "kill", f"sendmsg:kill=SIGKILL,{proxy},local-port={X},nth=221"),
        ("store-stopped", "stop", f"sendmsg:kill=SIGSTOP,{store},local-port={S},nth=331"),
        ("proxy-stopped", "stop", f"recvmsg:kill=SIGSTOP,{proxy},local-port={X},nth=442"),
        ("store-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{store},local-port={S},nth=333,count=1"),
        ("proxy-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{proxy},nth=440,count=1"),
        ("client1-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{c1},nth=220,count=1"),
        ("client2-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{c2},nth=110,count=1"),
        ("store-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{store},local-port={S},after=650,count=25"),
        ("proxy-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{proxy},local-port={X},after=430,count=25"),
        ("client1-code", "code", f"py:sut.aiocoap_proxy:CoapClient.request:raise=TimeoutError,nth=120,{c1}"),
        ("client2-code", "code", f"py:sut.aiocoap_proxy:CoapClient.request:raise=ConnectionResetError,nth=60,{c2}"),
        ("store-code", "code", f"py:sut.aiocoap_proxy:answer:raise=KeyError,nth=180,{store}"),
        ("proxy-code", "code", f"py:aiocoap.proxy.server:Proxy.render:raise=RuntimeError,nth=220,{proxy}"),
    ]
