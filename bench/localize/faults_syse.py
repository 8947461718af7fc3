"""Fault cases of the validation systems added on 2026-11-28 for validation run 6 (branch
loc-syse): postfix-relay and gevent-chain. No method has been run on them (only `--check`
and `--record-only`). The categories and the SPEC grammar are those of `faults.py`; every
SPEC is narrowed to one process and one call, mid-run."""

from sut.common import ports

RECV = "recv|read|recvfrom|recvmsg|readv"
SEND = "send|write|sendto|sendmsg|writev"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"postfix-relay": _postfix(), "gevent-chain": _gevent()}


def _postfix():
    S1, S2, SINK = ports("postfix-relay")[:3]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Each client's smtpd (one per listener, `smtpd -n 127.0.0.1:PORT`) reads
    # its client's connection 483 times and writes it 484 times (about four commands and
    # replies a message, 120 messages). The one smtp delivery agent reads the sink
    # (peer-port SINK) 1 288 times and writes it 1 239 times for 240 messages, over
    # connections it caches in scache. qmgr reads its UNIX sockets 925 times. The sink
    # (aiosmtpd, CPython asyncio) reads its SMTP side (local-port SINK) 1 241 times, writes
    # it 1 400 times, and makes 82 accept calls there (37 find nothing: asyncio accepts
    # until EAGAIN). A fault comes at about half of a process's calls. The smtp agent gives
    # up on the sink after 2 s, a client on its smtpd after 2 s; a deferred message is
    # tried again after 2-4 s. Postfix's daemons read and write their sockets with
    # read/write; the sink and the clients with recvfrom/sendto.
    smtpd1, smtpd2 = f"exe=smtpd,local-port={S1}", f"exe=smtpd,local-port={S2}"
    agent, sink = f"exe=smtp,peer-port={SINK}", f"argv=smtp-sink,local-port={SINK}"
    return [
        ("smtpd-reset", "reset", f"read:errno=ECONNRESET,{smtpd1},nth=300,count=1"),
        ("sink-reset", "reset", f"{RECV}:errno=ECONNRESET,{sink},nth=600,count=1"),
        ("relay-drops", "reset", f"read:close,{agent},nth=650,count=1"),
        ("command-corrupt", "corrupt", f"read:corrupt=4,{smtpd2},nth=300,count=1"),
        ("reply-corrupt", "corrupt", f"read:corrupt=3,{agent},nth=650,count=1"),
        ("data-short", "short", f"{RECV}:short=7,{sink},nth=620,count=1"),
        ("sink-slow", "delay", f"{SEND}:delay=3s,{sink},nth=700,count=1"),
        ("smtpd-slow", "delay", f"write:delay=3s,{smtpd1},nth=300,count=1"),
        ("sink-killed", "kill", f"{RECV}:kill=SIGKILL,{sink},nth=700"),
        ("smtpd-killed", "kill", f"read:kill=SIGKILL,{smtpd2},nth=300"),
        ("qmgr-stopped", "stop", "read:kill=SIGSTOP,exe=qmgr,nth=450"),
        ("sink-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{sink},nth=20,count=1"),
        ("smtpd-enospc", "exhaust", f"write:errno=ENOSPC,{smtpd2},nth=300,count=1"),
        ("sink-code", "code", "py:sut.postfix_relay:Sink.handle_DATA:raise=RuntimeError,nth=100,argv=smtp-sink"),
        ("client2-code", "code", "py:smtplib:SMTP.sendmail:raise=ConnectionResetError,nth=60,argv=postfix-client --name 2"),
    ]


def _gevent():
    F, B = ports("gevent-chain")[:2]
    # Counted with strace on a run without the tracer: every process is CPython with
    # gevent (one thread, greenlets on libev). The backend reads its side of the front's
    # pool (local-port B) 1 201 times (a frame's head, key and value each in a receive of
    # their own, each after waiting for the socket to be readable: one receive in 1 200
    # found nothing) and writes 480 answers; it makes 6 accept calls (the launcher's port
    # probe, two pool connections, and an EAGAIN after each). The front reads the pool
    # (peer-port B) 960 times (an answer's head, then its body), none empty, and writes it
    # 480 times; it reads its clients' connections (local-port F) 1 038 times, 476 of them
    # empty (gevent's recv tries the call first and waits after EAGAIN), so only faults
    # made before the call go there (errno, close, kill), and writes them 960 times. The
    # front gives up on the backend after 1 s, a client on the front after 2 s.
    front, back = "argv=gevent-service --name front", "argv=gevent-service --name back"
    return [
        ("backend-reset", "reset", f"{RECV}:errno=ECONNRESET,{back},local-port={B},nth=600,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={B},nth=480,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=500,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{back},local-port={B},nth=600,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=5,{front},peer-port={B},nth=480,count=1"),
        ("answer-short", "short", f"{RECV}:short=2,{front},peer-port={B},nth=500,count=1"),
        ("backend-slow", "delay", f"{SEND}:delay=2s,{back},local-port={B},nth=240,count=1"),
        ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={B},nth=700"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},peer-port={B},nth=500"),
        ("backend-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},nth=3,count=1"),
        ("front-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{front},local-port={F},nth=480,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=400,count=30"),
        ("backend-code", "code", f"py:sut.gevent_chain:Store.apply:raise=KeyError,nth=250,{back}"),
        ("front-code", "code", f"py:sut.gevent_chain:Pool.call:raise=TimeoutError,nth=300,{front}"),
        ("client2-code", "code", "py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=60,argv=gevent-client --name 2"),
    ]
