# Echoes what a subscriber sends, by way of a broadcast through the cable's adapter.
class EchoChannel < ApplicationCable::Channel
  def subscribed
    stream_from "echo"
  end

  def receive(data)
    ActionCable.server.broadcast("echo", data)
  end
end
