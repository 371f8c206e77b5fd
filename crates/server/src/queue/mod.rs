//! The one queue: where a request waits, and the only place it waits.
//!
//! Every complete request of every client connection enters here in the order it became
//! complete, and every slot of every worker takes from here, oldest first among alike requests.
//! There is no other queue behind it: a slot runs one request at a time, so a request is either
//! waiting here or running. This is what removes the keep-alive and wrong-worker tails of
//! per-worker queues. When a few routes take far longer than the rest, the lanes ([`lanes`]) let
//! fast requests start before slow ones that arrived earlier, within bounds; each kind keeps its
//! arrival order.
//!
//! A request's whole wait is one object, [`Wait`] (in `wait`, with a slot's [`NextJob`]), which
//! its connection holds: everything that can end a wait is decided in this module.
//! - Refused at the door, 503 at once: the queue is at its length limit; or, by the service time
//!   (see [`service`]), its turn would come only after the queue timeout; or the queue is holding
//!   a sustained overload to its target wait and enough requests already wait (below). Under
//!   overload a client learns it in microseconds, not after waiting out the deadline.
//! - The deadline: a request not started within the queue timeout gets 503, rather than being
//!   left to a router's timeout. A slot never starts an expired request, and once the service
//!   time shows that the newest requests cannot start by their deadline, they get their 503 then.
//!   One task of the queue's own keeps the deadlines (`state::keep_deadlines`), not a timer per
//!   request: the requests wait in the order of their deadlines, so only the oldest one's needs
//!   watching, and setting and clearing a timer for every request was a measurable part of the
//!   front's time a request.
//! - The client leaves: dropping the [`Wait`] withdraws the request, which then never runs.
//! - A slot starts it: from then on the wait is for the worker's answer.
//!
//! Controlled delay. Under sustained overload a queue with only a deadline stays full to the
//! deadline: every request it serves has waited the whole timeout, and it serves no more than a
//! short queue would. So when the queue is standing (every request started for an interval had
//! waited longer than the target, as in CoDel) and keeps growing (three intervals in a row, by
//! more than a round of slots in all), it holds itself to the target for ten intervals: it may hold as many waiting requests as the
//! slots start within the target. Those beyond that, which arrived while the overload was being
//! recognised, get their 503 then, newest first; newcomers beyond it get theirs at the door. At
//! least one request always may wait, so the slots stay busy and the server serves its full
//! capacity; each served request waits about the target; the excess is refused at once. An
//! overload back as soon as a hold ends is held twice as long (up to eight times); slots with
//! nothing to do for an interval end the hold. A burst into an idle server drains and a closed
//! loop of N clients stays N deep, so neither grows a standing queue: both are absorbed up to the
//! deadline as before (see [`controlled_delay`]). The queue timeout stays the hard bound for
//! everyone.
//!
//! Why refuse at the door, and why stay first-in-first-out:
//! - Arrival drop, not head drop (CoDel in routers drops the oldest packet): an HTTP client or a
//!   load balancer learns of a refusal only from the 503 itself, so the most useful one comes at
//!   once, before the client has spent any of its own timeout, and a balancer that retries
//!   elsewhere (nginx's `proxy_next_upstream`, HAProxy's `redispatch`) keeps its whole budget for
//!   it. A head drop answers 503 to the request that has already waited longest, after its wait,
//!   and makes the one behind it, about to start, wait longer. When a hold begins, the backlog
//!   of the last interval or so is cut from the back for the same reason: those are the requests
//!   the door would have refused had it known, and they have waited least.
//! - Refused outright, not dropped gently (CoDel's one drop, then more at interval/sqrt(count)):
//!   that pace is tuned for TCP senders that halve their rate after a drop; clients arriving at
//!   their own pace do not slow down for a 503, and a gentle queue would grow meanwhile.
//! - FIFO, not adaptive LIFO (Facebook's answer: newest first under load): with the door keeping
//!   the queue at the target, LIFO would shorten no served wait; it would let a client that
//!   retries at once overtake one waiting its turn (rewarding retry storms), leave the oldest
//!   requests to wait out the whole deadline for their 503, and undo the arrival order that
//!   keep-alive and pipelined connections rely on for their fair share.
//!
//! Dispatch: when a request arrives and slots are idle, it goes straight to the idle slot of
//! the least busy worker (spreading work across processes is what a GIL-bound or
//! single-threaded worker needs); when a slot becomes free and requests wait, it takes the one
//! the lanes' rule picks (the oldest, when all are alike). Both happen under one short mutex.
//!
//! The parts: `state` is the queue itself, its mutex and the rules above; `wait` the two ends a
//! request and a slot hold; `settings` the flags it is run by.

mod controlled_delay;
pub mod job;
mod lanes;
mod route_table;
mod routing;
mod service;
mod settings;
#[cfg(test)]
mod simulation;
mod state;
#[cfg(test)]
mod tests;
mod wait;

pub use controlled_delay::Target;
/// The lanes' rule and what it learns, for the model that chose the rule
/// (`crates/server/tests/lanes_simulation.rs`).
#[doc(hidden)]
pub use lanes::{choose, Class, ClassTimes, Rule};
pub use lanes::{LanePattern, LaneSettings, MAX_DECLARED};
pub use routing::Routing;
pub use settings::{QueueSettings, DEFAULT_INTERVAL};
pub use state::{Queue, Reader, Recent, Refused};
pub use wait::{NextJob, Wait};
