"""activemq-stomp: an Apache ActiveMQ broker (Debian `activemq`, on the JVM; a non-persistent
broker with one STOMP connector) + a stomp.py producer that collects results + 2 stomp.py
worker processes (CPython, a receiver thread each; STOMP 1.2 over TCP).

Port: STOMP = p[0]. The producer (the launcher) sends N jobs `{i, text}` to the queue
`/queue/jobs`; each worker (`amq-worker --name 1|2`, prefetch 1, client-individual acks)
answers a job with its digest on `/queue/results`, then acknowledges it; the producer,
subscribed to the results, checks every digest and, after its last job, waits up to 8 s
for the missing results. Every client whose connection is lost connects again (each
attempt bounded: 2 s for the broker's CONNECTED frame), resubscribes and goes on; a
redelivered job answered twice counts once. Every process says at the end what it saw.
"""

import hashlib
import os
import threading
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, terminated, wait_port, wait_readers

CONF = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="suite"
          persistent="false" dataDirectory="{dir}/data" schedulerSupport="false" advisorySupport="false">
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""
JOBS, RESULTS = "/queue/jobs", "/queue/results"
CONNECT_S = 2.0


def digest(i, text):
    return hashlib.sha1(f"{i}:{text}".encode()).hexdigest()[:20]


class Client:
    """One stomp.py connection, made again (a new Connection each time) after it is lost."""

    def __init__(self, listener, subscribe):
        self.listener = listener
        self.subscribe = subscribe
        self.conn = None
        self.lost = self.failed_connects = 0

    def connected(self):
        return self.conn is not None and self.conn.is_connected()

    def ensure(self):
        """Connects if not connected; False (counted, logged) when the attempt fails."""
        import stomp

        if self.connected():
            return True
        if self.conn is not None:
            self.lost += 1
            self.drop()
        port = ports("activemq-stomp")[0]
        conn = stomp.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1, timeout=CONNECT_S)
        conn.set_listener("", self.listener)
        try:
            conn.connect(wait=False)
            end = time.monotonic() + CONNECT_S
            while not conn.is_connected() and time.monotonic() < end:
                time.sleep(0.02)
            if not conn.is_connected():
                raise ConnectionError("no CONNECTED frame within 2 s")
            self.conn = conn
            self.subscribe(conn)
            return True
        except Exception as e:  # noqa: BLE001 — stomp.py's own errors too; a client goes on
            self.failed_connects += 1
            log(f"connect failed: {e!r}")
            self.conn = conn
            self.drop()
            return False

    def drop(self):
        conn, self.conn = self.conn, None
        if conn is not None:
            threading.Thread(target=_quietly_disconnect, args=(conn,), daemon=True).start()


def _quietly_disconnect(conn):
    try:
        conn.disconnect()
    except Exception:  # noqa: BLE001 — a lost connection may fail to say goodbye
        pass


def worker(name):
    """Helper process `amq-worker --name N`."""
    import stomp

    stop = terminated()
    seen = {"jobs": 0, "bad": 0}

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            conn = c.conn
            try:
                i = int(frame.headers["job"])
                conn.send(RESULTS, digest(i, frame.body), headers={"job": str(i), "worker": name})
                conn.ack(frame.headers["ack"])
                seen["jobs"] += 1
            except Exception as e:  # noqa: BLE001 — a worker goes on
                seen["bad"] += 1
                log(f"worker {name}: a job it could not answer: {e!r}")

        def on_error(self, frame):
            log(f"worker {name}: broker error: {frame.headers.get('message', '?')}")

    def sub(conn):
        conn.subscribe(JOBS, id="jobs", ack="client-individual", headers={"activemq.prefetchSize": "1"})

    c = Client(Listener(), sub)
    while not stop.is_set():
        if not c.ensure():
            stop.wait(0.5)
        stop.wait(0.1)
    log(f"amq worker {name}: {seen['jobs']} jobs answered, {seen['bad']} bad, connection lost "
        f"{c.lost} times, {c.failed_connects} failed connects (told to stop)")
    c.drop()


def _produce(n):
    import stomp

    results, bad = {}, [0]
    lock = threading.Lock()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            try:
                i = int(frame.headers["job"])
            except (KeyError, ValueError):
                bad[0] += 1
                return
            with lock:
                results[i] = frame.body

        def on_error(self, frame):
            log(f"producer: broker error: {frame.headers.get('message', '?')}")

    c = Client(Listener(), lambda conn: conn.subscribe(RESULTS, id="results", ack="auto"))
    texts, failed = {}, 0
    for i in steps(n):
        text = "t" * (i % 40)
        try:
            if not c.ensure():
                raise ConnectionError("not connected")
            c.conn.send(JOBS, text, headers={"job": str(i)})
            texts[i] = text
        except Exception as e:  # noqa: BLE001 — stomp.py's own errors too; a client goes on
            failed += 1
            log(f"request failed: {e!r}")
        time.sleep(0.05)
    end = time.monotonic() + 8
    while time.monotonic() < end:
        with lock:
            if all(i in results for i in texts):
                break
        if not c.connected():
            c.ensure()
        time.sleep(0.1)
    with lock:
        ok = sum(1 for i, t in texts.items() if results.get(i) == digest(i, t))
        wrong = sum(1 for i, t in texts.items() if i in results and results[i] != digest(i, t))
    missing = len(texts) - ok - wrong
    c.drop()
    return ok, failed, missing, wrong + bad[0], c.lost


def run(tmp, n):
    port = ports("activemq-stomp")[0]
    conf = os.path.join(tmp, "activemq.xml")
    with open(conf, "w") as f:
        f.write(CONF.format(dir=tmp, port=port))
    java = ["java", "-Xms64m", "-Xmx256m", f"-Dactivemq.base={tmp}", "-Dactivemq.home=/usr/share/activemq",
            f"-Dactivemq.conf={tmp}", f"-Dactivemq.data={tmp}/data", "-jar", "/usr/share/activemq/bin/activemq.jar",
            "start", f"xbean:file:{conf}"]
    with Daemons(tmp) as d:
        p = d.start("activemq", java, cwd=tmp)
        wait_port(port, p, timeout=40)
        workers = [d.start(f"worker{w}", [PY, LAUNCHER, "amq-worker", "--name", str(w)]) for w in (1, 2)]
        time.sleep(0.5)
        ok, failed, missing, bad, lost = _produce(n)
        log(f"activemq-stomp: {ok}/{n} jobs ok, {failed} failed to send, {missing} results missing, "
            f"{bad} wrong, connection lost {lost} times")
        for w in workers:
            w.terminate()
        wait_readers(workers, seconds=5)
