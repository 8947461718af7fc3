"""aioftp-transfer: an FTP server on asyncio (PyPI `aioftp`: its `Server`, one event loop, a
control connection per client and a passive data connection per transfer) holding files
that one client uploads and another downloads, both on aioftp's asyncio `Client`. CPython
asyncio throughout.

Ports: control = p[0]; the server's passive data connections listen on p[2]..p[9]. The
server (helper `ftp-server`) keeps its files in the directory `$FTP_ROOT`. The uploader
(the launcher) stores each file under a temporary name, renames it to its final name
(`RNFR`/`RNTO`), and every other step downloads it back and compares its SHA-1 with what it
sent; a reader (helper `ftp-reader --name 2`) lists the directory (`MLSD`) every 100 ms,
downloads each new final file and checks its length and digest against the content its
name determines. Both clients keep one logged-in control connection (2 s timeout on every
socket operation, 5 s on a whole step); after any failure they log it, close the
connection, log in again and go on. The uploader stores a stop mark at the end; the reader
leaves when it sees it (or at its own deadline) and says what it saw.
"""

import asyncio
import hashlib
import os
import pathlib
import sys
import time

from .common import LAUNCHER, PY, WORKLOAD_S, Daemons, log, ports, steps, wait_port, wait_readers

USER, PASSWORD = "feeder", "s3cret"
SOCKET_TIMEOUT_S = 2.0
STEP_TIMEOUT_S = 5.0
STOP_MARK = "stop.mark"


def content(name):
    """The bytes of file `name` (its length, 600 to 24 600 bytes, and its bytes follow from
    the name)."""
    seed = hashlib.sha256(name.encode()).digest()
    n = 600 + int.from_bytes(seed[:2], "big") % 24000
    return (seed * (n // len(seed) + 1))[:n]


def server(_name):
    """Helper process `ftp-server`."""
    import aioftp

    port = ports("aioftp-transfer")[0]
    root = pathlib.Path(os.environ["FTP_ROOT"])
    user = aioftp.User(USER, PASSWORD, home_path="/",
                       permissions=[aioftp.Permission("/", readable=True, writable=True)])

    server = aioftp.Server([user], socket_timeout=SOCKET_TIMEOUT_S, idle_timeout=30,
                           data_ports=range(ports("aioftp-transfer")[2], ports("aioftp-transfer")[9] + 1))
    os.chdir(root)

    async def main():
        import signal

        def bye(*_):
            log("ftp server: told to stop")
            sys.stderr.flush()
            os._exit(0)

        signal.signal(signal.SIGTERM, bye)
        await server.run("127.0.0.1", port)

    asyncio.run(main())


class FtpClient:
    """One logged-in aioftp control connection, made again after any failure."""

    def __init__(self, who):
        self.who = who
        self.client = None
        self.errors = 0

    async def session(self):
        import aioftp

        if self.client is None:
            c = aioftp.Client(socket_timeout=SOCKET_TIMEOUT_S, connection_timeout=SOCKET_TIMEOUT_S)
            try:
                await c.connect("127.0.0.1", ports("aioftp-transfer")[0])
                await c.login(USER, PASSWORD)
            except BaseException:
                c.close()
                raise
            self.client = c
        return self.client

    def drop(self, what, e):
        self.errors += 1
        log(f"ftp {self.who}: {what} failed: {e!r:.160}")
        if self.client is not None:
            self.client.close()
        self.client = None

    async def put(self, name, data):
        c = await self.session()
        part = f".{name}.part"
        async with c.upload_stream(part) as stream:
            await stream.write(data)
        await c.rename(part, name)

    async def get(self, name):
        c = await self.session()
        out = bytearray()
        async with c.download_stream(name) as stream:
            async for block in stream.iter_by_block():
                out += block
        return bytes(out)

    async def names(self):
        c = await self.session()
        return [p.name for p, info in await c.list("/") if info.get("type") == "file"]

    async def attempt(self, what, coro):
        """Runs one step (5 s at most): True if it went right."""
        try:
            await asyncio.wait_for(coro, STEP_TIMEOUT_S)
            return True
        except Exception as e:  # aioftp.StatusCodeError, OSError, timeouts, wrong bytes
            self.drop(what, e)
            return False


async def upload_step(c, i):
    name = f"u-{i}.bin"
    data = content(name)
    await c.put(name, data)
    if i % 2 == 0:
        back = await c.get(name)
        if hashlib.sha1(back).digest() != hashlib.sha1(data).digest():
            raise ValueError(f"{name}: read back {len(back)} bytes, not the {len(data)} sent")


async def uploader(n):
    c = FtpClient("uploader")
    ok = 0
    for i in steps(n):
        ok += await c.attempt(f"step {i}", upload_step(c, i))
        await asyncio.sleep(0.05)
    for _ in range(3):  # the stop mark, tried again after a failure
        if await c.attempt("stop mark", c.put(STOP_MARK, b"stop\n")):
            break
    if c.client is not None:
        c.client.close()
    return ok, c.errors


async def read_new(c, seen):
    """Downloads and checks every final file not seen yet; True once the stop mark is there."""
    names = await c.names()
    for name in sorted(n for n in names if n.startswith("u-") and n not in seen):
        data = await c.get(name)
        want = content(name)
        if len(data) != len(want) or hashlib.sha1(data).digest() != hashlib.sha1(want).digest():
            raise ValueError(f"{name}: {len(data)} bytes, digest differs from the {len(want)} expected")
        seen.add(name)
    return STOP_MARK in names


async def reader_main():
    import signal

    told = asyncio.Event()  # SIGTERM: leave the loop and still say what was seen
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, told.set)
    c = FtpClient("reader")
    seen = set()
    rounds = ok = 0
    end = time.monotonic() + WORKLOAD_S + 15
    stop = False
    while not stop and not told.is_set() and time.monotonic() < end:
        rounds += 1
        try:
            stop = await asyncio.wait_for(read_new(c, seen), STEP_TIMEOUT_S * 2)
            ok += 1
        except Exception as e:
            c.drop(f"round {rounds}", e)
        await asyncio.sleep(0.1)
    if not stop:
        log("ftp reader: " + ("told to stop" if told.is_set() else "deadline reached") + " before the stop mark")
    if c.client is not None:
        c.client.close()
    return rounds, ok, len(seen), c.errors


def reader(name):
    """Helper process `ftp-reader --name N`."""
    rounds, ok, files, errors = asyncio.run(reader_main())
    log(f"ftp reader {name}: {ok}/{rounds} rounds ok, {files} files read and checked, {errors} failed")


def run(tmp, n):
    port = ports("aioftp-transfer")[0]
    root = os.path.join(tmp, "files")
    os.makedirs(root, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", FTP_ROOT=root)
    with Daemons(tmp) as d:
        p = d.start("server", [PY, LAUNCHER, "ftp-server"], env=env)
        wait_port(port, p, timeout=20)
        helper = d.start("reader2", [PY, LAUNCHER, "ftp-reader", "--name", "2"], env=env)
        ok, errors = asyncio.run(uploader(n))
        wait_readers([helper], seconds=25)
        log(f"aioftp-transfer: {ok}/{n} steps ok, {errors} failed")
