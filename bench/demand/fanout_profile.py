#!/usr/bin/env python3
"""The `profile` service of the demand suite's grpc-fanout-mariadb system (bench/demand/fanout.py):
a gRPC server (grpcio, a thread pool of THREADS threads) over MariaDB (PyMySQL, autocommit; a
connection per server thread, opened at its first call).

    fanout_profile.py --port PORT --db PORT --gen DIR --stats DIR

- `Get(k)` (the gateway's type A, /user/K): 1 query, user K by handle (an index lookup; the
  `index` fault drops the index and the lookup scans the table);
- `Visit(k)` (half of type C, /home/K): 3 queries, user K by handle, their visits counted
  (UPDATE by primary key) and the visit logged (INSERT).

One line per call ("METHOD DB_S", the wall-clock time from the first query sent to the last
one's rows read) is appended to DIR/warm-profile-PID.tsv before the load (until DIR/load
exists), then to DIR/profile-PID.tsv until the fault (DIR/fault exists after it), then to
DIR/after-profile-PID.tsv: how much each fault slowed the database, seen from its client.
"""

import argparse
import os
import sys
import threading
import time
from concurrent import futures

import pymysql

THREADS = 4
USERS = 60000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", type=int, required=True)
    ap.add_argument("--gen", required=True, help="the directory of the compiled fanout_pb2*.py")
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gen)
    import grpc
    import fanout_pb2
    import fanout_pb2_grpc

    local = threading.local()
    out, out_lock = {}, threading.Lock()
    pid = os.getpid()

    def cursor():
        if not hasattr(local, "cur"):
            local.db = pymysql.connect(host="127.0.0.1", port=a.db, user="root", database="prof", autocommit=True)
            local.cur = local.db.cursor()
        return local.cur

    def record(line):
        if os.path.exists(os.path.join(a.stats, "fault")):
            which = "after-profile-"
        elif os.path.exists(os.path.join(a.stats, "load")):
            which = "profile-"
        else:
            which = "warm-profile-"
        with out_lock:
            if which not in out:
                out[which] = open(os.path.join(a.stats, "%s%d.tsv" % (which, pid)), "a", buffering=1)
            out[which].write(line + "\n")

    def by_handle(cur, k):
        cur.execute("SELECT id, handle, name, visits FROM users WHERE handle = %s", ("u%06d" % (k % USERS + 1),))
        return cur.fetchone()

    class Profile(fanout_pb2_grpc.ProfileServicer):
        def Get(self, request, context):
            cur = cursor()
            t = time.monotonic()
            row = by_handle(cur, request.k)
            record("get %.6f" % (time.monotonic() - t))
            return fanout_pb2.User(id=row[0], handle=row[1], name=row[2], visits=row[3])

        def Visit(self, request, context):
            cur = cursor()
            t = time.monotonic()
            row = by_handle(cur, request.k)
            cur.execute("UPDATE users SET visits = visits + 1 WHERE id = %s", (row[0],))
            cur.execute("INSERT INTO visits(user, at) VALUES (%s, NOW(6))", (row[0],))
            record("visit %.6f" % (time.monotonic() - t))
            return fanout_pb2.User(id=row[0], handle=row[1], name=row[2], visits=row[3] + 1)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=THREADS))
    fanout_pb2_grpc.add_ProfileServicer_to_server(Profile(), server)
    server.add_insecure_port("127.0.0.1:%d" % a.port)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
