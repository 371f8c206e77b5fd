//! How fast a client must read to keep pace with the worker ([`KEEPS_PACE`]), and how far behind
//! that it may fall ([`BEHIND`]): a client that keeps pace is waited for, one that does not is
//! slow, and its body goes to the file.

use std::time::Duration;

/// A client that reads at least this fast (bytes a second) keeps pace with the worker: the slot
/// waits for it to make room in memory rather than spilling its body to disk. Any client on the
/// same host or a LAN does; one that does not is slow, and costs disk, not the slot's time.
pub const KEEPS_PACE: u64 = 64 << 20;
/// How far behind that schedule a client may fall before it counts as slow.
pub const BEHIND: Duration = Duration::from_millis(50);
