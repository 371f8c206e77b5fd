//! The spool's producer end: a slot writing a response, or the front a request body.

use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::pace::{BEHIND, KEEPS_PACE};
use super::shared::{unread_in_file, End, Shared, State};
use super::spill::append;

/// Why a piece was not taken.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// No room within the limits now; the piece, back.
    #[error("no room to buffer the body")]
    Full(Bytes),
    /// The file failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The producer's end. Dropping it without [`Writer::finish`] marks the body as cut short.
pub struct Writer {
    pub(super) shared: Arc<Shared>,
}

impl Writer {
    /// Appends body bytes if there is room for them now.
    pub fn try_write(&self, data: Bytes) -> Result<(), WriteError> {
        let limits = &self.shared.limits;
        let mut state = self.shared.lock();
        if state.reader_gone || data.is_empty() {
            return Ok(());
        }
        let len = data.len();
        let unread_in_file = unread_in_file(&state);
        let no_file = limits.file == 0 || limits.disk.limit() == 0;
        let in_memory = state.memory_bytes + len <= limits.memory || (no_file && state.memory_bytes == 0);
        if !unread_in_file && in_memory {
            state.memory_bytes += len;
            state.written += len as u64;
            state.memory.push_back(data);
        } else {
            let written = state.spill.as_ref().map_or(0, |spill| spill.written);
            let over_cap = no_file || (written > 0 && written + len as u64 > limits.file);
            if over_cap || !limits.disk.take(len as u64) {
                state.writer_waits = true;
                return Err(WriteError::Full(data));
            }
            if let Err(err) = append(&mut state.spill, &data) {
                limits.disk.give_back(len as u64);
                return Err(err.into());
            }
        }
        drop(state);
        self.shared.readable.notify_one();
        Ok(())
    }

    /// Appends body bytes, waiting while there is no room (the reader is too far behind, or
    /// the disk budget is spent). Returns at once, taking nothing, once the reader is gone.
    pub async fn write(&self, mut data: Bytes) -> io::Result<()> {
        let disk = &self.shared.limits.disk;
        let mut counted = false;
        loop {
            let room = self.shared.room.notified();
            let freed = disk.freed.notified();
            tokio::pin!(room, freed);
            // Registered before the try, so room made in between is not missed.
            room.as_mut().enable();
            freed.as_mut().enable();
            match self.try_write(data) {
                Ok(()) => return Ok(()),
                Err(WriteError::Io(err)) => return Err(err),
                Err(WriteError::Full(back)) => data = back,
            }
            if !std::mem::replace(&mut counted, true) {
                disk.held_back.fetch_add(1, Ordering::Relaxed);
            }
            tokio::select! {
                () = room => {}
                () = freed => {}
            }
        }
    }

    /// Waits, if it must, until a piece of `len` bytes can go to memory: see the module's
    /// comment. Returns at once when it fits, when the body has gone to the file already, or when
    /// the reader is gone; otherwise when the reader has taken enough, or after the time a client
    /// keeping pace would need, after which the piece (and the rest) goes to the file.
    pub async fn room(&self, len: usize) {
        let memory = self.shared.limits.memory;
        self.keep_pace(|state| {
            let fits = state.memory_bytes + len <= memory || state.memory_bytes == 0;
            // What a client keeping pace has taken by the time this piece fits.
            (!fits).then(|| state.written + len as u64 - memory as u64)
        })
        .await;
    }

    /// Waits, if the body passes through ([`Writer::pass_through`]), until the reader waits with
    /// nothing buffered again, so that what comes next can pass; as [`Writer::room`], no longer
    /// than a client keeping pace would need to take what it was given.
    pub async fn passing(&self) {
        self.keep_pace(|state| {
            let passing = state.through.is_none() || (state.reader_waits && state.memory.is_empty());
            (!passing).then_some(state.written)
        })
        .await;
    }

    /// Writes the start of `parts` to the client's socket itself, if the reader waits with
    /// nothing buffered and passing through was set up
    /// ([`Reader::pass_through`](super::Reader::pass_through)): as much as the socket takes now,
    /// without waiting. Returns how many bytes went; the rest must go through [`Writer::write`],
    /// behind them.
    pub fn pass_through(&self, parts: &[IoSlice<'_>]) -> usize {
        let mut state = self.shared.lock();
        // (The body has not ended: its writer is here.)
        let idle = state.reader_waits && state.memory.is_empty() && !unread_in_file(&state) && !state.reader_gone;
        let Some(through) = state.through.as_mut().filter(|_| idle) else { return 0 };
        let sent = through.send(parts);
        state.passed += sent as u64;
        state.written += sent as u64;
        sent
    }

    /// Waits while `behind` says the reader must take more first (how much of the body, in all,
    /// it must have taken), for as long as a client keeping pace would need; returns at once once
    /// the body has gone to the file or the reader is gone.
    async fn keep_pace(&self, behind: impl Fn(&State) -> Option<u64>) {
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            // Registered before the look, so a take in between is not missed.
            room.as_mut().enable();
            let deadline = {
                let mut state = self.shared.lock();
                let due = match behind(&state) {
                    Some(due) if !state.reader_gone && state.spill.is_none() => due,
                    _ => return,
                };
                state.writer_waits = true;
                let since = *state.waiting_since.get_or_insert_with(tokio::time::Instant::now);
                since + Duration::from_secs_f64(due as f64 / KEEPS_PACE as f64) + BEHIND
            };
            if tokio::time::timeout_at(deadline, room).await.is_err() {
                return;
            }
        }
    }

    /// Marks the body complete.
    pub fn finish(self) {
        self.end(End::Complete);
    }

    /// Whether the reader is gone, so writing is pointless (but harmless).
    pub fn reader_gone(&self) -> bool {
        self.shared.lock().reader_gone
    }

    /// Resolves once the reader is gone.
    pub async fn reader_left(&self) {
        // `notify_one` keeps a permit, so a drop between the look and the wait is not missed.
        while !self.reader_gone() {
            self.shared.left.notified().await;
        }
    }

    fn end(&self, end: End) {
        let mut state = self.shared.lock();
        if state.end.is_none() {
            state.end = Some(end);
        }
        drop(state);
        self.shared.readable.notify_one();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.end(End::Truncated);
    }
}
