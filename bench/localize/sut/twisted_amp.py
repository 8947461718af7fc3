"""twisted-amp: a chain of services on the Twisted reactor (PyPI `twisted`: CPython, one
thread, an epoll reactor; not asyncio) speaking AMP (the Asynchronous Messaging Protocol:
length-prefixed key/value boxes, many calls in flight on one connection, each answered by
its tag), and two AMP clients, also on Twisted.

Ports: front = p[0], backend = p[1]. The backend (`amp-service --name back`) is a versioned
key-value store: `Put(key, value)` stores the value and answers its digest and version,
`Get(key)` answers the value, its digest and version (`NoSuchKey` when absent). The front
(`amp-service --name front`) serves the same two commands to the clients and forwards each
one over ONE persistent AMP connection to the backend, which carries both clients' calls
interleaved; it checks every answer (the digest of what was sent, the digest of the value
read) and gives up on a call after 1 s. A failed call, a connection lost or an answer that
does not check becomes `BackendFailed` to the client; the front connects to the backend
again 0.2 s after losing it (calls meanwhile fail at once). Each client (`amp-client --name
1` and `--name 2`, started by the launcher) writes versions of its own keys (40 B to 2 KB)
and reads each one back, one call at a time with a 2 s timeout, checks the answers (the
bytes against what it wrote), counts a failure, drops the connection, connects again and
goes on. Each service says at its exit (SIGTERM: the reactor stops) how many calls it served
and how many failed.
"""

import functools
import hashlib
import os
import sys

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, wait_port

REQUESTS = {"1": 120, "2": 60}
PAUSE = {"1": 0.02, "2": 0.06}
KEYS = 16
CALL_S = 1.0  # the front's timeout on a backend call
CLIENT_S = 2.0  # a client's timeout on a call


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def drop(proto, abort=True):
    """Closes an AMP connection unless it is gone already (AMP forgets its transport once
    the connection is lost)."""
    t = getattr(proto, "transport", None)
    if t is not None:
        t.abortConnection() if abort else t.loseConnection()


@functools.lru_cache(maxsize=None)
def _amp():
    """The AMP commands, made once (imported late: the launcher itself never loads
    Twisted)."""
    from twisted.protocols import amp

    class NoSuchKey(Exception):
        pass

    class BackendFailed(Exception):
        pass

    class Put(amp.Command):
        arguments = [(b"key", amp.Unicode()), (b"value", amp.String())]
        response = [(b"digest", amp.Unicode()), (b"version", amp.Integer())]
        errors = {BackendFailed: b"BACKEND_FAILED"}

    class Get(amp.Command):
        arguments = [(b"key", amp.Unicode())]
        response = [(b"value", amp.String()), (b"digest", amp.Unicode()), (b"version", amp.Integer())]
        errors = {NoSuchKey: b"NO_SUCH_KEY", BackendFailed: b"BACKEND_FAILED"}

    return amp, Put, Get, NoSuchKey, BackendFailed


class Store:
    """The backend's data: key -> (version, value)."""

    def __init__(self):
        self.data = {}
        self.served = self.failed = 0

    def put(self, key, value):
        version = self.data.get(key, (0, b""))[0] + 1
        self.data[key] = (version, value)
        self.served += 1
        return {"digest": digest(value), "version": version}

    def get(self, key, missing):
        if key not in self.data:
            self.failed += 1
            raise missing(key)
        version, value = self.data[key]
        self.served += 1
        return {"value": value, "digest": digest(value), "version": version}


class Forwarder:
    """The front's side of its one persistent connection to the backend."""

    def __init__(self, reactor, port, failed_exc):
        self.reactor, self.port, self.failed_exc = reactor, port, failed_exc
        self.proto = None
        self.served = self.failed = self.connects = 0

    def connect(self):
        from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol

        amp = _amp()[0]
        forwarder = self

        class Link(amp.AMP):
            def connectionLost(self, reason):
                super().connectionLost(reason)
                if forwarder.proto is self:
                    forwarder.proto = None
                    log(f"amp front: backend connection lost: {reason.getErrorMessage()}")
                    forwarder.reactor.callLater(0.2, forwarder.connect)

        def up(proto):
            self.proto = proto
            self.connects += 1

        def down(f):
            log(f"amp front: backend connect failed: {f.getErrorMessage()}")
            self.reactor.callLater(0.2, self.connect)

        d = connectProtocol(TCP4ClientEndpoint(self.reactor, "127.0.0.1", self.port, timeout=1), Link())
        d.addCallbacks(up, down)

    def check(self, answer, want):
        """A backend answer that does not carry the digest it should is a failure."""
        if answer["digest"] != want(answer):
            raise ValueError(f"backend answered digest {answer['digest']} for {want(answer)}")
        return answer

    def call(self, command, want, **kw):
        if self.proto is None:
            self.failed += 1
            raise self.failed_exc("no connection to the backend")
        d = self.proto.callRemote(command, **kw)
        d.addTimeout(CALL_S, self.reactor)
        d.addCallback(self.check, want)

        def done(answer):
            self.served += 1
            return answer

        def failed(f):
            if f.check(_amp()[3]):  # a missing key goes to the client as it is
                return f
            self.failed += 1
            log(f"amp front: {command.__name__} {kw.get('key')}: backend failed: {f.getErrorMessage()}")
            if f.check(ValueError):
                # A desynchronized link: answers can no longer be trusted; made again.
                drop(self.proto)
            raise self.failed_exc(f.getErrorMessage())

        d.addCallbacks(done, failed)
        return d


