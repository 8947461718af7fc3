#!/usr/bin/env python3
"""A worker of the demand suite's job-rabbit-workers system (bench/demand/jobq.py): a pika
consumer (one BlockingConnection to RabbitMQ, no heartbeats, prefetch 1) of the queue `jobs`,
over MariaDB (one PyMySQL connection, autocommit), single-threaded.

    jobq_worker.py --broker PORT --db PORT --stats DIR

A job's body is `TYPE K`; its reply (published to the job's `reply_to` with its
`correlation_id`, then the job acked) is JSON. Three job types, each burning a known CPU time
of the worker's thread (`time.thread_time()`) before its queries:

- `resize K` burns 1 ms, then reads asset K by its code (1 query: an index lookup; the
  `index` fault drops the index and the lookup scans the table);
- `report K` burns 4 ms, then reads group K's name and its first 20 assets (2 queries);
- `notify K` burns 0.6 ms, then counts a hit on asset K, logs an event and reads the count
  back (3 queries: UPDATE and SELECT by primary key, INSERT).

What each job costs the worker process, measured by the worker itself: the process's CPU
time (`time.process_time()`, CLOCK_PROCESS_CPUTIME_ID) from the end of the previous job (its
ack sent) to the end of this one. That span holds pika's receipt and decoding of this job, the
burn, the queries, the reply's publication and the ack; the worker does nothing else then. A
worker's first job (no previous end) is not counted. One line per job ("TYPE CPU_S DB_S
JOB_S": that CPU time; the wall-clock time of the job's queries, from the first one sent to the
last one's rows read; the job's wall-clock time, from its receipt to its ack) is
appended to DIR/warm-worker-PID.tsv before the load (the set-up's jobs: until the file
DIR/load exists), then to DIR/worker-PID.tsv until the fault (the file DIR/fault exists after
it), then to DIR/after-worker-PID.tsv: the second is the truth of the fault-free demands.
"""

import argparse
import json
import os
import time

import pika
import pymysql

BURN_S = {"resize": 0.001, "report": 0.004, "notify": 0.0006}
ASSETS = 60000
GROUPS = 150


def burn(cpu_s):
    """Burns `cpu_s` seconds of this thread's CPU time."""
    end = time.thread_time() + cpu_s
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


class Worker:
    def __init__(self, broker, db, stats):
        self.pid = os.getpid()
        self.stats = stats
        self.db = pymysql.connect(host="127.0.0.1", port=db, user="root", database="jobs", autocommit=True)
        self.cur = self.db.cursor()
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker, heartbeat=0,
                                                                      blocked_connection_timeout=None))
        self.ch = self.conn.channel()
        self.ch.queue_declare("jobs")
        self.ch.basic_qos(prefetch_count=1)
        self.ch.basic_consume("jobs", self.on_job)
        self.out = {}
        self.last_end = None

    def resize(self, k):
        self.cur.execute("SELECT id, title, size FROM assets WHERE code = %s", ("c%06d" % (k % ASSETS + 1),))
        return self.cur.fetchall()

    def report(self, k):
        g = k % GROUPS
        self.cur.execute("SELECT name FROM grps WHERE id = %s", (g,))
        name = self.cur.fetchall()
        self.cur.execute("SELECT id, title FROM assets WHERE grp = %s ORDER BY id LIMIT 20", (g,))
        return [name, self.cur.fetchall()]

    def notify(self, k):
        i = k % 2000 + 1
        self.cur.execute("UPDATE assets SET hits = hits + 1 WHERE id = %s", (i,))
        self.cur.execute("INSERT INTO events(asset, kind) VALUES (%s, 1)", (i,))
        self.cur.execute("SELECT hits FROM assets WHERE id = %s", (i,))
        return self.cur.fetchall()

    def on_job(self, ch, method, props, body):
        t0 = time.monotonic()
        kind, k = body.decode().split()
        if kind not in BURN_S:
            raise SystemExit("jobq_worker: unknown job %r" % body)
        burn(BURN_S[kind])
        t1 = time.monotonic()
        result = json.dumps(getattr(self, kind)(int(k))).encode()
        t2 = time.monotonic()
        ch.basic_publish("", props.reply_to, result, pika.BasicProperties(correlation_id=props.correlation_id))
        ch.basic_ack(method.delivery_tag)
        now = time.process_time()
        if self.last_end is not None:
            self.record(kind, "%.9f %.6f %.6f" % (now - self.last_end, t2 - t1, time.monotonic() - t0))
        self.last_end = now

    def record(self, kind, line):
        # The same calls before and after the fault: only the file differs.
        if os.path.exists(os.path.join(self.stats, "fault")):
            which = "after-worker-"
        elif os.path.exists(os.path.join(self.stats, "load")):
            which = "worker-"
        else:
            which = "warm-worker-"
        if which not in self.out:
            self.out[which] = open(os.path.join(self.stats, "%s%d.tsv" % (which, self.pid)), "a", buffering=1)
        self.out[which].write("%s %s\n" % (kind, line))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", type=int, required=True)
    ap.add_argument("--db", type=int, required=True)
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    Worker(a.broker, a.db, a.stats).ch.start_consuming()


if __name__ == "__main__":
    main()
