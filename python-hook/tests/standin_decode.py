"""Decodes the files written by the stand-in libtrace (standin.c) into per-thread event
lists, for quick checks while developing the shim. The Rust tests decode the same bytes
with bufpool's decoder.

    python3 standin_decode.py DIR      # prints pid tid kind name site
"""
import os
import struct
import sys
from collections import defaultdict

KINDS = {3: "call", 4: "return", 5: "exception", 6: "c_call", 7: "c_return"}


def read_dir(d):
    """{(pid, tid): [(kind, callee, caller_or_aux)]}, {(pid, index): (name, file, line, kind)}"""
    streams = defaultdict(list)
    codes = {}
    files = sorted(os.listdir(d), key=lambda n: tuple(int(x) for x in n.split(".")))
    for name in files:
        pid, tid, seq = (int(x) for x in name.split("."))
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        used = struct.unpack_from("<I", data, 0)[0]
        buf = data[64:64 + used]
        i = 0
        while i < len(buf):
            head = struct.unpack_from("<Q", buf, i)[0]
            kind = head & 0xff
            if kind in (3, 5, 6):
                caller = int.from_bytes(buf[i + 8:i + 14], "little")
                callee = int.from_bytes(buf[i + 14:i + 20], "little")
                streams[(pid, tid)].append((KINDS[kind], callee, caller))
                i += 20
            elif kind in (4, 7):
                callee = int.from_bytes(buf[i + 8:i + 14], "little")
                aux = struct.unpack_from("<H", buf, i + 14)[0]
                streams[(pid, tid)].append((KINDS[kind], callee, aux))
                i += 16
            elif kind == 0x33:
                blen = struct.unpack_from("<H", buf, i + 8)[0]
                b = buf[i + 10:i + 10 + blen]
                index, ck, line = struct.unpack_from("<IBI", b, 0)
                nl = struct.unpack_from("<H", b, 9)[0]
                nm = b[11:11 + nl].decode()
                fl = struct.unpack_from("<H", b, 11 + nl)[0]
                fn = b[13 + nl:13 + nl + fl].decode()
                codes[(pid, index)] = (nm, fn, line, ck)
                streams[(pid, tid)].append(("code", index, nm))
                i += 10 + blen
            else:
                raise ValueError("unknown kind %#x in %s at %d" % (kind, name, i))
    return streams, codes


def named(d):
    """{(pid, tid): [(kind, name)]} with every index resolved through the code records
    of that process (which may have been written by another of its threads)."""
    streams, codes = read_dir(d)
    out = {}
    for (pid, tid), evs in streams.items():
        res = []
        for k, a, b in evs:
            if k == "code":
                continue
            res.append((k, codes[(pid, a)][0] if a else "?"))
        out[(pid, tid)] = res
    return out


if __name__ == "__main__":
    for (pid, tid), evs in sorted(named(sys.argv[1]).items()):
        print("== pid %d tid %d: %d events" % (pid, tid, len(evs)))
        for k, n in evs:
            print("  %-9s %s" % (k, n))
