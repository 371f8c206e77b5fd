//! The queue: dispatch, deadlines, refusals at the door, controlled delay, withdrawals.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::job::{Failure, Job, Outcome, RequestBody};
use super::wait::Stage;
use super::*;
use crate::tally::Tally;

fn request(path: &str) -> http::Request<RequestBody> {
    http::Request::builder().uri(path).body(RequestBody::Memory(Bytes::new())).unwrap()
}

fn path(job: Box<Job>) -> String {
    job.request.uri().path().to_owned()
}

fn queue(max_len: usize, timeout: Duration, slots: usize) -> Arc<Queue> {
    Queue::new(max_len, timeout, slots)
}

#[tokio::test]
async fn waiting_jobs_are_served_oldest_first() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let busy = Arc::new(Tally::default());
    let waits: Vec<Wait> = ["/a", "/b", "/c"].into_iter().map(|name| queue.enqueue(request(name), None)).collect();
    for expected in ["/a", "/b", "/c"] {
        assert_eq!(path(queue.next_job(&busy).recv().await), expected);
    }
    assert_eq!(busy.get(), 3);
    assert_eq!(queue.snapshot(Reader::Json).high_water, 3);
    assert_eq!(queue.snapshot(Reader::Json).high_water, 0, "reset by the read");
    assert_eq!(queue.snapshot(Reader::Prometheus).high_water, 3, "each reader has its own");
    drop(waits);
}

#[tokio::test]
async fn arriving_job_goes_to_least_busy_worker() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let worker_a = Arc::new(Tally::default());
    worker_a.up();
    worker_a.up();
    let worker_b = Arc::new(Tally::default());
    let mut waits_a = queue.next_job(&worker_a);
    let mut waits_b = queue.next_job(&worker_b);
    let _first = queue.enqueue(request("/1"), None);
    assert_eq!(path(waits_b.recv().await), "/1");
    assert_eq!(worker_b.get(), 1);
    let _second = queue.enqueue(request("/2"), None);
    assert_eq!(path(waits_a.recv().await), "/2");
    assert_eq!(queue.snapshot(Reader::Json).depth, 0);
}

