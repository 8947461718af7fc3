"""drb-chain: a Ruby dRuby (DRb, Ruby's standard library: Debian `ruby`, MRI 3.1) front
service that forwards every put and get to a DRb store service in another process, and two
Ruby clients calling the front.

Ports: front = p[0], store = p[1]. Both services are `DRb.start_service` servers on
`druby://127.0.0.1:PORT` (DRb's TCP protocol: each call a marshalled request on a
connection, a thread per connection in the server). The store (`drb.rb store`) keeps a
Hash behind a mutex: `put(k, v)` answers `[k, v.bytesize, SHA-1 of v]`, `get(k)` answers the
value (a KeyError for an unknown key). The front (`drb.rb front`) holds a `DRbObject` for
the store and forwards each call over DRb's pool of client connections (a connection is
put back after a call that went right and closed after one that failed); every store call
is given up after 1 s (`Timeout.timeout`); the front checks the store's answer to a put
(key, length, digest) and raises a RuntimeError to its client on any failure, which DRb
passes back to that client. Each client (`drb.rb client NAME`, started by the launcher)
puts a value a step (300 bytes to 6 KB, bytes that depend on the key; keys of its own),
checks the answer, gets it back and checks its length and SHA-1; every call is bounded to
2 s; a failed step is logged and counted, a new `DRbObject` made (DRb opens a new
connection) and the client goes on. Client 1 makes N steps 20 ms apart, client 2 (started
1.5 s later, so that the front accepts its connection mid-run) 60 steps 60 ms apart, both
stop at the workload deadline; each says at the end how many steps went right, and both
services say (on SIGTERM) how many calls they served.
"""

import os
import time

from .common import WORKLOAD_S, Daemons, log, ports, wait_port, wait_readers

REQUESTS2 = 60

RB = r"""# A process of the fault suite's drb-chain:
#   ruby drb.rb store PORT | front PORT STORE_PORT | client NAME FRONT_PORT STEPS PAUSE DEADLINE_S
require 'drb/drb'
require 'digest'
require 'timeout'

$stdout.sync = true
$stderr.sync = true
ROLE = ARGV[0]

def say(text)
  $stderr.puts("systems: #{text}")
end

def sha1(v)
  Digest::SHA1.hexdigest(v)
end

# The Hash of the store.
class Store
  def initialize
    @data = {}
    @mutex = Mutex.new
    @served = 0
  end

  attr_reader :served

  def put(k, v)
    raise ArgumentError, 'key and value must be strings' unless k.is_a?(String) && v.is_a?(String)

    @mutex.synchronize do
      @data[k] = v
      @served += 1
    end
    [k, v.bytesize, sha1(v)]
  end

  def get(k)
    v = @mutex.synchronize do
      @served += 1
      @data[k]
    end
    raise KeyError, "no key #{k}" if v.nil?

    v
  end
end

# The front: every call forwarded to the store, 1 s each.
class Front
  CALL_S = 1.0

  def initialize(uri)
    @uri = uri
    @served = 0
    @failed = 0
    @mutex = Mutex.new
  end

  def counts
    @mutex.synchronize { [@served, @failed] }
  end

  def forward(what)
    r = Timeout.timeout(CALL_S) { yield DRbObject.new_with_uri(@uri) }
    @mutex.synchronize { @served += 1 }
    r
  rescue StandardError => e
    @mutex.synchronize { @failed += 1 }
    raise "store #{what}: #{e.class}: #{e.message[0, 100]}"
  end

  def put(k, v)
    r = forward("put #{k}") { |s| s.put(k, v) }
    raise "store put #{k}: wrong answer #{r.inspect[0, 80]}" unless r == [k, v.bytesize, sha1(v)]

    r
  end

  def get(k)
    forward("get #{k}") { |s| s.get(k) }
  end
end

def value(k)
  seed = Digest::SHA1.digest("drb-#{k}")
  n = 300 + (k.to_i * 7919) % 5800
  (seed * (n / seed.bytesize + 1))[0, n]
end

def client(name, port, steps, pause, deadline_s)
  uri = "druby://127.0.0.1:#{port}"
  front = DRbObject.new_with_uri(uri)
  ok = 0
  failed = 0
  stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + deadline_s
  steps.times do |i|
    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > stop
      say("drb client #{name}: workload deadline (#{deadline_s.round} s) reached after #{i} of #{steps} steps")
      break
    end
    k = (2 * i + Integer(name)).to_s
    v = value(k)
    begin
      r = Timeout.timeout(2) { front.put(k, v) }
      raise "put #{k}: wrong answer #{r.inspect[0, 80]}" unless r == [k, v.bytesize, sha1(v)]

      got = Timeout.timeout(2) { front.get(k) }
      raise "get #{k}: not a string" unless got.is_a?(String)
      raise "get #{k}: #{got.bytesize} bytes, wrong length or SHA-1" unless got.bytesize == v.bytesize && sha1(got) == sha1(v)

      ok += 1
    rescue StandardError => e
      failed += 1
      say("drb client #{name}: request failed: #{e.class}: #{e.message[0, 160]}")
      front = DRbObject.new_with_uri(uri)
    end
    sleep(pause)
  end
  say("drb client #{name}: #{ok}/#{steps} steps ok, #{failed} failed")
end

case ROLE
when 'store', 'front'
  port = Integer(ARGV[1])
  obj = ROLE == 'store' ? Store.new : Front.new("druby://127.0.0.1:#{Integer(ARGV[2])}")
  stop = false
  Signal.trap('TERM') { stop = true }
  DRb.start_service("druby://127.0.0.1:#{port}", obj)
  sleep(0.1) until stop
  if ROLE == 'store'
    say("drb store: #{obj.served} calls served (told to stop)")
  else
    served, failed = obj.counts
    say("drb front: #{served} calls forwarded, #{failed} failed (told to stop)")
  end
when 'client'
  client(ARGV[1], Integer(ARGV[2]), Integer(ARGV[3]), Float(ARGV[4]), Float(ARGV[5]))
else
  abort("drb.rb: unknown role #{ROLE}")
end
"""


def run(tmp, n):
    fport, sport = ports("drb-chain")[:2]
    rb = os.path.join(tmp, "drb.rb")
    with open(rb, "w") as f:
        f.write(RB)
    with Daemons(tmp) as d:
        p = d.start("store", ["ruby", rb, "store", str(sport)])
        wait_port(sport, p, timeout=20)
        p = d.start("front", ["ruby", rb, "front", str(fport), str(sport)])
        wait_port(fport, p, timeout=20)
        clients = []
        for name, steps, pause in (("1", n, 0.02), ("2", REQUESTS2, 0.06)):
            clients.append(d.start(f"client{name}", ["ruby", rb, "client", name, str(fport), str(steps), str(pause),
                                                     str(WORKLOAD_S)]))
            # Client 2 comes a little later: the front accepts its connection mid-run.
            time.sleep(1.5 if name == "1" else 0)
        wait_readers(clients, seconds=WORKLOAD_S + 15)
        codes = [c.poll() for c in clients]
        log(f"drb-chain: clients ended with {codes} (their summaries: client1.log, client2.log)")
