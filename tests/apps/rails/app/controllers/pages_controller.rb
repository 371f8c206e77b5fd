# Pages, a CSRF-protected form, the session and cookies, who the client is, a slow request.
class PagesController < ApplicationController
  def show
    @greeting = "Hello from Rails #{Rails.version}"
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
