"""The fault cases of the suite: per system, (case name, category, `--inject` SPEC).

Categories (the issue's list):

| category | what is injected | effect |
|---|---|---|
| `reset` | `errno=ECONNRESET` on a receive, or `close` (the connection shut down for real) | an error on one connection |
| `corrupt` | `corrupt=N` on a receive | the bytes are garbled, the call returns normally: silent desynchronization |
| `short` | `short=N` on a receive or send | a partial transfer (the rest stays queued / is not sent) |
| `delay` | `delay=D` on a receive or send, past the peer's timeout | a timeout somewhere else |
| `kill` | `kill=SIGKILL` at the n-th matching call | the process dies there, no error of its own |
| `stop` | `kill=SIGSTOP` at the n-th matching call | the process hangs there: no error anywhere |
| `exhaust` | `errno=EMFILE` on accept, `errno=ENOSPC` on a send/write, or a storm of `errno=EAGAIN` | resource exhaustion |
| `code` | `py:MODULE:QUALNAME:raise=EXC,nth=N` | a Python function of a client or server raises on its n-th call |

Every SPEC is narrowed to one process (`exe=`, `argv=`) and to one call (`nth=`, `count=`),
mid-run. Ports come from `sut.common.ports`, so the SPECs follow `LOCALIZE_PORT_BASE`.
"""

import faults_sysc
from sut.common import ports

import faults_sysd
import faults_syse
import faults_sysf
import faults_sysg
import faults_sysh
import faults_sysi
import faults_sysj
import faults_sysk
import faults_sysl
import faults_sysm
import faults_sysn
import faults_syso
import faults_sysq
import faults_sysr
import faults_syst
import faults_sysp
import faults_syss
import faults_sysu
import faults_sysv
import faults_sysx
import faults_sysw

RECV = "recv|read|recvfrom|recvmsg|readv"
SEND = "send|write|sendto|sendmsg|writev"
ANY = "recv|read|recvfrom|recvmsg|send|write|sendto|sendmsg|epoll_wait|poll|select"


def _tuning():
    F, M1, M2 = ports("memcache-proxy")[:3]
    H, B1, B2 = ports("http-proxy")[:3]
    return {
        "memcache-proxy": [
            ("reset", "reset", f"read:errno=ECONNRESET,exe=*nutcracker,peer-port={M1},nth=30,count=1"),
            ("corrupt-reply", "corrupt", f"read:corrupt=4,exe=*nutcracker,peer-port={M1},nth=30,count=1"),
            ("slow-backend", "delay", f"sendmsg:delay=1s,exe=*memcached,local-port={M1},nth=30,count=1"),
            ("backend-drops", "reset", f"read:close,exe=*memcached,local-port={M2},nth=30,count=1"),
            ("short-reply", "short", f"read:short=3,exe=*nutcracker,peer-port={M2},nth=40,count=1"),
            ("backend-killed", "kill", f"read:kill=SIGKILL,exe=*memcached,local-port={M1},nth=40"),
            ("backend-stopped", "stop", f"read:kill=SIGSTOP,exe=*memcached,local-port={M2},nth=30"),
            ("proxy-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=*memcached,nth=1,count=1"),
            ("client-code", "code", "py:sut.common:LineClient.line:raise=TimeoutError,nth=90,exe=python3*,argv=memcache-proxy"),
        ],
        "http-proxy": [
            ("reset", "reset", f"recv:errno=ECONNRESET,exe=*haproxy,peer-port={B1},nth=20,count=1"),
            ("corrupt-reply", "corrupt", f"recv:corrupt=6,exe=*haproxy,peer-port={B1},nth=20,count=1"),
            ("slow-backend", "delay", f"recv:delay=1s,exe=*nginx,local-port={B2},nth=20,count=1"),
            ("backend-drops", "reset", f"recv:close,exe=*nginx,local-port={B2},nth=20,count=1"),
            ("short-reply", "short", f"recv:short=20,exe=*haproxy,peer-port={B2},nth=25,count=1"),
            ("backend-killed", "kill", f"recv:kill=SIGKILL,exe=*nginx,local-port={B1},nth=25"),
            ("proxy-stopped", "stop", f"recv:kill=SIGSTOP,exe=*haproxy,local-port={H},nth=40"),
            ("send-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=*nginx,local-port={B1},nth=15,count=1"),
            ("client-code", "code", "py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=60,argv=http-proxy"),
        ],
        "job-queue": [
            ("reset", "reset", "read:errno=ECONNRESET,exe=*beanstalkd,nth=100,count=1"),
            ("corrupt-command", "corrupt", "read:corrupt=3,exe=*beanstalkd,nth=100,count=1"),
            ("stall", "delay", "read:delay=3500ms,exe=*beanstalkd,nth=100,count=1"),
            ("server-drops", "reset", "read:close,exe=*beanstalkd,nth=100,count=1"),
            ("short-read", "short", "read:short=5,exe=*beanstalkd,nth=120,count=1"),
            ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,argv=job-queue-worker --name 1,nth=10"),
            ("server-stopped", "stop", "read:kill=SIGSTOP,exe=*beanstalkd,nth=150"),
            ("eagain-storm", "exhaust", "read:errno=EAGAIN,exe=*beanstalkd,after=80,count=30"),
            ("worker-code", "code", "py:sut.common:LineClient.line:raise=TimeoutError,nth=60,argv=job-queue-worker --name 2"),
        ],
        "pyro-rpc": [
            ("reset", "reset", "recv:errno=ECONNRESET,argv=*pyro-server --name 1*,nth=30,count=1"),
            ("corrupt-header", "corrupt", "recv:corrupt=4,argv=*pyro-server --name 1*,nth=30,count=1"),
            ("slow-reply", "delay", "send:delay=1500ms,argv=*pyro-server --name 2*,nth=20,count=1"),
            ("server-drops", "reset", "recv:close,argv=*pyro-server --name 2*,nth=30,count=1"),
            ("short-read", "short", "recv:short=5,argv=*pyro-server --name 2*,nth=25,count=1"),
            ("server-killed", "kill", f"{RECV}:kill=SIGKILL,argv=*pyro-server --name 1*,nth=40"),
            ("server-stopped", "stop", f"{RECV}:kill=SIGSTOP,argv=*pyro-server --name 2*,nth=30"),
            ("server-emfile", "exhaust", "accept|accept4:errno=EMFILE,argv=*pyro-server --name 2*,nth=1,count=1"),
            ("server-code", "code", "py:Pyro5.server:Daemon.handleRequest:raise=MemoryError,nth=25,argv=pyro-server --name 1"),
        ],
    }


