"""dns-chain: an unbound resolver that sends the queries of `bench.test` to an nsd
authoritative server (a stub zone), and dnspython clients that query the resolver over UDP
(the launcher) and TCP (a helper process) (C daemons, Python clients).

Ports: nsd = p[0] (UDP and TCP; nsd runs a main process, a transfer daemon and a server
child), unbound = p[1]. Records have TTL 0 and unbound caches nothing longer, so every
client query crosses the chain. Clients wait at most 1 s for an answer, count failures and
go on, as a stub resolver does.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port

NAMES = 64


def _zone(path):
    with open(path, "w") as f:
        f.write(
            "$ORIGIN bench.test.\n$TTL 0\n"
            "@ IN SOA ns.bench.test. admin.bench.test. 1 3600 600 86400 0\n"
            "@ IN NS ns.bench.test.\nns IN A 127.0.0.1\n"
        )
        for i in range(NAMES):
            f.write(f"host{i} IN A 10.0.{i // 250}.{i % 250 + 1}\n")
            f.write(f'host{i} IN TXT "record {i} ' + "t" * (i % 50) + '"\n')


def query(name, rdtype, port, tcp):
    import dns.message
    import dns.query
    import dns.rcode

    q = dns.message.make_query(name, rdtype)
    r = (dns.query.tcp if tcp else dns.query.udp)(q, "127.0.0.1", port=port, timeout=1.0)
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        raise ValueError(f"{name} {rdtype}: {dns.rcode.to_text(r.rcode())}, {len(r.answer)} answers")


def _loop(n, tcp, who):
    import dns.exception

    port = ports("dns-chain")[1]
    ok = errors = 0
    for i in steps(n):
        try:
            query(f"host{i % NAMES}.bench.test.", "A" if i % 3 else "TXT", port, tcp)
            ok += 1
        except (OSError, ValueError, EOFError, dns.exception.DNSException) as e:
            errors += 1
            log(f"{who}: query failed: {e!r}")
        time.sleep(0.005)
    return ok, errors


def client(name):
    """Helper process `dns-client --name N`: N queries over TCP."""
    ok, errors = _loop(int(name), True, "tcp client")
    log(f"dns tcp client: {ok} ok, {errors} failed")


def run(tmp, n):
    pn, pu = ports("dns-chain")[:2]
    zone = os.path.join(tmp, "bench.test.zone")
    _zone(zone)
    nsd_conf = os.path.join(tmp, "nsd.conf")
    with open(nsd_conf, "w") as f:
        f.write(
            "server:\n"
            f"  ip-address: 127.0.0.1@{pn}\n  port: {pn}\n  do-ip6: no\n  username: \"\"\n"
            f"  zonesdir: \"{tmp}\"\n  database: \"\"\n  pidfile: \"{tmp}/nsd.pid\"\n"
            f"  xfrdfile: \"{tmp}/xfrd.state\"\n  zonelistfile: \"{tmp}/zone.list\"\n"
            "  server-count: 1\n  verbosity: 1\n  hide-version: yes\n"
            "remote-control:\n  control-enable: no\n"
            "zone:\n  name: bench.test\n  zonefile: bench.test.zone\n"
        )
    ub_conf = os.path.join(tmp, "unbound.conf")
    with open(ub_conf, "w") as f:
        f.write(
            "server:\n"
            f"  interface: 127.0.0.1\n  port: {pu}\n  do-ip6: no\n  username: \"\"\n  chroot: \"\"\n"
            f"  directory: \"{tmp}\"\n  pidfile: \"{tmp}/unbound.pid\"\n  do-daemonize: no\n"
            "  use-syslog: no\n  logfile: \"\"\n  verbosity: 1\n  num-threads: 1\n"
            "  access-control: 127.0.0.0/8 allow\n  do-not-query-localhost: no\n"
            "  cache-max-ttl: 0\n  cache-max-negative-ttl: 0\n  prefetch: no\n"
            "  module-config: \"iterator\"\n  so-reuseport: no\n  outgoing-range: 64\n"
            "  domain-insecure: \"test\"\n  local-zone: \"test.\" transparent\n"
            "stub-zone:\n  name: \"bench.test\"\n"
            f"  stub-addr: 127.0.0.1@{pn}\n"
            "remote-control:\n  control-enable: no\n"
        )
    with Daemons(tmp) as d:
        p = d.start("nsd", ["nsd", "-d", "-c", nsd_conf])
        wait_port(pn, p)
        p = d.start("unbound", ["unbound", "-d", "-c", ub_conf])
        wait_port(pu, p)
        tcp = d.start("tcp-client", [PY, LAUNCHER, "dns-client", "--name", str(max(1, n // 2))])
        ok, errors = _loop(n, False, "udp client")
        try:
            tcp.wait(timeout=30)
        except Exception:
            log("the tcp client did not finish")
        log(f"dns-chain: udp {ok}/{n} ok, {errors} failed")
