"""ldap-syncrepl: an OpenLDAP provider and a consumer that replicates it by syncrepl
(refreshAndPersist: one long-lived search on which the provider pushes every change), both
Debian's `slapd` (C, a thread pool behind one listener thread; LDAP is ASN.1 BER over TCP),
with clients on PyPI's `ldap3`.

Ports: provider = p[0], consumer = p[1]. The writer binds as the directory's manager on the
provider and adds N entries `cn=u<i>` (modifying the previous one every other step); the
reader `--name 1` follows them on the consumer (a replicated entry not there yet is waited
for, up to a second), the reader `--name 2` searches the provider anonymously. Every client
has a 2 s receive timeout, counts a failed operation, binds again on a new connection and
goes on; the consumer retries its replication connection every second.
"""

import os
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, terminated, wait_port, wait_readers

SUFFIX = "dc=bench"
PEOPLE = "ou=people," + SUFFIX
ADMIN, SECRET = "cn=admin," + SUFFIX, "secret"

COMMON = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
{modules}
pidfile {dir}/slapd.pid
database mdb
suffix "{suffix}"
rootdn "{admin}"
directory {dir}
maxsize 67108864
index objectClass eq
index entryCSN,entryUUID eq
"""
PROVIDER = """rootpw {secret}
overlay syncprov
syncprov-checkpoint 100 1
"""
CONSUMER = """syncrepl rid=001 provider=ldap://127.0.0.1:{provider} type=refreshAndPersist retry="1 +"
  searchbase="{suffix}" bindmethod=simple binddn="{admin}" credentials={secret} timeout=2 network-timeout=2
"""


def _conn(port, user=None, password=None):
    import ldap3

    return ldap3.Connection(ldap3.Server("127.0.0.1", port=port, connect_timeout=2), user, password,
                            auto_bind=True, receive_timeout=2, raise_exceptions=False)


def _errors():
    from ldap3.core.exceptions import LDAPException

    return (LDAPException, OSError, ValueError)


def _close(c):
    try:
        if c is not None:
            c.unbind()
    except Exception:
        pass


def reader(name):
    """Helper process `ldap-reader --name 1|2`: 1 follows the writer's entries on the
    consumer, 2 searches the provider; both leave at the entry `cn=stop` or after the
    workload's time."""
    provider, consumer = ports("ldap-syncrepl")[:2]
    port = consumer if name == "1" else provider
    errs = _errors()
    c, got, missed, failed, i, stop = None, 0, 0, 0, 0, False
    end = time.monotonic() + WORKLOAD_S + 5
    since = time.monotonic()
    term = terminated()
    while not stop and not term.is_set() and time.monotonic() < end:
        try:
            if c is None:
                c = _conn(port)
            if name == "1":
                found = c.search(PEOPLE, f"(cn=u{i})", attributes=["mail"]) and len(c.entries) == 1
                if found or time.monotonic() - since > 1.0:
                    # An entry the writer failed to add (or that never came) is given up.
                    got, missed, i, since = got + found, missed + (not found), i + 1, time.monotonic()
                else:
                    stop = bool(c.search(PEOPLE, "(cn=stop)") and c.entries)
                    time.sleep(0.05)
            else:
                if c.search(PEOPLE, f"(&(objectClass=inetOrgPerson)(mail=u{i % 50}*))", attributes=["cn", "mail"]):
                    got += 1
                elif c.result.get("result") not in (0, 32):
                    raise ValueError(f"search failed: {c.result.get('description')}")
                stop = bool(c.search(PEOPLE, "(cn=stop)") and c.entries)
                i += 1
                time.sleep(0.05)
        except errs as e:
            failed += 1
            log(f"reader {name}: operation failed: {e!r}")
            _close(c)
            c = None
            time.sleep(0.2)
    _close(c)
    log(f"ldap reader {name}: {got} reads, {missed} entries never seen, {failed} failed, stop={stop}{' (told to stop)' if term.is_set() else ''}")


def _write(c, i):
    """One step of the writer: add u<i>, modify u<i-1> every other step; False when the
    server refused."""
    import ldap3

    ok = c.add(f"cn=u{i},{PEOPLE}", "inetOrgPerson", {"sn": f"user{i}", "mail": f"u{i}@bench.example"})
    if ok and i % 2 == 1:
        ok = c.modify(f"cn=u{i - 1},{PEOPLE}", {"description": [(ldap3.MODIFY_REPLACE, [f"step {i}" + "d" * (i % 30)])]})
    if not ok:
        log(f"write {i}: {c.result.get('description')} {c.result.get('message', '')!r}")
    return ok


def run(tmp, n):
    provider, consumer = ports("ldap-syncrepl")[:2]
    for name, port, extra, mods in (("provider", provider, PROVIDER, "moduleload syncprov"),
                                    ("consumer", consumer, CONSUMER, "")):
        d = os.path.join(tmp, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(tmp, f"{name}.conf"), "w") as f:
            f.write(COMMON.format(modules=mods, dir=d, suffix=SUFFIX, admin=ADMIN))
            f.write(extra.format(provider=provider, suffix=SUFFIX, admin=ADMIN, secret=SECRET))
    errs = _errors()
    with Daemons(tmp) as d:
        conf = os.path.join(tmp, "provider.conf")
        p = d.start("provider", ["slapd", "-f", conf, "-h", f"ldap://127.0.0.1:{provider}/", "-d", "0"])
        wait_port(provider, p, timeout=20)
        c = _conn(provider, ADMIN, SECRET)
        c.add(SUFFIX, ["dcObject", "organization"], {"o": "bench", "dc": "bench"})
        c.add(PEOPLE, "organizationalUnit")
        conf = os.path.join(tmp, "consumer.conf")
        p = d.start("consumer", ["slapd", "-f", conf, "-h", f"ldap://127.0.0.1:{consumer}/", "-d", "0"])
        wait_port(consumer, p, timeout=20)
        readers = [d.start(f"reader{i}", [PY, LAUNCHER, "ldap-reader", "--name", str(i)]) for i in (1, 2)]
        ok = failed = 0
        for i in steps(n):
            try:
                if c is None:
                    c = _conn(provider, ADMIN, SECRET)
                if _write(c, i):
                    ok += 1
                else:
                    failed += 1
            except errs as e:
                failed += 1
                log(f"write failed: {e!r}")
                _close(c)
                c = None
                time.sleep(0.2)
            time.sleep(0.02)
        try:
            c = c or _conn(provider, ADMIN, SECRET)
            c.add(f"cn=stop,{PEOPLE}", "inetOrgPerson", {"sn": "stop"})
        except errs as e:
            log(f"could not add the stop entry: {e!r}")
        _close(c)
        wait_readers(readers)
        log(f"ldap-syncrepl: {ok}/{n} writes ok, {failed} failed")
