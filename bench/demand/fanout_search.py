#!/usr/bin/env python3
"""The `search` service of the demand suite's grpc-fanout-mariadb system (bench/demand/fanout.py):
a gRPC server (grpcio, a thread pool of THREADS threads) over an in-memory inverted index
(DOCS documents of TERMS terms, built at start from a fixed seed).

    fanout_search.py --port PORT --gen DIR --stats DIR

Two methods, each burning a known CPU time of the serving thread (`time.thread_time()`) by
scoring the index's postings, a small slice at a time, until its budget is spent (then
the best hits are picked from 256 score buckets: a few tens of µs more):

- `Lookup(k)` (the gateway's type B, /find/K): 0.8 ms, the 10 best documents;
- `Rank(k)` (half of type C, /home/K): 3 ms, the 60 best documents with their scores.

What each call costs, measured by the service itself: the serving thread's CPU time
(`time.thread_time()`) from the handler's first line to its reply built (the burn and the
selection of the hits; gRPC's decoding and encoding run in the same thread around it but are
not counted). One line per call ("METHOD CPU_S WALL_S", the wall clock over the same span) is
appended to DIR/warm-search-PID.tsv before the load (until the file DIR/load exists), then to
DIR/search-PID.tsv until the fault (the file DIR/fault exists after it), then to
DIR/after-search-PID.tsv: the second is the truth of the fault-free demands.
"""

import argparse
import heapq
import os
import random
import sys
import threading
import time
from concurrent import futures

BURN_S = {"lookup": 0.0008, "rank": 0.003}
HITS = {"lookup": 10, "rank": 60}
DOCS = 20000
TERMS = 2000
THREADS = 4
BUCKETS = 256


def build_index():
    rnd = random.Random(11)
    index = [[] for _ in range(TERMS)]
    for d in range(DOCS):
        for t in rnd.sample(range(TERMS), 12):
            index[t].append(d)
    return index


class Stats:
    def __init__(self, stats):
        self.dir = stats
        self.pid = os.getpid()
        self.out = {}
        self.lock = threading.Lock()

    def record(self, line):
        # The same calls before and after the fault: only the file differs.
        if os.path.exists(os.path.join(self.dir, "fault")):
            which = "after-search-"
        elif os.path.exists(os.path.join(self.dir, "load")):
            which = "search-"
        else:
            which = "warm-search-"
        with self.lock:
            if which not in self.out:
                self.out[which] = open(os.path.join(self.dir, "%s%d.tsv" % (which, self.pid)), "a", buffering=1)
            self.out[which].write(line + "\n")


def search(index, kind, k):
    """Scores postings of the terms the query `k` draws (into BUCKETS score buckets, a
    document's bucket its id modulo BUCKETS) until the call's CPU budget is spent; the best
    HITS[kind] buckets' documents and their scores."""
    end = time.thread_time() + BURN_S[kind]
    scores = [0.0] * BUCKETS
    t = k * 7 % TERMS
    step = 1 + k % 13
    while time.thread_time() < end:
        postings = index[t]
        w = 1.0 / (1 + len(postings))
        for d in postings[:8]:
            scores[d % BUCKETS] += w
        t = (t + step) % TERMS
    best = heapq.nlargest(HITS[kind], range(BUCKETS), key=scores.__getitem__)
    return [b + BUCKETS * (k % (DOCS // BUCKETS)) for b in best], [scores[b] for b in best]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--gen", required=True, help="the directory of the compiled fanout_pb2*.py")
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gen)
    import grpc
    import fanout_pb2
    import fanout_pb2_grpc

    index = build_index()
    stats = Stats(a.stats)

    def serve(kind, request):
        c0, w0 = time.thread_time(), time.monotonic()
        ids, scores = search(index, kind, request.k)
        reply = fanout_pb2.Hits(ids=ids, scores=scores if kind == "rank" else [])
        stats.record("%s %.9f %.6f" % (kind, time.thread_time() - c0, time.monotonic() - w0))
        return reply

    class Search(fanout_pb2_grpc.SearchServicer):
        def Lookup(self, request, context):
            return serve("lookup", request)

        def Rank(self, request, context):
            return serve("rank", request)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=THREADS))
    fanout_pb2_grpc.add_SearchServicer_to_server(Search(), server)
    server.add_insecure_port("127.0.0.1:%d" % a.port)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
