"""Fault cases of the validation systems added on 2026-11-29 for validation run 13 (branch
loc-syst). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 13 (`run.py --record-only` into
/tmp/val13/loc-syst with the lead's build /tmp/rec12/culprit: 3 normal runs, the control and
every case per system, 81 recordings, none with lost entries), then checked with `run.py
--check --reuse` on those recordings (injection records and client summaries only, no
model, no ranking): every case of the three systems fired (69 of 69), each in one process
(one injection; the EAGAIN storms 20 of 20 in git daemon B's listener, in the HSQLDB
server and in the SFTP server); no normal run or control holds an injection record, and
every normal run and control ended with all steps ok (git-daemon-mirror 30/30 pushes, every
round of the mirror (20 to 22) and of the reader (31 or 32 fetches), 90 of 90 files whole
at the reader; hsqldb-front 120/120 and 60/60 steps, 360 requests served by the front;
paramiko-sftp 60/60 and 30/30 steps). A first recording was stopped and made again after
three changes to the systems (of it only injection records and client summaries were
looked at): hsqldb-front's front gave up on its first JDBC connection after 1 s on a
machine with a load average of 20 and exited before it listened (the control and
db-reset), so its start-up now allows 20 s a call and runs both statements once on each
pooled connection; git-daemon-mirror's b-stopped ran into run.py's 75-s timeout, because
`git daemon` runs git-daemon as a child and waits for it: the launcher killed the waiting
wrapper and the stopped daemon stayed (the launcher now starts /usr/lib/git-core/git-daemon
itself); and git-daemon-mirror's normal runs ended at the workload deadline after 43 to 58
of 60 writer rounds (all ok), so the writer now makes 30 rounds. Cases in which no client
saw a failure (the system absorbed the fault; the reasons given are presumed, not read in
the traces): in git-daemon-mirror reader-fetch-corrupt (the garbled read did not make
that fetch fail), writer-push-short and reader-fetch-short (git writes and reads the rest),
mirror-fetch-slow (that round took 7 s longer; A's upload-pack was not waiting on that
write) and b-eagain-storm (git daemon goes back to poll on EAGAIN); in hsqldb-front db-short
and front-short (the JVMs write the rest) and db-eagain-storm (a blocking Java socket polls
and reads again); in paramiko-sftp server-store-short and client1-short (sendall and
paramiko's reads move the rest), both EMFILE accepts (the connection waits in the backlog
for the next accept) and server-eagain-storm (a Python socket with a timeout polls and
receives again): 13 of 69. In hsqldb-front's and paramiko-sftp's client2-killed only the
killed client lost its steps (it left no summary); the other client saw nothing."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"git-daemon-mirror": _git(), "hsqldb-front": _hsqldb(), "paramiko-sftp": _sftp()}


def _git():
    A, B = ports("git-daemon-mirror")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; slowed by strace, the writer made 20 of its 60 rounds, the mirror 17,
    # the reader 29, all ok), and the rounds from a run under the tracer (60, about 40 and
    # about 57; untraced 60, 37 and 51). Each daemon's listening parent polls and accepts
    # (two polls an accept): A accepts the writer's pushes and the mirror's fetches (about
    # 100 a run under the tracer, with the probe), B the mirror's pushes and the reader's
    # fetches (about 97). Every connection is served by a forked `git-daemon --serve` child
    # (2 reads of the request) that runs `git upload-pack --strict --timeout=5|6 .` or `git
    # receive-pack .` (which runs unpack-objects), each counting from zero and doing the
    # same calls as every other: no SPEC can name one of them, so the daemons' cases are on
    # their parents' accept and poll (the children never accept or poll), told apart by
    # their ports (`--port=` in their command lines). git daemon dies at an accept that
    # fails with anything but EAGAIN, EINTR or ECONNABORTED. Every client command is a
    # process of its own named by its `-c localize.cmd=` (writer-push-r0030: the writer's
    # 30th push): a push reads its socket 7 times (the refs advertised, the status report)
    # and writes 4 (the request, the commands; its pack-objects child writes the pack), a
    # reader's fetch reads 18 times and writes 18, a mirror's fetch reads 57 times at round
    # 10 (more later: its negotiation grows with the history) and writes 13. The launcher
    # calls `push` 60 times, the mirror `Mirror.round` about 40, the reader `whole` 180
    # times (once per new file). A git:// client has no timeout of its own: its driver
    # kills it after 8 s; a daemon's child gives up on a request that does not come within
    # 3 s (`--init-timeout`), its upload-pack on a client silent for 5 s (A) or 6 s (B).
    # The rounds a run reaches depend on the machine's load: with the load of a first
    # recording (a load average of 17 to 20 on 2 cores, other sessions' builds) two runs
    # under the tracer made 20 and 26 writer rounds, 20 and 25 mirror rounds and 33 and 36
    # reader fetches before the workload deadline, with a load of 10 43 to 58 writer rounds;
    # the writer now makes 30 rounds (n // 4), which a run ends within the deadline unless
    # the machine is that loaded, and the SPECs name rounds and counts in the middle of it
    # (A accepting about 55 connections, B about 60).
    ga, gb = f"exe=git-daemon,argv=--port={A}", f"exe=git-daemon,argv=--port={B}"
    return [
        ("writer-push-reset", "reset", "read:errno=ECONNRESET,argv=writer-push-r0012,nth=4,count=1"),
        ("mirror-fetch-reset", "reset", "read:errno=ECONNRESET,argv=mirror-fetch-r0010,nth=30,count=1"),
        ("reader-fetch-corrupt", "corrupt", "read:corrupt=8,argv=reader-fetch-r0014,nth=12,count=1"),
        ("mirror-fetch-corrupt", "corrupt", "read:corrupt=4,argv=mirror-fetch-r0011,nth=40,count=1"),
        ("mirror-push-corrupt", "corrupt", "read:corrupt=4,argv=mirror-push-r0009,nth=5,count=1"),
        ("writer-push-short", "short", "write:short=10,argv=writer-push-r0013,nth=2,count=1"),
        ("reader-fetch-short", "short", "read:short=3,argv=reader-fetch-r0016,nth=6,count=1"),
        ("writer-request-slow", "delay", "write:delay=4s,argv=writer-push-r0014,nth=1,count=1"),
        ("mirror-fetch-slow", "delay", "write:delay=7s,argv=mirror-fetch-r0012,nth=5,count=1"),
        ("a-accept-slow", "delay", f"accept:delay=9s,{ga},nth=22,count=1"),
        ("a-killed", "kill", f"accept:kill=SIGKILL,{ga},nth=25"),
        ("reader-fetch-killed", "kill", "read:kill=SIGKILL,argv=reader-fetch-r0015,nth=10"),
        ("b-stopped", "stop", f"poll:kill=SIGSTOP,{gb},nth=50"),
        ("mirror-push-stopped", "stop", "write:kill=SIGSTOP,argv=mirror-push-r0011,nth=3"),
        ("a-accept-emfile", "exhaust", f"accept:errno=EMFILE,{ga},nth=24,count=1"),
        ("b-accept-emfile", "exhaust", f"accept:errno=EMFILE,{gb},nth=26,count=1"),
        ("b-eagain-storm", "exhaust", f"accept:errno=EAGAIN,{gb},after=22,count=20"),
        ("writer-push-enospc", "exhaust", "write:errno=ENOSPC,argv=writer-push-r0011,nth=3,count=1"),
        ("mirror-fetch-socket-emfile", "exhaust", "socket:errno=EMFILE,argv=mirror-fetch-r0013,nth=1,count=1"),
        ("writer-code", "code", "py:sut.git_daemon_mirror:push:raise=ConnectionResetError,nth=12,"
                                "argv=systems.py git-daemon-mirror"),
        ("mirror-code", "code", "py:sut.git_daemon_mirror:Mirror.round:raise=TimeoutError,nth=10,argv=git-mirror"),
        ("reader-code", "code", "py:sut.git_daemon_mirror:whole:raise=ValueError,nth=36,argv=git-reader"),
    ]


def _hsqldb():
    F, D = ports("hsqldb-front")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 120/120 and 60/60 steps ok, 360 requests). The HSQLDB server is one
    # JVM (a thread per connection; its threads share the counters): on its 3 pooled
    # connections from the front (local-port D) it reads 2097 times (blocking sockets,
    # nearly all with data) and writes 2173 times; it accepts 4 connections (the
    # launcher's probe and the pool), all before the workload (no accept SPEC is mid-run).
    # The front is one JVM too: towards HSQLDB (peer-port D) it reads 2132 times and writes
    # 2175, on the clients' side (local-port F, com.sun.net.httpserver) it reads 367 times
    # and writes 722 (headers and body). The launcher receives 482 times (libc recv,
    # strace's recvfrom), sends 361 and reads 240 responses (HTTPResponse.read); client 2
    # receives 239 times, sends 180 and calls KvClient.get 60 times. The front gives up on
    # a JDBC call after 1 s, a client on the front after 2 s. (Counted before the front's
    # warm-up was added: a put and a get on each pooled connection before it listens, about
    # 40 more reads and writes on each side of the database connections, all before the
    # workload.) A run slowed by the
    # machine's load stops at the workload deadline with fewer calls: the SPECs are at
    # about 40 % of a whole run's calls.
    db, fe = "exe=*java,argv=org.hsqldb.server.Server", "exe=*java,argv=HsqlFront"
    c1, c2 = "argv=systems.py hsqldb-front", "argv=hsqldb-client --name 2"
    return [
        ("db-reset", "reset", f"read:errno=ECONNRESET,{db},local-port={D},nth=850,count=1"),
        ("db-drops", "reset", f"write:close,{db},local-port={D},nth=880,count=1"),
        ("front-db-reset", "reset", f"read:errno=ECONNRESET,{fe},peer-port={D},nth=860,count=1"),
        ("front-client-reset", "reset", f"read:errno=ECONNRESET,{fe},local-port={F},nth=150,count=1"),
        ("db-request-corrupt", "corrupt", f"read:corrupt=3,{db},local-port={D},nth=851,count=1"),
        ("front-result-corrupt", "corrupt", f"read:corrupt=4,{fe},peer-port={D},nth=861,count=1"),
        ("client1-corrupt", "corrupt", f"{RECV}:corrupt=4,{c1},nth=200,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=6,{c2},nth=100,count=1"),
        ("db-short", "short", f"write:short=5,{db},local-port={D},nth=880,count=1"),
        ("front-short", "short", f"write:short=10,{fe},local-port={F},nth=290,count=1"),
        ("db-slow", "delay", f"write:delay=2s,{db},local-port={D},nth=878,count=1"),
        ("front-slow", "delay", f"write:delay=3s,{fe},local-port={F},nth=292,count=1"),
        ("db-killed", "kill", f"read:kill=SIGKILL,{db},local-port={D},nth=850"),
        ("front-killed", "kill", f"read:kill=SIGKILL,{fe},local-port={F},nth=152"),
        ("client2-killed", "kill", f"{SEND}:kill=SIGKILL,{c2},nth=75"),
        ("db-stopped", "stop", f"read:kill=SIGSTOP,{db},local-port={D},nth=852"),
        ("front-stopped", "stop", f"write:kill=SIGSTOP,{fe},peer-port={D},nth=880"),
        ("front-enobufs", "exhaust", f"write:errno=ENOBUFS,{fe},local-port={F},nth=290,count=1"),
        ("db-enospc", "exhaust", f"write:errno=ENOSPC,{db},local-port={D},nth=882,count=1"),
        ("db-eagain-storm", "exhaust", f"read:errno=EAGAIN,{db},local-port={D},after=840,count=20"),
        ("client1-code", "code", f"py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=100,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=25,{c2}"),
    ]


def _sftp():
    S, ST = ports("paramiko-sftp")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 60/60 and 30/30 steps ok). Every process is CPython (libc recv and
    # send: strace's recvfrom and sendto). The SFTP server (one process: an accept loop, a
    # paramiko Transport thread and an SFTP thread per connection) receives 1933 times from
    # the clients (local-port S) and sends 974 times; towards the store (peer-port ST) it
    # receives 443 times and sends 360 (4 store requests a file: PUT at the upload's close,
    # STAT for its confirmation, STAT and GET to read it back); it accepts 8 connections
    # and is in a 9th at the end (the probe, client 1's one session, client 2's six
    # sessions of 5 files: the 5th accept is mid-run). The store (socketserver, a thread per
    # connection) receives 451 times, sends 360 and accepts 8 (the probe and one per SFTP
    # session: the 4th is mid-run). The launcher (client 1) receives 1225 times and sends
    # 612, client 2 receives 714 times and sends 354. StoreConn.put runs 90 times in the
    # server, Files.put 90 times in the store, SFTPClient.getfo 60 times in the launcher.
    # The server gives up on the store after 1 s, a client on the server after 3 s. As in
    # hsqldb-front, the SPECs are at about 40 % of a whole run's calls.
    srv, store = "argv=sftp-server", "argv=sftp-store"
    c1, c2 = "argv=systems.py paramiko-sftp", "argv=sftp-client --name 2"
    return [
        ("server-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{srv},local-port={S},nth=780,count=1"),
        ("server-store-reset", "reset", f"{RECV}:errno=ECONNRESET,{srv},peer-port={ST},nth=180,count=1"),
        ("store-drops", "reset", f"{RECV}:close,{store},local-port={ST},nth=182,count=1"),
        ("client1-reset", "reset", f"{RECV}:errno=ECONNRESET,{c1},nth=500,count=1"),
        ("server-packet-corrupt", "corrupt", f"{RECV}:corrupt=4,{srv},local-port={S},nth=790,count=1"),
        ("store-reply-corrupt", "corrupt", f"{RECV}:corrupt=3,{srv},peer-port={ST},nth=181,count=1"),
        ("store-request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={ST},nth=183,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=290,count=1"),
        ("server-store-short", "short", f"{SEND}:short=10,{srv},peer-port={ST},nth=150,count=1"),
        ("client1-short", "short", f"{RECV}:short=3,{c1},nth=510,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={ST},nth=150,count=1"),
        ("server-slow", "delay", f"{SEND}:delay=4s,{srv},local-port={S},nth=400,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={ST},nth=182"),
        ("server-killed", "kill", f"{RECV}:kill=SIGKILL,{srv},local-port={S},nth=785"),
        ("client2-killed", "kill", f"{SEND}:kill=SIGKILL,{c2},nth=145"),
        ("store-stopped", "stop", f"{SEND}:kill=SIGSTOP,{store},local-port={ST},nth=152"),
        ("server-stopped", "stop", f"{RECV}:kill=SIGSTOP,{srv},peer-port={ST},nth=184"),
        ("server-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{srv},local-port={S},nth=5,count=1"),
        ("store-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},local-port={ST},nth=4,count=1"),
        ("server-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{srv},local-port={S},nth=400,count=1"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={ST},nth=151,count=1"),
        ("server-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{srv},local-port={S},after=770,count=20"),
        ("server-code", "code", f"py:sut.paramiko_sftp:StoreConn.put:raise=ConnectionResetError,nth=36,{srv}"),
        ("store-code", "code", f"py:sut.paramiko_sftp:Files.put:raise=MemoryError,nth=36,{store}"),
        ("client1-code", "code", f"py:paramiko.sftp_client:SFTPClient.getfo:raise=TimeoutError,nth=25,{c1}"),
    ]
