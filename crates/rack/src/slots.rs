//! `Headway::Native::Slots`: the core's slots as the Ruby side sees them. The worker's main
//! thread attaches them (the front's shared memory, or a unix socket run on its own), makes T
//! Ruby threads that each call `run_slot`, waits for a stop signal in Ruby (where `trap` works),
//! then calls `stop` and joins the threads.

use headway_worker_core::http::request::Request;
use headway_worker_core::http::HttpError;
use headway_worker_core::runtime::Runtime;
use headway_worker_core::slots;
use headway_worker_core::transport::{serve_each, Transport};
use http::StatusCode;
use magnus::value::ReprValue;
use magnus::{Error, Ruby, Value};

use crate::env;
use crate::exchange::Exchange;
use crate::gvl::Gvl;

#[magnus::wrap(class = "Headway::Native::Slots", free_immediately, size)]
pub struct Slots {
    slots: slots::Slots,
    /// `--root-path`, "" for none: the prefix each request's env takes off PATH_INFO.
    root_path: String,
}

impl Slots {
    /// `Slots.attach(path, threads, root_path)`: the front's shared memory when it started us,
    /// else a unix socket at `path`; a RuntimeError with the line for the user if neither can be
    /// had.
    pub fn attach(ruby: &Ruby, path: String, threads: usize, root_path: String) -> Result<Slots, Error> {
        slots::Slots::attach(&path, threads)
            .map(|slots| Slots { slots, root_path })
            .map_err(|error| Error::new(ruby.exception_runtime_error(), error))
    }

    /// `slots.run_slot(number, handler)`: serves slot `number` on the calling Ruby thread until
    /// the slots stop; each request is `handler.call(env, exchange)`.
    pub fn run_slot(ruby: &Ruby, rb_self: &Self, number: usize, handler: Value) {
        rb_self.slots.run_slot(&Gvl, number, &mut |transport| {
            serve_each(&Gvl, transport, &mut |transport, request| {
                handle(ruby, handler, &rb_self.root_path, transport, request)
            })
        });
    }

    /// Tells the front the slots are running, and whether WebSocket handshakes may go to the
    /// worker's socket (`ruby/lib/headway/handshakes.rb` listens there).
    pub fn announce_ready(&self, takes_websockets: bool) {
        self.slots.announce_ready(takes_websockets);
    }

    /// `slots.hop?`: whether the front started us (its shared memory), rather than a socket of
    /// our own.
    pub fn over_hop(&self) -> bool {
        self.slots.hop().is_some()
    }

    /// `over shared memory` or `on PATH`, for the startup line.
    pub fn place(&self) -> String {
        self.slots.place()
    }

    /// Stops taking work; `run_slot` returns once what its slot has is served.
    pub fn stop(&self) {
        self.slots.stop();
    }
}

/// Runs one request through the Ruby handler; gives the transport back with whether it can carry
/// another. The handler answers an app's exception itself; one out of the handler (a bug of
/// ours, or an exception that is not a StandardError) fails the request here, with a line.
fn handle(
    ruby: &Ruby,
    handler: Value,
    root_path: &str,
    mut transport: Box<dyn Transport>,
    request: Request,
) -> Option<(Box<dyn Transport>, bool)> {
    let is_head = request.is_head();
    let env = match env::build(ruby, &request, root_path) {
        Ok(env) => env,
        Err(error) => {
            Gvl.log(&format!("cannot make the request's env: {error}"));
            let error = HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
            transport.send_error(&Gvl, &error, is_head);
            return Some((transport, false));
        }
    };
    let exchange = ruby.obj_wrap(Exchange::new(transport, is_head));
    let called = handler.funcall::<_, _, Value>("call", (env, exchange));
    if let Err(error) = &called {
        Gvl.log(&format!("the request failed outside the app: {error}"));
        exchange.fail_request();
    }
    let (mut transport, failed) = exchange.take()?;
    let keep = !failed && transport.finish(&Gvl);
    Some((transport, keep))
}
