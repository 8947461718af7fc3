#!/usr/bin/env python3
"""The HTTP front of the demand suite's job-rabbit-workers system (bench/demand/jobq.py): a
pre-forked server of the standard library (a parent binds the port and forks PROCS children,
each an `http.server.HTTPServer` accepting on the one socket and serving one request at a
time) that turns each request `GET /TYPE/K` into a job `TYPE K` published to RabbitMQ's queue
`jobs` and waits for its reply (RPC: the child's own exclusive reply queue, a correlation id
per job; pika, one BlockingConnection per child, no heartbeats), then answers with it.

    jobq_front.py --port PORT --broker PORT --procs N

The parent forks, then waits; SIGTERM to it ends its children and itself.
"""

import argparse
import http.server
import os
import signal
import socket
import sys
import time
import uuid

import pika

TYPES = ("resize", "report", "notify")
TIMEOUT_S = 30.0


class Rpc:
    """A child's connection to RabbitMQ: publishes a job, waits for its reply."""

    def __init__(self, broker):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker, heartbeat=0,
                                                                      blocked_connection_timeout=None))
        self.ch = self.conn.channel()
        self.ch.queue_declare("jobs")
        self.queue = self.ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self.ch.basic_consume(self.queue, self.on_reply, auto_ack=True)
        self.replies = {}

    def on_reply(self, ch, method, props, body):
        self.replies[props.correlation_id] = body

    def call(self, job):
        cid = uuid.uuid4().hex
        self.ch.basic_publish("", "jobs", job.encode(),
                              pika.BasicProperties(reply_to=self.queue, correlation_id=cid))
        end = time.monotonic() + TIMEOUT_S
        while cid not in self.replies:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply to %r in %.0f s" % (job, TIMEOUT_S))
            self.conn.process_data_events(time_limit=min(left, 1.0))
        return self.replies.pop(cid)


RPC = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) != 3 or parts[1] not in TYPES or not parts[2].isdigit():
            self.send_error(404)
            return
        body = RPC.call("%s %s" % (parts[1], parts[2]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.HTTPServer):
    """An HTTPServer on a socket bound and listening already (the parent's)."""

    def __init__(self, sock):
        super().__init__(sock.getsockname(), Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock


def child(sock, broker):
    global RPC
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    RPC = Rpc(broker)
    Server(sock).serve_forever()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--broker", type=int, required=True)
    ap.add_argument("--procs", type=int, default=6)
    a = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", a.port))
    sock.listen(128)
    kids = []
    for _ in range(a.procs):
        pid = os.fork()
        if pid == 0:
            try:
                child(sock, a.broker)
            finally:
                os._exit(1)
        kids.append(pid)

    def stop(*_):
        for pid in kids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    # A child that dies ends the front (the run then fails its requests: no silent shrink).
    os.wait()
    stop()


if __name__ == "__main__":
    main()
