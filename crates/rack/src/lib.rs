//! `Headway::Native`, the Ruby extension of headway's Rack worker: the Ruby binding of the
//! language-neutral worker core (`headway-worker-core`), as the pyo3 one is for Python.
//!
//! The core carries requests to the slots and responses back; this crate is only what is Ruby
//! about it. [`gvl::Gvl`] lets the core release the GVL while a slot waits; [`slots`] hands a
//! Ruby thread one slot to serve (the Ruby side makes T threads, as only Ruby can make Ruby
//! threads); [`env`] turns the core's request into the CGI part of the Rack env; [`exchange`] is
//! the object the Ruby side answers through; [`process`], what `--preload`'s forked workers need of the system; [`handshake`], the env of a
//! WebSocket handshake that comes on a connection of its own, for `rack.hijack`. What is easier in Ruby (`rack.input`, walking the
//! Rack response, `close` and the after-reply callbacks, loading config.ru) is in
//! `ruby/lib/headway/`, which loads this extension as `headway/headway_rack`.

mod env;
mod exchange;
mod gvl;
mod handshake;
mod process;
mod slots;

use magnus::{function, method, prelude::*, Error, Ruby};

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let native = ruby.define_module("Headway")?.define_module("Native")?;
    native.define_module_function("pidfd_open", function!(process::pidfd_open, 1))?;
    native.define_module_function("pin_to_cpu", function!(process::pin_to_cpu, 1))?;
    native.define_module_function("handshake_env", function!(handshake::handshake_env, 2))?;
    let slots = native.define_class("Slots", ruby.class_object())?;
    slots.define_singleton_method("attach", function!(slots::Slots::attach, 3))?;
    slots.define_method("run_slot", method!(slots::Slots::run_slot, 2))?;
    slots.define_method("announce_ready", method!(slots::Slots::announce_ready, 1))?;
    slots.define_method("hop?", method!(slots::Slots::over_hop, 0))?;
    slots.define_method("place", method!(slots::Slots::place, 0))?;
    slots.define_method("stop", method!(slots::Slots::stop, 0))?;
    let exchange = native.define_class("Exchange", ruby.class_object())?;
    exchange.define_method("read", method!(exchange::Exchange::read, 1))?;
    exchange.define_method("respond", method!(exchange::Exchange::respond, 3))?;
    exchange.define_method("start", method!(exchange::Exchange::start, 2))?;
    exchange.define_method("write", method!(exchange::Exchange::write, 1))?;
    exchange.define_method("send_file", method!(exchange::Exchange::send_file, 3))?;
    exchange.define_method("finish", method!(exchange::Exchange::finish, 0))?;
    exchange.define_method("fail", method!(exchange::Exchange::fail, 0))?;
    exchange.define_method("started?", method!(exchange::Exchange::started, 0))?;
    Ok(())
}
