"""Fault cases of the validation systems added on 2026-11-29 for validation run 11 (branch
loc-sysq). No method has been run on them. The categories and the SPEC grammar are those
of `faults.py`; every SPEC is narrowed to one process and one call, mid-run.

Recorded on 2026-11-29 for validation run 11 (`run.py --record-only` into /tmp/val11/loc-
sysq with the lead's build /tmp/rec12/culprit: 3 normal runs, the control and every case per
system, 82 recordings, none with lost entries), then checked with `run.py --check --reuse`
on those recordings (injection records and client summaries only, no model, no ranking):
every case of the three systems fired, each in one process (one injection, the EAGAIN storms
25 or 20), no corrupt or short landed on a call that moved no byte, no normal run or control
holds an injection record, and every normal run and control ended with all steps ok (120/120
and 60/60). Recorded again before the check: trio-chain whole (its services let trio's
BrokenResourceError end them, so a first recording's single reset failed 91 of 180 steps;
fixed in sut/trio_chain.py), fpm-memcache's worker-slow (its first SPEC's delay outlived the
run: the worker was stopped inside the delayed write and the trial held no injection record,
although a client saw the 504) and unicorn-store's request-corrupt (its first recording's
corrupt landed on a receive that found nothing, EAGAIN). In 16 of the 70 cases no client saw
a failure (the system absorbed the fault): in fpm-memcache fastcgi-reset, upstream-reset,
fastcgi-corrupt, worker-killed and worker-enospc (nginx sends the request again on a new
connection to the pool), nginx-emfile (nginx accepts the waiting connection a little later)
and memcached's EAGAIN storm; in unicorn-store the store's short send (Ruby writes the
rest), worker-emfile (the connection waits in the backlog for the next accept) and both
EAGAIN storms; in trio-chain both short transfers (trio sends, and the frame reader
receives, the rest), front-emfile (trio's serve_tcp accepts again 100 ms later) and both
EAGAIN storms. fpm-memcache's upstream EAGAIN storm failed 20 steps: nginx waits on edge-
triggered epoll, so an EAGAIN with the answer already queued leaves the request until
nginx's 1.5 s timeout, once per injected call."""

from sut.common import ports

RECV = "recv|read|recvfrom|recvmsg|readv"
SEND = "send|write|sendto|sendmsg|writev"


def cases():
    """Every system of this module: {system: [(case, category, SPEC), ...]}."""
    return {"fpm-memcache": _fpm(), "unicorn-store": _unicorn(), "trio-chain": _trio()}


