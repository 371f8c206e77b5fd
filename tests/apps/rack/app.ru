# The Rack worker's test app (tests/rack/), run under Debian's Rack 2.2 and trixie's Rack 3
# (scripts/rack3): every route under Rack::Lint (with Rack::Head, which empties HEAD responses as
# Rack asks), except what Rack 2.2's Lint cannot pass: /native, which proves the worker's core
# sends a `to_path` body itself (that Lint hides to_path behind its own `each`), and /callable, a
# Rack 3 streaming body (that Lint wants `each`), both under Rack 3's Lint; and /not-an-array
# (whose to_ary either Lint would call as an Array's).
require "digest"
require "json"
require "tmpdir"

FILE = File.join(Dir.tmpdir, "headway-rack-test-#{Process.pid}.bin")
File.binwrite(FILE, (0..255).map(&:chr).join * 1024) # 256 KiB, every byte value
at_exit { File.delete(FILE) if File.exist?(FILE) }
# Where and how often this file is loaded, for the --preload tests.
File.write(ENV["RACK_LOADED_LOG"], "#{Process.pid}\n", mode: "a") if ENV["RACK_LOADED_LOG"]
RACK3 = Rack.release >= "3"
GATE = Queue.new # /stream's second piece waits for /release
CLOSED = Queue.new # what the worker closed, as bodies' close calls tell
AFTER = Queue.new # what the rack.after_reply callbacks saw
HELD = Queue.new # the requests waiting for /release

# A body sent piece by piece: its second piece comes only once /release was asked.
class Gated
  def each
    yield "first\n"
    GATE.pop
    yield "second\n"
  end

  def close
    CLOSED << "stream"
  end
end

# A body that fails after its first piece.
class Failing
  def each
    yield "partial"
    raise "the body broke mid-stream"
  end

  def close
    CLOSED << "failing"
  end
end

# A file body: to_path for the server, each for whoever cannot use it.
class FileBody
  def initialize(refuse_each: false)
    @refuse_each = refuse_each
  end

  def to_path
    FILE
  end

  def each(&block)
    raise "each called: the core should have sent to_path itself" if @refuse_each

    File.open(FILE, "rb") { |file| file.each(nil, 65_536, &block) }
  end

  def close
    CLOSED << "file"
  end
end

def json(value)
  [200, { "content-type" => "application/json" }, [JSON.generate(value)]]
end

def drain(queue)
  Array.new(queue.size) { queue.pop }
end

ECHO_KEYS = %w[REQUEST_METHOD SCRIPT_NAME PATH_INFO QUERY_STRING SERVER_NAME SERVER_PORT SERVER_PROTOCOL
               REMOTE_ADDR CONTENT_TYPE CONTENT_LENGTH HTTP_X_CUSTOM REQUEST_URI rack.url_scheme
               rack.multithread rack.multiprocess rack.run_once rack.hijack?].freeze

APP = lambda do |env|
  case env["PATH_INFO"]
  when "/echo"
    input = env["rack.input"]
    body = input.read
    input.rewind
    json(ECHO_KEYS.to_h { |key| [key, env[key]] }.merge("body" => body, "again" => input.read,
                                                        "release" => Rack.release))
  when "/digest" # the body's SHA-256, read twice piece by piece; the answer waits for /release
    input = env["rack.input"]
    digests = Array.new(2) do
      input.rewind
      digest = Digest::SHA256.new
      buffer = String.new
      digest << buffer while input.read(65_536, buffer)
      digest.hexdigest
    end
    HELD << "digest"
    GATE.pop
    json(digests)
  when "/held" then json(drain(HELD))
  when "/lines"
    lines = []
    env["rack.input"].each { |line| lines << line }
    json(lines)
  when "/stream" then [200, { "content-type" => "text/plain" }, Gated.new]
  when "/release"
    GATE << true
    json("released")
  when "/file" then [200, { "content-type" => "application/octet-stream" }, FileBody.new]
  when "/raise" then raise "boom from the app"
  when "/midstream" then [200, { "content-type" => "text/plain" }, Failing.new]
  when "/closed" then json(drain(CLOSED))
  when "/after"
    env["rack.after_reply"] << -> { AFTER << "after #{env['QUERY_STRING']}" }
    json("registered")
  when "/finished"
    env["rack.response_finished"] << ->(_env, status, _headers, error) { AFTER << "finished #{status} #{error.inspect}" }
    json("registered")
  when "/after-seen" then json(drain(AFTER))
  when "/sleep" # /sleep?MS: a request that takes MS milliseconds, answered with the worker's pid
    sleep(env["QUERY_STRING"].to_i / 1000.0)
    json(Process.pid)
  when "/cookies"
    # A field of several values: Rack 3 gives them as an Array, Rack 2 joined by newlines.
    [200, { "content-type" => "text/plain", "set-cookie" => RACK3 ? %w[a=1 b=2] : "a=1\nb=2" }, ["two cookies"]]
  else [404, { "content-type" => "text/plain" }, ["not found"]]
  end
end

map "/native" do
  use Rack::Lint if RACK3
  run(lambda do |env|
    status = env["QUERY_STRING"].empty? ? 200 : env["QUERY_STRING"].to_i # /native?204: a bodiless status
    headers = status == 204 ? {} : { "content-type" => "application/octet-stream" }
    [status, headers, FileBody.new(refuse_each: true)]
  end)
end

# A body that responds to to_ary with nil, as Rails' streamed bodies do (Ruby's conversion
# protocol: nil is "not an Array"); it must go by each.
class NotAnArray
  def to_ary; end

  def each
    yield "by each, "
    yield "not to_ary"
  end
end

map "/not-an-array" do
  run(->(_env) { [200, { "content-type" => "text/plain" }, NotAnArray.new] })
end

map "/callable" do
  use Rack::Lint if RACK3
  run(lambda do |_env|
    body = lambda do |stream|
      stream.write("streamed ")
      stream << "by call"
      stream.close
    end
    [200, { "content-type" => "text/plain" }, body]
  end)
end

# Writes "first\n", then "second\n" once /release was asked, then closes `stream`: from a thread of
# its own, as an app that took the stream keeps it past the call that gave it.
GATED_WRITER = lambda do |stream|
  Thread.new do
    stream.write("first\n")
    GATE.pop
    stream << "second\n"
  ensure
    stream.close
  end
end

# The body of a hijacked response, which the server must close but not send.
class Ignored
  def each
    yield "the body of a hijacked response"
  end

  def close
    CLOSED << "ignored"
  end
end

# Rack 2's response (partial) hijack: the head as the app gave it, then the stream is the app's.
# Not under Lint, which allows the header only where full hijack is offered too.
map "/hijack" do
  run(lambda do |_env|
    [200, { "content-type" => "text/plain", "rack.hijack" => GATED_WRITER }, Ignored.new]
  end)
end

# Rack 3's streaming body, which hands its stream on and returns before it is done.
map "/handoff" do
  use Rack::Lint if RACK3
  run(->(_env) { [200, { "content-type" => "text/plain" }, GATED_WRITER] })
end

# Where Rack::URLMap mounted this app, as it sees it: with --root-path under that prefix too.
MOUNTED = ->(env) { json([env["SCRIPT_NAME"], env["PATH_INFO"]]) }

map "/mounted" do
  use Rack::Lint
  run MOUNTED
end

map "/" do
  use Rack::Lint
  # Rack 3 asks no server for a rewindable input: an app that rewinds says so.
  use Rack::RewindableInput::Middleware if RACK3
  use Rack::Head
  run APP
end
