"""em-relay: a Ruby EventMachine front that relays a line protocol to a Ruby EventMachine
key-value store over one persistent connection, and two Python clients (Debian `ruby` —
MRI 3.1 — and `ruby-eventmachine`: a reactor written in C++ that owns the sockets and
calls Ruby back per event; the clients use `sut.common.LineClient`).

Ports: front = p[0], store = p[1]. The store (`em.rb store`) keeps a Hash: `SET K V`
answers `OK K LEN`, `GET K` answers `VAL K V` (or `MISS K`). The front (`em.rb front`) takes
the same commands from its clients and passes them, in order, on its single connection to
the store (requests pipelined, answers matched first in, first out); it answers `OK K LEN`
to a SET whose store answer names the same key and length, and `VAL K LEN DIGEST` to a GET
(DIGEST: the first 16 hex digits of the value's SHA-1), `ERR ...` otherwise. A store answer
missing after 1 s, a closed store connection or a wrong answer fails every request then
waiting; the front drops the store connection and makes it again 100 ms later. Each client
(the launcher, and the helper `em-client --name 2`) sets then gets keys of its own on one
connection (2 s timeout), checks the answers (key, length, digest), counts failures,
connects again after one and goes on. Both Ruby processes say at the end (on SIGTERM) how
many requests they served and how many failed.
"""

import hashlib
import os
import time

from .common import LAUNCHER, PY, Daemons, LineClient, log, ports, steps, wait_port, wait_readers

REQUESTS2 = 60

RB = r"""# A process of the fault suite's em-relay: ruby em.rb store|front PORT [STORE_PORT]
require 'eventmachine'
require 'digest'

ROLE = ARGV[0]
PORT = Integer(ARGV[1])
STORE = Integer(ARGV[2] || 0)
$served = 0
$failed = 0
$stdout.sync = true
$stderr.sync = true

def lines(buf, data)
  buf << data
  out = []
  while (i = buf.index("\r\n"))
    out << buf.slice!(0, i + 2).chomp
  end
  out
end

module StoreServer
  def post_init
    @buf = +''
  end

  def receive_data(data)
    lines(@buf, data).each do |line|
      cmd, k, v = line.split(' ', 3)
      if cmd == 'SET' && k && v
        $data[k] = v
        $served += 1
        send_data("OK #{k} #{v.bytesize}\r\n")
      elsif cmd == 'GET' && k
        v = $data[k]
        if v
          $served += 1
          send_data("VAL #{k} #{v}\r\n")
        else
          $failed += 1
          send_data("MISS #{k}\r\n")
        end
      else
        $failed += 1
        send_data("ERR bad command\r\n")
        close_connection_after_writing
      end
    end
  end
end

# The front's one connection to the store; requests wait in @pending, oldest first.
class StoreLink < EM::Connection
  attr_reader :up

  def post_init
    @buf = +''
    @pending = []
    @up = false
  end

  def connection_completed
    @up = true
    $stderr.puts 'systems: em front: store connection up'
  end

  def ask(client, cmd, k, v)
    timer = EM::Timer.new(1.0) { give_up('store answer timed out') }
    @pending << [client, cmd, k, v, timer]
    send_data(cmd == 'SET' ? "SET #{k} #{v}\r\n" : "GET #{k}\r\n")
  end

  def receive_data(data)
    lines(@buf, data).each do |line|
      req = @pending.shift
      return give_up("unexpected store answer #{line[0, 40].inspect}") unless req
      client, cmd, k, v, timer = req
      timer.cancel
      answer(client, cmd, k, v, line)
    end
  end

  def answer(client, cmd, k, v, line)
    word, key, rest = line.split(' ', 3)
    if cmd == 'SET' && word == 'OK' && key == k && rest == v.bytesize.to_s
      $served += 1
      client.reply("OK #{k} #{v.bytesize}")
    elsif cmd == 'GET' && word == 'VAL' && key == k && rest
      $served += 1
      client.reply("VAL #{k} #{rest.bytesize} #{Digest::SHA1.hexdigest(rest)[0, 16]}")
    else
      $failed += 1
      $stderr.puts "systems: em front: #{cmd} #{k}: store answered #{line[0, 60].inspect}"
      client.reply("ERR store answered #{word}")
    end
  end

  def give_up(why)
    $stderr.puts "systems: em front: #{why}; #{@pending.size} requests failed"
    fail_all(why)
    close_connection
  end

  def fail_all(why)
    @pending.each do |client, _cmd, _k, _v, timer|
      timer.cancel
      $failed += 1
      client.reply("ERR #{why}")
    end
    @pending.clear
  end

  def unbind
    @up = false
    fail_all('store connection closed')
    EM.add_timer(0.1) { $link = EM.connect('127.0.0.1', STORE, StoreLink) }
  end
end

module FrontServer
  def post_init
    @buf = +''
    @open = true
  end

  def reply(line)
    send_data("#{line}\r\n") if @open
  end

  def receive_data(data)
    lines(@buf, data).each do |line|
      cmd, k, v = line.split(' ', 3)
      if !%w[SET GET].include?(cmd) || k.nil? || (cmd == 'SET' && v.nil?)
        $failed += 1
        reply('ERR bad command')
      elsif $link.nil? || !$link.up
        $failed += 1
        reply('ERR store down')
      else
        $link.ask(self, cmd, k, v)
      end
    end
  end

  def unbind
    @open = false
  end
end

$data = {}
EM.run do
  Signal.trap('TERM') { EM.stop_event_loop }
  if ROLE == 'store'
    EM.start_server('127.0.0.1', PORT, StoreServer)
  else
    $link = EM.connect('127.0.0.1', STORE, StoreLink)
    EM.start_server('127.0.0.1', PORT, FrontServer)
  end
end
$stderr.puts "systems: em #{ROLE}: #{$served} requests ok, #{$failed} failed (told to stop)"
"""


