"""Fault cases of the validation systems added on 2026-11-29 for validation run 14 (branch
loc-sysu). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 14 (`run.py --record-only` into
/tmp/val14/loc-sysu with the lead's build /tmp/rec13/culprit: 3 normal runs, the control and
every case per system, 79 recordings, none with lost entries), then checked with `run.py
--check --reuse` on those recordings (injection records and client summaries only, no
model, no ranking): every case of the three systems fired, each in one process (one
injection; the EAGAIN storms 25 of 25 in beanstalkd, 20 of 20 in the Thrift front and in
the Modbus device); no normal run or control holds an injection record, and every normal
run and control ended with all steps ok (beanstalkd-workers: producers 120/120 and 60/60
jobs; thrift-chain: clients 120/120 and 60/60 steps, front and store 180 puts and 180
gets; modbus-gateway: clients 120/120 and 60/60 rounds, the gateway 180 reads and 180
writes forwarded). Changed after a first check and recorded anew: beanstalkd-workers'
server-reply-enospc replaces server-write-enospc (an ENOSPC on beanstalkd's 4 000th write,
meant for the binlog, never fired: the tracer intercepts read and write on sockets only,
and beanstalkd makes about 915 on sockets; see `_beanstalkd`); and every recording of
thrift-chain was made again once its IDL was compiled by setup.sh into a fixed directory
instead of into each run's scratch directory (the generated code's file names, and a
compiler process, had differed from run to run; the SPECs and the outcomes were the same).
The final check ran on the recordings as they are. In 11 of the 67 cases no client saw a failure (the system
absorbed the fault; the reasons given are presumed, not read in the traces): in
beanstalkd-workers server-reserve-short (beanstalkd writes the rest of a job when the
socket takes it), the EAGAIN storm (beanstalkd reads again at the next event),
worker2-slow and worker2-stopped (the delayed or stopped worker held no job a producer
was waiting for, or its job came back in time: worker 1 did the rest), worker1-killed
(beanstalkd put the killed worker's job back in the ready queue; worker 2 did it); in
thrift-chain front-reply-short (Thrift's TSocket sends the rest); in modbus-gateway the
device's EAGAIN storm (asyncio reads again at the next event) and gateway-reply-short
(asyncio's transport sends the rest). In producer2-killed, and in thrift-chain's and
modbus-gateway's client2-killed, the killed client stops (no summary of its own), and no
other client sees a failure."""

from sut.common import ports


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"beanstalkd-workers": _beanstalkd(), "thrift-chain": _thrift(), "modbus-gateway": _modbus()}


def _beanstalkd():
    B = ports("beanstalkd-workers")[0]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; producers 120/120 and 60/60 jobs ok, workers 93 and 87 jobs).
    # beanstalkd (one process, one thread on epoll) reads the clients' commands with read
    # (1456 reads on local-port B: about 1 280 commands, a put, one or more
    # reserve-with-timeout and a delete a job for a producer, a reserve, a use, a put and a
    # delete for a worker) and answers with write (915 on B: the one-line answers) and
    # writev (362 on B: the RESERVED line with the job's body, 2 a job); which client a
    # given read comes from depends on timing, so no peer is named. Its other writes go to
    # the binlog (about 2 440 writes of 4 KB at start-up, the file made to its full size,
    # then 3 to 5 per put or delete), which the tracer neither records nor injects into
    # (read and write on sockets only): a first recording's ENOSPC on its 4 000th write of
    # any kind never fired, so the ENOSPC is on an answer to a client. Producer 1
    # (the launcher) receives and sends 366 times (libc recv and send, strace's recvfrom and
    # sendto; greenstalk reads through a buffered file on the socket), producer 2 183;
    # worker 1 376, worker 2 352 (the split between the workers shifts with timing by about
    # 10 %). `chain` runs once per job in a worker (about 90 each) and once per checked
    # result in a producer (120 and 60). Clients wait 3 s for beanstalkd, producers 3 s for
    # a result.
    bs = "exe=*beanstalkd"
    p1, p2 = "argv=systems.py beanstalkd-workers", "argv=bs-producer --name 2"
    w1, w2 = "argv=bs-worker --name 1", "argv=bs-worker --name 2"
    return [
        ("server-reset", "reset", f"read:errno=ECONNRESET,{bs},local-port={B},nth=730,count=1"),
        ("server-drops", "reset", f"read:close,{bs},local-port={B},nth=740,count=1"),
        ("server-corrupt", "corrupt", f"read:corrupt=3,{bs},local-port={B},nth=720,count=1"),
        ("server-reserve-short", "short", f"writev:short=20,{bs},local-port={B},nth=180,count=1"),
        ("server-slow", "delay", f"write:delay=4s,{bs},local-port={B},nth=460,count=1"),
        ("server-killed", "kill", f"read:kill=SIGKILL,{bs},local-port={B},nth=730"),
        ("server-stopped", "stop", f"read:kill=SIGSTOP,{bs},local-port={B},nth=730"),
        ("server-reply-enospc", "exhaust", f"write:errno=ENOSPC,{bs},local-port={B},nth=470,count=1"),
        ("server-eagain-storm", "exhaust", f"read:errno=EAGAIN,{bs},local-port={B},after=700,count=25"),
        ("worker1-reset", "reset", f"recv:errno=ECONNRESET,{w1},peer-port={B},nth=180,count=1"),
        ("worker2-corrupt", "corrupt", f"recv:corrupt=3,{w2},peer-port={B},nth=170,count=1"),
        ("worker2-slow", "delay", f"send:delay=4s,{w2},peer-port={B},nth=170,count=1"),
        ("worker1-killed", "kill", f"recv:kill=SIGKILL,{w1},peer-port={B},nth=180"),
        ("worker2-stopped", "stop", f"recv:kill=SIGSTOP,{w2},peer-port={B},nth=170"),
        ("worker1-enospc", "exhaust", f"send:errno=ENOSPC,{w1},peer-port={B},nth=180,count=1"),
        ("worker2-code", "code", f"py:sut.beanstalkd_workers:chain:raise=ValueError,nth=45,{w2}"),
        ("producer1-reset", "reset", f"recv:errno=ECONNRESET,{p1},peer-port={B},nth=183,count=1"),
        ("producer1-corrupt", "corrupt", f"recv:corrupt=4,{p1},peer-port={B},nth=185,count=1"),
        ("producer1-code", "code", f"py:sut.beanstalkd_workers:chain:raise=ValueError,nth=60,{p1}"),
        ("producer2-killed", "kill", f"send:kill=SIGKILL,{p2},peer-port={B},nth=90"),
        ("producer2-enobufs", "exhaust", f"send:errno=ENOBUFS,{p2},peer-port={B},nth=92,count=1"),
    ]


