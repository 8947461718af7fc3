"""Fault cases of the validation systems added on 2026-11-28 for validation run 6 (branch
loc-sysf): apache-balancer and twisted-amp. No method has been run on them. The categories
and the SPEC grammar are those of `faults.py`; every SPEC is narrowed to one process and one
call, mid-run."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"apache-balancer": _apache(), "twisted-amp": _twisted()}


def _apache():
    F, B1, B2 = ports("apache-balancer")[:3]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Apache's event MPM has 2 children; each client's keep-alive connection
    # stays with the child that accepted it, and its 4 worker threads take turns on it.
    # The child of the launcher's client (120 steps: a PUT and a GET each) reads it
    # (local-port F) about 500 times — 180 of them find nothing (EAGAIN: APR reads before it
    # polls) — and writes it (writev) 240 times; it reads each member's answers (peer-port B1,
    # B2) about 360 times, half of them empty, and writes each member 120 requests. The child
    # of client 2 (60 steps) sees half of that (250 reads, 120 writes of its client; 180
    # reads and 60 writes per member), so a count above those reaches only the busy child.
    # A corrupt or short receive in Apache could land on an empty read: only errno faults go
    # on Apache's reads. A client whose connection failed connects again, often to the other
    # child (or to the one the parent forks to replace a killed child), whose counters then
    # go on from what that child saw: a fault on the client side of a child comes at the
    # 200th of its 240 writes, which the other child does not reach even with the rest of
    # the launcher's client (120 + 40; a first check at the 150th write and the 320th read
    # fired twice, once in each child). Each lighttpd (one process, one event loop)
    # reads its requests (local-port B1 or B2) about 360 times (a PUT's body often in a
    # read of its own; 15 empty) and answers with 180 writev; it accepts about 6
    # connections (the launcher's probe, then the children's pools). Traced, lighttpd also
    # reads a connection again after each answer, which finds nothing (a first check's
    # garbled read was one of those: EAGAIN, nothing to garble): its garbled request is
    # two reads in a row from the 250th (an empty read is always followed by one with
    # data — lighttpd waits for the next event in between), and its short transfer is on
    # a write. A member that does not
    # answer within 1 s gives the client a 502; a client gives up after 2 s. Client 2's
    # http.client receives (recv) about 120 times.
    apache, l1, l2 = "exe=apache2", "exe=lighttpd,argv=lighttpd-1.conf", "exe=lighttpd,argv=lighttpd-2.conf"
    c2 = "argv=balancer-client --name 2"
    return [
        ("backend-reset", "reset", f"read:errno=ECONNRESET,{apache},peer-port={B1},nth=250,count=1"),
        ("client-dropped", "reset", f"writev:close,{apache},local-port={F},nth=200,count=1"),
        ("member-drops", "reset", f"read:close,{l2},nth=250,count=1"),
        ("request-corrupt", "corrupt", f"read:corrupt=4,{l1},local-port={B1},after=249,count=2"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=5,{c2},peer-port={F},nth=60,count=1"),
        ("answer-short", "short", f"writev:short=40,{l2},nth=100,count=1"),
        ("member-slow", "delay", f"writev:delay=2s,{l1},nth=100,count=1"),
        ("child-slow", "delay", f"writev:delay=3s,{apache},local-port={F},nth=200,count=1"),
        ("member-killed", "kill", f"read:kill=SIGKILL,{l2},nth=200"),
        ("child-killed", "kill", f"writev:kill=SIGKILL,{apache},local-port={F},nth=200"),
        ("member-stopped", "stop", f"read:kill=SIGSTOP,{l1},nth=200"),
        ("member-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{l1},nth=3,count=1"),
        ("child-enospc", "exhaust", f"writev:errno=ENOSPC,{apache},local-port={F},nth=200,count=1"),
        ("member-eagain-storm", "exhaust", f"read:errno=EAGAIN,{l2},after=150,count=30"),
        ("client-code", "code", f"py:sut.apache_balancer:Client.call:raise=TimeoutError,nth=80,{c2}"),
    ]


def _twisted():
    F, B = ports("twisted-amp")[:2]
    # Counted with strace on a run without the tracer: every process is one thread on
    # Twisted's epoll reactor, which reads a socket only when it is readable (no empty
    # reads). The backend receives (recv, local-port B) about 350 times from the front's one
    # connection and sends (send) as many answers. The front receives about 360 times from
    # its clients (local-port F: 240 from client 1, 120 from client 2) and sends 360
    # answers; it sends the backend 350 calls and receives 350 answers (peer-port B). It
    # accepts 3 connections (the launcher's probe, then the clients). The front calls
    # BinaryBoxProtocol.dataReceived once per receive (about 710); the backend calls
    # Store.put once per PUT (180). The front gives up on a backend call after 1 s, a client
    # on the front after 2 s.
    front, back = "argv=amp-service --name front", "argv=amp-service --name back"
    return [
        ("backend-reset", "reset", f"{RECV}:errno=ECONNRESET,{back},local-port={B},nth=180,count=1"),
        ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={B},nth=200,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=220,count=1"),
        ("link-answer-corrupt", "corrupt", f"{RECV}:corrupt=3,{front},peer-port={B},nth=200,count=1"),
        ("call-corrupt", "corrupt", f"{RECV}:corrupt=4,{back},local-port={B},nth=180,count=1"),
        ("call-short", "short", f"{RECV}:short=5,{back},local-port={B},nth=200,count=1"),
        ("backend-slow", "delay", f"{SEND}:delay=2s,{back},local-port={B},nth=200,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=200,count=1"),
        ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={B},nth=200"),
        ("front-killed", "kill", f"{RECV}:kill=SIGKILL,{front},local-port={F},nth=220"),
        ("backend-stopped", "stop", f"{RECV}:kill=SIGSTOP,{back},local-port={B},nth=200"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},nth=2,count=1"),
        ("backend-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{back},local-port={B},nth=200,count=1"),
        ("backend-code", "code", f"py:sut.twisted_amp:Store.put:raise=MemoryError,nth=90,{back}"),
        ("front-code", "code", f"py:twisted.protocols.amp:BinaryBoxProtocol.dataReceived:raise=ValueError,nth=400,{front}"),
    ]
