"""Fault cases of the validation systems added on 2026-11-29 for validation run 10 (branch
loc-sysm). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 10 (`run.py --record-only` into
/tmp/val10/loc-sysm with the lead's build /tmp/rec11/culprit: 3 normal runs, the control
and every case per system; aioftp-transfer's server-enospc recorded again after its SPEC
moved from a file write, where it never fired, to a reply; yaws-dav and h2-pgwire recorded
again whole after a change of their modules: the uploader's content() inside its try, a
docstring reflowed), then checked with `run.py --check --reuse` on those recordings
(injection records and client summaries only, no model, no ranking): every case of the
three systems fired (one injection each, the EAGAIN storms 25), no control holds an
injection record, and every normal run and control ended with all steps ok. In 11 of the
63 cases no client reported a failure (the system absorbed the fault: a short send or
receive completed by the next call, EAGAIN read again, an EMFILE accept tried again),
and in 5 more the process that failed was the one injected (a reader or scanner killed,
stopped or ended by an uncaught exception) and so said nothing at the end."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"aioftp-transfer": _aioftp(), "h2-pgwire": _h2(), "yaws-dav": _yaws()}


def _aioftp():
    C = ports("aioftp-transfer")[0]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). The server (aioftp on asyncio: one process, one thread) receives about
    # 1300 times on its control port C (the commands of both clients: per uploader step
    # TYPE, EPSV, STOR, RNFR, RNTO, and TYPE, EPSV, RETR every other step; per reader
    # round TYPE, EPSV, MLSD, then TYPE, EPSV, RETR per new file) and sends about 1650
    # replies there; its passive data connections listen on p[2]..p[9], a port taken
    # from that range per transfer, so which data port a client gets varies: the data
    # SPECs count a process's calls on every port (the reader's receives: about 680 on
    # C, 3200 on data connections). It accepts about 700 times (half of them EAGAIN),
    # three on C (the launcher's probe and the two clients) and the rest on data ports;
    # it resolves a path (get_paths) about 590 times. Its writes of the uploaded files
    # are no place to inject (the tracer records and injects on sockets only): its ENOSPC
    # is on a reply (the first check put it on a file write, where it never fired). The
    # uploader receives about 970 replies on C and sends about 790 commands; the reader
    # receives about 680 replies on C. Timeouts: every socket operation of a client 2 s,
    # a whole step 5 s; the server's 2 s. The launcher takes 120 steps: it calls content
    # 120 times and parse_epsv_response about 180 times; the reader calls content once
    # per file (120).
    server, up, rd = "argv=ftp-server", "argv=systems.py aioftp-transfer", "argv=ftp-reader --name 2"
    return [
        ("server-reset", "reset", f"{RECV}:errno=ECONNRESET,{server},local-port={C},nth=600,count=1"),
        ("uploader-reset", "reset", f"{RECV}:errno=ECONNRESET,{up},peer-port={C},nth=480,count=1"),
        ("server-drops", "reset", f"{SEND}:close,{server},local-port={C},nth=800,count=1"),
        ("command-corrupt", "corrupt", f"{RECV}:corrupt=3,{server},local-port={C},nth=600,count=1"),
        ("reply-corrupt", "corrupt", f"{RECV}:corrupt=4,{rd},peer-port={C},nth=250,count=1"),
        ("download-corrupt", "corrupt", f"{RECV}:corrupt=6,{rd},nth=1500,count=1"),
        ("server-short", "short", f"{SEND}:short=10,{server},local-port={C},nth=800,count=1"),
        ("download-short", "short", f"{RECV}:short=100,{rd},nth=1500,count=1"),
        ("server-slow", "delay", f"{SEND}:delay=3s,{server},local-port={C},nth=800,count=1"),
        ("reader-slow", "delay", f"{RECV}:delay=3s,{rd},peer-port={C},nth=250,count=1"),
        ("server-killed", "kill", f"{RECV}:kill=SIGKILL,{server},local-port={C},nth=600"),
        ("reader-killed", "kill", f"{RECV}:kill=SIGKILL,{rd},peer-port={C},nth=250"),
        ("server-stopped", "stop", f"{SEND}:kill=SIGSTOP,{server},local-port={C},nth=800"),
        ("reader-stopped", "stop", f"{RECV}:kill=SIGSTOP,{rd},peer-port={C},nth=250"),
        ("server-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{server},nth=350,count=1"),
        ("server-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{server},local-port={C},nth=700,count=1"),
        ("uploader-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{up},peer-port={C},nth=400,count=1"),
        ("server-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{server},local-port={C},after=500,count=25"),
        ("server-code", "code", f"py:aioftp.server:Server.get_paths:raise=PermissionError,nth=300,{server}"),
        ("uploader-code", "code",
         f"py:aioftp.client:BaseClient.parse_epsv_response:raise=ValueError,nth=90,{up}"),
        ("reader-code", "code", f"py:sut.aioftp_transfer:content:raise=MemoryError,nth=60,{rd}"),
    ]


def _h2():
    P = ports("h2-pgwire")[0]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). H2's PG server (one JVM: a listener thread, a thread per connection,
    # blocking sockets: read and write) reads about 5000 times on P and writes about 8600
    # times (it answers a statement in many small writes): the writer's and the
    # follower's connections about 1700 reads each, the scanner's short connections 51
    # reads each. It accepts about 35 connections, 30 of them the scanner's (one a
    # round), spread over the run. The writer (the launcher, 50 steps) receives about 570
    # times and sends about 290 times on its connection; the follower receives about 770
    # times (95 rounds); the scanner about 435 times (29 rounds, each a new connection).
    # Every client gives up on a wait after 2 s. The writer calls put 51 times, the
    # follower follow once a round, the scanner scan once a round. A client counts a
    # database error, an OSError or a wrong answer and goes on; the scanner's MemoryError
    # is none of these and ends it, as an uncaught exception ends a job.
    server = "argv=org.h2.tools.Server"
    wr, fo, sc = "argv=systems.py h2-pgwire", "argv=h2-reader --name 2", "argv=h2-reader --name 3"
    return [
        ("server-reset", "reset", f"read:errno=ECONNRESET,{server},local-port={P},nth=2000,count=1"),
        ("writer-reset", "reset", f"{RECV}:errno=ECONNRESET,{wr},peer-port={P},nth=280,count=1"),
        ("server-drops", "reset", f"write:close,{server},local-port={P},nth=4000,count=1"),
        ("query-corrupt", "corrupt", f"read:corrupt=3,{server},local-port={P},nth=2000,count=1"),
        ("row-corrupt", "corrupt", f"{RECV}:corrupt=6,{fo},peer-port={P},nth=350,count=1"),
        ("writer-corrupt", "corrupt", f"{RECV}:corrupt=4,{wr},peer-port={P},nth=280,count=1"),
        ("server-short", "short", f"write:short=5,{server},local-port={P},nth=4000,count=1"),
        ("follower-short", "short", f"{RECV}:short=3,{fo},peer-port={P},nth=350,count=1"),
        ("server-slow", "delay", f"write:delay=3s,{server},local-port={P},nth=4000,count=1"),
        ("server-read-slow", "delay", f"read:delay=3s,{server},local-port={P},nth=2000,count=1"),
        ("server-killed", "kill", f"read:kill=SIGKILL,{server},local-port={P},nth=2000"),
        ("follower-killed", "kill", f"{RECV}:kill=SIGKILL,{fo},peer-port={P},nth=350"),
        ("server-stopped", "stop", f"write:kill=SIGSTOP,{server},local-port={P},nth=4000"),
        ("scanner-stopped", "stop", f"{RECV}:kill=SIGSTOP,{sc},peer-port={P},nth=200"),
        ("server-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{server},nth=15,count=1"),
        ("server-enospc", "exhaust", f"write:errno=ENOSPC,{server},local-port={P},nth=4000,count=1"),
        ("writer-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{wr},peer-port={P},nth=140,count=1"),
        ("server-eagain-storm", "exhaust", f"read:errno=EAGAIN,{server},local-port={P},after=1900,count=25"),
        ("writer-code", "code", f"py:sut.h2_pgwire:put:raise=ConnectionResetError,nth=25,{wr}"),
        ("follower-code", "code", f"py:sut.h2_pgwire:follow:raise=TimeoutError,nth=40,{fo}"),
        ("scanner-code", "code", f"py:sut.h2_pgwire:scan:raise=MemoryError,nth=12,{sc}"),
    ]


def _yaws():
    Y, S = ports("yaws-dav")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at). Yaws (one BEAM process: schedulers, dirty I/O threads for the files)
    # receives about 910 times on Y (recv) and answers there with about 420 writev; its
    # reverse proxy opens a connection to the store per request (120), writes each request
    # with writev (about 180) and receives the answers (about 300 recv on peer-port S). It
    # accepts on Y only at the start (the launcher's probe and the two clients). The store
    # (one process, a thread per connection) accepts 121 times and receives about 240
    # times on S and sends about 240 times (headers, body). Client 2 receives about 120
    # times on Y. Both clients give up after 2 s.
    # The launcher takes 120 steps (content 120 calls); client 2 60 (KvClient.get 60
    # calls), the store's do_PUT 60 calls.
    yaws, store = "exe=beam.smp", "argv=yaws-store"
    up, c2 = "argv=systems.py yaws-dav", "argv=yaws-client --name 2"
    return [
        ("yaws-reset", "reset", f"{RECV}:errno=ECONNRESET,{yaws},local-port={Y},nth=450,count=1"),
        ("proxy-reset", "reset", f"{RECV}:errno=ECONNRESET,{yaws},peer-port={S},nth=150,count=1"),
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=120,count=1"),
        ("yaws-drops", "reset", f"writev:close,{yaws},local-port={Y},nth=200,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{yaws},local-port={Y},nth=450,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{yaws},peer-port={S},nth=150,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},peer-port={Y},nth=60,count=1"),
        ("yaws-short", "short", f"writev:short=20,{yaws},local-port={Y},nth=200,count=1"),
        ("store-short", "short", f"{SEND}:short=10,{store},local-port={S},nth=120,count=1"),
        ("yaws-slow", "delay", f"writev:delay=3s,{yaws},local-port={Y},nth=200,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=3s,{store},local-port={S},nth=120,count=1"),
        ("yaws-killed", "kill", f"{RECV}:kill=SIGKILL,{yaws},local-port={Y},nth=450"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=120"),
        ("yaws-stopped", "stop", f"writev:kill=SIGSTOP,{yaws},local-port={Y},nth=200"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=120"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},nth=60,count=1"),
        ("yaws-enospc", "exhaust", f"writev:errno=ENOSPC,{yaws},local-port={Y},nth=200,count=1"),
        ("yaws-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{yaws},local-port={Y},after=400,count=25"),
        ("uploader-code", "code", f"py:sut.yaws_dav:content:raise=ValueError,nth=60,{up}"),
        ("store-code", "code", f"py:sut.yaws_dav:StoreHandler.do_PUT:raise=BrokenPipeError,nth=30,{store}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=30,{c2}"),
    ]
