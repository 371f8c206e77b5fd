//! A slot's line to the bundled worker over the shared-memory hop (see the `headway_hop` crate).
//!
//! Each process of the bundled worker gets its own region with a ring pair per slot
//! ([`HopLink`], the front's side of it, wakes a slot when its rings move); a slot
//! ([`SlotLine`]) writes its request into its request ring, and reads the response from its
//! response ring as it arrives. The request body and the
//! response are moved together, a piece of each as the rings allow, so an app that answers
//! before reading its whole upload never deadlocks the two sides.

use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use bytes::Bytes;
use headway_hop::front::FrontSlot;
use headway_hop::message::{self, ABORT, BODY, END, REQUEST_HEAD, RESPONSE_HEAD};
use headway_hop::HopError;
use headway_http1::fields::trim_blanks;
use http::{HeaderName, HeaderValue, StatusCode};

use super::link::{LinkError, Through, WorkerBody};
use crate::queue::job::{Client, RequestBody};
use crate::spool;
use crate::workers::hop_link::{Gone, HopLink};

/// A slot's line: its rings in the current process's region.
pub(super) struct SlotLine {
    link: Arc<HopLink>,
    index: usize,
    /// The request head's record, encoded; reused for every request.
    record: Vec<u8>,
    /// The response record read last, in memory of its own: a body piece goes on as it is.
    response: Bytes,
    /// An exchange broke off mid-way: what the rings hold can no longer be trusted, and the line
    /// waits for the next process.
    pub(super) poisoned: bool,
}

impl SlotLine {
    /// Slot `index` of the process of `generation`.
    pub(super) fn of(links: &Mutex<Option<Arc<HopLink>>>, generation: u64, index: usize) -> io::Result<SlotLine> {
        let link = links.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        match link {
            Some(link) if link.generation == generation => {
                Ok(SlotLine { link, index, record: Vec::new(), response: Bytes::new(), poisoned: false })
            }
            _ => Err(io::Error::other("the worker process's region is not there yet")),
        }
    }

    fn slot(&self) -> FrontSlot<'_> {
        self.link.slot(self.index)
    }

    /// How the worker is told that the client of this slot's request has gone.
    pub(super) fn client_gone_signal(&self) -> ClientGoneSignal {
        ClientGoneSignal { link: self.link.clone(), index: self.index }
    }

    /// Sends a request (from `client`, the app's `REMOTE_ADDR`) and waits for the response head.
    /// Whatever goes wrong leaves the line poisoned; only a clean end (the whole response, or the
    /// worker's own abort) does not.
    pub(super) async fn exchange(
        &mut self,
        request: http::Request<RequestBody>,
        client: Option<Client>,
    ) -> Result<(http::response::Parts, Exchange<'_>), LinkError> {
        self.poisoned = true;
        if !self.slot().is_idle() {
            return Err(HopError::Corrupt("the worker still holds the slot's last request").into());
        }
        let (parts, body) = request.into_parts();
        self.record.clear();
        let target = parts.uri.path_and_query().map_or(parts.uri.path(), |target| target.as_str());
        let headers = parts.headers.iter().map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()));
        message::encode_request_head(
            &mut self.record,
            body.len(),
            hop_version(parts.version),
            parts.method.as_str().as_bytes(),
            target.as_bytes(),
            client.as_ref().map_or(&b""[..], |client| &client.0[..]),
            headers,
        );
        {
            let slot = self.slot();
            if self.record.len() > slot.max_payload() || !slot.push(REQUEST_HEAD, &[&self.record])? {
                return Err(HopError::Corrupt("a request head does not fit an idle slot's ring").into());
            }
            slot.publish();
        }
        let mut exchange = Exchange { line: self, upload: Upload::new(body), head_read: false };
        loop {
            match exchange.step(&mut keep)? {
                Step::Record(RESPONSE_HEAD) => {
                    exchange.head_read = true;
                    let head = response_head(&exchange.line.response)?;
                    return Ok((head, exchange));
                }
                // The worker gave the request up when it heard that the client left mid-body.
                Step::Record(ABORT) if exchange.upload.cut => {
                    exchange.line.poisoned = false;
                    let why = String::from_utf8_lossy(&exchange.line.response).into_owned();
                    return Err(LinkError::Aborted(why));
                }
                Step::Record(_) => return Err(HopError::Corrupt("a response record before its head").into()),
                Step::Wait => exchange.wait().await?,
            }
        }
    }
}

