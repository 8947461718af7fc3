<?php
// The application tier of the demand suite's blog-lighttpd-php system (bench/demand/blog.py):
// a PHP script run by php-cgi (Debian `php-cgi`, a FastCGI parent and a pool of children on one
// socket) behind lighttpd's mod_fastcgi, over memcached (a cache of articles) and MariaDB.
//
// Three request types (`?r=TYPE/K`), each burning a known CPU time of this process
// (getrusage: php-cgi runs one request at a time in one thread) before its downstream work:
//
// - `article/K` burns 1 ms, then reads article K from memcached; on a miss it reads it from
//   MariaDB by its slug (an index lookup) and stores it in memcached for 30 s;
// - `feed/K` burns 3 ms, then reads topic K's newest 20 articles from MariaDB (an index on
//   the topic; the `index` fault drops it);
// - `comment/K` burns 0.5 ms, then inserts a comment (autocommit) and deletes the article
//   from memcached.
//
// Each request's CPU time from the script's first line to its reply is appended to
// STATS/php-PID.tsv ("TYPE SECONDS") until the fault (the file STATS/fault exists after it),
// then to STATS/after-php-PID.tsv (the same calls): the first is the truth of the fault-free
// demands. Connections to memcached and MariaDB are persistent
// (one of each per child). conf.php (written by blog.py beside this copy) holds the ports.
require __DIR__ . '/conf.php';

const BURN_S = ['article' => 0.001, 'feed' => 0.003, 'comment' => 0.0005];

function cpu_s()
{
    $r = getrusage();
    return $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6 + $r['ru_stime.tv_sec'] + $r['ru_stime.tv_usec'] / 1e6;
}

$t0 = cpu_s();

function burn($s)
{
    $end = cpu_s() + $s;
    $x = 0;
    while (cpu_s() < $end) {
        $x++;
    }
    return $x;
}

function db()
{
    static $c = null;
    if ($c === null) {
        $c = new mysqli('p:127.0.0.1', 'root', '', 'blog', DB_PORT);
    }
    return $c;
}

function mc()
{
    static $s = null;
    if ($s === null) {
        $s = stream_socket_client('tcp://127.0.0.1:' . MC_PORT, $errno, $err, 10,
            STREAM_CLIENT_CONNECT | STREAM_CLIENT_PERSISTENT);
    }
    return $s;
}

function mc_get($k)
{
    fwrite(mc(), "get $k\r\n");
    $line = fgets(mc());
    if (strncmp($line, 'VALUE', 5) !== 0) {
        return null; // END
    }
    $n = (int)explode(' ', trim($line))[3];
    $v = '';
    while (strlen($v) < $n + 2) {
        $v .= fread(mc(), $n + 2 - strlen($v));
    }
    fgets(mc()); // END
    return substr($v, 0, $n);
}

function mc_cmd($cmd)
{
    fwrite(mc(), $cmd);
    fgets(mc());
}

function article($k)
{
    burn(BURN_S['article']);
    $id = $k % 2000 + 1;
    $v = mc_get("a:$id");
    if ($v === null) {
        $slug = sprintf('a%06d', $id);
        $v = json_encode(db()->query("SELECT id, title, body FROM articles WHERE slug = '$slug'")->fetch_all());
        mc_cmd(sprintf("set a:%d 0 30 %d\r\n%s\r\n", $id, strlen($v), $v));
    }
    return $v;
}

function feed($k)
{
    burn(BURN_S['feed']);
    $topic = $k % 200;
    return json_encode(db()->query("SELECT id, title FROM articles WHERE topic = $topic ORDER BY id DESC LIMIT 20")->fetch_all());
}

function comment($k)
{
    burn(BURN_S['comment']);
    $id = $k % 2000 + 1;
    db()->query("INSERT INTO comments(article, body) VALUES ($id, 'comment $k')");
    mc_cmd("delete a:$id\r\n");
    return json_encode([db()->insert_id]);
}

$parts = explode('/', $_GET['r'] ?? '');
$kind = $parts[0];
if (!isset(BURN_S[$kind]) || count($parts) < 2) {
    http_response_code(404);
    exit;
}
$body = $kind((int)$parts[1]);
header('Content-Type: application/json');
header('Content-Length: ' . strlen($body));
echo $body;
$used = cpu_s() - $t0;
// The same calls before and after the fault: only the file differs.
$file = file_exists(STATS . '/fault') ? '/after-php-' : '/php-';
file_put_contents(STATS . $file . getmypid() . '.tsv', "$kind $used\n", FILE_APPEND);