def _validation():
    MA, MB = ports("mqtt-bridge")[:2]
    I1, I2 = ports("irc-network")[:2]
    DN, DU = ports("dns-chain")[:2]
    G = ports("gearman-jobs")[0]
    AF, AB = ports("aiohttp-chain")[:2]
    Z = ports("zookeeper-ensemble")
    R = ports("rabbitmq-queue")[0]
    return {**_validation_first(MA, MB, I1, I2, DN, DU, G, AF, AB, Z, R), **_validation_added()}


def _validation_first(MA, MB, I1, I2, DN, DU, G, AF, AB, Z, R):
    """The validation systems of the first validation run."""
    return {
        "mqtt-bridge": [
            ("broker-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=mosquitto,local-port={MA},nth=60,count=1"),
            ("bridge-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=mosquitto,peer-port={MA},nth=40,count=1"),
            ("bridge-corrupt", "corrupt", f"{RECV}:corrupt=2,exe=mosquitto,peer-port={MA},nth=40,count=1"),
            ("broker-corrupt", "corrupt", f"{RECV}:corrupt=1,exe=mosquitto,local-port={MB},nth=50,count=1"),
            ("broker-short-send", "short", f"{SEND}:short=3,exe=mosquitto,local-port={MB},nth=50,count=1"),
            ("broker-slow", "delay", f"{SEND}:delay=3s,exe=mosquitto,local-port={MA},nth=60,count=1"),
            ("bridge-killed", "kill", f"{RECV}:kill=SIGKILL,exe=mosquitto,argv=brokerB.conf,nth=80"),
            ("broker-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=mosquitto,argv=brokerA.conf,nth=80"),
            ("broker-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=mosquitto,argv=brokerB.conf,nth=2,count=1"),
            ("subscriber-code", "code", "py:paho.mqtt.client:Client._handle_publish:raise=ValueError,nth=30,argv=mqtt-subscriber --name 2"),
            ("publisher-code", "code", "py:paho.mqtt.client:Client._packet_read:raise=ConnectionResetError,nth=40,argv=mqtt-bridge"),
            ("broker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=mosquitto,local-port={MA},nth=70,count=1"),
            ("subscriber-killed", "kill", f"{RECV}:kill=SIGKILL,argv=mqtt-subscriber --name 1,nth=60"),
        ],
        "irc-network": [
            ("server-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=ngircd,local-port={I1},nth=80,count=1"),
            ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=ngircd,peer-port={I1},nth=40,count=1"),
            ("link-corrupt", "corrupt", f"{RECV}:corrupt=3,exe=ngircd,peer-port={I1},nth=40,count=1"),
            ("client-corrupt", "corrupt", f"{RECV}:corrupt=2,exe=ngircd,local-port={I1},nth=60,count=1"),
            ("link-short", "short", f"{SEND}:short=7,exe=ngircd,peer-port={I1},nth=8,count=1"),
            ("link-slow", "delay", f"{SEND}:delay=3s,exe=ngircd,peer-port={I1},nth=8,count=1"),
            ("server2-killed", "kill", f"{RECV}:kill=SIGKILL,exe=ngircd,argv=ngircd2.conf,nth=60"),
            ("server1-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=ngircd,argv=ngircd1.conf,nth=90"),
            ("server-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=ngircd,argv=ngircd2.conf,nth=2,count=1"),
            ("listener-code", "code", "py:sut.irc_network:IrcClient.read:raise=ConnectionResetError,nth=50,argv=irc-client --name 1"),
            ("sender-code", "code", "py:sut.irc_network:IrcClient.send:raise=BrokenPipeError,nth=70,argv=irc-network"),
            ("server-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,exe=ngircd,argv=ngircd1.conf,after=50,count=30"),
        ],
        "dns-chain": [
            ("upstream-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=unbound,peer-port={DN},nth=30,count=1"),
            ("tcp-client-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=unbound,local-port={DU},nth=40,count=1"),
            ("upstream-corrupt", "corrupt", f"{RECV}:corrupt=2,exe=unbound,peer-port={DN},nth=30,count=1"),
            ("query-corrupt", "corrupt", f"{RECV}:corrupt=12,exe=unbound,local-port={DU},nth=50,count=1"),
            ("tcp-short", "short", f"{SEND}:short=5,exe=unbound,local-port={DU},nth=20,count=1"),
            ("upstream-slow", "delay", f"{SEND}:delay=2s,exe=unbound,peer-port={DN},nth=30,count=1"),
            ("resolver-killed", "kill", f"{RECV}:kill=SIGKILL,exe=unbound,nth=80"),
            ("resolver-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=unbound,nth=60"),
            ("eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,exe=unbound,after=40,count=40"),
            ("udp-client-code", "code", "py:dns.message:from_wire:raise=ValueError,nth=40,argv=dns-chain"),
            ("tcp-client-code", "code", "py:dns.query:tcp:raise=TimeoutError,nth=20,argv=dns-client"),
            ("tcp-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=unbound,local-port={DU},nth=15,count=1"),
        ],
        "gearman-jobs": [
            ("server-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=gearmand,nth=60,count=1"),
            ("worker-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=gearman,peer-port={G},nth=20,count=1"),
            ("server-corrupt", "corrupt", f"{RECV}:corrupt=4,exe=gearmand,nth=60,count=1"),
            ("worker-corrupt", "corrupt", f"{RECV}:corrupt=4,exe=gearman,peer-port={G},nth=20,count=1"),
            ("server-short", "short", f"{SEND}:short=6,exe=gearmand,nth=50,count=1"),
            ("server-slow", "delay", f"{SEND}:delay=3s,exe=gearmand,nth=50,count=1"),
            ("server-killed", "kill", f"{RECV}:kill=SIGKILL,exe=gearmand,nth=70"),
            ("server-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=gearmand,nth=90"),
            ("server-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=gearmand,nth=3,count=1"),
            ("client-code", "code", "py:sut.gearman_jobs:GearmanClient.packet:raise=ConnectionResetError,nth=40,argv=gearman-jobs"),
            ("server-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,exe=gearmand,after=40,count=30"),
            ("server-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=gearmand,nth=40,count=1"),
        ],
        "aiohttp-chain": [
            ("backend-reset", "reset", f"{RECV}:errno=ECONNRESET,argv=aiohttp-service --name back,nth=40,count=1"),
            ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,argv=aiohttp-service --name front,peer-port={AB},nth=30,count=1"),
            ("backend-corrupt", "corrupt", f"{RECV}:corrupt=3,argv=aiohttp-service --name back,nth=40,count=1"),
            ("front-corrupt", "corrupt", f"{RECV}:corrupt=5,argv=aiohttp-service --name front,peer-port={AB},nth=30,count=1"),
            ("backend-short", "short", f"{SEND}:short=20,argv=aiohttp-service --name back,nth=30,count=1"),
            ("backend-slow", "delay", f"{SEND}:delay=2s,argv=aiohttp-service --name back,nth=30,count=1"),
            ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,argv=aiohttp-service --name back,nth=50"),
            ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,argv=aiohttp-service --name front,local-port={AF},nth=40"),
            ("backend-emfile", "exhaust", "accept|accept4:errno=EMFILE,argv=aiohttp-service --name back,nth=1,count=1"),
            ("backend-code", "code", "py:aiohttp.web_protocol:RequestHandler.data_received:raise=ConnectionResetError,nth=30,argv=aiohttp-service --name back"),
            ("front-code", "code", "py:aiohttp.client_reqrep:ClientResponse.json:raise=TimeoutError,nth=30,argv=aiohttp-service --name front"),
            ("backend-enospc", "exhaust", f"{SEND}:errno=ENOSPC,argv=aiohttp-service --name back,nth=40,count=1"),
        ],
        "zookeeper-ensemble": [
            ("client-port-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=java,local-port={Z[0]},nth=60,count=1"),
            ("quorum-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=java,argv=zoo2.cfg,peer-port={Z[5]},nth=40,count=1"),
            ("quorum-corrupt", "corrupt", f"{RECV}:corrupt=4,exe=java,argv=zoo1.cfg,peer-port={Z[5]},nth=50,count=1"),
            ("client-corrupt", "corrupt", f"{RECV}:corrupt=4,exe=java,local-port={Z[0]},nth=60,count=1"),
            ("client-short", "short", f"{SEND}:short=5,exe=java,local-port={Z[2]},nth=60,count=1"),
            ("quorum-slow", "delay", f"{SEND}:delay=4s,exe=java,argv=zoo2.cfg,peer-port={Z[5]},nth=40,count=1"),
            ("follower-killed", "kill", f"{RECV}:kill=SIGKILL,exe=java,argv=zoo3.cfg,nth=300"),
            ("server-stopped", "stop", f"{RECV}:kill=SIGSTOP,exe=java,argv=zoo1.cfg,nth=300"),
            ("server-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=java,argv=zoo3.cfg,nth=3,count=1"),
            ("writer-code", "code", "py:kazoo.client:KazooClient.set:raise=TimeoutError,nth=40,argv=zookeeper-ensemble"),
            ("reader-code", "code", "py:kazoo.client:KazooClient.get_children:raise=ConnectionResetError,nth=30,argv=zk-client"),
            ("client-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=java,local-port={Z[0]},nth=50,count=1"),
        ],
        "rabbitmq-queue": [
            ("broker-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=beam.smp,local-port={R},nth=200,count=1"),
            ("consumer-reset", "reset", f"{RECV}:errno=ECONNRESET,argv=rabbit-consumer --name 1,peer-port={R},nth=20,count=1"),
            ("broker-corrupt", "corrupt", f"{RECV}:corrupt=2,exe=beam.smp,local-port={R},nth=200,count=1"),
            ("consumer-corrupt", "corrupt", f"{RECV}:corrupt=3,argv=rabbit-consumer --name 2,peer-port={R},nth=20,count=1"),
            ("broker-short", "short", f"{SEND}:short=4,exe=beam.smp,local-port={R},nth=150,count=1"),
            ("broker-slow", "delay", f"{SEND}:delay=4s,exe=beam.smp,local-port={R},nth=150,count=1"),
            ("consumer-killed", "kill", f"{RECV}:kill=SIGKILL,argv=rabbit-consumer --name 1,nth=30"),
            ("consumer-stopped", "stop", f"{RECV}:kill=SIGSTOP,argv=rabbit-consumer --name 2,nth=30"),
            ("broker-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=beam.smp,nth=3,count=1"),
            ("consumer-code", "code", "py:pika.adapters.blocking_connection:BlockingChannel.basic_ack:raise=ConnectionResetError,nth=20,argv=rabbit-consumer --name 1"),
            ("broker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=beam.smp,local-port={R},nth=120,count=1"),
            ("consumer-short", "short", f"{RECV}:short=5,argv=rabbit-consumer --name 1,peer-port={R},nth=25,count=1"),
        ],
    }


