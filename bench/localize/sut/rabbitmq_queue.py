"""rabbitmq-queue: a RabbitMQ broker (Debian's rabbitmq-server, Erlang/BEAM, with its own
epmd), a pika producer and two pika consumer processes sharing one durable-less queue
(Python clients).

Ports: AMQP = p[0], epmd = p[1], Erlang distribution = p[2]. The producer publishes N
messages with publisher confirms (each confirmed or counted as failed; the connection is
made again after a failure); consumers acknowledge each message and leave on a `stop`
message or when idle.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

IDLE_S = 8.0
QUEUE = "bench"


def _env(tmp):
    p = ports("rabbitmq-queue")
    env = dict(os.environ)
    env.update(
        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
        RABBITMQ_NODE_PORT=str(p[0]),
        RABBITMQ_DIST_PORT=str(p[2]),
        ERL_EPMD_PORT=str(p[1]),
        ERL_EPMD_ADDRESS="127.0.0.1",
        RABBITMQ_NODENAME=f"bench{p[0]}@localhost",
        RABBITMQ_MNESIA_BASE=os.path.join(tmp, "mnesia"),
        RABBITMQ_LOG_BASE=tmp,
        RABBITMQ_LOGS="-",
        RABBITMQ_PID_FILE=os.path.join(tmp, "rabbit.pid"),
        RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(tmp, "enabled_plugins"),
        RABBITMQ_CONFIG_FILE=os.path.join(tmp, "rabbitmq"),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 1:1 +A 2 +sbwt none",
        RABBITMQ_FEATURE_FLAGS_FILE=os.path.join(tmp, "feature_flags"),
        ERL_CRASH_DUMP=os.path.join(tmp, "erl_crash.dump"),
        HOME=tmp,
    )
    return env


def _params():
    import pika

    return pika.ConnectionParameters(
        "127.0.0.1", ports("rabbitmq-queue")[0], socket_timeout=2, blocked_connection_timeout=3,
        connection_attempts=3, retry_delay=0.3, heartbeat=10,
    )


def consumer(name):
    """Helper process `rabbit-consumer --name N`."""
    import pika
    import pika.exceptions

    got, stop, last = 0, False, time.monotonic()
    end = time.monotonic() + 60
    while not stop and time.monotonic() < end and time.monotonic() - last < IDLE_S:
        try:
            conn = pika.BlockingConnection(_params())
            ch = conn.channel()
            ch.queue_declare(QUEUE)
            ch.basic_qos(prefetch_count=5)
            for method, _props, body in ch.consume(QUEUE, inactivity_timeout=0.5):
                if method is None:
                    if time.monotonic() - last >= IDLE_S or time.monotonic() >= end:
                        break
                    continue
                ch.basic_ack(method.delivery_tag)
                last = time.monotonic()
                if body == b"stop":
                    stop = True
                    break
                got += 1
            conn.close()
        except (pika.exceptions.AMQPError, OSError) as e:
            log(f"consumer {name}: {e!r}")
            time.sleep(0.2)
    log(f"rabbit consumer {name}: {got} messages, stop={stop}")


def run(tmp, n):
    import pika
    import pika.exceptions

    p = ports("rabbitmq-queue")
    os.makedirs(os.path.join(tmp, "mnesia"), exist_ok=True)
    with open(os.path.join(tmp, "enabled_plugins"), "w") as f:
        f.write("[].\n")
    with open(os.path.join(tmp, "rabbitmq.conf"), "w") as f:
        f.write("log.console = true\nlog.console.level = warning\nlog.file = false\n")
    env = _env(tmp)
    with Daemons(tmp) as d:
        e = d.start("epmd", ["epmd", "-port", str(p[1]), "-address", "127.0.0.1"], env=env)
        wait_port(p[1], e)
        b = d.start("rabbitmq", ["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=env, cwd=tmp)
        wait_port(p[0], b, timeout=60)
        conn = pika.BlockingConnection(_params())
        conn.channel().queue_declare(QUEUE)
        conn.close()
        consumers = [d.start(f"consumer{i}", [PY, LAUNCHER, "rabbit-consumer", "--name", str(i)]) for i in (1, 2)]
        ok = errors = 0
        ch = conn = None
        for i in steps(n + 2):
            body = b"stop" if i >= n else f"task {i} ".encode() + b"q" * (i % 40)
            try:
                if ch is None:
                    conn = pika.BlockingConnection(_params())
                    ch = conn.channel()
                    ch.confirm_delivery()
                ch.basic_publish("", QUEUE, body, mandatory=True)
                ok += i < n
            except (pika.exceptions.AMQPError, OSError) as e:
                errors += 1
                log(f"publish failed: {e!r}")
                try:
                    if conn is not None:
                        conn.close()
                except Exception:
                    pass
                ch = conn = None
            time.sleep(0.01)
        if conn is not None:
            conn.close()
        end = time.monotonic() + IDLE_S + 4  # one bounded wait for both
        for c in consumers:
            try:
                c.wait(timeout=max(0.1, end - time.monotonic()))
            except Exception:
                log("a consumer did not stop")
        log(f"rabbitmq-queue: {ok}/{n} publishes confirmed, {errors} failed")
