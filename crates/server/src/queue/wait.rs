//! A request's wait for its outcome ([`Wait`]), and a free slot's for its next job ([`NextJob`]):
//! the two ends of the queue, each an object its holder may drop to leave, and how the queue
//! hands each out ([`Queue::enqueue`], [`Queue::next_job`]).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::job::{Client, Failure, Job, Outcome, RequestBody, Ticket};
use super::routing::LaneId;
use super::state::{Queue, Refused};
use crate::tally::Tally;

impl Queue {
    /// Admits a request that is complete now (head and body read), sent by `client`, and
    /// returns its wait: handed to an idle slot, queued at the back, or refused at the door.
    pub fn enqueue(self: &Arc<Self>, request: http::Request<RequestBody>, client: Option<Client>) -> Wait {
        let (ticket, lane, outcome, admitted) = self.admit(request, client);
        let stage = match admitted {
            Ok(()) => Stage::Queued,
            Err(refused) => Stage::Refused(refused),
        };
        Wait { queue: self.clone(), ticket, lane, outcome, stage }
    }

    /// Called by a free slot: returns the next waiting request by the lanes' rule, or waits for
    /// the next one to arrive.
    /// `worker_busy` holds the busy slots of the slot's worker; the queue counts the job in it
    /// when handing it over, and the slot takes it out when the job is done.
    pub fn next_job(self: &Arc<Self>, worker_busy: &Arc<Tally>) -> NextJob {
        let (ready, waiting) = match self.take_or_wait(worker_busy) {
            Ok(job) => (Some(job), None),
            Err(receive) => (None, Some(receive)),
        };
        NextJob { queue: self.clone(), ready, waiting }
    }
}

/// One request's wait, from the moment it is complete to its outcome. Its connection holds it
/// while it also watches the client; dropping it before the outcome means the client left, and
/// withdraws the request if it has not started.
pub struct Wait {
    pub(super) queue: Arc<Queue>,
    pub(super) ticket: Ticket,
    pub(super) lane: LaneId,
    pub(super) outcome: oneshot::Receiver<Outcome>,
    pub(super) stage: Stage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Refused(Refused),
    /// In the queue, or already started by a slot; the queue answers it 503 at its deadline
    /// if no slot has started it.
    Queued,
    /// The outcome was delivered.
    Over,
}

impl Wait {
    /// The name of the lane the request took (its access log line says it); `None` with lanes
    /// off.
    pub fn lane(&self) -> Option<Arc<str>> {
        self.queue.lane_name(self.lane)
    }

    /// The outcome: the worker's response, a worker failure (502, 504), or 503 when refused at
    /// the door or not started by the deadline. Cancel-safe: the connection calls it again
    /// after reading ahead on the client connection.
    pub async fn outcome(&mut self) -> Outcome {
        match self.stage {
            Stage::Refused(refused) => self.deliver(Ok(Outcome::Failed(refused.failure()))),
            Stage::Queued => {
                let result = (&mut self.outcome).await;
                self.deliver(result)
            }
            Stage::Over => std::future::pending().await,
        }
    }

    fn deliver(&mut self, result: Result<Outcome, oneshot::error::RecvError>) -> Outcome {
        self.stage = Stage::Over;
        // A reply dropped unanswered means the job was lost with its slot: a worker failure.
        result.unwrap_or(Outcome::Failed(Failure::WorkerFailed))
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.stage == Stage::Queued {
            self.queue.withdraw(self.ticket);
        }
    }
}

/// A free slot's wait for its next job.
pub struct NextJob {
    pub(super) queue: Arc<Queue>,
    pub(super) ready: Option<Box<Job>>,
    pub(super) waiting: Option<oneshot::Receiver<Box<Job>>>,
}

impl NextJob {
    /// Waits for the job. Cancel-safe only through [`NextJob::cancel`].
    pub async fn recv(&mut self) -> Box<Job> {
        if let Some(job) = self.ready.take() {
            return job;
        }
        match self.waiting.as_mut() {
            Some(receive) => match receive.await {
                Ok(job) => {
                    self.waiting = None;
                    job
                }
                // The queue never drops a waiting slot's sender without sending: only
                // `hand_to_idle` removes it, and it sends. Waiting forever is the honest
                // answer if that ever changes.
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// The job, if one was handed over already: for the model of the lanes, which takes them one
    /// at a time (`crates/server/tests/lanes_simulation.rs`).
    #[doc(hidden)]
    pub fn ready(&self) -> Option<&Job> {
        self.ready.as_deref()
    }

    /// Stops waiting. A job that was handed over in the meantime is returned to the queue
    /// rather than lost.
    pub fn cancel(mut self, worker_busy: &Tally) {
        let job = self.ready.take().or_else(|| {
            let mut receive = self.waiting.take()?;
            receive.close();
            receive.try_recv().ok()
        });
        if let Some(job) = job {
            self.queue.give_back(job, worker_busy);
        }
    }
}
