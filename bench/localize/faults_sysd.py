"""Fault cases of the validation systems added on 2026-11-28 for validation run 5 (branch
loc-sysd): ruby-chain and perl-starman. No method has been run on them. The categories and
the SPEC grammar are those of `faults.py`; every SPEC is narrowed to one process and one
call, mid-run."""

from sut.common import ports

RECV = "recv|read|recvfrom|recvmsg|readv"
SEND = "send|write|sendto|sendmsg|writev"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"ruby-chain": _ruby(), "perl-starman": _perl()}


def _ruby():
    F, B = ports("ruby-chain")[:2]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at): each Ruby service is MRI with a WEBrick thread per connection. The
    # backend reads its side of the front's pool (local-port B, two connections) about
    # 600 times (a PUT's body often in a read of its own; one read in 600 found nothing)
    # and writes it 960 times (headers, then body). The front reads its clients'
    # connections (local-port F) about 660 times and writes them 960; it reads the pool
    # (peer-port B, `recvfrom`) about 1 670 times, 710 of which find nothing (EAGAIN:
    # Net::HTTP reads before it waits), so only errno faults go there: a corrupt or short
    # receive could land on an empty read. Ruby writes the rest of a short write itself.
    # The front gives up on the backend after 1 s (read_timeout, no retry), a client on the
    # front after 2 s. The executable is ruby3.1; the argv names the role after the script.
    front, back = "exe=ruby*,argv=service.rb front", "exe=ruby*,argv=service.rb back"
    return [
        ("backend-reset", "reset", f"{RECV}:errno=ECONNRESET,{back},local-port={B},nth=300,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={B},nth=600,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=300,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{back},local-port={B},nth=300,count=1"),
        ("front-corrupt", "corrupt", f"{RECV}:corrupt=4,{front},local-port={F},nth=350,count=1"),
        ("request-short", "short", f"{RECV}:short=7,{back},local-port={B},nth=320,count=1"),
        ("reply-short", "short", f"{SEND}:short=9,{front},local-port={F},nth=400,count=1"),
        ("backend-slow", "delay", f"{SEND}:delay=2s,{back},local-port={B},nth=500,count=1"),
        ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={B},nth=400"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=400"),
        ("backend-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},nth=2,count=1"),
        ("backend-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{back},local-port={B},nth=500,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=200,count=30"),
        ("client-code", "code", "py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=150,argv=systems.py ruby-chain"),
        ("client2-code", "code", "py:sut.kv_http:KvClient.get:raise=TimeoutError,nth=60,argv=ruby-client --name 2"),
    ]


def _perl():
    P, M = ports("perl-starman")[:2]
    # Counted with strace on a run without the tracer: the Starman master does no socket
    # I/O of its own; each worker accepts on the shared socket, and a client's keep-alive
    # connection stays with the worker that accepted it. The worker of the launcher's
    # client reads it (local-port P) about 240 times (a request a read), writes it 480
    # times (headers, then body) and sends memcached (sendmsg, peer-port M) 240 commands;
    # it reads memcached's replies about 480 times, half of them empty (EAGAIN: the client
    # reads before it polls), so only faults of the send go there. The second client's
    # worker sees a quarter of that (60 reads, 120 writes, 60 commands), the third worker
    # only the launcher's port probe. memcached (one process, worker threads) reads about
    # 320 commands (local-port M) and answers each with one sendmsg. A worker fault comes
    # at two thirds of the busy worker's calls, late enough that neither other worker can
    # reach its count when the launcher's client, after the fault, connects again and lands
    # on it (60 + 80 < 160 reads, 120 + 160 < 330 writes). Cache::Memcached::Fast gives up
    # after 1 s; a client after 2 s. Every worker runs `perl /usr/bin/starman ...`.
    worker, mc = "exe=perl*,argv=bin/starman", "exe=memcached"
    return [
        ("worker-reset", "reset", f"{RECV}:errno=ECONNRESET,{worker},local-port={P},nth=160,count=1"),
        ("memcached-reset", "reset", f"{RECV}:errno=ECONNRESET,{mc},local-port={M},nth=200,count=1"),
        ("cache-link-drops", "reset", f"{SEND}:close,{worker},peer-port={M},nth=160,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{worker},local-port={P},nth=160,count=1"),
        ("command-corrupt", "corrupt", f"{RECV}:corrupt=4,{mc},local-port={M},nth=200,count=1"),
        ("reply-short", "short", f"{SEND}:short=9,{worker},local-port={P},nth=330,count=1"),
        ("memcached-slow", "delay", f"{SEND}:delay=2s,{mc},local-port={M},nth=200,count=1"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{worker},local-port={P},nth=160"),
        ("memcached-killed", "kill", f"{RECV}:kill=SIGKILL,{mc},local-port={M},nth=200"),
        ("worker-stopped", "stop", f"{RECV}:kill=SIGSTOP,{worker},local-port={P},nth=160"),
        ("memcached-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{mc},nth=2,count=1"),
        ("worker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{worker},local-port={P},nth=330,count=1"),
        ("memcached-eagain", "exhaust", f"{RECV}:errno=EAGAIN,{mc},local-port={M},after=150,count=30"),
        ("client-code", "code", "py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=150,argv=systems.py perl-starman"),
        ("client2-code", "code", "py:sut.kv_http:KvClient.put:raise=TimeoutError,nth=20,argv=starman-client --name 2"),
    ]