def _validation_added():
    """The validation systems added after the first validation run (nothing was tuned on
    them, and no run of the method has seen them)."""
    GF, GB = ports("grpc-chain")[:2]
    LP, LC = ports("ldap-syncrepl")[:2]
    TM, TR = ports("tarantool-replicas")[:2]
    W = ports("php-fastcgi")[0]
    # gRPC's connections are idle between calls, and a channel reconnects by itself: a
    # receive that fails there is absorbed, a send that fails loses the call it carried.
    back, front = "argv=grpc-service --name back", "argv=grpc-service --name front"
    prov, cons = "exe=slapd,argv=provider.conf", "exe=slapd,argv=consumer.conf"
    # Tarantool's master makes its first ~520 sends for the replica's initial join (before
    # the workload): its send faults come later; the replica reads the join in a few to a
    # few dozen reads (as the master's sends come), of ~340 in a run: its link faults come
    # at the 120th.
    master, replica = "exe=tarantool,argv=master.lua", "exe=tarantool,argv=replica.lua"
    # lighttpd's worker is the only php-cgi process that reads and writes (its master waits);
    # a respawned worker counts its calls from zero: a worker makes about 1 000 reads in a
    # run, so one killed at its 700th is not killed again.
    php = "exe=php-cgi*"
    return {
        "grpc-chain": [
            ("backend-drops", "reset", f"{SEND}:close,{back},local-port={GB},nth=30,count=1"),
            ("front-reset", "reset", f"{SEND}:errno=ECONNRESET,{front},peer-port={GB},nth=30,count=1"),
            ("backend-corrupt", "corrupt", f"{RECV}:corrupt=3,{back},local-port={GB},nth=40,count=1"),
            ("front-corrupt", "corrupt", f"{RECV}:corrupt=5,{front},local-port={GF},nth=40,count=1"),
            ("backend-short", "short", f"{SEND}:short=20,{back},local-port={GB},nth=30,count=1"),
            ("backend-slow", "delay", f"{SEND}:delay=2s,{back},local-port={GB},nth=30,count=1"),
            ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={GB},nth=50"),
            ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={GF},nth=40"),
            ("backend-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},nth=1,count=1"),
            ("backend-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{back},local-port={GB},nth=40,count=1"),
            ("backend-code", "code", f"py:grpc._server:_call_behavior:raise=MemoryError,nth=30,{back}"),
            ("front-code", "code", f"py:grpc._channel:_UnaryUnaryMultiCallable.__call__:raise=TimeoutError,nth=40,{front}"),
        ],
        "ldap-syncrepl": [
            ("provider-reset", "reset", f"{RECV}:errno=ECONNRESET,{prov},local-port={LP},nth=60,count=1"),
            ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{cons},peer-port={LP},nth=20,count=1"),
            ("link-corrupt", "corrupt", f"{RECV}:corrupt=2,{cons},peer-port={LP},nth=20,count=1"),
            ("writer-corrupt", "corrupt", f"{RECV}:corrupt=3,{prov},local-port={LP},nth=80,count=1"),
            ("provider-short", "short", f"{SEND}:short=5,{prov},local-port={LP},nth=60,count=1"),
            ("provider-slow", "delay", f"{SEND}:delay=3s,{prov},local-port={LP},nth=60,count=1"),
            ("consumer-killed", "kill", f"{RECV}:kill=SIGKILL,{cons},local-port={LC},nth=80"),
            ("provider-stopped", "stop", f"{RECV}:kill=SIGSTOP,{prov},local-port={LP},nth=120"),
            ("provider-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{prov},nth=3,count=1"),
            ("provider-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{prov},local-port={LP},after=50,count=30"),
            ("writer-code", "code", "py:ldap3.core.connection:Connection.add:raise=TimeoutError,nth=40,argv=ldap-syncrepl"),
            ("reader-code", "code", "py:ldap3.strategy.sync:SyncStrategy.receiving:raise=ConnectionResetError,nth=50,argv=ldap-reader --name 1"),
        ],
        "tarantool-replicas": [
            ("master-reset", "reset", f"{RECV}:errno=ECONNRESET,{master},local-port={TM},nth=80,count=1"),
            ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{replica},peer-port={TM},nth=120,count=1"),
            ("link-corrupt", "corrupt", f"{RECV}:corrupt=3,{replica},peer-port={TM},nth=120,count=1"),
            ("reader-corrupt", "corrupt", f"{RECV}:corrupt=2,{replica},local-port={TR},nth=100,count=1"),
            ("master-short", "short", f"{SEND}:short=7,{master},local-port={TM},nth=650,count=1"),
            ("master-slow", "delay", f"{SEND}:delay=3s,{master},local-port={TM},nth=700,count=1"),
            ("replica-killed", "kill", f"{RECV}:kill=SIGKILL,{replica},nth=100"),
            ("master-stopped", "stop", f"{RECV}:kill=SIGSTOP,{master},local-port={TM},nth=150"),
            ("master-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{master},nth=3,count=1"),
            ("master-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{master},local-port={TM},nth=600,count=1"),
            ("writer-code", "code", "py:tarantool.connection:Connection.replace:raise=TimeoutError,nth=50,argv=tarantool-replicas"),
            ("reader-code", "code", "py:tarantool.connection:Connection._recv:raise=ConnectionResetError,nth=60,argv=tt-reader --name 1"),
        ],
        "php-fastcgi": [
            ("client-reset", "reset", f"{RECV}:errno=ECONNRESET,exe=lighttpd,local-port={W},nth=60,count=1"),
            ("worker-reset", "reset", f"read:errno=ECONNRESET,{php},nth=200,count=1"),
            ("request-corrupt", "corrupt", f"{RECV}:corrupt=4,exe=lighttpd,local-port={W},nth=51,count=1"),
            ("worker-corrupt", "corrupt", f"read:corrupt=3,{php},nth=200,count=1"),
            ("worker-short", "short", f"write:short=9,{php},nth=50,count=1"),
            ("worker-slow", "delay", f"write:delay=3s,{php},nth=50,count=1"),
            ("worker-killed", "kill", f"read:kill=SIGKILL,{php},nth=700"),
            ("worker-stopped", "stop", f"read:kill=SIGSTOP,{php},nth=700"),
            ("server-emfile", "exhaust", "accept|accept4:errno=EMFILE,exe=lighttpd,nth=4,count=1"),
            ("server-enospc", "exhaust", f"{SEND}:errno=ENOSPC,exe=lighttpd,local-port={W},nth=40,count=1"),
            ("client-code", "code", "py:http.client:HTTPConnection.getresponse:raise=TimeoutError,nth=40,argv=php-fastcgi"),
            ("counter-code", "code", "py:json:loads:raise=ValueError,nth=20,argv=php-client"),
        ],
    }


