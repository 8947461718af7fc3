"""krb5-kdc: MIT Kerberos 5 (Debian `krb5-kdc` and `krb5-admin-server` 1.20, C): the KDC
(`krb5kdc`, one process, UDP and TCP) and the admin server (`kadmind`, one process, the
kadmin RPC protocol over TCP, and kpasswd) of a private realm BENCH.TEST sharing one
database (db2, made here with `kdb5_util create` and `kadmin.local`), and three clients
that run MIT's own client programs as a script does: `kinit` (AS exchange, the password
on standard input), `kvno -k` (TGS exchange, the service ticket checked against the
service's keytab) and `kadmin` (a ticket for kadmin/admin from the KDC, then RPC to
kadmind).

Ports: KDC = p[0] (UDP and TCP), kadmind = p[1], kpasswd = p[2]. `KRB5_CONFIG` and
`KRB5_KDC_PROFILE` point at files of the scratch directory; no file of /etc is read.
Client 1 (the launcher) asks over UDP: each step `kinit userK` into a credentials cache of
its own (`udp.I.cc`, so every client program's command line names its step), then `kvno
-k` for one of 4 services. Client 2 (`krb5-client --name tcp`) does the same over TCP
(`udp_preference_limit = 1` in its krb5.conf) for users of its own. Client 3
(`krb5-client --name admin`) changes, each step, the password of one of 4 principals
through kadmind (`kadmin -q "cpw -pw NEW"`) and then gets a ticket with the new password
from the KDC, so that a step crosses both daemons and their shared database. A client
program that fails, prints the wrong thing or runs past 4 s (killed) is a failed step:
counted, logged, and the client goes on.
"""

import os
import subprocess
import time

from .common import LAUNCHER, Daemons, PY, log, ports, steps, terminated, wait_port, wait_udp

REALM = "BENCH.TEST"
USERS = 8  # per client: user0..7 (udp), user8..15 (tcp)
SERVICES = 4
ADMIN_TARGETS = 4
RUN_S = 4.0
STEPS_HELPER = 150

KRB5_CONF = """[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    rdns = false
    udp_preference_limit = {udp_limit}
    max_retries = 2
[realms]
    {realm} = {{
        kdc = 127.0.0.1:{kdc}
        admin_server = 127.0.0.1:{kadm}
        kpasswd_server = 127.0.0.1:{kpw}
    }}
"""

KDC_CONF = """[kdcdefaults]
    kdc_listen = 127.0.0.1:{kdc}
    kdc_tcp_listen = 127.0.0.1:{kdc}
[realms]
    {realm} = {{
        database_name = {dir}/principal
        key_stash_file = {dir}/stash
        acl_file = {dir}/kadm5.acl
        kadmind_listen = 127.0.0.1:{kadm}
        kpasswd_listen = 127.0.0.1:{kpw}
        max_life = 1h
    }}
[logging]
    kdc = FILE:{dir}/kdc.log
    admin_server = FILE:{dir}/kadmind.log
"""


def _env(tmp, tcp=False):
    env = dict(os.environ)
    env["KRB5_CONFIG"] = os.path.join(tmp, "krb5-tcp.conf" if tcp else "krb5.conf")
    env["KRB5_KDC_PROFILE"] = os.path.join(tmp, "kdc.conf")
    return env


def _prog(argv, env, stdin=None):
    """Runs a client program (bounded by RUN_S): (exit status, its output)."""
    r = subprocess.run(argv, input=stdin, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=RUN_S)
    return r.returncode, r.stdout.decode(errors="replace")


def password(user, gen=0):
    return f"pw-{user}-{gen}"


def kinit(env, user, pw, cc):
    """`kinit user` into credentials cache cc; ValueError unless it got a TGT for user."""
    rc, out = _prog(["kinit", "-c", cc, user], env, (pw + "\n").encode())
    if rc != 0:
        raise ValueError(f"kinit {user}: exit {rc}: {out.strip()[-120:]}")
    rc, out = _prog(["klist", "-c", cc], env)
    if rc != 0 or f"Default principal: {user}@{REALM}" not in out or f"krbtgt/{REALM}@{REALM}" not in out:
        raise ValueError(f"klist after kinit {user}: exit {rc}: {out.strip()[-120:]}")


def kvno(env, cc, service, keytab):
    """`kvno -k keytab service` with cache cc: ValueError unless the service ticket
    decrypts with the service's key."""
    rc, out = _prog(["kvno", "-c", cc, "-k", keytab, service], env)
    if rc != 0 or "keytab entry valid" not in out:
        raise ValueError(f"kvno {service}: exit {rc}: {out.strip()[-120:]}")


def kadmin(env, query):
    """One `kadmin` query as admin/admin (a ticket from the KDC, then RPC to kadmind)."""
    rc, out = _prog(["kadmin", "-p", f"admin/admin@{REALM}", "-w", "adminpw", "-q", query], env)
    if rc != 0 or "error" in out.lower() or "denied" in out.lower():
        raise ValueError(f"kadmin {query!r}: exit {rc}: {out.strip()[-120:]}")
    return out


