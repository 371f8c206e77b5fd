# Pages, a CSRF-protected form, the session and cookies, who the client is, a slow request.
class PagesController < ApplicationController
  Item = Struct.new(:id, :name, :price)
  # The list page's data, as a small query would give it; one name needs escaping.
  ITEMS = [
    "Coffee", "Croissant", "Orange juice", "Bagel", "Muffin", "Scone", "Tea & biscuits <for two>", "Porridge",
    "Toast", "Granola"
  ].each_with_index.map { |name, index| Item.new(index + 1, name, 2 + (index * 0.5)) }.freeze

  def show
    @greeting = "Hello from Rails #{Rails.version}"
  end

  # A template with a little data: a table of ten items (bench/versus.sh's Rails page).
  def items
    @items = ITEMS
  end

  def form; end

  def submit
    render plain: "accepted #{params[:name]}"
  end

  # Counts in the session (the cookie store) and in a cookie of its own.
  def counter
    session[:count] = session.fetch(:count, 0) + 1
    cookies[:visits] = (cookies[:visits].to_i + 1).to_s
    render json: { session: session[:count], cookie: cookies[:visits].to_i }
  end

  def client
    render json: { remote_ip: request.remote_ip, ssl: request.ssl?, remote_addr: request.remote_addr }
  end

  def slow
    sleep(Integer(params.fetch(:ms, "1000")) / 1000.0)
    render plain: "slept"
  end

  def pid
    render plain: Process.pid.to_s
  end
end
