"""poe-chain: a Perl front server on POE (Debian `libpoe-perl` 1.37: one event loop per
process) that forwards every put and get to a POE store server in another process, and two
Python clients.

Ports: front = p[0], store = p[1]. The protocol is line-framed, values in Base64: `PUT key
b64` answered `OK key length sha1`, `GET key` answered `VAL b64` or `ERR text`. The store
(`poe.pl store`) is a `POE::Component::Server::TCP` keeping a hash; its requests carry a
request id (`ID PUT key b64`, answered `ID OK ...`). The front (`poe.pl front`) is a
`POE::Component::Server::TCP` for its clients and holds one connection to the store, a
`POE::Component::Client::TCP`, on which it forwards every client request with a new id; an
answer goes back to the client session that asked, by id; a call not answered within 1 s,
or pending when the store connection fails, is answered `ERR` (the front connects again
0.2 s after a failed or lost connection; the clients start once its first connection is
made). Each client (the launcher, and the helper
`poe-client --name 2`, which starts 1.5 s later) puts a value a step (300 bytes to 9 KB,
bytes that depend on the key; keys of its own) and gets it back on one connection (2 s
timeout), checks the answers (key, length and SHA-1 of a put; the value's length and
SHA-1), counts a failure, connects again and goes on. Both servers say at their exit
(SIGTERM) how many requests they served.
"""

import base64
import hashlib
import os
import time

from .common import Daemons, LineClient, LAUNCHER, PY, log, ports, steps, wait_port, wait_readers
from .rmi_chain import wait_log

REQUESTS2 = 60

PL = r"""# A process of the fault suite's poe-chain: perl poe.pl store PORT | front PORT STORE_PORT
use strict;
use warnings;
use POE qw(Component::Server::TCP Component::Client::TCP);
use MIME::Base64 qw(decode_base64 encode_base64);
use Digest::SHA qw(sha1_hex);

$| = 1;
my ($role, $port, $sport) = @ARGV;
my ($served, $failed) = (0, 0);
sub say { print STDERR "systems: $_[0]\n"; }

sub bye {
    if ($role eq 'store') { say("poe store: $served requests served (told to stop)"); }
    else { say("poe front: $served requests forwarded, $failed failed (told to stop)"); }
    exit 0;
}

my %data;
# The store's answer to one request line (without its id).
sub store_answer {
    my ($line) = @_;
    if ($line =~ /^PUT (\S+) (\S*)$/) {
        my $v = decode_base64($2);
        $data{$1} = $v;
        $served++;
        return "OK $1 " . length($v) . " " . sha1_hex($v);
    }
    if ($line =~ /^GET (\S+)$/) {
        $served++;
        return exists $data{$1} ? "VAL " . encode_base64($data{$1}, '') : "ERR no key $1";
    }
    return "ERR bad request";
}

POE::Session->create(inline_states => {
    _start => sub { $_[KERNEL]->sig(TERM => 'term'); $_[KERNEL]->alias_set('signals'); },
    term => sub { bye(); },
});

if ($role eq 'store') {
    POE::Component::Server::TCP->new(
        Address => '127.0.0.1', Port => $port,
        ClientInput => sub {
            my ($heap, $line) = @_[HEAP, ARG0];
            my ($id, $rest) = split / /, $line, 2;
            $heap->{client}->put("$id " . store_answer($rest // ''));
        },
    );
} else {
    my %pending;    # id -> [client session id, alarm id, request]
    my $next = 0;
    my $fail = sub {
        my ($kernel, $id, $why) = @_;
        my $p = delete $pending{$id} or return;
        $failed++;
        $kernel->alarm_remove($p->[1]) if $p->[1];
        say("poe front: store $p->[2]: $why");
        $kernel->post($p->[0], 'answer', "ERR store $p->[2]: $why");
    };
    POE::Component::Client::TCP->new(
        Alias => 'store', RemoteAddress => '127.0.0.1', RemotePort => $sport,
        ConnectTimeout => 1,
        Connected => sub { $_[HEAP]{up} = 1; say('poe front: connected to the store'); },
        ConnectError => sub { $_[HEAP]{up} = 0; $_[KERNEL]->delay(reconnect => 0.2); },
        Disconnected => sub {
            $_[HEAP]{up} = 0;
            $fail->($_[KERNEL], $_, 'connection lost') for sort keys %pending;
            $_[KERNEL]->delay(reconnect => 0.2);
        },
        ServerError => sub {
            my ($op, $errnum, $errstr) = @_[ARG0 .. ARG2];
            say("poe front: store connection: $op error $errnum $errstr") if $errnum;
        },
        ServerInput => sub {
            my ($kernel, $line) = @_[KERNEL, ARG0];
            my ($id, $rest) = split / /, $line, 2;
            my $p = defined $id ? delete $pending{$id} : undef;
            unless ($p) {
                say("poe front: an answer for no pending call: " . substr($line, 0, 60));
                return;
            }
            $kernel->alarm_remove($p->[1]);
            $served++;
            $kernel->post($p->[0], 'answer', $rest // 'ERR empty answer');
        },
        InlineStates => {
            call => sub {
                my ($kernel, $heap, $sid, $line) = @_[KERNEL, HEAP, ARG0, ARG1];
                my $id = ++$next;
                my ($what) = $line =~ /^(\S+ \S+)/;
                $pending{$id} = [$sid, 0, $what // 'request'];
                if (!$heap->{up} || !$heap->{server}) {
                    $fail->($kernel, $id, 'not connected');
                    return;
                }
                $pending{$id}[1] = $kernel->delay_set(expire => 1, $id);
                $heap->{server}->put("$id $line");
            },
            expire => sub {
                my ($kernel, $id) = @_[KERNEL, ARG0];
                return unless $pending{$id};
                $pending{$id}[1] = 0;
                $fail->($kernel, $id, 'no answer within 1 s');
            },
        },
    );
    POE::Component::Server::TCP->new(
        Address => '127.0.0.1', Port => $port,
        ClientInput => sub {
            my ($kernel, $session, $line) = @_[KERNEL, SESSION, ARG0];
            if ($line =~ /^(PUT \S+ \S*|GET \S+)$/) {
                $kernel->post('store', 'call', $session->ID, $line);
            } else {
                $_[HEAP]{client}->put('ERR bad request');
            }
        },
        InlineStates => {
            answer => sub { $_[HEAP]{client}->put($_[ARG0]) if $_[HEAP]{client}; },
        },
    );
}
POE::Kernel->run();
"""


