"""Fault cases of the validation systems added on 2026-11-29 for validation run 15 (branch
loc-sysw). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 15 (`run.py --record-only --no-setup` into
/tmp/val15/loc-sysw with the lead's build /tmp/rec14/culprit: 3 normal runs, the control and
every case per system, 83 recordings, none with lost entries), then checked with `run.py
--check --reuse` on those recordings (injection records and client summaries only, no
model, no ranking): every case of the three systems fired (71 of 71), each in one process
(one injection; the EAGAIN storms 25 of 25 in the relay's pony process, 20 of 20 in the
XML-RPC front and in the Node backend); no normal run or control holds an injection
record, and every normal run and control ended with all steps ok (opensmtpd-relay: clients
120/120 and 60/60 messages accepted, 180/180 delivered intact; xmlrpc-chain: clients
120/120 and 60/60 steps, front and store 180 puts and 180 gets; node-h2-chain: clients
120/120 and 60/60 steps, front and backend 180 puts and 180 gets; in node-h2-chain's
normal2 the front also logged one session error, `read ECONNRESET`, on a client's
connection after the clients' last step: a client closing its connection with data
unread). Changed after a first recording of opensmtpd-relay and all its recordings made
anew: its relay-pony-stopped ran into run.py's 75 s limit (the stopped process is a
child of smtpd, whose parent waits for it after SIGTERM: the launcher now kills whatever is
left below both instances on its way out).

In 20 of the 71 cases no client (nor opensmtpd-relay's checker) saw a failure (the system
absorbed the fault; the reasons given are presumed, not read in the traces): in
opensmtpd-relay relay-reply-short (smtpd writes the rest), relay-emfile (the connection
waits in the backlog for the next accept), relay-mta-reset (the relay delivers the message
again on a new session) and sink-slow (the relay waits minutes for the sink); in
xmlrpc-chain store-reset, front-client-reset, front-store-reset and client1-reset
(xmlrpc.client's Transport.request sends a call again once after ECONNRESET or a closed
connection), store-enospc (the store's handler fails and closes the connection without an
answer: the same retry), store-emfile and front-emfile (socketserver ignores the failed
accept; the connection waits in the backlog), front-reply-short (sendall sends the rest);
in node-h2-chain back-short and front-reply-short (libuv writes the rest), the backend's
EAGAIN storm (libuv reads again at the next event), front-client-corrupt and
front-back-enobufs (the garbled bytes or the failed write hit no stream a client waited
on); and in the three client2-killed cases the killed client stops (no summary of its
own), and no other client sees a failure. In opensmtpd-relay the checker counts delivered
messages against the ones the clients saw accepted: relay-slow and client1-code deliver
one message more than counted (the relay accepted it, the client saw its reply fail), and
in client2-killed the killed client's count is missing, so the checker stops at 122/120.
"""

from sut.common import ports


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"opensmtpd-relay": _opensmtpd(), "xmlrpc-chain": _xmlrpc(), "node-h2-chain": _node_h2()}


