//! A body on its way between the front and a worker, held so neither side waits for the other
//! more than it must: a response from a slot to a slow client, a request body from a client to
//! the queue.
//!
//! A slot must be free as soon as its worker has finished a response, however slowly the
//! client reads: otherwise one slow reader holds a slot, and everyone queued behind it waits.
//! So the slot writes the body here as fast as the worker produces it, and the client's
//! connection reads it out at the client's pace. Memory is bounded per body: past the limit,
//! the rest goes to an unlinked temporary file (what nginx does with `proxy_buffering`), so a
//! thousand slow readers of large responses cost disk, not RAM.
//!
//! Disk is bounded too, as nginx bounds it with `proxy_max_temp_file_size`: a response's file
//! holds at most `--max-temp-file-size`, and every spool's file together at most
//! `--max-temp-disk` ([`DiskBudget`]). A response that reaches either is held back: the slot stops
//! reading the worker until its client has caught up (back-pressure, which then holds the slot,
//! the price of a client that far behind), rather than spooling without end. A file read to its
//! end is emptied, and its disk given back, so a client reading along costs no more than how far
//! it is behind. A request body that finds no room is refused (`front::read`): it cannot queue
//! half-read.
//!
//! A client that reads as fast as the worker writes should not pay for the disk: every byte past
//! the memory limit would be written to the file and read back, two more copies and the page
//! cache's churn for a body that never needed to wait. So a slot asks for room first
//! ([`Writer::room`]): while the body is in memory and the memory is full, it waits for the
//! client to take some, as long as the client keeps to the schedule of one reading at
//! [`KEEPS_PACE`] since the slot first waited, give or take [`BEHIND`] (a client on a busy
//! machine may not run for a while). A client that falls behind it is slow: the rest of its body
//! goes to the file at once, and the slot waits on it again only when the disk limits are met.
//!
//! A client that keeps pace need not be copied to either: while its connection waits for the next
//! piece with nothing buffered, the writer may write the body to the client's socket itself
//! ([`Reader::pass_through`], [`Writer::pass_through`]), straight from where the worker put it,
//! as much as the socket takes at once and never waiting for it; what it does not take goes
//! through the spool behind it, as before.
//!
//! File writes and reads are plain positioned I/O on a page-cache-backed file; they take
//! microseconds, so they run inline rather than on a blocking thread.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use headway_hop::files::read_at;
use socket2::SockRef;
use tokio::sync::Notify;

/// How much the reader takes from the file at a time: the hop's ring, which it fills in records.
const FILE_READ_CHUNK: usize = 256 * 1024;

/// A client that reads at least this fast (bytes a second) keeps pace with the worker: the slot
/// waits for it to make room in memory rather than spilling its body to disk. Any client on the
/// same host or a LAN does; one that does not is slow, and costs disk, not the slot's time.
pub const KEEPS_PACE: u64 = 64 << 20;
/// How far behind that schedule a client may fall before it counts as slow.
pub const BEHIND: Duration = Duration::from_millis(50);

/// The body could not be delivered whole: the worker failed mid-body, or the spill file failed.
#[derive(Debug, thiserror::Error)]
#[error("response body was cut short")]
pub struct Truncated;

/// `--max-temp-disk`: the disk the temporary files of every spool, request and response, may take
/// together.
#[derive(Debug)]
pub struct DiskBudget {
    limit: u64,
    used: AtomicU64,
    /// Times a spool's writer had to wait for room.
    held_back: AtomicU64,
    /// Notified whenever disk is given back.
    freed: Notify,
}

impl DiskBudget {
    pub fn new(limit: u64) -> Arc<DiskBudget> {
        Arc::new(DiskBudget { limit, used: AtomicU64::new(0), held_back: AtomicU64::new(0), freed: Notify::new() })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the spools' files hold now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn held_back(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit, or if nothing is taken (a piece larger than the whole budget
    /// must still go somewhere, once; a budget of 0 takes nothing ever).
    fn take(&self, bytes: u64) -> bool {
        let fits = |used: u64| {
            let total = used.checked_add(bytes)?;
            (total <= self.limit || (used == 0 && self.limit > 0)).then_some(total)
        };
        self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits).is_ok()
    }

    fn give_back(&self, bytes: u64) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            self.freed.notify_waiters();
        }
    }
}

