"""Fault cases of the validation systems added on 2026-11-29 for validation run 10 (branch
loc-sysn). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 10 (`run.py --record-only` into
/tmp/val10/loc-sysn with the lead's build /tmp/rec11/culprit: 3 normal runs, the control
and every case per system), then checked with `run.py --check --reuse` on those recordings
(injection records and client summaries only, no model, no ranking): every case of the
three systems fired (one injection each; the EAGAIN storms 20), no control holds an
injection record, and every normal run and control ended with all steps ok. Cases in
which no client saw a failure (the system absorbed the fault): nghttpx-proxy's
item-store-reset, item-store-short, client2-short, proxy-enobufs and proxy-eagain-storm;
em-relay's store-request-corrupt, store-short and client1-short; sanic-waitress's
store-short and front-short (13 % of the 62 cases in all).
Recorded again before that check: em-relay's three client receive cases (first SPECs named
recvfrom, which CPython does not call by that name: they never fired); nghttpx-proxy and
sanic-waitress from scratch (a worker stopped by a fault held the recording open until the
75-s timeout; then sanic-waitress once more because its clients' first request could time
out while Sanic's worker started)."""

from sut.common import ports

# CPython calls libc recv() and send() (which strace shows as recvfrom and sendto): the
# SPECs on Python processes name both.
RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"nghttpx-proxy": _nghttpx(), "sanic-waitress": _sanic(), "em-relay": _em()}


def _nghttpx():
    F, S1, S2 = ports("nghttpx-proxy")[:3]
    # Counted with `strace -f` on a run without the tracer (no recording of this system was
    # looked at), 120 launcher steps and 60 HTTP/2 steps. The nghttpx worker (exe nghttpx;
    # the master does no I/O on these ports) reads with read(2) and writes with writev(2):
    # on the item store's pooled connection (peer-port S1) about 717 reads (header, EAGAIN,
    # body per answer) and 240 writevs; on the blob store's (S2) 338 reads and 121 writevs;
    # on the two client connections (local-port F) 1069 reads and 697 writevs. The stores
    # (http.server, a thread per connection) receive each request in one recvfrom (item:
    # ~241, blob: ~125) and answer in two sendtos (item: 480, blob: ~240). The launcher
    # (client 1, http.client) receives 478 times (headers, body); client 2 (httpx on h2,
    # one HTTP/2 connection) 219. About a third of the worker's reads are EAGAIN, so its
    # corrupt and short cases are on the receivers that always get data (stores, clients).
    # nghttpx gives up on a backend after 1 s; the clients after 2 s.
    # The item store's do_PUT runs 120 times, client 2's H2Client.put 60 times, the
    # launcher's KvClient.get 120 times.
    worker = "exe=*nghttpx"
    item, blob = "argv=ng-store --name item", "argv=ng-store --name blob"
    c1, c2 = "argv=systems.py nghttpx-proxy", "argv=ng-client --name 2"
    return [
        ("item-store-reset", "reset", f"{RECV}:errno=ECONNRESET,{item},local-port={S1},nth=120,count=1"),
        ("proxy-backend-reset", "reset", f"read:errno=ECONNRESET,{worker},peer-port={S1},nth=360,count=1"),
        ("proxy-drops-client", "reset", f"writev:close,{worker},local-port={F},nth=350,count=1"),
        ("blob-store-drops", "reset", f"{SEND}:close,{blob},local-port={S2},nth=120,count=1"),
        ("item-request-corrupt", "corrupt", f"{RECV}:corrupt=3,{item},local-port={S1},nth=120,count=1"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},peer-port={F},nth=240,count=1"),
        ("client2-h2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},peer-port={F},nth=110,count=1"),
        ("item-store-short", "short", f"{SEND}:short=20,{item},local-port={S1},nth=240,count=1"),
        ("client2-short", "short", f"{RECV}:short=5,{c2},peer-port={F},nth=110,count=1"),
        ("item-store-slow", "delay", f"{SEND}:delay=2s,{item},local-port={S1},nth=240,count=1"),
        ("proxy-slow", "delay", f"writev:delay=3s,{worker},local-port={F},nth=350,count=1"),
        ("item-store-killed", "kill", f"{RECV}:kill=SIGKILL,{item},local-port={S1},nth=120"),
        ("proxy-killed", "kill", f"writev:kill=SIGKILL,{worker},peer-port={S2},nth=60"),
        ("blob-store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{blob},local-port={S2},nth=60"),
        ("proxy-stopped", "stop", f"read:kill=SIGSTOP,{worker},local-port={F},nth=500"),
        ("item-store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{item},local-port={S1},nth=240,count=1"),
        ("proxy-enobufs", "exhaust", f"writev:errno=ENOBUFS,{worker},peer-port={S1},nth=120,count=1"),
        ("proxy-eagain-storm", "exhaust", f"read:errno=EAGAIN,{worker},peer-port={S1},after=360,count=20"),
        ("item-store-code", "code", f"py:sut.nghttpx_proxy:StoreHandler.do_PUT:raise=MemoryError,nth=60,{item}"),
        ("client2-code", "code", f"py:sut.nghttpx_proxy:H2Client.put:raise=TimeoutError,nth=30,{c2}"),
        ("client1-code", "code", f"py:sut.kv_http:KvClient.get:raise=ConnectionResetError,nth=60,{c1}"),
    ]


