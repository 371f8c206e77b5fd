//! A response body on its way from a slot to a client, held so the slot never waits for the
//! client.
//!
//! A slot must be free as soon as its worker has finished a response, however slowly the
//! client reads: otherwise one slow reader holds a slot, and everyone queued behind it waits.
//! So the slot writes the body here as fast as the worker produces it, and the client's
//! connection reads it out at the client's pace. Memory is bounded per response: past the
//! limit, the rest of the body goes to an unlinked temporary file (what nginx does with
//! `proxy_buffering`), so a thousand slow readers of large responses cost disk, not RAM.
//!
//! File writes and reads are plain positioned I/O on a page-cache-backed file; they take
//! microseconds, so they run inline rather than on a blocking thread.
//!
//! A client that reads as fast as the worker writes should not pay for the disk: every byte past
//! the memory limit would be written to the file and read back, two more copies and the page
//! cache's churn for a body that never needed to wait. So the slot asks for room first
//! ([`Writer::room`]): while the body is in memory and the memory is full, it waits for the
//! client to take some, as long as the client keeps to the schedule of one reading at
//! [`KEEPS_PACE`] since the slot first waited, give or take [`BEHIND`] (a client on a busy
//! machine may not run for a while). A client that falls behind it is slow: the rest of its body
//! goes to disk at once, and the slot never waits on it again. Either way the memory stays
//! within the limit.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;

/// How much the reader takes from the file at a time: a record of the hop's ring.
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

/// Makes a spool that keeps at most `memory_limit` bytes of body in memory.
pub fn channel(memory_limit: usize) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            memory: VecDeque::new(),
            memory_bytes: 0,
            spill: None,
            end: None,
            reader_gone: false,
            written: 0,
            waiting_since: None,
        }),
        readable: Notify::new(),
        left: Notify::new(),
        taken: Notify::new(),
        memory_limit,
    });
    (Writer { shared: shared.clone() }, Reader { shared, file: None })
}

struct Shared {
    state: Mutex<State>,
    readable: Notify,
    /// Notified when the reader is dropped (its client has gone).
    left: Notify,
    /// Notified when the reader takes bytes from memory.
    taken: Notify,
    memory_limit: usize,
}

struct State {
    memory: VecDeque<Bytes>,
    memory_bytes: usize,
    /// Once a body spills, everything after goes to the file, so order is kept: memory first,
    /// then the file.
    spill: Option<Spill>,
    end: Option<End>,
    reader_gone: bool,
    /// Bytes written to memory so far.
    written: u64,
    /// When the slot first waited for room: the start of the schedule a client keeping pace
    /// keeps.
    waiting_since: Option<tokio::time::Instant>,
}

struct Spill {
    file: File,
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

/// The slot's end. Dropping it without [`Writer::finish`] marks the body as cut short.
pub struct Writer {
    shared: Arc<Shared>,
}

impl Writer {
    /// Appends body bytes. Never waits: past the memory limit the bytes go to disk.
    pub fn write(&self, data: Bytes) -> io::Result<()> {
        let mut state = self.shared.lock();
        if state.reader_gone || data.is_empty() {
            return Ok(());
        }
        if state.spill.is_none() && state.memory_bytes + data.len() <= self.shared.memory_limit {
            state.memory_bytes += data.len();
            state.written += data.len() as u64;
            state.memory.push_back(data);
        } else {
            if state.spill.is_none() {
                state.spill = Some(Spill { file: tempfile::tempfile()?, written: 0, read: 0 });
            }
            let spill = state.spill.as_mut().expect("just created");
            spill.file.write_all_at(&data, spill.written)?;
            spill.written += data.len() as u64;
        }
        drop(state);
        self.shared.readable.notify_one();
        Ok(())
    }

