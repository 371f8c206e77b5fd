//! The language-neutral core of headway's bundled workers: everything a worker does that is not
//! the app's language. The Python binding (`headway-worker`: WSGI and ASGI over pyo3) and the
//! Ruby one (`headway-rack`: Rack over magnus) are each a thin layer over it, and implement only
//! [`runtime::Runtime`]: how a slot thread lets go of its interpreter's lock while it waits, and
//! where the worker's own lines go.
//!
//! A request's path through it: [`slots`] is where the T slot threads get their work; started by
//! the headway front, each claims requests from the shared memory the front passed down
//! ([`hop`]); run on its own, each accepts a connection ([`unix`]) whose HTTP/1.1 rules are in
//! [`http`] (no I/O) and whose socket calls are in [`socket`]. Both are a [`transport`], which
//! hands the binding the request and takes the response head, its body and files to send.

pub mod hop;
pub mod http;
pub mod runtime;
pub mod slots;
pub mod socket;
pub mod transport;
pub mod unix;
