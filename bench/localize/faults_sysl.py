"""Fault cases of the validation systems added on 2026-11-29 for validation run 10 (branch
loc-sysl). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 10 (`run.py --record-only` into
/tmp/val10/loc-sysl with the lead's build /tmp/rec11/culprit: 3 normal runs, the control and
every case per system), then checked with `run.py --check --reuse` on those recordings
(injection records and client summaries only, no model, no ranking). vsftpd-ftp was
recorded a second time, whole, after its launcher learned to end left-over session
processes (a stopped session held the first recording of c-session-stopped until the
75-s timeout); bind-chain's four cases on the authoritative server and its updater's
corruption were recorded again after their SPECs changed (recvmmsg/sendmmsg take no
injection; the updater's socket is not connected), and so was syslog-ng-relay's
relay-tcp-corrupt (its first SPEC fell on an EAGAIN receive). Every case of the three systems fired
(once; the EAGAIN storms 20, 25 and 30 times); no normal run or control holds an
injection record, and every normal run and control ended with all steps ok (syslog-ng-relay:
every message arrived whole). The launcher of vsftpd-ftp killed a left-over session
process in its two stop cases only. Cases in which no client saw a failure (the system
absorbed the fault, or the injected call had nothing to damage): vsftpd-ftp's
a-upload-corrupt (the 250th upload read was the empty read at the end of a transfer) and
a-download-short (vsftpd writes the rest); bind-chain's upstream-corrupt, upstream-short
(the resolver asks again) and tcp-answer-short (libuv writes the rest); syslog-ng-relay's
forward-short, central-short (on a receive that found nothing), central-slow,
forward-slow, central-enobufs and central-eagain-storm (every message still arrived
whole; in central-reset, forward-drops, central-corrupt and forward-enobufs one message
was lost without any sender seeing an error, in relay-udp-corrupt and relay-tcp-corrupt
one arrived damaged)."""

from sut.common import ports

RECV = "recv|recvfrom"
SEND = "send|sendto"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"vsftpd-ftp": _vsftpd(), "bind-chain": _bind(), "syslog-ng-relay": _syslog_ng()}


def _vsftpd():
    P = ports("vsftpd-ftp")
    CA, CB, CC, DA, DC = P[0], P[1], P[2], P[3], P[6]
    # Counted with strace on runs without the tracer (no recording of this system was
    # looked at): a full run (120 launcher steps, 100 per helper, about 14 s) and a run
    # slowed by strace that the 20-s workload deadline cut to 99 / 84 / 78 steps. Each
    # server has one client session: a session process (privileged: it makes the data
    # sockets, accepting on the passive port or connecting out for PORT, and passes them
    # over a UNIX socket) and its post-login child (speaks on the control connection, a
    # recv(MSG_PEEK) then a read() per command; moves the data with read()/write(); talks
    # to its parent over the UNIX socket). Per full run: A's child reads its control
    # connection (local-port CA) about 1070 times (880 in the slowed run), reads uploads
    # on DA about 470 times (380) and writes downloads there about 105 times (99, one
    # write per file); A's parent accepts about 240 data connections (198). B's child
    # reads its control connection about 930 times (782) and writes replies about 1150
    # times (959); B's parent connects out about 210 times (176). C's child reads its
    # control connection about 935 times (729), writes replies about 1230 (964) and
    # downloads on DC about 300 (234); the reader client receives on its control
    # connection (peer-port CC) about 1200 times (965), every one a reply with data. The
    # peeks are libc recv() (strace shows recvfrom); a receive of a data connection may be
    # the empty one at its end, so the reader's corruption is on its control connection. A session that fails is made again by its client: the new session's
    # processes count from zero, so every vsftpd SPEC's nth lies past half of its
    # process's calls in a run (a new session does not reach it again). The listeners
    # accept two connections each (the launcher's probe and the client) and do nothing
    # else. The launcher calls FTP.storbinary about 120 times, the reader FTP.nlst 100.
    a, b, c = ("exe=*vsftpd,argv=vsftpd-" + s + ".conf" for s in "abc")
    reader = "argv=ftp-client --name reader"
    return [
        ("a-control-reset", "reset", f"read:errno=ECONNRESET,{a},local-port={CA},nth=560,count=1"),
        ("a-upload-drops", "reset", f"read:close,{a},local-port={DA},nth=250,count=1"),
        ("b-control-drops", "reset", f"read:close,{b},local-port={CB},nth=480,count=1"),
        ("c-control-reset", "reset", f"{RECV}:errno=ECONNRESET,{c},local-port={CC},nth=480,count=1"),
        ("a-upload-corrupt", "corrupt", f"read:corrupt=4,{a},local-port={DA},nth=250,count=1"),
        ("a-command-corrupt", "corrupt", f"read:corrupt=2,{a},local-port={CA},nth=560,count=1"),
        ("reader-reply-corrupt", "corrupt", f"{RECV}:corrupt=3,{reader},peer-port={CC},nth=450,count=1"),
        ("a-download-short", "short", f"write:short=100,{a},local-port={DA},nth=60,count=1"),
        ("c-download-slow", "delay", f"write:delay=3s,{c},local-port={DC},nth=160,count=1"),
        ("b-reply-slow", "delay", f"write:delay=3s,{b},local-port={CB},nth=600,count=1"),
        ("a-session-killed", "kill", f"read:kill=SIGKILL,{a},local-port={CA},nth=560"),
        ("b-parent-killed", "kill", f"connect:kill=SIGKILL,{b},nth=110"),
        ("c-session-killed", "kill", f"write:kill=SIGKILL,{c},local-port={DC},nth=160"),
        ("a-session-stopped", "stop", f"read:kill=SIGSTOP,{a},local-port={CA},nth=560"),
        ("c-session-stopped", "stop", f"{RECV}:kill=SIGSTOP,{c},local-port={CC},nth=480"),
        ("a-accept-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{a},nth=125,count=1"),
        ("c-download-enospc", "exhaust", f"write:errno=ENOSPC,{c},local-port={DC},nth=160,count=1"),
        ("c-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{c},local-port={CC},after=500,count=20"),
        ("b-connect-enobufs", "exhaust", f"connect:errno=ENOBUFS,{b},nth=110,count=1"),
        ("writer-code", "code", "py:ftplib:FTP.storbinary:raise=ConnectionResetError,nth=60,argv=vsftpd-ftp"),
        ("reader-code", "code", f"py:ftplib:FTP.nlst:raise=TimeoutError,nth=50,{reader}"),
    ]