/// Where a spool may hold a body, and how much.
#[derive(Debug, Clone)]
pub struct SpoolLimits {
    /// Bytes held in memory before the rest goes to a file.
    pub memory: usize,
    /// The most its file holds at once; 0: no file, the memory alone. (A single piece larger
    /// than either still goes where it is alone.)
    pub file: u64,
    pub disk: Arc<DiskBudget>,
}

#[cfg(test)]
impl SpoolLimits {
    /// `memory` bytes in memory, and any file on any disk.
    pub fn unbounded(memory: usize) -> SpoolLimits {
        SpoolLimits { memory, file: u64::MAX, disk: DiskBudget::new(u64::MAX) }
    }
}

/// Makes a spool within `limits`.
pub fn channel(limits: &SpoolLimits) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            memory: VecDeque::new(),
            memory_bytes: 0,
            spill: None,
            end: None,
            reader_gone: false,
            writer_waits: false,
            written: 0,
            waiting_since: None,
            through: None,
            reader_waits: false,
            passed: 0,
        }),
        readable: Notify::new(),
        left: Notify::new(),
        room: Notify::new(),
        limits: limits.clone(),
    });
    (Writer { shared: shared.clone() }, Reader { shared, file: None, handed_on: 0 })
}

struct Shared {
    state: Mutex<State>,
    readable: Notify,
    /// Notified when the reader is dropped (its client has gone).
    left: Notify,
    /// Notified when the reader makes room a waiting writer may use, or leaves.
    room: Notify,
    limits: SpoolLimits,
}

struct State {
    memory: VecDeque<Bytes>,
    memory_bytes: usize,
    /// Bytes go to the file while it holds any not yet read, so order is kept: memory first,
    /// then the file.
    spill: Option<Spill>,
    end: Option<End>,
    reader_gone: bool,
    /// The writer found no room and waits for the reader to make some.
    writer_waits: bool,
    /// Bytes given to the client so far: written to memory, or passed through.
    written: u64,
    /// When the slot first waited for room in memory: the start of the schedule a client keeping
    /// pace keeps.
    waiting_since: Option<tokio::time::Instant>,
    /// The client's socket, when the writer may write to it itself.
    through: Option<PassThrough>,
    /// The reader waits in [`Reader::next`]: nothing it was given is still being written.
    reader_waits: bool,
    /// Bytes the writer wrote to the socket itself, not yet counted by the reader.
    passed: u64,
}

/// A client's socket the writer may write the body to ([`Reader::pass_through`]).
struct PassThrough {
    socket: OwnedFd,
    /// Bytes the body may still put on the wire (the rest of its `Content-Length`).
    allowance: u64,
}

struct Spill {
    file: File,
    /// The file's length: what it takes of the disk budget.
    written: u64,
    read: u64,
}

#[derive(Clone, Copy)]
enum End {
    Complete,
    Truncated,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

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
    shared: Arc<Shared>,
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
        let no_file = limits.file == 0 || limits.disk.limit == 0;
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

