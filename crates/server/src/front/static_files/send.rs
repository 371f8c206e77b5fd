//! Putting a file's bytes on the wire. On a plain socket (TCP or unix) the kernel sends them:
//! `sendfile(2)` from the page cache to the socket, as much as the socket takes, then the task
//! waits for room on tokio's readiness, as any write does, and holds no buffer and no thread
//! meanwhile. Through TLS, which must see the bytes, HTTP/2, whose frames the `h2` crate writes,
//! and for a large file to a client on this host ([`Sendfile`]), the file is read a piece at a
//! time, and the next piece only once the last went, so a slow reader holds one piece of memory
//! whatever the file's size. A small file goes with its head in one write either way: one system
//! call, one packet.
//!
//! Reading the file (and `sendfile` itself) runs on the front's threads: a page cache hit is a
//! copy, as nginx without `aio` does it; a cold disk makes them wait as it makes nginx wait.

use std::io;
use std::os::fd::AsFd;

use bytes::BytesMut;
use http::{Method, StatusCode, Version};

use super::accel::HandOff;
use super::file_io::PIECE;
use super::mounts::Sendfile;
use super::response::{FileBody, FileResponse, Run, StaticAnswer};
use crate::front::conn::{within, Connection, End};
use crate::front::health::plain_answer;
use crate::front::relay::Sent;
use crate::front::stream::ClientStream;
use crate::queue::job::Timing;
use headway_http1::response::{body_encoder, write_head, Persistence};

/// A file this small goes in the write of its head, read into it.
pub const SMALL_FILE: u64 = 32 * 1024;
/// The most one `sendfile` call is asked for: a slow socket takes less anyway, a fast one is
/// given its next piece at once.
const SENDFILE_MAX: usize = 1 << 20;
/// From this size up, a body goes to a client on this host copied rather than by `sendfile`: its
/// reads take the page cache's page-sized fragments at a higher cost a byte than a write's larger
/// ones, which outweighs the copy the front saves. Measured over loopback under `wrk`
/// (docs/design/static-files.md): from 4 MiB the copied file went faster for no more of the
/// host's CPU a request; at 1 MiB `sendfile` took less CPU for the same rate.
const COPIED_ON_THIS_HOST: u64 = 4 << 20;
/// The most of a copied file a socket holds unsent. Without a limit a task whose client read fast
/// wrote on while the others waited: `wrk -c64` of a 10 MiB file over loopback saw 1-4 % of its
/// requests past 2 s. With 256 KiB none passed 1.3 s; 128 KiB cost a tenth of the rate in more
/// wake-ups, 1 MiB let some wait 2 s again.
const UNSENT: u32 = 256 * 1024;

impl<S: ClientStream> Connection<S> {
    /// Answers a request a mount serves.
    pub(crate) async fn send_static(
        &mut self,
        version: Version,
        answer: StaticAnswer,
        persistence: Persistence,
        is_head: bool,
    ) -> Result<Sent, End> {
        match answer {
            StaticAnswer::File(response) => self.send_file_response(version, response, persistence).await,
            StaticAnswer::NotFound => self.send_plain(version, StatusCode::NOT_FOUND, persistence, is_head).await,
        }
    }

    /// Answers with the file a worker's response handed over, or the failure to take it.
    pub(crate) async fn send_handed_off(
        &mut self,
        method: &Method,
        version: Version,
        hand_off: HandOff,
        timing: Timing,
        persistence: Persistence,
    ) -> Result<Sent, End> {
        let stats = self.front.stats.clone();
        hand_off.count(&stats);
        let sent = match hand_off {
            HandOff::File(response) => {
                stats.response_sent(response.status);
                self.send_file_response(version, response, persistence).await?
            }
            failed => {
                let status = failed.failure_status();
                tracing::warn!("a worker's response: {}", failed.reason());
                stats.response_sent(status);
                self.send_plain(version, status, persistence, *method == Method::HEAD).await?
            }
        };
        Ok(Sent { timing: Some(timing), ..sent })
    }

