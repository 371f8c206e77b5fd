# frozen_string_literal: true

require "tempfile"

module Headway
  # `rack.input`: the request body, read from the native exchange only as the app asks for it,
  # and kept as it is read so that `rewind` works (Rack 2 asks it of every input; Rack 3 of none).
  # The first SPILL bytes are kept in memory; a body that grows past that moves to an unlinked
  # temporary file, so that a large upload costs the worker no memory.
  class Input
    # How much one read from the exchange asks for.
    PIECE = 64 * 1024
    # Where a body leaves memory for a file: Puma's own limit (its MAX_BODY, 112 KiB), so that a
    # Rack app keeps in memory what it would under Puma; a larger body pays a file's system calls,
    # which its own transfer already outweighs.
    SPILL = 112 * 1024

    def initialize(exchange)
      @exchange = exchange
      @buffer = String.new(encoding: Encoding::BINARY)
      @file = nil # the body so far once it outgrew SPILL
      @stored = 0
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

        fill_until { @stored - @position >= length }
      end
      count = [length || @stored, @stored - @position].min
      if length&.positive? && count.zero?
        outbuf&.clear
        return nil
      end
      data = slice(@position, count, outbuf)
      @position += count
      data
    end

    # The next line with its "\n", nil at the end.
    def gets
      line = String.new(encoding: Encoding::BINARY)
      loop do
        fill_until { @stored > @position }
        break if @position >= @stored

        piece = slice(@position, [@stored - @position, PIECE].min)
        ending = piece.index("\n")
        piece = piece.byteslice(0, ending + 1) if ending
        line << piece
        @position += piece.bytesize
        return line if ending
      end
      line.empty? ? nil : line
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

    # Rack says an app never closes its input: the handler releases it once the request is over.
    def close; end

    # Lets go of the file the body spilled to, if any.
    def release
      @file&.close
    end

    private

    # `count` bytes of what is kept, from `offset`; into `outbuf` if given.
    def slice(offset, count, outbuf = nil)
      return outbuf ? outbuf.clear : String.new(encoding: Encoding::BINARY) if count.zero?

      if @file
        # Straight into the app's buffer when it gave one: a large body read piece by piece
        # leaves no piece behind for the collector.
        return outbuf ? @file.pread(count, offset, outbuf) : @file.pread(count, offset)
      end
      data = @buffer.byteslice(offset, count)
      outbuf ? outbuf.replace(data) : data
    end

    # Reads pieces from the exchange until the block holds or the body ends.
    def fill_until
      until @ended || yield
        piece = @exchange.read(PIECE)
        if piece
          keep(piece)
        else
          @ended = true
        end
      end
    end

    def keep(piece)
      @stored += piece.bytesize
      if @file
        @file.write(piece)
        piece.clear # its memory back now, not at the next collection
      elsif @stored > SPILL
        @file = spill
        @file.write(@buffer, piece)
        @buffer = nil
      else
        @buffer << piece
      end
    end

    # A temporary file no other process can find, removed by the system once closed.
    def spill
      file = Tempfile.create("headway-input", binmode: true)
      File.unlink(file.path)
      file.sync = true # written through at once: reads go by pread, past Ruby's buffer
      file
    end
  end
end
