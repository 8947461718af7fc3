# The application tier of the demand suite's cms-varnish-perl system (bench/demand/cms.py):
# a Perl PSGI application served by Starman (Debian `starman`: a preforking master and a
# fixed pool of worker processes on one socket, each serving one request at a time) behind
# Varnish (every request passed to it), over memcached (a cache of documents) and
# PostgreSQL (DBD::Pg; one backend process per worker's connection).
#
# Three request types (`/TYPE/K`), each burning a known CPU time of this process
# (CLOCK_PROCESS_CPUTIME_ID: a Starman worker has one thread) before its downstream work:
#
# - `doc/K` burns 1.2 ms, then reads document K from memcached; on a miss it reads it from
#   PostgreSQL by its slug (an index lookup) and stores it in memcached for 30 s;
# - `search/K` burns 3.5 ms, then reads category K's first 20 documents by title from
#   PostgreSQL (an index on the category; the `index` fault drops it: the table is scanned);
# - `vote/K` burns 0.6 ms, then adds a vote to document K (an UPDATE by its slug,
#   autocommit) and deletes the document from memcached.
#
# Each request's CPU time from the handler's first line to the body it returns (Starman's
# reading of the request and writing of the reply are not in it) is appended to
# $CMS_STATS/app-PID.tsv ("TYPE SECONDS") until the fault (the file $CMS_STATS/fault exists
# after it), then to $CMS_STATS/after-app-PID.tsv: the first is the truth of the fault-free
# demands. Connections to memcached and PostgreSQL are made by each worker on its first
# request and kept. The ports come from CMS_MC_PORT and CMS_PG_PORT.
use strict;
use warnings;
use DBI;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(clock_gettime CLOCK_PROCESS_CPUTIME_ID);

my %BURN_S = (doc => 0.0012, search => 0.0035, vote => 0.0006);
my ($MC_PORT, $PG_PORT, $STATS) = @ENV{qw(CMS_MC_PORT CMS_PG_PORT CMS_STATS)};
die "cms.psgi: CMS_MC_PORT, CMS_PG_PORT and CMS_STATS must be set\n"
    unless $MC_PORT && $PG_PORT && $STATS;
my $JSON = JSON::PP->new->canonical;
my ($owner, $dbh, $mc, %out) = (0);

sub cpu_s { clock_gettime(CLOCK_PROCESS_CPUTIME_ID) }

sub burn {
    my $end = cpu_s() + $_[0];
    my $x = 0;
    $x++ while cpu_s() < $end;
    return $x;
}

# A worker's own connections (made after the fork, in the process that uses them).
sub connections {
    return if $owner == $$;
    $owner = $$;
    %out = ();
    $dbh = DBI->connect("dbi:Pg:dbname=postgres;host=127.0.0.1;port=$PG_PORT", 'postgres', '',
        {AutoCommit => 1, RaiseError => 1, PrintError => 0});
    $mc = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $MC_PORT, Proto => 'tcp')
        or die "cms.psgi: memcached on port $MC_PORT: $!\n";
    $mc->autoflush(1);
}

sub mc_get {
    my ($k) = @_;
    print $mc "get $k\r\n";
    my $line = <$mc>;
    return undef unless $line =~ /^VALUE \S+ \d+ (\d+)/;
    my $n = $1;
    my $v = '';
    while (length($v) < $n + 2) {
        my $got = read($mc, $v, $n + 2 - length($v), length($v));
        die "cms.psgi: memcached closed the connection\n" unless $got;
    }
    <$mc>;    # END
    return substr($v, 0, $n);
}

sub mc_cmd {
    print $mc $_[0];
    <$mc>;
}

sub doc {
    my ($k) = @_;
    burn($BURN_S{doc});
    my $id = $k % 2000 + 1;
    my $v = mc_get("d:$id");
    if (!defined $v) {
        my $rows = $dbh->selectall_arrayref(
            $dbh->prepare_cached('SELECT id, title, body FROM docs WHERE slug = ?'), undef, sprintf('d%06d', $id));
        $v = $JSON->encode($rows);
        mc_cmd(sprintf("set d:%d 0 30 %d\r\n%s\r\n", $id, length($v), $v));
    }
    return $v;
}

sub search {
    my ($k) = @_;
    burn($BURN_S{search});
    my $rows = $dbh->selectall_arrayref(
        $dbh->prepare_cached('SELECT id, title FROM docs WHERE cat = ? ORDER BY title LIMIT 20'), undef, $k % 150);
    return $JSON->encode($rows);
}

sub vote {
    my ($k) = @_;
    burn($BURN_S{vote});
    my $id = $k % 2000 + 1;
    $dbh->prepare_cached('UPDATE docs SET votes = votes + 1 WHERE slug = ?')->execute(sprintf('d%06d', $id));
    mc_cmd("delete d:$id\r\n");
    return $JSON->encode([$id]);
}

my %HANDLER = (doc => \&doc, search => \&search, vote => \&vote);

sub record {
    my ($kind, $used) = @_;
    # The same calls before and after the fault: only the file differs.
    my $which = -e "$STATS/fault" ? 'after-app-' : 'app-';
    if (!$out{$which}) {
        open($out{$which}, '>>', "$STATS/$which$$.tsv") or die "cms.psgi: $STATS/$which$$.tsv: $!\n";
        $out{$which}->autoflush(1);
    }
    printf {$out{$which}} "%s %.9f\n", $kind, $used;
}

my $app = sub {
    my ($env) = @_;
    my $t0 = cpu_s();
    my (undef, $kind, $k) = split m{/}, $env->{PATH_INFO};
    return [404, ['Content-Length' => 0], []] unless defined $k && $HANDLER{$kind} && $k =~ /^\d+$/;
    connections();
    my $body = $HANDLER{$kind}->($k);
    record($kind, cpu_s() - $t0);
    return [200, ['Content-Type' => 'application/json', 'Content-Length' => length($body)], [$body]];
};

$app;