def _sanic():
    F, S = ports("sanic-waitress")[:2]
    # Counted with `strace -f` on a run without the tracer (no recording of this system was
    # looked at), 120 launcher steps and 60 of client 2. Sanic's manager (`-m sanic`) does
    # no I/O on these ports; its worker is a `multiprocessing` spawn child (argv
    # `spawn_main`; the other spawn child, Sanic's shared-state process, does no I/O on
    # them either) running uvloop, which reads with read(2) and writes with write(2): on
    # the two client connections (local-port F) about 500 reads (a third of them EAGAIN)
    # and 360 writes, on its httpx pool to the store (peer-port S) about 600 reads and
    # 540 writes. waitress (`sw-store`) receives in its I/O thread (recvfrom: 541, headers
    # and bodies apart) and its 4 worker threads answer with sendto (720: headers, body).
    # The launcher receives 240 times and sends 360; client 2 receives 120 and sends 180.
    # The worker's Front.store_put and the store's Store.put run 180 times each, client
    # 2's KvClient.get 60 times. The front gives up on the store after 1 s, a client on the
    # front after 2 s.
    worker, store = "argv=spawn_main", "argv=sw-store"
    c1, c2 = "argv=systems.py sanic-waitress", "argv=sw-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=270,count=1"),
        ("front-reset", "reset", f"read:errno=ECONNRESET,{worker},peer-port={S},nth=300,count=1"),
        ("front-drops-client", "reset", f"write:close,{worker},local-port={F},nth=180,count=1"),
        ("store-drops", "reset", f"{SEND}:close,{store},local-port={S},nth=360,count=1"),
        ("store-request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=270,count=1"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},peer-port={F},nth=120,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},peer-port={F},nth=60,count=1"),
        ("store-short", "short", f"{SEND}:short=20,{store},local-port={S},nth=360,count=1"),
        ("front-short", "short", f"write:short=10,{worker},local-port={F},nth=180,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=360,count=1"),
        ("front-slow", "delay", f"write:delay=3s,{worker},local-port={F},nth=180,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=270"),
        ("front-worker-killed", "kill", f"write:kill=SIGKILL,{worker},peer-port={S},nth=270"),
        ("store-stopped", "stop", f"{SEND}:kill=SIGSTOP,{store},local-port={S},nth=360"),
        ("front-stopped", "stop", f"read:kill=SIGSTOP,{worker},local-port={F},nth=250"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={S},nth=360,count=1"),
        ("front-enobufs", "exhaust", f"write:errno=ENOBUFS,{worker},peer-port={S},nth=270,count=1"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=270,count=20"),
        ("front-code", "code", f"py:sut.sanic_waitress:Front.store_put:raise=ConnectionRefusedError,nth=90,{worker}"),
        ("store-code", "code", f"py:sut.sanic_waitress:Store.put:raise=MemoryError,nth=90,{store}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=30,{c2}"),
    ]


def _em():
    F, S = ports("em-relay")[:2]
    # Counted with `strace -f` on a run without the tracer (no recording of this system was
    # looked at), 120 launcher steps and 60 of client 2 (a step is a SET and a GET). Both
    # Ruby processes run `ruby em.rb ROLE` (argv tells them apart); EventMachine's reactor
    # reads with read(2) until EAGAIN (every read with data is followed by an EAGAIN one)
    # and writes with writev(2). The front: on its store connection (peer-port S) about 700
    # reads and 356 writevs, on the two client connections (local-port F) about 724 reads
    # and 362 writevs. The store (local-port S): about 708 reads and 351 writevs (answers
    # written together are one writev). The launcher receives 240 times and sends 240,
    # client 2 120 and 120, each through LineClient.line (launcher 240 calls, client 2
    # 120). Since half of the EventMachine reads are EAGAIN, the corruption in the store
    # covers two consecutive reads (one of them has data); the other receive faults in the
    # Ruby processes replace the result whatever it was. The front gives up on a store
    # answer after 1 s, a client after 2 s. No accept is mid-run (every connection lasts
    # the run), so the exhaustion cases are on writes and reads.
    front, store = "argv=em.rb front", "argv=em.rb store"
    c1, c2 = "argv=systems.py em-relay", "argv=em-client --name 2"
    return [
        ("store-reset", "reset", f"read:errno=ECONNRESET,{store},local-port={S},nth=350,count=1"),
        ("front-store-reset", "reset", f"read:errno=ECONNRESET,{front},peer-port={S},nth=350,count=1"),
        ("front-drops-client", "reset", f"writev:close,{front},local-port={F},nth=180,count=1"),
        ("store-drops", "reset", f"writev:close,{store},local-port={S},nth=180,count=1"),
        ("store-request-corrupt", "corrupt", f"read:corrupt=4,{store},local-port={S},nth=351,count=2"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=3,{c1},peer-port={F},nth=120,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=5,{c2},peer-port={F},nth=60,count=1"),
        ("store-short", "short", f"writev:short=6,{store},local-port={S},nth=180,count=1"),
        ("client1-short", "short", f"{RECV}:short=4,{c1},peer-port={F},nth=120,count=1"),
        ("store-slow", "delay", f"writev:delay=2s,{store},local-port={S},nth=180,count=1"),
        ("front-slow", "delay", f"writev:delay=3s,{front},local-port={F},nth=180,count=1"),
        ("store-killed", "kill", f"read:kill=SIGKILL,{store},local-port={S},nth=350"),
        ("front-killed", "kill", f"writev:kill=SIGKILL,{front},peer-port={S},nth=180"),
        ("store-stopped", "stop", f"writev:kill=SIGSTOP,{store},local-port={S},nth=180"),
        ("front-stopped", "stop", f"read:kill=SIGSTOP,{front},local-port={F},nth=360"),
        ("store-enospc", "exhaust", f"writev:errno=ENOSPC,{store},local-port={S},nth=180,count=1"),
        ("front-enobufs", "exhaust", f"writev:errno=ENOBUFS,{front},peer-port={S},nth=180,count=1"),
        ("front-eagain-storm", "exhaust", f"read:errno=EAGAIN,{front},peer-port={S},after=350,count=20"),
        ("client1-code", "code", f"py:sut.common:LineClient.line:raise=ConnectionResetError,nth=120,{c1}"),
        ("client2-code", "code", f"py:sut.common:LineClient.line:raise=TimeoutError,nth=60,{c2}"),
    ]
