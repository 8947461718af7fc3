"""unicorn-store: a Rack application in unicorn (Debian `unicorn` 6 on Ruby MRI 3.1: a
master that forks two single-threaded workers, watches them, kills one that is stuck past
`timeout` and forks a new one for a worker that died) that keeps its data in a Ruby
key-value store (a `TCPServer` with a thread per connection, a line protocol), and two
Python HTTP clients (`http.client`).

Ports: unicorn's shared listener = p[0], the store = p[1], worker 0's own listener = p[2],
worker 1's = p[3]. unicorn accepts on p[0] in every worker; its `after_fork` hook also
gives each worker a listener of its own (`server.listen`, unicorn's per-worker port, the
example of its documentation), made again by the worker that replaces it. The launcher's
client talks to worker 0's port and the helper's to worker 1's, so that a fault can name
the worker it concerns (a SPEC keyed on the shared port would match both workers, each
counting from its fork); the shared port answers the launcher's readiness probe. The
application (`app.ru`, nothing outside Ruby's standard library) serves the API of
`sut/kv_http.py` (`PUT /item/K`, `GET /item/K`) and keeps one connection to the store per
worker (1 s to connect or to wait for an answer; a connection that failed is closed and
made again on the next call): `SET K LEN` + the bytes answers `STORED LEN SHA` (the first
16 hex digits of the value's SHA-1, checked by the worker), `GET K` answers `VALUE LEN` +
the bytes (or `MISSING`); a store failure becomes a 502. unicorn answers every request
with `Connection: close`, so a client connects again for each request (http.client does
it by itself). Each client puts then reads back keys of its own (2 s timeout), checks
length and SHA-1, counts failures and goes on. The store says at the end (on SIGTERM) how
many commands it served and how many failed.
"""

import os
import signal

from .common import LAUNCHER, PY, Daemons, descendants, log, ports, wait_port, wait_readers
from .kv_http import workload

REQUESTS2 = 60

STORE_RB = r"""# The fault suite's unicorn-store key-value store: ruby store.rb PORT
require 'socket'
require 'digest'
require 'io/wait'

$data = {}
$lock = Mutex.new
$ok = 0
$failed = 0
trap('TERM') do
  $stderr.puts "systems: store: #{$ok} commands ok, #{$failed} failed (told to stop)"
  $stderr.flush
  exit!(0)
end

def serve(sock)
  # Waits until the socket is readable before reading (Ruby's nonblocking read would
  # otherwise try first and wait on EAGAIN): one read per command that arrives.
  while sock.wait_readable && (line = sock.gets("\r\n"))
    f = line.chomp("\r\n").split(' ')
    case f[0]
    when 'SET'
      raise ArgumentError, "bad SET #{line[0, 40].inspect}" unless f.size == 3 && f[2] =~ /\A\d+\z/
      n = Integer(f[2])
      raise ArgumentError, "SET of #{n} bytes" if n > 1 << 20
      v = sock.read(n + 2)
      raise EOFError, 'end of stream in a value' if v.nil? || v.bytesize < n + 2
      raise ArgumentError, 'the value does not end in CRLF' unless v.end_with?("\r\n")
      v = v[0, n]
      $lock.synchronize { $data[f[1]] = v; $ok += 1 }
      sock.write("STORED #{n} #{Digest::SHA1.hexdigest(v)[0, 16]}\r\n")
    when 'GET'
      v = $lock.synchronize { $ok += 1; $data[f[1]] }
      sock.write(v.nil? ? "MISSING\r\n" : "VALUE #{v.bytesize}\r\n#{v}\r\n")
    else
      $lock.synchronize { $failed += 1 }
      $stderr.puts "systems: store: unknown command #{line[0, 40].inspect}"
      sock.write("ERROR unknown command\r\n")
    end
  end
rescue StandardError => e
  $lock.synchronize { $failed += 1 }
  $stderr.puts "systems: store: connection failed: #{e.class}: #{e.message[0, 120]}"
ensure
  sock.close rescue nil
end

server = TCPServer.new('127.0.0.1', Integer(ARGV[0]))
loop do
  begin
    sock = server.accept
  rescue Errno::EMFILE, Errno::ENFILE, Errno::ECONNABORTED => e
    $stderr.puts "systems: store: accept failed: #{e.class}"
    sleep 0.1
    next
  end
  Thread.new(sock) { |s| serve(s) }
end
"""

