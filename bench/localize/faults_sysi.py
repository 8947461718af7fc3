"""Fault cases of the validation systems added on 2026-11-28 for validation run 8 (branch
loc-sysi). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"dnsmasq-chain": _dnsmasq()}


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

