"""Fault cases of the validation systems added on 2026-11-28 for validation run 8 (branch
loc-sysh). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"cherrypy-rpyc": _cherrypy(), "puma-memcache": _puma(),
            "icecast-relay": _icecast(),
            "coturn-relay": _coturn()}


def _cherrypy():
    F, S = ports("cherrypy-rpyc")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). The CherryPy front (one process, 4 cheroot worker threads) receives
    # (recv) the clients' requests (local-port F) about 380 times (4 empty) and sends 360
    # answers; it accepts 4 connections on F (the launcher's probe, the two clients, one
    # more). It keeps 2 RPyC connections to the store: it sends about 1 080 times on them
    # (peer-port S) and receives about 2 160 times (RPyC reads a frame's 5-byte header,
    # then its body: a receive of the store's answer is a header or a body, so a garbled
    # answer is two receives in a row). The RPyC store (one process, a thread per
    # connection) receives about 2 170 times (local-port S; header, body) and sends about
    # 1 080 times; it accepts 3 connections (the probe, the front's two). RPyC's sends loop
    # until all is sent. The front gives up on a store call after 1 s; a client on the front
    # after 2 s. The front calls StorePool.call 360 times; the store Store.exposed_put 180
    # times; client 2 (60 steps) calls KvClient.get 60 times.
    front, store = "argv=cherrypy-front", "argv=rpyc-store"
    c2 = "argv=cherrypy-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=1000,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={S},nth=1000,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=200,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},after=999,count=2"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{front},peer-port={S},after=999,count=2"),
        ("http-corrupt", "corrupt", f"{RECV}:corrupt=3,{front},local-port={F},nth=200,count=1"),
        ("store-short", "short", f"{SEND}:short=4,{store},local-port={S},nth=500,count=1"),
        ("front-short", "short", f"{RECV}:short=5,{front},local-port={F},nth=200,count=1"),
        ("store-slow", "delay", f"{RECV}:delay=2s,{store},local-port={S},nth=1000,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=200,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=1000"),
        ("front-killed", "kill", f"{RECV}:kill=SIGKILL,{front},local-port={F},nth=250"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=1000"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=250"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},nth=2,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},nth=2,count=1"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={S},nth=500,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=150,count=30"),
        ("store-code", "code", f"py:sut.cherrypy_rpyc:Store.exposed_put:raise=MemoryError,nth=60,{store}"),
        ("front-code", "code", f"py:sut.cherrypy_rpyc:StorePool.call:raise=TimeoutError,nth=200,{front}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=40,{c2}"),
    ]


def _puma():
    F, M1, M2 = ports("puma-memcache")[:3]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Puma's master (exe ruby, the puma script's command line) forks one worker
    # (same image, same command line), and only the worker touches these ports: so every
    # Puma SPEC has a port key. The worker (4 threads) accepts 3 connections on F (the
    # launcher's probe, the two clients), receives (recv) their requests about 365 times
    # (3 empty; one request a receive) and writes each answer in two writes (headers, body:
    # about 720). Each thread keeps a connection to each shard; the worker receives about
    # 180 answers from each shard (peer-port M1, M2) and sends each shard about 90 `set`s
    # (writev) and 90 `get`s (write). Each memcached (2 worker threads) reads about 180
    # requests (2 empty) and answers each with one sendmsg; it accepts 5 connections (the
    # probe, the worker's 4 threads). The worker gives up on a shard after 1 s; a client on
    # Puma after 2 s; the master kills a worker that has not checked in for 6 s
    # (worker_timeout) and forks a new one for a worker that died; a new worker counts from
    # zero and, past the 250th receive, no longer reaches the same count before the run
    # ends. The launcher's client calls KvClient.put 120 times; client 2 calls KvClient.get
    # 60 times.
    puma, mc = "exe=ruby*,argv=puma.rb", "exe=memcached"
    c1, c2 = "argv=systems.py puma-memcache", "argv=puma-client --name 2"
    return [
        ("shard-reset", "reset", f"read:errno=ECONNRESET,{mc},local-port={M1},nth=100,count=1"),
        ("worker-reset", "reset", f"{RECV}:errno=ECONNRESET,{puma},peer-port={M2},nth=100,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{puma},local-port={F},nth=200,count=1"),
        ("shard-corrupt", "corrupt", f"read:corrupt=3,{mc},local-port={M1},nth=100,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{puma},peer-port={M2},nth=100,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{puma},local-port={F},nth=200,count=1"),
        ("shard-short", "short", f"sendmsg:short=10,{mc},local-port={M1},nth=100,count=1"),
        ("worker-short", "short", f"{RECV}:short=20,{puma},local-port={F},nth=200,count=1"),
        ("shard-slow", "delay", f"sendmsg:delay=2s,{mc},local-port={M2},nth=100,count=1"),
        ("worker-slow", "delay", f"write:delay=3s,{puma},local-port={F},nth=300,count=1"),
        ("shard-killed", "kill", f"read:kill=SIGKILL,{mc},local-port={M1},nth=120"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{puma},local-port={F},nth=250"),
        ("shard-stopped", "stop", f"read:kill=SIGSTOP,{mc},local-port={M2},nth=120"),
        ("worker-stopped", "stop", f"{RECV}:kill=SIGSTOP,{puma},local-port={F},nth=250"),
        ("worker-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{puma},local-port={F},nth=2,count=1"),
        ("shard-enospc", "exhaust", f"sendmsg:errno=ENOSPC,{mc},local-port={M1},nth=100,count=1"),
        ("worker-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{puma},local-port={F},after=150,count=30"),
        ("client-code", "code", f"py:sut.kv_http:KvClient.put:raise=ConnectionResetError,nth=80,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=40,{c2}"),
    ]


def _icecast():
    M, R = ports("icecast-relay")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Each Icecast is one process (exe icecast2; threads: the connection
    # acceptor, a source thread per mount, the relay's puller, ...). The master receives
    # (recv) the source's frames (local-port M) about 610 times (one frame send of the
    # launcher, about 510, is one or two receives) and sends (send) the stream on to the
    # relay's puller and to listener 2 (local-port M both) about 190 times in blocks of a
    # few KB; it accepts 4 connections (the launcher's probe, the source, the relay, listener
    # 2, and the launcher's check that the mount is up). The relay (started once the master
    # serves the mount, so that its one pull finds it) receives the master's stream
    # (peer-port M) about 340 times: first the answer's header one byte a receive (about
    # 235), then the stream in reads of up to 1 400 bytes (about 100): the relay SPECs
    # count to 290 (the 55th read of the stream). It sends the stream to listener 1
    # (local-port R) about 90 times. Each listener receives about 90 times.
    # A listener gives up after 2 s without data and connects again 0.3 s later; a server
    # drops a mount whose source sent nothing for 3 s; the source connects again 0.5 s after
    # a failed send. The launcher calls `frame` about 510 times; listener 1 calls
    # Checker.check once per frame (about 505).
    master, relay = "exe=icecast2,argv=master.xml", "exe=icecast2,argv=relay.xml"
    src, l1, l2 = "argv=systems.py icecast-relay", "argv=ice-listener --name 1", "argv=ice-listener --name 2"
    return [
        ("source-reset", "reset", f"{RECV}:errno=ECONNRESET,{master},local-port={M},nth=300,count=1"),
        ("pull-reset", "reset", f"{RECV}:errno=ECONNRESET,{relay},peer-port={M},nth=290,count=1"),
        ("stream-drops", "reset", f"{SEND}:close,{master},local-port={M},nth=100,count=1"),
        ("source-corrupt", "corrupt", f"{RECV}:corrupt=4,{master},local-port={M},nth=300,count=1"),
        ("pull-corrupt", "corrupt", f"{RECV}:corrupt=4,{relay},peer-port={M},nth=290,count=1"),
        ("listener-corrupt", "corrupt", f"{RECV}:corrupt=3,{l1},peer-port={R},nth=40,count=1"),
        ("source-short", "short", f"{RECV}:short=5,{master},local-port={M},nth=300,count=1"),
        ("relay-short", "short", f"{SEND}:short=100,{relay},local-port={R},nth=50,count=1"),
        ("source-slow", "delay", f"{RECV}:delay=4s,{master},local-port={M},nth=300,count=1"),
        ("pull-slow", "delay", f"{RECV}:delay=4s,{relay},peer-port={M},nth=290,count=1"),
        ("master-killed", "kill", f"{RECV}:kill=SIGKILL,{master},local-port={M},nth=300"),
        ("relay-killed", "kill", f"{RECV}:kill=SIGKILL,{relay},peer-port={M},nth=290"),
        ("listener-killed", "kill", f"{RECV}:kill=SIGKILL,{l2},peer-port={M},nth=40"),
        ("relay-stopped", "stop", f"{RECV}:kill=SIGSTOP,{relay},peer-port={M},nth=290"),
        ("master-stopped", "stop", f"{RECV}:kill=SIGSTOP,{master},local-port={M},nth=300"),
        ("master-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{master},nth=2,count=1"),
        ("master-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{master},local-port={M},nth=100,count=1"),
        ("pull-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{relay},peer-port={M},after=260,count=30"),
        ("source-code", "code", f"py:sut.icecast_relay:frame:raise=BrokenPipeError,nth=300,{src}"),
        ("listener-code", "code", f"py:sut.icecast_relay:Checker.check:raise=ValueError,nth=200,{l1}"),
    ]


def _coturn():
    T, P = ports("coturn-relay")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). turnserver is one process (exe turnserver; each client's session is served
    # by one of 2 relay threads). On the clients' side (local-port T: a socket per session,
    # bound to T) it receives with recvmsg four times per datagram — the datagram, then
    # EAGAIN, the error queue (EAGAIN), EAGAIN —: about 1 460 calls for about 364 datagrams
    # (the two clients' ChannelData and their Allocate and ChannelBind requests), so a
    # garbled datagram is four receives in a row; it sends (sendto) about 364 datagrams to
    # the clients. Its relayed sockets (a port of p[4]..p[9], which one varies from run to
    # run, so no SPEC names it) receive the peer's 360 answers the same way and send (sendto)
    # 360 datagrams to the peer: without a port key, sendto counts both sides (about 724).
    # The peer (Python, one socket) receives (recvfrom) and answers (sendto) 360 times and
    # calls `answer` 360 times; the launcher's client receives (recv) about 242 times (240
    # messages), client 2 about 122 and calls TurnClient.exchange 120 times. A client waits
    # 1 s for an answer and allocates again after 3 failures in a row.
    turn, peer = "exe=turnserver", "argv=turn-peer"
    c1, c2 = "argv=systems.py coturn-relay", "argv=turn-client --name 2"
    return [
        ("session-reset", "reset", f"recvmsg:errno=ECONNRESET,{turn},local-port={T},after=800,count=1"),
        ("peer-refused", "reset", f"sendto:errno=ECONNREFUSED,{turn},nth=400,count=1"),
        ("client-reset", "reset", f"{RECV}:errno=ECONNRESET,{c2},nth=60,count=1"),
        ("channel-corrupt", "corrupt", f"recvmsg:corrupt=4,{turn},local-port={T},after=800,count=4"),
        ("peer-corrupt", "corrupt", f"{RECV}:corrupt=3,{peer},nth=200,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},nth=150,count=1"),
        ("relay-short", "short", f"sendto:short=30,{turn},local-port={T},nth=200,count=1"),
        ("peer-short", "short", f"{SEND}:short=20,{peer},nth=200,count=1"),
        ("relay-slow", "delay", f"sendto:delay=2s,{turn},nth=400,count=1"),
        ("peer-slow", "delay", f"{SEND}:delay=2s,{peer},nth=200,count=1"),
        ("relay-killed", "kill", f"recvmsg:kill=SIGKILL,{turn},local-port={T},nth=900"),
        ("peer-killed", "kill", f"{RECV}:kill=SIGKILL,{peer},nth=200"),
        ("client-killed", "kill", f"{RECV}:kill=SIGKILL,{c2},nth=60"),
        ("relay-stopped", "stop", f"recvmsg:kill=SIGSTOP,{turn},local-port={T},nth=900"),
        ("peer-stopped", "stop", f"{RECV}:kill=SIGSTOP,{peer},nth=200"),
        ("relay-enobufs", "exhaust", f"sendto:errno=ENOBUFS,{turn},local-port={T},nth=200,count=1"),
        ("relay-eagain-storm", "exhaust", f"sendto:errno=EAGAIN,{turn},after=400,count=25"),
        ("peer-code", "code", f"py:sut.coturn_relay:answer:raise=ValueError,nth=200,{peer}"),
        ("client2-code", "code", f"py:sut.coturn_relay:TurnClient.exchange:raise=TimeoutError,nth=60,{c2}"),
    ]
