// The desync suite's echo app for Node's http module as a --cmd worker (on $HEADWAY_SOCKET): each
// request is appended to the file named by $ECHO_LOG (one JSON line) and answered with the same
// JSON. /odd/<case> answers against its own framing, as far as Node lets an app (the cases are in
// tests/desync/corpus.py).
"use strict";

const fs = require("node:fs");
const http = require("node:http");

const ODD = {
  longer: [200, { "Content-Length": "3" }, "hello"],
  shorter: [200, { "Content-Length": "10" }, "hello"],
  "no-content": [204, {}, "hello"],
  "both-lengths": [200, { "Content-Length": "100", "Transfer-Encoding": "chunked" }, "hello"],
};

const server = http.createServer((request, response) => {
  const pieces = [];
  request.on("data", (piece) => pieces.push(piece));
  request.on("end", () => {
    const [path, query = ""] = request.url.split(/\?(.*)/s);
    const headers = [];
    for (let i = 0; i < request.rawHeaders.length; i += 2) {
      headers.push([request.rawHeaders[i].toLowerCase(), request.rawHeaders[i + 1]]);
    }
    const seen = {
      method: request.method,
      path: decodeURIComponentSafe(path),
      query,
      body: Buffer.concat(pieces).toString("base64"),
      headers,
    };
    const line = JSON.stringify(seen);
    fs.appendFileSync(process.env.ECHO_LOG, line + "\n");
    const odd = path.startsWith("/odd/") ? ODD[path.slice(5)] : undefined;
    try {
      if (odd) {
        response.writeHead(odd[0], odd[1]);
        response.end(odd[2]);
      } else {
        response.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(line) });
        response.end(line);
      }
    } catch (error) {
      response.destroy(error);
    }
  });
});

function decodeURIComponentSafe(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

server.listen(process.env.HEADWAY_SOCKET);
