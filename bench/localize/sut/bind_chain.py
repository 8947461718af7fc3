"""bind-chain: two BIND 9 servers (Debian `bind9` 9.18, `named`: C, one process each, worker
threads on libuv) as a resolver chain, and dnspython clients over UDP and TCP, one of them
changing the zone with dynamic updates.

Ports: authoritative = p[0] (UDP and TCP), resolver = p[1] (UDP and TCP). The
authoritative named serves the zone `bench.test` from a file (A and TXT of host0..host47,
every TTL 0, so that nothing is cached downstream) and accepts RFC 2136 updates from
127.0.0.1 (kept in its journal). The resolver named recurses for 127.0.0.1 and forwards
`bench.test` only to the authoritative one (a `forward only` zone; DNSSEC validation off).
Three clients, each waiting at most 1.5 s for an answer, checking it against the zone,
counting a failure and going on, as a stub resolver does:

- the launcher asks the resolver over UDP for A records;
- the helper `bind-client --name tcp` asks the resolver over TCP (one connection per
  query), A and TXT in turn;
- the helper `bind-client --name update` sets the TXT of `dyn-K.bench.test` on the
  authoritative server with an UPDATE (over UDP), then reads it back through the resolver
  over UDP and checks that it is the value it set.

Both named run in the foreground (`-g`, logging to stderr) as root, with 2 worker threads.
"""

import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_udp

NAMES = 48
STEPS_HELPER = 130
TIMEOUT_S = 1.5


def address(i):
    return f"10.3.{i // 250}.{i % 250 + 1}"


def txt(i):
    """The TXT strings of host i."""
    return [f"bind record {i}", "b" * (12 + i % 40)]


def query(name, rdtype, port, tcp, want):
    """Asks `name`; ValueError unless the answer is `want` (addresses or TXT strings)."""
    import dns.message
    import dns.query
    import dns.rcode

    q = dns.message.make_query(name, rdtype)
    if tcp:
        r = dns.query.tcp(q, "127.0.0.1", port=port, timeout=TIMEOUT_S)
    else:
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=TIMEOUT_S)
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        raise ValueError(f"{name} {rdtype}: {dns.rcode.to_text(r.rcode())}, {len(r.answer)} answers")
    if rdtype == "A":
        got = sorted(rr.address for rr in r.answer[-1])
    else:
        got = [s.decode() for rr in r.answer[-1] for s in rr.strings]
    if got != want:
        raise ValueError(f"{name} {rdtype}: {got!r:.60}, not {want!r:.60}")


def update(name, value, port):
    """Replaces the TXT of `name` (relative to bench.test) on the authoritative server."""
    import dns.query
    import dns.rcode
    import dns.update

    u = dns.update.UpdateMessage("bench.test.")
    u.replace(name, 0, "TXT", f'"{value}"')
    r = dns.query.udp(u, "127.0.0.1", port=port, timeout=TIMEOUT_S)
    if r.rcode() != dns.rcode.NOERROR:
        raise ValueError(f"UPDATE {name}: {dns.rcode.to_text(r.rcode())}")


def step(mode, i):
    auth, resolver = ports("bind-chain")[:2]
    k = i % NAMES
    name = f"host{k}.bench.test."
    if mode == "update":
        dyn = f"dyn-{i % 16}"
        value = f"set {i} by the updater"
        update(dyn, value, auth)
        query(f"{dyn}.bench.test.", "TXT", resolver, False, [value])
    elif mode == "tcp" and i % 2:
        query(name, "TXT", resolver, True, txt(k))
    else:
        query(name, "A", resolver, mode == "tcp", [address(k)])


def _loop(n, mode):
    import dns.exception

    ok = errors = 0
    for i in steps(n):
        try:
            step(mode, i)
            ok += 1
        except (OSError, ValueError, EOFError, dns.exception.DNSException) as e:
            errors += 1
            log(f"{mode} client: query {i} failed: {e!r}")
        time.sleep(0.1)
    return ok, errors


def client(name):
    """Helper process `bind-client --name tcp|update`."""
    ok, errors = _loop(STEPS_HELPER, name)
    log(f"bind {name} client: {ok}/{STEPS_HELPER} steps ok, {errors} failed")


def _options(tmp, name, port, extra):
    work = os.path.join(tmp, name)
    os.makedirs(work, exist_ok=True)
    return (
        "options {\n"
        f'  directory "{work}";\n  pid-file none;\n  session-keyfile "{work}/session.key";\n'
        f'  managed-keys-directory "{work}";\n'
        f"  listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n"
        "  query-source address 127.0.0.1;\n  dnssec-validation no;\n  empty-zones-enable no;\n"
        "  notify no;\n  minimal-responses yes;\n" + extra + "};\ncontrols { };\n"
    )


def configure(tmp):
    """named.conf of both servers and the zone file; returns their paths."""
    auth, resolver = ports("bind-chain")[:2]
    lines = ["$TTL 0", "@ IN SOA ns.bench.test. admin.bench.test. 1 3600 600 86400 0", "@ IN NS ns",
             "ns IN A 127.0.0.1"]
    for i in range(NAMES):
        lines.append(f"host{i} IN A {address(i)}")
        lines.append(f"host{i} IN TXT " + " ".join(f'"{s}"' for s in txt(i)))
    os.makedirs(os.path.join(tmp, "auth"), exist_ok=True)
    with open(os.path.join(tmp, "auth", "bench.test.zone"), "w") as f:
        f.write("\n".join(lines) + "\n")
    confs = {}
    confs["auth"] = os.path.join(tmp, "auth.conf")
    with open(confs["auth"], "w") as f:
        f.write(_options(tmp, "auth", auth, "  recursion no;\n"))
        f.write('zone "bench.test" { type primary; file "bench.test.zone"; allow-update { 127.0.0.1; }; };\n')
    confs["resolver"] = os.path.join(tmp, "resolver.conf")
    with open(confs["resolver"], "w") as f:
        f.write(_options(tmp, "resolver", resolver,
                         "  recursion yes;\n  allow-recursion { 127.0.0.1; };\n  max-cache-ttl 0;\n"
                         "  max-ncache-ttl 0;\n"))
        f.write(f'zone "bench.test" {{ type forward; forward only; forwarders {{ 127.0.0.1 port {auth}; }}; }};\n')
    return confs


def run(tmp, n):
    auth, resolver = ports("bind-chain")[:2]
    confs = configure(tmp)
    with Daemons(tmp) as d:
        for name, port in (("auth", auth), ("resolver", resolver)):
            p = d.start(f"named-{name}", ["/usr/sbin/named", "-g", "-n", "2", "-c", confs[name]])
            wait_udp(port, p)
            wait_port(port, p)
        helpers = [d.start(f"{m}-client", [PY, LAUNCHER, "bind-client", "--name", m]) for m in ("tcp", "update")]
        ok, errors = _loop(n, "udp")
        for c in helpers:
            try:
                c.wait(timeout=30)
            except Exception:
                log("a helper client did not finish")
        log(f"bind-chain: udp {ok}/{n} queries ok, {errors} failed")