/// Tells the worker that the client of a slot's request has gone (see [`FrontSlot::client_gone`]).
pub(super) struct ClientGoneSignal {
    link: Arc<HopLink>,
    index: usize,
}

impl ClientGoneSignal {
    pub(super) fn send(&self) {
        self.link.slot(self.index).client_gone();
    }
}

/// A request under way on a slot: the rest of its body going out, its response coming in.
pub(super) struct Exchange<'a> {
    line: &'a mut SlotLine,
    upload: Upload,
    head_read: bool,
}

enum Step {
    /// A response record was read (into the line's buffer); its kind.
    Record(u8),
    /// Nothing to read, and the upload cannot move: wait for the worker.
    Wait,
}

impl Exchange<'_> {
    /// Moves the upload as far as the request ring allows, then reads one response record. Body
    /// records are shown to `through` in place first, as many as are there; only what it did not
    /// use is read.
    fn step(&mut self, through: &mut Through<'_>) -> Result<Step, LinkError> {
        let slot = self.line.link.slot(self.line.index);
        self.upload.feed(&slot)?;
        let mut record = Vec::new();
        let popped = if self.head_read { slot.pop_through(&mut record, through)? } else { slot.pop(&mut record)? };
        match popped {
            Some(kind) => {
                self.line.response = record.into();
                Ok(Step::Record(kind))
            }
            None => Ok(Step::Wait),
        }
    }

    /// Waits until the slot's rings move or more of a body still arriving has come, or fails if
    /// the worker process exits. (A process being drained is still there: it finishes what it
    /// holds.)
    async fn wait(&mut self) -> Result<(), LinkError> {
        let link = &self.line.link;
        let upload = &self.upload;
        // The rings first, as what nearly every wake-up is for; a process gone is seen at the
        // next wait if the rings moved as it went.
        tokio::select! {
            biased;
            moved = link.moved(self.line.index) => moved.map_err(|Gone| LinkError::WorkerGone),
            () = upload.body.arrived(), if upload.arriving => Ok(()),
        }
    }

    /// The next piece of the response body if it is there; `Ok(None)` with nothing to read yet.
    /// Records `through` uses whole (and empty ones) are passed over: an empty piece says that
    /// some were, and nothing more is there yet.
    fn piece(&mut self, through: &mut Through<'_>) -> Result<Option<Option<Bytes>>, LinkError> {
        let mut passed_over = false;
        loop {
            return match self.step(through)? {
                Step::Wait if passed_over => Ok(Some(Some(Bytes::new()))),
                Step::Wait => Ok(None),
                Step::Record(BODY) if self.line.response.is_empty() => {
                    passed_over = true;
                    continue;
                }
                Step::Record(BODY) => Ok(Some(Some(std::mem::take(&mut self.line.response)))),
                Step::Record(END) => {
                    if !self.upload.is_done() {
                        return Err(HopError::Corrupt("the response ended before the request body was read").into());
                    }
                    self.line.poisoned = false;
                    Ok(Some(None))
                }
                Step::Record(ABORT) => {
                    // The app failed after its head: the worker ended the exchange cleanly, the
                    // client must see a cut response.
                    self.line.poisoned = !self.upload.is_done();
                    Err(LinkError::Aborted(String::from_utf8_lossy(&self.line.response).into_owned()))
                }
                Step::Record(_) => Err(HopError::Corrupt("an unexpected record in a response body").into()),
            };
        }
    }
}