def value(k):
    return f"v{k}:" + "y" * (k % 40)


def step(c, k):
    v = value(k)

    def go(c):
        c.sock.sendall(f"SET {k} {v}\r\n".encode())
        line = c.line().decode(errors="replace")
        if line != f"OK {k} {len(v)}":
            raise ValueError(f"set {k}: {line[:60]!r}")
        c.sock.sendall(f"GET {k}\r\n".encode())
        line = c.line().decode(errors="replace")
        want = f"VAL {k} {len(v)} {hashlib.sha1(v.encode()).hexdigest()[:16]}"
        if line != want:
            raise ValueError(f"get {k}: {line[:60]!r}")
        return True

    return c.request(go) is True


def workload(name, n, pause):
    """n steps (key 2·i + name), `pause` seconds apart: (steps that went right, failures)."""
    c = LineClient(ports("em-relay")[0], timeout=2.0)
    ok = 0
    for i in steps(n):
        ok += step(c, 2 * i + int(name))
        time.sleep(pause)
    c.close()
    return ok, c.errors


def client(name):
    """Helper process `em-client --name N`: REQUESTS2 steps, every 60 ms."""
    ok, errors = workload(name, REQUESTS2, 0.06)
    log(f"em client {name}: {ok}/{REQUESTS2} steps ok, {errors} failed")


def run(tmp, n):
    fport, sport = ports("em-relay")[:2]
    rb = os.path.join(tmp, "em.rb")
    with open(rb, "w") as f:
        f.write(RB)
    with Daemons(tmp) as d:
        p = d.start("store", ["ruby", rb, "store", str(sport)])
        wait_port(sport, p, timeout=20)
        p = d.start("front", ["ruby", rb, "front", str(fport), str(sport)])
        wait_port(fport, p, timeout=20)
        helper = d.start("client2", [PY, LAUNCHER, "em-client", "--name", "2"],
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        ok, errors = workload("1", n, 0.02)
        wait_readers([helper], seconds=25)
        log(f"em-relay: {ok}/{n} steps ok, {errors} failed")
