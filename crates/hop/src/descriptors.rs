//! What the front hands a worker process: its region, its doorbell, its work bell and its files'
//! socket, named in that order by [`crate::worker::ENV`].

/// How many descriptors a worker process is given ([`crate::front::FrontEnd::descriptors`]).
pub const DESCRIPTORS: usize = 4;
