//! A file's response, from the file and the request's conditional fields: `200` with the whole
//! file, `206` with the ranges asked (one as the body, several as the parts of a
//! `multipart/byteranges` body), `304` when the client's copy is current, `416` for ranges past
//! the end; always with the file's validators and `Accept-Ranges`. The same for a static mount and
//! for a worker's `X-Accel-Redirect`, whose status and fields it starts from.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::StatusCode;

use super::conditional::{Preconditions, Selection};
use super::file_io::PIECE;
use super::open_files::Opened;
use super::range::ByteRange;

/// The front's answer to a request under a mount.
pub enum StaticAnswer {
    File(FileResponse),
    /// Not there, with `:only`, or a path that tries to leave its directory.
    NotFound,
}

/// What the front sends for a file.
pub struct FileResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The bytes of the file to send; `None` for `HEAD`, `304` and `416`.
    pub body: Option<FileBody>,
}

/// A response's body: runs of a file, and between them the heads of a multipart body's parts.
pub struct FileBody {
    opened: Arc<Opened>,
    runs: VecDeque<Run>,
    len: u64,
}

/// A run of a body's bytes.
pub enum Run {
    /// Bytes the front made: a part's head, the closing boundary.
    Made(Bytes),
    /// `len` bytes of the file from `offset`.
    File { offset: u64, len: u64 },
}

impl Run {
    fn len(&self) -> u64 {
        match self {
            Run::Made(bytes) => bytes.len() as u64,
            Run::File { len, .. } => *len,
        }
    }
}

impl FileBody {
    fn new(opened: Arc<Opened>, runs: VecDeque<Run>) -> FileBody {
        let len = runs.iter().map(Run::len).sum();
        FileBody { opened, runs, len }
    }

    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn file(&self) -> &File {
        &self.opened.file
    }

    /// The next run to send, for a socket the kernel sends the file to.
    pub fn next_run(&mut self) -> Option<Run> {
        self.runs.pop_front()
    }

    /// Appends up to `most` bytes of what is left of the body to `out` (at least one, while
    /// there are any); `false` once it is all out. A file shorter than it was when opened is an
    /// `UnexpectedEof`.
    pub fn read_next(&mut self, out: &mut BytesMut, most: usize) -> io::Result<bool> {
        let Some(next) = self.runs.front() else { return Ok(false) };
        let start = out.len();
        out.resize(start + usize::try_from(next.len()).unwrap_or(usize::MAX).min(most), 0);
        match self.fill_next(&mut out[start..]) {
            Ok(filled) => {
                out.truncate(start + filled.unwrap_or(0));
                Ok(filled.is_some())
            }
            Err(err) => {
                out.truncate(start);
                Err(err)
            }
        }
    }

    /// Puts the next of the body at the start of `buf`: a part's head, or as much of the file as
    /// `buf` holds; how many bytes, `None` once it is all out. A copy through one buffer reuses
    /// it, with no zeroing a piece. A file shorter than it was when opened is an `UnexpectedEof`.
    pub fn fill_next(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let Some(run) = self.runs.pop_front() else { return Ok(None) };
        let (filled, rest) = match run {
            Run::Made(mut bytes) => {
                let filled = bytes.len().min(buf.len());
                buf[..filled].copy_from_slice(&bytes[..filled]);
                (filled, Run::Made(bytes.split_off(filled)))
            }
            Run::File { offset, len } => {
                let filled = usize::try_from(len).unwrap_or(usize::MAX).min(buf.len());
                self.opened.file.read_exact_at(&mut buf[..filled], offset)?;
                (filled, Run::File { offset: offset + filled as u64, len: len - filled as u64 })
            }
        };
        if rest.len() > 0 {
            self.runs.push_front(rest);
        }
        Ok(Some(filled))
    }

    /// The next piece of the body (at most [`PIECE`] of the file), for a stream that must see the
    /// bytes; `None` once it is all out.
    pub fn next_piece(&mut self) -> io::Result<Option<Bytes>> {
        let mut piece = BytesMut::new();
        Ok(self.read_next(&mut piece, PIECE)?.then(|| piece.freeze()))
    }
}

