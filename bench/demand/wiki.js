// The application tier of the demand suite's wiki-apache-node system (bench/demand/wiki.py):
// a Node.js HTTP application run as a cluster (a primary and WIKI_WORKERS workers; the workers
// accept on the one listening socket themselves, NODE_CLUSTER_SCHED_POLICY=none) behind
// Apache httpd's mod_proxy_http, over Redis (a cache of pages; RESP spoken here) and MariaDB
// (the npm `mysql2` driver, installed by bench/demand/setup.sh into bench/demand/node_modules).
//
// Unlike the suite's other application tiers, a worker serves many requests at once: one
// thread, an event loop, a request's downstream calls awaited while others run.
//
// Three request types (`/TYPE/K`), each burning a known CPU time of this process
// (process.cpuUsage) before its downstream work:
//
// - `page/K` burns 1.5 ms, then reads page K from Redis (GET); on a miss it reads it from
//   MariaDB by its slug (an index lookup) and stores it in Redis for 30 s (SET ... EX 30);
// - `tag/K` burns 4 ms, then reads tag K's newest 20 pages from MariaDB (an index on the
//   tag; the `index` fault drops it);
// - `edit/K` burns 0.7 ms, then updates the page's edit count (autocommit) and deletes the
//   page from Redis (DEL).
//
// Each request's own CPU time is measured from its `request` event to its reply, less the
// time it waited for Redis or MariaDB (other requests' callbacks run then): the CPU spent in
// its synchronous segments. Sums and counts per type are kept in memory — before the fault
// (SIGUSR2, sent by wiki.py at the fault's instant) and after it apart — and written at
// SIGTERM to STATS/node-PID.json and STATS/after-node-PID.json ({"TYPE": [seconds, count]}):
// the first is the truth of the fault-free demands. Each worker keeps one connection to
// Redis and one to MariaDB, opened before it listens; a lost connection does not end it.
'use strict';

const cluster = require('cluster');
const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');

const PORT = Number(process.env.WIKI_PORT);
const REDIS_PORT = Number(process.env.WIKI_REDIS_PORT);
const DB_PORT = Number(process.env.WIKI_DB_PORT);
const STATS = process.env.WIKI_STATS;
const WORKERS = Number(process.env.WIKI_WORKERS || 3);
const BURN_S = { page: 0.0015, tag: 0.004, edit: 0.0007 };

function cpuUs() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function burn(s) {
  const end = cpuUs() + s * 1e6;
  let x = 0;
  while (cpuUs() < end) {
    x++;
  }
  return x;
}

// A Redis connection: commands pipelined, replies matched in order (RESP 2).
class Redis {
  constructor(port, ready) {
    this.pending = [];
    this.buf = Buffer.alloc(0);
    this.sock = net.connect(port, '127.0.0.1', ready);
    this.sock.setNoDelay(true);
    this.sock.on('data', (d) => this.onData(d));
    const fail = (e) => {
      for (const p of this.pending.splice(0)) p.reject(e || new Error('redis connection closed'));
    };
    this.sock.on('error', fail);
    this.sock.on('close', () => fail());
  }

  cmd(...args) {
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      let m = '*' + args.length + '\r\n';
      for (const a of args) {
        const s = String(a);
        m += '$' + Buffer.byteLength(s) + '\r\n' + s + '\r\n';
      }
      this.sock.write(m);
    });
  }

  onData(d) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    for (;;) {
      const r = parseReply(this.buf);
      if (r === null) return;
      this.buf = this.buf.subarray(r.end);
      const p = this.pending.shift();
      if (r.error) p.reject(new Error(r.error));
      else p.resolve(r.value);
    }
  }
}

// One RESP reply at the start of `buf` (simple, error, integer or bulk string): {value or
// error, end} or null if it is not complete yet.
function parseReply(buf) {
  const nl = buf.indexOf('\r\n');
  if (nl < 0) return null;
  const line = buf.toString('latin1', 1, nl);
  switch (buf[0]) {
    case 0x2b: // +
      return { value: line, end: nl + 2 };
    case 0x2d: // -
      return { error: line, end: nl + 2 };
    case 0x3a: // :
      return { value: Number(line), end: nl + 2 };
    case 0x24: { // $
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      if (buf.length < nl + 2 + n + 2) return null;
      return { value: buf.toString('utf8', nl + 2, nl + 2 + n), end: nl + 2 + n + 2 };
    }
    default:
      throw new Error('unexpected Redis reply: ' + line);
  }
}