def _validation_fresh():
    """Validation systems added for the frozen run of 2026-11-28 (branch loc-fresh): no
    developer of the method has seen them."""
    P, R = ports("mariadb-replication")[:2]
    # The replica's IO thread reads the binlog from the primary (peer-port P); its client
    # port R serves reader 1 only. Every client query is one receive on port P or R.
    pri, rep = "exe=mariadbd,argv=primary.cnf", "exe=mariadbd,argv=replica.cnf"
    return {
        "mariadb-replication": [
            ("primary-reset", "reset", f"{RECV}:errno=ECONNRESET,{pri},local-port={P},nth=150,count=1"),
            ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{rep},peer-port={P},nth=60,count=1"),
            ("link-corrupt", "corrupt", f"{RECV}:corrupt=3,{rep},peer-port={P},nth=60,count=1"),
            ("query-corrupt", "corrupt", f"{RECV}:corrupt=3,{pri},local-port={P},nth=150,count=1"),
            ("primary-short", "short", f"{SEND}:short=5,{pri},local-port={P},nth=150,count=1"),
            ("primary-slow", "delay", f"{SEND}:delay=3s,{pri},local-port={P},nth=150,count=1"),
            ("replica-killed", "kill", f"{RECV}:kill=SIGKILL,{rep},local-port={R},nth=100"),
            ("primary-stopped", "stop", f"{RECV}:kill=SIGSTOP,{pri},local-port={P},nth=200"),
            ("primary-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{pri},nth=3,count=1"),
            ("primary-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{pri},local-port={P},nth=120,count=1"),
            ("writer-code", "code", "py:pymysql.cursors:Cursor.execute:raise=TimeoutError,nth=60,argv=mariadb-replication"),
            ("reader-code", "code", "py:pymysql.connections:Connection._read_packet:raise=ConnectionResetError,nth=100,argv=mdb-reader --name 1"),
        ],
        "rsyslog-relay": _rsyslog(),
        "imap-mailstore": _imap(),
    }


