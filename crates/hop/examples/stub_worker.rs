//! A worker that costs nothing: it answers every request on the hop at once with a fixed
//! `200 Hello, world!`, so that what a load generator measures against headway is the front's
//! own ceiling (`bench/front-ceiling.sh`, `bench/instructions.sh`).
//!
//! The front starts its bundled worker as `$HEADWAY_PYTHON -m headway.worker --threads T ...` with
//! the hop's descriptors in `$HEADWAY_HOP`; this program stands in for that interpreter
//! (`HEADWAY_PYTHON=target/release/examples/stub_worker`), reads `--threads`, and serves the hop
//! with that many threads the way the bundled WSGI worker's threads do (a futex each, the
//! request's records taken off, the response written), minus the app. It stops on SIGTERM, as a
//! worker does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use headway_hop::message::{self, BODY, END, REQUEST_HEAD, RESPONSE_HEAD};
use headway_hop::worker::WorkerEnd;

const BODY_TEXT: &[u8] = b"Hello, world!\n";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = args
        .iter()
        .position(|arg| arg == "--threads")
        .and_then(|at| args.get(at + 1))
        .and_then(|threads| threads.parse().ok())
        .unwrap_or(1usize);
    // SAFETY: the descriptors named in $HEADWAY_HOP were passed to this process by the front.
    let end = match unsafe { WorkerEnd::from_env() } {
        Ok(Some(end)) => Arc::new(end),
        Ok(None) => {
            eprintln!("stub_worker: no {} in the environment: the headway front starts this", headway_hop::worker::ENV);
            std::process::exit(2);
        }
        Err(error) => {
            eprintln!("stub_worker: cannot attach to the front's shared memory: {error}");
            std::process::exit(2);
        }
    };
    // SAFETY: a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, stop as *const () as libc::sighandler_t);
    }
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let end = end.clone();
            std::thread::spawn(move || serve(&end))
        })
        .collect();
    end.announce_ready(false);
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    end.stop();
    for handle in handles {
        let _ = handle.join();
    }
}

fn serve(end: &WorkerEnd) {
    let mut head = Vec::new();
    let length = BODY_TEXT.len().to_string();
    let fields = [(&b"content-type"[..], &b"text/plain"[..]), (&b"content-length"[..], length.as_bytes())];
    message::encode_response_head(&mut head, 200, fields);
    let mut record = Vec::new();
    while let Some(index) = end.claim_waiting(|wait| wait()) {
        let slot = end.slot(index);
        let answered = (|| -> Result<(), headway_hop::HopError> {
            if slot.pop_waiting(&mut record, |wait| wait())? != REQUEST_HEAD {
                return Err(headway_hop::HopError::Corrupt("a request that does not start with its head"));
            }
            let mut body_left = message::decode_request_head(&record)?.body_len;
            while body_left > 0 {
                let kind = slot.pop_waiting(&mut record, |wait| wait())?;
                body_left = body_left.saturating_sub(message::body_bytes(kind, &record)?);
                if kind == message::BODY_FILE {
                    slot.body_file(&record)?; // taken, so that it is closed
                }
            }
            slot.push_waiting(RESPONSE_HEAD, &[&head], |wait| wait())?;
            slot.push_waiting(BODY, &[BODY_TEXT], |wait| wait())?;
            slot.release();
            slot.push_waiting(END, &[], |wait| wait())
        })();
        if let Err(error) = answered {
            eprintln!("stub_worker: {error}");
            return;
        }
    }
}
