"""Load generator of the three-tier system: GET /a and /b through nginx, one at a time,
at an intensity and a mix that change every 3 seconds (the same schedule in every run of
a seed). With FAULT_AT=S, drops the index of the table at S seconds (003's fault: the
database tier needs more work per query from then on) and prints "fault T_UNIX_NS".

usage: load.py NGINX_PORT SECONDS SEED
"""
import os
import random
import socket
import subprocess
import sys
import time

port, secs, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
fault_at = float(os.environ.get("FAULT_AT", "-1"))
rng = random.Random(seed)


def get(path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path).encode())
    while s.recv(65536):
        pass
    s.close()


t0 = time.time()
phase = -1
faulted = False
while True:
    now = time.time() - t0
    if now >= secs:
        break
    if fault_at >= 0 and not faulted and now >= fault_at:
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", os.environ["PGPORT"], "-U", "postgres",
             "-c", "DROP INDEX kv_k"],
            check=True, stdout=subprocess.DEVNULL,
        )
        print("fault", time.time_ns(), flush=True)
        faulted = True
    p = int(now // 3)
    if p != phase:
        phase = p
        rate = rng.choice([15, 30, 50])
        share_b = rng.choice([0.2, 0.5, 0.8])
    path = "/b" if rng.random() < share_b else "/a"
    get("%s?k=%d" % (path, rng.randrange(1, 100000)))
    time.sleep(max(0.0, 1.0 / rate - 0.002))
