//! Putting a file's bytes on the wire. On a plain socket (TCP or unix) the kernel sends them:
//! `sendfile(2)` from the page cache to the socket, as much as the socket takes, then the task
//! waits for room on tokio's readiness, as any write does, and holds no buffer and no thread
//! meanwhile. Through TLS, which must see the bytes, and HTTP/2, whose frames the `h2` crate
//! writes, the file is read a piece at a time, and the next piece only once the last went, so a
//! slow reader holds one piece of memory whatever the file's size. A small file goes with its
//! head in one write either way: one system call, one packet.
//!
//! Reading the file (and `sendfile` itself) runs on the front's threads: a page cache hit is a
//! copy, as nginx without `aio` does it; a cold disk makes them wait as it makes nginx wait.

use std::os::fd::AsFd;

use bytes::BytesMut;
use http::{Method, StatusCode, Version};

use super::accel::HandOff;
use super::file_io::{read_piece, PIECE};
use super::response::{FileBody, FileResponse, StaticAnswer};
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
        let declared = body.as_ref().map(|body| body.len);
        let encoder = body_encoder(body.is_none(), status, version, declared, None);
        let mut out = BytesMut::with_capacity(512);
        let persistence = write_head(&mut out, version, status, &headers, &encoder, persistence);
        let sent = |body_bytes| Sent { persistence, status, body_bytes, timing: None, websocket: None };
        let Some(FileBody { file, offset, len }) = body else {
            self.write(&out).await?;
            return Ok(sent(0));
        };
        if len <= SMALL_FILE {
            let piece = read_piece(&file, offset, len as usize)?;
            out.extend_from_slice(&piece);
            self.write(&out).await?;
            return cut_short(piece.len() as u64, len).map(|()| sent(len));
        }
        self.write(&out).await?;
        let io_timeout = self.front.settings.io_timeout;
        let mut done = 0;
        while done < len {
            let count = usize::try_from(len - done).unwrap_or(usize::MAX);
            let went = if self.io.socket().is_some() {
                within(io_timeout, self.io.send_file(file.as_fd(), offset + done, count.min(SENDFILE_MAX))).await?
            } else {
                let piece = read_piece(&file, offset + done, count.min(PIECE))?;
                self.write(&piece).await?;
                piece.len()
            };
            cut_short(went as u64, 1)?;
            done += went as u64;
        }
        Ok(sent(len))
    }
}

/// A file that gave fewer bytes than it promised has shrunk since it was opened: the response
/// cannot be completed, and the connection ends so that the client sees it cut.
fn cut_short(got: u64, wanted: u64) -> Result<(), End> {
    if got < wanted {
        tracing::warn!("a static file shrank while it was sent");
        return Err(End::Gone);
    }
    Ok(())
}