#[tokio::test]
async fn a_request_that_would_start_too_late_is_refused_on_arrival() {
    let queue = queue(100, Duration::from_millis(350), 1);
    // Until the service time is known, nobody is refused for it.
    let early: Vec<Wait> = (0..5).map(|n| queue.enqueue(request(&format!("/early{n}")), None)).collect();
    assert!(early.iter().all(|wait| wait.stage == Stage::Queued));
    for _ in 0..service::SAMPLES_FOR_MEAN {
        queue.record_service(Routing::default(), Duration::from_millis(100));
    }
    // 5 are waiting on 1 slot at 100 ms each: the next would start after 600 ms.
    let mut late = queue.enqueue(request("/late"), None);
    assert_eq!(late.stage, Stage::Refused(Refused::WouldTimeOut));
    assert!(matches!(late.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    let snapshot = queue.snapshot(Reader::Json);
    assert_eq!((snapshot.shed_at_arrival, snapshot.depth), (1, 5));
    assert!((snapshot.mean_service_ms - 100.0).abs() < 1e-6);
}

#[tokio::test]
async fn more_slots_let_more_requests_wait() {
    let queue = queue(100, Duration::from_millis(370), 4);
    for _ in 0..service::SAMPLES_FOR_MEAN {
        queue.record_service(Routing::default(), Duration::from_millis(100));
    }
    // With 4 slots at 100 ms, the 12th in line gets a slot within 3 rounds, 300 ms: in time.
    let admitted: Vec<Wait> = (1..=12).map(|n| queue.enqueue(request(&format!("/{n}")), None)).collect();
    assert!(admitted.iter().all(|wait| wait.stage == Stage::Queued));
    // The 13th may need a 4th round: 400 ms, past the 370 ms timeout.
    assert_eq!(queue.enqueue(request("/13"), None).stage, Stage::Refused(Refused::WouldTimeOut));
}

#[tokio::test]
async fn full_queue_refuses() {
    let queue = queue(1, Duration::from_secs(10), 1);
    let _a = queue.enqueue(request("/a"), None);
    let mut b = queue.enqueue(request("/b"), None);
    assert!(matches!(b.outcome().await, Outcome::Failed(Failure::QueueFull)));
    assert_eq!(queue.snapshot(Reader::Json).shed_queue_full, 1);
}

#[tokio::test]
async fn a_dropped_wait_withdraws_its_request() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let busy = Arc::new(Tally::default());
    let a = queue.enqueue(request("/a"), None);
    let _b = queue.enqueue(request("/b"), None);
    drop(a); // the client of /a went away
    assert_eq!(queue.snapshot(Reader::Json).depth, 1);
    assert_eq!(path(queue.next_job(&busy).recv().await), "/b");
    assert_eq!(queue.snapshot(Reader::Json).withdrawn, 1);
    assert_eq!(queue.abandoned_running(), 0);
}

#[tokio::test]
async fn a_client_leaving_a_running_request_is_counted_apart() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let busy = Arc::new(Tally::default());
    let wait = queue.enqueue(request("/a"), None);
    let _running = queue.next_job(&busy).recv().await;
    drop(wait);
    assert_eq!((queue.snapshot(Reader::Json).withdrawn, queue.abandoned_running()), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_request_not_started_by_its_deadline_gets_503() {
    let queue = queue(10, Duration::from_secs(2), 1);
    let mut wait = queue.enqueue(request("/a"), None);
    let started = Instant::now();
    assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    let snapshot = queue.snapshot(Reader::Json);
    assert_eq!((snapshot.shed_queue_timeout, snapshot.depth, snapshot.withdrawn), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn each_waiting_request_is_shed_at_its_own_deadline_oldest_first() {
    let queue = queue(10, Duration::from_secs(2), 1);
    let started = Instant::now();
    let mut a = queue.enqueue(request("/a"), None);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut b = queue.enqueue(request("/b"), None);
    assert!(matches!(a.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(queue.depth(), 1, "/b has a second left");
    assert!(matches!(b.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    // A request that arrives into an empty queue long after is still shed on time.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let arrived = Instant::now();
    let mut c = queue.enqueue(request("/c"), None);
    assert!(matches!(c.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    assert_eq!(arrived.elapsed(), Duration::from_secs(2));
    assert_eq!(queue.snapshot(Reader::Json).shed_queue_timeout, 3);
}

#[tokio::test(start_paused = true)]
async fn a_request_started_in_time_outlives_its_deadline() {
    let queue = queue(10, Duration::from_secs(2), 1);
    let busy = Arc::new(Tally::default());
    let mut wait = queue.enqueue(request("/a"), None);
    let job = queue.next_job(&busy).recv().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    job.answer(Outcome::Failed(Failure::WorkerTimeout));
    assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
    assert_eq!(queue.snapshot(Reader::Json).shed_queue_timeout, 0);
}

#[tokio::test(start_paused = true)]
async fn expired_jobs_are_answered_503_not_started() {
    let queue = queue(10, Duration::from_millis(1), 1);
    let busy = Arc::new(Tally::default());
    let mut a = queue.enqueue(request("/a"), None);
    tokio::time::advance(Duration::from_millis(5)).await;
    let _b = queue.enqueue(request("/b"), None);
    let mut next = queue.next_job(&busy);
    // /a expired: the slot answers it 503 and skips it; /b was only just queued.
    assert_eq!(path(next.recv().await), "/b");
    assert!(matches!(a.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
}

#[tokio::test]
async fn a_lost_job_is_a_worker_failure() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let busy = Arc::new(Tally::default());
    let mut wait = queue.enqueue(request("/a"), None);
    drop(queue.next_job(&busy).recv().await); // the slot died with the job
    assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::WorkerFailed)));
}

#[tokio::test]
async fn cancelled_wait_gives_a_handed_job_back() {
    let queue = queue(10, Duration::from_secs(10), 1);
    let busy = Arc::new(Tally::default());
    let next = queue.next_job(&busy);
    let _a = queue.enqueue(request("/a"), None); // handed straight to the idle slot
    assert_eq!(busy.get(), 1);
    next.cancel(&busy);
    assert_eq!(busy.get(), 0);
    assert_eq!(queue.snapshot(Reader::Json).depth, 1);
    assert_eq!(path(queue.next_job(&busy).recv().await), "/a");
}

#[tokio::test(start_paused = true)]
async fn a_service_time_hint_answers_a_fresh_servers_first_burst_on_arrival() {
    let hinted = |hint| {
        let settings =
            QueueSettings { service_hint: Some(hint), ..QueueSettings::new(100, Duration::from_millis(350)) };
        Queue::with_settings(settings, 1)
    };
    let queue = hinted(Duration::from_millis(100));
    let busy = Arc::new(Tally::default());
    let _slot = queue.next_job(&busy);
    let waits: Vec<Wait> = (0..8).map(|n| queue.enqueue(request(&format!("/{n}")), None)).collect();
    // One runs at once, three start within 350 ms (after 100, 200, 300 ms), four cannot.
    let refused = waits.iter().filter(|wait| wait.stage == Stage::Refused(Refused::WouldTimeOut)).count();
    assert_eq!(refused, 4);
    assert_eq!(queue.snapshot(Reader::Json).shed_at_arrival, 4);

    // A hint far off is overruled by the first requests measured: with one slot, two.
    let queue = hinted(Duration::from_secs(1));
    queue.record_service(Routing::default(), Duration::from_millis(10));
    queue.record_service(Routing::default(), Duration::from_millis(12));
    let waits: Vec<Wait> = (0..8).map(|n| queue.enqueue(request(&format!("/{n}")), None)).collect();
    assert!(waits.iter().all(|wait| wait.stage == Stage::Queued));
}

#[tokio::test]
async fn retry_after_follows_the_queue() {
    let queue = queue(100, Duration::from_secs(10), 1);
    assert_eq!(queue.retry_after_secs(), 1, "the service time is not known yet");
    for _ in 0..service::SAMPLES_FOR_MEAN {
        queue.record_service(Routing::default(), Duration::from_millis(100));
    }
    let _waits: Vec<Wait> = (0..25).map(|n| queue.enqueue(request(&format!("/{n}")), None)).collect();
    // A newcomer would start after 26 rounds of 100 ms.
    assert_eq!(queue.retry_after_secs(), 3);
}