    /// Waits, if it must, until a piece of `len` bytes can go to memory: see the module's
    /// comment. Returns at once when it fits, when the body has spilled already, or when the
    /// reader is gone; otherwise when the reader has taken enough, or after the time a client
    /// keeping pace would need, after which the piece (and the rest) spills.
    pub async fn room(&self, len: usize) {
        loop {
            let taken = self.shared.taken.notified();
            tokio::pin!(taken);
            // Registered before the look, so a take in between is not missed.
            taken.as_mut().enable();
            let deadline = {
                let mut state = self.shared.lock();
                if state.reader_gone
                    || state.spill.is_some()
                    || state.memory_bytes + len <= self.shared.memory_limit
                    || state.memory_bytes == 0
                {
                    return;
                }
                // By when a client keeping pace has taken what must go for this piece to fit.
                let since = *state.waiting_since.get_or_insert_with(tokio::time::Instant::now);
                let due = state.written + len as u64 - self.shared.memory_limit as u64;
                since + Duration::from_secs_f64(due as f64 / KEEPS_PACE as f64) + BEHIND
            };
            if tokio::time::timeout_at(deadline, taken).await.is_err() {
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

/// The client connection's end.
pub struct Reader {
    shared: Arc<Shared>,
    /// Our own handle on the spill file, so reads happen outside the lock.
    file: Option<File>,
}

impl Reader {
    /// The next piece of body: `None` once the body is complete, `Some(Err)` if it was cut
    /// short. Waits while the slot has nothing new.
    pub async fn next(&mut self) -> Option<Result<Bytes, Truncated>> {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            self.shared.readable.notified().await;
        }
    }

    /// Like [`Reader::next`] but never waits: `None` means nothing is available right now.
    pub fn try_next(&mut self) -> Option<Option<Result<Bytes, Truncated>>> {
        let mut state = self.shared.lock();
        if let Some(data) = state.memory.pop_front() {
            state.memory_bytes -= data.len();
            drop(state);
            self.shared.taken.notify_one();
            return Some(Some(Ok(data)));
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

    fn read_file(&mut self, file: io::Result<File>, offset: u64, len: usize) -> Result<Bytes, Truncated> {
        let file = file.map_err(|_| Truncated)?;
        let mut data = BytesMut::zeroed(len);
        file.read_exact_at(&mut data, offset).map_err(|_| Truncated)?;
        self.file = Some(file);
        Ok(data.freeze())
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.reader_gone = true;
        state.memory.clear();
        state.memory_bytes = 0;
        state.spill = None;
        drop(state);
        self.shared.left.notify_one();
        self.shared.taken.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(reader: &mut Reader) -> Result<Vec<u8>, Truncated> {
        let mut body = Vec::new();
        while let Some(piece) = reader.next().await {
            body.extend_from_slice(&piece?);
        }
        Ok(body)
    }

    #[tokio::test]
    async fn small_body_stays_in_memory() {
        let (writer, mut reader) = channel(100);
        writer.write(Bytes::from_static(b"hello ")).unwrap();
        writer.write(Bytes::from_static(b"world")).unwrap();
        assert!(writer.shared.lock().spill.is_none());
        writer.finish();
        assert_eq!(read_all(&mut reader).await.unwrap(), b"hello world");
    }

    #[tokio::test]
    async fn large_body_spills_to_disk_in_order() {
        let (writer, mut reader) = channel(10);
        let pieces: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 1000 + i as usize]).collect();
        for piece in &pieces {
            writer.write(Bytes::from(piece.clone())).unwrap();
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
    async fn reader_waits_for_writer_across_tasks() {
        let (writer, mut reader) = channel(4);
        let producer = tokio::spawn(async move {
            for i in 0..20u8 {
                writer.write(Bytes::from(vec![i; 3])).unwrap();
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
    async fn writer_dropped_early_truncates() {
        let (writer, mut reader) = channel(100);
        writer.write(Bytes::from_static(b"partial")).unwrap();
        drop(writer);
        assert_eq!(reader.next().await.unwrap().unwrap(), "partial");
        assert!(reader.next().await.unwrap().is_err());
    }

    #[tokio::test]
    async fn the_writer_hears_the_reader_leave() {
        let (writer, reader) = channel(100);
        let left = tokio::spawn(async move { writer.reader_left().await });
        tokio::task::yield_now().await;
        assert!(!left.is_finished());
        drop(reader);
        tokio::time::timeout(std::time::Duration::from_secs(10), left).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_keeps_pace_gets_the_body_from_memory_alone() {
        let (writer, mut reader) = channel(100);
        let producer = tokio::spawn(async move {
            for i in 0..50u8 {
                writer.room(60).await;
                writer.write(Bytes::from(vec![i; 60])).unwrap();
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
        let (writer, mut reader) = channel(2500);
        let started = tokio::time::Instant::now();
        for i in 0..20u8 {
            writer.room(1000).await;
            writer.write(Bytes::from(vec![i; 1000])).unwrap();
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
        let (writer, reader) = channel(1);
        drop(reader);
        assert!(writer.reader_gone());
        writer.write(Bytes::from(vec![0; 1000])).unwrap();
        assert!(writer.shared.lock().spill.is_none());
    }
}
