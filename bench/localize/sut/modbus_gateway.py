"""modbus-gateway: a Modbus/TCP device and a Modbus/TCP gateway in front of it, both
pymodbus asyncio servers (PyPI `pymodbus` 3.16: CPython asyncio), and two synchronous
pymodbus clients.

Ports: gateway = p[0], device = p[1]. The device (helper `modbus-device`) is pymodbus's
asyncio TCP server (`ModbusTcpServer`) with one device (id 1) holding 4 000 holding
registers in its datastore (`SimDevice`/`SimData`). The gateway (helper `modbus-gw`) is
the same server with a device of the same shape whose datastore forwards every access
(the `action` hook pymodbus calls on each read or write of a register block): a write of
registers is written to the device, a read is read from the device and copied into the
gateway's registers before it answers, over one `AsyncModbusTcpClient` connection (1 s
timeout, no retries; pymodbus reconnects it by itself after a failure). A failed forward
answers the client with a Modbus exception (gateway target device failed to respond). The
clients (the launcher is client 1; helper `modbus-client --name 2`) are pymodbus's
synchronous `ModbusTcpClient` (2 s timeout, no retries) through the gateway: a round
writes a block of 20 to 60 registers (values made for the round, at an address of the
client's own range) and reads it back, checks every value and logs the block's SHA-1;
after a failure (an exception, an error answer, a value that differs) the client logs
it, closes its connection, connects again and goes on. The gateway says at its end
(SIGTERM) how many reads and writes it forwarded.
"""

import asyncio
import hashlib
import os
import signal
import struct
import sys
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

REGISTERS = 4000
DEVICE_ID = 1
REQUESTS2 = 60
UPSTREAM_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 2.0


def block(name, i):
    """(address, values) of client `name`'s round i."""
    count = 20 + (i * 7 + int(name) * 3) % 41
    address = int(name) * 1000 + (i % 12) * 60
    return address, [(i * 2654435761 + k * 40503 + int(name)) % 65536 for k in range(count)]


def digest(values):
    return hashlib.sha1(struct.pack(f">{len(values)}H", *values)).hexdigest()[:16]


def quiet():
    import logging

    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)


def sim_device(action=None):
    from pymodbus.simulator import DataType, SimData, SimDevice

    return SimDevice(id=DEVICE_ID, simdata=[SimData(0, count=REGISTERS, values=0, datatype=DataType.REGISTERS)],
                     action=action)


def device(_name):
    """Helper process `modbus-device`: the registers, on pymodbus's asyncio TCP server."""
    from pymodbus.server import ModbusTcpServer

    quiet()

    async def main():
        server = ModbusTcpServer(sim_device(), address=("127.0.0.1", ports("modbus-gateway")[1]))
        await server.serve_forever()

    asyncio.run(main())


class Upstream:
    """The gateway's connection to the device and its counts: `forward` is the datastore
    action of the gateway's device (pymodbus calls it on every read or write of a block)."""

    def __init__(self):
        from pymodbus.client import AsyncModbusTcpClient

        self.client = AsyncModbusTcpClient("127.0.0.1", port=ports("modbus-gateway")[1], timeout=UPSTREAM_TIMEOUT_S,
                                           retries=0, reconnect_delay=0.1, reconnect_delay_max=1.0)
        self.counts = {"read": 0, "write": 0, "failed": 0}

    async def forward(self, func_code, start, address, count, registers, set_values):
        from pymodbus.constants import ExcCodes
        from pymodbus.exceptions import ModbusException

        try:
            if set_values:
                self.counts["write"] += 1
                rr = await self.client.write_registers(address, list(set_values), device_id=DEVICE_ID)
            else:
                self.counts["read"] += 1
                rr = await self.client.read_holding_registers(address, count=count, device_id=DEVICE_ID)
            if rr.isError():
                raise ValueError(f"device answered {rr}")
            if not set_values:
                if len(rr.registers) != count:
                    raise ValueError(f"device answered {len(rr.registers)} registers, wanted {count}")
                registers[address - start:address - start + count] = rr.registers
            return None
        except (ModbusException, OSError, ValueError, asyncio.TimeoutError) as e:
            self.counts["failed"] += 1
            log(f"forward failed: {e!r:.200}")
            return ExcCodes.GATEWAY_NO_RESPONSE


def gateway(_name):
    """Helper process `modbus-gw`: a Modbus server whose datastore forwards to the device."""
    from pymodbus.server import ModbusTcpServer

    quiet()

    async def main():
        up = Upstream()

        def bye(*_):
            c = up.counts
            log(f"modbus gateway: {c['read']} reads and {c['write']} writes forwarded, {c['failed']} failed "
                "(told to stop)")
            sys.stderr.flush()
            os._exit(0)

        signal.signal(signal.SIGTERM, bye)
        await up.client.connect()
        server = ModbusTcpServer(sim_device(up.forward), address=("127.0.0.1", ports("modbus-gateway")[0]))
        await server.serve_forever()

    asyncio.run(main())


class Client:
    def __init__(self, name):
        from pymodbus.client import ModbusTcpClient

        self.name = name
        self.c = ModbusTcpClient("127.0.0.1", port=ports("modbus-gateway")[0], timeout=CLIENT_TIMEOUT_S, retries=0)
        self.errors = 0

    def step(self, i):
        from pymodbus.exceptions import ModbusException

        address, values = block(self.name, i)
        try:
            if not self.c.connected and not self.c.connect():
                raise ConnectionError("no connection to the gateway")
            rr = self.c.write_registers(address, values, device_id=DEVICE_ID)
            if rr.isError():
                raise ValueError(f"write {len(values)} at {address}, round {i}: {rr}")
            rr = self.c.read_holding_registers(address, count=len(values), device_id=DEVICE_ID)
            if rr.isError():
                raise ValueError(f"read {len(values)} at {address}, round {i}: {rr}")
            if rr.registers != values:
                raise ValueError(f"read {len(values)} at {address}, round {i}: {len(rr.registers)} values "
                                 f"(SHA-1 {digest(rr.registers)}), wanted SHA-1 {digest(values)}")
            log(f"modbus client {self.name} round {i}: {len(values)} registers at {address}, SHA-1 {digest(values)}")
            return True
        except (ModbusException, OSError, ValueError) as e:
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            self.c.close()
            return False

    def close(self):
        self.c.close()


def workload(name, n, pause):
    quiet()
    c = Client(name)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `modbus-client --name N`: REQUESTS2 rounds through the gateway, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"modbus-gateway client {name}: {ok}/{REQUESTS2} rounds ok, {errors} failed")


def run(tmp, n):
    gport, dport = ports("modbus-gateway")[:2]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        dev = d.start("device", [PY, LAUNCHER, "modbus-device"], env=env)
        wait_port(dport, dev, timeout=20)
        gw = d.start("gateway", [PY, LAUNCHER, "modbus-gw"], env=env)
        wait_port(gport, gw, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "modbus-client", "--name", "2"], env=env)
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"modbus-gateway: {ok}/{n} rounds ok, {errors} failed")
