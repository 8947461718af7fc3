"""Fault cases of the validation systems added on 2026-11-29 for validation run 15 (branch
loc-sysx). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 15 (`run.py --record-only` into /tmp/val15/loc-sysx
with the lead's build /tmp/rec14/culprit: 3 normal runs, the control and every case per
system, 77 recordings, none with lost entries), then checked with `run.py --check --reuse`
on those recordings (injection records and client summaries only, no model, no ranking):
every case of the three systems fired (65 of 65), each in one process (one injection; the
EAGAIN storms 20 of 20 in the RMI store, the POE front and the Copas store); no normal run
or control holds an injection record, and every normal run and control ended with all
steps ok (rmi-chain 120/120 and 60/60, 360 calls forwarded by the front and 360 served by
the store; poe-chain and copas-chain 120/120 and 60/60, 360 requests forwarded and 360
served). Two systems were recorded twice; of each first recording only injection records
and client summaries were looked at. rmi-chain: in front-stopped both clients hung past
the workload deadline in a JRMP handshake with the stopped front (the JDK waits 60 s for
it by default) until the launcher stopped them, so the front and the clients now bound the
handshake like the call (`sun.rmi.transport.tcp.handshakeTimeout`, 1 s and 2 s). poe-chain:
in the control the clients' first requests were answered `ERR ... not connected` (the
front listened before its connection to the store was made, which under the tracer came
later), so the launcher now starts the clients once the front says it is connected. Cases
in which no client saw a failure (the system absorbed the fault; the reasons are presumed,
not read in the traces): in rmi-chain store-drops, front-store-reset, front-client-reset
and front-answer-corrupt (RMI's transport makes the call again on a new connection when a
reused one fails), client1-corrupt, store-short and front-short, store-enospc, both EMFILE
accepts (the connection waits in the backlog for the next accept) and store-eagain-storm
(the JDK polls and reads again): 11 of 22; in poe-chain store-short and front-short (POE's
wheel writes the rest) and front-eagain-storm (back to the event loop): 3 of 21 (an EMFILE
on the POE front's accept makes POE::Component::Server::TCP close its listening socket, so
client 2, connecting then, was refused for the rest of the run); in copas-chain store-short
and front-short (LuaSocket sends the rest), both EMFILE accepts and store-eagain-storm
(the coroutine yields and receives again): 5 of 22. In the three client2-killed cases only
the killed client lost its steps (it left no summary); the other client saw nothing."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"rmi-chain": _rmi(), "poe-chain": _poe(), "copas-chain": _copas()}


def _rmi():
    R, S, F = ports("rmi-chain")[:3]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; 120/120 and 60/60 steps ok, 360 calls forwarded), threads
    # summed into their JVM (the tracer's counters are per process). Every JVM reads and
    # writes its sockets with libc read and write (the JDK's NioSocketImpl: a read first
    # tries without blocking and, finding nothing, fails with EAGAIN and polls, so about
    # half of the reads are EAGAIN). The store (`RmiChain store`, local-port S) accepts 4
    # connections, reads 1306 times (635 EAGAIN) and writes 667 times. The front
    # (`RmiChain front`) accepts 4 connections on its port F (the clients' calls and their
    # DGC calls; client 2's from 1.5 s on, mid-run), reads 1236 times from them (600
    # EAGAIN) and writes 631 times; towards the store (peer-port S) it reads 1275 times
    # (610 EAGAIN) and writes 668 times. The registry (`rmiregistry`, port R) accepts 6
    # connections (the launcher's probe, the two binds, the lookups of the front and the
    # clients), reads 45 times (22 EAGAIN) and writes 13 times. Client 1 (`RmiChain client
    # 1`) reads 793 times from the front (370 EAGAIN) and writes 424, client 2 reads 388
    # times (182 EAGAIN) and writes 208. The front gives up on the store after 1 s, a
    # client on the front after 2 s. No process of this system is Python (no `code` case).
    # The SPECs are at about 40 % of a whole run's calls (EAGAIN included: the tracer counts
    # a call before it is made). Counted before the handshake timeouts were added (which
    # change nothing in a run that goes right).
    store, front, reg = "exe=*java,argv=RmiChain store", "exe=*java,argv=RmiChain front", "argv=rmiregistry"
    c1, c2 = "exe=*java,argv=RmiChain client 1", "exe=*java,argv=RmiChain client 2"
    return [
        ("store-reset", "reset", f"read:errno=ECONNRESET,{store},local-port={S},nth=500,count=1"),
        ("store-drops", "reset", f"read:close,{store},local-port={S},nth=520,count=1"),
        ("front-store-reset", "reset", f"read:errno=ECONNRESET,{front},peer-port={S},nth=500,count=1"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{front},local-port={F},nth=480,count=1"),
        ("store-request-corrupt", "corrupt", f"read:corrupt=4,{store},local-port={S},nth=505,count=1"),
        ("front-answer-corrupt", "corrupt", f"read:corrupt=4,{front},peer-port={S},nth=505,count=1"),
        ("client1-corrupt", "corrupt", f"read:corrupt=4,{c1},peer-port={F},nth=300,count=1"),
        ("store-short", "short", f"write:short=5,{store},local-port={S},nth=300,count=1"),
        ("front-short", "short", f"write:short=10,{front},local-port={F},nth=280,count=1"),
        ("store-slow", "delay", f"write:delay=2s,{store},local-port={S},nth=302,count=1"),
        ("front-slow", "delay", f"write:delay=3s,{front},local-port={F},nth=285,count=1"),
        ("store-killed", "kill", f"read:kill=SIGKILL,{store},local-port={S},nth=510"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{front},local-port={F},nth=490"),
        ("client2-killed", "kill", f"write:kill=SIGKILL,{c2},peer-port={F},nth=90"),
        ("registry-killed", "kill", f"read:kill=SIGKILL,{reg},local-port={R},nth=20"),
        ("store-stopped", "stop", f"write:kill=SIGSTOP,{store},local-port={S},nth=305"),
        ("front-stopped", "stop", f"write:kill=SIGSTOP,{front},peer-port={S},nth=300"),
        ("front-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=3,count=1"),
        ("registry-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{reg},local-port={R},nth=5,count=1"),
        ("store-enospc", "exhaust", f"write:errno=ENOSPC,{store},local-port={S},nth=303,count=1"),
        ("front-enobufs", "exhaust", f"write:errno=ENOBUFS,{front},local-port={F},nth=290,count=1"),
        ("store-eagain-storm", "exhaust", f"read:errno=EAGAIN,{store},local-port={S},after=480,count=20"),
    ]


def _poe():
    F, S = ports("poe-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; 120/120 and 60/60 steps ok, 360 requests forwarded). Both
    # servers are Perl (POE's wheels: sysread and syswrite, libc read and write; a line
    # comes in one read). The store (`poe.pl store`, local-port S) accepts 2 connections
    # (the probe and the front's, at the start), reads 361 times and writes 360 times. The
    # front (`poe.pl front`) reads 363 times from its clients and writes 360 times to them
    # (local-port F), reads 360 times from the store and writes 360 times to it (peer-port
    # S); it accepts 3 connections: the probe, the launcher's, and client 2's, started 1.5 s
    # later (mid-run). The launcher receives 370 times (libc recv: strace's recvfrom) and
    # sends 240 times, client 2 (`poe-client --name 2`) receives 184 times and sends 120;
    # client 2 calls `_step` 60 times. The front gives up on the store after 1 s, a client
    # on the front after 2 s. The SPECs are at about 45 % of a whole run's calls.
    store, front = "exe=perl*,argv=poe.pl store", "exe=perl*,argv=poe.pl front"
    c1, c2 = "argv=systems.py poe-chain", "argv=poe-client --name 2"
    return [
        ("store-reset", "reset", f"read:errno=ECONNRESET,{store},local-port={S},nth=160,count=1"),
        ("store-drops", "reset", f"read:close,{store},local-port={S},nth=170,count=1"),
        ("front-store-reset", "reset", f"read:errno=ECONNRESET,{front},peer-port={S},nth=160,count=1"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{front},local-port={F},nth=165,count=1"),
        ("store-request-corrupt", "corrupt", f"read:corrupt=4,{store},local-port={S},nth=162,count=1"),
        ("front-answer-corrupt", "corrupt", f"read:corrupt=4,{front},peer-port={S},nth=162,count=1"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},nth=160,count=1"),
        ("store-short", "short", f"write:short=5,{store},local-port={S},nth=160,count=1"),
        ("front-short", "short", f"write:short=10,{front},local-port={F},nth=160,count=1"),
        ("store-slow", "delay", f"write:delay=2s,{store},local-port={S},nth=162,count=1"),
        ("front-slow", "delay", f"write:delay=3s,{front},local-port={F},nth=165,count=1"),
        ("store-killed", "kill", f"read:kill=SIGKILL,{store},local-port={S},nth=170"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{front},local-port={F},nth=175"),
        ("client2-killed", "kill", f"{SEND}:kill=SIGKILL,{c2},nth=55"),
        ("store-stopped", "stop", f"write:kill=SIGSTOP,{store},local-port={S},nth=166"),
        ("front-stopped", "stop", f"write:kill=SIGSTOP,{front},peer-port={S},nth=170"),
        ("front-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=3,count=1"),
        ("store-enospc", "exhaust", f"write:errno=ENOSPC,{store},local-port={S},nth=163,count=1"),
        ("front-enobufs", "exhaust", f"write:errno=ENOBUFS,{front},local-port={F},nth=164,count=1"),
        ("front-eagain-storm", "exhaust", f"read:errno=EAGAIN,{front},local-port={F},after=160,count=20"),
        ("client2-code", "code", f"py:sut.poe_chain:_step:raise=TimeoutError,nth=25,{c2}"),
    ]


def _copas():
    F, S = ports("copas-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; 120/120 and 60/60 steps ok, 360 requests forwarded). Both
    # servers are Lua 5.1 on LuaSocket (libc recv and send, strace's recvfrom and sendto,
    # on non-blocking sockets: a receive that finds nothing fails with EAGAIN and the
    # coroutine yields to the select loop). The store (`copas.lua store`, local-port S)
    # accepts 3 connections (the probe, and the front's connection for each client
    # connection, the second mid-run), receives 768 times (382 EAGAIN) and sends 383
    # times. The front (`copas.lua front`) receives 736 times from its clients (350 EAGAIN)
    # and sends 383 times to them (local-port F), receives 765 times from the store (382
    # EAGAIN) and sends 383 times to it (peer-port S); it accepts 3 connections: the probe,
    # the launcher's, and client 2's, started 1.5 s later (mid-run). The launcher receives
    # 328 times and sends 240 times, calling `_step` 120 times; client 2 (`copas-client
    # --name 2`) receives 163 times and sends 120. Copas 1.1.7 has no socket timeouts: the
    # front waits on the store as long as the client waits (2 s). The SPECs are at about
    # 35 % of a whole run's receives (EAGAIN included) and 45 % of its sends.
    store, front = "exe=lua5.1,argv=copas.lua store", "exe=lua5.1,argv=copas.lua front"
    c1, c2 = "argv=systems.py copas-chain", "argv=copas-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=250,count=1"),
        ("store-drops", "reset", f"{RECV}:close,{store},local-port={S},nth=260,count=1"),
        ("front-store-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={S},nth=250,count=1"),
        ("front-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},local-port={F},nth=240,count=1"),
        ("store-request-corrupt", "corrupt", f"{RECV}:corrupt=4,{store},local-port={S},nth=252,count=1"),
        ("front-answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{front},peer-port={S},nth=252,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=6,{c2},nth=70,count=1"),
        ("store-short", "short", f"{SEND}:short=5,{store},local-port={S},nth=170,count=1"),
        ("front-short", "short", f"{SEND}:short=10,{front},local-port={F},nth=170,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=3s,{store},local-port={S},nth=172,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=175,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=260"),
        ("front-killed", "kill", f"{RECV}:kill=SIGKILL,{front},local-port={F},nth=255"),
        ("client2-killed", "kill", f"{SEND}:kill=SIGKILL,{c2},nth=55"),
        ("store-stopped", "stop", f"{SEND}:kill=SIGSTOP,{store},local-port={S},nth=176"),
        ("front-stopped", "stop", f"{SEND}:kill=SIGSTOP,{front},peer-port={S},nth=180"),
        ("store-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},local-port={S},nth=3,count=1"),
        ("front-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=3,count=1"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={S},nth=173,count=1"),
        ("front-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{front},local-port={F},nth=174,count=1"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=240,count=20"),
        ("client1-code", "code", f"py:sut.copas_chain:_step:raise=TimeoutError,nth=40,{c1}"),
    ]
