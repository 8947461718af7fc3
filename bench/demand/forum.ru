# The application tier of the demand suite's forum-squid-puma system (bench/demand/forum.py):
# a Rack application served by Puma in cluster mode (Debian `puma` 5.6 on Ruby MRI 3.1: a
# master forking FORUM_WORKERS worker processes that accept on one socket, each with ONE
# request thread and `queue_requests false`, so that a worker's request thread itself reads,
# parses, handles and answers one request at a time) behind Squid (every request passed to it),
# over Redis (a cache of topics; RESP spoken here) and PostgreSQL (Debian ruby-pg; one backend
# process per worker's connection).
#
# Three request types (`/TYPE/K`), each burning a known CPU time of its request thread
# (CLOCK_THREAD_CPUTIME_ID) before its downstream work:
#
# - `topic/K` burns 1.3 ms, then reads topic K from Redis (GET); on a miss it reads it from
#   PostgreSQL by its slug (an index lookup) and stores it in Redis for 30 s (SETEX);
# - `board/K` burns 3.8 ms, then reads board K's first 20 topics by title from PostgreSQL (an
#   index on the board; the `index` fault drops it: the table is scanned and sorted);
# - `reply/K` burns 0.6 ms, then adds a reply to topic K (an UPDATE by its slug, autocommit)
#   and deletes the topic from Redis (DEL).
#
# What each request costs the worker process, measured by the worker itself: the process's CPU
# time (CLOCK_PROCESS_CPUTIME_ID, every thread of the worker) from the end of the previous
# request (its reply written: Puma closes the body after writing it) to the end of this one.
# That span holds this request's accept, read and parse by Puma, the handler, the reply's
# write, and whatever the worker's other threads (Puma's acceptor and its check-in with the
# master every few seconds) burnt meanwhile; the worker serves nothing else then. A worker's
# first request (no previous end) is not counted. One line per request ("TYPE SECONDS") is
# appended to $FORUM_STATS/app-PID.tsv until the fault (the file $FORUM_STATS/fault exists
# after it), then to $FORUM_STATS/after-app-PID.tsv: the first is the truth of the fault-free
# demands. Connections to Redis and PostgreSQL are made by each worker on its first request and
# kept. The ports come from FORUM_REDIS_PORT and FORUM_PG_PORT.
require 'json'
require 'pg'
require 'socket'

BURN_S = { 'topic' => 0.0013, 'board' => 0.0038, 'reply' => 0.0006 }.freeze
REDIS_PORT = ENV['FORUM_REDIS_PORT'].to_i
PG_PORT = ENV['FORUM_PG_PORT'].to_i
STATS = ENV['FORUM_STATS']
unless REDIS_PORT.positive? && PG_PORT.positive? && STATS
  abort 'forum.ru: FORUM_REDIS_PORT, FORUM_PG_PORT and FORUM_STATS must be set'
end

# Helpers in a module: a rackup file's own `def`s would be methods of Puma's builder.
module Clock
  module_function

  def thread_cpu_s = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  def process_cpu_s = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

  def burn(seconds)
    finish = thread_cpu_s + seconds
    x = 0
    x += 1 while thread_cpu_s < finish
    x
  end
end

# A worker's own connections and counters (made after the fork, in the process using them).
class Worker
  attr_reader :pid

  def initialize
    @pid = Process.pid
    @db = PG.connect(host: '127.0.0.1', port: PG_PORT, user: 'postgres', dbname: 'postgres')
    @db.prepare('topic', 'SELECT id, title, body FROM topics WHERE slug = $1')
    @db.prepare('board', 'SELECT id, title FROM topics WHERE board = $1 ORDER BY title LIMIT 20')
    @db.prepare('reply', 'UPDATE topics SET replies = replies + 1 WHERE slug = $1')
    @redis = TCPSocket.new('127.0.0.1', REDIS_PORT)
    @redis.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    @out = {}
    @last_end = nil
  end

  def redis(*args)
    @redis.write("*#{args.size}\r\n" + args.map { |a| "$#{a.to_s.bytesize}\r\n#{a}\r\n" }.join)
    line = @redis.gets("\r\n") or raise 'forum.ru: Redis closed the connection'
    case line[0]
    when '$'
      n = line[1..].to_i
      return nil if n.negative?
      data = @redis.read(n + 2) or raise 'forum.ru: Redis closed the connection'
      data[0, n]
    when '-' then raise "forum.ru: Redis: #{line.strip}"
    else line
    end
  end

  def slug(id) = format('t%06d', id)

  def topic(k)
    Clock.burn(BURN_S['topic'])
    id = k % 2000 + 1
    v = redis('GET', "t:#{id}")
    if v.nil?
      v = JSON.generate(@db.exec_prepared('topic', [slug(id)]).values)
      redis('SETEX', "t:#{id}", 30, v)
    end
    v
  end

  def board(k)
    Clock.burn(BURN_S['board'])
    JSON.generate(@db.exec_prepared('board', [k % 150]).values)
  end

  def reply(k)
    Clock.burn(BURN_S['reply'])
    id = k % 2000 + 1
    @db.exec_prepared('reply', [slug(id)])
    redis('DEL', "t:#{id}")
    JSON.generate([id])
  end

  # Called when Puma has written the reply (it closes the body then).
  def finished(kind)
    now = Clock.process_cpu_s
    record(kind, now - @last_end) if @last_end
    @last_end = now
  end

  def record(kind, used)
    # The same calls before and after the fault: only the file differs.
    which = File.exist?("#{STATS}/fault") ? 'after-app-' : 'app-'
    @out[which] ||= File.open("#{STATS}/#{which}#{@pid}.tsv", 'a').tap { |f| f.sync = true }
    @out[which].write(format("%s %.9f\n", kind, used))
  end
end

# The reply's body: Puma writes it, then calls `close`, where the request's CPU is taken.
class Body
  def initialize(text, &on_close)
    @text = text
    @on_close = on_close
  end

  def each
    yield @text
  end

  def close
    @on_close.call
  end
end

worker = nil
run(lambda do |env|
  _, kind, k = env['PATH_INFO'].split('/')
  return [404, { 'content-length' => '0' }, []] unless BURN_S.key?(kind) && k =~ /\A\d+\z/

  worker = Worker.new if worker.nil? || worker.pid != Process.pid
  body = worker.public_send(kind, k.to_i)
  w = worker
  [200, { 'content-type' => 'application/json', 'content-length' => body.bytesize.to_s },
   Body.new(body) { w.finished(kind) }]
end)
