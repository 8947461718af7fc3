"""Fault cases of the validation systems added on 2026-11-29 for validation run 12 (branch
loc-sysr). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 12 (`run.py --record-only` into
/tmp/val12/loc-sysr with the lead's build /tmp/rec12/culprit: 3 normal runs, the control and
every case per system, 77 recordings, none with lost entries), then checked with `run.py
--check --reuse` on those recordings (injection records and client summaries only, no
model, no ranking): every case of the three systems fired, each in one process (one
injection; the EAGAIN storms 25 of 25 in jetty-chain, 20 of 20 in znc-inspircd and in
exim-relay's sink daemon, 2 of 20 in exim-relay's relay child, which closed the session
after the second); no normal run or control holds an injection record, and every normal
run and control ended with all steps ok (jetty-chain 120/120 and 60/60 steps; znc-inspircd
60/60 messages sent by each client and 120/120 of the others' received intact by each;
exim-relay 60/60 and 30/30 messages accepted, 90/90 delivered intact). Recorded again
before the check: exim-relay's three SPECs on the relay child's socket writes, which never
fired (Exim writes its SMTP replies through stdio, whose internal write libtrace.so does
not see: moved to its reads, and the ENOSPC to sender 1's send), and sender2-enobufs,
whose 66th send was a session's QUIT, whose failure the sender only logs (now the 64th,
a message's data). In 15 of the 65 cases no client saw a failure (the system absorbed the
fault; the reasons given are presumed, not read in the traces): in jetty-chain
jetty-store-reset and store-drops (the JDK HttpClient sends the request again on a new
connection), both short writes (Jetty and the JDK client write the rest) and Jetty's
EAGAIN storm; in znc-inspircd both short writes (ZNC and InspIRCd keep the rest in their
send queues), both 3-s delays (no client waits on a reply; the lines arrive late),
znc-enospc and InspIRCd's EAGAIN storm; in exim-relay relay-read-short (Exim reads the
rest), both daemons' EMFILE accepts (the connection waits in the backlog for the next
accept) and the sink's EAGAIN storm on accept."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"jetty-chain": _jetty(), "znc-inspircd": _znc(), "exim-relay": _exim()}


def _jetty():
    F, S = ports("jetty-chain")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 120/120 and 60/60 steps ok). The JVM is one process (its threads share
    # the counters): on the clients' side (local-port F) it reads about 1490 times (392
    # with data, the others EAGAIN on its non-blocking sockets: which ones shifts with
    # timing) and writes 361 times (writev), on its keep-alive connections to the store
    # (peer-port S, the JDK HttpClient) it reads about 2060 times (719 with data) and
    # writes 540 times (writev); it accepts 4 connections, all before the workload (no
    # accept SPEC is mid-run), and waits in epoll_wait about 3370 times. The corruptions
    # are therefore on the Python side, whose receives all carry data. The store
    # (ThreadingHTTPServer, a thread per connection, one process) receives 533 times (libc
    # recv, strace's recvfrom) and sends 720 times (send), and calls Store.put 180 times;
    # the launcher receives 241 times and sends 361, calls KvClient.put 120 times; client 2
    # receives 120 times, sends 180, calls KvClient.get 60 times. The servlet gives up on
    # the store after 1 s, a client on Jetty after 2 s.
    jt = "exe=*java,argv=*jetty.base*"
    store, c1, c2 = "argv=jetty-store", "argv=systems.py jetty-chain", "argv=jetty-client --name 2"
    return [
        ("jetty-client-reset", "reset", f"read:errno=ECONNRESET,{jt},local-port={F},nth=600,count=1"),
        ("jetty-store-reset", "reset", f"read:errno=ECONNRESET,{jt},peer-port={S},nth=800,count=1"),
        ("store-drops", "reset", f"{RECV}:close,{store},local-port={S},nth=265,count=1"),
        ("store-request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=270,count=1"),
        ("client2-reply-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},peer-port={F},nth=60,count=1"),
        ("client-reply-corrupt", "corrupt", f"{RECV}:corrupt=2,{c1},peer-port={F},nth=120,count=1"),
        ("jetty-reply-short", "short", f"writev:short=20,{jt},local-port={F},nth=180,count=1"),
        ("jetty-request-short", "short", f"writev:short=10,{jt},peer-port={S},nth=270,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=360,count=1"),
        ("jetty-slow", "delay", f"writev:delay=3s,{jt},local-port={F},nth=185,count=1"),
        ("jetty-killed", "kill", f"read:kill=SIGKILL,{jt},local-port={F},nth=600"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=270"),
        ("jetty-stopped", "stop", f"writev:kill=SIGSTOP,{jt},peer-port={S},nth=270"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=275"),
        ("jetty-enobufs", "exhaust", f"writev:errno=ENOBUFS,{jt},peer-port={S},nth=275,count=1"),
        ("store-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{store},local-port={S},nth=365,count=1"),
        ("client2-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{c2},peer-port={F},nth=90,count=1"),
        ("jetty-eagain-storm", "exhaust", f"read:errno=EAGAIN,{jt},local-port={F},after=550,count=25"),
        ("client-code", "code", f"py:sut.kv_http:KvClient.put:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=ConnectionResetError,nth=30,{c2}"),
        ("store-code", "code", f"py:sut.tomcat_chain:Store.put:raise=KeyError,nth=90,{store}"),
    ]


def _znc():
    I, Z = ports("znc-inspircd")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; every client 60/60 messages sent and 120/120 of the others' received
    # intact). InspIRCd (one process, epoll) receives 209 times from its clients (libc
    # recv: ZNC's two upstream connections, carol, the launcher's probe), writes 396
    # times (writev) and accepts 5 connections, all before the workload; ZNC (one
    # process) reads its two upstream connections (peer-port I) 260 times and writes them
    # 140 times, reads its two clients (local-port Z: alice, bob) 133 times and writes them
    # 282 times (libc read/write), accepts 3 connections before the workload. alice (the
    # launcher) receives 128 times and sends 67 (about 67 IrcClient.send calls), bob 125
    # and 67, carol 124 and 66 (about 130 Member.take calls). A client waits for the
    # others' end marks 8 s at most; nothing else in the system times out in a run.
    ircd, znc = "exe=*inspircd", "exe=*znc"
    alice, bob, carol = "argv=systems.py znc-inspircd", "argv=irc-bnc-client --name 2", "argv=irc-bnc-client --name 3"
    return [
        ("znc-upstream-reset", "reset", f"read:errno=ECONNRESET,{znc},peer-port={I},nth=130,count=1"),
        ("znc-client-reset", "reset", f"read:errno=ECONNRESET,{znc},local-port={Z},nth=66,count=1"),
        ("ircd-client-reset", "reset", f"{RECV}:errno=ECONNRESET,{ircd},local-port={I},nth=105,count=1"),
        ("ircd-drops", "reset", f"{RECV}:close,{ircd},local-port={I},nth=110,count=1"),
        ("znc-upstream-corrupt", "corrupt", f"read:corrupt=3,{znc},peer-port={I},nth=135,count=1"),
        ("ircd-corrupt", "corrupt", f"{RECV}:corrupt=4,{ircd},local-port={I},nth=100,count=1"),
        ("carol-corrupt", "corrupt", f"{RECV}:corrupt=5,{carol},peer-port={I},nth=62,count=1"),
        ("znc-client-short", "short", f"write:short=10,{znc},local-port={Z},nth=141,count=1"),
        ("ircd-short", "short", f"writev:short=15,{ircd},local-port={I},nth=198,count=1"),
        ("znc-slow", "delay", f"write:delay=3s,{znc},peer-port={I},nth=70,count=1"),
        ("ircd-slow", "delay", f"writev:delay=3s,{ircd},local-port={I},nth=200,count=1"),
        ("znc-killed", "kill", f"read:kill=SIGKILL,{znc},peer-port={I},nth=130"),
        ("ircd-killed", "kill", f"{RECV}:kill=SIGKILL,{ircd},local-port={I},nth=105"),
        ("znc-stopped", "stop", f"read:kill=SIGSTOP,{znc},local-port={Z},nth=66"),
        ("ircd-stopped", "stop", f"{RECV}:kill=SIGSTOP,{ircd},local-port={I},nth=110"),
        ("ircd-enobufs", "exhaust", f"writev:errno=ENOBUFS,{ircd},local-port={I},nth=200,count=1"),
        ("znc-enospc", "exhaust", f"write:errno=ENOSPC,{znc},peer-port={I},nth=70,count=1"),
        ("ircd-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{ircd},local-port={I},after=100,count=20"),
        ("bob-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{bob},peer-port={Z},nth=34,count=1"),
        ("alice-code", "code", f"py:sut.znc_inspircd:IrcClient.send:raise=BrokenPipeError,nth=40,{alice}"),
        ("bob-code", "code", f"py:sut.znc_inspircd:IrcClient.read:raise=ConnectionResetError,nth=70,{bob}"),
        ("carol-code", "code", f"py:sut.znc_inspircd:Member.take:raise=ValueError,nth=60,{carol}"),
    ]


def _exim():
    R, S = ports("exim-relay")[:2]
    # Counted with `strace -f -yy` on a run without the tracer (no recording of this system
    # was looked at; 60/60 + 30/30 messages accepted, 90/90 delivered intact). Every Exim
    # process is a fork of its daemon (exim_user = root: nothing is re-exec'd), so all of
    # an instance's processes have the daemon's command line, told apart by its
    # configuration file; a forked child counts from zero. The relay's daemon accepts 8
    # connections a run (the launcher's probe, sender 1's one session, sender 2's six of 5
    # messages: the 3rd to 8th are mid-run) and polls 23 times; the child that receives
    # sender 1's session reads its socket (local-port R) 242 times and writes it 243 times
    # (4 commands and their answers a message), each child of sender 2's sessions 22 and 23
    # times: a SPEC on the relay's reads on R at the 150th to 200th call can only fire in
    # sender 1's child. Exim writes its SMTP replies through stdio (fwrite/fflush on a FILE
    # over the socket): glibc's own write under fflush does not pass through libtrace.so,
    # so none of those writes is recorded or can be injected (a first recording's three
    # SPECs on them never fired); the relay's cases are on its reads. Sender 2 sends 22
    # times a session (EHLO, 4 a message, QUIT): its 64th send is a message's data. Each received message is delivered by a process
    # forked for it, whose transport (a fork again) makes one connection to the sink: 90
    # identical processes that no SPEC can name one of; so on the sink's side the daemon
    # (91 accepts a run, the probe's and one a message) is the one process named. The
    # sink's receiving and delivering children are as many and as alike. Sender 1 (the
    # launcher) receives 243 times and sends 242 (libc recv/send; 60 SMTP.sendmail
    # calls), sender 2 receives 138 times, sends 132 and connects 6 times (about 138
    # SMTP.getreply calls); the reader calls `check` once a delivered file (90). Sender
    # and relay give up after 2 s.
    relay, sink = "exe=*exim4,argv=*relay.conf*", "exe=*exim4,argv=*sink.conf*"
    rc = f"{relay},local-port={R}"
    s1, s2, rd = "argv=systems.py exim-relay", "argv=exim-sender --name 2", "argv=exim-reader"
    return [
        ("relay-child-reset", "reset", f"read:errno=ECONNRESET,{rc},nth=160,count=1"),
        ("relay-child-drops", "reset", f"read:close,{rc},nth=165,count=1"),
        ("relay-data-corrupt", "corrupt", f"read:corrupt=3,{rc},nth=170,count=1"),
        ("relay-read-short", "short", f"read:short=5,{rc},nth=170,count=1"),
        ("relay-child-slow", "delay", f"read:delay=3s,{rc},nth=175,count=1"),
        ("relay-child-killed", "kill", f"read:kill=SIGKILL,{rc},nth=180"),
        ("relay-child-stopped", "stop", f"read:kill=SIGSTOP,{rc},nth=180"),
        ("relay-child-eagain-storm", "exhaust", f"read:errno=EAGAIN,{rc},after=150,count=20"),
        ("relay-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{relay},nth=5,count=1"),
        ("relay-daemon-killed", "kill", f"accept|accept4:kill=SIGKILL,{relay},nth=5"),
        ("sink-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{sink},nth=45,count=1"),
        ("sink-daemon-killed", "kill", f"accept|accept4:kill=SIGKILL,{sink},nth=45"),
        ("sink-daemon-stopped", "stop", f"accept|accept4:kill=SIGSTOP,{sink},nth=45"),
        ("sink-accept-eagain-storm", "exhaust", f"accept|accept4:errno=EAGAIN,{sink},after=40,count=20"),
        ("sender1-reset", "reset", f"{RECV}:errno=ECONNRESET,{s1},peer-port={R},nth=120,count=1"),
        ("sender1-reply-corrupt", "corrupt", f"{RECV}:corrupt=2,{s1},peer-port={R},nth=125,count=1"),
        ("sender1-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{s1},peer-port={R},nth=121,count=1"),
        ("sender2-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{s2},peer-port={R},nth=64,count=1"),
        ("sender2-connect-eaddrnotavail", "exhaust", f"connect:errno=EADDRNOTAVAIL,{s2},nth=3,count=1"),
        ("sender1-code", "code", f"py:smtplib:SMTP.sendmail:raise=TimeoutError,nth=30,{s1}"),
        ("sender2-code", "code", f"py:smtplib:SMTP.getreply:raise=ConnectionResetError,nth=70,{s2}"),
        ("reader-code", "code", f"py:sut.exim_relay:check:raise=ValueError,nth=45,{rd}"),
    ]
