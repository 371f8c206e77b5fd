# frozen_string_literal: true

require "stringio"
require "headway/input"

module Headway
  # One request of the Rack worker, from the env the native core made to the response handed
  # back through the exchange (crates/rack/src/exchange.rs), or a WebSocket handshake on a
  # connection of its own (handshakes.rb), which the app may hijack: completes the env, calls the app,
  # walks the response the Rack way (Rack 2 and 3), always calls the body's `close`, then runs
  # `rack.after_reply` and `rack.response_finished` callbacks once the response is out.
  #
  # An exception out of the app is a 500 (or, after the head went, a response cut short) with its
  # backtrace on stderr; the slot serves on.
  class Handler
    def initialize(app, threads:, workers:)
      @app = app
      @base = {
        "rack.version" => [1, 3],
        "rack.errors" => $stderr,
        "rack.multithread" => threads > 1,
        "rack.multiprocess" => workers > 1,
        "rack.run_once" => false,
        "rack.hijack?" => false,
        "SERVER_SOFTWARE" => "headway"
      }.freeze
    end

    # Called by the native core with the env's CGI keys and the request's exchange.
    def call(env, exchange)
      env.merge!(@base)
      input = env["rack.input"] = Input.new(exchange)
      after_reply = env["rack.after_reply"] = []
      finished = env["rack.response_finished"] = []
      begin
        status, headers, body = @app.call(env)
        respond(exchange, input, status, headers, body)
      rescue Exception => error # rubocop:disable Lint/RescueException -- a slot survives every exception
        report(error, exchange)
      ensure
        close(body)
      end
      after_reply.each { |callback| guarded("rack.after_reply") { callback.call } }
      finished.each { |callback| guarded("rack.response_finished") { callback.call(env, status, headers, error) } }
      input.release
      nil
    end

    # Called by Handshakes with the env's CGI keys of a WebSocket handshake and its connection
    # `io`: offers the app Rack's full hijack; true if it took the connection, else its answer is
    # written to `io` (the front relays it as an ordinary response).
    def handshake(env, io)
      hijacked = false
      env.merge!(@base)
      env["rack.input"] = StringIO.new("".b)
      env["rack.hijack?"] = true
      env["rack.hijack"] = lambda do
        hijacked = true
        env["rack.hijack_io"] = io
      end
      status, headers, body = @app.call(env)
      write_answer(io, Integer(status), fields(headers), body) unless hijacked
      hijacked
    ensure
      close(body)
    end

    private

    # A whole response on a handshake's connection, which closes after it.
    def write_answer(io, status, fields, body)
      text = +""
      body.each { |chunk| text << chunk.to_str }
      reason = Rack::Utils::HTTP_STATUS_CODES.fetch(status, "Unknown")
      head = fields.reject { |name, _| %w[content-length connection].include?(name.downcase) }
                   .map { |name, value| "#{name}: #{value}\r\n" }.join
      io.write("HTTP/1.1 #{status} #{reason}\r\n#{head}content-length: #{text.bytesize}\r\nconnection: close\r\n\r\n", text)
    end

    def respond(exchange, input, status, headers, body)
      fields = fields(headers)
      if headers.is_a?(Hash) && (hijack = headers["rack.hijack"])
        stream(exchange, input, status, fields) { |stream| hijack.call(stream) }
      elsif body.respond_to?(:to_path) && File.file?(path = body.to_path.to_s)
        exchange.send_file(Integer(status), fields, path)
      elsif (array = array_of(body))
        exchange.respond(Integer(status), fields, array.map(&:to_str))
      elsif body.respond_to?(:each)
        exchange.start(Integer(status), fields)
        body.each { |chunk| exchange.write(chunk.to_str) }
        exchange.finish
      elsif body.respond_to?(:call)
        stream(exchange, input, status, fields) { |stream| body.call(stream) }
      else
        raise TypeError, "a Rack body must respond to each or call, not #{body.class}"
      end
    end

    # A response whose body the app writes to a Stream (Rack 3's streaming body, Rack 2's
    # `rack.hijack` response header): the head, then whatever the app writes, from this thread
    # or another it handed the stream to, until it closes the stream. The slot is the response's
    # until then, as for a body sent piece by piece.
    def stream(exchange, input, status, fields)
      exchange.start(Integer(status), fields)
      stream = Stream.new(exchange, input)
      yield stream
      stream.wait_closed
    end

    # The body as an Array, if it is one: a `to_ary` that gives nil says it is not (Ruby's
    # conversion protocol; Rails' streamed bodies answer so), and then it goes by `each`.
    def array_of(body)
      body.to_ary if body.respond_to?(:to_ary)
    end

    # The header pairs to send: Rack 3's Array values and Rack 2's newline-joined ones each
    # become one field a value; `rack.` keys are for the server, not the client.
    def fields(headers)
      pairs = []
      headers.each do |name, value|
        name = name.to_str
        next if name.start_with?("rack.")

        values = value.is_a?(Array) ? value : value.to_str.split("\n")
        values.each { |item| pairs << [name, item.to_str] }
      end
      pairs
    end

    def report(error, exchange)
      $stderr.puts(error.full_message(highlight: false))
      started = exchange.started?
      $stderr.puts("headway worker: the app failed after the response started; cutting it short") if started
      exchange.fail
    end

    def close(body)
      guarded("the body's close") { body.close } if body.respond_to?(:close)
    end

    def guarded(what)
      yield
    rescue StandardError => error
      $stderr.puts("headway worker: #{what} raised:", error.full_message(highlight: false))
    end

    # What a Rack 3 streaming body (`call`-able) or Rack 2's response hijack is given: its pieces
    # go out as they come, `read` reads the request body, and closing its write side ends the
    # response. The app may write from any one thread at a time.
    class Stream
      def initialize(exchange, input)
        @exchange = exchange
        @input = input
        @read_closed = false
        @write_closed = false
        @lock = Mutex.new
        @ended = Queue.new
      end

      def read(length = nil, outbuf = nil)
        raise IOError, "not opened for reading" if @read_closed

        @input.read(length, outbuf)
      end

      # IO's, for Rack 2's hijack: the input is read as it comes, so this may wait for it.
      def read_nonblock(length, outbuf = nil, exception: true)
        data = read(length, outbuf)
        raise EOFError, "end of file reached" if data.nil? && exception

        data
      end

      def write(data)
        raise IOError, "not opened for writing" if @write_closed

        @exchange.write(data.to_str)
        data.to_str.bytesize
      end

      def write_nonblock(data, exception: true) # rubocop:disable Lint/UnusedMethodArgument -- IO's signature
        write(data)
      end

      def <<(data)
        write(data)
        self
      end

      def flush
        self
      end

      def close_read
        @read_closed = true
        nil
      end

      # Ends the response; the first call only.
      def close_write
        return if @lock.synchronize { @write_closed.tap { @write_closed = true } }

        begin
          @exchange.finish
        ensure
          @ended << true
        end
      end

      def close
        close_read
        close_write
      end

      def closed?
        @read_closed && @write_closed
      end

      # Returns once the response is ended (by the app's close, from whichever thread).
      def wait_closed
        @ended.pop
        nil
      end
    end
  end
end