def _thrift():
    F, S = ports("thrift-chain")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; clients 120/120 and 60/60 steps ok; front and store 180 puts and 180
    # gets). Every process receives and sends with libc recv and send (strace's recvfrom and
    # sendto; TBufferedTransport reads up to 4 KB at a time, so a large value takes more
    # than one receive). The store (helper `thrift-store`, local-port S) receives 419 times
    # and sends 360 (one answer a call); it calls `digest` 180 times (once a put) and
    # TBinaryProtocol.readMessageBegin about 362 times (once a call, once at each
    # connection's end). The front (helper `thrift-front`) receives 419 times from the
    # clients (local-port F) and 416 from the store (peer-port S), sends 360 answers to the
    # clients and 360 calls to the store over its 2 pooled connections (its only 2
    # connects); it calls Pool.call 360 times. Client 1 (the launcher; its connects include
    # its probes while the front starts) receives 277 times and sends 240 on peer-port F;
    # client 2 (helper `thrift-client --name 2`) 139 and 120, and calls `digest` 180 times
    # (3 a step). The front waits 1.5 s for the store, a client 3 s for the front.
    st, fr = "argv=thrift-store", "argv=thrift-front"
    c1, c2 = "argv=systems.py thrift-chain", "argv=thrift-client --name 2"
    return [
        ("store-reset", "reset", f"recv:errno=ECONNRESET,{st},local-port={S},nth=210,count=1"),
        ("store-corrupt", "corrupt", f"recv:corrupt=4,{st},local-port={S},nth=212,count=1"),
        ("store-slow", "delay", f"send:delay=2s,{st},local-port={S},nth=180,count=1"),
        ("store-killed", "kill", f"recv:kill=SIGKILL,{st},local-port={S},nth=210"),
        ("store-stopped", "stop", f"recv:kill=SIGSTOP,{st},local-port={S},nth=210"),
        ("store-enospc", "exhaust", f"send:errno=ENOSPC,{st},local-port={S},nth=181,count=1"),
        ("store-code", "code", f"py:sut.thrift_chain:digest:raise=ValueError,nth=90,{st}"),
        ("store-protocol-code", "code",
         f"py:thrift.protocol.TBinaryProtocol:TBinaryProtocol.readMessageBegin:raise=MemoryError,nth=180,{st}"),
        ("front-client-reset", "reset", f"recv:errno=ECONNRESET,{fr},local-port={F},nth=210,count=1"),
        ("front-store-reset", "reset", f"recv:errno=ECONNRESET,{fr},peer-port={S},nth=208,count=1"),
        ("front-store-corrupt", "corrupt", f"recv:corrupt=3,{fr},peer-port={S},nth=208,count=1"),
        ("front-client-corrupt", "corrupt", f"recv:corrupt=2,{fr},local-port={F},nth=212,count=1"),
        ("front-reply-short", "short", f"send:short=6,{fr},local-port={F},nth=180,count=1"),
        ("front-slow", "delay", f"send:delay=4s,{fr},local-port={F},nth=182,count=1"),
        ("front-killed", "kill", f"recv:kill=SIGKILL,{fr},local-port={F},nth=210"),
        ("front-stopped", "stop", f"send:kill=SIGSTOP,{fr},peer-port={S},nth=180"),
        ("front-store-enobufs", "exhaust", f"send:errno=ENOBUFS,{fr},peer-port={S},nth=181,count=1"),
        ("front-eagain-storm", "exhaust", f"recv:errno=EAGAIN,{fr},local-port={F},after=200,count=20"),
        ("front-code", "code", f"py:sut.thrift_chain:Pool.call:raise=ConnectionResetError,nth=180,{fr}"),
        ("client1-reset", "reset", f"recv:errno=ECONNRESET,{c1},peer-port={F},nth=140,count=1"),
        ("client1-corrupt", "corrupt", f"recv:corrupt=3,{c1},peer-port={F},nth=142,count=1"),
        ("client2-killed", "kill", f"send:kill=SIGKILL,{c2},peer-port={F},nth=60"),
        ("client2-code", "code", f"py:sut.thrift_chain:digest:raise=ValueError,nth=90,{c2}"),
    ]


