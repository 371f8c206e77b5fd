# A WebSocket echo app for headway's tests, run by Puma as a --cmd worker. Rack's full hijack
# (env["rack.hijack"]) takes the connection after the handshake and a thread of its own echoes
# frames on it, so Puma's thread is free at once: the way ActionCable and faye-websocket do it.
# Nothing beyond Rack and Ruby's standard library: the handshake and frames are written out here
# (RFC 6455), whole unfragmented messages only. Plain HTTP requests get "hello".
require "base64"
require "digest/sha1"

module WebSocketEcho
  GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

  module_function

  # [opcode, payload] of the next frame from the client, unmasked; nil at the end.
  def read_frame(io)
    head = io.read(2)
    return nil if head.nil? || head.bytesize < 2
    first, second = head.bytes
    length = second & 0x7f
    length = io.read(2).unpack1("n") if length == 126
    length = io.read(8).unpack1("Q>") if length == 127
    mask = second & 0x80 != 0 ? io.read(4).bytes : [0, 0, 0, 0]
    payload = (io.read(length) || "").bytes.each_with_index.map { |byte, i| byte ^ mask[i % 4] }
    [first & 0x0f, payload.pack("C*")]
  end

  def write_frame(io, opcode, payload)
    length = payload.bytesize
    head = [0x80 | opcode].pack("C")
    head << if length < 126 then [length].pack("C")
            elsif length < 65_536 then [126, length].pack("Cn")
            else [127, length].pack("CQ>")
            end
    io.write(head + payload)
  end

  def echo(io)
    while (frame = read_frame(io))
      opcode, payload = frame
      case opcode
      when 0x1, 0x2 then write_frame(io, opcode, payload)
      when 0x9 then write_frame(io, 0xa, payload)
      when 0x8
        write_frame(io, 0x8, payload)
        break
      end
    end
  ensure
    io.close
  end

  def call(env)
    return [200, { "Content-Type" => "text/plain" }, ["hello"]] unless env["HTTP_UPGRADE"]&.casecmp?("websocket")
    accept = Base64.strict_encode64(Digest::SHA1.digest(env["HTTP_SEC_WEBSOCKET_KEY"] + GUID))
    io = env["rack.hijack"].call
    io.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
             "Sec-WebSocket-Accept: #{accept}\r\n\r\n")
    Thread.new { echo(io) }
    [200, {}, []]
  end
end

run WebSocketEcho
