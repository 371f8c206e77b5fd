//! Slots over the hop, against worker threads on the worker's end of a real region: the rules the
//! queue keeps must hold over shared memory too (a worker that crashes or hangs fails only its
//! own requests; one that never takes a request holds nobody else's), and bodies larger than the
//! rings must travel whole both ways.

use std::sync::Mutex;

use headway_hop::message::{self, ABORT, BODY, END, REQUEST_HEAD, RESPONSE_HEAD};
use headway_hop::worker::{WorkerEnd, WorkerSlot};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::*;
use crate::workers::hop_link::HopLink;

/// A request as a fake worker thread received it.
struct Received {
    target: String,
    body: Vec<u8>,
}

/// What a fake worker does with each request it claims: answer, or misbehave.
type Behaviour = fn(&WorkerSlot<'_>, Received);

/// A fake worker process: threads serving a hop region, stopped when dropped.
struct HopProcess {
    fake: FakeWorker,
    end: Arc<WorkerEnd>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl HopProcess {
    /// Stops the worker's threads, as if the process stopped taking requests.
    fn halt(&mut self) {
        self.end.stop();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for HopProcess {
    fn drop(&mut self) {
        self.halt();
    }
}

async fn hop_worker(request_timeout: Duration, behaviour: Behaviour) -> HopProcess {
    let end = HopLink::prepare(1, 8192).unwrap();
    let worker_end = Arc::new(WorkerEnd::beside(&end).unwrap());
    let threads = (0..2)
        .map(|_| {
            let end = worker_end.clone();
            std::thread::spawn(move || serve(&end, behaviour))
        })
        .collect();
    worker_end.announce_ready(false);
    // SAFETY: the doorbell belongs to `end`, which the AsyncFd owns.
    let doorbell = unsafe { AsyncFd::register_with_interest(end, Interest::READABLE) }.unwrap();
    HopLink::until_ready(&doorbell).await.unwrap();
    let link = HopLink::start(doorbell, 1);
    let dir = tempfile::tempdir().unwrap();
    let fake =
        FakeWorker::slot(dir.path().join("unused.sock"), Transport::Hop(Mutex::new(Some(link))), request_timeout, dir);
    HopProcess { fake, end: worker_end, threads }
}

fn serve(end: &WorkerEnd, behaviour: Behaviour) {
    let mut record = Vec::new();
    while let Some(index) = end.claim_waiting(|wait| wait()) {
        let slot = end.slot(index);
        assert_eq!(slot.pop_waiting(&mut record, |wait| wait()).unwrap(), REQUEST_HEAD);
        let head = message::decode_request_head(&record).unwrap();
        let (target, body_len) = (String::from_utf8(head.target.to_vec()).unwrap(), head.body_len as usize);
        let mut body = Vec::new();
        while body.len() < body_len {
            assert_eq!(slot.pop_waiting(&mut record, |wait| wait()).unwrap(), BODY);
            body.extend_from_slice(&record);
        }
        behaviour(&slot, Received { target, body });
    }
}

/// Writes a whole response: head, body in records as large as the ring takes, end.
fn respond(slot: &WorkerSlot<'_>, status: u16, body: &[u8]) {
    respond_paced(slot, status, body, || ());
}

/// [`respond`], calling `pause` before each record.
fn respond_paced(slot: &WorkerSlot<'_>, status: u16, body: &[u8], pause: impl Fn()) {
    let mut head = Vec::new();
    message::encode_response_head(&mut head, status, [(&b"content-type"[..], &b"text/plain"[..])]);
    pause();
    slot.push_waiting(RESPONSE_HEAD, &[&head], |wait| wait()).unwrap();
    for piece in body.chunks(slot.max_payload()) {
        pause();
        slot.push_waiting(BODY, &[piece], |wait| wait()).unwrap();
    }
    slot.release();
    pause();
    slot.push_waiting(END, &[], |wait| wait()).unwrap();
}

/// Answers with the request's target and body, the body reversed.
fn echo(slot: &WorkerSlot<'_>, received: Received) {
    respond(slot, 200, &echoed(&received.target, &received.body));
}

/// What [`echo`] answers to a request for `target` with `body`.
fn echoed(target: &str, body: &[u8]) -> Vec<u8> {
    let mut answer = target.as_bytes().to_vec();
    answer.extend(body.iter().rev());
    answer
}

/// Answers like [`echo`], pausing before each record in one of four ways picked by the request's
/// number (`/N`): not at all, a yield, a spin of 0 to 30 microseconds, a short sleep. The records
/// then land in every phase of the front's doorbell watcher: while it looks, while it yields,
/// while it sleeps.
fn echo_paced(slot: &WorkerSlot<'_>, received: Received) {
    let n: usize = received.target[1..].parse().unwrap();
    let pause = || match n % 4 {
        0 => {}
        1 => std::thread::yield_now(),
        2 => {
            let until = std::time::Instant::now() + Duration::from_nanos((n as u64 * 7919) % 30_000);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        _ => std::thread::sleep(Duration::from_micros(50)),
    };
    respond_paced(slot, 200, &echoed(&received.target, &received.body), pause);
}

/// The whole body of a response, however it arrived.
async fn body_of(response: WorkerResponse) -> Result<Vec<u8>, spool::Truncated> {
    match response.body {
        ResponseBody::Complete(body) => Ok(body.to_vec()),
        ResponseBody::Streaming(mut reader) => {
            let mut body = Vec::new();
            while let Some(piece) = reader.next().await {
                body.extend_from_slice(&piece?);
            }
            Ok(body)
        }
    }
}

fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_responses_larger_than_the_rings_travel_whole() {
    let process = hop_worker(Duration::from_secs(30), echo).await;
    // The rings of this region hold 64 KiB: these bodies take several turns of each.
    for (n, len) in [0usize, 10, 100_000, 300_000].into_iter().enumerate() {
        let body = pattern(len);
        let Outcome::Response(response) =
            process.fake.request_with_body(&format!("/{n}"), body.clone()).outcome().await
        else {
            panic!("no response to request {n}");
        };
        assert_eq!(response.head.status, http::StatusCode::OK);
        assert_eq!(response.head.headers["content-type"], "text/plain");
        assert_eq!(body_of(response).await.unwrap(), echoed(&format!("/{n}"), &body), "request {n}");
    }
    assert_eq!(process.fake.worker.served.load(Ordering::Relaxed), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_lose_the_blanks_around_them() {
    fn spaced(slot: &WorkerSlot<'_>, _: Received) {
        let mut head = Vec::new();
        let fields = [(&b"set-cookie"[..], &b" a=b "[..]), (b"x-spaced", b"\t1 2 \t"), (b"x-blank", b" ")];
        message::encode_response_head(&mut head, 200, fields);
        slot.push_waiting(RESPONSE_HEAD, &[&head], |wait| wait()).unwrap();
        slot.release();
        slot.push_waiting(END, &[], |wait| wait()).unwrap();
    }
    let process = hop_worker(Duration::from_secs(30), spaced).await;
    let Outcome::Response(response) = process.fake.request("/").outcome().await else { panic!("no response") };
    let headers = &response.head.headers;
    let value = |name: &str| headers[name].as_bytes();
    assert_eq!((value("set-cookie"), value("x-spaced"), value("x-blank")), (&b"a=b"[..], &b"1 2"[..], &b""[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_answers_before_reading_its_upload_does_not_deadlock() {
    // The worker thread reads the whole upload only after writing a response bigger than its
    // ring (the fake's `serve` reads it first; here the order is the other way round).
    fn answer_first(slot: &WorkerSlot<'_>, _: Received) {
        respond(slot, 200, &pattern(200_000));
    }
    let process = hop_worker(Duration::from_secs(30), answer_first).await;
    let Outcome::Response(response) = process.fake.request_with_body("/up", pattern(200_000)).outcome().await else {
        panic!("no response");
    };
    assert_eq!(body_of(response).await.unwrap(), pattern(200_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_fails_mid_body_fails_its_request_and_the_slot_goes_on() {
    fn fail_midway(slot: &WorkerSlot<'_>, received: Received) {
        if received.target == "/ok" {
            return respond(slot, 200, b"fine");
        }
        let mut head = Vec::new();
        message::encode_response_head(&mut head, 200, []);
        slot.push_waiting(RESPONSE_HEAD, &[&head], |wait| wait()).unwrap();
        slot.push_waiting(BODY, &[b"partial"], |wait| wait()).unwrap();
        slot.release();
        slot.push_waiting(ABORT, &[b"ZeroDivisionError"], |wait| wait()).unwrap();
    }
    let process = hop_worker(Duration::from_secs(30), fail_midway).await;
    // If the abort came before the head went to the client, a clean 502; if after, a body cut
    // short, never one that looks complete.
    match process.fake.request("/fail").outcome().await {
        Outcome::Failed(failure) => assert_eq!(failure, Failure::WorkerFailed),
        Outcome::Response(response) => assert!(body_of(response).await.is_err(), "the body must end cut short"),
        Outcome::Upgraded(_) => panic!("no WebSocket was asked for"),
    }
    let Outcome::Response(response) = process.fake.request("/ok").outcome().await else { panic!("no response") };
    assert_eq!(body_of(response).await.unwrap(), b"fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_never_takes_its_request_gets_504_and_is_reported() {
    let mut process = hop_worker(Duration::from_millis(300), echo).await;
    process.halt(); // the request is published and never claimed
    let hung = process.fake.worker.clone();
    let reported = tokio::spawn(async move { hung.hung(1).await });
    assert!(matches!(process.fake.request("/").outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
    reported.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_dies_holding_a_request_fails_only_that_request() {
    fn hold(_: &WorkerSlot<'_>, _: Received) {
        std::thread::sleep(Duration::from_secs(60)); // until the process "dies" around it
    }
    let process = hop_worker(Duration::from_secs(30), hold).await;
    let mut wait = process.fake.request("/held");
    let worker = process.fake.worker.clone();
    let outcome = tokio::spawn(async move { wait.outcome().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    worker.set_phase(Phase::Starting); // the supervisor saw the process exit
    worker.process_gone();
    assert!(matches!(outcome.await.unwrap(), Outcome::Failed(Failure::WorkerFailed)));
    // The queue is untouched: the next request waits for a new process rather than failing.
    let mut next = process.fake.request("/next");
    assert!(tokio::time::timeout(Duration::from_millis(200), next.outcome()).await.is_err());
    assert_eq!(process.fake.queue.snapshot(crate::queue::Reader::Json).depth, 1);
    std::mem::forget(process); // its threads sleep in `hold`; the test process ends them
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_writes_garbage_fails_its_request_with_502_and_is_reported() {
    fn garbage(slot: &WorkerSlot<'_>, _: Received) {
        slot.push_waiting(RESPONSE_HEAD, &[b"\x01"], |wait| wait()).unwrap();
    }
    let process = hop_worker(Duration::from_secs(30), garbage).await;
    let hung = process.fake.worker.clone();
    let reported = tokio::spawn(async move { hung.hung(1).await });
    assert!(matches!(process.fake.request("/").outcome().await, Outcome::Failed(Failure::WorkerFailed)));
    reported.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_handshake_to_a_hop_worker_goes_to_its_socket() {
    let process = hop_worker(Duration::from_secs(30), echo).await;
    // The bundled worker listens on its socket for handshakes besides its rings.
    let listener = UnixListener::bind(&process.fake.worker.socket).unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        assert!(head_text(&mut stream).await.unwrap().contains("upgrade: websocket"));
        super::upgrade::accept_and_echo(stream).await;
    });
    let Outcome::Upgraded(upgraded) = super::upgrade::handshake(&process.fake, "/chat").outcome().await else {
        panic!("no 101")
    };
    let mut io = upgraded.socket.io;
    io.write_all(b"over the socket").await.unwrap();
    let mut echo = [0u8; 15];
    io.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"over the socket");
    // The rings still carry requests meanwhile.
    let Outcome::Response(response) = process.fake.request_with_body("/x", Bytes::from_static(b"ring")).outcome().await
    else {
        panic!("no response")
    };
    assert_eq!(body_of(response).await.unwrap(), b"/xgnir");
}

/// A wake-up lost between the worker and the front's doorbell watcher would hang a request here:
/// with one slot and one request at a time, no other response rings the doorbell to rescue it,
/// and the request would end in a 504 after the request timeout. Thousands of exchanges, paced
/// in every way [`echo_paced`] has, on both kinds of runtime the front runs (one thread by
/// default, several with `--front-threads`). It catches a watcher that misses rings it should
/// hear; a race whose window is a few instructions wide shows only now and then (one seeded in
/// the watcher's arming failed once in 200,000 exchanges, docs/benchmarks.md), so a change to how
/// the watcher arms needs it run many times over (arming before the last look, disarmed once
/// awake, passed 224,000).
#[test]
fn no_wake_up_is_lost_whatever_the_timing() {
    const REQUESTS: usize = 4000;
    for threads in [1, 2] {
        crate::front_runtime(threads).build().unwrap().block_on(async {
            let process = hop_worker(Duration::from_secs(10), echo_paced).await;
            for n in 0..REQUESTS {
                let body = pattern(n % 64);
                let target = format!("/{n}");
                let response = match process.fake.request_with_body(&target, body.clone()).outcome().await {
                    Outcome::Response(response) => response,
                    Outcome::Failed(failure) => panic!("request {n}, {threads} front thread(s): {failure:?}"),
                    Outcome::Upgraded(_) => panic!("no WebSocket was asked for"),
                };
                assert_eq!(body_of(response).await.unwrap(), echoed(&target, &body), "request {n}");
            }
            assert_eq!(process.fake.worker.served.load(Ordering::Relaxed), REQUESTS as u64);
        });
    }
}