def _opensmtpd():
    R, K = ports("opensmtpd-relay")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; clients 120/120 and 60/60 messages accepted, 180/180 delivered
    # intact). smtpd 6.8 re-executes each of its processes with `-x NAME`, so `argv=relay.conf
    # -x pony` names one process. The relay's pony process (SMTP in and out) accepts 37
    # times on R (the probe and the clients' sessions of 5 messages), reads 793 times from
    # the clients (local-port R) and writevs 829 answers; towards the sink (peer-port K: its
    # mta sessions, 100 messages each, so 2 connections) it writevs 903 times and reads 725.
    # Between the processes imsg travels over socketpairs with sendmsg and recvmsg (no port):
    # the relay's queue receives 1 214 times, its scheduler 573, its lookup process (lka)
    # 432; the sink's queue 1 190. The sink's pony accepts 3 times (the probe, the relay's
    # first mta session at start and its second after 100 messages, mid-run), reads 905
    # times on K and writevs 726. Client 1 (the launcher, smtplib: libc recv and send,
    # strace's recvfrom and sendto) receives 552 and sends 528 times on peer-port R, and
    # calls SMTP.getreply about as often as it receives; client 2 (helper `smtpd-client
    # --name 2`) receives 276 and sends 264 times, and calls `body` 60 times. A client waits
    # 3 s for the relay; the relay's mta waits minutes for the sink, so a message the sink
    # fails stays in the relay's queue (the checker counts it as not delivered).
    rp, kp = "exe=*smtpd,argv=relay.conf -x pony", "exe=*smtpd,argv=sink.conf -x pony"
    rq, rs, rl = "argv=relay.conf -x queue", "argv=relay.conf -x scheduler", "argv=relay.conf -x lka"
    kq = "argv=sink.conf -x queue"
    c1, c2 = "argv=systems.py opensmtpd-relay", "argv=smtpd-client --name 2"
    return [
        ("relay-client-reset", "reset", f"read:errno=ECONNRESET,{rp},local-port={R},nth=396,count=1"),
        ("relay-client-corrupt", "corrupt", f"read:corrupt=3,{rp},local-port={R},nth=398,count=1"),
        ("relay-reply-short", "short", f"writev:short=4,{rp},local-port={R},nth=414,count=1"),
        ("relay-slow", "delay", f"writev:delay=4s,{rp},local-port={R},nth=416,count=1"),
        ("relay-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{rp},nth=18,count=1"),
        ("relay-eagain-storm", "exhaust", f"read:errno=EAGAIN,{rp},local-port={R},after=390,count=25"),
        ("relay-mta-reset", "reset", f"read:errno=ECONNRESET,{rp},peer-port={K},nth=362,count=1"),
        ("relay-mta-corrupt", "corrupt", f"read:corrupt=3,{rp},peer-port={K},nth=364,count=1"),
        ("relay-mta-enospc", "exhaust", f"writev:errno=ENOSPC,{rp},peer-port={K},nth=450,count=1"),
        ("relay-pony-killed", "kill", f"read:kill=SIGKILL,{rp},local-port={R},nth=396"),
        ("relay-pony-stopped", "stop", f"read:kill=SIGSTOP,{rp},peer-port={K},nth=362"),
        ("relay-queue-killed", "kill", f"recvmsg:kill=SIGKILL,exe=*smtpd,{rq},nth=600"),
        ("relay-scheduler-stopped", "stop", f"recvmsg:kill=SIGSTOP,exe=*smtpd,{rs},nth=286"),
        ("relay-lka-killed", "kill", f"recvmsg:kill=SIGKILL,exe=*smtpd,{rl},nth=216"),
        ("sink-reset", "reset", f"read:errno=ECONNRESET,{kp},local-port={K},nth=452,count=1"),
        ("sink-corrupt", "corrupt", f"read:corrupt=4,{kp},local-port={K},nth=454,count=1"),
        ("sink-slow", "delay", f"writev:delay=6s,{kp},local-port={K},nth=363,count=1"),
        ("sink-enobufs", "exhaust", f"writev:errno=ENOBUFS,{kp},local-port={K},nth=364,count=1"),
        ("sink-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{kp},nth=3,count=1"),
        ("sink-pony-killed", "kill", f"read:kill=SIGKILL,{kp},local-port={K},nth=452"),
        ("sink-queue-stopped", "stop", f"recvmsg:kill=SIGSTOP,exe=*smtpd,{kq},nth=595"),
        ("client1-reset", "reset", f"recv:errno=ECONNRESET,{c1},peer-port={R},nth=276,count=1"),
        ("client1-code", "code", f"py:smtplib:SMTP.getreply:raise=ConnectionResetError,nth=276,{c1}"),
        ("client2-killed", "kill", f"send:kill=SIGKILL,{c2},peer-port={R},nth=132"),
        ("client2-code", "code", f"py:sut.opensmtpd_relay:body:raise=ValueError,nth=30,{c2}"),
    ]


