//! The CGI part of the Rack env, from the request the core assembled: every key the Rack SPEC
//! names that comes from the request (REQUEST_METHOD, SCRIPT_NAME, PATH_INFO, QUERY_STRING,
//! SERVER_NAME, SERVER_PORT, SERVER_PROTOCOL, the HTTP_ variables, CONTENT_TYPE and
//! CONTENT_LENGTH), REMOTE_ADDR and `rack.url_scheme` as the front judged them, and REQUEST_URI,
//! which Rails and Puma users expect. The keys that are the same for every request (`rack.version`,
//! `rack.errors`, ...) and `rack.input` are the Ruby side's.
//!
//! Values are binary strings of the bytes as sent: PATH_INFO stays percent-encoded, as Rack
//! servers have it (unlike WSGI's).
//!
//! With `--root-path` (the app mounted under a prefix) SCRIPT_NAME is the prefix and PATH_INFO
//! the rest of the path when the path starts with it, as for WSGI; a path without it (a router
//! that took it off) is PATH_INFO whole. The prefix is plain URL characters, so the raw path is
//! compared with it as it came.

use headway_worker_core::http::cgi::{below, bytes_of_latin1, server_of_host};
use headway_worker_core::http::request::Request;
use magnus::{Error, RHash, Ruby};

/// The env keys of `request`, in a new Hash; `root_path` is `--root-path`, "" for none.
pub fn build(ruby: &Ruby, request: &Request, root_path: &str) -> Result<RHash, Error> {
    let env = ruby.hash_new();
    let text = |value: &str| ruby.str_from_slice(&bytes_of_latin1(value));
    for (key, value) in &request.headers {
        env.aset(ruby.str_new(key), text(value))?;
    }
    env.aset("REQUEST_METHOD", text(&request.method))?;
    env.aset("SCRIPT_NAME", root_path)?;
    env.aset("PATH_INFO", text(below(&request.path, root_path)))?;
    env.aset("QUERY_STRING", text(&request.query))?;
    let uri =
        if request.query.is_empty() { request.path.clone() } else { format!("{}?{}", request.path, request.query) };
    env.aset("REQUEST_URI", text(&uri))?;
    env.aset("SERVER_PROTOCOL", request.protocol())?;
    let https = request.is_https();
    env.aset("rack.url_scheme", if https { "https" } else { "http" })?;
    let (mut name, mut port) = ("localhost", if https { "443" } else { "80" });
    if let Some(host) = request.header("HTTP_HOST") {
        let (host_name, host_port) = server_of_host(host);
        if !host_name.is_empty() {
            name = host_name;
        }
        if !host_port.is_empty() {
            port = host_port;
        }
    }
    env.aset("SERVER_NAME", text(name))?;
    env.aset("SERVER_PORT", port)?;
    if let Some(client) = request.client() {
        env.aset("REMOTE_ADDR", text(client))?;
    }
    Ok(env)
}
