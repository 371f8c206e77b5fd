//! The spool's consumer end: the client's connection reading a response, or a slot a request
//! body.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;

use super::pass_through::PassThrough;
use super::shared::{wake_writer, End, Shared};
use super::spill::read_exact_at;

/// How much the reader takes from the file at a time: the hop's ring, which it fills in records.
const FILE_READ_CHUNK: usize = 256 * 1024;

/// The body could not be delivered whole: the worker failed mid-body, or the spill file failed.
#[derive(Debug, thiserror::Error)]
#[error("response body was cut short")]
pub struct Truncated;

/// The consumer's end.
pub struct Reader {
    pub(super) shared: Arc<Shared>,
    /// Our own handle on the spill file, so reads happen outside the lock.
    pub(super) file: Option<File>,
    /// The disk a file handed on whole takes ([`Reader::offer_file`]), given back with the reader.
    pub(super) handed_on: u64,
}

impl Reader {
    /// The next piece of body: `None` once the body is complete, `Some(Err)` if it was cut
    /// short. Waits while the writer has nothing new.
    pub async fn next(&mut self) -> Option<Result<Bytes, Truncated>> {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            let _waits = ReaderWaits::start(&self.shared);
            self.shared.readable.notified().await;
        }
    }

    /// Resolves when the writer has written or ended since [`Reader::try_next`] last found
    /// nothing (or at once, if it did so in between): for a reader that polls the body among
    /// other things, as a slot feeding a request body that is still arriving.
    pub async fn arrived(&self) {
        self.shared.readable.notified().await;
    }

    /// Like [`Reader::next`] but never waits: `None` means nothing is available right now.
    pub fn try_next(&mut self) -> Option<Option<Result<Bytes, Truncated>>> {
        let mut state = self.shared.lock();
        // The last read of the file is done (reads come one at a time): a file read to its end
        // is emptied, under the lock the writer writes under.
        let emptied = match state.spill.as_mut() {
            Some(spill) if spill.read == spill.written && spill.written > 0 => {
                if spill.file.set_len(0).is_err() {
                    return Some(Some(Err(Truncated)));
                }
                spill.read = 0;
                std::mem::take(&mut spill.written)
            }
            _ => 0,
        };
        self.shared.limits.disk.give_back(emptied);
        if let Some(data) = state.memory.pop_front() {
            state.memory_bytes -= data.len();
            wake_writer(&self.shared, &mut state);
            return Some(Some(Ok(data)));
        }
        if emptied > 0 {
            wake_writer(&self.shared, &mut state);
        }
        if let Some(spill) = state.spill.as_mut() {
            if spill.read < spill.written {
                let offset = spill.read;
                let len = (spill.written - offset).min(FILE_READ_CHUNK as u64) as usize;
                spill.read += len as u64;
                let file = match self.file.take() {
                    Some(file) => Ok(file),
                    None => spill.file.try_clone(),
                };
                drop(state);
                return Some(Some(self.read_file(file, offset, len)));
            }
        }
        match state.end {
            Some(End::Complete) => Some(None),
            Some(End::Truncated) => Some(Some(Err(Truncated))),
            None => None,
        }
    }

    /// Offers the rest of a complete body, when all of it waits in the file, to `take`: the file,
    /// where the rest starts and its length, for a reader that reads the file itself (a worker
    /// process, given the descriptor). `take` says whether it took it; if it did, the body ends
    /// here for this reader, and the file's disk stays counted until the reader is dropped.
    /// `Ok(None)`: there is no such rest to offer.
    pub fn offer_file<E>(
        &mut self,
        take: impl FnOnce(BorrowedFd<'_>, u64, u64) -> Result<bool, E>,
    ) -> Result<Option<bool>, E> {
        let mut state = self.shared.lock();
        if !state.memory.is_empty() || !matches!(state.end, Some(End::Complete)) {
            return Ok(None);
        }
        let Some(spill) = state.spill.as_ref().filter(|spill| spill.read < spill.written) else { return Ok(None) };
        if !take(spill.file.as_fd(), spill.read, spill.written - spill.read)? {
            return Ok(Some(false));
        }
        // Out of the spool's hands: nothing here may empty the file under its new reader.
        self.handed_on = state.spill.take().map_or(0, |spill| spill.written);
        Ok(Some(true))
    }

    /// Lets the writer write the body's next bytes to `socket` itself (the client's own socket,
    /// the body unframed on it), at most `allowance` bytes in all, whenever this reader waits in
    /// [`Reader::next`] with nothing buffered. [`Reader::passed`] says how many it wrote.
    pub fn pass_through(&mut self, socket: OwnedFd, allowance: u64) {
        self.shared.lock().through = Some(PassThrough::new(socket, allowance));
    }

    /// Bytes the writer wrote to the socket itself since the last call: they went out before
    /// whatever [`Reader::next`] returns next.
    pub fn passed(&mut self) -> u64 {
        std::mem::take(&mut self.shared.lock().passed)
    }

    fn read_file(&mut self, file: io::Result<File>, offset: u64, len: usize) -> Result<Bytes, Truncated> {
        let file = file.map_err(|_| Truncated)?;
        let data = read_exact_at(&file, offset, len).map_err(|_| Truncated)?;
        self.file = Some(file);
        Ok(data.into())
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.reader_gone = true;
        state.through = None;
        state.memory.clear();
        state.memory_bytes = 0;
        let held = state.spill.take().map_or(0, |spill| spill.written) + self.handed_on;
        drop(state);
        self.shared.limits.disk.give_back(held);
        self.shared.left.notify_one();
        self.shared.room.notify_waiters();
    }
}

/// Marks the reader as waiting for as long as it is alive: the writer may pass bytes through
/// only then, when nothing the reader took is still on its way to the socket.
struct ReaderWaits<'a>(&'a Shared);

impl ReaderWaits<'_> {
    fn start(shared: &Shared) -> ReaderWaits<'_> {
        let mut state = shared.lock();
        state.reader_waits = true;
        wake_writer(shared, &mut state);
        drop(state);
        ReaderWaits(shared)
    }
}

impl Drop for ReaderWaits<'_> {
    fn drop(&mut self) {
        self.0.lock().reader_waits = false;
    }
}
