"""copas-chain: a Lua front server on Copas (Debian `lua-copas` 1.1.7 with `lua-socket` 3.0
under Debian's `lua5.1`: coroutines on one `socket.select` loop) that forwards every put and
get to a Copas store server in another process, and two Python clients.

Ports: front = p[0], store = p[1]. The protocol, the same on both hops, is a line and then
raw bytes: `PUT key n\\n` and n bytes answered `OK key n\\n`; `GET key\\n` answered `VAL n\\n`
and n bytes, or `ERR text\\n`. The store (`copas.lua store`) keeps a table; the front
(`copas.lua front`) gives each client connection a coroutine, which opens its own
connection to the store (`copas.connect`) at the first request and forwards each request
on it, checks a put's answer (key and length) and passes the answer back; after a failure
of the store connection it answers `ERR` and opens a new one at the next request. Copas
1.1.7 has no timeouts on its sockets (a coroutine waits on the loop until the peer answers
or closes), so the front waits on the store as long as its client waits. Each client (the
launcher, and the helper `copas-client --name 2`, which starts 1.5 s later) puts a value a
step (300 bytes to 9 KB, bytes that depend on the key; keys of its own) and gets it back on
one connection (2 s timeout), checks the answers (key and length of a put; the value's
length and SHA-1), counts a failure, connects again and goes on. Both servers say at their
exit (SIGTERM) how many requests they served.
"""

import hashlib
import os
import time

from .common import Daemons, LineClient, LAUNCHER, PY, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60

LUA = r"""-- A process of the fault suite's copas-chain: lua5.1 copas.lua store PORT | front PORT STORE_PORT
local socket = require("socket")
local copas = require("copas")
io.stdout:setvbuf("no")
io.stderr:setvbuf("no")

local role, port, sport = arg[1], tonumber(arg[2]), tonumber(arg[3])
local served, failed = 0, 0
local function say(text) io.stderr:write("systems: " .. text .. "\n") end

-- Reads one request from c: (verb, key, body) or nil and an error.
local function request(c)
  local line, err = c:receive("*l")
  if not line then return nil, err end
  local verb, key, n = line:match("^(%u+) (%S+) ?(%d*)$")
  if verb == "PUT" and n ~= "" then
    local body, e = c:receive(tonumber(n))
    if not body then return nil, e end
    return verb, key, body
  elseif verb == "GET" then
    return verb, key
  end
  return "BAD", line
end

local store = {}
local function store_handler(skt)
  local c = copas.wrap(skt)
  while true do
    local verb, key, body = request(c)
    if not verb then break end
    if verb == "PUT" then
      store[key] = body
      served = served + 1
      c:send("OK " .. key .. " " .. #body .. "\n")
    elseif verb == "GET" then
      local v = store[key]
      served = served + 1
      if v then c:send("VAL " .. #v .. "\n" .. v) else c:send("ERR no key " .. key .. "\n") end
    else
      c:send("ERR bad request\n")
      break
    end
  end
  skt:close()
end

-- One call to the store on the connection s: the answer's line and bytes, or nil and an error.
local function forward(s, verb, key, body)
  local ok, err
  if verb == "PUT" then
    ok, err = s:send("PUT " .. key .. " " .. #body .. "\n" .. body)
  else
    ok, err = s:send("GET " .. key .. "\n")
  end
  if not ok then return nil, "send: " .. tostring(err) end
  local line, e = s:receive("*l")
  if not line then return nil, "receive: " .. tostring(e) end
  if verb == "PUT" then
    if line ~= "OK " .. key .. " " .. #body then return nil, "wrong answer " .. line:sub(1, 60) end
    return line .. "\n"
  end
  local n = line:match("^VAL (%d+)$")
  if not n then
    if line:match("^ERR ") then return line .. "\n" end
    return nil, "wrong answer " .. line:sub(1, 60)
  end
  local v, e2 = s:receive(tonumber(n))
  if not v then return nil, "receive value: " .. tostring(e2) end
  return line .. "\n" .. v
end

local function front_handler(skt)
  local c = copas.wrap(skt)
  local raw, s = nil, nil
  while true do
    local verb, key, body = request(c)
    if not verb then break end
    if verb == "BAD" then
      c:send("ERR bad request\n")
      break
    end
    if not s then
      raw = socket.tcp()
      local ok, err = copas.connect(raw, "127.0.0.1", sport)
      if ok then s = copas.wrap(raw) else raw:close(); raw = nil; say("copas front: connect to store: " .. tostring(err)) end
    end
    local answer, err
    if s then answer, err = forward(s, verb, key, body) else err = "no store connection" end
    if answer then
      served = served + 1
      c:send(answer)
    else
      failed = failed + 1
      say("copas front: store " .. verb .. " " .. key .. ": " .. tostring(err))
      if raw then raw:close() end
      raw, s = nil, nil
      c:send("ERR store " .. verb .. " " .. key .. ": " .. tostring(err) .. "\n")
    end
  end
  if raw then raw:close() end
  skt:close()
end

local server = assert(socket.bind("127.0.0.1", port))
copas.addserver(server, role == "store" and store_handler or front_handler)
-- Plain Lua cannot catch SIGTERM: the loop looks for a stop mark (a file the launcher
-- creates at the end) every 0.5 s, and the server says what it served before it leaves.
local stopmark = arg[4]
local last = socket.gettime()
while true do
  copas.step(0.1)
  local now = socket.gettime()
  if now - last > 0.5 then
    last = now
    local f = io.open(stopmark, "r")
    if f then
      f:close()
      if role == "store" then say("copas store: " .. served .. " requests served (told to stop)")
      else say("copas front: " .. served .. " requests forwarded, " .. failed .. " failed (told to stop)") end
      os.exit(0)
    end
  end
end
"""


