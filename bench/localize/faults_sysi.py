"""Fault cases of the validation systems added on 2026-11-28 for validation run 8 (branch
loc-sysi). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"dnsmasq-chain": _dnsmasq(), "quart-hypercorn": _quart()}


def _dnsmasq():
    B, F = ports("dnsmasq-chain")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Both dnsmasq are exe dnsmasq, told apart by `--port=` in their
    # command lines. The front (parent process) receives
    # (recvmsg) the 270 UDP queries of the launcher (120) and the txt client (150) on F,
    # forwards each from a fresh UDP socket (sendto to B; its sendto to a netlink socket
    # after each accept count too, so no SPEC uses sendto), receives the back's answer
    # there (recvfrom: the socket is not connected, so no port key finds it; the back never
    # calls recvfrom) and answers the client (sendmsg on F): about 270 of each;
    # it accepts the tcp client's 150 connections on F and forks a child for each, which
    # reads and writes (read/write only: no SPEC here counts a child's calls) over its own
    # TCP connection to the back. The back (parent) receives (recvmsg) 270 UDP queries on
    # B, answers each (sendmsg), and accepts 150 TCP connections on B (a child each). Its
    # recvmsg on a netlink socket after each accept has no port. A client waits 1.5 s. The
    # launcher calls `query` 120 times, the tcp client 150 times.
    front, back = f"exe=dnsmasq,argv=--port={F}", f"exe=dnsmasq,argv=--port={B}"
    c1, tcp = "argv=systems.py dnsmasq-chain", "argv=dnsmasq-client --name tcp"
    return [
        ("back-reset", "reset", f"recvmsg:errno=ECONNRESET,{back},local-port={B},nth=130,count=1"),
        ("forward-refused", "reset", f"recvfrom:errno=ECONNREFUSED,{front},nth=130,count=1"),
        ("tcp-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{tcp},nth=100,count=1"),
        ("query-corrupt", "corrupt", f"recvmsg:corrupt=3,{back},local-port={B},nth=130,count=1"),
        ("answer-corrupt", "corrupt", f"recvfrom:corrupt=4,{front},nth=130,count=1"),
        ("client-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},nth=60,count=1"),
        ("back-short", "short", f"sendmsg:short=20,{back},local-port={B},nth=130,count=1"),
        ("front-short", "short", f"sendmsg:short=30,{front},local-port={F},nth=130,count=1"),
        ("back-slow", "delay", f"sendmsg:delay=2s,{back},local-port={B},nth=130,count=1"),
        ("front-slow", "delay", f"recvmsg:delay=2s,{front},local-port={F},nth=130,count=1"),
        ("back-killed", "kill", f"recvmsg:kill=SIGKILL,{back},local-port={B},nth=130"),
        ("front-killed", "kill", f"recvmsg:kill=SIGKILL,{front},local-port={F},nth=130"),
        ("back-stopped", "stop", f"recvmsg:kill=SIGSTOP,{back},local-port={B},nth=130"),
        ("front-stopped", "stop", f"recvmsg:kill=SIGSTOP,{front},local-port={F},nth=130"),
        ("back-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},local-port={B},nth=60,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=60,count=1"),
        ("back-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{back},local-port={B},nth=130,count=1"),
        ("back-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{back},local-port={B},after=120,count=25"),
        ("front-eagain-storm", "exhaust", f"recvfrom:errno=EAGAIN,{front},after=120,count=25"),
        ("client-code", "code", f"py:sut.dnsmasq_chain:query:raise=TimeoutError,nth=60,{c1}"),
        ("tcp-client-code", "code", f"py:sut.dnsmasq_chain:query:raise=ConnectionResetError,nth=80,{tcp}"),
    ]



def _quart():
    F, S = ports("quart-hypercorn")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). The front (Hypercorn's asyncio worker running Quart: one process, one
    # event loop) receives (recv) the clients' requests (local-port F) about 365 times and
    # the store's answers (peer-port S) 360 times (one receive each); it sends each answer
    # to a client in two sends (headers, body: about 720) and each call to the store in
    # one (360); it accepts about 4 connections on F (the launcher's probe, the two
    # clients). Its pool holds as many store connections as calls ran at once (2-4). The
    # store (asyncio.start_server: one process, one event loop) receives 360 requests (one
    # receive each, local-port S), sends 360 answers and accepts about 5 connections (the
    # probe, the front's pool). The front gives up on a store call after 1 s; a client on
    # the front after 2 s. The front calls `frame` 360 times (once per store call), the
    # store calls Store.handle 360 times; client 2 (60 steps) calls KvClient.get 60 times.
    front, store = "argv=quart-front", "argv=quart-store"
    c2 = "argv=quart-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=200,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={S},nth=200,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=200,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=200,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{front},peer-port={S},nth=200,count=1"),
        ("http-corrupt", "corrupt", f"{RECV}:corrupt=3,{front},local-port={F},nth=200,count=1"),
        ("store-short", "short", f"{SEND}:short=4,{store},local-port={S},nth=200,count=1"),
        ("front-short", "short", f"{RECV}:short=5,{front},local-port={F},nth=200,count=1"),
        ("store-slow", "delay", f"{RECV}:delay=2s,{store},local-port={S},nth=200,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=400,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=200"),
        ("front-killed", "kill", f"{RECV}:kill=SIGKILL,{front},local-port={F},nth=200"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=200"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=200"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},nth=3,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},nth=2,count=1"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={S},nth=200,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=150,count=30"),
        ("store-code", "code", f"py:sut.quart_hypercorn:Store.handle:raise=MemoryError,nth=150,{store}"),
        ("front-code", "code", f"py:sut.quart_hypercorn:frame:raise=BrokenPipeError,nth=200,{front}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=40,{c2}"),
    ]