/// The response for `opened`, starting from `status` and `headers` (the worker's, or a mount's
/// content fields). Conditionals and ranges apply to a `200` only; `ranged`: a `Range` may apply
/// (a `GET`); `is_head`: the body is not sent, though its length is said.
pub fn file_response(
    opened: Arc<Opened>,
    status: StatusCode,
    mut headers: HeaderMap,
    preconditions: &Preconditions,
    ranged: bool,
    is_head: bool,
) -> FileResponse {
    let len = opened.len;
    let validators = &opened.validators;
    headers.entry(header::ETAG).or_insert_with(|| validators.etag.clone());
    headers.entry(header::LAST_MODIFIED).or_insert_with(|| validators.last_modified.clone());
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let selection =
        if status == StatusCode::OK { preconditions.select(validators, len, ranged) } else { Selection::Whole };
    let (status, runs) = match selection {
        Selection::NotModified => {
            headers.remove(header::CONTENT_TYPE);
            headers.remove(header::CONTENT_LENGTH);
            return FileResponse { status: StatusCode::NOT_MODIFIED, headers, body: None };
        }
        Selection::Unsatisfiable => {
            headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("digits"));
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            return FileResponse { status: StatusCode::RANGE_NOT_SATISFIABLE, headers, body: None };
        }
        Selection::Whole => (status, VecDeque::from([Run::File { offset: 0, len }])),
        Selection::Parts(ranges) => (StatusCode::PARTIAL_CONTENT, partial(&mut headers, &ranges, len)),
    };
    let body = FileBody::new(opened, runs);
    let content_length =
        if body.len() == len { body.opened.content_length.clone() } else { HeaderValue::from(body.len()) };
    headers.insert(header::CONTENT_LENGTH, content_length);
    let body = (!is_head && !body.is_empty()).then_some(body);
    FileResponse { status, headers, body }
}

/// The runs of a `206` body of `ranges` of a file of `len` bytes, and its fields: one range is the
/// body itself, with `Content-Range`; several are the parts of a `multipart/byteranges` body
/// (RFC 9110 section 14.6), each with the file's type and its own `Content-Range`.
fn partial(headers: &mut HeaderMap, ranges: &[ByteRange], len: u64) -> VecDeque<Run> {
    let content_range = |range: &ByteRange| format!("bytes {}-{}/{len}", range.start, range.end);
    let file_run = |range: &ByteRange| Run::File { offset: range.start, len: range.len() };
    if let [range] = ranges {
        headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&content_range(range)).expect("digits"));
        return VecDeque::from([file_run(range)]);
    }
    let boundary = format!("{:016x}", rand::random::<u64>());
    let content_type =
        headers.get(header::CONTENT_TYPE).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let multipart = format!("multipart/byteranges; boundary={boundary}");
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(&multipart).expect("hex digits"));
    let mut runs = VecDeque::with_capacity(2 * ranges.len() + 1);
    for (index, range) in ranges.iter().enumerate() {
        let mut head = String::with_capacity(128);
        head.push_str(if index == 0 { "--" } else { "\r\n--" });
        head.push_str(&boundary);
        if let Some(content_type) = &content_type {
            head.push_str("\r\nContent-Type: ");
            head.push_str(content_type);
        }
        head.push_str("\r\nContent-Range: ");
        head.push_str(&content_range(range));
        head.push_str("\r\n\r\n");
        runs.push_back(Run::Made(Bytes::from(head)));
        runs.push_back(file_run(range));
    }
    runs.push_back(Run::Made(Bytes::from(format!("\r\n--{boundary}--\r\n"))));
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::static_files::open_files::tests::opened;

    fn file_body(content: &[u8], runs: Vec<Run>) -> (tempfile::TempDir, FileBody) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, content).unwrap();
        (dir, FileBody::new(opened(&path), runs.into()))
    }

    #[test]
    fn a_body_fills_a_buffer_run_by_run_from_each_offset() {
        let made = Run::Made(Bytes::from_static(b"--head--"));
        let (_dir, mut body) = file_body(b"0123456789", vec![Run::File { offset: 2, len: 5 }, made]);
        let mut buf = [0; 3];
        let mut got = Vec::new();
        while let Some(filled) = body.fill_next(&mut buf).unwrap() {
            got.push(buf[..filled].to_vec());
        }
        assert_eq!(got, [&b"234"[..], b"56", b"--h", b"ead", b"--"]);
        let (_dir, mut body) = file_body(b"0123456789", vec![Run::File { offset: 8, len: 5 }]);
        let mut out = BytesMut::from("head:");
        let err = body.read_next(&mut out, usize::MAX).unwrap_err();
        assert_eq!((err.kind(), &out[..]), (io::ErrorKind::UnexpectedEof, &b"head:"[..]), "a file that shrank");
        let (_dir, mut body) = file_body(b"0123456789", vec![Run::File { offset: 0, len: 10 }]);
        assert!(body.read_next(&mut out, 4).unwrap() && body.read_next(&mut out, usize::MAX).unwrap());
        assert!(!body.read_next(&mut out, usize::MAX).unwrap());
        assert_eq!(out, "head:0123456789");
    }
}
