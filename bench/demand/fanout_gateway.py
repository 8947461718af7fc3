#!/usr/bin/env python3
"""The HTTP gateway of the demand suite's grpc-fanout-mariadb system (bench/demand/fanout.py):
one aiohttp process (one asyncio event loop) serving three request types, each calling one or
both of the gRPC services over `grpc.aio` stubs (one channel, one HTTP/2 connection, to each
service, opened at start) and joining their replies into a JSON answer:

- type A, `GET /user/K`: `Profile.Get(K)`;
- type B, `GET /find/K`: `Search.Lookup(K)`;
- type C, `GET /home/K`: `Profile.Visit(K)` and `Search.Rank(K)` in parallel (`asyncio.gather`).

    fanout_gateway.py --port PORT --profile PORT --search PORT --gen DIR

A failed call answers 502.
"""

import argparse
import asyncio
import sys

from aiohttp import web

TIMEOUT_S = 30.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--profile", type=int, required=True)
    ap.add_argument("--search", type=int, required=True)
    ap.add_argument("--gen", required=True, help="the directory of the compiled fanout_pb2*.py")
    a = ap.parse_args()
    sys.path.insert(0, a.gen)
    import grpc
    import fanout_pb2
    import fanout_pb2_grpc

    stubs = {}

    async def on_startup(app):
        stubs["pch"] = grpc.aio.insecure_channel("127.0.0.1:%d" % a.profile)
        stubs["sch"] = grpc.aio.insecure_channel("127.0.0.1:%d" % a.search)
        stubs["profile"] = fanout_pb2_grpc.ProfileStub(stubs["pch"])
        stubs["search"] = fanout_pb2_grpc.SearchStub(stubs["sch"])
        await asyncio.wait_for(stubs["pch"].channel_ready(), TIMEOUT_S)
        await asyncio.wait_for(stubs["sch"].channel_ready(), TIMEOUT_S)

    async def on_cleanup(app):
        await stubs["pch"].close()
        await stubs["sch"].close()

    def user(u):
        return {"id": u.id, "handle": u.handle, "name": u.name, "visits": u.visits}

    def hits(h):
        return {"ids": list(h.ids), "scores": [round(s, 4) for s in h.scores]}

    async def user_view(request):
        u = await stubs["profile"].Get(fanout_pb2.Key(k=int(request.match_info["k"])), timeout=TIMEOUT_S)
        return web.json_response({"user": user(u)})

    async def find_view(request):
        h = await stubs["search"].Lookup(fanout_pb2.Query(k=int(request.match_info["k"])), timeout=TIMEOUT_S)
        return web.json_response({"hits": hits(h)})

    async def home_view(request):
        k = int(request.match_info["k"])
        u, h = await asyncio.gather(stubs["profile"].Visit(fanout_pb2.Key(k=k), timeout=TIMEOUT_S),
                                    stubs["search"].Rank(fanout_pb2.Query(k=k), timeout=TIMEOUT_S))
        return web.json_response({"user": user(u), "hits": hits(h)})

    @web.middleware
    async def rpc_errors(request, handler):
        try:
            return await handler(request)
        except grpc.aio.AioRpcError as e:
            return web.Response(status=502, text="rpc failed: %s\n" % e.code())

    app = web.Application(middlewares=[rpc_errors])
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_get("/user/{k}", user_view)
    app.router.add_get("/find/{k}", find_view)
    app.router.add_get("/home/{k}", home_view)
    web.run_app(app, host="127.0.0.1", port=a.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
