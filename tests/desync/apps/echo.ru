# The desync suite's echo app for Puma as a --cmd worker: each request is appended to the file named
# by $ECHO_LOG (one JSON line) and answered with the same JSON. /odd/<case> answers against its own
# framing, as far as Rack lets an app (the cases are in tests/desync/corpus.py).
require "base64"
require "json"
require "uri"

ODD = {
  "longer" => [200, { "Content-Length" => "3" }, ["hello"]],
  "shorter" => [200, { "Content-Length" => "10" }, ["hello"]],
  "no-content" => [204, {}, ["hello"]],
  "both-lengths" => [200, { "Content-Length" => "100", "Transfer-Encoding" => "chunked" }, ["hello"]],
}.freeze

run lambda { |env|
  body = env["rack.input"].read
  seen = {
    "method" => env["REQUEST_METHOD"],
    "path" => (URI.decode_www_form_component(env["PATH_INFO"].gsub("+", "%2B")) rescue env["PATH_INFO"]),
    "query" => env["QUERY_STRING"],
    "body" => Base64.strict_encode64(body),
    "headers" => env.select { |key, _| key.start_with?("HTTP_") }.map { |key, value| [key[5..].downcase.tr("_", "-"), value] },
  }
  line = JSON.generate(seen)
  File.open(ENV.fetch("ECHO_LOG"), "a") { |log| log.write(line + "\n") }
  odd = env["PATH_INFO"].start_with?("/odd/") && ODD[env["PATH_INFO"].delete_prefix("/odd/")]
  next odd if odd
  [200, { "Content-Type" => "application/json", "Content-Length" => line.bytesize.to_s }, [line]]
}
