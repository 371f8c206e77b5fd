//! `Native.handshake_env(head)`: the CGI part of the Rack env of a WebSocket handshake, which the
//! front sends on a unix connection of its own (see `ruby/lib/headway/handshakes.rb`) rather
//! than over the hop, so that the app can take that connection with Rack's full hijack. The
//! head is parsed and checked by the same code as every other request's, and the env made by
//! [`env::build`].

use headway_http1::request::{parse_head, Limits};
use headway_worker_core::http::request::from_head;
use magnus::{Error, RHash, RString, Ruby};

use crate::env;

/// The env of the request whose whole head is `head`, the app mounted under `root_path` ("" for
/// none); an ArgumentError saying why if it is not one complete, valid request head.
pub fn handshake_env(ruby: &Ruby, head: RString, root_path: String) -> Result<RHash, Error> {
    // SAFETY: the bytes are copied out before any Ruby call could move or free the string.
    let bytes = unsafe { head.as_slice() }.to_vec();
    let limits = Limits { max_head: bytes.len(), max_body: 0 };
    let refused = |why: String| Error::new(ruby.exception_arg_error(), format!("not a handshake: {why}"));
    match parse_head(&bytes, &limits) {
        Ok(Some((head, _))) => env::build(ruby, &from_head(head), &root_path),
        Ok(None) => Err(refused("an incomplete head".to_owned())),
        Err(error) => Err(refused(error.reason.to_owned())),
    }
}