def _xmlrpc():
    F, S = ports("xmlrpc-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; clients 120/120 and 60/60 steps ok; front and store 180 puts and
    # 180 gets), calls summed per process over its threads, on sockets only. Every process
    # receives and sends with libc recv and send (strace's recvfrom and sendto). The servers
    # speak HTTP/1.0 (SimpleXMLRPCRequestHandler's default), so every call is a connection
    # of its own: the store (helper `xmlrpc-store`, local-port S) accepts 361 times (360
    # calls and the launcher's probe), receives 441 times and sends 360 answers; it calls
    # `digest` 180 times (once a put) and SimpleXMLRPCDispatcher._marshaled_dispatch 360
    # times. The front (helper `xmlrpc-front`) accepts 361 times on F, receives 367 times
    # from the clients (local-port F) and 360 from the store (peer-port S), sends 360
    # answers to the clients and 720 times to the store (headers, then body); it calls
    # Pool.call 360 times. Client 1 (the launcher) sends 480 times and receives 240 on
    # peer-port F; client 2 (helper `xmlrpc-client --name 2`) 240 and 120, and calls
    # `digest` 180 times (3 a step). The front waits 1.5 s for the store, a client 3 s.
    st, fr = "argv=xmlrpc-store", "argv=xmlrpc-front"
    c1, c2 = "argv=systems.py xmlrpc-chain", "argv=xmlrpc-client --name 2"
    return [
        ("store-reset", "reset", f"recv:errno=ECONNRESET,{st},local-port={S},nth=220,count=1"),
        ("store-corrupt", "corrupt", f"recv:corrupt=4,{st},local-port={S},nth=222,count=1"),
        ("store-slow", "delay", f"send:delay=2s,{st},local-port={S},nth=180,count=1"),
        ("store-killed", "kill", f"recv:kill=SIGKILL,{st},local-port={S},nth=220"),
        ("store-stopped", "stop", f"recv:kill=SIGSTOP,{st},local-port={S},nth=220"),
        ("store-enospc", "exhaust", f"send:errno=ENOSPC,{st},local-port={S},nth=181,count=1"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{st},nth=180,count=1"),
        ("store-code", "code", f"py:sut.xmlrpc_chain:digest:raise=ValueError,nth=90,{st}"),
        ("store-dispatch-code", "code",
         f"py:xmlrpc.server:SimpleXMLRPCDispatcher._marshaled_dispatch:raise=MemoryError,nth=180,{st}"),
        ("front-client-reset", "reset", f"recv:errno=ECONNRESET,{fr},local-port={F},nth=184,count=1"),
        ("front-store-reset", "reset", f"recv:errno=ECONNRESET,{fr},peer-port={S},nth=180,count=1"),
        ("front-store-corrupt", "corrupt", f"recv:corrupt=3,{fr},peer-port={S},nth=182,count=1"),
        ("front-reply-short", "short", f"send:short=6,{fr},local-port={F},nth=180,count=1"),
        ("front-slow", "delay", f"send:delay=4s,{fr},local-port={F},nth=182,count=1"),
        ("front-killed", "kill", f"recv:kill=SIGKILL,{fr},local-port={F},nth=184"),
        ("front-stopped", "stop", f"send:kill=SIGSTOP,{fr},peer-port={S},nth=360"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{fr},nth=180,count=1"),
        ("front-eagain-storm", "exhaust", f"recv:errno=EAGAIN,{fr},local-port={F},after=180,count=20"),
        ("front-code", "code", f"py:sut.xmlrpc_chain:Pool.call:raise=ConnectionResetError,nth=180,{fr}"),
        ("client1-reset", "reset", f"recv:errno=ECONNRESET,{c1},peer-port={F},nth=120,count=1"),
        ("client1-corrupt", "corrupt", f"recv:corrupt=3,{c1},peer-port={F},nth=122,count=1"),
        ("client2-killed", "kill", f"send:kill=SIGKILL,{c2},peer-port={F},nth=120"),
        ("client2-code", "code", f"py:sut.xmlrpc_chain:digest:raise=ValueError,nth=90,{c2}"),
    ]


def _node_h2():
    F, B = ports("node-h2-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; clients 120/120 and 60/60 steps ok; front and backend 180 puts
    # and 180 gets), calls summed per process over its threads, on sockets only. Node
    # (libuv) receives with read and sends with writev (and write for short frames). The
    # backend (`node service.js back`, local-port B) accepts twice (the launcher's probe and
    # the front's one session), reads 371 times and writevs 355 times. The front (`node
    # service.js front`) accepts 3 times on F (the probe, then the two clients' connections:
    # client 2, a process of its own, connects last), reads 625 times from the clients
    # (local-port F) and 355 from the backend (peer-port B), writevs 360 times to the
    # clients, and writes 195 and writevs 177 times to the backend. Client 1 (the launcher;
    # httpx with h2) sends 482 and receives 252 times on peer-port F (libc send and recv,
    # strace's sendto and recvfrom) and calls h2's H2Connection.receive_data about as often
    # as it receives; client 2 (helper `h2-client --name 2`) sends 242 and receives 126
    # times, and calls `digest` 180 times (3 a step). The front waits 1.5 s for the backend,
    # a client 3 s.
    bk, fr = "exe=*node,argv=service.js back", "exe=*node,argv=service.js front"
    c1, c2 = "argv=systems.py node-h2-chain", "argv=h2-client --name 2"
    return [
        ("back-reset", "reset", f"read:errno=ECONNRESET,{bk},local-port={B},nth=185,count=1"),
        ("back-corrupt", "corrupt", f"read:corrupt=3,{bk},local-port={B},nth=186,count=1"),
        ("back-slow", "delay", f"writev:delay=2s,{bk},local-port={B},nth=178,count=1"),
        ("back-short", "short", f"writev:short=9,{bk},local-port={B},nth=178,count=1"),
        ("back-killed", "kill", f"read:kill=SIGKILL,{bk},local-port={B},nth=185"),
        ("back-stopped", "stop", f"read:kill=SIGSTOP,{bk},local-port={B},nth=185"),
        ("back-enospc", "exhaust", f"writev:errno=ENOSPC,{bk},local-port={B},nth=179,count=1"),
        ("back-eagain-storm", "exhaust", f"read:errno=EAGAIN,{bk},local-port={B},after=180,count=20"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{fr},local-port={F},nth=312,count=1"),
        ("front-client-corrupt", "corrupt", f"read:corrupt=2,{fr},local-port={F},nth=314,count=1"),
        ("front-back-reset", "reset", f"read:errno=ECONNRESET,{fr},peer-port={B},nth=178,count=1"),
        ("front-back-corrupt", "corrupt", f"read:corrupt=4,{fr},peer-port={B},nth=180,count=1"),
        ("front-reply-short", "short", f"writev:short=7,{fr},local-port={F},nth=180,count=1"),
        ("front-slow", "delay", f"writev:delay=4s,{fr},local-port={F},nth=182,count=1"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{fr},local-port={F},nth=312"),
        ("front-stopped", "stop", f"writev:kill=SIGSTOP,{fr},peer-port={B},nth=88"),
        ("front-back-enobufs", "exhaust", f"write:errno=ENOBUFS,{fr},peer-port={B},nth=98,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{fr},nth=3,count=1"),
        ("client1-reset", "reset", f"recv:errno=ECONNRESET,{c1},peer-port={F},nth=126,count=1"),
        ("client1-corrupt", "corrupt", f"recv:corrupt=3,{c1},peer-port={F},nth=128,count=1"),
        ("client1-h2-code", "code",
         f"py:h2.connection:H2Connection.receive_data:raise=ConnectionResetError,nth=126,{c1}"),
        ("client2-killed", "kill", f"send:kill=SIGKILL,{c2},peer-port={F},nth=120"),
        ("client2-code", "code", f"py:sut.node_h2_chain:digest:raise=ValueError,nth=90,{c2}"),
    ]
