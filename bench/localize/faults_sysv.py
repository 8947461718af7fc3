"""Fault cases of the validation systems added on 2026-11-29 for validation run 14 (branch
loc-sysv). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 14 (`run.py --record-only` into /tmp/val14/loc-sysv
with the lead's build /tmp/rec13/culprit: 3 normal runs, the control and every case per
system, 80 recordings, none with lost entries), then checked with `run.py --check --reuse`
on those recordings (injection records and client summaries only, no model, no ranking):
every case of the three systems fired (68 of 68), each in one process (one injection; the
EAGAIN storms 20 of 20 in the Netty backend and in the DRb store, 13 of 20 in the XRootD
redirector, which drops a client's connection on an EAGAIN and so made only 13 more
receives on its clients' connections); no normal run or control holds an injection record,
and every normal run and control ended with all steps ok (xrootd-cluster 10/10 and 9/9
steps; netty-chain 120/120 and 60/60, 360 requests served by each JVM; drb-chain 120/120
and 60/60, 360 calls forwarded). xrootd-cluster was recorded twice: in the first recording
(of which only injection records and client summaries were looked at) driver1-code's
ValueError from Driver.fetch ended the launcher (its step loop caught no exception of the
driver's own code), so a step's exception is now counted as a failed step and the driver
goes on, and the whole system was recorded again. Cases in which no client saw a failure
(the system absorbed the fault; the reasons given are presumed, not read in the traces): in
xrootd-cluster ds1-client-reset, mgr-request-corrupt and cmsd-corrupt (XRootD's client and
the cmsds recover or retry), ds1-short and put-short (the rest is written), both EMFILE
accepts (the connection waits in the backlog for the next accept) and ds2-enospc (the
client recovered the write on the data server); in netty-chain backend-short and front-short
(NIO writes the rest), front-accept-emfile (Netty logs the failed accept and accepts on the
next select) and backend-eagain-storm (a read of 0 bytes, and back to epoll); in drb-chain
store-short and client2-short (Ruby's IO writes and reads the rest), front-accept-emfile
(Ruby's accept collects garbage and tries again on EMFILE) and store-eagain-storm (the
thread polls and reads again): 16 of 68. In netty-chain's and drb-chain's client2-killed
only the killed client lost its steps (it left no summary); the other client saw nothing."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"xrootd-cluster": _xrootd(), "netty-chain": _netty(), "drb-chain": _drb()}


def _xrootd():
    M, CMS, X1, X2 = ports("xrootd-cluster")[:4]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; slowed by strace, both drivers stopped at the workload deadline
    # after 10 steps, all ok: 20 uploads, 38 downloads, 20 stats and 4 listings, 82
    # connections to the redirector; the drivers now make 10 and 9 steps, which runs under
    # the tracer finish within the deadline). Per run: the manager's xrootd (`mgr.cfg`)
    # accepts 84 connections (the probe and every xrdcp/xrdfs process), receives 663 times
    # from its clients (libc recv: strace's recvfrom; 82 reads besides) and writes 290 times
    # (writev), and towards its cmsd (peer-port CMS) receives 257 times and writes 127; the
    # manager's cmsd receives 310 times on its port (from the redirector and the two data
    # servers' cmsds) and writes 153 (writev); each data server's cmsd receives 46 times
    # from the manager's cmsd (its queries, status) and writes 13; each data server's xrootd
    # accepts 45 connections, receives 383 times (43 reads) and writes 150 times (writev, 82
    # writes besides). Every command is a process of its own named by its local file
    # (`put-D-NNNN`, `get-D-NNNN`, `old-D-NNNN`: driver D's step NNNN): an upload reads its
    # sockets 23 times (12 from the redirector, then 11 from the data server) and sends 26
    # times (21 to the data server: the file's data), a download reads 19 times (8, then 11)
    # and sends 8. The launcher calls Driver.fetch 19 times, driver 2 Driver.cmd about 37
    # times (put, get, stat, the previous file, a listing every fourth step). A client gives
    # up on a request after 5 s, its driver kills it after 8 s. The SPECs are at about 40 %
    # of these counts (a run under the tracer, on a loaded machine, makes fewer steps) and
    # on steps 3 to 5.
    mgr, cmsd = "exe=xrootd,argv=mgr.cfg", "exe=cmsd,argv=mgr.cfg"
    ds1, ds2 = "exe=xrootd,argv=ds1.cfg", "exe=xrootd,argv=ds2.cfg"
    c1, c2 = "argv=systems.py xrootd-cluster", "argv=xrootd-driver --name 2"
    return [
        ("mgr-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{mgr},local-port={M},nth=270,count=1"),
        ("mgr-cmsd-reset", "reset", f"{RECV}:errno=ECONNRESET,{mgr},peer-port={CMS},nth=105,count=1"),
        ("cmsd-reset", "reset", f"{RECV}:errno=ECONNRESET,{cmsd},local-port={CMS},nth=130,count=1"),
        ("ds1-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{ds1},local-port={X1},nth=150,count=1"),
        ("mgr-request-corrupt", "corrupt", f"{RECV}:corrupt=4,{mgr},local-port={M},nth=272,count=1"),
        ("cmsd-corrupt", "corrupt", f"{RECV}:corrupt=3,{cmsd},local-port={CMS},nth=132,count=1"),
        ("ds2-request-corrupt", "corrupt", f"{RECV}:corrupt=4,{ds2},local-port={X2},nth=152,count=1"),
        ("get-data-corrupt", "corrupt", "read:corrupt=8,argv=get-1-0004,nth=15,count=1"),
        ("ds1-short", "short", f"writev:short=10,{ds1},local-port={X1},nth=60,count=1"),
        ("put-short", "short", f"{SEND}:short=100,argv=put-2-0004,nth=12,count=1"),
        ("ds1-slow", "delay", f"writev:delay=6s,{ds1},local-port={X1},nth=62,count=1"),
        ("cmsd-slow", "delay", f"writev:delay=3s,{cmsd},local-port={CMS},nth=62,count=1"),
        ("ds2-killed", "kill", f"{RECV}:kill=SIGKILL,{ds2},local-port={X2},nth=150"),
        ("mgr-killed", "kill", f"{RECV}:kill=SIGKILL,{mgr},local-port={M},nth=280"),
        ("ds1-cmsd-killed", "kill", f"{RECV}:kill=SIGKILL,exe=cmsd,argv=ds1.cfg,peer-port={CMS},nth=20"),
        ("get-killed", "kill", "read:kill=SIGKILL,argv=get-2-0005,nth=12"),
        ("mgr-stopped", "stop", f"{RECV}:kill=SIGSTOP,{mgr},local-port={M},nth=275"),
        ("ds2-cmsd-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=cmsd,argv=ds2.cfg,peer-port={CMS},nth=20"),
        ("ds1-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{ds1},local-port={X1},nth=18,count=1"),
        ("mgr-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{mgr},local-port={M},nth=35,count=1"),
        ("ds2-enospc", "exhaust", f"writev:errno=ENOSPC,{ds2},local-port={X2},nth=61,count=1"),
        ("mgr-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{mgr},local-port={M},after=260,count=20"),
        ("driver1-code", "code", f"py:sut.xrootd_cluster:Driver.fetch:raise=ValueError,nth=8,{c1}"),
        ("driver2-code", "code", f"py:sut.xrootd_cluster:Driver.cmd:raise=TimeoutError,nth=20,{c2}"),
    ]


def _netty():
    F, B = ports("netty-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; 120/120 and 60/60 steps ok, 360 requests). Both JVMs read and
    # write through the JDK's NIO (libc read; writev for Netty's gathering writes: a frame's
    # length and body, an HTTP response's head and body), their event-loop threads sharing
    # the process's counters. The backend (`NettyChain backend`) accepts 3 connections (the
    # probe and the front's pooled connections, all at the start), reads 407 times and
    # writes 360 times (writev). The front (`NettyChain front`) reads 406 times and writes
    # 360 times (writev) towards the backend (peer-port B), reads 513 times from its clients
    # (local-port F) and answers with 352 writevs and 9 writes; it accepts 4 connections:
    # the two probes, the launcher's, and client 2's, which starts 1.5 s later (mid-run).
    # The launcher receives 283 times (libc recv: strace's recvfrom) and sends 361, client 2
    # receives 141 times and sends 180; HTTPResponse.read runs 240 times in the launcher,
    # Client.get 60 times in client 2. The front gives up on the backend after 1 s, a
    # client on the front after 2 s. The SPECs are at about 45 % of a whole run's calls.
    be, fe = "exe=*java,argv=NettyChain backend", "exe=*java,argv=NettyChain front"
    c1, c2 = "argv=systems.py netty-chain", "argv=netty-client --name 2"
    return [
        ("backend-reset", "reset", f"read:errno=ECONNRESET,{be},local-port={B},nth=180,count=1"),
        ("backend-drops", "reset", f"read:close,{be},local-port={B},nth=185,count=1"),
        ("front-backend-reset", "reset", f"read:errno=ECONNRESET,{fe},peer-port={B},nth=180,count=1"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{fe},local-port={F},nth=230,count=1"),
        ("backend-request-corrupt", "corrupt", f"read:corrupt=3,{be},local-port={B},nth=182,count=1"),
        ("front-answer-corrupt", "corrupt", f"read:corrupt=4,{fe},peer-port={B},nth=182,count=1"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},nth=140,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=6,{c2},nth=70,count=1"),
        ("backend-short", "short", f"writev:short=5,{be},local-port={B},nth=160,count=1"),
        ("front-short", "short", f"writev:short=10,{fe},local-port={F},nth=160,count=1"),
        ("backend-slow", "delay", f"writev:delay=2s,{be},local-port={B},nth=162,count=1"),
        ("front-slow", "delay", f"writev:delay=3s,{fe},local-port={F},nth=165,count=1"),
        ("backend-killed", "kill", f"read:kill=SIGKILL,{be},local-port={B},nth=185"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{fe},local-port={F},nth=235"),
        ("client2-killed", "kill", f"{SEND}:kill=SIGKILL,{c2},nth=90"),
        ("backend-stopped", "stop", f"writev:kill=SIGSTOP,{be},local-port={B},nth=165"),
        ("front-stopped", "stop", f"read:kill=SIGSTOP,{fe},peer-port={B},nth=190"),
        ("front-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{fe},local-port={F},nth=4,count=1"),
        ("backend-enospc", "exhaust", f"writev:errno=ENOSPC,{be},local-port={B},nth=163,count=1"),
        ("front-enobufs", "exhaust", f"writev:errno=ENOBUFS,{fe},local-port={F},nth=163,count=1"),
        ("backend-eagain-storm", "exhaust", f"read:errno=EAGAIN,{be},local-port={B},after=175,count=20"),
        ("client1-code", "code", f"py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=110,{c1}"),
        ("client2-code", "code", f"py:sut.netty_chain:Client.get:raise=TimeoutError,nth=28,{c2}"),
    ]


def _drb():
    F, S = ports("drb-chain")[:2]
    # Counted with `strace -f -ff -yy` on a run without the tracer (no recording of this
    # system was looked at; 120/120 and 60/60 steps ok, 360 calls forwarded). Every
    # process is Ruby MRI (libc read and write on non-blocking sockets: a read that finds
    # nothing fails with EAGAIN and the thread polls; DRb reads a request or answer in
    # several reads of its length-prefixed marshalled parts). The store (`drb.rb store`)
    # accepts 3 connections (the probe and the front's pooled ones), reads 4321 times on
    # them (360 of them EAGAIN) and writes 360 times. The front (`drb.rb front`) reads 4323
    # times from its clients (360 EAGAIN) and writes 360 times to them (local-port F),
    # reads 1794 times from the store (354 EAGAIN) and writes 360 times to it (peer-port
    # S); it accepts 3 connections: the probe, client 1's, and client 2's, started 1.5 s
    # later (mid-run). Client 1 (`drb.rb client 1`) reads 1200 times and writes 240, client
    # 2 reads 600 times and writes 120. The front gives up on the store after 1 s, a client
    # on the front after 2 s. No process of this system is Python (no `code` case). The
    # SPECs are at about 45 % of a whole run's calls.
    store, front = "argv=drb.rb store", "argv=drb.rb front"
    c1, c2 = "argv=drb.rb client 1", "argv=drb.rb client 2"
    return [
        ("store-reset", "reset", f"read:errno=ECONNRESET,{store},local-port={S},nth=1900,count=1"),
        ("store-drops", "reset", f"read:close,{store},local-port={S},nth=1950,count=1"),
        ("front-store-reset", "reset", f"read:errno=ECONNRESET,{front},peer-port={S},nth=800,count=1"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{front},local-port={F},nth=1900,count=1"),
        ("client2-reset", "reset", f"read:errno=ECONNRESET,{c2},nth=270,count=1"),
        ("store-request-corrupt", "corrupt", f"read:corrupt=4,{store},local-port={S},nth=1902,count=1"),
        ("front-answer-corrupt", "corrupt", f"read:corrupt=4,{front},peer-port={S},nth=801,count=1"),
        ("client1-corrupt", "corrupt", f"read:corrupt=4,{c1},nth=540,count=1"),
        ("store-short", "short", f"write:short=5,{store},local-port={S},nth=160,count=1"),
        ("client2-short", "short", f"read:short=3,{c2},nth=272,count=1"),
        ("store-slow", "delay", f"write:delay=2s,{store},local-port={S},nth=162,count=1"),
        ("front-slow", "delay", f"write:delay=3s,{front},local-port={F},nth=165,count=1"),
        ("store-killed", "kill", f"read:kill=SIGKILL,{store},local-port={S},nth=1910"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{front},local-port={F},nth=1960"),
        ("client2-killed", "kill", f"write:kill=SIGKILL,{c2},nth=55"),
        ("store-stopped", "stop", f"write:kill=SIGSTOP,{store},local-port={S},nth=166"),
        ("front-stopped", "stop", f"write:kill=SIGSTOP,{front},peer-port={S},nth=170"),
        ("front-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=3,count=1"),
        ("store-enospc", "exhaust", f"write:errno=ENOSPC,{store},local-port={S},nth=163,count=1"),
        ("front-enobufs", "exhaust", f"write:errno=ENOBUFS,{front},local-port={F},nth=164,count=1"),
        ("store-eagain-storm", "exhaust", f"read:errno=EAGAIN,{store},local-port={S},after=1890,count=20"),
    ]
