"""One daemon of a small MPD-like ring (the job-manager daemons of MPICH2 in Maruyama &
Matsuoka, IPDPS'08 §4), for Culprit's end-to-end test and demo.

    python3 ring_node.py --id I --nodes N --base-port P [--jobs K] [--window W] [--loop select|poll]

Node I listens on 127.0.0.1:P+I, connects to its right-hand side (rhs) node I+1 mod N
and accepts its left-hand side (lhs) node I-1. After initialization it runs an event
loop (``select`` or ``poll``) and handles what arrives:

* ``handle_new_connection`` accepts a connection; its first message (``hello``) makes
  it the lhs;
* ``handle_lhs_input`` receives a message from the lhs (``recv_dict_msg``) and
  dispatches it: a ``job`` is worked on (``do_job``) and forwarded to the rhs
  (``send_dict_msg``); ``shutdown`` is forwarded and ends the loop;
* ``handle_rhs_input``: the rhs only ever sends something when it goes away.

Node 0 is also the console: it injects K jobs (at most W in flight), counts those that
come back after a full round, then sends ``shutdown`` round the ring and exits 0.

Messages are JSON dicts framed by an 8-byte decimal length header — and, as in MPD,
``recv_dict_msg`` reads that header with ONE ``recv(8)`` and treats a short result as a
lost connection. TCP may legally return fewer bytes (it does when a segment is split,
or when a fault injector makes it), so the node then closes its ring connection, the job
in flight is lost and the ring hangs: every daemon keeps waiting in its event loop. The
daemon has no switch to trigger this itself: the fault must come from outside.
"""
import argparse
import json
import os
import select
import socket
import sys
import time

HEADER = 8


def log(node, msg):
    sys.stderr.write("ring node %d: %s\n" % (node.id, msg))
    sys.stderr.flush()


def send_dict_msg(sock, msg):
    body = json.dumps(msg, separators=(",", ":")).encode()
    sock.sendall(b"%08d" % len(body) + body)


def recv_exact(sock, n):
    chunks = []
    while n > 0:
        b = sock.recv(n)
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def recv_dict_msg(sock):
    """Receives one message, or None if the connection is lost."""
    hdr = sock.recv(HEADER)  # MPD's bug: one recv for the whole header
    if len(hdr) != HEADER:
        return None
    body = recv_exact(sock, int(hdr))
    if body is None:
        return None
    return json.loads(body)