    /// A plain response the front makes itself, its reason phrase as its text.
    async fn send_plain(
        &mut self,
        version: Version,
        status: StatusCode,
        persistence: Persistence,
        is_head: bool,
    ) -> Result<Sent, End> {
        let message = status.canonical_reason().unwrap_or("error");
        self.write(&plain_answer(version, status, message, persistence, is_head)).await?;
        let body_bytes = if is_head { 0 } else { message.len() as u64 + 1 };
        Ok(Sent { persistence, status, body_bytes, timing: None, websocket: None })
    }

    /// Writes a file response: its head, then its bytes.
    pub(crate) async fn send_file_response(
        &mut self,
        version: Version,
        response: FileResponse,
        persistence: Persistence,
    ) -> Result<Sent, End> {
        let FileResponse { status, headers, body } = response;
        let declared = body.as_ref().map(FileBody::len);
        let encoder = body_encoder(body.is_none(), status, version, declared, None);
        let mut out = BytesMut::with_capacity(512);
        let persistence = write_head(&mut out, version, status, &headers, &encoder, persistence);
        let sent = |body_bytes| Sent { persistence, status, body_bytes, timing: None, websocket: None };
        let Some(mut body) = body else {
            self.write(&out).await?;
            return Ok(sent(0));
        };
        let len = body.len();
        if len <= SMALL_FILE {
            while body.read_next(&mut out, usize::MAX).map_err(cut_short)? {}
            self.write(&out).await?;
            return Ok(sent(len));
        }
        self.write(&out).await?;
        if !self.sends_by_sendfile(len) {
            // Through TLS, or a large file to a client on this host: a piece at a time, one buffer.
            // The socket takes pieces while little of them waits unsent, so that copies to many
            // clients go out in turns; the socket's own limit comes back for the connection's next
            // responses.
            let unsent_before = self.limit_unsent(UNSENT);
            let mut piece = vec![0; PIECE];
            while let Some(filled) = body.fill_next(&mut piece).map_err(cut_short)? {
                self.write(&piece[..filled]).await?;
            }
            if let Some(before) = unsent_before {
                self.limit_unsent(before);
            }
            return Ok(sent(len));
        }
        let io_timeout = self.front.settings.io_timeout;
        while let Some(run) = body.next_run() {
            let (offset, len) = match run {
                Run::Made(bytes) => {
                    self.write(&bytes).await?;
                    continue;
                }
                Run::File { offset, len } => (offset, len),
            };
            let mut done = 0;
            while done < len {
                let count = usize::try_from(len - done).unwrap_or(usize::MAX).min(SENDFILE_MAX);
                let went = within(io_timeout, self.io.send_file(body.file().as_fd(), offset + done, count)).await?;
                if went == 0 {
                    return Err(cut_short(io::ErrorKind::UnexpectedEof.into()));
                }
                done += went as u64;
            }
        }
        Ok(sent(len))
    }

    /// [`ClientStream::limit_unsent`], a failure logged: the limit the socket had, if it took
    /// the new one.
    fn limit_unsent(&self, bytes: u32) -> Option<u32> {
        self.io.limit_unsent(bytes).inspect_err(|err| tracing::warn!("a socket's TCP_NOTSENT_LOWAT: {err}")).ok()
    }

    /// Whether a body of `len` bytes goes to this client by `sendfile(2)` (`--sendfile`): only a
    /// socket can take it so, and by default not a large one to a client on this host.
    fn sends_by_sendfile(&self, len: u64) -> bool {
        self.io.socket().is_some()
            && match self.front.settings.statics.sendfile {
                Sendfile::On => true,
                Sendfile::Off => false,
                Sendfile::Auto => len < COPIED_ON_THIS_HOST || !self.io.peer_on_this_host(),
            }
    }
}

/// A file that gave fewer bytes than it promised has shrunk since it was opened: the response
/// cannot be completed, and the connection ends so that the client sees it cut.
fn cut_short(err: io::Error) -> End {
    if err.kind() == io::ErrorKind::UnexpectedEof {
        tracing::warn!("a static file shrank while it was sent");
    }
    End::from(err)
}