def _imap():
    W, R1, R2 = ports("imap-mailstore")[:3]
    # One imap-login process accepts every connection and reads each client's CAPABILITY
    # and LOGIN, then hands the connection to an imap process of its own (one per session,
    # as nobody). The writer, reader 1 and reader 2 each connect to a port of their own;
    # in a run their sessions read about 580-650, 600 and 250 times (a read that finds
    # nothing, EAGAIN, counts too: the count depends on timing). A client whose command
    # fails logs in again, to a new session that counts its calls from zero: a fault comes
    # at about 2/3 of a session's reads, so that the new session does not reach it too
    # (at the 320th of the writer's, about half, it did).
    login, imap = "exe=imap-login", "exe=imap"
    return [
        ("writer-session-reset", "reset", f"{RECV}:errno=ECONNRESET,{imap},local-port={W},nth=420,count=1"),
        ("login-reset", "reset", f"{RECV}:errno=ECONNRESET,{login},local-port={R2},nth=2,count=1"),
        ("append-corrupt", "corrupt", f"{RECV}:corrupt=3,{imap},local-port={W},nth=420,count=1"),
        ("login-corrupt", "corrupt", f"{RECV}:corrupt=4,{login},local-port={R1},nth=2,count=1"),
        ("reader-session-short", "short", f"{SEND}:short=9,{imap},local-port={R1},nth=420,count=1"),
        ("reader-session-slow", "delay", f"{SEND}:delay=3s,{imap},local-port={R2},nth=150,count=1"),
        ("reader-session-killed", "kill", f"{RECV}:kill=SIGKILL,{imap},local-port={R1},nth=450"),
        ("writer-session-stopped", "stop", f"{RECV}:kill=SIGSTOP,{imap},local-port={W},nth=420"),
        ("login-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{login},nth=3,count=1"),
        ("reader-session-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{imap},local-port={R1},nth=420,count=1"),
        ("writer-code", "code", "py:imaplib:IMAP4.append:raise=TimeoutError,nth=40,argv=imap-mailstore"),
        ("reader-code", "code", "py:imaplib:IMAP4._get_response:raise=ConnectionResetError,nth=300,argv=imap-reader --name 1"),
    ]


def _rsyslog():
    T, L = ports("rsyslog-relay")[:2]
    # The relay reads the senders' lines on T and RELP acknowledgements from the central
    # daemon (peer-port L); the central daemon reads RELP frames on L and writes the file
    # (the tracer sees no write to a regular file there: ENOSPC goes on the relay's RELP send).
    relay, central = "exe=rsyslogd,argv=relay.conf", "exe=rsyslogd,argv=central.conf"
    return [
        ("input-reset", "reset", f"{RECV}:errno=ECONNRESET,{relay},local-port={T},nth=60,count=1"),
        ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{relay},peer-port={L},nth=20,count=1"),
        ("central-reset", "reset", f"{RECV}:errno=ECONNRESET,{central},local-port={L},nth=30,count=1"),
        ("input-corrupt", "corrupt", f"{RECV}:corrupt=2,{relay},local-port={T},nth=60,count=1"),
        ("link-corrupt", "corrupt", f"{RECV}:corrupt=3,{relay},peer-port={L},nth=20,count=1"),
        ("central-corrupt", "corrupt", f"{RECV}:corrupt=4,{central},local-port={L},nth=30,count=1"),
        ("central-short", "short", f"{RECV}:short=5,{central},local-port={L},nth=30,count=1"),
        ("central-slow", "delay", f"{SEND}:delay=3s,{central},local-port={L},nth=30,count=1"),
        ("central-killed", "kill", f"{RECV}:kill=SIGKILL,{central},local-port={L},nth=40"),
        ("relay-stopped", "stop", f"{RECV}:kill=SIGSTOP,{relay},local-port={T},nth=100"),
        ("relay-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{relay},nth=2,count=1"),
        ("relay-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{relay},peer-port={L},nth=50,count=1"),
        ("sender-code", "code", "py:sut.rsyslog_relay:Sender.send:raise=BrokenPipeError,nth=50,argv=rsyslog-relay"),
        ("tailer-code", "code", "py:sut.rsyslog_relay:Tailer.poll:raise=OSError,nth=80,argv=syslog-tailer"),
    ]


def _validation_new():
    """Validation systems added for the frozen run of 2026-11-28 (branch loc-new): no
    developer of the method has seen them."""
    return {"zmq-pipeline": _zmq(), "xmpp-chat": _xmpp(), "squid-cache": _squid()}


