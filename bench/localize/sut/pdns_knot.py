"""pdns-knot: a PowerDNS Recursor (C++, a distributor and worker threads on their own
multiplexers) that forwards the queries of `bench.test` to a Knot DNS authoritative server
(C, UDP and TCP worker threads, zone in a LMDB-backed journal), and dnspython clients.

Ports: knotd = p[0] (UDP and TCP), pdns_recursor = p[1] (UDP and TCP). Records have TTL 0
and the recursor's caches keep nothing, so every client query crosses the chain. Some TXT
records are larger than the recursor's EDNS buffer (1232 bytes): knot answers those
truncated over UDP and the recursor asks again over TCP; so do the UDP clients when the
recursor's answer to them is truncated. The recursor forwards the root zone to knot too
(nothing leaves loopback). Three clients: the launcher over
UDP, a helper over TCP (`pdns-client --name tcp`) and a helper over UDP asking for names
that do not exist as well (`pdns-client --name nx`, NXDOMAIN expected). A client waits at
most 1.5 s for an answer (the recursor gives up on knot after 1 s), counts a failure and
goes on, as a stub resolver does.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

NAMES = 48
BIG = 8  # host0..host7 have a TXT set too large for UDP


def _txt(i):
    """The TXT strings of host i (several strings of 200 bytes for the big ones)."""
    if i < BIG:
        return [f"big {i} part {j} " + "x" * (180 + i) for j in range(7)]
    return [f"record {i} " + "t" * (i % 40)]


def _zone(path):
    with open(path, "w") as f:
        f.write(
            "$ORIGIN bench.test.\n$TTL 0\n"
            "@ IN SOA ns.bench.test. admin.bench.test. 1 3600 600 86400 0\n"
            "@ IN NS ns.bench.test.\nns IN A 127.0.0.1\n"
        )
        for i in range(NAMES):
            f.write(f"host{i} IN A 10.1.{i // 250}.{i % 250 + 1}\n")
            f.write(f"host{i} IN TXT " + " ".join(f'"{s}"' for s in _txt(i)) + "\n")


def query(name, rdtype, port, tcp, want_nx=False):
    import dns.message
    import dns.query
    import dns.rcode

    q = dns.message.make_query(name, rdtype)
    if tcp:
        r = dns.query.tcp(q, "127.0.0.1", port=port, timeout=1.5)
    else:  # as a stub resolver does: a truncated answer is asked again over TCP
        r, _ = dns.query.udp_with_fallback(q, "127.0.0.1", port=port, timeout=1.5)
    want = dns.rcode.NXDOMAIN if want_nx else dns.rcode.NOERROR
    if r.rcode() != want or (not want_nx and not r.answer):
        raise ValueError(f"{name} {rdtype}: {dns.rcode.to_text(r.rcode())}, {len(r.answer)} answers")
    if rdtype == "TXT" and not want_nx:
        i = int(name.split(".")[0][4:])
        got = [s.decode() for rr in r.answer[0] for s in rr.strings]
        if got != _txt(i):
            raise ValueError(f"{name} TXT: {len(got)} strings, not the zone's {len(_txt(i))}")


def _loop(n, mode, who):
    import dns.exception

    port = ports("pdns-knot")[1]
    ok = errors = 0
    for i in steps(n):
        h = i % NAMES
        nx = mode == "nx" and i % 3 == 0
        name = f"nohost{i}.bench.test." if nx else f"host{h}.bench.test."
        try:
            query(name, "TXT" if i % 3 == 1 else "A", port, mode == "tcp", nx)
            ok += 1
        except (OSError, ValueError, EOFError, dns.exception.DNSException) as e:
            errors += 1
            log(f"{who}: query {i} failed: {e!r}")
        time.sleep(0.01)
    return ok, errors


def client(name):
    """Helper process `pdns-client --name tcp|nx`: queries over TCP, or over UDP with
    names that do not exist among them."""
    n = 150
    ok, errors = _loop(n, name, f"{name} client")
    log(f"pdns {name} client: {ok}/{ok + errors} queries ok, {errors} failed")


def run(tmp, n):
    pk, pr = ports("pdns-knot")[:2]
    kd = os.path.join(tmp, "knot")
    os.makedirs(os.path.join(kd, "db"), exist_ok=True)
    _zone(os.path.join(kd, "bench.test.zone"))
    conf = os.path.join(kd, "knot.conf")
    with open(conf, "w") as f:
        f.write(
            "server:\n"
            f"    rundir: \"{kd}\"\n    listen: 127.0.0.1@{pk}\n"
            "    udp-workers: 2\n    tcp-workers: 2\n    background-workers: 1\n"
            "    tcp-idle-timeout: 5\n"
            "database:\n"
            f"    storage: \"{kd}/db\"\n"
            "log:\n  - target: stderr\n    any: info\n"
            "template:\n  - id: default\n"
            f"    storage: \"{kd}\"\n    journal-content: none\n    zonefile-sync: -1\n"
            "zone:\n  - domain: bench.test\n    file: bench.test.zone\n"
        )
    rd = os.path.join(tmp, "pdns")
    os.makedirs(rd, exist_ok=True)
    open(os.path.join(rd, "recursor.conf"), "w").close()  # everything is on the command line
    rec = [
        "pdns_recursor", "--daemon=no", "--config-dir=" + rd, "--socket-dir=" + rd,
        "--local-address=127.0.0.1", f"--local-port={pr}", "--allow-from=127.0.0.0/8",
        # The root too: the recursor's priming and every other query stay on loopback.
        f"--forward-zones=bench.test=127.0.0.1:{pk},.=127.0.0.1:{pk}", "--security-poll-suffix=",
        "--dont-query=", "--dnssec=off",
        "--threads=2", "--max-cache-ttl=1", "--max-negative-ttl=1", "--packetcache-ttl=0",
        "--packetcache-servfail-ttl=0", "--network-timeout=1000", "--disable-syslog=yes",
        "--log-timestamp=no", "--webserver=no", "--setuid=", "--setgid=", "--quiet=yes",
        "--edns-outgoing-bufsize=1232", "--udp-truncation-threshold=1232",
        "--server-down-max-fails=0",
    ]
    with Daemons(tmp) as d:
        p = d.start("knotd", ["knotd", "-c", conf])
        wait_port(pk, p, timeout=15)
        p = d.start("pdns_recursor", rec)
        wait_port(pr, p, timeout=15)
        tcp = d.start("tcp-client", [PY, LAUNCHER, "pdns-client", "--name", "tcp"])
        nx = d.start("nx-client", [PY, LAUNCHER, "pdns-client", "--name", "nx"])
        ok, errors = _loop(n, "udp", "udp client")
        for c in (tcp, nx):
            try:
                c.wait(timeout=30)
            except Exception:
                log("a helper client did not finish")
        log(f"pdns-knot: udp {ok}/{n} queries ok, {errors} failed")