impl WorkerBody for Exchange<'_> {
    const PASSES_THROUGH: bool = true;

    async fn now(&mut self) -> std::task::Poll<Option<Result<Bytes, LinkError>>> {
        debug_assert!(self.head_read);
        match self.piece(&mut keep) {
            Ok(Some(piece)) => std::task::Poll::Ready(piece.map(Ok)),
            Ok(None) => std::task::Poll::Pending,
            Err(err) => std::task::Poll::Ready(Some(Err(err))),
        }
    }

    async fn next(&mut self) -> Option<Result<Bytes, LinkError>> {
        self.next_through(&mut keep).await
    }

    async fn next_through(&mut self, through: &mut Through<'_>) -> Option<Result<Bytes, LinkError>> {
        loop {
            match self.piece(through) {
                Ok(Some(piece)) => return piece.map(Ok),
                Ok(None) => {
                    if let Err(err) = self.wait().await {
                        return Some(Err(err));
                    }
                }
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

/// A request body on its way into the request ring, one record at a time; or, for the rest of
/// a body that waits in a file, the file itself (`headway_hop::files`).
struct Upload {
    body: RequestBody,
    /// The part of the current piece not yet written.
    piece: Bytes,
    /// The body has no piece left to take.
    taken: bool,
    /// The worker could not be sent a file: the rest goes through the ring.
    no_files: bool,
    /// The body's next piece is still on its way from the client (a body queued early).
    arriving: bool,
    /// The body ended short, and the worker was told so.
    cut: bool,
}

impl Upload {
    fn new(body: RequestBody) -> Upload {
        Upload { body, piece: Bytes::new(), taken: false, no_files: false, arriving: false, cut: false }
    }

    fn is_done(&self) -> bool {
        self.taken && self.piece.is_empty()
    }

    /// Writes as much as fits now. When the ring is full, asks the worker to ring the doorbell
    /// when it has read some.
    fn feed(&mut self, slot: &FrontSlot<'_>) -> Result<(), LinkError> {
        let mut pushed = false;
        self.arriving = false;
        loop {
            let head = slot.request_head();
            if self.piece.is_empty() {
                if self.taken {
                    break;
                }
                match self.hand_file(slot)? {
                    Some(true) => pushed = true,
                    Some(false) if slot.want_space(head) => break,
                    Some(false) => {}
                    None => match self.body.poll_piece() {
                        Poll::Ready(Some(Ok(piece))) => self.piece = piece,
                        // The body ends short (its client went away before it sent the rest, or
                        // its file failed): the worker is told, and the exchange ends as any other.
                        Poll::Ready(Some(Err(spool::Truncated))) => {
                            if !slot.push(ABORT, &[b"the client went away before it sent the whole body"])? {
                                if slot.want_space(head) {
                                    break;
                                }
                                continue;
                            }
                            (pushed, self.taken, self.cut) = (true, true, true);
                            break;
                        }
                        Poll::Ready(None) => {
                            self.taken = true;
                            break;
                        }
                        Poll::Pending => {
                            self.arriving = true;
                            break;
                        }
                    },
                }
                continue;
            }
            let take = self.piece.len().min(slot.body_record());
            if slot.push(BODY, &[&self.piece[..take]])? {
                let _ = self.piece.split_to(take);
                pushed = true;
            } else if slot.want_space(head) {
                break;
            }
        }
        if pushed {
            slot.pushed();
        }
        Ok(())
    }

    /// Hands the worker the rest of the body as its file, if it waits in one: whether the record
    /// went on the ring (false: the ring is full for now); `None` when there is no file to hand,
    /// or it cannot be sent (the body's pieces go through the ring then).
    fn hand_file(&mut self, slot: &FrontSlot<'_>) -> Result<Option<bool>, LinkError> {
        if self.no_files {
            return Ok(None);
        }
        match self.body.offer_file(|file, offset, len| slot.push_file(file, offset, len)) {
            Err(HopError::Io(error)) => {
                tracing::debug!("a request body's file could not be handed to the worker: {error}");
                self.no_files = true;
                Ok(None)
            }
            offered => Ok(offered?),
        }
    }
}

/// A [`Through`] that uses nothing: every record is read out of the ring.
fn keep(_: &[IoSlice<'_>]) -> usize {
    0
}

/// The response head a worker wrote, checked as the front checks anything from outside. The
/// values share the record's memory rather than one allocation each, and lose the blanks around
/// them, as a `--cmd` worker's do when its head is parsed: apps write them (Django's
/// `Set-Cookie`), and HTTP/2 clients reset a stream whose field value has them.
fn response_head(record: &Bytes) -> Result<http::response::Parts, LinkError> {
    let head = message::decode_response_head(record)?;
    let status = StatusCode::from_u16(head.status).map_err(|_| HopError::Corrupt("an invalid status code"))?;
    let mut response = http::Response::new(());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(head.headers.len());
    for (name, value) in head.headers {
        let name = HeaderName::from_bytes(name).map_err(|_| HopError::Corrupt("an invalid header name"))?;
        let value = HeaderValue::from_maybe_shared(record.slice_ref(trim_blanks(value)))
            .map_err(|_| HopError::Corrupt("an invalid header value"))?;
        headers.append(name, value);
    }
    Ok(response.into_parts().0)
}

/// The version the app is told: HTTP/2 for a stream of an HTTP/2 connection, else what the
/// front's worker request says (HTTP/1.1 for every HTTP/1 client).
fn hop_version(version: http::Version) -> message::Version {
    match version {
        http::Version::HTTP_2 => message::Version::Http2,
        http::Version::HTTP_10 => message::Version::Http10,
        _ => message::Version::Http11,
    }
}