def _zmq():
    T, S, L = ports("zmq-pipeline")[:3]
    # libzmq's I/O thread makes every socket call; its eventfd mailbox is no socket, so a
    # port narrows a rule to TCP. In a run each worker reads its task connection (peer-port
    # T) about 66 times, the sink its two result connections (local-port S) about 124
    # times, the lookup service its REQ connections (local-port L) about 133 times and
    # writes them about 126 times, the ventilator writes its task connections about 126.
    w1, w2, sink, look = "argv=zmq-worker --name 1", "argv=zmq-worker --name 2", "argv=zmq-sink", "argv=zmq-lookup"
    vent = "argv=zmq-pipeline"  # only the launcher's command line names the system
    return [
        ("worker-reset", "reset", f"{RECV}:errno=ECONNRESET,{w1},peer-port={T},nth=30,count=1"),
        ("sink-reset", "reset", f"{RECV}:errno=ECONNRESET,{sink},local-port={S},nth=60,count=1"),
        ("lookup-drops", "reset", f"{RECV}:close,{look},local-port={L},nth=60,count=1"),
        ("task-corrupt", "corrupt", f"{RECV}:corrupt=3,{w2},peer-port={T},nth=30,count=1"),
        ("result-corrupt", "corrupt", f"{RECV}:corrupt=2,{sink},local-port={S},nth=60,count=1"),
        ("lookup-short", "short", f"{SEND}:short=4,{look},local-port={L},nth=60,count=1"),
        ("lookup-slow", "delay", f"{SEND}:delay=3s,{look},local-port={L},nth=60,count=1"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{w1},peer-port={T},nth=40"),
        ("lookup-stopped", "stop", f"{RECV}:kill=SIGSTOP,{look},local-port={L},nth=80"),
        ("sink-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{sink},nth=1,count=1"),
        ("ventilator-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{vent},local-port={T},nth=60,count=1"),
        ("worker-code", "code", f"py:zmq.sugar.socket:Socket.recv_json:raise=ValueError,nth=30,{w2}"),
        ("sink-code", "code", f"py:zmq.sugar.socket:Socket.recv_multipart:raise=ValueError,nth=50,{sink}"),
        ("lookup-code", "code", f"py:sut.zmq_pipeline:value:raise=MemoryError,nth=50,{look}"),
    ]


def _xmpp():
    C, K = ports("xmpp-chat")[:2]
    # prosody (one Lua thread on epoll) reads its two client connections (local-port C)
    # about 750 times in a run (a read that finds nothing counts too) and writes them about
    # 375 times; it reads the component's link (local-port K) about 250 times and writes it
    # about 120. The component reads and writes its link (peer-port K) about 123 times.
    pro, calc, peer = "exe=lua*,argv=prosody.cfg.lua", "argv=xmpp-calc", "argv=xmpp-peer"
    return [
        ("c2s-reset", "reset", f"{RECV}:errno=ECONNRESET,{pro},local-port={C},nth=300,count=1"),
        ("component-reset", "reset", f"{RECV}:errno=ECONNRESET,{pro},local-port={K},nth=120,count=1"),
        ("stanza-corrupt", "corrupt", f"{RECV}:corrupt=3,{pro},local-port={C},nth=300,count=1"),
        ("component-corrupt", "corrupt", f"{RECV}:corrupt=2,{calc},peer-port={K},nth=60,count=1"),
        ("c2s-short", "short", f"{SEND}:short=7,{pro},local-port={C},nth=200,count=1"),
        ("component-slow", "delay", f"{SEND}:delay=3s,{pro},local-port={K},nth=60,count=1"),
        ("component-killed", "kill", f"{RECV}:kill=SIGKILL,{calc},peer-port={K},nth=60"),
        ("server-stopped", "stop", f"{RECV}:kill=SIGSTOP,{pro},local-port={C},nth=400"),
        ("server-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{pro},nth=4,count=1"),
        ("server-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{pro},local-port={C},nth=250,count=1"),
        ("component-code", "code", f"py:slixmpp.xmlstream.xmlstream:XMLStream.data_received:raise=ConnectionResetError,nth=60,{calc}"),
        ("peer-code", "code", f"py:slixmpp.stanza.message:Message.reply:raise=ValueError,nth=50,{peer}"),
    ]


def _squid():
    P, O = ports("squid-cache")[:2]
    # squid (one process) reads its two clients' connections (local-port P) about 290
    # times in a run and writes them about 380 times; it reads the origin's connections
    # (peer-port O, short-lived: a few calls each) about 300 times. The origin
    # (http.server, a thread per connection) reads about 250 times and writes about 390.
    # Squid gives up on the origin after 2 s: a 3 s delay of the origin's write was
    # absorbed (no client saw it), 5 s truncates the reply squid had begun to forward.
    squid, origin, client2 = "exe=squid", "argv=squid-origin", "argv=squid-client --name 2"
    return [
        ("origin-reset", "reset", f"{RECV}:errno=ECONNRESET,{squid},peer-port={O},nth=60,count=1"),
        ("client-reset", "reset", f"{RECV}:errno=ECONNRESET,{squid},local-port={P},nth=150,count=1"),
        ("origin-corrupt", "corrupt", f"{RECV}:corrupt=4,{squid},peer-port={O},nth=60,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{squid},local-port={P},nth=150,count=1"),
        ("proxy-short", "short", f"{SEND}:short=9,{squid},local-port={P},nth=150,count=1"),
        ("origin-slow", "delay", f"{SEND}:delay=5s,{origin},local-port={O},nth=100,count=1"),
        ("origin-killed", "kill", f"{RECV}:kill=SIGKILL,{origin},local-port={O},nth=150"),
        ("proxy-stopped", "stop", f"{RECV}:kill=SIGSTOP,{squid},local-port={P},nth=200"),
        ("proxy-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{squid},nth=2,count=1"),
        ("proxy-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{squid},local-port={P},nth=150,count=1"),
        ("client-code", "code", f"py:http.client:HTTPConnection.request:raise=BrokenPipeError,nth=80,{client2}"),
        ("origin-code", "code", f"py:http.server:BaseHTTPRequestHandler.parse_request:raise=ConnectionResetError,nth=100,{origin}"),
    ]


def _validation_run4():
    """Validation systems added on 2026-11-28 for validation run 4 (branch loc-sysa): no
    method has been run on them."""
    return {"varnish-cache": _varnish(), "pdns-knot": _pdns(), "radius-proxy": _radius()}


def _varnish():
    P, O1, O2 = ports("varnish-cache")[:3]
    # Counted with strace on a run without the tracer (no recording of this system was
    # looked at): varnishd's cache child reads its two clients' connections (local-port P)
    # about 300 times and writes them about 400 (writev); it reads each origin's
    # connections about 130 times and writes them about 100. An origin (http.server, a
    # thread per connection) receives about 100 times and sends about 200. The first
    # accept of varnishd is the launcher's port probe. Varnish gives up on an origin after
    # 2 s (first_byte_timeout, between_bytes_timeout).
    vd, o1, o2 = "exe=varnishd", "argv=varnish-origin --name 1", "argv=varnish-origin --name 2"
    client2 = "argv=varnish-client --name 2"
    return [
        ("origin-reset", "reset", f"{RECV}:errno=ECONNRESET,{vd},peer-port={O1},nth=60,count=1"),
        ("client-reset", "reset", f"{RECV}:errno=ECONNRESET,{vd},local-port={P},nth=150,count=1"),
        ("origin-corrupt", "corrupt", f"{RECV}:corrupt=4,{vd},peer-port={O2},nth=60,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{vd},local-port={P},nth=150,count=1"),
        ("proxy-short", "short", f"{SEND}:short=9,{vd},local-port={P},nth=200,count=1"),
        ("origin-short", "short", f"{RECV}:short=7,{vd},peer-port={O2},nth=70,count=1"),
        ("origin-slow", "delay", f"{SEND}:delay=5s,{o2},local-port={O2},nth=100,count=1"),
        ("origin-killed", "kill", f"{RECV}:kill=SIGKILL,{o1},local-port={O1},nth=60"),
        ("proxy-stopped", "stop", f"{RECV}:kill=SIGSTOP,{vd},local-port={P},nth=200"),
        ("proxy-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{vd},nth=2,count=1"),
        ("proxy-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{vd},local-port={P},nth=150,count=1"),
        ("origin-eagain", "exhaust", f"{RECV}:errno=EAGAIN,{vd},peer-port={O1},after=40,count=25"),
        ("client-code", "code", f"py:http.client:HTTPConnection.request:raise=BrokenPipeError,nth=80,{client2}"),
        ("origin-code", "code", f"py:http.server:BaseHTTPRequestHandler.parse_request:raise=ConnectionResetError,nth=60,{o2}"),
    ]


def _pdns():
    K, R = ports("pdns-knot")[:2]
    # Counted with strace on a run without the tracer: pdns_recursor receives the clients'
    # UDP queries (recvmsg, local-port R) about 510 times (half find nothing) and answers
    # (sendmsg) about 270; it reads its TCP clients (recvfrom, local-port R) about 510
    # times, writes them (writev) about 170 and accepts about 170 connections. To knot it
    # sends about 270 UDP queries on connected sockets (sendto, peer-port K), receives as
    # many (recvfrom), and reads its TCP connections (the big TXT sets) about 40 times.
    # knotd receives (recvmmsg) and answers (sendmmsg) about 270 times over UDP, which no
    # rule can name; over TCP it receives (recvmsg) about 28 times and answers (sendmsg)
    # about 13: knot's faults sit there. The recursor reads its TCP clients with recv
    # (recvfrom for the kernel). The recursor gives up on knot after 1 s
    # (network-timeout), a client after 1.5 s.
    rec, knot = "exe=pdns_recursor", "exe=knotd"
    tcp, nx = "argv=pdns-client --name tcp", "argv=pdns-client --name nx"
    return [
        ("forward-tcp-reset", "reset", f"read:errno=ECONNRESET,{rec},peer-port={K},nth=15,count=1"),
        ("client-tcp-reset", "reset", f"recv|recvfrom:errno=ECONNRESET,{rec},local-port={R},nth=200,count=1"),
        ("answer-corrupt", "corrupt", f"recvfrom:corrupt=3,{rec},peer-port={K},nth=100,count=1"),
        ("query-corrupt", "corrupt", f"recvmsg:corrupt=2,{rec},local-port={R},nth=200,count=1"),
        ("forward-tcp-short", "short", f"read:short=5,{rec},peer-port={K},nth=15,count=1"),
        ("client-tcp-short", "short", f"writev:short=9,{rec},local-port={R},nth=80,count=1"),
        ("knot-slow", "delay", f"sendmsg:delay=3s,{knot},local-port={K},nth=5,count=1"),
        ("knot-killed", "kill", f"recvmsg:kill=SIGKILL,{knot},local-port={K},nth=10"),
        ("recursor-stopped", "stop", f"recvmsg:kill=SIGSTOP,{rec},local-port={R},nth=300"),
        ("recursor-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{rec},nth=20,count=1"),
        ("recursor-enospc", "exhaust", f"sendmsg:errno=ENOSPC,{rec},local-port={R},nth=150,count=1"),
        ("forward-eagain", "exhaust", f"recvfrom:errno=EAGAIN,{rec},peer-port={K},after=100,count=20"),
        ("tcp-client-code", "code", f"py:dns.query:tcp:raise=ConnectionResetError,nth=60,{tcp}"),
        ("nx-client-code", "code", f"py:dns.query:udp:raise=dns.exception.Timeout,nth=60,{nx}"),
    ]


def _radius():
    P, H1, H2 = ports("radius-proxy")[:3]
    # Counted with strace on a run without the tracer: every FreeRADIUS server peeks at a
    # datagram's header (recvfrom, MSG_PEEK) and then receives it (recvmsg) on its
    # listening socket (local-port) and answers there (sendmsg): the proxy about 270
    # times, each home server about 135. The proxy sends to the home servers on an
    # unconnected socket (sendto, no port to narrow it: sendto is used for nothing else)
    # about 270 times and receives their answers (recvmsg) as often. The proxy gives up on
    # a home server after 1 s (response_window), a client after 2.5 s.
    proxy, h1, h2 = "exe=freeradius,argv=proxy -n", "exe=freeradius,argv=home1 -n", "exe=freeradius,argv=home2 -n"
    client2, launcher = "argv=radius-client --name 2", "argv=systems.py radius-proxy"
    return [
        ("client-reset", "reset", f"recvmsg:errno=ECONNRESET,{proxy},local-port={P},nth=150,count=1"),
        ("home-reset", "reset", f"recvmsg:errno=ECONNRESET,{h1},local-port={H1},nth=60,count=1"),
        ("request-corrupt", "corrupt", f"recvmsg:corrupt=3,{proxy},local-port={P},nth=150,count=1"),
        ("home-request-corrupt", "corrupt", f"recvmsg:corrupt=4,{h2},local-port={H2},nth=60,count=1"),
        ("reply-short", "short", f"sendmsg:short=12,{proxy},local-port={P},nth=150,count=1"),
        ("home-request-short", "short", f"recvmsg:short=10,{h1},local-port={H1},nth=70,count=1"),
        ("home-slow", "delay", f"sendmsg:delay=2s,{h2},local-port={H2},nth=60,count=1"),
        ("home-killed", "kill", f"recvmsg:kill=SIGKILL,{h1},local-port={H1},nth=60"),
        ("proxy-stopped", "stop", f"recvmsg:kill=SIGSTOP,{proxy},local-port={P},nth=200"),
        ("proxy-enospc", "exhaust", f"sendmsg:errno=ENOSPC,{proxy},local-port={P},nth=150,count=1"),
        ("forward-enobufs", "exhaust", f"sendto:errno=ENOBUFS,{proxy},nth=100,count=1"),
        ("home-eagain", "exhaust", f"recvmsg:errno=EAGAIN,{h2},local-port={H2},after=40,count=25"),
        ("client-code", "code", f"py:sut.radius_proxy:Client.ask:raise=ConnectionRefusedError,nth=80,{client2}"),
        ("launcher-code", "code", f"py:hmac:new:raise=ValueError,nth=70,{launcher}"),
    ]


def _validation_sysb():
    """Validation systems added for validation run 4 (branch loc-sysb): no developer of the
    method has seen them."""
    return {"node-chain": _node(), "ws-gateway": _ws(), "activemq-stomp": _activemq()}


def _activemq():
    A = ports("activemq-stomp")[0]
    # ActiveMQ reads each STOMP connection in a thread of its own (blocking socket I/O).
    # In a run it reads the producer's connection about 120 times (a SEND frame each) and
    # each worker's about 120 (a SEND and an ACK per job, half the jobs each); each worker
    # reads its connection (a MESSAGE per job, peer-port A) about 60 times.
    broker, w1, w2 = "exe=java,argv=activemq.jar", "argv=amq-worker --name 1", "argv=amq-worker --name 2"
    return [
        ("broker-reset", "reset", f"{RECV}:errno=ECONNRESET,{broker},local-port={A},nth=150,count=1"),
        ("worker-reset", "reset", f"{RECV}:errno=ECONNRESET,{w1},peer-port={A},nth=30,count=1"),
        ("broker-corrupt", "corrupt", f"{RECV}:corrupt=3,{broker},local-port={A},nth=150,count=1"),
        ("worker-corrupt", "corrupt", f"{RECV}:corrupt=2,{w2},peer-port={A},nth=30,count=1"),
        ("broker-short", "short", f"{SEND}:short=5,{broker},local-port={A},nth=150,count=1"),
        ("broker-slow", "delay", f"{SEND}:delay=3s,{broker},local-port={A},nth=150,count=1"),
        ("worker-killed", "kill", f"{RECV}:kill=SIGKILL,{w1},peer-port={A},nth=40"),
        ("broker-stopped", "stop", f"{RECV}:kill=SIGSTOP,{broker},local-port={A},nth=200"),
        ("broker-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{broker},nth=2,count=1"),
        ("broker-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{broker},local-port={A},nth=150,count=1"),
        ("worker-code", "code", f"py:stomp.transport:BaseTransport.process_frame:raise=ValueError,nth=40,{w2}"),
        ("producer-code", "code", "py:stomp.protocol:Protocol12.send:raise=BrokenPipeError,nth=60,argv=activemq-stomp"),
    ]


def _node():
    F, B = ports("node-chain")[:2]
    # Each Node service is one thread on libuv's epoll loop; it reads each request (or
    # reply) with one read() and writes each answer with one write/writev. In a run the
    # front reads its two clients' connections (local-port F) and its pool of keep-alive
    # connections to the backend (peer-port B) about 240 times each, the backend reads
    # its side (local-port B) about 240 times. The argv names the role after the script.
    front, back = "exe=node,argv=service.js front", "exe=node,argv=service.js back"
    return [
        ("backend-reset", "reset", f"{RECV}:errno=ECONNRESET,{back},local-port={B},nth=100,count=1"),
        ("front-reset", "reset", f"{RECV}:errno=ECONNRESET,{front},peer-port={B},nth=100,count=1"),
        ("client-drops", "reset", f"{RECV}:close,{front},local-port={F},nth=120,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{back},local-port={B},nth=100,count=1"),
        ("reply-corrupt", "corrupt", f"{RECV}:corrupt=5,{front},peer-port={B},nth=100,count=1"),
        ("reply-short", "short", f"{RECV}:short=7,{front},peer-port={B},nth=110,count=1"),
        ("backend-slow", "delay", f"{SEND}:delay=2s,{back},local-port={B},nth=100,count=1"),
        ("backend-killed", "kill", f"{RECV}:kill=SIGKILL,{back},local-port={B},nth=120"),
        ("front-stopped", "stop", f"{RECV}:kill=SIGSTOP,{front},local-port={F},nth=150"),
        ("backend-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{back},nth=2,count=1"),
        ("backend-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{back},local-port={B},nth=100,count=1"),
        ("front-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{front},local-port={F},after=80,count=30"),
        ("client-code", "code", "py:http.client:HTTPResponse.read:raise=ConnectionResetError,nth=60,argv=node-chain"),
        ("client2-code", "code", "py:json:loads:raise=ValueError,nth=50,argv=node-client --name 2"),
    ]


def _ws():
    G, S = ports("ws-gateway")[:2]
    # Every process is CPython on asyncio's selector loop: one recv() per readable socket
    # (a frame or a few), one send() per message. In a run the gateway reads its clients'
    # connections (local-port G) and its one connection to the store (peer-port S) about
    # 390 times each; the store reads its side (local-port S) about 390 times.
    gw, store, reader = "argv=ws-service --name gateway", "argv=ws-service --name store", "argv=ws-client --name reader"
    return [
        ("store-reset", "reset", f"{RECV}:errno=ECONNRESET,{store},local-port={S},nth=150,count=1"),
        ("link-reset", "reset", f"{RECV}:errno=ECONNRESET,{gw},peer-port={S},nth=150,count=1"),
        ("client-reset", "reset", f"{RECV}:errno=ECONNRESET,{gw},local-port={G},nth=200,count=1"),
        ("request-corrupt", "corrupt", f"{RECV}:corrupt=3,{store},local-port={S},nth=150,count=1"),
        ("link-corrupt", "corrupt", f"{RECV}:corrupt=2,{gw},peer-port={S},nth=150,count=1"),
        ("store-short", "short", f"{SEND}:short=5,{store},local-port={S},nth=150,count=1"),
        ("store-slow", "delay", f"{SEND}:delay=2s,{store},local-port={S},nth=150,count=1"),
        ("store-killed", "kill", f"{RECV}:kill=SIGKILL,{store},local-port={S},nth=200"),
        ("gateway-stopped", "stop", f"{RECV}:kill=SIGSTOP,{gw},local-port={G},nth=250"),
        ("store-emfile", "exhaust", f"accept|accept4:errno=EMFILE,{store},nth=1,count=1"),
        ("gateway-enospc", "exhaust", f"{SEND}:errno=ENOSPC,{gw},local-port={G},nth=200,count=1"),
        ("store-eagain-storm", "exhaust", f"{RECV}:errno=EAGAIN,{store},local-port={S},after=100,count=30"),
        ("store-code", "code", f"py:sut.ws_gateway:Store.handle:raise=KeyError,nth=150,{store}"),
        ("gateway-code", "code", f"py:websockets.asyncio.connection:Connection.data_received:raise=ConnectionResetError,nth=150,{gw}"),
        ("reader-code", "code", f"py:json:loads:raise=ValueError,nth=60,{reader}"),
    ]


def table():
    """Every system's cases."""
    t = _tuning()
    t.update(_validation())
    t.update(_validation_fresh())
    t.update(_validation_new())
    t.update(_validation_run4())
    t.update(_validation_sysb())
    t.update(faults_sysc.cases())
    t.update(faults_sysd.cases())
    t.update(faults_syse.cases())
    t.update(faults_sysf.cases())
    t.update(faults_sysg.cases())
    t.update(faults_sysh.cases())
    t.update(faults_sysi.cases())
    t.update(faults_sysj.cases())
    t.update(faults_sysk.cases())
    t.update(faults_sysl.cases())
    t.update(faults_sysm.cases())
    t.update(faults_sysn.cases())
    t.update(faults_syso.cases())
    t.update(faults_sysq.cases())
    t.update(faults_sysr.cases())
    t.update(faults_syst.cases())
    t.update(faults_sysp.cases())
    t.update(faults_syss.cases())
    t.update(faults_sysu.cases())
    t.update(faults_sysv.cases())
    t.update(faults_sysx.cases())
    t.update(faults_sysw.cases())
    return t
