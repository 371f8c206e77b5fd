# frozen_string_literal: true

module Headway
  # `rack.input`: the request body, read from the native exchange only as the app asks for it,
  # and kept as it is read so that `rewind` works (Rack 2 asks it of every input; Rack 3 of none).
  # Everything read stays in memory for the request's life.
  class Input
    # How much one read from the exchange asks for.
    PIECE = 64 * 1024

    def initialize(exchange)
      @exchange = exchange
      @buffer = String.new(encoding: Encoding::BINARY)
      @position = 0
      @ended = false
    end

    # IO#read's contract: all of the rest for nil (an empty String at the end), else up to
    # `length` bytes, nil at the end.
    def read(length = nil, outbuf = nil)
      if length.nil?
        fill_until { false }
      else
        raise ArgumentError, "negative length #{length} given" if length.negative?
        fill_until { @buffer.bytesize - @position >= length }
      end
      data = @buffer.byteslice(@position, length || @buffer.bytesize - @position)
      @position += data.bytesize
      if length&.positive? && data.empty?
        outbuf&.clear
        return nil
      end
      outbuf ? outbuf.replace(data) : data
    end

    # The next line with its "\n", nil at the end.
    def gets
      fill_until { @buffer.index("\n", @position) }
      return nil if @position >= @buffer.bytesize

      ending = @buffer.index("\n", @position)
      line = @buffer.byteslice(@position, (ending ? ending + 1 : @buffer.bytesize) - @position)
      @position += line.bytesize
      line
    end

    def each
      return enum_for(:each) unless block_given?

      while (line = gets)
        yield line
      end
    end

    def rewind
      @position = 0
    end

    def close; end

    private

    # Reads pieces from the exchange until the block holds or the body ends.
    def fill_until
      until @ended || yield
        piece = @exchange.read(PIECE)
        if piece
          @buffer << piece
        else
          @ended = true
        end
      end
    end
  end
end
