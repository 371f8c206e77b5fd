//! The shared-memory hop (`headway_hop`) as a transport: how the worker serves the headway front
//! that started it.
//!
//! Any of the T threads serves any slot. A thread that finishes a request claims the next
//! published one while it still holds the interpreter's lock ([`WorkerEnd::claim_waiting`] lets
//! go of it only to spin or sleep), so under load one thread serves request after request without
//! handing the lock over or sleeping; the other threads serve apps that block (woken for them
//! while the app's requests are seen to wait: [`WorkerEnd::claim_waiting`]). A claimed request is
//! one [`Exchange`]: its head record becomes a [`Request`] with the same rules as HTTP (the front
//! has already checked it), the body comes record by record as the app reads it, and the response
//! goes back as records the front frames for its client. What the app did not read of its upload
//! is taken off the ring before the slot is given back, so the next request starts clean.
//!
//! An ASGI worker serves the hop from its event loop's thread instead (`asgi::cycle`), which must
//! not wait: its exchanges are made so ([`Exchange::on_loop`]), and a read with nothing on the
//! ring fails with `WouldBlock` while output that does not fit is kept for
//! [`Exchange::try_flush`]; the loop asks the front to ring its work bell when the ring moves
//! ([`Exchange::arm_for_body`], [`Exchange::arm_for_output`]). Under load neither happens: the
//! front puts a request's head (and a small body) on the ring before it publishes the request,
//! and a small response fits the ring.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::runtime::{unlocked, Runtime};
use headway_hop::files::read_at;
use headway_hop::message::{self, ABORT, BODY, BODY_FILE, END, REQUEST_HEAD, RESPONSE_HEAD};
use headway_hop::worker::{WorkerEnd, WorkerSlot};
use headway_hop::HopError;

use crate::http::reader::ReadError;
use crate::http::request::{from_fields, Request};
use crate::http::response::ResponseHead;
use crate::http::HttpError;
use crate::transport::{Next, Serve, Transport};
use headway_http1::body::BodyEncoder;
use headway_http1::response;
use http::{StatusCode, Version};

/// Serves published requests with `serve` until the worker stops.
pub fn run_thread(runtime: &dyn Runtime, end: &Arc<WorkerEnd>, serve: &mut Serve<'_>) {
    while let Some(index) = end.claim_waiting(|wait| unlocked(runtime, wait)) {
        serve(Box::new(Exchange::new(end.clone(), index)));
    }
}

/// One claimed request, as a [`Transport`] that carries exactly it.
pub struct Exchange {
    end: Arc<WorkerEnd>,
    index: usize,
    stage: Stage,
    /// The request record just read, or the body bytes the app has not taken yet.
    record: Vec<u8>,
    /// Where the unread part of `record` starts.
    taken: usize,
    /// Request body bytes still on the ring.
    body_left: u64,
    /// The rest of the body, when the front handed it over as a file.
    file: Option<HandedFile>,
    is_head: bool,
    framing: BodyEncoder,
    /// False while served on an event loop's thread: see the module's comment.
    may_wait: bool,
    /// Response records that did not fit the ring when the exchange could not wait.
    pending: VecDeque<(u8, Vec<u8>)>,
    /// The end of the exchange (last record, reason), decided when the exchange could not wait
    /// for the rest of the upload to come off the ring.
    closing: Option<(u8, Vec<u8>)>,
    /// Where the front's writing of the request stood before the last read that found nothing.
    bytes_seen: u32,
    /// Where the front's reading of the response stood before the last record that did not fit.
    space_seen: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Claimed, its head not read yet.
    Claimed,
    /// Handed to the app; the response head not sent.
    Running,
    /// The response head is sent.
    Responding,
    /// The slot is given back: END or ABORT is written.
    Over,
}

impl Exchange {
    pub fn new(end: Arc<WorkerEnd>, index: usize) -> Exchange {
        Exchange {
            end,
            index,
            stage: Stage::Claimed,
            record: Vec::new(),
            taken: 0,
            body_left: 0,
            file: None,
            is_head: false,
            framing: BodyEncoder::NoBody,
            may_wait: true,
            pending: VecDeque::new(),
            closing: None,
            bytes_seen: 0,
            space_seen: 0,
        }
    }

    /// An exchange served on an event loop's thread, which must never wait (see the module's
    /// comment).
    pub fn on_loop(end: Arc<WorkerEnd>, index: usize) -> Exchange {
        Exchange { may_wait: false, ..Exchange::new(end, index) }
    }