def value(k):
    """The bytes a client stores under key k (their length varies with k)."""
    seed = hashlib.sha1(f"poe-{k}".encode()).digest()
    n = 300 + (k * 7919) % 9000
    return (seed * (n // len(seed) + 1))[:n]


def _step(c, k):
    v = value(k)
    c.sock.sendall(f"PUT {k} ".encode() + base64.b64encode(v) + b"\r\n")
    line = c.line()
    if line != f"OK {k} {len(v)} {hashlib.sha1(v).hexdigest()}".encode():
        raise ValueError(f"put {k}: wrong answer {line[:80]!r}")
    c.sock.sendall(f"GET {k}\r\n".encode())
    line = c.line()
    if not line.startswith(b"VAL "):
        raise ValueError(f"get {k}: wrong answer {line[:80]!r}")
    got = base64.b64decode(line[4:])
    if len(got) != len(v) or hashlib.sha1(got).digest() != hashlib.sha1(v).digest():
        raise ValueError(f"get {k}: {len(got)} bytes, wrong length or SHA-1")
    return True


def workload(name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart: (steps that went right, failures)."""
    c = LineClient(ports("poe-chain")[0], timeout=2.0)
    ok = 0
    for i in steps(n):
        ok += bool(c.request(lambda c, k=2 * i + int(name): _step(c, k)))
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `poe-client --name N`: REQUESTS2 steps, every 60 ms, from 1.5 s after
    its start (the front accepts its connection mid-run)."""
    time.sleep(1.5)
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"poe client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, store = ports("poe-chain")[:2]
    script = os.path.join(tmp, "poe.pl")
    with open(script, "w") as f:
        f.write(PL)
    with Daemons(tmp) as d:
        p = d.start("store", ["perl", script, "store", str(store)])
        wait_port(store, p, timeout=15)
        p = d.start("front", ["perl", script, "front", str(front), str(store)])
        wait_port(front, p, timeout=15)
        # The front listens before its connection to the store is made: the clients start once
        # it is (a request before would be answered `ERR ... not connected`).
        wait_log(os.path.join(tmp, "front.log"), "connected to the store", p, timeout=15)
        helper = d.start("client2", [PY, LAUNCHER, "poe-client", "--name", "2"],
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"poe-chain: {ok}/{n} steps ok, {errors} failed")
