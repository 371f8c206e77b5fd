# The smallest Rack app worth measuring a server by: one route-less answer of 13 bytes, the twin
# of hello.py. bench/versus.sh's `rack` part serves it on headway's Rack worker, Puma in cluster
# mode and Puma inside headway alike, so that what is measured is the server's cost a request
# and not an app's router (the demo's /hello goes through demo.ru's routing).
#
# Lower-case header names and a fresh headers hash each time: valid under Rack 2 and Rack 3.

BODY = ["Hello, world!"].freeze

run(->(_env) { [200, { "content-type" => "text/plain", "content-length" => "13" }, BODY] })
