"""grpc-chain: a gRPC front service that calls a gRPC backend service for every request
(PyPI `grpcio`: HTTP/2 in gRPC's C core, its own poller threads, handlers in a thread pool;
CPython), a unary client and a server-streaming client.

Ports: front = p[0], backend = p[1]. Services are generic handlers with JSON messages (no
generated code): the backend has `bench.Store/Get` (unary) and `bench.Store/Scan` (server
streaming, five items); the front has `bench.Api/Item`, which calls `Get` with a 1 s deadline,
and `bench.Api/List`, which relays `Scan`; a backend failure becomes status UNAVAILABLE. The
unary client (the launcher) calls `Item` N times with a 2 s deadline and checks each answer;
the streaming client (`grpc-lister`) calls `List` until the workload's time is up. Both count
a failed call and go on on the same channel, which reconnects by itself.
"""

import json
import signal
import threading
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, wait_port

LISTS = 60


def _ser(x):
    return json.dumps(x).encode()


def _de(b):
    return json.loads(b.decode())


def _serve(port, handlers):
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(handlers)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop(0.5).wait()


def service(name):
    """Helper process `grpc-service --name front|back`."""
    import grpc

    front, back = ports("grpc-chain")[:2]

    def get(req, ctx):
        k = int(req["k"])
        return {"k": k, "value": "g" * (k % 50)}

    def scan(req, ctx):
        k = int(req["k"])
        for j in range(k, k + 5):
            yield {"k": j, "value": "s" * (j % 20)}

    if name == "back":
        handlers = (grpc.method_handlers_generic_handler("bench.Store", {
            "Get": grpc.unary_unary_rpc_method_handler(get, request_deserializer=_de, response_serializer=_ser),
            "Scan": grpc.unary_stream_rpc_method_handler(scan, request_deserializer=_de, response_serializer=_ser),
        }),)
        return _serve(back, handlers)

    channel = grpc.insecure_channel(f"127.0.0.1:{back}")
    store_get = channel.unary_unary("/bench.Store/Get", request_serializer=_ser, response_deserializer=_de)
    store_scan = channel.unary_stream("/bench.Store/Scan", request_serializer=_ser, response_deserializer=_de)

    def item(req, ctx):
        try:
            r = store_get({"k": req["k"]}, timeout=1.0)
        except grpc.RpcError as e:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"backend failed: {e.code()}")
        return {"item": r["k"], "len": len(r["value"])}

    def listing(req, ctx):
        try:
            for r in store_scan({"k": req["k"]}, timeout=1.0):
                yield {"item": r["k"], "len": len(r["value"])}
        except grpc.RpcError as e:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"backend failed: {e.code()}")

    handlers = (grpc.method_handlers_generic_handler("bench.Api", {
        "Item": grpc.unary_unary_rpc_method_handler(item, request_deserializer=_de, response_serializer=_ser),
        "List": grpc.unary_stream_rpc_method_handler(listing, request_deserializer=_de, response_serializer=_ser),
    }),)
    _serve(front, handlers)
    channel.close()


def lister(name):
    """Helper process `grpc-lister --name N`: LISTS streaming calls on the front, one every
    0.1 s (cut short when the workload's time is up)."""
    import grpc

    front = ports("grpc-chain")[0]
    ok = failed = 0
    with grpc.insecure_channel(f"127.0.0.1:{front}") as ch:
        call = ch.unary_stream("/bench.Api/List", request_serializer=_ser, response_deserializer=_de)
        for k in steps(LISTS):
            try:
                got = [r["item"] for r in call({"k": k}, timeout=2.0)]
                if got != list(range(k, k + 5)):
                    raise ValueError(f"list {k}: got {got}")
                ok += 1
            except (grpc.RpcError, ValueError, OSError) as e:
                failed += 1
                log(f"lister {name}: call failed: {e!r}")
            time.sleep(0.1)
    log(f"grpc lister {name}: {ok} lists ok, {failed} failed")


def run(tmp, n):
    import grpc

    front, back = ports("grpc-chain")[:2]
    with Daemons(tmp) as d:
        p = d.start("back", [PY, LAUNCHER, "grpc-service", "--name", "back"])
        wait_port(back, p, timeout=20)
        p = d.start("front", [PY, LAUNCHER, "grpc-service", "--name", "front"])
        wait_port(front, p, timeout=20)
        lst = d.start("lister", [PY, LAUNCHER, "grpc-lister", "--name", "1"])
        ok = failed = 0
        with grpc.insecure_channel(f"127.0.0.1:{front}") as ch:
            call = ch.unary_unary("/bench.Api/Item", request_serializer=_ser, response_deserializer=_de)
            for i in steps(n):
                try:
                    r = call({"k": i}, timeout=2.0)
                    if r.get("len") != i % 50:
                        raise ValueError(f"item {i}: got {r}")
                    ok += 1
                except (grpc.RpcError, ValueError, OSError) as e:
                    failed += 1
                    log(f"request failed: {e!r}")
                time.sleep(0.05)
        try:
            lst.wait(timeout=WORKLOAD_S + 5)
        except Exception:
            log("the lister did not stop")
        log(f"grpc-chain: {ok}/{n} requests ok, {failed} failed")