// A request's own CPU: its synchronous segments, the waits for downstream replies left out.
class Cpu {
  constructor() {
    this.used = 0;
    this.mark = cpuUs();
  }

  async wait(p) {
    this.used += cpuUs() - this.mark;
    try {
      return await p;
    } finally {
      this.mark = cpuUs();
    }
  }

  done() {
    return (this.used + cpuUs() - this.mark) / 1e6;
  }
}

function worker() {
  const mysql = require('mysql2');
  const sums = [{}, {}]; // before the fault, after it
  let faulted = 0;
  process.on('SIGUSR2', () => {
    faulted = 1;
  });
  process.on('SIGTERM', () => {
    fs.writeFileSync(path.join(STATS, 'node-' + process.pid + '.json'), JSON.stringify(sums[0]));
    fs.writeFileSync(path.join(STATS, 'after-node-' + process.pid + '.json'), JSON.stringify(sums[1]));
    process.exit(0);
  });

  const db = mysql.createConnection({ host: '127.0.0.1', port: DB_PORT, user: 'root', database: 'wiki' });
  // A lost connection fails the requests waiting on it (their replies are 500s) but not the
  // worker: at the end of a run MariaDB is stopped at the same time as the cluster, and a
  // worker must live until SIGTERM to write its figures.
  db.on('error', (e) => process.stderr.write('wiki worker ' + process.pid + ': MariaDB: ' + e.code + '\n'));
  const query = (sql, args) =>
    new Promise((resolve, reject) => db.query(sql, args, (e, rows) => (e ? reject(e) : resolve(rows))));

  const handlers = {
    async page(k, cpu) {
      burn(BURN_S.page);
      const id = (k % 3000) + 1;
      let v = await cpu.wait(redis.cmd('GET', 'p:' + id));
      if (v === null) {
        const slug = 'p' + String(id).padStart(6, '0');
        v = JSON.stringify(await cpu.wait(query('SELECT id, title, body FROM pages WHERE slug = ?', [slug])));
        await cpu.wait(redis.cmd('SET', 'p:' + id, v, 'EX', '30'));
      }
      return v;
    },
    async tag(k, cpu) {
      burn(BURN_S.tag);
      const rows = await cpu.wait(query('SELECT id, title FROM pages WHERE tag = ? ORDER BY id DESC LIMIT 20', [k % 150]));
      return JSON.stringify(rows);
    },
    async edit(k, cpu) {
      burn(BURN_S.edit);
      const id = (k % 3000) + 1;
      const r = await cpu.wait(query('UPDATE pages SET edits = edits + 1 WHERE id = ?', [id]));
      await cpu.wait(redis.cmd('DEL', 'p:' + id));
      return JSON.stringify([r.affectedRows]);
    },
  };

  const server = http.createServer((req, res) => {
    const cpu = new Cpu();
    const [kind, arg] = req.url.slice(1).split('/');
    if (!Object.hasOwn(BURN_S, kind) || arg === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    handlers[kind](Number(arg), cpu).then(
      (body) => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
        const e = (sums[faulted][kind] ||= [0, 0]);
        e[0] += cpu.done();
        e[1] += 1;
      },
      (err) => {
        process.stderr.write('wiki worker ' + process.pid + ': ' + err.stack + '\n');
        res.writeHead(500);
        res.end();
      },
    );
  });

  let redis;
  db.connect((e) => {
    if (e) throw e;
    redis = new Redis(REDIS_PORT, () => server.listen(PORT, '127.0.0.1'));
  });
}

if (cluster.isPrimary) {
  let listening = 0;
  let stopping = false;
  cluster.on('listening', () => {
    if (++listening === WORKERS) fs.writeFileSync(path.join(STATS, 'node-ready'), '');
  });
  cluster.on('exit', (w, code, signal) => {
    if (!stopping) process.stderr.write('wiki worker ' + w.process.pid + ' exited: ' + (signal || code) + '\n');
    if (Object.keys(cluster.workers).length === 0 && stopping) process.exit(0);
  });
  process.on('SIGTERM', () => {
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
    setTimeout(() => process.exit(0), 5000).unref();
  });
  for (let i = 0; i < WORKERS; i++) cluster.fork();
} else {
  worker();
}