def _ticket_loop(tmp, n, mode, label, term=None):
    env = _env(tmp, tcp=mode == "tcp")
    first = 0 if mode == "udp" else USERS
    keytab = os.path.join(tmp, "services.keytab")
    ok = failed = done = 0
    for i in steps(n):
        if term is not None and term.is_set():
            break
        user = f"user{first + i % USERS}"
        cc = f"FILE:{tmp}/{mode}.{i}.cc"
        try:
            kinit(env, user, password(user), cc)
            kvno(env, cc, f"host/svc{i % SERVICES}.bench.test", keytab)
            ok += 1
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            failed += 1
            log(f"{label} step {i} failed: {e!r}")
        done += 1
        try:
            os.unlink(cc[len("FILE:"):])
        except OSError:
            pass
        time.sleep(0.03)
    return ok, failed, done


def _admin_loop(tmp, n, term):
    env = _env(tmp)
    ok = failed = done = 0
    current = {}
    for i in steps(n):
        if term.is_set():
            break
        user = f"pwuser{i % ADMIN_TARGETS}"
        new = password(user, i + 1)
        try:
            kadmin(env, f"cpw -pw {new} {user}")
            current[user] = new
            kinit(env, user, new, f"FILE:{tmp}/admin.{i}.cc")
            ok += 1
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            failed += 1
            log(f"admin step {i} failed: {e!r}")
        done += 1
        try:
            os.unlink(f"{tmp}/admin.{i}.cc")
        except OSError:
            pass
        time.sleep(0.05)
    return ok, failed, done


def client(name):
    """Helper process `krb5-client --name tcp|admin` (its scratch directory in
    KRB5_BENCH_DIR)."""
    tmp = os.environ["KRB5_BENCH_DIR"]
    term = terminated()
    if name == "admin":
        ok, failed, done = _admin_loop(tmp, STEPS_HELPER, term)
        log(f"krb5 admin client: {ok}/{done} password changes and logins ok, {failed} failed")
    else:
        ok, failed, done = _ticket_loop(tmp, STEPS_HELPER, name, f"{name} client", term)
        log(f"krb5 {name} client: {ok}/{done} ticket steps ok, {failed} failed")


def _realm(tmp):
    """The realm's database, principals, ACL and the services' keytab (made once per run,
    before any daemon starts)."""
    kdc, kadm, kpw = ports("krb5-kdc")[:3]
    for name, limit in (("krb5.conf", 1465), ("krb5-tcp.conf", 1)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(KRB5_CONF.format(realm=REALM, kdc=kdc, kadm=kadm, kpw=kpw, udp_limit=limit))
    with open(os.path.join(tmp, "kdc.conf"), "w") as f:
        f.write(KDC_CONF.format(realm=REALM, kdc=kdc, kadm=kadm, kpw=kpw, dir=tmp))
    with open(os.path.join(tmp, "kadm5.acl"), "w") as f:
        f.write(f"admin/admin@{REALM} *\n")
    env = _env(tmp)
    subprocess.run(["kdb5_util", "create", "-s", "-r", REALM, "-P", "master-pw"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    keytab = os.path.join(tmp, "services.keytab")
    q = [f"addprinc -pw adminpw admin/admin@{REALM}"]
    q += [f"addprinc -pw {password(f'user{i}')} user{i}" for i in range(2 * USERS)]
    q += [f"addprinc -pw {password(f'pwuser{i}')} pwuser{i}" for i in range(ADMIN_TARGETS)]
    for s in range(SERVICES):
        q += [f"addprinc -randkey host/svc{s}.bench.test", f"ktadd -k {keytab} host/svc{s}.bench.test"]
    r = subprocess.run(["kadmin.local", "-r", REALM], input="\n".join(q + ["quit"]).encode(), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    if r.returncode != 0 or not os.path.exists(keytab):
        raise RuntimeError(f"kadmin.local failed: {r.stdout.decode(errors='replace')[-300:]}")


def run(tmp, n):
    kdc, kadm = ports("krb5-kdc")[:2]
    _realm(tmp)
    env = _env(tmp)
    with Daemons(tmp) as d:
        p = d.start("krb5kdc", ["krb5kdc", "-n", "-r", REALM], env=env)
        wait_udp(kdc, p)
        wait_port(kdc, p, timeout=10)
        p = d.start("kadmind", ["kadmind", "-nofork", "-r", REALM], env=env)
        wait_port(kadm, p, timeout=15)
        henv = dict(env, KRB5_BENCH_DIR=tmp)
        helpers = [d.start(f"{m}-client", [PY, LAUNCHER, "krb5-client", "--name", m], env=henv)
                   for m in ("tcp", "admin")]
        ok, failed, done = _ticket_loop(tmp, n, "udp", "udp client")
        for c in helpers:
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log("a helper client did not finish")
        log(f"krb5-kdc: udp {ok}/{n} ticket steps ok, {failed} failed")