class Node:
    def __init__(self, args):
        self.id = args.id
        self.n = args.nodes
        self.base = args.base_port
        self.jobs_total = args.jobs if args.id == 0 else 0
        self.window = args.window
        self.loop_kind = args.loop
        self.deadline = time.monotonic() + args.max_seconds
        self.listener = None
        self.lhs = None
        self.rhs = None
        self.pending = []  # accepted, not yet introduced
        self.next_job = 0
        self.in_flight = 0
        self.completed = 0
        self.done = False
        self.shutting_down = False

    # ---- initialization -------------------------------------------------------------

    def init(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.base + self.id))
        self.listener.listen(8)
        self.connect_rhs()

    def connect_rhs(self):
        port = self.base + (self.id + 1) % self.n
        for _ in range(400):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                s.close()
                time.sleep(0.025)
                continue
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.rhs = s
            send_dict_msg(s, {"cmd": "hello", "from": self.id})
            return
        raise SystemExit("ring node %d: cannot connect to rhs port %d" % (self.id, port))

    # ---- handlers --------------------------------------------------------------------

    def handle_new_connection(self):
        conn, _ = self.listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending.append(conn)

    def handle_pending_input(self, conn):
        msg = recv_dict_msg(conn)
        self.pending.remove(conn)
        if msg is None or msg.get("cmd") != "hello":
            log(self, "bad introduction on a new connection: closing it")
            conn.close()
            return
        if self.lhs is not None:
            self.lhs.close()
        self.lhs = conn
        if self.id == 0:
            self.start_jobs()

    def handle_lhs_input(self):
        msg = recv_dict_msg(self.lhs)
        if msg is None:
            log(self, "lost the lhs connection (short or empty header): closing it")
            self.lhs.close()
            self.lhs = None
            return
        cmd = msg.get("cmd")
        if cmd == "job":
            self.handle_job(msg)
        elif cmd == "shutdown":
            self.handle_shutdown(msg)
        else:
            log(self, "unknown message %r" % (cmd,))

    def handle_rhs_input(self):
        try:
            data = self.rhs.recv(HEADER)
        except OSError as e:
            data = b""
            log(self, "rhs connection error: %s" % e)
        if not data:
            if not self.shutting_down:
                log(self, "the rhs closed the ring connection")
            self.rhs.close()
            self.rhs = None

    def handle_job(self, msg):
        if msg["origin"] == self.id:
            self.job_completed(msg)
            return
        msg = do_job(self.id, msg)
        self.forward(msg)

    def handle_shutdown(self, msg):
        if self.id != 0:
            self.forward(msg)
        self.done = True

    # ---- jobs ------------------------------------------------------------------------

    def start_jobs(self):
        while self.in_flight < self.window and self.next_job < self.jobs_total:
            job = {"cmd": "job", "id": self.next_job, "origin": 0, "hops": 0, "path": [],
                   "payload": "x" * (16 + 37 * (self.next_job % 7))}
            self.next_job += 1
            self.in_flight += 1
            self.forward(do_job(self.id, job))
        if self.in_flight == 0 and self.next_job >= self.jobs_total and not self.shutting_down:
            self.shutting_down = True
            log(self, "all %d jobs completed" % self.completed)
            self.forward({"cmd": "shutdown"})

    def job_completed(self, msg):
        if msg["hops"] != self.n or len(msg["path"]) != self.n:
            log(self, "job %d came back after %d hops" % (msg["id"], msg["hops"]))
            return
        self.in_flight -= 1
        self.completed += 1
        self.start_jobs()

    def forward(self, msg):
        if self.rhs is None:
            log(self, "no rhs to forward %s to" % msg.get("cmd"))
            return
        try:
            send_dict_msg(self.rhs, msg)
        except OSError as e:
            log(self, "send to rhs failed: %s" % e)
            self.rhs.close()
            self.rhs = None

    # ---- event loop --------------------------------------------------------------------

    def readable(self):
        socks = [self.listener] + self.pending
        if self.lhs is not None:
            socks.append(self.lhs)
        if self.rhs is not None:
            socks.append(self.rhs)
        return socks

    def dispatch(self, sock):
        if sock is self.listener:
            self.handle_new_connection()
        elif sock is self.lhs:
            self.handle_lhs_input()
        elif sock is self.rhs:
            self.handle_rhs_input()
        elif sock in self.pending:
            self.handle_pending_input(sock)

    def run_select(self):
        while not self.done and time.monotonic() < self.deadline:
            ready, _, _ = select.select(self.readable(), [], [], 1.0)
            for s in ready:
                self.dispatch(s)

    def run_poll(self):
        p = select.poll()
        registered = {}
        while not self.done and time.monotonic() < self.deadline:
            want = {s.fileno(): s for s in self.readable()}
            for fd in list(registered):
                if fd not in want:
                    p.unregister(fd)
                    del registered[fd]
            for fd, s in want.items():
                if registered.get(fd) is not s:
                    p.register(fd, select.POLLIN)
                    registered[fd] = s
            for fd, _ev in p.poll(1000):
                s = registered.get(fd)
                if s is not None and s.fileno() == fd:
                    self.dispatch(s)

    def finish(self):
        for s in [self.lhs, self.rhs, self.listener] + self.pending:
            if s is not None:
                s.close()


def do_job(node_id, msg):
    """The work a daemon does for a job: check and extend it."""
    msg["hops"] += 1
    msg["path"].append(node_id)
    msg["sum"] = sum(msg["payload"].encode()) % 65521
    return msg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--base-port", type=int, required=True)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--loop", choices=["select", "poll"], default="select")
    ap.add_argument("--max-seconds", type=float, default=120.0,
                    help="give up (exit 4) after this long, so no daemon outlives a test")
    args = ap.parse_args(argv)
    node = Node(args)
    node.init()
    if args.loop == "select":
        node.run_select()
    else:
        node.run_poll()
    node.finish()
    if not node.done:
        log(node, "gave up after %.0f s" % args.max_seconds)
        return 4
    if node.id == 0 and node.completed != node.jobs_total:
        return 5
    return 0


if __name__ == "__main__":
    sys.exit(main())
