"""snmpd-proxy: two Net-SNMP agents (Debian `snmpd` 5.9: C, one process each, UDP) where
the front agent proxies a subtree to the back agent (snmpd.conf `proxy`), and two Python
drivers running Net-SNMP's own command-line clients (`snmpset`, `snmpget`: C).

Ports: front = p[0], back = p[1] (UDP). Each agent runs in the foreground (`snmpd -f -C -c
CONF`, SMUX off, its persistent directory in the scratch directory) with a read-write
community `private` for 127.0.0.1 and logs to its standard output. The front answers for
its own MIB and forwards every request under .1.3.6.1.4.1.99999.1 to the back agent's
system group (.1.3.6.1.2.1.1: sysContact, sysName and sysLocation are writable there, as
snmpd.conf does not fix them), SNMPv2c, 1 s timeout, no retry. Each driver (the launcher
on sysContact and sysName, the helper `snmp-client --name 2` on sysLocation) takes steps of
its own: an `snmpset` of a value made for that step through the front (the echoed value
checked) and an `snmpget` of the same object and of the front's own sysUpTime (the value
checked); each command waits 2 s for an answer without retry and is killed after 5 s. A
failed command is logged and counted and the driver goes on.
"""

import os
import subprocess
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_readers, wait_udp

REQUESTS2 = 60
PROXIED = ".1.3.6.1.4.1.99999.1"
CONF = """agentaddress udp:127.0.0.1:{port}
rwcommunity private 127.0.0.1
"""
PROXY = "proxy -v 2c -c private -t 1 -r 0 127.0.0.1:{back} {proxied} .1.3.6.1.2.1.1\n"


def value(name, i):
    """The value driver `name` writes at step i (its length varies with i)."""
    return f"c{name}-{i}-" + "z" * (i % 40)


def snmp(env, argv):
    """Runs one Net-SNMP command (2 s for an answer, no retry, killed after 5 s); its output
    lines, or an exception saying what went wrong."""
    r = subprocess.run(argv[:1] + ["-m", "", "-v2c", "-c", "private", "-t", "2", "-r", "0"] + argv[1:],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=5, env=env)
    if r.returncode != 0:
        raise ValueError(f"{argv[0]} exited {r.returncode}: {r.stderr.decode(errors='replace').strip()!r:.100}")
    return r.stdout.decode(errors="replace").strip().splitlines()


def step(env, port, name, oid, i):
    v = value(name, i)
    target = f"127.0.0.1:{port}"
    out = snmp(env, ["snmpset", "-On", target, oid, "s", v])
    if out != [f'{oid} = STRING: "{v}"']:
        raise ValueError(f"set {oid}: answer {out!r:.100}")
    out = snmp(env, ["snmpget", "-Oqv", target, oid, ".1.3.6.1.2.1.1.3.0"])
    if len(out) != 2 or out[0] != f'"{v}"':
        raise ValueError(f"get {oid}: answer {out!r:.100}, wanted {v}")


def workload(tmp, name, oids, n, pause):
    env = dict(os.environ, MIBS="", SNMP_PERSISTENT_DIR=os.path.join(tmp, f"client{name}"))
    port = ports("snmpd-proxy")[0]
    ok = errors = 0
    for i in steps(n):
        try:
            step(env, port, name, oids[i % len(oids)], i)
            ok += 1
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            errors += 1
            log(f"request failed: {e!r:.200}")
        time.sleep(pause)
    return ok, errors


def client(name):
    """Helper process `snmp-client --name N`: REQUESTS2 steps on sysLocation, every 60 ms."""
    tmp = os.environ["SNMP_CLIENT_DIR"]
    ok, errors = workload(tmp, name, [PROXIED + ".6.0"], REQUESTS2, 0.06)
    log(f"snmpd-proxy client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, bport = ports("snmpd-proxy")[:2]
    for who, port, extra in (("back", bport, ""), ("front", fport, PROXY.format(back=bport, proxied=PROXIED))):
        os.makedirs(os.path.join(tmp, f"{who}-persist"), exist_ok=True)
        with open(os.path.join(tmp, f"{who}.conf"), "w") as f:
            f.write(CONF.format(port=port) + extra)
    with Daemons(tmp) as d:
        procs = {}
        for who, port in (("back", bport), ("front", fport)):
            env = dict(os.environ, MIBS="", SNMP_PERSISTENT_DIR=os.path.join(tmp, f"{who}-persist"))
            procs[who] = d.start(who, ["snmpd", "-f", "-Lo", "-C", "-c", os.path.join(tmp, f"{who}.conf"),
                                       "-I", "-smux"], env=env)
            wait_udp(port, procs[who], timeout=15)
        helper = d.start("client2", [PY, LAUNCHER, "snmp-client", "--name", "2"],
                         env=dict(os.environ, SNMP_CLIENT_DIR=tmp))
        ok, errors = workload(tmp, "1", [PROXIED + ".4.0", PROXIED + ".5.0"], n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"snmpd-proxy: {ok}/{n} steps ok, {errors} failed")