def value(k):
    """The bytes a client stores under key k (their length varies with k)."""
    seed = hashlib.sha1(f"copas-{k}".encode()).digest()
    n = 300 + (k * 7919) % 9000
    return (seed * (n // len(seed) + 1))[:n]


def _step(c, k):
    v = value(k)
    c.sock.sendall(f"PUT {k} {len(v)}\n".encode() + v)
    line = c.nl_line()
    if line != f"OK {k} {len(v)}".encode():
        raise ValueError(f"put {k}: wrong answer {line[:80]!r}")
    c.sock.sendall(f"GET {k}\n".encode())
    line = c.nl_line()
    if not line.startswith(b"VAL "):
        raise ValueError(f"get {k}: wrong answer {line[:80]!r}")
    got = c.exact(int(line[4:]))
    if len(got) != len(v) or hashlib.sha1(got).digest() != hashlib.sha1(v).digest():
        raise ValueError(f"get {k}: {len(got)} bytes, wrong length or SHA-1")
    return True


class Client(LineClient):
    """LineClient with lines ended by a bare newline."""

    def nl_line(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def workload(name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart: (steps that went right, failures)."""
    c = Client(ports("copas-chain")[0], timeout=2.0)
    ok = 0
    for i in steps(n):
        ok += bool(c.request(lambda c, k=2 * i + int(name): _step(c, k)))
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `copas-client --name N`: REQUESTS2 steps, every 60 ms, from 1.5 s after
    its start (the front accepts its connection mid-run)."""
    time.sleep(1.5)
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"copas client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    front, store = ports("copas-chain")[:2]
    script = os.path.join(tmp, "copas.lua")
    with open(script, "w") as f:
        f.write(LUA)
    stopmark = os.path.join(tmp, "copas.stop")
    if os.path.exists(stopmark):
        os.unlink(stopmark)
    with Daemons(tmp) as d:
        try:
            p = d.start("store", ["lua5.1", script, "store", str(store), "0", stopmark])
            wait_port(store, p, timeout=15)
            p = d.start("front", ["lua5.1", script, "front", str(front), str(store), stopmark])
            wait_port(front, p, timeout=15)
            helper = d.start("client2", [PY, LAUNCHER, "copas-client", "--name", "2"],
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
            ok, errors = workload("1", n, 0.02)
            wait_readers([helper], seconds=25)
            log(f"copas-chain: {ok}/{n} steps ok, {errors} failed")
        finally:
            # The servers leave at the stop mark (within 0.6 s) and say what they served.
            open(stopmark, "w").close()
            for _, q in d.procs[:2]:
                try:
                    q.wait(timeout=3)
                except Exception:
                    pass