def service(name):
    """Helper process `amp-service --name front|back`."""
    from twisted.internet import protocol, reactor

    amp, Put, Get, NoSuchKey, BackendFailed = _amp()
    front, back = ports("twisted-amp")[:2]
    if name == "back":
        store = Store()

        class Backend(amp.AMP):
            @Put.responder
            def put(self, key, value):
                return store.put(key, value)

            @Get.responder
            def get(self, key):
                return store.get(key, NoSuchKey)

        factory = protocol.Factory.forProtocol(Backend)
        reactor.listenTCP(back, factory, interface="127.0.0.1")
        counts = store
    else:
        fwd = Forwarder(reactor, back, BackendFailed)
        fwd.connect()

        class Front(amp.AMP):
            @Put.responder
            def put(self, key, value):
                return fwd.call(Put, lambda a: digest(value), key=key, value=value)

            @Get.responder
            def get(self, key):
                return fwd.call(Get, lambda a: digest(a["value"]), key=key)

        reactor.listenTCP(front, protocol.Factory.forProtocol(Front), interface="127.0.0.1")
        counts = fwd

    def bye():
        extra = f", {fwd.connects} backend connections" if name == "front" else ""
        log(f"amp {name}: {counts.served} calls ok, {counts.failed} failed{extra} (told to stop)")

    reactor.addSystemEventTrigger("before", "shutdown", bye)
    reactor.run()


def value(who, k, version):
    """The bytes client `who` writes as version `version` of key k."""
    seed = hashlib.sha1(f"{who} {k} {version}".encode()).hexdigest().encode()
    return (seed * 60)[: 40 + (83 * k + 151 * version) % 1960]


class Client:
    """One AMP client: a call at a time, a connection made again after any failure."""

    def __init__(self, reactor, name):
        self.reactor, self.name, self.who = reactor, name, f"c{name}"
        self.proto = None
        self.ok = self.errors = self.done = 0
        self.version = {}

    def check(self, answer, data, version):
        """An answer must carry what this client wrote last (its digest, or the bytes)."""
        if answer["digest"] != digest(data):
            raise ValueError(f"digest {answer['digest']}, not {digest(data)}")
        if "value" in answer and answer["value"] != data:
            raise ValueError(f"{len(answer['value'])} bytes, not the {len(data)} written")
        return answer

    def run(self):
        from twisted.internet import defer, task
        from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
        from twisted.python.failure import Failure

        amp, Put, Get, _, _ = _amp()
        end = self.reactor.seconds() + WORKLOAD_S

        @defer.inlineCallbacks
        def loop():
            n = int(os.environ.get("AMP_REQUESTS", REQUESTS[self.name])) if self.name == "1" else REQUESTS[self.name]
            for i in range(n):
                if self.reactor.seconds() > end:
                    log(f"workload deadline ({WORKLOAD_S:.0f} s) reached after {i} of {n} steps")
                    break
                k = (i * 5) % KEYS
                ver = self.version.get(k, 0) + 1
                self.version[k] = ver
                data = value(self.who, k, ver)
                key = f"{self.who}-{k}"
                self.done += 1
                try:
                    if self.proto is None:
                        ep = TCP4ClientEndpoint(self.reactor, "127.0.0.1", ports("twisted-amp")[0], timeout=2)
                        self.proto = yield connectProtocol(ep, amp.AMP()).addTimeout(CLIENT_S, self.reactor)
                    a = yield self.proto.callRemote(Put, key=key, value=data).addTimeout(CLIENT_S, self.reactor)
                    self.check(a, data, ver)
                    a = yield self.proto.callRemote(Get, key=key).addTimeout(CLIENT_S, self.reactor)
                    self.check(a, data, ver)
                    self.ok += 1
                except Exception as e:
                    self.errors += 1
                    log(f"request failed: {e!r}")
                    drop(self.proto)
                    self.proto = None
                yield task.deferLater(self.reactor, PAUSE[self.name], lambda: None)

        def stop(result):
            if isinstance(result, Failure):
                log(f"amp client {self.name}: the workload ended on {result.getErrorMessage()}")
            drop(self.proto, abort=False)
            self.reactor.callLater(0.1, self.reactor.stop)

        loop().addBoth(stop)
        self.reactor.run()


def client(name):
    """Helper process `amp-client --name N`."""
    from twisted.internet import reactor

    c = Client(reactor, name)
    c.run()
    log(f"amp client {name}: {c.ok}/{c.done} steps ok, {c.errors} failed")
    sys.stdout.flush()


def run(tmp, n):
    front, back = ports("twisted-amp")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1", AMP_REQUESTS=str(n))
    with Daemons(tmp) as d:
        p = d.start("back", [PY, LAUNCHER, "amp-service", "--name", "back"], env=env)
        wait_port(back, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "amp-service", "--name", "front"], env=env)
        wait_port(front, p, timeout=20)
        clients = [d.start(f"client{i}", [PY, LAUNCHER, "amp-client", "--name", str(i)], env=env) for i in (1, 2)]
        for c in clients:
            try:
                c.wait(timeout=WORKLOAD_S + 10)
            except Exception:
                log("a client did not stop")
