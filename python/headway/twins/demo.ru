# The headway demo app as a Rack 2 app, for Puma: the same routes, bodies and X-Worker-Pid
# header as headway/demo.py, so the lab can compare servers on equal work.
#
#   puma -t 5:5 -b unix:///path/to/sock demo.ru
#   puma -t 5:5 -b tcp://127.0.0.1:PORT demo.ru
#
# /fortunes needs the sqlite3 gem (Debian: ruby-sqlite3); without it, it answers 501 and every
# other route works.
require "erb"
require "json"
require "rack/utils"
begin
  require "sqlite3"
rescue LoadError
  nil
end

module HeadwayDemo
  MAX_MS = 600_000
  MAX_BYTES = 10 * 1024 * 1024
  INDEX = File.read(File.expand_path("../demo_index.txt", __dir__))
  FORTUNES = File.read(File.expand_path("../demo_fortunes.txt", __dir__), encoding: "UTF-8").lines(chomp: true)
  TEXT = "text/plain; charset=utf-8"
  HTML = "text/html; charset=utf-8"

  # What a route asks for: burn cpu_ms of CPU, wait wait_ms, then answer code and body.
  Reply = Struct.new(:code, :body, :cpu_ms, :wait_ms, :content_type) do
    def initialize(code, body, cpu_ms = 0, wait_ms = 0, content_type = TEXT)
      super
    end
  end

  # The fortunes database: in memory, made at load, one connection for the threads of this
  # process (a query runs whole under the GVL).
  DATABASE = defined?(SQLite3) && SQLite3::Database.new(":memory:").tap do |db|
    db.execute("CREATE TABLE fortune (id INTEGER PRIMARY KEY, message TEXT NOT NULL)")
    FORTUNES.each.with_index(1) { |message, id| db.execute("INSERT INTO fortune VALUES (?, ?)", [id, message]) }
  end

  # What Jinja (MarkupSafe) escapes, spelt as it spells it, as in headway/demo.py.
  HTML_ESCAPES = { "&" => "&amp;", "<" => "&lt;", ">" => "&gt;", '"' => "&#34;", "'" => "&#39;" }.freeze

  class BadParameter < StandardError; end

  module_function

  def ok(body, cpu_ms = 0, wait_ms = 0)
    Reply.new(200, body, cpu_ms, wait_ms)
  end

  def escape_html(text)
    text.gsub(/[&<>"']/, HTML_ESCAPES)
  end

  ERB.new(
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>" \
    "<table><tr><th>id</th><th>message</th></tr>" \
    "<% fortunes.each do |id, message| %><tr><td><%= id %></td><td><%= escape_html(message) %></td></tr><% end %>" \
    "</table></body></html>"
  ).def_method(self, "fortunes_page(fortunes)")
  module_function :fortunes_page

  def fortunes
    return Reply.new(501, "/fortunes needs the sqlite3 gem (apt-get install ruby-sqlite3)\n") unless DATABASE

    rows = DATABASE.execute("SELECT id, message FROM fortune")
    rows << [0, "Additional fortune added at request time."]
    Reply.new(200, fortunes_page(rows.sort_by { |_, message| message }), 0, 0, HTML)
  end

  def integer(name, text, maximum)
    unless text.is_a?(String) && text.match?(/\A[0-9]{1,9}\z/) && text.to_i <= maximum
      raise BadParameter, "bad #{name}: expected an integer from 0 to #{maximum}"
    end
    text.to_i
  end

  def parameter(params, name, default, maximum)
    return default unless params.key?(name)
    value = params[name]
    integer(name, value.is_a?(Array) ? value.first : value.to_s, maximum)
  end

  def slept(ms)
    ok("slept #{ms} ms\n", 0, ms)
  end

  def fake_work(params)
    cpu_ms = parameter(params, "cpu_ms", 50, MAX_MS)
    iowait_ms = parameter(params, "iowait_ms", 250, MAX_MS)
    size = parameter(params, "bytes", 20_000, MAX_BYTES)
    ok("x" * size, cpu_ms, iowait_ms)
  end

  def random_wait(params)
    slept(rand(0..parameter(params, "max_ms", 1000, MAX_MS)))
  end

  def route(path, query)
    params = Rack::Utils.parse_query(query)
    case path
    when "/" then ok(INDEX)
    when "/hello" then ok("Hello, world!\n")
    when "/fixed" then ok("OK\n", 0, 200)
    when "/fake_work" then fake_work(params)
    when "/random" then random_wait(params)
    when "/json" then Reply.new(200, "#{JSON.generate({ "message" => "Hello, World!" })}\n", 0, 0, "application/json")
    when "/fortunes" then fortunes
    when %r{\A/sleep/} then slept(integer("ms", path.delete_prefix("/sleep/"), MAX_MS))
    else Reply.new(404, "Not Found\n", 0, 0)
    end
  rescue BadParameter => e
    Reply.new(400, "#{e.message}\n", 0, 0)
  end

  # Spin until this thread has used cpu_ms of CPU time (longer on the wall clock under
  # contention, as real CPU work would be).
  def burn_cpu(ms)
    clock = Process::CLOCK_THREAD_CPUTIME_ID
    finish = Process.clock_gettime(clock) + ms / 1000.0
    nil while Process.clock_gettime(clock) < finish
  end

  def call(env)
    reply = route(Rack::Utils.unescape_path(env["PATH_INFO"]), env["QUERY_STRING"].to_s)
    burn_cpu(reply.cpu_ms) if reply.cpu_ms.positive?
    sleep(reply.wait_ms / 1000.0) if reply.wait_ms.positive?
    body = reply.body.b
    [reply.code,
     { "Content-Type" => reply.content_type,
       "Content-Length" => body.bytesize.to_s,
       "X-Worker-Pid" => Process.pid.to_s },
     [body]]
  end
end

run HeadwayDemo