def _bind():
    A, R = ports("bind-chain")[:2]
    # Counted with strace -f on a run without the tracer (no recording of this system was
    # looked at); each named is one process of a few threads (libuv loops), whose threads
    # share the counters. Per run (120 launcher queries, 130 steps per helper; TTL 0, so
    # every query crosses the chain): the resolver receives its UDP clients' queries on R
    # with recvmmsg (about 500 calls, half of them empty), forwards each query (380) on a
    # fresh connected UDP socket (socket, connect, sendmmsg, one recvmsg of the answer:
    # peer-port A), accepts the TCP client's 131 connections (accept4 on R, 262 calls: a
    # connection, then an EAGAIN; the launcher's probe is the first), reads on each the
    # query then the end of stream (261 reads: the probe's end, then query, end, ...: the
    # 2k-th read is the k-th TCP query) and answers each with one writev (130). The
    # authoritative server receives on A with recvmmsg (about 1000 calls, half empty) and
    # answers with sendmmsg (506: 380 forwarded queries and 130 updates); it writes each
    # update to its journal. The updater's socket is not connected (no peer port to
    # match); it makes about 520 receives in a run (a first recording put the 141st in
    # its 37th step), so the 261st falls near its 65th of 130. recvmmsg and sendmmsg take no injection, nor do writes to
    # files, so the authoritative server's cases are on its loops' epoll_wait (about 1030
    # calls); the resolver's upstream connect() (380) can fail with EAGAIN (no local port
    # left). The launcher calls query() 120 times; the updater calls UpdateMessage.replace 130
    # times; the TCP client calls dns.query.tcp 130 times.
    auth, res = "exe=named,argv=auth.conf", "exe=named,argv=resolver.conf"
    upd, tcp = "argv=bind-client --name update", "argv=bind-client --name tcp"
    return [
        ("upstream-reset", "reset", f"recvmsg:errno=ECONNRESET,{res},peer-port={A},nth=190,count=1"),
        ("tcp-client-drops", "reset", f"read:close,{res},local-port={R},nth=130,count=1"),
        ("upstream-corrupt", "corrupt", f"recvmsg:corrupt=4,{res},peer-port={A},nth=190,count=1"),
        ("tcp-query-corrupt", "corrupt", f"read:corrupt=3,{res},local-port={R},nth=132,count=1"),
        ("update-answer-corrupt", "corrupt", f"{RECV}:corrupt=2,{upd},nth=261,count=1"),
        ("tcp-answer-short", "short", f"writev:short=20,{res},local-port={R},nth=65,count=1"),
        ("upstream-short", "short", f"recvmsg:short=10,{res},peer-port={A},nth=200,count=1"),
        ("auth-slow", "delay", f"epoll_wait:delay=2s,{auth},nth=500,count=1"),
        ("resolver-slow", "delay", f"writev:delay=2s,{res},local-port={R},nth=65,count=1"),
        ("auth-killed", "kill", f"epoll_wait:kill=SIGKILL,{auth},nth=500"),
        ("resolver-killed", "kill", f"accept4:kill=SIGKILL,{res},nth=131"),
        ("auth-stopped", "stop", f"epoll_wait:kill=SIGSTOP,{auth},nth=500"),
        ("resolver-stopped", "stop", f"recvmsg:kill=SIGSTOP,{res},peer-port={A},nth=190"),
        ("resolver-emfile", "exhaust", f"accept4:errno=EMFILE,{res},nth=131,count=1"),
        ("upstream-socket-emfile", "exhaust", f"socket:errno=EMFILE,{res},nth=200,count=1"),
        ("upstream-ports-exhausted", "exhaust", f"connect:errno=EAGAIN,{res},nth=200,count=1"),
        ("upstream-eagain-storm", "exhaust", f"recvmsg:errno=EAGAIN,{res},peer-port={A},after=180,count=25"),
        ("launcher-code", "code", "py:sut.bind_chain:query:raise=TimeoutError,nth=70,argv=bind-chain"),
        ("updater-code", "code", f"py:dns.update:UpdateMessage.replace:raise=ValueError,nth=60,{upd}"),
        ("tcp-client-code", "code", f"py:dns.query:tcp:raise=ConnectionResetError,nth=60,{tcp}"),
    ]


