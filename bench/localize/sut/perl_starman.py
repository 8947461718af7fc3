"""perl-starman: a Perl PSGI application under Starman, a preforking HTTP server (a master
process and 3 worker processes, forked again when one dies), that keeps its data in a
memcached through a Perl client, and two Python clients (Debian `starman`, `libplack-perl`,
`libcache-memcached-fast-perl`, `memcached`; the clients use `http.client`).

Ports: Starman = p[0], memcached = p[1]. The application (`app.psgi`) speaks the API of
`sut/kv_http.py`: `PUT /item/K` stores the body in memcached (`set`), `GET /item/K` reads
it back (`get`) and answers its length and SHA-1 digest; a failed `set`, or a `get` that
finds nothing (Cache::Memcached::Fast answers both a miss and an error with undef), becomes
a 502. Each worker makes its own memcached client after the fork, the first time it needs
it (0.5 s to connect, 1 s for a reply; it closes the connection after an error and
connects again at the next call). Starman keeps a client's connection alive (3 s idle) in
the worker that accepted it; the workers take turns at accepting. The launcher's client
puts then reads back N keys every 20 ms, the helper `starman-client --name 2` 30 keys every
80 ms — the two workers that hold them see different amounts of traffic —; each on one
keep-alive connection (2 s timeout), checking the answers, counting failures, connecting
again and going on. Each worker that served something says at its exit how many requests it
served and how many failed.
"""

import os
import signal

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

PSGI = r"""# The application of the fault suite's perl-starman (memcached on $ENV{KV_MEMCACHED_PORT}).
use strict;
use warnings;
use Cache::Memcached::Fast;
use Digest::SHA qw(sha1_hex);
use JSON::PP;

my $mport = $ENV{KV_MEMCACHED_PORT} or die "KV_MEMCACHED_PORT is not set\n";
my $json = JSON::PP->new->canonical;
my ($memd, $owner);
my ($served, $failed) = (0, 0);

# Starman loads the application in each worker, after the fork: one memcached client per
# worker process, made the first time it is needed.
sub memd {
    if (!$memd || $owner != $$) {
        $memd = Cache::Memcached::Fast->new({
            servers => ["127.0.0.1:$mport"],
            connect_timeout => 0.5,
            io_timeout => 1.0,
            close_on_error => 1,
        });
        $owner = $$;
    }
    return $memd;
}

sub reply {
    my ($status, $obj) = @_;
    my $body = $json->encode($obj);
    return [$status, ['Content-Type' => 'application/json', 'Content-Length' => length $body], [$body]];
}

sub fail {
    my ($status, $why) = @_;
    $failed++;
    print STDERR "systems: starman worker $$: $why\n";
    return reply($status, {error => $why});
}

my $app = sub {
    my $env = shift;
    my ($k) = ($env->{PATH_INFO} // '') =~ m{^/item/(\d+)$};
    return fail(404, "no such path $env->{PATH_INFO}") unless defined $k;
    if ($env->{REQUEST_METHOD} eq 'PUT') {
        my $len = $env->{CONTENT_LENGTH} // 0;
        my $v = '';
        while (length($v) < $len) {
            my $n = $env->{'psgi.input'}->read(my $buf, $len - length $v);
            last unless $n;
            $v .= $buf;
        }
        return fail(400, "item $k: body of " . length($v) . " bytes, $len announced") if length($v) != $len;
        return fail(502, "item $k: memcached set failed") unless memd()->set("item:$k", $v);
        $served++;
        return reply(200, {item => $k + 0, stored => length $v});
    }
    my $v = memd()->get("item:$k");
    return fail(502, "item $k: not in memcached (a miss or an error)") unless defined $v;
    $served++;
    return reply(200, {item => $k + 0, len => length $v, digest => substr(sha1_hex($v), 0, 16)});
};

END {
    print STDERR "systems: starman worker $$: $served requests ok, $failed failed\n" if $served + $failed;
}

$app;
"""

REQUESTS2 = 30


def client(name):
    """Helper process `starman-client --name N` (30 keys, every 80 ms)."""
    ok, errors = workload(ports("perl-starman")[0], name, REQUESTS2, 0.08)
    log(f"starman client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    web, mc = ports("perl-starman")[:2]
    app = os.path.join(tmp, "app.psgi")
    with open(app, "w") as f:
        f.write(PSGI)
    env = dict(os.environ, KV_MEMCACHED_PORT=str(mc))
    group = None
    try:
        with Daemons(tmp) as d:
            p = d.start("memcached", ["memcached", "-u", "root", "-l", "127.0.0.1", "-p", str(mc), "-U", "0", "-t", "2"])
            wait_port(mc, p)
            p = d.start("starman", ["starman", "--listen", f"127.0.0.1:{web}", "--workers", "3",
                                    "--keepalive-timeout", "3", app], env=env, start_new_session=True)
            group = p.pid
            wait_port(web, p, timeout=20)
            helper = d.start("client2", [PY, LAUNCHER, "starman-client", "--name", "2"])
            ok, errors = workload(web, "1", n, 0.02)
            wait_readers([helper], seconds=25)
            log(f"perl-starman: {ok}/{n} steps ok, {errors} failed")
    finally:
        # The workers share the master's process group; a worker stopped by SIGSTOP never
        # takes the SIGTERM the master passes on (the master, waiting for it, is killed
        # after 5 s): whatever is left of the group is killed.
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
