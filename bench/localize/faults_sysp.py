"""Fault cases of the validation systems added on 2026-11-29 for validation run 11 (branch
loc-sysp). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 11 (`run.py --record-only` into
/tmp/val11/loc-sysp with the lead's build /tmp/rec12/culprit: 3 normal runs, the control and
every case per system), then checked with `run.py --check --reuse` on those recordings
(injection records and client summaries only, no model, no ranking). Every case of the
three systems fired, once (the EAGAIN storms 24 of 25 in trafficserver-cache, 20 of 20 in
distcc-farm); no normal run or control holds an injection record, and every normal run and
control ended with all steps ok (120/120 + 150/150 requests; 30/30 + 30/30 compiles; 60/60
pushes, every round of the mirror and the reader, 180 of 180 files whole at the reader).
Re-recorded after a first check: distcc-farm whole (a stopped compile child outlived its
daemon and held two recordings to the 75-s timeout, until the launcher killed the daemons'
process groups; with `DISTCC_BACKOFF_PERIOD=0` the clients retried a failed daemon without
end, so distcc's default back-off was restored; its EMFILE on daemon 2's accept fired twice,
the child that replaced the one that exited reaching the same count, and became daemon 1's
at the 24th accept), trafficserver-cache's reply-corrupt and request-corrupt (at the 165th
and 300th receives they fired but no client saw a failure: most likely receives that found
nothing, as about 45 % of them do; the trace was not read) and rsyncd-mirror's three
corruptions (on the daemon's greeting they garbled a checksum name that the clients
ignore). Cases in which no client saw a failure (the system absorbed the fault; the reasons
given are presumed, not read in the traces): trafficserver-cache's reply-short and
forward-short (Traffic Server moves the rest on its next call); rsyncd-mirror's
writer-short and mirror-push-short (rsync writes the rest) and both EMFILE accepts (the
daemon accepts the connection on its next call); and 19 of
distcc-farm's 22: the distcc client tries a compile that failed on one daemon again on the
other and leaves the failed daemon for the rest of the run (back-off), so only the killed
client and the two code faults made a compile fail."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"trafficserver-cache": _ats(), "distcc-farm": _distcc(), "rsyncd-mirror": _rsync()}


def _ats():
    F, O1, O2 = ports("trafficserver-cache")[:3]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 120/120 and 150/150 requests ok). traffic_server is one process whose
    # two network threads (ET_NET 0 and 1) share the counters; it receives and sends with
    # recvmsg/sendmsg. Per run: on the clients' side (local-port F) about 610 recvmsg
    # (335 with data, the others EAGAIN: which one holds data shifts with timing) and 353
    # sendmsg; on its keep-alive connections to origin 1 (peer-port O1) about 333 recvmsg
    # and 154 sendmsg, to origin 2 about 315 and 152; about 1260 epoll_wait; 4 accept4
    # (the launcher's probe and the two clients, at the start: no accept SPEC is mid-run).
    # Each origin (http.server, a thread per connection, one process) receives about 155
    # requests (libc recv, strace's recvfrom) and sends about 238 times (send); origin 1
    # calls `body` about 87 times (every GET but the 304s). The launcher receives about
    # 148 times and reads 120 responses (HTTPResponse.read); client 2 receives about 202
    # times, sends 188 and calls HTTPConnection.getresponse 150 times. Traffic Server gives
    # up on an origin after 2 s, a client on Traffic Server after 3 s.
    ats = "exe=traffic_server"
    o1, o2 = "argv=ats-origin --name 1", "argv=ats-origin --name 2"
    c1, c2 = "argv=systems.py trafficserver-cache", "argv=ats-client --name 2"
    return [
        ("origin1-reset", "reset", f"recvmsg:errno=ECONNRESET,{ats},peer-port={O1},nth=165,count=1"),
        ("client-reset", "reset", f"recvmsg:errno=ECONNRESET,{ats},local-port={F},nth=300,count=1"),
        ("origin2-drops", "reset", f"{SEND}:close,{o2},local-port={O2},nth=118,count=1"),
        ("reply-corrupt", "corrupt", f"recvmsg:corrupt=4,{ats},peer-port={O1},nth=166,count=1"),
        ("request-corrupt", "corrupt", f"recvmsg:corrupt=3,{ats},local-port={F},nth=301,count=1"),
        ("origin-request-corrupt", "corrupt", f"{RECV}:corrupt=3,{o2},local-port={O2},nth=77,count=1"),
        ("client-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=100,count=1"),
        ("reply-short", "short", f"recvmsg:short=10,{ats},peer-port={O2},nth=160,count=1"),
        ("forward-short", "short", f"sendmsg:short=30,{ats},peer-port={O2},nth=76,count=1"),
        ("origin1-slow", "delay", f"{SEND}:delay=3s,{o1},local-port={O1},nth=120,count=1"),
        ("ats-slow", "delay", f"sendmsg:delay=4s,{ats},local-port={F},nth=175,count=1"),
        ("ats-killed", "kill", f"recvmsg:kill=SIGKILL,{ats},local-port={F},nth=300"),
        ("origin2-killed", "kill", f"{RECV}:kill=SIGKILL,{o2},local-port={O2},nth=77"),
        ("ats-stopped", "stop", f"sendmsg:kill=SIGSTOP,{ats},peer-port={O1},nth=77"),
        ("origin1-stopped", "stop", f"{RECV}:kill=SIGSTOP,{o1},local-port={O1},nth=78"),
        ("ats-enobufs", "exhaust", f"sendmsg:errno=ENOBUFS,{ats},peer-port={O2},nth=76,count=1"),
        ("origin1-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{o1},local-port={O1},nth=120,count=1"),
        ("client2-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{c2},nth=94,count=1"),
        ("ats-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{ats},local-port={F},after=290,count=25"),
        ("client-code", "code", f"py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=60,{c1}"),
        ("client2-code", "code", f"py:http.client:HTTPConnection.getresponse:raise=TimeoutError,nth=75,{c2}"),
        ("origin-code", "code", f"py:sut.trafficserver_cache:body:raise=ValueError,nth=45,{o1}"),
    ]


def _distcc():
    D1, D2 = ports("distcc-farm")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 40 compiles a client then, slowed by strace to 31 + 33), and from the
    # daemons' own logs of untraced and traced runs (a client takes daemon 1 whenever it
    # is free: daemon 1 serves about two thirds of the jobs). Each daemon's work is done by
    # its one preforked child (the parent only forks it), which accepts a job, reads it
    # (about 15.6 read() calls a job: tokens, the preprocessed source), runs gcc and writes
    # the answer (5 write() calls a job); it is replaced after 50 jobs, and when it dies,
    # and the new child counts from zero, so a SPEC that ends a child lies past half of
    # what that daemon serves in a run (the new child does not reach it again). With 30
    # compiles a client (the suite's runs) daemon 1's child serves about 40 jobs (about 620
    # reads, 200 writes), daemon 2's about 22 (340 reads, 110 writes, 23 accepts, the probe
    # included). Each compile is one `distcc` process, named by its source in its command
    # line (c1-0014.c: the launcher's 15th): it connects once (one socket, one connect),
    # writes about 15 times and reads 7 times (one EAGAIN). The launcher calls `source` 30
    # times, client 2 `symbols` 30 times. A client gives up on a daemon after 3 s of
    # silence.
    dd = "exe=distccd"
    return [
        ("d1-reset", "reset", f"read:errno=ECONNRESET,{dd},local-port={D1},nth=300,count=1"),
        ("d2-drops", "reset", f"read:close,{dd},local-port={D2},nth=180,count=1"),
        ("client-reset", "reset", "read:errno=ECONNRESET,exe=distcc,argv=c1-0014.c,nth=4,count=1"),
        ("d1-source-corrupt", "corrupt", f"read:corrupt=4,{dd},local-port={D1},nth=310,count=1"),
        ("d2-source-corrupt", "corrupt", f"read:corrupt=16,{dd},local-port={D2},nth=190,count=1"),
        ("client-object-corrupt", "corrupt", "read:corrupt=8,exe=distcc,argv=c2-0015.c,nth=5,count=1"),
        ("d1-short", "short", f"write:short=10,{dd},local-port={D1},nth=100,count=1"),
        ("client-short", "short", "write:short=20,exe=distcc,argv=c1-0016.c,nth=8,count=1"),
        ("d2-slow", "delay", f"write:delay=4s,{dd},local-port={D2},nth=55,count=1"),
        ("d1-slow", "delay", f"read:delay=4s,{dd},local-port={D1},nth=300,count=1"),
        ("d1-killed", "kill", f"read:kill=SIGKILL,{dd},local-port={D1},nth=450"),
        ("d2-killed", "kill", f"write:kill=SIGKILL,{dd},local-port={D2},nth=60"),
        ("client-killed", "kill", "write:kill=SIGKILL,exe=distcc,argv=c2-0016.c,nth=8"),
        ("d1-stopped", "stop", f"read:kill=SIGSTOP,{dd},local-port={D1},nth=300"),
        ("d2-stopped", "stop", f"accept:kill=SIGSTOP,{dd},local-port={D2},nth=12"),
        ("d1-accept-emfile", "exhaust", f"accept:errno=EMFILE,{dd},local-port={D1},nth=24,count=1"),
        ("d1-enobufs", "exhaust", f"write:errno=ENOBUFS,{dd},local-port={D1},nth=100,count=1"),
        ("client-socket-emfile", "exhaust", "socket:errno=EMFILE,exe=distcc,argv=c1-0017.c,nth=1,count=1"),
        ("client-connect-eaddrnotavail", "exhaust",
         "connect:errno=EADDRNOTAVAIL,exe=distcc,argv=c2-0017.c,nth=1,count=1"),
        ("d2-eagain-storm", "exhaust", f"read:errno=EAGAIN,{dd},local-port={D2},after=160,count=20"),
        ("launcher-code", "code", "py:sut.distcc_farm:source:raise=ValueError,nth=15,argv=systems.py distcc-farm"),
        ("client2-code", "code", "py:sut.distcc_farm:symbols:raise=TimeoutError,nth=15,argv=distcc-client --name 2"),
    ]


def _rsync():
    A, B = ports("rsyncd-mirror")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; slowed by strace, the writer made 53 of its 60 rounds, the mirror 29,
    # the reader 46, all ok). Each daemon's listening parent polls and accepts (A: 83
    # accepts and 167 polls a run: the writer's and the mirror's connections and the probe;
    # B: 76 and 153); every connection is served by a forked child (and, for a push, its
    # forked receiver), which counts from zero and does the same calls as every other:
    # no SPEC can name one of them, so the daemons' cases are on their parents' accept
    # (the children poll as the parent does, but never accept), told apart by their
    # configuration files. Every rsync command is a process of its own, named by
    # its log file (writer-push-r0030.log: the writer's 30th push): a push (writer, mirror
    # to B) reads its socket about 63 times (the greeting and the module's answer a byte at
    # a time, then the protocol) and writes 20 times; a pull (mirror from A, reader) reads
    # about 60 times and writes 22 before it forks its receiver (4 to 7 reads, all of them
    # also reached by the parent first: no SPEC names it). The daemon's greeting (its
    # version and checksum names) and its answer to the module take the first 53 reads, a
    # byte each; the corruptions are on the protocol after them (a first recording's, on
    # the 32nd and 40th reads, garbled a checksum name the client ignores). The launcher calls `push` 60
    # times, the mirror Mirror.push about 30, the reader `check` once a file (about 180).
    # A client gives up after 3 s of silence, a daemon after 5 s.
    da, db = "exe=rsync,argv=rsyncd-a.conf", "exe=rsync,argv=rsyncd-b.conf"

    def cmd(who, r):
        return f"exe=rsync,argv={who}-r{r:04}.log"

    return [
        ("writer-reset", "reset", f"read:errno=ECONNRESET,{cmd('writer-push', 30)},peer-port={A},nth=32,count=1"),
        ("mirror-pull-drops", "reset", f"read:close,{cmd('mirror-pull', 15)},peer-port={A},nth=30,count=1"),
        ("reader-reset", "reset", f"read:errno=ECONNRESET,{cmd('reader-pull', 23)},peer-port={B},nth=30,count=1"),
        ("writer-protocol-corrupt", "corrupt", f"read:corrupt=4,{cmd('writer-push', 31)},peer-port={A},nth=60,count=1"),
        ("mirror-pull-corrupt", "corrupt", f"read:corrupt=4,{cmd('mirror-pull', 16)},peer-port={A},nth=56,count=1"),
        ("reader-corrupt", "corrupt", f"read:corrupt=3,{cmd('reader-pull', 24)},peer-port={B},nth=57,count=1"),
        ("writer-short", "short", f"write:short=5,{cmd('writer-push', 32)},peer-port={A},nth=10,count=1"),
        ("mirror-push-short", "short", f"write:short=3,{cmd('mirror-push', 16)},peer-port={B},nth=10,count=1"),
        ("writer-slow", "delay", f"write:delay=6s,{cmd('writer-push', 33)},peer-port={A},nth=10,count=1"),
        ("mirror-pull-slow", "delay", f"write:delay=6s,{cmd('mirror-pull', 17)},peer-port={A},nth=11,count=1"),
        ("writer-killed", "kill", f"write:kill=SIGKILL,{cmd('writer-push', 34)},peer-port={A},nth=10"),
        ("mirror-pull-killed", "kill", f"read:kill=SIGKILL,{cmd('mirror-pull', 18)},peer-port={A},nth=30"),
        ("a-listener-killed", "kill", f"accept:kill=SIGKILL,{da},local-port={A},nth=42"),
        ("b-listener-killed", "kill", f"accept:kill=SIGKILL,{db},local-port={B},nth=38"),
        ("a-listener-stopped", "stop", f"accept:kill=SIGSTOP,{da},local-port={A},nth=44"),
        ("b-listener-stopped", "stop", f"accept:kill=SIGSTOP,{db},local-port={B},nth=40"),
        ("a-accept-emfile", "exhaust", f"accept:errno=EMFILE,{da},local-port={A},nth=42,count=1"),
        ("b-accept-emfile", "exhaust", f"accept:errno=EMFILE,{db},local-port={B},nth=38,count=1"),
        ("writer-enobufs", "exhaust", f"write:errno=ENOBUFS,{cmd('writer-push', 35)},peer-port={A},nth=10,count=1"),
        ("reader-socket-emfile", "exhaust", f"socket:errno=EMFILE,{cmd('reader-pull', 26)},nth=1,count=1"),
        ("mirror-push-eagain-storm", "exhaust",
         f"read:errno=EAGAIN,{cmd('mirror-push', 19)},peer-port={B},after=30,count=20"),
        ("writer-code", "code", "py:sut.rsyncd_mirror:push:raise=OSError,nth=30,argv=systems.py rsyncd-mirror"),
        ("mirror-code", "code", "py:sut.rsyncd_mirror:Mirror.push:raise=TimeoutError,nth=15,argv=rsync-mirror"),
        ("reader-code", "code", "py:sut.rsyncd_mirror:check:raise=ValueError,nth=90,argv=rsync-reader"),
    ]
