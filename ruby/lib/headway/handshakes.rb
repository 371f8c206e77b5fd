# frozen_string_literal: true

require "socket"
require "stringio"

module Headway
  # WebSocket handshakes and Rack's full hijack. The front never sends a WebSocket over the hop:
  # it opens a unix connection of its own to the worker's socket for each handshake and relays
  # the socket once the worker has answered 101 (crates/server/src/workers/slot/upgrade.rs), so an
  # open socket holds no slot. This listens there: each connection gets a Ruby thread that reads
  # the head, calls the app with `rack.hijack?` true, and either leaves the connection to the app
  # (it called `rack.hijack`, wrote its 101 and serves frames in threads of its own, as
  # ActionCable and faye-websocket do) or writes the app's answer and closes it.
  class Handshakes
    # The largest head taken: the front's own limit is below it.
    MAX_HEAD = 65_536
    HEAD_END = "\r\n\r\n"

    # Listens on `path` (replacing a stale socket file) and serves what comes with `handler`, the
    # app mounted under `root_path` ("" for none).
    def initialize(path, root_path, handler)
      File.unlink(path) if File.socket?(path)
      @server = UNIXServer.new(path)
      @handler = handler
      @root_path = root_path
      @accepting = Thread.new { accept_each }
    end

    # Takes no more handshakes; the sockets already open stay the app's.
    def stop
      @server.close
      @accepting.join
    end

    private

    def accept_each
      loop { Thread.new(@server.accept) { |io| serve(io) } }
    rescue IOError, SystemCallError
      nil # closed by stop
    end

    def serve(io)
      head = read_head(io)
      return io.close unless head

      io.close unless @handler.handshake(Native.handshake_env(head, @root_path), io)
    rescue StandardError => error
      $stderr.puts("headway worker: a WebSocket handshake failed:", error.full_message(highlight: false))
      io.close unless io.closed?
    end

    # The request's head, up to its blank line, or nil if the connection ends before it does or
    # it is too large. A handshake has no body, and the client waits for the 101 before it sends
    # a frame, so nothing after the head is read.
    def read_head(io)
      head = +""
      until head.end_with?(HEAD_END)
        byte = io.read(1)
        return nil if byte.nil? || head.bytesize >= MAX_HEAD

        head << byte
      end
      head
    end
  end
end
