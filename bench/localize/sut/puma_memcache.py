"""puma-memcache: a Rack application in Puma's cluster mode (Debian `puma` 5.6 on Ruby MRI
3.1: a master that forks and supervises a worker of 4 threads) that keeps its data in two
memcached shards (Debian `memcached`), and two Python HTTP clients (`http.client`).

Ports: Puma = p[0], memcached shards = p[1], p[2]. The application (a rackup file run by
Puma's own Rack builder, nothing from outside Ruby's standard library) serves the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`): it picks a shard by the CRC-32 of the key
and speaks memcached's text protocol to it on a connection of the worker thread's own
(`set`, then `get` with the value's length checked; 1 s to connect or to wait for an
answer; a connection that failed is closed and made again on the next call); a shard
failure becomes a 502. One worker only, so that a fault can name the process that serves
the requests (a port-keyed SPEC would otherwise match every worker, each counting from
its fork): the master (`worker_timeout` 6 s) kills a worker that stops checking in and
forks a new one, as it does for a worker that died. Each client (the launcher, and the
helper `puma-client --name 2`) puts then reads back keys of its own on one keep-alive
connection (2 s timeout), checks the answers, counts failures, connects again and goes
on. The worker says at the end how many requests it served and how many failed.
"""

import os

from .common import LAUNCHER, PY, Daemons, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60

APP = r"""# The fault suite's puma-memcache application: puma -C puma.rb app.ru
require 'socket'
require 'json'
require 'digest'
require 'zlib'
require 'io/wait'

# One memcached connection (text protocol), made again after any failure.
class Mc
  def initialize(port)
    @port = port
    @sock = nil
    @buf = String.new(encoding: Encoding::BINARY)
  end

  def conn
    @sock ||= Socket.tcp('127.0.0.1', @port, connect_timeout: 1).tap { @buf.clear }
  end

  def close
    @sock&.close
  rescue StandardError
    nil
  ensure
    @sock = nil
  end

  def fill
    raise IOError, "memcached #{@port}: no answer in 1 s" unless @sock.wait_readable(1)
    data = @sock.read_nonblock(65536, exception: false)
    raise EOFError, "memcached #{@port} closed the connection" if data.nil?
    @buf << data unless data == :wait_readable
  end

  def line
    fill until (i = @buf.index("\r\n"))
    @buf.slice!(0, i + 2)[0, i]
  end

  def exact(n)
    fill while @buf.bytesize < n
    @buf.slice!(0, n)
  end

  def set(k, v)
    conn.write("set #{k} 0 0 #{v.bytesize}\r\n", v, "\r\n")
    r = line
    raise "set #{k}: #{r[0, 40].inspect}" unless r == 'STORED'
  end

  def get(k)
    conn.write("get #{k}\r\n")
    h = line
    raise "get #{k}: no such key" if h == 'END'
    f = h.split
    raise "get #{k}: #{h[0, 40].inspect}" unless f.size == 4 && f[0] == 'VALUE' && f[1] == k
    v = exact(Integer(f[3]) + 2)
    raise "get #{k}: the value does not end in CRLF" unless v.end_with?("\r\n")
    raise "get #{k}: no END" unless line == 'END'
    v[0...-2]
  end
end

SHARDS = ENV.fetch('MC_PORTS').split(',').map { |p| Integer(p) }
$count = Mutex.new
$served = 0
$failed = 0
at_exit { $stderr.puts "systems: puma worker #{Process.pid}: #{$served} requests ok, #{$failed} failed" }

def shard(k)
  mcs = (Thread.current[:mc] ||= SHARDS.map { |p| Mc.new(p) })
  mcs[Zlib.crc32(k) % mcs.size]
end

def reply(status, obj)
  [status, { 'Content-Type' => 'application/json' }, [JSON.generate(obj)]]
end

run(lambda do |env|
  m = %r{\A/item/(\d+)\z}.match(env['PATH_INFO'])
  next reply(404, { error: 'no such path' }) unless m
  k = m[1]
  mc = shard(k)
  begin
    if env['REQUEST_METHOD'] == 'PUT'
      v = env['rack.input'].read.b
      mc.set("item#{k}", v)
      out = { item: Integer(k), stored: v.bytesize }
    else
      v = mc.get("item#{k}")
      out = { item: Integer(k), len: v.bytesize, digest: Digest::SHA1.hexdigest(v)[0, 16] }
    end
    $count.synchronize { $served += 1 }
    reply(200, out)
  rescue StandardError => e
    mc.close
    $count.synchronize { $failed += 1 }
    $stderr.puts "systems: puma worker: item #{k}: memcached failed: #{e.class}: #{e.message}"
    reply(502, { error: "#{e.class}: #{e.message}"[0, 200] })
  end
end)
"""

CONF = """# The fault suite's puma-memcache server (cluster mode).
workers 1
threads 4, 4
bind 'tcp://127.0.0.1:{port}'
worker_timeout 6
worker_boot_timeout 30
persistent_timeout 20
environment 'production'
silence_single_worker_warning
directory '{d}'
"""


def client(name):
    """Helper process `puma-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(ports("puma-memcache")[0], name, REQUESTS2, 0.06)
    log(f"puma client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    port, m1, m2 = ports("puma-memcache")[:3]
    app, conf = os.path.join(tmp, "app.ru"), os.path.join(tmp, "puma.rb")
    with open(app, "w") as f:
        f.write(APP)
    with open(conf, "w") as f:
        f.write(CONF.format(port=port, d=tmp))
    env = dict(os.environ, MC_PORTS=f"{m1},{m2}")
    with Daemons(tmp) as d:
        for i, mp in ((1, m1), (2, m2)):
            p = d.start(f"memcached{i}", ["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", str(mp),
                                          "-U", "0", "-t", "2"])
            wait_port(mp, p)
        p = d.start("puma", ["puma", "-C", conf, app], env=env)
        wait_port(port, p, timeout=30)
        helper = d.start("client2", [PY, LAUNCHER, "puma-client", "--name", "2"])
        ok, errors = workload(port, "1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"puma-memcache: {ok}/{n} steps ok, {errors} failed")
