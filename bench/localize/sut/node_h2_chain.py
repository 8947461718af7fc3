"""node-h2-chain: a Node.js HTTP/2 front service that forwards every request over one
HTTP/2 session to a Node.js HTTP/2 key-value backend, and two Python HTTP/2 clients
(Debian `nodejs`: V8 and libuv on epoll; both services use only Node's core `http2` module,
cleartext h2c; the clients PyPI `httpx` with `h2`, HTTP/2 by prior knowledge).

Ports: front = p[0], backend = p[1]. `PUT /kv/KEY` stores the body and answers the value's
length and the first 16 hex digits of its SHA-1; `GET /kv/KEY` answers the value (404 when
missing). The backend holds the values in a Map. The front keeps nothing: it opens one
HTTP/2 session to the backend (`http2.connect`) and makes each client request a stream on
it (1.5 s without an answer cancels the stream); a failure (a stream or session error, a
timeout, a status other than 200 or 404) becomes a 502 to the client, and a session that
closed or failed is made again by the next request. Client 1 (the launcher) and client 2
(helper `h2-client --name 2`) each take steps through the front on one HTTP/2 connection
(3 s timeout): a step puts a value made for it (80 to 6 000 bytes) under a key of its own
and reads it back, checking the answer to the put and the value's length and SHA-1; after a
failure the client logs it, closes its connection, connects again and goes on. Each Node
service says at the end (on SIGTERM) how many requests it answered and how many failed.
"""

import hashlib
import os
import time

from .common import LAUNCHER, PY, Daemons, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60

JS = r"""'use strict';
// A service of the fault suite's node-h2-chain: node service.js front|back PORT [BACKEND_PORT]
const http2 = require('http2');
const crypto = require('crypto');
const role = process.argv[2];
const port = Number(process.argv[3]);
const backPort = Number(process.argv[4] || 0);
let puts = 0, gets = 0, failed = 0;

function digest(buf) {
  return crypto.createHash('sha1').update(buf).digest('hex').slice(0, 16);
}

function reply(stream, status, body) {
  if (stream.destroyed || stream.closed) return;
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  try {
    stream.respond({':status': status, 'content-length': b.length});
    stream.end(b);
  } catch (e) {
    failed++;
    console.error(`systems: ${role}: reply failed: ${e.message}`);
  }
}

function readBody(stream, done) {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('end', () => done(Buffer.concat(chunks)));
}

const server = http2.createServer();
server.on('sessionError', (e) => { failed++; console.error(`systems: ${role}: session error: ${e.message}`); });
server.on('session', (s) => s.on('error', () => {}));

if (role === 'back') {
  const data = new Map();
  server.on('stream', (stream, headers) => {
    stream.on('error', (e) => { failed++; console.error(`systems: back: stream error: ${e.message}`); });
    const m = /^\/kv\/([\w-]+)$/.exec(headers[':path']);
    if (!m) { failed++; reply(stream, 400, 'bad path'); return; }
    if (headers[':method'] === 'PUT') {
      readBody(stream, (body) => {
        data.set(m[1], body);
        puts++;
        reply(stream, 200, `${body.length} ${digest(body)}`);
      });
    } else {
      gets++;
      const v = data.get(m[1]);
      if (v === undefined) reply(stream, 404, 'missing'); else reply(stream, 200, v);
    }
  });
} else {
  let session = null;
  function backend() {
    if (session === null || session.closed || session.destroyed) {
      const s = http2.connect(`http://127.0.0.1:${backPort}`);
      s.on('error', (e) => { console.error(`systems: front: backend session error: ${e.message}`); });
      s.on('close', () => { if (session === s) session = null; });
      s.on('goaway', () => { if (session === s) session = null; });
      session = s;
    }
    return session;
  }
  server.on('stream', (stream, headers) => {
    stream.on('error', (e) => { failed++; console.error(`systems: front: stream error: ${e.message}`); });
    const method = headers[':method'];
    const path = headers[':path'];
    readBody(stream, (body) => {
      let done = false;
      const fail = (why) => {
        if (done) return;
        done = true;
        failed++;
        console.error(`systems: front: ${method} ${path}: backend failed: ${why}`);
        reply(stream, 502, String(why));
      };
      let s, req;
      try {
        s = backend();
        req = s.request({':method': method, ':path': path, 'content-length': body.length},
                        {endStream: method !== 'PUT'});
      } catch (e) { session = null; fail(e.message); return; }
      req.setTimeout(1500, () => {
        fail('backend timeout (1.5 s)');
        req.close(http2.constants.NGHTTP2_CANCEL);
        if (session === s) { session = null; s.destroy(); }
      });
      req.on('error', (e) => { fail(e.message); if (session === s && (s.destroyed || s.closed)) session = null; });
      let status = 0;
      req.on('response', (h) => { status = h[':status']; });
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        if (done) return;
        if (status !== 200 && status !== 404) { fail(`status ${status}`); return; }
        done = true;
        if (method === 'PUT') puts++; else gets++;
        reply(stream, status, Buffer.concat(chunks));
      });
      if (method === 'PUT') req.end(body);
    });
  });
}
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  console.error(`systems: node-h2 ${role}: ${puts} puts and ${gets} gets answered, ${failed} failed (told to stop)`);
  process.exit(0);
});
"""


def digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def value(name, i):
    """The value client `name` puts at step i."""
    size = 80 + (i * 389 + int(name) * 131) % 5900
    head = f"client {name} step {i}:".encode()
    return (head + bytes(range(97, 123)) * (size // 26 + 1))[:size]


class Client:
    """One HTTP/2 connection to the front (httpx, prior knowledge); made again after any
    failure."""

    def __init__(self, name):
        self.name = name
        self.http = None
        self.errors = 0

    def step(self, i):
        import httpx

        key = f"c{self.name}-{i % 30}"
        v = value(self.name, i)
        url = f"http://127.0.0.1:{ports('node-h2-chain')[0]}/kv/{key}"
        try:
            if self.http is None:
                self.http = httpx.Client(http1=False, http2=True, timeout=3.0)
            r = self.http.put(url, content=v)
            want = f"{len(v)} {digest(v)}"
            if r.status_code != 200 or r.text != want:
                raise ValueError(f"put {key} step {i}: status {r.status_code} {r.text!r:.60}, wanted {want!r}")
            r = self.http.get(url)
            back = r.content
            if r.status_code != 200 or len(back) != len(v) or digest(back) != digest(v):
                raise ValueError(f"get {key} step {i}: status {r.status_code}, {len(back)} bytes "
                                 f"(SHA-1 {digest(back)}), wanted {len(v)} ({digest(v)})")
            return True
        except Exception as e:  # noqa: BLE001 - h2's protocol errors are not all httpx's
            self.errors += 1
            log(f"request failed: {e!r:.200}")
            self.close()
            return False

    def close(self):
        if self.http is not None:
            try:
                self.http.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass
            self.http = None


def workload(name, n, pause):
    c = Client(name)
    ok = 0
    for i in steps(n):
        ok += c.step(i)
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `h2-client --name N`: REQUESTS2 steps through the front, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"node-h2-chain client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, back = ports("node-h2-chain")[:2]
    js = os.path.join(tmp, "service.js")
    with open(js, "w") as f:
        f.write(JS)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Daemons(tmp) as d:
        p = d.start("back", ["node", js, "back", str(back)])
        wait_port(back, p, timeout=20)
        p = d.start("front", ["node", js, "front", str(front), str(back)])
        wait_port(front, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "h2-client", "--name", "2"], env=env)
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"node-h2-chain: {ok}/{n} steps ok, {errors} failed")