APP = r"""# The fault suite's unicorn-store application: unicorn -c unicorn.rb app.ru
require 'socket'
require 'json'
require 'digest'
require 'io/wait'

# The worker's one connection to the store (line protocol), made again after any failure.
class Store
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
    raise IOError, "store: no answer in 1 s" unless @sock.wait_readable(1)
    data = @sock.read_nonblock(65536, exception: false)
    raise EOFError, 'store closed the connection' if data.nil?
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
    conn.write("SET #{k} #{v.bytesize}\r\n#{v}\r\n")
    r = line
    want = "STORED #{v.bytesize} #{Digest::SHA1.hexdigest(v)[0, 16]}"
    raise "set #{k}: #{r[0, 40].inspect}, wanted #{want}" unless r == want
  end

  def get(k)
    conn.write("GET #{k}\r\n")
    h = line
    raise "get #{k}: no such key" if h == 'MISSING'
    f = h.split(' ')
    raise "get #{k}: #{h[0, 40].inspect}" unless f.size == 2 && f[0] == 'VALUE' && f[1] =~ /\A\d+\z/
    v = exact(Integer(f[1]) + 2)
    raise "get #{k}: the value does not end in CRLF" unless v.end_with?("\r\n")
    v[0...-2]
  end
end

STORE = Store.new(Integer(ENV.fetch('KV_PORT')))

def reply(status, obj)
  [status, { 'Content-Type' => 'application/json' }, [JSON.generate(obj)]]
end

run(lambda do |env|
  m = %r{\A/item/(\d+)\z}.match(env['PATH_INFO'])
  next reply(404, { error: 'no such path' }) unless m
  k = m[1]
  begin
    if env['REQUEST_METHOD'] == 'PUT'
      v = env['rack.input'].read.b
      STORE.set("item#{k}", v)
      out = { item: Integer(k), stored: v.bytesize }
    else
      v = STORE.get("item#{k}")
      out = { item: Integer(k), len: v.bytesize, digest: Digest::SHA1.hexdigest(v)[0, 16] }
    end
    reply(200, out)
  rescue StandardError => e
    STORE.close
    $stderr.puts "systems: unicorn worker #{Process.pid}: item #{k}: store failed: #{e.class}: #{e.message[0, 120]}"
    reply(502, { error: "#{e.class}: #{e.message}"[0, 200] })
  end
end)
"""

CONF = """# The fault suite's unicorn-store server.
worker_processes 2
listen '127.0.0.1:{port}', backlog: 64
timeout 5
preload_app false
working_directory '{d}'
pid '{d}/unicorn.pid'
after_fork do |server, worker|
  # unicorn's per-worker listener: worker N also listens on {own} + N.
  server.listen("127.0.0.1:#{{{own} + worker.nr}}", tries: -1, delay: 0.2, backlog: 64)
  $stderr.puts "systems: unicorn worker #{{worker.nr}} started (pid #{{Process.pid}})"
end
"""


def client(name):
    """Helper process `unicorn-client --name N`: REQUESTS2 steps on worker N-1's port,
    every 60 ms."""
    ok, errors = workload(ports("unicorn-store")[1 + int(name)], name, REQUESTS2, 0.06)
    log(f"unicorn client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")



def run(tmp, n):
    port, kv, own0, own1 = ports("unicorn-store")[:4]
    for name, text in (("store.rb", STORE_RB), ("app.ru", APP),
                       ("unicorn.rb", CONF.format(port=port, d=tmp, own=own0))):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = dict(os.environ, KV_PORT=str(kv))
    workers = []
    try:
        with Daemons(tmp) as d:
            p = d.start("store", ["ruby", os.path.join(tmp, "store.rb"), str(kv)])
            wait_port(kv, p, timeout=20)
            u = d.start("unicorn", ["unicorn", "-c", os.path.join(tmp, "unicorn.rb"), os.path.join(tmp, "app.ru")],
                        env=env, cwd=tmp)
            for wp in (port, own0, own1):
                wait_port(wp, u, timeout=30)
            try:
                helper = d.start("client2", [PY, LAUNCHER, "unicorn-client", "--name", "2"])
                ok, errors = workload(own0, "1", n, 0.02)
                wait_readers([helper], seconds=25)
                log(f"unicorn-store: {ok}/{n} steps ok, {errors} failed")
            finally:
                workers = descendants(u.pid)
    finally:
        # A worker stopped by SIGSTOP takes no SIGTERM (the master's, then ours): whatever
        # is left of unicorn is killed.
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