    /// Writes the start of `parts` to the client's socket itself, if the reader waits with
    /// nothing buffered and passing through was set up ([`Reader::pass_through`]): as much as the
    /// socket takes now, without waiting. Returns how many bytes went; the rest must go through
    /// [`Writer::write`], behind them.
    pub fn pass_through(&self, parts: &[IoSlice<'_>]) -> usize {
        let mut state = self.shared.lock();
        // (The body has not ended: its writer is here.)
        let idle = state.reader_waits && state.memory.is_empty() && !unread_in_file(&state) && !state.reader_gone;
        let Some(through) = state.through.as_mut().filter(|_| idle) else { return 0 };
        // A socket that fails or is full takes nothing: the reader, writing the rest itself, sees
        // the same and deals with it.
        let sent = send_within(through.socket.as_fd(), parts, through.allowance).unwrap_or(0);
        through.allowance -= sent as u64;
        state.passed += sent as u64;
        state.written += sent as u64;
        sent
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

/// Whether the file holds bytes the reader has not read.
fn unread_in_file(state: &State) -> bool {
    state.spill.as_ref().is_some_and(|spill| spill.read < spill.written)
}

/// Sends what of `parts` the socket takes now, at most `allowance` bytes.
fn send_within(socket: BorrowedFd<'_>, parts: &[IoSlice<'_>], allowance: u64) -> io::Result<usize> {
    let mut left = usize::try_from(allowance).unwrap_or(usize::MAX);
    let within: Vec<IoSlice<'_>> = parts
        .iter()
        .map(|part| {
            let take = part.len().min(left);
            left -= take;
            IoSlice::new(&part[..take])
        })
        .collect();
    if within.iter().all(|part| part.is_empty()) {
        return Ok(0);
    }
    SockRef::from(&socket).send_vectored_with_flags(&within, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
}

/// Writes `data` at the end of the spill file, making the file first if there is none.
fn append(spill: &mut Option<Spill>, data: &[u8]) -> io::Result<()> {
    if spill.is_none() {
        *spill = Some(Spill { file: tempfile::tempfile()?, written: 0, read: 0 });
    }
    let spill = spill.as_mut().expect("just made");
    spill.file.write_all_at(data, spill.written)?;
    spill.written += data.len() as u64;
    Ok(())
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.end(End::Truncated);
    }
}

/// The consumer's end.
pub struct Reader {
    shared: Arc<Shared>,
    /// Our own handle on the spill file, so reads happen outside the lock.
    file: Option<File>,
    /// The disk a file handed on whole takes ([`Reader::offer_file`]), given back with the reader.
    handed_on: u64,
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

    /// Lets the writer write the body's next bytes to `socket` itself (the client's own socket,
    /// the body unframed on it), at most `allowance` bytes in all, whenever this reader waits in
    /// [`Reader::next`] with nothing buffered. [`Reader::passed`] says how many it wrote.
    pub fn pass_through(&mut self, socket: OwnedFd, allowance: u64) {
        self.shared.lock().through = Some(PassThrough { socket, allowance });
    }

    /// Bytes the writer wrote to the socket itself since the last call: they went out before
    /// whatever [`Reader::next`] returns next.
    pub fn passed(&mut self) -> u64 {
        std::mem::take(&mut self.shared.lock().passed)
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

    fn read_file(&mut self, file: io::Result<File>, offset: u64, len: usize) -> Result<Bytes, Truncated> {
        let file = file.map_err(|_| Truncated)?;
        let data = read_exact_at(&file, offset, len).map_err(|_| Truncated)?;
        self.file = Some(file);
        Ok(data.into())
    }
}

/// `len` bytes of `file` from `offset`, in a new buffer.
fn read_exact_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        if read_at(file.as_fd(), offset + data.len() as u64, len - data.len(), &mut data)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(data)
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

/// Tells a writer waiting for room that the reader made some.
fn wake_writer(shared: &Shared, state: &mut State) {
    if std::mem::take(&mut state.writer_waits) {
        shared.room.notify_waiters();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A spool of `memory` bytes in memory and a file of up to `file`, within a budget of its own
    /// (`disk` bytes).
    fn spool(memory: usize, file: u64, disk: u64) -> (Writer, Reader) {
        channel(&SpoolLimits { memory, file, disk: DiskBudget::new(disk) })
    }

    fn unbounded(memory: usize) -> (Writer, Reader) {
        channel(&SpoolLimits::unbounded(memory))
    }

    async fn read_all(reader: &mut Reader) -> Result<Vec<u8>, Truncated> {
        let mut body = Vec::new();
        while let Some(piece) = reader.next().await {
            body.extend_from_slice(&piece?);
        }
        Ok(body)
    }

    #[tokio::test]
    async fn small_body_stays_in_memory() {
        let (writer, mut reader) = unbounded(100);
        writer.try_write(Bytes::from_static(b"hello ")).unwrap();
        writer.try_write(Bytes::from_static(b"world")).unwrap();
        assert!(writer.shared.lock().spill.is_none());
        writer.finish();
        assert_eq!(read_all(&mut reader).await.unwrap(), b"hello world");
    }

    #[tokio::test]
    async fn large_body_spills_to_disk_in_order() {
        let (writer, mut reader) = unbounded(10);
        let pieces: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 1000 + i as usize]).collect();
        for piece in &pieces {
            writer.try_write(Bytes::from(piece.clone())).unwrap();
        }
        {
            let state = writer.shared.lock();
            assert!(state.memory_bytes <= 10, "memory bounded");
            assert!(state.spill.is_some());
        }
        writer.finish();
        assert_eq!(read_all(&mut reader).await.unwrap(), pieces.concat());
    }

    #[tokio::test]
    async fn a_complete_body_past_memory_hands_its_file_on_once_its_memory_is_read() {
        let disk = DiskBudget::new(u64::MAX);
        let (writer, mut reader) = channel(&SpoolLimits { memory: 4, file: u64::MAX, disk: disk.clone() });
        writer.try_write(Bytes::from_static(b"head")).unwrap();
        writer.try_write(Bytes::from_static(b"rest of it")).unwrap();
        let offer = |reader: &mut Reader, took: bool| {
            reader.offer_file(|file, offset, len| {
                let mut rest = vec![0u8; len as usize];
                File::from(file.try_clone_to_owned().unwrap()).read_exact_at(&mut rest, offset).unwrap();
                assert_eq!(rest, b"rest of it");
                Ok::<_, io::Error>(took)
            })
        };
        assert_eq!(offer(&mut reader, true).unwrap(), None, "not complete yet");
        writer.finish();
        assert_eq!(offer(&mut reader, true).unwrap(), None, "memory first");
        assert_eq!(reader.next().await.unwrap().unwrap(), &b"head"[..]);
        assert_eq!(offer(&mut reader, false).unwrap(), Some(false));
        assert_eq!(offer(&mut reader, true).unwrap(), Some(true));
        assert!(reader.next().await.is_none(), "the body ends at the file handed on");
        assert_eq!(disk.used(), 10, "its disk counted while the reader lives");
        drop(reader);
        assert_eq!(disk.used(), 0);
    }

    #[tokio::test]
    async fn reader_waits_for_writer_across_tasks() {
        let (writer, mut reader) = unbounded(4);
        let producer = tokio::spawn(async move {
            for i in 0..20u8 {
                writer.write(Bytes::from(vec![i; 3])).await.unwrap();
                tokio::task::yield_now().await;
            }
            writer.finish();
        });
        let body = read_all(&mut reader).await.unwrap();
        producer.await.unwrap();
        let expected: Vec<u8> = (0..20u8).flat_map(|i| [i; 3]).collect();
        assert_eq!(body, expected);
    }

    #[tokio::test]
    async fn a_waiting_reader_has_bytes_passed_straight_to_its_socket_within_the_allowance() {
        use std::io::Read;
        let (writer, mut reader) = unbounded(100);
        let (mut client, server) = std::os::unix::net::UnixStream::pair().unwrap();
        reader.pass_through(server.into(), 10);
        assert_eq!(writer.pass_through(&[IoSlice::new(b"early")]), 0, "the reader is not waiting yet");
        writer.try_write(Bytes::from_static(b"first")).unwrap();
        let reader = tokio::spawn(async move {
            let first = reader.next().await.unwrap().unwrap();
            let after = reader.next().await.unwrap().unwrap();
            (first, reader.passed(), after, reader)
        });
        while !writer.shared.lock().reader_waits || !writer.shared.lock().memory.is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(writer.pass_through(&[IoSlice::new(b"hel"), IoSlice::new(b"lo")]), 5);
        assert_eq!(writer.pass_through(&[IoSlice::new(b"world!!!")]), 5, "no further than the allowance");
        writer.try_write(Bytes::from_static(b"!!!")).unwrap();
        let (first, passed, after, mut reader) = reader.await.unwrap();
        assert_eq!((&first[..], passed, &after[..]), (&b"first"[..], 10, &b"!!!"[..]));
        let mut wire = [0u8; 10];
        client.read_exact(&mut wire).unwrap();
        assert_eq!(&wire, b"helloworld");
        assert_eq!(writer.pass_through(&[IoSlice::new(b"late")]), 0, "the reader is not waiting");
        writer.finish();
        assert!(reader.next().await.is_none());
    }

    #[tokio::test]
    async fn writer_dropped_early_truncates() {
        let (writer, mut reader) = unbounded(100);
        writer.try_write(Bytes::from_static(b"partial")).unwrap();
        drop(writer);
        assert_eq!(reader.next().await.unwrap().unwrap(), "partial");
        assert!(reader.next().await.unwrap().is_err());
    }

    #[tokio::test]
    async fn the_writer_hears_the_reader_leave() {
        let (writer, reader) = unbounded(100);
        let left = tokio::spawn(async move { writer.reader_left().await });
        tokio::task::yield_now().await;
        assert!(!left.is_finished());
        drop(reader);
        tokio::time::timeout(Duration::from_secs(10), left).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_keeps_pace_gets_the_body_from_memory_alone() {
        let (writer, mut reader) = unbounded(100);
        let producer = tokio::spawn(async move {
            for i in 0..50u8 {
                writer.room(60).await;
                writer.try_write(Bytes::from(vec![i; 60])).unwrap();
            }
            let spilled = writer.shared.lock().spill.is_some();
            writer.finish();
            spilled
        });
        let body = read_all(&mut reader).await.unwrap();
        assert!(!producer.await.unwrap(), "nothing spilled for a reader that kept up");
        assert_eq!(body, (0..50u8).flat_map(|i| [i; 60]).collect::<Vec<u8>>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_does_not_read_costs_disk_not_waiting() {
        let (writer, mut reader) = unbounded(2500);
        let started = tokio::time::Instant::now();
        for i in 0..20u8 {
            writer.room(1000).await;
            writer.try_write(Bytes::from(vec![i; 1000])).unwrap();
        }
        let waited = started.elapsed();
        assert!(writer.shared.lock().spill.is_some());
        // Two pieces fit; then one wait, until the client was too far behind a reader keeping
        // pace; then the rest went to disk without waiting.
        assert!(waited >= BEHIND && waited <= BEHIND + Duration::from_millis(1), "{waited:?}");
        writer.finish();
        assert_eq!(read_all(&mut reader).await.unwrap(), (0..20u8).flat_map(|i| [i; 1000]).collect::<Vec<u8>>());
    }

    #[tokio::test]
    async fn writes_after_reader_left_are_dropped() {
        let (writer, reader) = unbounded(1);
        drop(reader);
        assert!(writer.reader_gone());
        writer.try_write(Bytes::from(vec![0; 1000])).unwrap();
        assert!(writer.shared.lock().spill.is_none());
    }

    #[tokio::test]
    async fn a_full_file_holds_the_writer_back_until_the_reader_has_read_it() {
        let (writer, mut reader) = spool(10, 3000, u64::MAX);
        let disk = writer.shared.limits.disk.clone();
        for i in 0..3u8 {
            writer.try_write(Bytes::from(vec![i; 1000])).unwrap();
        }
        assert_eq!(disk.used(), 3000);
        assert!(matches!(writer.try_write(Bytes::from(vec![3; 1000])), Err(WriteError::Full(_))));
        let writer = tokio::spawn(async move {
            writer.write(Bytes::from(vec![3; 1000])).await.unwrap();
            writer.finish();
        });
        tokio::task::yield_now().await;
        assert!(!writer.is_finished(), "held back");
        assert_eq!(disk.held_back(), 1);
        let body = read_all(&mut reader).await.unwrap();
        writer.await.unwrap();
        assert_eq!(body, (0..4u8).flat_map(|i| [i; 1000]).collect::<Vec<u8>>());
        assert_eq!(disk.used(), 0, "a file read to its end is emptied");
    }

    #[tokio::test]
    async fn spools_share_the_disk_budget_and_a_reader_leaving_gives_its_share_back() {
        let disk = DiskBudget::new(2000);
        let limits = SpoolLimits { memory: 0, file: u64::MAX, disk: disk.clone() };
        let (first, first_reader) = channel(&limits);
        let (second, _second_reader) = channel(&limits);
        first.try_write(Bytes::from(vec![1; 1500])).unwrap();
        assert!(matches!(second.try_write(Bytes::from(vec![2; 1000])), Err(WriteError::Full(_))));
        let waiting = tokio::spawn(async move { second.write(Bytes::from(vec![2; 1000])).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first_reader); // its client left
        tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
        assert_eq!(disk.used(), 1000);
        drop(first);
    }

    #[tokio::test]
    async fn without_a_file_the_writer_waits_for_the_reader_to_take_from_memory() {
        let (writer, mut reader) = spool(4, 0, u64::MAX);
        writer.try_write(Bytes::from_static(b"abcd")).unwrap();
        assert!(matches!(writer.try_write(Bytes::from_static(b"efgh")), Err(WriteError::Full(_))));
        let writer = tokio::spawn(async move {
            writer.write(Bytes::from_static(b"efgh")).await.unwrap();
            writer.finish();
        });
        assert_eq!(read_all(&mut reader).await.unwrap(), b"abcdefgh");
        writer.await.unwrap();
        assert_eq!(reader.shared.limits.disk.used(), 0);
    }

    #[tokio::test]
    async fn a_piece_bigger_than_its_room_goes_whole_where_it_is_alone() {
        for (file, disk) in [(0, u64::MAX), (u64::MAX, 0), (4, 4)] {
            let (writer, mut reader) = spool(4, file, disk);
            writer.try_write(Bytes::from_static(b"a piece larger than memory")).unwrap();
            writer.try_write(Bytes::from_static(b"!")).unwrap_err();
            writer.finish();
            assert_eq!(read_all(&mut reader).await.unwrap(), b"a piece larger than memory", "{file} {disk}");
        }
    }
}
