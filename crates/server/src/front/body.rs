//! A request body as the front collects it before the request may queue, whichever protocol
//! carried it (HTTP/1.1 in [`super::read`], HTTP/2 in [`super::h2`]): in memory up to the request
//! buffer size, then in a spool (a temporary file past that, within the disk budget), so a
//! thousand waiting uploads do not cost a thousand bodies of memory. A body the budget has no room
//! for is refused with 503: waiting for room would hold every upload while none can finish. A
//! large HTTP/1.1 body sent fast is handed on before its end ([`BodySink::queue_early`]), and its
//! rest follows it through the same spool ([`RestOfBody`]).

use std::time::Duration;

use bytes::Bytes;
use headway_http1::HttpError;
use http::StatusCode;
use tokio::time::Instant;

use crate::queue::job::RequestBody;
use crate::spool::{self, SpoolLimits, WriteError};

pub(super) struct BodySink<'a> {
    pieces: Vec<Bytes>,
    len: u64,
    limits: &'a SpoolLimits,
    spool: Option<(spool::Writer, spool::Reader)>,
}

impl<'a> BodySink<'a> {
    pub(super) fn new(limits: &'a SpoolLimits) -> Self {
        BodySink { pieces: Vec::new(), len: 0, limits, spool: None }
    }

    /// Body bytes so far.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Adds the next piece. Fails when the disk budget has no room for it (503) or the spool's
    /// file cannot be written (500).
    pub(super) fn push(&mut self, data: Bytes) -> Result<(), HttpError> {
        self.len += data.len() as u64;
        if self.spool.is_none() && self.len <= self.limits.memory as u64 {
            self.pieces.push(data);
            return Ok(());
        }
        let (writer, _) = self.spool.get_or_insert_with(|| spool::channel(self.limits));
        self.pieces
            .drain(..)
            .chain(std::iter::once(data))
            .try_for_each(|piece| writer.try_write(piece))
            .map_err(refusal)
    }

    /// Whether `more` bytes would take the body past the memory it may hold, to a spool's file.
    pub(super) fn would_spill(&self, more: usize) -> bool {
        self.spool.is_none() && self.len + more as u64 > self.limits.memory as u64
    }

    /// Hands on the body so far, still all in memory, as a spooled body of `length` bytes in
    /// all whose rest is still to come: [`RestOfBody`] takes it, behind what the reader has.
    pub(super) fn queue_early(self, length: u64) -> (RequestBody, RestOfBody) {
        debug_assert!(self.spool.is_none() && self.len <= self.limits.memory as u64);
        let (writer, reader) = spool::channel(self.limits);
        for piece in self.pieces {
            writer.try_write(piece).expect("what fits the memory limit fits an empty spool's memory");
        }
        (RequestBody::Spooled { reader, len: length }, RestOfBody { writer })
    }

    pub(super) fn finish(self) -> RequestBody {
        match self.spool {
            Some((writer, reader)) => {
                writer.finish();
                RequestBody::Spooled { reader, len: self.len }
            }
            None if self.pieces.len() == 1 => RequestBody::Memory(self.pieces.into_iter().next().expect("one piece")),
            None => RequestBody::Memory(self.pieces.concat().into()),
        }
    }
}

/// The rest of a body handed on before its end ([`BodySink::queue_early`]): what the client sends
/// next goes on behind what the slot has. Dropped without [`RestOfBody::finish`], the body is cut
/// short for whoever reads it.
pub(super) struct RestOfBody {
    writer: spool::Writer,
}

impl RestOfBody {
    /// Adds the next piece, as [`BodySink::push`]; first waits, as a slot writing a response
    /// does ([`spool::Writer::room`]), for a slot reading along to make room in memory, so that
    /// a body read as it arrives never goes through the file. Returns how long it waited.
    pub(super) async fn push(&mut self, data: Bytes) -> Result<Duration, HttpError> {
        let waited = Instant::now();
        self.writer.room(data.len()).await;
        let waited = waited.elapsed();
        self.writer.try_write(data).map_err(refusal)?;
        Ok(waited)
    }

    pub(super) fn finish(self) {
        self.writer.finish();
    }
}

/// The status for a piece the spool could not take.
fn refusal(err: WriteError) -> HttpError {
    match err {
        WriteError::Full(_) => {
            HttpError::new(StatusCode::SERVICE_UNAVAILABLE, "server busy: no room to buffer the request body")
        }
        WriteError::Io(err) => {
            tracing::warn!("cannot buffer a request body: {err}");
            HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot buffer the request body")
        }
    }
}