def _fpm():
    F1, MC, FPM, F2 = ports("fpm-memcache")[:4]
    # Counted with strace -f on a run without the tracer (no recording of this system was
    # looked at). The launcher takes 120 steps on nginx's first site (F1) and client 2 60
    # on the second (F2); a step is a PUT and a GET: 240 + 120 requests. nginx's worker
    # (the master does no socket I/O) accepts 2 connections on each site (the probe, the
    # client), receives the launcher's requests on F1 about 345 times (a PUT's head and
    # body sometimes apart), client 2's on F2 about 172 times, and answers each with one
    # writev. Each site has its own upstream keep-alive cache of one connection, and a
    # client sends one request at a time: each site's requests travel on one FastCGI
    # connection for the whole run, held by the pool worker that accepted it (the third
    # worker accepts only the probe on FPM). nginx sends each request in one writev and
    # receives each answer in one receive (peer-port FPM: 360 each). Site 1's pool worker
    # reads its FastCGI connection (local-port FPM) 1782 times (read(), a record header
    # and its content apart: 7 or 8 reads a request, the same count every run) and writes
    # each answer in one write (240); it sends memcached one command a request (peer-port
    # MC: 240) and receives 478 times (the answer, and before most answers a receive that
    # finds nothing yet: EAGAIN); site 2's worker does half of each (889 reads, 120
    # writes, 120 commands, 238 receives). libmemcached's calls are not traced (PHP
    # loads the extension with RTLD_DEEPBIND, see sut/fpm_memcache.py): no SPEC can reach
    # the workers' side of memcached (a first check's reset there never fired), so the
    # pool's cases are on its FastCGI side. So a SPEC on the pool (exe php-fpm8.2 with a
    # port key; the master has no socket I/O) counts to more than site 2's worker ever
    # reaches: it fires in site 1's worker only. A worker that replaces a dead one (or
    # takes over site 1's connection after a failure) counts from zero and cannot reach
    # those counts before the run ends. memcached (worker threads) receives 360 commands
    # (read, local-port MC; 3 empty reads at closes) and answers each with one sendmsg; it
    # accepts 3 connections (the probe and the two workers), nginx 4, the pool 3, all
    # before the workload: the one accept case comes at nginx's second accept on F1 (the
    # launcher's client). libmemcached gives up after 1 s, nginx on the pool after 1.5 s,
    # a client after 2 s (worker-slow's delay, 2 s at the 120th answer, ends before the
    # run: a first recording's 3 s at the 180th outlived it, see above); the pool's master kills a worker stuck 4 s on a request and
    # forks a new one for a worker that died, and nginx's master forks a new worker for
    # one that died. Client 2 receives 120 times; the launcher calls KvClient.put 120
    # times, client 2 KvClient.get 60 times.
    nginx, fpm, mc = "exe=nginx", "exe=php-fpm8.2", "exe=memcached"
    c1, c2 = "argv=systems.py fpm-memcache", "argv=fpm-client --name 2"
    return [
        ("memcached-reset", "reset", f"{RECV}:errno=ECONNRESET,{mc},local-port={MC},nth=180,count=1"),
        ("fastcgi-reset", "reset", f"{RECV}:errno=ECONNRESET,{fpm},local-port={FPM},nth=1200,count=1"),
        ("upstream-reset", "reset", f"{RECV}:errno=ECONNRESET,{nginx},peer-port={FPM},nth=180,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{nginx},local-port={F1},nth=170,count=1"),
        ("command-corrupt", "corrupt", f"{RECV}:corrupt=3,{mc},local-port={MC},nth=180,count=1"),
        ("fastcgi-corrupt", "corrupt", f"{RECV}:corrupt=4,{fpm},local-port={FPM},nth=1200,count=1"),
        ("upstream-corrupt", "corrupt", f"{RECV}:corrupt=4,{nginx},peer-port={FPM},nth=180,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=60,count=1"),
        ("upstream-short", "short", f"{RECV}:short=7,{nginx},peer-port={FPM},nth=180,count=1"),
        ("memcached-slow", "delay", f"{SEND}:delay=2s,{mc},local-port={MC},nth=180,count=1"),
        ("worker-slow", "delay", f"{SEND}:delay=2s,{fpm},local-port={FPM},nth=120,count=1"),
        ("memcached-killed", "kill", f"{RECV}:kill=SIGKILL,{mc},local-port={MC},nth=180"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{fpm},local-port={FPM},nth=1200"),
        ("nginx-killed", "kill", f"{RECV}:kill=SIGKILL,{nginx},local-port={F1},nth=170"),
        ("memcached-stopped", "stop", f"{RECV}:kill=SIGSTOP,{mc},local-port={MC},nth=180"),
        ("worker-stopped", "stop", f"{RECV}:kill=SIGSTOP,{fpm},local-port={FPM},nth=1200"),
        ("nginx-stopped", "stop", f"{RECV}:kill=SIGSTOP,{nginx},local-port={F1},nth=170"),
        ("nginx-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{nginx},local-port={F1},nth=2,count=1"),
        ("memcached-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{mc},local-port={MC},nth=180,count=1"),
        ("worker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{fpm},local-port={FPM},nth=180,count=1"),
        ("memcached-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{mc},local-port={MC},after=170,count=25"),
        ("upstream-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{nginx},peer-port={FPM},after=170,count=20"),
        ("client-code", "code", f"py:sut.kv_http:KvClient.put:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=ConnectionResetError,nth=30,{c2}"),
    ]


def _unicorn():
    U, S, W0, W1 = ports("unicorn-store")[:4]
    # Counted with strace -f on a run without the tracer (no recording of this system was
    # looked at). unicorn's master and workers are one command line (exe ruby, the unicorn
    # script with unicorn.rb), the store another (store.rb). The launcher takes 120 steps
    # on worker 0's own port (W0) and client 2 60 on worker 1's (W1); a step is a PUT and
    # a GET, each on a new connection (unicorn closes every connection after its answer):
    # 240 + 120 requests. Worker 0 accepts 241 connections on W0 (the probe and the
    # requests), receives (recvfrom) about 245 times (a request a receive, a few PUTs in
    # two), writes each answer in four writes (960); it sends the store one command a
    # request (peer-port S: 240 writes) and receives each answer once (240, after waiting
    # for it). Worker 1 does half of each (121 accepts, 125 receives, 480 writes, 120
    # commands). Traced, a worker sometimes tries a receive before a PUT's body has come
    # (unicorn reads, then waits on EAGAIN: 13 of about 500 receives in one recording), so
    # a corrupt on W0 can land on a receive that finds nothing and change no byte (the
    # first recording's request-corrupt did: recorded again, see above). The master does no
    # socket I/O; a SPEC keyed on W0 or W1 names one worker;
    # a SPEC keyed on the store port counts past what worker 1 reaches (120), so it fires in
    # worker 0. The store (a thread per connection, the counters shared by the process)
    # reads 360 commands (read, local-port S, after waiting until the socket is readable;
    # 2 empty reads at closes) and writes 360 answers; it accepts 3 connections (the probe
    # and the two workers), before the workload. A worker gives up on the store after 1
    # s; a client on a worker after 2 s; the master kills a worker silent for 5 s
    # (timeout) and forks a new one for a worker that died, which listens on the same own
    # port and counts from zero. Client 2 receives about 330 times; the launcher calls
    # KvClient.put 120 times, client 2 KvClient.get 60 times.
    uni, store = "exe=ruby*,argv=unicorn.rb", "exe=ruby*,argv=store.rb"
    c1, c2 = "argv=systems.py unicorn-store", "argv=unicorn-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=180,count=1"),
        ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{uni},peer-port={S},nth=150,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{uni},local-port={W0},nth=120,count=1"),
        ("worker1-reset", "reset", f"{RECV}:errno=ECONNRESET,{uni},local-port={W1},nth=60,count=1"),
        ("command-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=180,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=4,{uni},peer-port={S},nth=150,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{uni},local-port={W0},nth=120,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=160,count=1"),
        ("store-short", "short", f"{SEND}:short=6,{store},local-port={S},nth=180,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=180,count=1"),
        ("worker-slow", "delay", f"{SEND}:delay=3s,{uni},local-port={W0},nth=480,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=180"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{uni},local-port={W0},nth=150"),
        ("worker1-killed", "kill", f"{SEND}:kill=SIGKILL,{uni},local-port={W1},nth=300"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=180"),
        ("worker-stopped", "stop", f"{RECV}:kill=SIGSTOP,{uni},local-port={W0},nth=150"),
        ("worker-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{uni},local-port={W0},nth=120,count=1"),
        ("store-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{store},local-port={S},nth=180,count=1"),
        ("worker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{uni},peer-port={S},nth=150,count=1"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=170,count=25"),
        ("worker-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{uni},local-port={W0},after=110,count=20"),
        ("client-code", "code", f"py:sut.kv_http:KvClient.put:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.kv_http:KvClient.get:raise=ConnectionResetError,nth=30,{c2}"),
    ]


def _trio():
    F, S = ports("trio-chain")[:2]
    # Counted with strace -f on a run without the tracer (no recording of this system was
    # looked at). Every process is CPython on trio, told apart by its command line. The
    # launcher takes 120 steps and client 2 60 (a step is a put and a get, each one frame
    # each way on the client's one connection): 360 requests. Every reader waits until its
    # socket is readable before it receives, so a frame is one receive (recvfrom) and no
    # receive finds nothing. The front accepts 3 connections on F (the probe and the two
    # clients), receives 360 requests on them (local-port F; 3 empty receives at closes)
    # and sends 360 answers (sendto); it keeps 2 connections to the store (made at the
    # first requests: its only connect calls), sends each request on (peer-port S: 360)
    # and receives 360 answers. The store accepts 3 connections (the probe and the two
    # pool connections), receives 360 requests (local-port S; one empty receive) and
    # sends 360 answers. The accepts all come before or at the start of the workload: the
    # one accept case is the front's third (client 2's connection; trio's serve_tcp logs
    # EMFILE and accepts again after 100 ms). The front gives up on the store after 1 s
    # (trio.move_on_after), a client on the front after 2 s. Client 2 receives 120 times,
    # the launcher 240. The store calls Store.handle 360 times, the front Pool.call 360
    # times, the launcher Client.put 120 times, client 2 Client.get 60 times.
    front, store = "argv=trio-front", "argv=trio-store"
    c1, c2 = "argv=systems.py trio-chain", "argv=trio-client --name 2"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=180,count=1"),
        ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={S},nth=180,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=180,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=180,count=1"),
        ("answer-corrupt", "corrupt", f"{RECV}:corrupt=6,{front},peer-port={S},nth=180,count=1"),
        ("client2-corrupt", "corrupt", f"{RECV}:corrupt=4,{c2},nth=60,count=1"),
        ("store-short", "short", f"{SEND}:short=10,{store},local-port={S},nth=180,count=1"),
        ("front-short", "short", f"{RECV}:short=20,{front},local-port={F},nth=180,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=180,count=1"),
        ("front-slow", "delay", f"{SEND}:delay=3s,{front},local-port={F},nth=180,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=180"),
        ("front-killed", "kill", f"{SEND}:kill=SIGKILL,{front},peer-port={S},nth=180"),
        ("store-stopped", "stop", f"{RECV}:kill=SIGSTOP,{store},local-port={S},nth=180"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=180"),
        ("front-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{front},local-port={F},nth=3,count=1"),
        ("store-enobufs", "exhaust", f"{SEND}:errno=ENOBUFS,{store},local-port={S},nth=180,count=1"),
        ("front-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{front},local-port={F},nth=180,count=1"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=170,count=25"),
        ("link-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},peer-port={S},after=170,count=20"),
        ("store-code", "code", f"py:sut.trio_chain:Store.handle:raise=KeyError,nth=180,{store}"),
        ("front-code", "code", f"py:sut.trio_chain:Pool.call:raise=ConnectionResetError,nth=180,{front}"),
        ("client-code", "code", f"py:sut.trio_chain:Client.put:raise=TimeoutError,nth=60,{c1}"),
        ("client2-code", "code", f"py:sut.trio_chain:Client.get:raise=ConnectionResetError,nth=30,{c2}"),
    ]
