"""dnsmasq-chain: two dnsmasq (Debian `dnsmasq-base` 2.90, C, one process each with a
child forked per TCP connection) in a chain: a forwarder with its cache off that sends
every query for `bench.test` to a second dnsmasq holding the zone's records, and dnspython
clients over UDP and TCP.

Ports: back = p[0] (UDP and TCP), front = p[1] (UDP and TCP). The back dnsmasq answers
from `--host-record` and `--txt-record` options (A and TXT of host0..host47) and refuses
to forward anything else (`--no-resolv`, no upstream); the front has `--cache-size=0` and
`--server=/bench.test/127.0.0.1#BACK`, so every client query crosses the chain (over UDP
from the front's own query sockets, or over TCP from the front's TCP child when the client
asked over TCP). Three clients: the launcher over UDP, a helper over TCP (`dnsmasq-client
--name tcp`: one connection per query, so the front forks a child for each) and a helper
over UDP asking for TXT records (`dnsmasq-client --name txt`). A client waits at most
1.5 s for an answer, checks it against the zone (address, or every TXT string), counts a
failure and goes on, as a stub resolver does. Both dnsmasq run in the foreground (`-k`),
as root, logging to stderr.
"""

import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_udp

NAMES = 48
STEPS_HELPER = 150


def address(i):
    return f"10.2.{i // 250}.{i % 250 + 1}"


def txt(i):
    """The TXT strings of host i."""
    return [f"record {i}", "t" * (10 + i % 30)]


def query(name, rdtype, port, tcp):
    """Asks `name`; ValueError unless the answer is the zone's."""
    import dns.message
    import dns.query
    import dns.rcode

    q = dns.message.make_query(name, rdtype)
    if tcp:
        r = dns.query.tcp(q, "127.0.0.1", port=port, timeout=1.5)
    else:
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=1.5)
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        raise ValueError(f"{name} {rdtype}: {dns.rcode.to_text(r.rcode())}, {len(r.answer)} answers")
    i = int(name.split(".")[0][4:])
    if rdtype == "A":
        got = sorted(rr.address for rr in r.answer[0])
        if got != [address(i)]:
            raise ValueError(f"{name} A: {got}, not {address(i)}")
    else:
        got = [s.decode() for rr in r.answer[0] for s in rr.strings]
        if got != txt(i):
            raise ValueError(f"{name} TXT: {got!r:.60}, not the zone's")


def _loop(n, mode, who):
    import dns.exception

    port = ports("dnsmasq-chain")[1]
    ok = errors = 0
    for i in steps(n):
        name = f"host{i % NAMES}.bench.test."
        rdtype = "TXT" if mode == "txt" or (mode == "tcp" and i % 2) else "A"
        try:
            query(name, rdtype, port, mode == "tcp")
            ok += 1
        except (OSError, ValueError, EOFError, dns.exception.DNSException) as e:
            errors += 1
            log(f"{who}: query {i} failed: {e!r}")
        time.sleep(0.02)
    return ok, errors


def client(name):
    """Helper process `dnsmasq-client --name tcp|txt`."""
    ok, errors = _loop(STEPS_HELPER, name, f"{name} client")
    log(f"dnsmasq {name} client: {ok}/{ok + errors} queries ok, {errors} failed")


def _argv(port, extra):
    return ["dnsmasq", "-k", "--user=root", "--group=root", "--log-facility=-", "--pid-file=",
            "--no-hosts", "--no-resolv", "--no-poll", "--bind-interfaces",
            "--listen-address=127.0.0.1", f"--port={port}", "--conf-file=/dev/null"] + extra


def run(tmp, n):
    back, front = ports("dnsmasq-chain")[:2]
    records = []
    for i in range(NAMES):
        records.append(f"--host-record=host{i}.bench.test,{address(i)}")
        records.append(f"--txt-record=host{i}.bench.test," + ",".join(txt(i)))
    back_argv = _argv(back, ["--cache-size=0", "--local=/bench.test/"] + records)
    front_argv = _argv(front, ["--cache-size=0", f"--server=/bench.test/127.0.0.1#{back}",
                               "--dns-forward-max=50"])
    with Daemons(tmp) as d:
        pb = d.start("dnsmasq-back", back_argv)
        wait_udp(back, pb)
        pf = d.start("dnsmasq-front", front_argv)
        wait_udp(front, pf)
        time.sleep(0.3)
        helpers = [d.start(f"{m}-client", [PY, LAUNCHER, "dnsmasq-client", "--name", m]) for m in ("tcp", "txt")]
        ok, errors = _loop(n, "udp", "udp client")
        for c in helpers:
            try:
                c.wait(timeout=30)
            except Exception:
                log("a helper client did not finish")
        log(f"dnsmasq-chain: udp {ok}/{n} queries ok, {errors} failed")
