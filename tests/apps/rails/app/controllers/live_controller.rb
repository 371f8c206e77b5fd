# An ActionController::Live stream: the second piece is written only once /release was asked, so
# a client can tell that the first went out on its own.
class LiveController < ActionController::Base
  include ActionController::Live

  GATE = Queue.new

  def stream
    response.headers["Content-Type"] = "text/plain"
    # Rack 2.2's ETag middleware (in Rails' default stack) reads a body whole to digest it unless
    # the response has a Last-Modified: what Rails 6.1 apps on Rack 2.2 set to stream.
    response.headers["Last-Modified"] = Time.now.httpdate
    response.stream.write("first\n")
    GATE.pop
    response.stream.write("second\n")
  ensure
    response.stream.close
  end

  def release
    GATE << :go
    render plain: "released"
  end
end
