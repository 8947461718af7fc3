"""W forked writers racing on one shared end of a socketpair, one reader on the other end.

Usage: racing_writers.py W M — each writer sends M 8-byte records (its index, its count);
the reader reads them one record at a time and prints, besides `racing ok`, the writers'
pids (`KIDS`) and which writer wrote each record it read, in order (`SEQ`): the ground
truth that `order_accuracy.py` compares Culprit's attribution with. The same workload as
tests/tests/messages_cluster.rs `forked_writers_racing_on_one_socketpair_end`.
"""
import os, socket, sys

W = int(sys.argv[1]); M = int(sys.argv[2]); REC = 8
a, b = socket.socketpair()
kids = []
for w in range(W):
    pid = os.fork()
    if pid == 0:
        a.close()
        for k in range(M):
            b.sendall(w.to_bytes(4, 'big') + k.to_bytes(4, 'big'))
        os._exit(0)
    kids.append(pid)
b.close()
seq = []
nxt = [0] * W
for _ in range(W * M):
    buf = b''
    while len(buf) < REC:
        c = a.recv(REC - len(buf))
        if not c:
            raise EOFError
        buf += c
    w, k = int.from_bytes(buf[:4], 'big'), int.from_bytes(buf[4:], 'big')
    assert k == nxt[w], (w, k, nxt[w])
    nxt[w] += 1
    seq.append(str(w))
for p in kids:
    os.waitpid(p, 0)
print('KIDS', ' '.join(map(str, kids)))
print('SEQ', ''.join(seq))
print('racing ok', W * M * REC)
