"""node-chain: a Node.js HTTP front service that calls a Node.js backend service for every
request over a keep-alive connection pool, and two Python clients (Debian `nodejs`: V8 and
libuv on epoll; the services use only Node's own `http` module, the clients `http.client`).

Ports: front = p[0], backend = p[1]. `GET /item/K` on the front fetches `/data/K` from the
backend through an `http.Agent` (keep-alive, at most 4 sockets, 1 s without data aborts the
request) and answers JSON with the value's length and digest; a backend failure (an error,
a timeout, a status other than 200, a body that does not parse or names another key)
becomes a 502. The backend answers after a 1 ms timer. Each client (the launcher, and the
helper `node-client --name 2`) sends N requests on one keep-alive connection (2 s timeout),
checks status, length and digest, counts failures, connects again and goes on. Each Node
service says at the end (on SIGTERM) how many requests it served and how many failed.
"""

import hashlib
import http.client
import json
import os
import time

from .common import drop_http, LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

JS = r"""'use strict';
// A service of the fault suite's node-chain: node SERVICE.js front|back PORT [BACKEND_PORT]
const http = require('http');
const crypto = require('crypto');
const role = process.argv[2];
const port = Number(process.argv[3]);
const backPort = Number(process.argv[4] || 0);
let served = 0, failed = 0;

function digest(k) {
  return crypto.createHash('sha1').update('item:' + k).digest('hex').slice(0, 16);
}

function reply(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, {'content-type': 'application/json', 'content-length': Buffer.byteLength(body)});
  res.end(body);
}

let server;
if (role === 'back') {
  server = http.createServer((req, res) => {
    const m = /^\/data\/(\d+)$/.exec(req.url);
    if (!m) { failed++; reply(res, 404, {error: 'no such path'}); return; }
    const k = Number(m[1]);
    setTimeout(() => { served++; reply(res, 200, {k, value: 'd'.repeat(k % 50), digest: digest(k)}); }, 1);
  });
} else {
  const agent = new http.Agent({keepAlive: true, maxSockets: 4});
  server = http.createServer((req, res) => {
    const m = /^\/item\/(\d+)$/.exec(req.url);
    if (!m) { failed++; reply(res, 404, {error: 'no such path'}); return; }
    const k = Number(m[1]);
    let done = false;
    const fail = (why) => {
      if (done) return;
      done = true;
      failed++;
      console.error(`systems: front: item ${k}: backend failed: ${why}`);
      reply(res, 502, {error: String(why)});
    };
    const r = http.get({host: '127.0.0.1', port: backPort, path: `/data/${k}`, agent, timeout: 1000}, (br) => {
      const chunks = [];
      br.on('data', (c) => chunks.push(c));
      br.on('error', (e) => fail(e.message));
      br.on('aborted', () => fail('response aborted'));
      br.on('end', () => {
        if (done) return;
        let b;
        try { b = JSON.parse(Buffer.concat(chunks).toString()); } catch (e) { fail('bad JSON: ' + e.message); return; }
        if (br.statusCode !== 200 || b.k !== k) { fail(`status ${br.statusCode}, key ${b.k}`); return; }
        done = true;
        served++;
        reply(res, 200, {item: k, len: b.value.length, digest: b.digest});
      });
    });
    r.on('timeout', () => r.destroy(new Error('backend timeout (1 s)')));
    r.on('error', (e) => fail(e.message));
  });
}
server.keepAliveTimeout = 30000;
server.on('clientError', (e, sock) => { failed++; console.error(`systems: ${role}: client error: ${e.message}`); sock.destroy(); });
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  console.error(`systems: node ${role}: ${served} requests ok, ${failed} failed (told to stop)`);
  process.exit(0);
});
"""


def digest(k):
    return hashlib.sha1(f"item:{k}".encode()).hexdigest()[:16]


class Client:
    """One keep-alive HTTP connection to the front; connects again after any failure."""

    def __init__(self, port):
        self.port = port
        self.conn = None
        self.errors = 0

    def item(self, k):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
            self.conn.request("GET", f"/item/{k}")
            r = self.conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise ValueError(f"item {k}: status {r.status}")
            body = json.loads(data)
            if body.get("len") != k % 50 or body.get("digest") != digest(k):
                raise ValueError(f"item {k}: wrong answer {body!r:.60}")
            return True
        except (OSError, http.client.HTTPException, ValueError) as e:
            drop_http(self, e)
            return False


def _requests(name, n):
    c = Client(ports("node-chain")[0])
    ok = 0
    for i in steps(n):
        ok += c.item(i * 3 + int(name))
        time.sleep(0.02)
    return ok, c.errors


def client(name):
    """Helper process `node-client --name N`."""
    ok, errors = _requests(name, REQUESTS)
    log(f"node client {name}: {ok}/{REQUESTS} requests ok, {errors} failed")


REQUESTS = 120


def run(tmp, n):
    front, back = ports("node-chain")[:2]
    js = os.path.join(tmp, "service.js")
    with open(js, "w") as f:
        f.write(JS)
    with Daemons(tmp) as d:
        p = d.start("back", ["node", js, "back", str(back)])
        wait_port(back, p, timeout=20)
        p = d.start("front", ["node", js, "front", str(front), str(back)])
        wait_port(front, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "node-client", "--name", "2"])
        ok, errors = _requests("1", n)
        wait_readers([helper], seconds=25)
        log(f"node-chain: {ok}/{n} requests ok, {errors} failed")