    /// Whether output (or the end of the exchange) is kept back for [`Exchange::try_flush`].
    pub fn pending(&self) -> bool {
        !self.pending.is_empty() || self.closing.is_some()
    }

    fn slot(&self) -> WorkerSlot<'_> {
        self.end.slot(self.index)
    }

    /// Takes the next request record; `WouldBlock` if it is not there and the exchange may not
    /// wait.
    fn pop(&mut self, runtime: &dyn Runtime) -> io::Result<u8> {
        let (end, index) = (&self.end, self.index);
        let slot = end.slot(index);
        if self.may_wait {
            return slot.pop_waiting(&mut self.record, |wait| unlocked(runtime, wait)).map_err(io::Error::other);
        }
        // Where the front stood before the look: what a wait for more must compare with.
        let tail = slot.request_tail();
        let popped = slot.pop(&mut self.record).map_err(io::Error::other)?;
        popped.ok_or_else(|| {
            self.bytes_seen = tail;
            io::ErrorKind::WouldBlock.into()
        })
    }

    /// Writes a response record, after those kept back; one that does not fit is kept back if
    /// the exchange may not wait.
    fn push(&mut self, runtime: &dyn Runtime, kind: u8, parts: &[&[u8]]) -> io::Result<()> {
        if self.may_wait {
            self.push_pending(runtime)?;
            return self.slot().push_waiting(kind, parts, |wait| unlocked(runtime, wait)).map_err(io::Error::other);
        }
        if self.pending.is_empty() && self.try_push(kind, parts)? {
            self.slot().pushed();
        } else {
            self.pending.push_back((kind, parts.concat()));
        }
        Ok(())
    }

    /// One push that does not wait; noting, when the record does not fit, where the front's
    /// reading stood before it (what a wait for space must compare with).
    fn try_push(&mut self, kind: u8, parts: &[&[u8]]) -> io::Result<bool> {
        let slot = self.end.slot(self.index);
        let head = slot.response_head();
        let pushed = slot.push(kind, parts).map_err(io::Error::other)?;
        if !pushed {
            self.space_seen = head;
        }
        Ok(pushed)
    }

    fn push_pending(&mut self, runtime: &dyn Runtime) -> io::Result<()> {
        for (kind, payload) in std::mem::take(&mut self.pending) {
            self.slot().push_waiting(kind, &[&payload], |wait| unlocked(runtime, wait)).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// Pushes body bytes, in body records ([`WorkerSlot::body_record`]): the front copies one out
    /// while the next is written.
    fn push_body(&mut self, runtime: &dyn Runtime, data: &[u8]) -> io::Result<()> {
        for piece in data.chunks(self.slot().body_record()) {
            self.push(runtime, BODY, &[piece])?;
        }
        Ok(())
    }

    /// The request's head as the front encoded it; the exchange is running from here on. Never
    /// waits in fact: the front publishes a request once its head is on the ring.
    pub fn read_head_record(&mut self, runtime: &dyn Runtime) -> io::Result<message::RequestHead<'_>> {
        if self.pop(runtime)? != REQUEST_HEAD {
            return Err(io::Error::other(HopError::Corrupt("a request that does not start with its head")));
        }
        self.taken = self.record.len(); // the head is not body
        self.stage = Stage::Running;
        let head = message::decode_request_head(&self.record).map_err(io::Error::other)?;
        self.body_left = head.body_len;
        self.is_head = head.method == b"HEAD";
        Ok(head)
    }

    fn read_head(&mut self, runtime: &dyn Runtime) -> io::Result<Request> {
        let head = self.read_head_record(runtime)?;
        let version = match head.version {
            message::Version::Http10 => Version::HTTP_10,
            message::Version::Http11 => Version::HTTP_11,
            message::Version::Http2 => Version::HTTP_2,
        };
        let mut request = from_fields(head.method, head.target, version, head.headers.iter().copied())
            .map_err(|_| io::Error::other(HopError::Corrupt("a request head the front should have refused")))?;
        request.front_client = (!head.client.is_empty()).then(|| String::from_utf8_lossy(head.client).into_owned());
        Ok(request)
    }

    /// Whether request body bytes remain for the app to read (on the ring or still to come).
    pub fn body_remains(&self) -> bool {
        self.taken < self.record.len() || self.body_left > 0 || self.file.as_ref().is_some_and(|file| file.left > 0)
    }

    /// The next piece of the request body, at most `limit` bytes: of the unread rest of the body
    /// record at hand, or of the next one, or of the body's file; empty at the end of the body.
    pub fn body_piece(&mut self, runtime: &dyn Runtime, limit: usize) -> Result<&[u8], ReadError> {
        if limit == 0 {
            return Ok(&[]);
        }
        while self.taken == self.record.len() {
            if let Some(file) = self.file.as_mut().filter(|file| file.left > 0) {
                // A whole piece, whatever the app asked for: small reads are served from it.
                self.record.clear();
                file.read(runtime, FILE_READ, &mut self.record)?;
                self.taken = 0;
            } else if self.body_left == 0 || self.stage != Stage::Running && self.stage != Stage::Responding {
                return Ok(&[]);
            } else {
                self.take_body_record(runtime)?;
            }
        }
        let start = self.taken;
        self.taken += limit.min(self.record.len() - start);
        Ok(&self.record[start..self.taken])
    }

    /// Takes the next record of the request body off the ring: its bytes, or the file it names;
    /// or the front's word that the client went away before it sent the rest (`ABORT`), which
    /// ends the body, cut short.
    fn take_body_record(&mut self, runtime: &dyn Runtime) -> Result<(), ReadError> {
        let kind = self.pop(runtime)?;
        if kind == ABORT {
            (self.body_left, self.taken) = (0, 0);
            self.record.clear();
            return Err(ReadError::PeerClosed);
        }
        self.body_left =
            self.body_left.saturating_sub(message::body_bytes(kind, &self.record).map_err(io::Error::other)?);
        if kind == BODY_FILE {
            let (file, named) = self.slot().body_file(&self.record).map_err(io::Error::other)?;
            self.file = Some(HandedFile { file, offset: named.offset, left: named.len });
            self.record.clear();
        }
        self.taken = 0;
        Ok(())
    }

    /// Sends the response head, made of `code` and the app's `fields` (checked already), and
    /// the first body bytes. `content_length`: the app's own, if it gave one; `body_length`: the
    /// whole body's, when it is known now (then also sent for HEAD, as a GET would get it).
    pub fn respond<'a>(
        &mut self,
        runtime: &dyn Runtime,
        code: StatusCode,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
        content_length: Option<u64>,
        body_length: Option<u64>,
        data: &[u8],
    ) -> io::Result<()> {
        self.framing = response::body_encoder(self.is_head, code, Version::HTTP_11, content_length, body_length);
        // A length known only now (a list of bytes, a last body message) tells the front the
        // body's size; a response without a body (HEAD, 204, 304) says none the app did not give.
        let length = match self.framing {
            BodyEncoder::Length { promised, .. } if content_length.is_none() => Some(promised.to_string()),
            _ => None,
        };
        let length_field = length.as_ref().map(|length| (&b"Content-Length"[..], length.as_bytes()));
        let mut record =
            Vec::with_capacity(64 + fields.clone().map(|(name, value)| name.len() + value.len() + 6).sum::<usize>());
        // The fields' borrows shortened to the length's, made here, so that the two chain.
        let fields = fields.map(|(name, value)| -> (&[u8], &[u8]) { (name, value) });
        message::encode_response_head(&mut record, code.as_u16(), fields.chain(length_field));
        self.push(runtime, RESPONSE_HEAD, &[&record])?;
        self.stage = Stage::Responding;
        self.send_body(runtime, data)
    }

    /// Whether the client of this request has gone (the front marked the slot).
    pub fn is_client_gone(&self) -> bool {
        self.slot().is_client_gone()
    }

    /// Whether the request is a HEAD.
    pub fn is_head(&self) -> bool {
        self.is_head
    }

    /// For an exchange that may not wait, whose read of the body would block: asks the front to
    /// ring the work bell when it writes more. Returns false if it already has (read again at
    /// once, without waiting).
    pub fn arm_for_body(&self) -> bool {
        self.slot().arm_for_request(self.bytes_seen)
    }

    /// For an exchange that may not wait, with something kept back ([`Exchange::try_flush`]
    /// returned false): asks the front to ring the work bell when the ring moves the way it waits
    /// for (response space for output, request bytes for the end of an upload to take off the
    /// ring). Returns false if it already has (flush again at once).
    pub fn arm_for_output(&self) -> bool {
        if self.pending.is_empty() {
            self.slot().arm_for_request(self.bytes_seen)
        } else {
            self.slot().arm_for_space(self.space_seen)
        }
    }

    /// Sends what was kept back as far as the ring takes it, and ends the exchange if that was
    /// kept back too, never waiting; returns whether nothing is kept back any more.
    pub fn try_flush(&mut self, runtime: &dyn Runtime) -> io::Result<bool> {
        while let Some((kind, payload)) = self.pending.pop_front() {
            if !self.try_push(kind, &[&payload])? {
                self.pending.push_front((kind, payload));
                return Ok(false);
            }
            self.slot().pushed();
        }
        if let Some((last, why)) = self.closing.take() {
            self.close(runtime, last, &why)?;
        }
        Ok(!self.pending())
    }

    /// Ends the exchange: takes what is left of the upload off the ring, gives the slot back
    /// and writes the last record (`END`, or `ABORT` for a response that cannot be complete).
    /// An exchange that may not wait for the rest of the upload leaves that to `flush`.
    fn close(&mut self, runtime: &dyn Runtime, last: u8, why: &[u8]) -> io::Result<()> {
        if self.stage == Stage::Over || self.closing.is_some() {
            return Ok(());
        }
        while self.body_left > 0 {
            match self.take_body_record(runtime) {
                Ok(()) => {}
                Err(ReadError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.closing = Some((last, why.to_vec()));
                    return Ok(());
                }
                Err(_) => break,
            }
        }
        self.stage = Stage::Over;
        self.slot().release();
        let ended = self.push(runtime, last, &[why]);
        // Closed once the front has the end, without the lock: the last close of a body's file
        // frees its pages in the page cache, a millisecond for a large one.
        if let Some(file) = self.file.take() {
            unlocked(runtime, || drop(file));
        }
        ended
    }
}

