# What Rack makes of a request, for headway's tests of forwarding fields: Rack::Request reads
# X-Forwarded-Host, -Port, -Proto, -Scheme, -Ssl and -For from the CGI environ, where Puma puts
# `X_Forwarded_Host` under the same key as `X-Forwarded-Host`. Run by Puma as a --cmd worker.
require "json"
require "rack"

run lambda { |env|
  request = Rack::Request.new(env)
  seen = {
    "host" => request.host, "port" => request.port, "scheme" => request.scheme, "ssl" => request.ssl?,
    "ip" => request.ip, "path" => env["PATH_INFO"], "query" => env["QUERY_STRING"],
    "headers" => env.select { |key, _| key.start_with?("HTTP_") },
  }
  [200, { "Content-Type" => "application/json" }, [JSON.generate(seen)]]
}