def _modbus():
    G, D = ports("modbus-gateway")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; clients 120/120 and 60/60 rounds ok, the gateway 180 reads and 180
    # writes forwarded). Every process receives and sends with libc recv and send (strace's
    # recvfrom and sendto); the asyncio servers' other receives and sends are on their event
    # loop's self-pipe (a socketpair, no port; its receives are the EAGAIN ones). A round is
    # a write of a block (function 16) and a read of it back (function 3), one request each.
    # The device (helper `modbus-device`, local-port D) receives 361 times (360 requests and
    # the end of the gateway's connection) and sends 360 answers; it calls
    # WriteMultipleRegistersRequest.datastore_update 180 times. The gateway (helper
    # `modbus-gw`) receives 363 times from the clients (local-port G) and 360 from the device
    # (peer-port D), sends 360 answers and 360 requests on its one connection to the device;
    # it calls Upstream.forward 360 times. Client 1 (the launcher; its connects include its
    # probes while the gateway starts) receives and sends 240 times on peer-port G; client 2
    # (helper `modbus-client --name 2`) 120 and 120, and calls `digest` 60 times (once a
    # round that went right). The gateway waits 1 s for the device, a client 2 s.
    dev, gw = "argv=modbus-device", "argv=modbus-gw"
    c1, c2 = "argv=systems.py modbus-gateway", "argv=modbus-client --name 2"
    return [
        ("device-reset", "reset", f"recv:errno=ECONNRESET,{dev},local-port={D},nth=180,count=1"),
        ("device-corrupt", "corrupt", f"recv:corrupt=3,{dev},local-port={D},nth=181,count=1"),
        ("device-slow", "delay", f"send:delay=1500ms,{dev},local-port={D},nth=180,count=1"),
        ("device-killed", "kill", f"recv:kill=SIGKILL,{dev},local-port={D},nth=180"),
        ("device-stopped", "stop", f"recv:kill=SIGSTOP,{dev},local-port={D},nth=180"),
        ("device-enobufs", "exhaust", f"send:errno=ENOBUFS,{dev},local-port={D},nth=181,count=1"),
        ("device-eagain-storm", "exhaust", f"recv:errno=EAGAIN,{dev},local-port={D},after=170,count=20"),
        ("device-code", "code", f"py:pymodbus.pdu.register_message:WriteMultipleRegistersRequest.datastore_update"
                                f":raise=MemoryError,nth=90,{dev}"),
        ("gateway-client-reset", "reset", f"recv:errno=ECONNRESET,{gw},local-port={G},nth=180,count=1"),
        ("gateway-device-reset", "reset", f"recv:errno=ECONNRESET,{gw},peer-port={D},nth=180,count=1"),
        ("gateway-device-corrupt", "corrupt", f"recv:corrupt=4,{gw},peer-port={D},nth=182,count=1"),
        ("gateway-client-corrupt", "corrupt", f"recv:corrupt=2,{gw},local-port={G},nth=184,count=1"),
        ("gateway-reply-short", "short", f"send:short=5,{gw},local-port={G},nth=180,count=1"),
        ("gateway-slow", "delay", f"send:delay=3s,{gw},local-port={G},nth=182,count=1"),
        ("gateway-killed", "kill", f"recv:kill=SIGKILL,{gw},local-port={G},nth=180"),
        ("gateway-stopped", "stop", f"send:kill=SIGSTOP,{gw},peer-port={D},nth=180"),
        ("gateway-device-enospc", "exhaust", f"send:errno=ENOSPC,{gw},peer-port={D},nth=181,count=1"),
        ("gateway-code", "code", f"py:sut.modbus_gateway:Upstream.forward:raise=ConnectionResetError,nth=180,{gw}"),
        ("client1-reset", "reset", f"recv:errno=ECONNRESET,{c1},peer-port={G},nth=120,count=1"),
        ("client1-corrupt", "corrupt", f"recv:corrupt=3,{c1},peer-port={G},nth=122,count=1"),
        ("client1-enobufs", "exhaust", f"send:errno=ENOBUFS,{c1},peer-port={G},nth=121,count=1"),
        ("client2-killed", "kill", f"send:kill=SIGKILL,{c2},peer-port={G},nth=60"),
        ("client2-code", "code", f"py:sut.modbus_gateway:digest:raise=ValueError,nth=30,{c2}"),
    ]