impl Transport for Exchange {
    fn next_request(&mut self, runtime: &dyn Runtime) -> Next {
        if self.stage != Stage::Claimed {
            return Next::Closed; // one request per exchange
        }
        match self.read_head(runtime) {
            Ok(request) => Next::Request(request),
            Err(error) => {
                runtime.log(&format!("the front sent a broken request over the hop: {error}"));
                let _ = self.close(runtime, ABORT, b"broken request");
                Next::Closed
            }
        }
    }

    fn body_wanted(&mut self, _: &dyn Runtime) -> io::Result<()> {
        Ok(()) // the front read the whole body before the request queued: nobody waits for 100
    }

    fn read_body(&mut self, runtime: &dyn Runtime, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError> {
        // A large read from the body's file goes straight into `out`.
        let large = limit >= FILE_READ && self.taken == self.record.len();
        if let Some(file) = self.file.as_mut().filter(|file| large && file.left > 0) {
            return file.read(runtime, FILE_READ, out);
        }
        let piece = self.body_piece(runtime, limit)?;
        out.extend_from_slice(piece);
        Ok(piece.len())
    }

    fn body_left(&self) -> Option<u64> {
        if !matches!(self.stage, Stage::Running | Stage::Responding) {
            return Some(0); // as `body_piece` has it: the body is over
        }
        let file_left = self.file.as_ref().map_or(0, |file| file.left);
        Some((self.record.len() - self.taken) as u64 + self.body_left + file_left)
    }

    fn read_body_into(&mut self, runtime: &dyn Runtime, out: &mut [u8]) -> Result<usize, ReadError> {
        // Read from the body's file straight into `out`, once the record at hand is used up.
        if let Some(file) = self.file.as_mut().filter(|file| file.left > 0 && self.taken == self.record.len()) {
            return file.read_into(runtime, out);
        }
        let piece = self.body_piece(runtime, out.len())?;
        out[..piece.len()].copy_from_slice(piece);
        Ok(piece.len())
    }

    fn send_head(
        &mut self,
        runtime: &dyn Runtime,
        head: &ResponseHead,
        body_length: Option<u64>,
        data: &[u8],
    ) -> io::Result<()> {
        let fields = head.header_block.split(|&b| b == b'\n').filter_map(|line| {
            let line = line.strip_suffix(b"\r")?;
            let colon = line.iter().position(|&b| b == b':')?;
            Some((&line[..colon], line[colon + 1..].strip_prefix(b" ").unwrap_or(&line[colon + 1..])))
        });
        self.respond(runtime, head.code, fields, head.content_length, body_length, data)
    }

    fn send_body(&mut self, runtime: &dyn Runtime, data: &[u8]) -> io::Result<()> {
        // On a socket, a write to a client that left fails, and a streaming app stops there (its
        // close() runs). The ring would take the bytes all the same: the front's mark says it.
        if self.slot().is_client_gone() {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client is gone"));
        }
        let (data, broken) = self.framing.admit(data);
        if let Some(broken) = broken {
            runtime.log(&broken.to_string());
        }
        self.push_body(runtime, data)
    }

    fn send_file(&mut self, runtime: &dyn Runtime, fd: RawFd, offset: u64) -> io::Result<()> {
        // The ring is memory: the file is read into it (no sendfile across processes).
        let BodyEncoder::Length { remaining, .. } = self.framing else { return Ok(()) };
        // SAFETY: the caller keeps `fd` open for the call (a file wrapper's file).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let chunk = self.slot().body_record().min(remaining as usize);
        let mut buffer = Vec::with_capacity(chunk);
        let (mut offset, mut left) = (offset, remaining);
        while left > 0 {
            buffer.clear();
            let read = unlocked(runtime, || read_at(fd, offset, chunk.min(left as usize), &mut buffer))?;
            if read == 0 {
                break; // the file is shorter than promised: end_response reports it
            }
            self.send_body(runtime, &buffer)?;
            (offset, left) = (offset + read as u64, left - read as u64);
        }
        Ok(())
    }

    fn end_response(&mut self, runtime: &dyn Runtime) -> io::Result<()> {
        let (_, broken) = self.framing.end();
        match broken {
            // The front must not present a body short of its length as complete.
            Some(broken) => {
                runtime.log(&broken.to_string());
                self.close(runtime, ABORT, broken.to_string().as_bytes())
            }
            None => self.close(runtime, END, b""),
        }
    }

    fn send_error(&mut self, runtime: &dyn Runtime, error: &HttpError, is_head: bool) {
        let result = if self.stage == Stage::Responding {
            self.close(runtime, ABORT, error.reason.as_bytes())
        } else {
            let body = format!("{}\n", error.reason);
            let length = body.len().to_string();
            let fields: [(&[u8], &[u8]); 2] =
                [(b"Content-Type", b"text/plain; charset=utf-8"), (b"Content-Length", length.as_bytes())];
            let mut record = Vec::new();
            message::encode_response_head(&mut record, error.status.as_u16(), fields);
            self.push(runtime, RESPONSE_HEAD, &[&record])
                .and_then(|()| if is_head { Ok(()) } else { self.push_body(runtime, body.as_bytes()) })
                .and_then(|()| self.close(runtime, END, b""))
        };
        if let Err(error) = result {
            runtime.log(&format!("cannot answer over the hop: {error}"));
        }
    }

    fn finish(&mut self, runtime: &dyn Runtime) -> bool {
        self.abandon(runtime); // ended already, unless something went wrong
        false
    }

    fn abandon(&mut self, runtime: &dyn Runtime) {
        // A response left unended (the app failed after its head): the client sees it cut.
        if let Err(error) = self.close(runtime, ABORT, b"the response was not finished") {
            runtime.log(&format!("cannot end the exchange over the hop: {error}"));
        }
    }
}

/// How much is read from a body's file at once: what one piece given to the app may hold.
const FILE_READ: usize = 1 << 20;

/// The rest of a request body, in the file the front handed over: the worker reads it from the
/// page cache itself, with no copy through the ring.
struct HandedFile {
    file: File,
    offset: u64,
    left: u64,
}

impl HandedFile {
    /// Appends up to `limit` of the bytes left to `out`, without the interpreter's lock.
    fn read(&mut self, runtime: &dyn Runtime, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError> {
        let (fd, offset, want) = (self.file.as_fd(), self.offset, limit.min(self.left as usize));
        if want == 0 {
            return Ok(0);
        }
        let read = unlocked(runtime, || read_at(fd, offset, want, out)).map_err(ReadError::Io)?;
        self.consumed(read)
    }

    /// Reads up to `out.len()` of the bytes left into `out`, without the interpreter's lock.
    fn read_into(&mut self, runtime: &dyn Runtime, out: &mut [u8]) -> Result<usize, ReadError> {
        let want = out.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let (file, offset) = (&self.file, self.offset);
        let read = unlocked(runtime, || file.read_at(&mut out[..want], offset)).map_err(ReadError::Io)?;
        self.consumed(read)
    }

    /// Counts `read` bytes as read; none, while some are left, means the file is short.
    fn consumed(&mut self, read: usize) -> Result<usize, ReadError> {
        if read == 0 && self.left > 0 {
            return Err(ReadError::Io(io::Error::other("the request body's file is shorter than the front said")));
        }
        self.offset += read as u64;
        self.left -= read as u64;
        Ok(read)
    }
}
