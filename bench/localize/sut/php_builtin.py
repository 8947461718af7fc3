"""php-builtin: two PHP built-in web servers (`php -S`, the CLI SAPI's own HTTP server in
Debian's `php8.2-cli`: C, the Zend engine; one process each, serving one request at a
time) chained over HTTP, and two Python HTTP clients (`http.client`).

Ports: front = p[0], store = p[1]. The store runs `store.php` as its router script: `PUT
/item/K` writes the body to a file of its own under DIR/store (an exclusive lock while it
writes) and answers `{"k": K, "stored": LEN}`; `GET /item/K` answers `{"k": K, "v": V}`
(404 for a key it lacks). The front runs `front.php`: it serves the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`) and makes one HTTP/1.0 call to the store
per request (PHP's http stream wrapper, a new connection each, 1 s timeout); a store
failure (no answer, a status other than 200, an answer for another key or length) becomes
a 502. The built-in server answers every request with `Connection: close`, so a client
connects again for each request (http.client does it by itself). Each client (the
launcher, and the helper `phpb-client --name 2`) puts then reads back keys of its own with
a 2 s timeout, checks length and SHA-1, counts failures and goes on. Both servers log
each request to their log (the built-in server's own access log).
"""

import os

from .common import Daemons, log, ports, wait_port, wait_readers, LAUNCHER, PY
from .kv_http import workload

REQUESTS2 = 60

STORE_PHP = r"""<?php
// The store: PUT /item/K keeps the body in a file, GET /item/K answers it.
$dir = getenv('PHPB_STORE_DIR');
header('Content-Type: application/json');
if (!preg_match('#^/item/([0-9]+)$#', parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH), $m)) {
    http_response_code(404);
    echo json_encode(['error' => 'no such path']);
    return;
}
$k = $m[1];
$path = "$dir/$k";
if ($_SERVER['REQUEST_METHOD'] === 'PUT') {
    $v = file_get_contents('php://input');
    if (file_put_contents($path, $v, LOCK_EX) === false) {
        http_response_code(500);
        echo json_encode(['error' => 'write failed']);
        return;
    }
    echo json_encode(['k' => $k, 'stored' => strlen($v)]);
} elseif ($_SERVER['REQUEST_METHOD'] === 'GET') {
    $v = @file_get_contents($path);
    if ($v === false) {
        http_response_code(404);
        echo json_encode(['error' => 'no such key']);
        return;
    }
    echo json_encode(['k' => $k, 'v' => $v]);
} else {
    http_response_code(405);
    echo json_encode(['error' => 'method']);
}
"""

FRONT_PHP = r"""<?php
// The front: the key-value API of sut/kv_http.py, kept in the store behind it.
function store_call($method, $k, $body) {
    $url = 'http://127.0.0.1:' . getenv('PHPB_STORE_PORT') . "/item/$k";
    $opts = ['http' => ['method' => $method, 'timeout' => 1.0, 'ignore_errors' => true,
                        'protocol_version' => 1.0, 'header' => "Connection: close\r\n"]];
    if ($body !== null) {
        $opts['http']['content'] = $body;
        $opts['http']['header'] .= "Content-Type: text/plain\r\n";
    }
    $out = @file_get_contents($url, false, stream_context_create($opts));
    if ($out === false) {
        throw new RuntimeException("store $method $k: no answer");
    }
    $status = isset($http_response_header[0]) ? $http_response_header[0] : '';
    if (!preg_match('#^HTTP/1\.[01] 200#', $status)) {
        throw new RuntimeException("store $method $k: $status");
    }
    $ans = json_decode($out, true);
    if (!is_array($ans) || !isset($ans['k']) || (string)$ans['k'] !== (string)$k) {
        throw new RuntimeException("store $method $k: answer for another key");
    }
    return $ans;
}

header('Content-Type: application/json');
if (!preg_match('#^/item/([0-9]+)$#', parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH), $m)) {
    http_response_code(404);
    echo json_encode(['error' => 'no such item']);
    return;
}
$k = $m[1];
try {
    if ($_SERVER['REQUEST_METHOD'] === 'PUT') {
        $v = file_get_contents('php://input');
        $ans = store_call('PUT', $k, $v);
        if (!isset($ans['stored']) || $ans['stored'] !== strlen($v)) {
            throw new RuntimeException("store kept " . json_encode($ans['stored'] ?? null) . " bytes of " . strlen($v));
        }
        echo json_encode(['item' => (int)$k, 'stored' => strlen($v)]);
    } else {
        $ans = store_call('GET', $k, null);
        if (!isset($ans['v']) || !is_string($ans['v'])) {
            throw new RuntimeException("store has no value for $k");
        }
        $v = $ans['v'];
        echo json_encode(['item' => (int)$k, 'len' => strlen($v), 'digest' => substr(sha1($v), 0, 16)]);
    }
} catch (Throwable $e) {
    error_log("front: item $k: " . $e->getMessage());
    http_response_code(502);
    echo json_encode(['error' => $e->getMessage()]);
}
"""


def client(name):
    """Helper process `phpb-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("php-builtin")[0], name, REQUESTS2, 0.06)
    log(f"php-builtin client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("php-builtin")[:2]
    os.makedirs(os.path.join(tmp, "store"), exist_ok=True)
    for name, text in (("store.php", STORE_PHP), ("front.php", FRONT_PHP)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = dict(os.environ, PHPB_STORE_DIR=os.path.join(tmp, "store"), PHPB_STORE_PORT=str(sport))
    env.pop("PHP_CLI_SERVER_WORKERS", None)
    ini = ["-n", "-d", "display_errors=stderr", "-d", "log_errors=1", "-d", "default_socket_timeout=2"]
    with Daemons(tmp) as d:
        p = d.start("store", ["php", *ini, "-S", f"127.0.0.1:{sport}", "-t", tmp, os.path.join(tmp, "store.php")],
                    env=env, cwd=tmp)
        wait_port(sport, p, timeout=15)
        p = d.start("front", ["php", *ini, "-S", f"127.0.0.1:{fport}", "-t", tmp, os.path.join(tmp, "front.php")],
                    env=env, cwd=tmp)
        wait_port(fport, p, timeout=15)
        helper = d.start("client2", [PY, LAUNCHER, "phpb-client", "--name", "2"])
        ok, errors = workload(fport, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"php-builtin: {ok}/{n} steps ok, {errors} failed")
