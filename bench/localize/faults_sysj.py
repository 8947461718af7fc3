"""Fault cases of the validation systems added on 2026-11-29 for validation run 9 (branch
loc-sysj). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 9 (`run.py --record-only` into
/tmp/val9/loc-sysj: 3 normal runs, the control and every case per system), then checked
with `run.py --check --reuse` on those recordings (injection records and client summaries
only, no model, no ranking): every case of the three systems fired (one injection each,
the EAGAIN storms 20 or 30), no normal run or control holds an injection record."""

from sut.common import ports

# libc names and the system calls strace shows for them (recv → recvfrom, send → sendto).
RECV = "recv|recvfrom|read"
SEND = "send|sendto|write"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"tinyproxy-chain": _tinyproxy(), "h2o-proxy": _h2o(), "krb5-kdc": _krb5()}


def _tinyproxy():
    F, B, O = ports("tinyproxy-chain")[:3]
    # Counted with strace -f -yy on a run without the tracer (no recording of this system
    # was looked at; strace slowed it to 93 launcher and 106 client-2 requests). tinyproxy
    # reads a request in about ten recv calls (a line at a time) and answers in several
    # sends. The front (argv front.conf) accepted 94 connections on F, made 931 receives
    # and 814 sends on them, and 1442 receives and 372 sends on its connections to the
    # back (peer-port B); the back (argv back.conf) accepted 200 connections on B (the
    # front's and client 2's), made 2282 receives and 1733 sends on them, and 2670
    # receives and 866 sends on its connections to the origin (peer-port O). The origin
    # (`tinyproxy-origin`, http.server) accepted 200 connections and made 369 receives and
    # 398 sends on them. The launcher's client made 435 receives from the front. Each nth
    # below is about 40 % of those counts; the clients wait 3 s, the proxies 2 s.
    front, back = "exe=*tinyproxy,argv=front.conf", "exe=*tinyproxy,argv=back.conf"
    origin, c1, c2 = "argv=tinyproxy-origin", "argv=systems.py tinyproxy-chain", "argv=tinyproxy-client --name 2"
    return [
        ("back-reset", "reset", f"{RECV}:errno=ECONNRESET,{back},local-port={B},nth=900,count=1"),
        ("upstream-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={B},nth=600,count=1"),
        ("origin-link-drops", "reset", f"{RECV}:close,{back},peer-port={O},nth=1000,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{back},local-port={B},nth=900,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{front},peer-port={B},nth=600,count=1"),
        ("origin-corrupt", "corrupt", f"{RECV}:corrupt=3,{origin},local-port={O},nth=150,count=1"),
        ("back-short", "short", f"{SEND}:short=20,{back},local-port={B},nth=700,count=1"),
        ("origin-short", "short", f"{RECV}:short=6,{origin},local-port={O},nth=150,count=1"),
        ("origin-slow", "delay", f"{SEND}:delay=3s,{origin},local-port={O},nth=160,count=1"),
        ("back-slow", "delay", f"{RECV}:delay=3s,{back},peer-port={O},nth=1000,count=1"),
        ("back-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={B},nth=900"),
        ("front-killed", "kill", f"{RECV}:kill=SIGKILL,{front},local-port={F},nth=400"),
        ("origin-killed", "kill", f"{RECV}:kill=SIGKILL,{origin},local-port={O},nth=150"),
        ("back-stopped", "stop", f"{RECV}:kill=SIGSTOP,{back},local-port={B},nth=900"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},peer-port={B},nth=600"),
        ("back-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},local-port={B},nth=80,count=1"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=40,count=1"),
        ("back-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{back},peer-port={O},nth=350,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=400,count=20"),
        ("client-code", "code", f"py:sut.tinyproxy_chain:OneShot.fetch:raise=TimeoutError,nth=50,{c1}"),
        ("client2-code", "code", f"py:sut.tinyproxy_chain:OneShot.fetch:raise=ConnectionResetError,nth=50,{c2}"),
        ("origin-code", "code",
         f"py:http.server:BaseHTTPRequestHandler.send_response:raise=BrokenPipeError,nth=150,{origin}"),
    ]


def _h2o():
    P, O = ports("h2o-proxy")[:2]
    # Counted with strace -f -yy on a run without the tracer (no recording of this system
    # was looked at; 120 launcher requests, 150 client-2 steps of two streams). The h2o
    # server process (exe h2o, started by the Perl start_server master, which makes no
    # socket calls on these ports) accepted 6 connections on P (the launcher's probe, the
    # two clients' connections and their reconnections), read them 279 times and wrote
    # them (writev) 374 times; on its keep-alive connections to the origin (peer-port O)
    # it made 776 reads, 417 recvs and 420 writevs. The origin (`h2o-origin`) accepted 4
    # connections and made 424 receives and 840 sends (headers, body). Each nth is about
    # 40 % of those counts; the clients wait 3 s, h2o 2 s on the origin. h2o-killed's nth
    # is 60 %: start_server starts a new h2o server after the kill, with counters of its
    # own, and at nth=110 that one reached it too (two kills in one case).
    h2o, origin = "exe=*h2o", "argv=h2o-origin"
    c1, c2 = "argv=systems.py h2o-proxy", "argv=h2o-client --name 2"
    return [
        ("upstream-reset", "reset", f"{RECV}:errno=ECONNRESET,{h2o},peer-port={O},nth=300,count=1"),
        ("client-conn-reset", "reset", f"{RECV}:errno=ECONNRESET,{h2o},local-port={P},nth=110,count=1"),
        ("origin-drops", "reset", f"{RECV}:close,{origin},local-port={O},nth=170,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{h2o},peer-port={O},nth=300,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{h2o},local-port={P},nth=110,count=1"),
        ("origin-corrupt", "corrupt", f"{RECV}:corrupt=3,{origin},local-port={O},nth=170,count=1"),
        ("upstream-short", "short", f"writev:short=10,{h2o},peer-port={O},nth=170,count=1"),
        ("origin-short", "short", f"{RECV}:short=6,{origin},local-port={O},nth=170,count=1"),
        ("origin-slow", "delay", f"{SEND}:delay=3s,{origin},local-port={O},nth=340,count=1"),
        ("h2o-slow", "delay", f"writev:delay=4s,{h2o},local-port={P},nth=150,count=1"),
        ("h2o-killed", "kill", f"{RECV}:kill=SIGKILL,{h2o},local-port={P},nth=170"),
        ("origin-killed", "kill", f"{RECV}:kill=SIGKILL,{origin},local-port={O},nth=170"),
        ("h2o-stopped", "stop", f"{RECV}:kill=SIGSTOP,{h2o},peer-port={O},nth=300"),
        ("origin-stopped", "stop", f"{RECV}:kill=SIGSTOP,{origin},local-port={O},nth=170"),
        ("h2o-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{h2o},local-port={P},nth=3,count=1"),
        ("origin-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{origin},local-port={O},nth=2,count=1"),
        ("h2o-enospc", "exhaust", f"writev:errno=ENOSPC,{h2o},local-port={P},nth=150,count=1"),
        ("h2o-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{h2o},local-port={P},after=100,count=30"),
        ("client-code", "code", f"py:sut.http_cache:Client.fetch:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.h2o_proxy:H2Client.exchange:raise=ConnectionResetError,nth=60,{c2}"),
        ("origin-code", "code",
         f"py:http.server:BaseHTTPRequestHandler.send_response:raise=BrokenPipeError,nth=200,{origin}"),
    ]


def _krb5():
    K, A = ports("krb5-kdc")[:2]
    # Counted with strace -f -yy on a run without the tracer (no recording of this system
    # was looked at; strace slowed it to 102 launcher steps, 97 tcp-client steps and 56
    # admin steps). The principals need no preauthentication, so kinit makes one AS
    # exchange, kvno one TGS exchange and kadmin one AS exchange (for kadmin/admin) then
    # four writes and four reads on its RPC connection to kadmind. The KDC (one process)
    # received 316 UDP requests (recvfrom, local-port K) and answered each (sendto); it
    # accepted 195 TCP connections on K (the tcp client's), read them 389 times (length,
    # then request: `read`, which no UDP call matches) and answered 194 times (sendmsg).
    # kadmind (one process) accepted 57 connections on A, read them 281 times and wrote
    # them 224 times. Every client program
    # names its step in its command line (the credentials cache `-c FILE:DIR/udp.I.cc`),
    # so `exe=*kinit,argv=/udp.40.cc` is one process. The launcher calls `kvno` once per
    # step, the tcp client `kinit` once per step, the admin client `kadmin` once per step.
    # A control recorded with the tracer (only its client summary read) made 85 launcher,
    # 75 tcp and 45 admin steps, so each nth is about 40 % of those: about 260 UDP
    # requests, 75 TCP connections (150 reads), 45 kadmind connections (about 225 reads).
    kdc, kadmind = "exe=*krb5kdc", "exe=*kadmind"
    c1, tcp, admin = "argv=systems.py krb5-kdc", "argv=krb5-client --name tcp", "argv=krb5-client --name admin"
    return [
        ("kdc-tcp-reset", "reset", f"read:errno=ECONNRESET,{kdc},local-port={K},nth=60,count=1"),
        ("kadmind-reset", "reset", f"{RECV}:errno=ECONNRESET,{kadmind},local-port={A},nth=100,count=1"),
        ("kadmind-drops", "reset", f"{RECV}:close,{kadmind},local-port={A},nth=100,count=1"),
        ("kvno-tcp-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=*kvno,argv=/tcp.30.cc,peer-port={K},nth=1,count=1"),
        ("kdc-request-corrupt", "corrupt", f"recv|recvfrom:corrupt=8,{kdc},local-port={K},nth=110,count=1"),
        ("kinit-reply-corrupt", "corrupt",
         f"recv|recvfrom:corrupt=10,exe=*kinit,argv=/udp.40.cc,peer-port={K},nth=1,count=1"),
        ("kadmind-request-corrupt", "corrupt", f"{RECV}:corrupt=6,{kadmind},local-port={A},nth=100,count=1"),
        ("kdc-short", "short", f"sendmsg|writev:short=20,{kdc},local-port={K},nth=30,count=1"),
        ("kadmind-short", "short", f"{SEND}:short=10,{kadmind},local-port={A},nth=80,count=1"),
        ("kdc-slow", "delay", f"send|sendto:delay=3s,{kdc},local-port={K},nth=110,count=1"),
        ("kadmind-slow", "delay", f"{SEND}:delay=5s,{kadmind},local-port={A},nth=80,count=1"),
        ("kdc-killed", "kill", f"recv|recvfrom:kill=SIGKILL,{kdc},local-port={K},nth=110"),
        ("kadmind-killed", "kill", f"{RECV}:kill=SIGKILL,{kadmind},local-port={A},nth=100"),
        ("kdc-stopped", "stop", f"read:kill=SIGSTOP,{kdc},local-port={K},nth=60"),
        ("kadmind-stopped", "stop", f"{RECV}:kill=SIGSTOP,{kadmind},local-port={A},nth=100"),
        ("kdc-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{kdc},local-port={K},nth=30,count=1"),
        ("kadmind-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{kadmind},local-port={A},nth=20,count=1"),
        ("kdc-enobufs", "exhaust", f"send|sendto:errno=ENOBUFS,{kdc},local-port={K},nth=110,count=1"),
        ("kdc-eagain-storm", "exhaust", f"recv|recvfrom:errno=EAGAIN,{kdc},local-port={K},after=100,count=30"),
        ("client-code", "code", f"py:sut.krb5_kdc:kvno:raise=TimeoutError,nth=50,{c1}"),
        ("tcp-client-code", "code", f"py:sut.krb5_kdc:kinit:raise=ConnectionResetError,nth=35,{tcp}"),
        ("admin-code", "code", f"py:sut.krb5_kdc:kadmin:raise=TimeoutError,nth=20,{admin}"),
    ]
