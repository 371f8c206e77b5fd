// The headway demo app for Node (v20, no packages): the same routes, bodies and
// X-Worker-Pid header as headway/demo.py, so the lab can compare servers on equal work.
//
// Listens on the unix socket named by HEADWAY_SOCKET when it is set (as a headway worker),
// else on 127.0.0.1:PORT (default 8000); with WEB_CONCURRENCY=N > 1 on TCP, the cluster
// module runs N processes sharing the port.
//
// /fortunes needs sql.js (SQLite compiled to WebAssembly: Node 20 has no SQLite of its own),
// from a node_modules next to this file or npm's global folder (npm install -g sql.js);
// without it, it answers 501 and every other route works.
"use strict";

const cluster = require("node:cluster");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const MAX_MS = 600000;
const MAX_BYTES = 10 * 1024 * 1024;
const INDEX = fs.readFileSync(path.join(__dirname, "..", "demo_index.txt"), "utf8");
const FORTUNES = fs.readFileSync(path.join(__dirname, "..", "demo_fortunes.txt"), "utf8").split("\n").filter(Boolean);
// What Jinja (MarkupSafe) escapes, spelt as it spells it, as in headway/demo.py.
const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };
const TEXT = "text/plain; charset=utf-8";

// The prepared query of the fortunes database, once it is made (see openFortunes).
let selectFortunes = null;

class BadParameter extends Error {}

function ok(body, cpuMs = 0, waitMs = 0, contentType = TEXT) {
  return { code: 200, body, cpuMs, waitMs, contentType };
}

function integer(name, text, maximum) {
  if (!/^[0-9]{1,9}$/.test(text) || Number(text) > maximum) {
    throw new BadParameter(`bad ${name}: expected an integer from 0 to ${maximum}`);
  }
  return Number(text);
}

function parameter(params, name, fallback, maximum) {
  const value = params.get(name);
  return value === null ? fallback : integer(name, value, maximum);
}

function slept(ms) {
  return ok(`slept ${ms} ms\n`, 0, ms);
}

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

function fortunesPage(fortunes) {
  const rows = fortunes.map(([id, message]) => `<tr><td>${id}</td><td>${escapeHtml(message)}</td></tr>`).join("");
  return (
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>" +
    `<table><tr><th>id</th><th>message</th></tr>${rows}</table></body></html>`
  );
}

function fortunes() {
  if (!selectFortunes) {
    return { code: 501, body: "/fortunes needs sql.js (npm install -g sql.js)\n", cpuMs: 0, waitMs: 0, contentType: TEXT };
  }
  const rows = [];
  while (selectFortunes.step()) rows.push(selectFortunes.get());
  selectFortunes.reset();
  rows.push([0, "Additional fortune added at request time."]);
  rows.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return ok(fortunesPage(rows), 0, 0, "text/html; charset=utf-8");
}

const ROUTES = {
  "/": () => ok(INDEX),
  "/hello": () => ok("Hello, world!\n"),
  "/fixed": () => ok("OK\n", 0, 200),
  "/fake_work": (params) => {
    const cpuMs = parameter(params, "cpu_ms", 50, MAX_MS);
    const iowaitMs = parameter(params, "iowait_ms", 250, MAX_MS);
    const size = parameter(params, "bytes", 20000, MAX_BYTES);
    return ok("x".repeat(size), cpuMs, iowaitMs);
  },
  "/random": (params) => {
    const maxMs = parameter(params, "max_ms", 1000, MAX_MS);
    return slept(Math.floor(Math.random() * (maxMs + 1)));
  },
  "/json": () => ok(`${JSON.stringify({ message: "Hello, World!" })}\n`, 0, 0, "application/json"),
  "/fortunes": fortunes,
};

function route(path, query) {
  try {
    if (Object.hasOwn(ROUTES, path)) {
      return ROUTES[path](new URLSearchParams(query));
    }
    if (path.startsWith("/sleep/")) {
      return slept(integer("ms", path.slice(7), MAX_MS));
    }
  } catch (error) {
    if (!(error instanceof BadParameter)) throw error;
    return { code: 400, body: `${error.message}\n`, cpuMs: 0, waitMs: 0, contentType: TEXT };
  }
  return { code: 404, body: "Not Found\n", cpuMs: 0, waitMs: 0, contentType: TEXT };
}

// process.cpuUsage counts the whole process; the event loop is its only busy thread.
function burnCpu(ms) {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) return;
  }
}

function decodePath(rawPath) {
  try {
    return decodeURIComponent(rawPath);
  } catch {
    return rawPath; // a malformed %-escape cannot match a route: 404
  }
}

function handle(req, res) {
  const queryAt = req.url.indexOf("?");
  const rawPath = queryAt < 0 ? req.url : req.url.slice(0, queryAt);
  const reply = route(decodePath(rawPath), queryAt < 0 ? "" : req.url.slice(queryAt + 1));
  if (reply.cpuMs) burnCpu(reply.cpuMs);
  const respond = () => {
    const body = Buffer.from(reply.body);
    res.writeHead(reply.code, {
      "Content-Type": reply.contentType,
      "Content-Length": body.length,
      "X-Worker-Pid": String(process.pid),
    });
    res.end(body);
  };
  if (reply.waitMs) setTimeout(respond, reply.waitMs);
  else respond();
}

// The fortunes database: in memory, made before the server listens, one per process.
async function openFortunes() {
  let initSqlJs;
  try {
    const npmGlobal = path.join(path.dirname(process.execPath), "..", "lib");
    initSqlJs = require(require.resolve("sql.js", { paths: [__dirname, npmGlobal] }));
  } catch {
    return; // /fortunes answers 501
  }
  const SQL = await initSqlJs();
  const db = new SQL.Database();
  db.run("CREATE TABLE fortune (id INTEGER PRIMARY KEY, message TEXT NOT NULL)");
  FORTUNES.forEach((message, index) => db.run("INSERT INTO fortune VALUES (?, ?)", [index + 1, message]));
  selectFortunes = db.prepare("SELECT id, message FROM fortune");
}

function serve() {
  const server = http.createServer(handle);
  const socketPath = process.env.HEADWAY_SOCKET;
  if (socketPath) {
    server.keepAliveTimeout = 0; // the headway front decides when a slot's connection ends
    fs.rmSync(socketPath, { force: true });
    server.listen(socketPath);
  } else {
    server.listen(Number(process.env.PORT || 8000), "127.0.0.1");
  }
  process.on("SIGTERM", () => server.close(() => process.exit(0)));
}

const processes = Number(process.env.WEB_CONCURRENCY || 1);
if (!process.env.HEADWAY_SOCKET && processes > 1 && cluster.isPrimary) {
  for (let i = 0; i < processes; i += 1) cluster.fork();
  process.on("SIGTERM", () => {
    for (const worker of Object.values(cluster.workers)) worker.process.kill("SIGTERM");
    process.exit(0);
  });
} else {
  openFortunes().then(serve);
}
