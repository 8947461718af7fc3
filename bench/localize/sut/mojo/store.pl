#!/usr/bin/perl
# mojo-prefork's store (sut/mojo_prefork.py): a Mojolicious::Lite key-value service run by
# Mojo's single-process daemon. PUT /kv/K keeps the body; GET /kv/K answers it (X-Key: K).
use Mojolicious::Lite -signatures;

my %data;
my $served = 0;
app->log->level('warn');

put '/kv/:k' => sub ($c) {
    my $k = $c->param('k');
    $data{$k} = $c->req->body;
    $served++;
    $c->render(json => {k => $k, stored => length $data{$k}});
};

get '/kv/:k' => sub ($c) {
    my $k = $c->param('k');
    $served++;
    return $c->render(json => {k => $k, error => 'no such key'}, status => 404) unless exists $data{$k};
    $c->res->headers->header('X-Key' => $k);
    $c->render(data => $data{$k}, format => 'txt');
};

END { print STDERR "systems: mojo store: $served requests ok (told to stop)\n" }

app->start;
