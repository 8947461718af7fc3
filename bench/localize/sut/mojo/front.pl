#!/usr/bin/perl
# mojo-prefork's front (sut/mojo_prefork.py): a Mojolicious::Lite app serving the API of
# sut/kv_http.py; every request is one call to the store through a Mojo::UserAgent
# (non-blocking, a keep-alive pool, 1 s timeouts); a store failure becomes a 502.
use Mojolicious::Lite -signatures;
use Mojo::UserAgent;
use Digest::SHA qw(sha1_hex);

my $store = "http://127.0.0.1:" . ($ENV{MOJO_STORE_PORT} // die "MOJO_STORE_PORT not set\n");
my $ua = Mojo::UserAgent->new(connect_timeout => 1, request_timeout => 1, inactivity_timeout => 10);
my ($served, $failed) = (0, 0);
my $manager = $$;
app->log->level('warn');

sub fail ($c, $k, $err) {
    $failed++;
    chomp $err;
    print STDERR "systems: mojo front: item $k: store failed: " . substr("$err", 0, 120) . "\n";
    $c->render(json => {error => substr("$err", 0, 200)}, status => 502);
}

put '/item/:k' => sub ($c) {
    my $k = $c->param('k');
    return $c->render(json => {error => 'no such item'}, status => 404) unless $k =~ /^\d+$/;
    my $v = $c->req->body;
    $c->render_later;
    $ua->put_p("$store/kv/$k" => {} => $v)->then(sub ($tx) {
        my $res = $tx->result;
        die "PUT /kv/$k: status " . $res->code . "\n" unless $res->code == 200;
        my $j = $res->json // die "PUT /kv/$k: not JSON\n";
        die "answer for key $j->{k}, not $k\n" unless ($j->{k} // '') eq $k;
        die "stored $j->{stored} bytes of " . length($v) . "\n" unless ($j->{stored} // -1) == length $v;
        $served++;
        $c->render(json => {item => 0 + $k, stored => length $v});
    })->catch(sub ($err) { fail($c, $k, $err) });
};

get '/item/:k' => sub ($c) {
    my $k = $c->param('k');
    return $c->render(json => {error => 'no such item'}, status => 404) unless $k =~ /^\d+$/;
    $c->render_later;
    $ua->get_p("$store/kv/$k")->then(sub ($tx) {
        my $res = $tx->result;
        die "GET /kv/$k: status " . $res->code . "\n" unless $res->code == 200;
        die "answer for key " . ($res->headers->header('X-Key') // '?') . ", not $k\n"
            unless ($res->headers->header('X-Key') // '') eq $k;
        my $v = $res->body;
        $served++;
        $c->render(json => {item => 0 + $k, len => length $v, digest => substr(sha1_hex($v), 0, 16)});
    })->catch(sub ($err) { fail($c, $k, $err) });
};

END {
    print STDERR "systems: mojo front: worker $$: $served requests ok, $failed failed (told to stop)\n"
        if $$ != $manager;
}

app->start;
