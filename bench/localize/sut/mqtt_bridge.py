"""mqtt-bridge: two mosquitto brokers joined by a bridge (broker B connects to broker A and
forwards `bench/#` both ways), a paho-mqtt publisher that publishes to both brokers, and
two subscriber processes, one on each broker (C broker, Python clients).

Ports: A = p[0], B = p[1]. A message published to A reaches the subscriber on B only
through the bridge, and the other way round. Publishes are QoS 1 (acknowledged); the
publisher waits (bounded) for each acknowledgement and reconnects after a failure. Each
subscriber counts what it received and exits on a `bench/stop` message or when idle.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

IDLE_S = 6.0


def _client(name):
    import paho.mqtt.client as mqtt

    return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name, clean_session=True)


def subscriber(name):
    """Helper process `mqtt-subscriber --name 1|2`: subscriber on broker A (1) or B (2)."""
    port = ports("mqtt-bridge")[int(name) - 1]
    got = {"n": 0, "stop": False, "last": time.monotonic()}

    def on_connect(c, userdata, flags, rc, props=None):
        c.subscribe("bench/#", qos=1)

    def on_message(c, userdata, msg):
        got["last"] = time.monotonic()
        if msg.topic == "bench/stop":
            got["stop"] = True
        else:
            got["n"] += 1

    c = _client(f"sub{name}")
    c.on_connect = on_connect
    c.on_message = on_message
    c.reconnect_delay_set(0.2, 1.0)
    c.connect_async("127.0.0.1", port, keepalive=5)
    c.loop_start()
    end = time.monotonic() + 60
    while time.monotonic() < end and not got["stop"] and time.monotonic() - got["last"] < IDLE_S:
        time.sleep(0.05)
    c.disconnect()
    c.loop_stop()
    log(f"mqtt subscriber {name}: {got['n']} messages, stop={got['stop']}")


class Publisher:
    """A QoS 1 publisher on one broker that reconnects after failures."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.c = None
        self.errors = 0

    def connect(self):
        self.c = _client(self.name)
        self.c.connect("127.0.0.1", self.port, keepalive=5)
        self.c.loop_start()

    def publish(self, topic, payload):
        try:
            if self.c is None:
                self.connect()
            info = self.c.publish(topic, payload, qos=1)
            info.wait_for_publish(timeout=1.0)
            if not info.is_published():
                raise TimeoutError(f"publish {topic}: no PUBACK in 1 s (rc {info.rc})")
            return True
        except (OSError, ValueError, RuntimeError, TimeoutError) as e:
            self.errors += 1
            log(f"publish failed: {e!r}")
            self.close()
            return False

    def close(self):
        if self.c is not None:
            try:
                self.c.disconnect()
                self.c.loop_stop()
            except Exception:
                pass
            self.c = None


def run(tmp, n):
    pa, pb = ports("mqtt-bridge")[:2]
    with Daemons(tmp) as d:
        for name, port, extra in (
            ("brokerA", pa, ""),
            (
                "brokerB",
                pb,
                f"connection bridgeAB\naddress 127.0.0.1:{pa}\ntopic bench/# both 1\n"
                "cleansession true\nrestart_timeout 1\nkeepalive_interval 5\n"
                "start_type automatic\ntry_private true\n",
            ),
        ):
            conf = os.path.join(tmp, f"{name}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"log_dest stdout\nlog_type error\nlog_type warning\n{extra}"
                )
            p = d.start(name, ["mosquitto", "-c", conf])
            wait_port(port, p)
        subs = [d.start(f"sub{i}", [PY, LAUNCHER, "mqtt-subscriber", "--name", str(i)]) for i in (1, 2)]
        time.sleep(1.0)  # the bridge connects and both subscriptions are in place
        pubs = [Publisher("pubA", pa), Publisher("pubB", pb)]
        ok = 0
        for i in steps(n):
            p = pubs[i % 2]
            ok += p.publish(f"bench/t{i % 4}", f"msg {i} " + "z" * (i % 40))
            time.sleep(0.01)
        time.sleep(0.5)
        for p in pubs:
            p.publish("bench/stop", "stop")
            p.close()
        for s in subs:
            try:
                s.wait(timeout=IDLE_S + 5)
            except Exception:
                log("a subscriber did not stop")
        log(f"mqtt-bridge: {ok}/{n} publishes acknowledged, {sum(p.errors for p in pubs)} failed")
