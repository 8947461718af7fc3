"""ruby-chain: a Ruby HTTP front service that calls a Ruby key-value backend service for every
request over a pool of keep-alive connections, and two Python clients (Debian `ruby` — MRI
3.1, its threads under the global VM lock — and `ruby-webrick`; the services use only
WEBrick, `Net::HTTP` and Ruby's standard library, the clients `http.client`).

Ports: front = p[0], backend = p[1]. Both services are WEBrick servers (a thread per
connection). The backend keeps a Hash under a Mutex: `PUT /kv/K` stores the body, `GET
/kv/K` answers `{"k", "v"}` (404 when absent). The front forwards `PUT /item/K` and `GET
/item/K` (the API of `sut/kv_http.py`) to the backend through a pool of started
`Net::HTTP` connections (keep-alive; 1 s to connect, read or write; no retry — Net::HTTP
would otherwise repeat a failed PUT or GET once —; a connection that failed is finished, a
good one goes back to the pool) and answers JSON with the stored
length, or the value's length and SHA-1 digest; a backend failure (an exception, a status
other than 200, a body that does not parse or names another key) becomes a 502. Each
client (the launcher, and the helper `ruby-client --name 2`) puts then reads back N keys of
its own on one keep-alive connection (2 s timeout), checks the answers, counts failures,
connects again and goes on. Each Ruby service says at the end (on SIGTERM) how many
requests it served and how many failed.
"""

import os

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

RB = r"""# A service of the fault suite's ruby-chain: ruby service.rb front|back PORT [BACKEND_PORT]
require 'webrick'
require 'net/http'
require 'json'
require 'digest'

ROLE = ARGV[0]
PORT = Integer(ARGV[1])
BACK = Integer(ARGV[2] || 0)
$count = Mutex.new
$served = 0
$failed = 0

def counted(ok)
  $count.synchronize { ok ? $served += 1 : $failed += 1 }
end

def reply(res, status, obj)
  res.status = status
  res['Content-Type'] = 'application/json'
  res.body = JSON.generate(obj)
end

server = WEBrick::HTTPServer.new(BindAddress: '127.0.0.1', Port: PORT, AccessLog: [],
                                 Logger: WEBrick::Log.new($stderr, WEBrick::Log::WARN))

if ROLE == 'back'
  store = {}
  lock = Mutex.new
  server.mount_proc('/kv/') do |req, res|
    k = req.path.delete_prefix('/kv/')
    if req.request_method == 'PUT'
      v = req.body.to_s
      lock.synchronize { store[k] = v }
      counted(true)
      reply(res, 200, {k: k, stored: v.bytesize})
    else
      v = lock.synchronize { store[k] }
      counted(!v.nil?)
      v.nil? ? reply(res, 404, {k: k, error: 'no such key'}) : reply(res, 200, {k: k, v: v})
    end
  end
else
  POOL = Queue.new

  def backend
    POOL.pop(true)
  rescue ThreadError
    h = Net::HTTP.new('127.0.0.1', BACK)
    h.open_timeout = 1
    h.read_timeout = 1
    h.write_timeout = 1
    h.keep_alive_timeout = 30
    h.max_retries = 0
    h.start
  end

  # One call to the backend on a pooled connection: the parsed body, or an exception.
  def call(k, put_body)
    h = backend
    begin
      r = put_body ? h.send_request('PUT', "/kv/#{k}", put_body) : h.request_get("/kv/#{k}")
      raise "status #{r.code}" unless r.code == '200'
      b = JSON.parse(r.body)
      raise "key #{b['k'].inspect} for #{k}" unless b['k'] == k
      POOL << h
      b
    rescue StandardError
      h.finish rescue nil
      raise
    end
  end

  server.mount_proc('/item/') do |req, res|
    k = req.path.delete_prefix('/item/')
    begin
      if req.request_method == 'PUT'
        b = call(k, req.body.to_s)
        reply(res, 200, {item: Integer(k), stored: b['stored']})
      else
        v = call(k, nil)['v'].to_s
        reply(res, 200, {item: Integer(k), len: v.bytesize, digest: Digest::SHA1.hexdigest(v)[0, 16]})
      end
      counted(true)
    rescue StandardError => e
      counted(false)
      $stderr.puts "systems: front: item #{k}: backend failed: #{e.class}: #{e.message}"
      reply(res, 502, {error: "#{e.class}: #{e.message}"})
    end
  end
end

trap('TERM') { server.shutdown }
server.start
$stderr.puts "systems: ruby #{ROLE}: #{$served} requests ok, #{$failed} failed (told to stop)"
"""

REQUESTS = 120


def client(name):
    """Helper process `ruby-client --name N`."""
    ok, errors = workload(ports("ruby-chain")[0], name, REQUESTS, 0.02)
    log(f"ruby client {name}: {ok}/{REQUESTS} steps ok, {errors} failed")


def run(tmp, n):
    front, back = ports("ruby-chain")[:2]
    rb = os.path.join(tmp, "service.rb")
    with open(rb, "w") as f:
        f.write(RB)
    with Daemons(tmp) as d:
        p = d.start("back", ["ruby", rb, "back", str(back)])
        wait_port(back, p, timeout=20)
        p = d.start("front", ["ruby", rb, "front", str(front), str(back)])
        wait_port(front, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "ruby-client", "--name", "2"])
        ok, errors = workload(front, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"ruby-chain: {ok}/{n} steps ok, {errors} failed")
