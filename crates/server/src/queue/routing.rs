//! What the queue notes on a job as it enters: the lane it waits in and the route it belongs to,
//! so that the slot that runs it can report its service time for that route. Plain data, below the
//! job and the lanes alike.

/// A lane: `fast`, `slow`, or one of the `--lane` patterns in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaneId(pub(super) u8);

impl LaneId {
    pub const FAST: LaneId = LaneId(0);
    pub const SLOW: LaneId = LaneId(1);

    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Where a request's route is in the table: its key with identifiers folded, and the key with its
/// numbers kept when it has any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteKey {
    pub(super) folded: u64,
    pub(super) numbered: Option<u64>,
}

/// What a job carries of its lane: which lane it waits in, and its route, to learn from when it
/// has run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Routing {
    pub lane: LaneId,
    pub(super) route: Option<RouteKey>,
}
