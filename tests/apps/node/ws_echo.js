// A WebSocket echo server for headway's tests, run as a --cmd worker: Node's http module with
// the `ws` package (pinned in package.json, installed by `npm ci`), on the unix socket named by
// HEADWAY_SOCKET. Every message comes back as it was sent; plain HTTP requests get "hello".
"use strict";

const http = require("node:http");
const { WebSocketServer } = require("ws");

const server = http.createServer((request, response) => {
  response.setHeader("Content-Type", "text/plain");
  response.end("hello");
});
const sockets = new WebSocketServer({ server });
sockets.on("connection", (socket) => {
  socket.on("message", (data, isBinary) => socket.send(data, { binary: isBinary }));
});
server.listen(process.env.HEADWAY_SOCKET);
