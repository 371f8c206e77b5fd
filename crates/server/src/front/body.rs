//! A request body as the front collects it before the request may queue, whichever protocol
//! carried it (HTTP/1.1 in [`super::read`], HTTP/2 in [`super::h2`]): in memory up to the request
//! buffer size, then in a spool (a temporary file past that), so a thousand waiting uploads do
//! not cost a thousand bodies of memory.

use bytes::Bytes;
use http::StatusCode;

use crate::job::RequestBody;
use crate::spool;
use headway_http1::HttpError;

pub(super) struct BodySink {
    pieces: Vec<Bytes>,
    len: u64,
    memory_limit: usize,
    spool: Option<(spool::Writer, spool::Reader)>,
}

impl BodySink {
    pub(super) fn new(memory_limit: usize) -> Self {
        BodySink { pieces: Vec::new(), len: 0, memory_limit, spool: None }
    }

    /// Body bytes so far.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Adds the next piece. Fails only when the spool's file cannot be written (500).
    pub(super) fn push(&mut self, data: Bytes) -> Result<(), HttpError> {
        self.len += data.len() as u64;
        if self.spool.is_none() && self.len <= self.memory_limit as u64 {
            self.pieces.push(data);
            return Ok(());
        }
        let (writer, _) = self.spool.get_or_insert_with(|| spool::channel(self.memory_limit));
        let spooled = self.pieces.drain(..).chain(std::iter::once(data)).try_for_each(|piece| writer.write(piece));
        spooled.map_err(|err| {
            tracing::warn!("cannot buffer a request body: {err}");
            HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot buffer the request body")
        })
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