def _syslog_ng():
    R, C = ports("syslog-ng-relay")[:2]
    # Counted with strace -f on a run without the tracer (no recording of this system was
    # looked at); each syslog-ng is one process (a main loop and worker threads sharing
    # the counters). Per run (120 messages of sender 1 over TCP, 200 of sender 2 over UDP,
    # two stop messages): the relay receives sender 1's connection on R with recvfrom
    # (libc recv, strace's recvfrom; about 243 calls, EAGAIN and message in turn from an
    # EAGAIN first, so the even calls carry the messages: a first recording's corruption
    # at the 121st fell on an EAGAIN and damaged nothing)
    # and the datagrams on R with recvmsg (about 402: the same alternation), and forwards
    # each message to the central daemon with two sends (its length, then the message:
    # 644 sends, peer-port C; the even ones carry messages). The central daemon receives
    # on C with recv (about 950 calls, lengths, messages and EAGAINs mixed) and writes
    # each message to its file with one writev (322; writes to files take no injection).
    # The launcher calls Sender.send 121
    # times, sender 2 SysLogHandler.emit 201 times, the tailer check() 320 times.
    relay, central = "exe=syslog-ng,argv=relay.conf", "exe=syslog-ng,argv=central.conf"
    return [
        ("central-reset", "reset", f"{RECV}:errno=ECONNRESET,{central},local-port={C},nth=470,count=1"),
        ("relay-input-reset", "reset", f"{RECV}:errno=ECONNRESET,{relay},local-port={R},nth=121,count=1"),
        ("forward-drops", "reset", f"{SEND}:close,{relay},peer-port={C},nth=320,count=1"),
        ("central-corrupt", "corrupt", f"{RECV}:corrupt=6,{central},local-port={C},nth=471,count=1"),
        ("relay-tcp-corrupt", "corrupt", f"{RECV}:corrupt=48,{relay},local-port={R},nth=122,count=1"),
        ("relay-udp-corrupt", "corrupt", f"recvmsg:corrupt=40,{relay},local-port={R},nth=201,count=1"),
        ("forward-short", "short", f"{SEND}:short=30,{relay},peer-port={C},nth=320,count=1"),
        ("central-short", "short", f"{RECV}:short=5,{central},local-port={C},nth=470,count=1"),
        ("central-slow", "delay", f"{RECV}:delay=3s,{central},local-port={C},nth=470,count=1"),
        ("forward-slow", "delay", f"{SEND}:delay=3s,{relay},peer-port={C},nth=320,count=1"),
        ("central-killed", "kill", f"{RECV}:kill=SIGKILL,{central},local-port={C},nth=470"),
        ("relay-killed", "kill", f"recvmsg:kill=SIGKILL,{relay},local-port={R},nth=201"),
        ("central-stopped", "stop", f"{RECV}:kill=SIGSTOP,{central},local-port={C},nth=470"),
        ("relay-stopped", "stop", f"{RECV}:kill=SIGSTOP,{relay},local-port={R},nth=121"),
        ("central-enobufs", "exhaust", f"{RECV}:errno=ENOBUFS,{central},local-port={C},nth=472,count=1"),
        ("forward-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{relay},peer-port={C},nth=320,count=1"),
        ("central-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{central},local-port={C},after=400,count=30"),
        ("sender1-code", "code", "py:sut.syslog_ng_relay:Sender.send:raise=BrokenPipeError,nth=70,argv=syslog-ng-relay"),
        ("sender2-code", "code", "py:logging.handlers:SysLogHandler.emit:raise=OSError,nth=100,argv=ng-sender"),
        ("tailer-code", "code", "py:sut.syslog_ng_relay:check:raise=ValueError,nth=100,argv=ng-tailer"),
    ]
