//! Message bodies on the wire: where one ends ([`BodyKind`]), decoding one as its bytes arrive
//! ([`BodyDecoder`], chunked coding included, RFC 9112 sections 6 and 7), and framing one for
//! the wire ([`BodyEncoder`]).
//!
//! The chunked decoder is strict where leniency has enabled request smuggling: chunk sizes are
//! hex digits only, every line ends in CRLF, chunk data is followed by CRLF, and trailer lines
//! are fields. Extensions and trailer fields are read, bounded, and dropped: no part of headway
//! passes trailers on.

use std::ops::Range;

use bytes::{BufMut, BytesMut};
use http::StatusCode;

use crate::error::HttpError;
use crate::fields::is_token;

/// Longest chunk-size line (size, extensions) accepted, and longest trailer section.
const MAX_LINE: usize = 4096;
/// 16 hex digits fill a u64.
const MAX_SIZE_DIGITS: usize = 16;

/// The last chunk of a chunked body, with no trailer fields.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Where a message's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows; its end is in the data.
    Chunked,
    /// The body runs until the connection closes (a response only).
    UntilClose,
}

/// What one step of decoding did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes of the input used (framing and data); the rest belongs to what comes next, or must
    /// be given again with more bytes after it.
    pub consumed: usize,
    /// Where in the input the body bytes of this step are (within the consumed part; empty when
    /// the step read only framing).
    pub data: Range<usize>,
}

/// Decodes one body as its bytes arrive: give it the bytes not yet used with
/// [`BodyDecoder::decode`] until [`BodyDecoder::is_done`].
///
/// ```
/// use headway_http1::body::{BodyDecoder, BodyKind};
///
/// let mut decoder = BodyDecoder::new(BodyKind::Chunked, 1 << 20);
/// let mut input = &b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET /next"[..];
/// let mut body = Vec::new();
/// while !decoder.is_done() {
///     let step = decoder.decode(input).unwrap();
///     body.extend_from_slice(&input[step.data]);
///     input = &input[step.consumed..];
/// }
/// assert_eq!(body, b"hello world");
/// assert_eq!(input, b"GET /next", "what follows the body is the next message's");
/// ```
#[derive(Debug)]
pub struct BodyDecoder {
    state: Decoding,
    /// Body bytes decoded so far.
    decoded: u64,
}

#[derive(Debug)]
enum Decoding {
    Length { remaining: u64 },
    Chunked(Chunked),
    UntilClose,
    Done,
}

impl BodyDecoder {
    /// A decoder for a body of `kind`; a chunked body larger than `max_body` is refused with
    /// 413 as soon as a chunk size says so (a `Content-Length` is checked by the head's parser).
    pub fn new(kind: BodyKind, max_body: u64) -> BodyDecoder {
        let state = match kind {
            BodyKind::Empty | BodyKind::Length(0) => Decoding::Done,
            BodyKind::Length(remaining) => Decoding::Length { remaining },
            BodyKind::Chunked => Decoding::Chunked(Chunked::new(max_body)),
            BodyKind::UntilClose => Decoding::UntilClose,
        };
        BodyDecoder { state, decoded: 0 }
    }

    /// Whether the whole body has been read.
    pub fn is_done(&self) -> bool {
        matches!(self.state, Decoding::Done)
    }

    /// Body bytes decoded so far.
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// Decodes from the start of `input`: framing up to the next body bytes, and those that are
    /// there. Call again with what was not consumed until it consumes nothing (more bytes are
    /// needed) or the body is done.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        let decoded = match &mut self.state {
            Decoding::Done => Decoded { consumed: 0, data: 0..0 },
            Decoding::Length { remaining } => {
                let take = (*remaining).min(input.len() as u64) as usize;
                *remaining -= take as u64;
                if *remaining == 0 {
                    self.state = Decoding::Done;
                }
                Decoded { consumed: take, data: 0..take }
            }
            Decoding::UntilClose => Decoded { consumed: input.len(), data: 0..input.len() },
            Decoding::Chunked(chunked) => {
                let decoded = chunked.decode(input)?;
                if chunked.is_done() {
                    self.state = Decoding::Done;
                }
                decoded
            }
        };
        self.decoded += decoded.data.len() as u64;
        Ok(decoded)
    }

    /// The connection ended: that completes a body that runs until the close; any other is cut
    /// short.
    pub fn finish_at_close(&mut self) -> Result<(), HttpError> {
        match self.state {
            Decoding::UntilClose | Decoding::Done => {
                self.state = Decoding::Done;
                Ok(())
            }
            _ => Err(HttpError::bad_request("the connection closed in the middle of a body")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size.
    Size {
        value: u64,
        digits: usize,
    },
    /// Past the size: optional whitespace and `;extensions` until CR.
    Extension {
        size: u64,
        in_extension: bool,
    },
    /// Expecting the LF that ends the chunk-size line.
    SizeLf {
        size: u64,
    },
    /// Inside chunk data.
    Data {
        remaining: u64,
    },
    /// Expecting the CR and then LF after chunk data.
    DataCr,
    DataLf,
    /// After the last chunk, at the start of a trailer line (or of the empty line that ends the
    /// body).
    TrailerStart,
    /// In a trailer field's name.
    TrailerName,
    /// In a trailer field's value.
    TrailerValue,
    /// Expecting the LF of a trailer line (or of the final empty line when `last`).
    TrailerLf {
        last: bool,
    },
    Done,
}

/// Decodes one chunked body.
#[derive(Debug)]
struct Chunked {
    state: State,
    line_len: usize,
    trailer_len: usize,
    decoded: u64,
    max_body: u64,
}

impl Chunked {
    fn new(max_body: u64) -> Self {
        Chunked { state: State::Size { value: 0, digits: 0 }, line_len: 0, trailer_len: 0, decoded: 0, max_body }
    }

    fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads framing from `input` up to chunk data, and the data that is there.
    fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        let mut pos = 0;
        while pos < input.len() && self.state != State::Done {
            let byte = input[pos];
            match self.state {
                State::Data { remaining } => {
                    let take = remaining.min((input.len() - pos) as u64) as usize;
                    let remaining = remaining - take as u64;
                    self.state = if remaining == 0 { State::DataCr } else { State::Data { remaining } };
                    return Ok(Decoded { consumed: pos + take, data: pos..pos + take });
                }
                State::Size { value, digits } => {
                    self.bump_line()?;
                    if let Some(digit) = (byte as char).to_digit(16) {
                        if digits == MAX_SIZE_DIGITS {
                            return Err(HttpError::bad_request("chunk size too large"));
                        }
                        self.state = State::Size { value: value << 4 | u64::from(digit), digits: digits + 1 };
                    } else if digits == 0 {
                        return Err(HttpError::bad_request("bad chunk size"));
                    } else {
                        self.count(value)?;
                        self.state = State::Extension { size: value, in_extension: false };
                        continue; // read this byte again as the start of the extension part
                    }
                }
                State::Extension { size, in_extension } => {
                    self.bump_line()?;
                    // Whitespace, then `;` and extensions, which are ignored: their syntax does
                    // not change framing, and their length is bounded by MAX_LINE.
                    match byte {
                        b'\r' => self.state = State::SizeLf { size },
                        b';' => self.state = State::Extension { size, in_extension: true },
                        b' ' | b'\t' => {}
                        _ if in_extension && (byte.is_ascii_graphic() || byte >= 0x80) => {}
                        _ => return Err(HttpError::bad_request("malformed chunk size line")),
                    }
                }
                State::SizeLf { size } => {
                    if byte != b'\n' {
                        return Err(HttpError::bad_request("malformed chunk size line"));
                    }
                    self.line_len = 0;
                    self.state = match size {
                        0 => State::TrailerStart,
                        remaining => State::Data { remaining },
                    };
                }
                State::DataCr => {
                    if byte != b'\r' {
                        return Err(HttpError::bad_request("chunk data not followed by CRLF"));
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if byte != b'\n' {
                        return Err(HttpError::bad_request("chunk data not followed by CRLF"));
                    }
                    self.state = State::Size { value: 0, digits: 0 };
                }
                State::TrailerStart | State::TrailerName | State::TrailerValue => {
                    self.trailer(byte)?;
                }
                State::TrailerLf { last } => {
                    if byte != b'\n' {
                        return Err(HttpError::bad_request("malformed chunked trailer"));
                    }
                    self.state = if last { State::Done } else { State::TrailerStart };
                }
                State::Done => unreachable!("the loop stops at Done"),
            }
            pos += 1;
        }
        Ok(Decoded { consumed: pos, data: pos..pos })
    }

    /// One byte of the trailer section: each line a field (`name: value`), the section ended by
    /// an empty line. Anything else (a line without a colon, a folded line, a bare LF) could be
    /// framed differently by another parser, and is refused.
    fn trailer(&mut self, byte: u8) -> Result<(), HttpError> {
        self.trailer_len += 1;
        if self.trailer_len > MAX_LINE {
            return Err(HttpError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "chunked trailer too large"));
        }
        let malformed = || HttpError::bad_request("malformed chunked trailer");
        self.state = match (self.state, byte) {
            (State::TrailerStart, b'\r') => State::TrailerLf { last: true },
            (State::TrailerStart | State::TrailerName, _) if is_token(&[byte]) => State::TrailerName,
            (State::TrailerName, b':') => State::TrailerValue,
            (State::TrailerValue, b'\r') => State::TrailerLf { last: false },
            (State::TrailerValue, b'\t') => State::TrailerValue,
            (State::TrailerValue, _) if byte >= b' ' && byte != 0x7f => State::TrailerValue,
            _ => return Err(malformed()),
        };
        Ok(())
    }

    fn bump_line(&mut self) -> Result<(), HttpError> {
        self.line_len += 1;
        if self.line_len > MAX_LINE {
            return Err(HttpError::bad_request("chunk size line too long"));
        }
        Ok(())
    }

    /// Counts a chunk against the body limit as soon as its size is known, before its data.
    fn count(&mut self, size: u64) -> Result<(), HttpError> {
        self.decoded = self.decoded.saturating_add(size);
        if self.decoded > self.max_body {
            return Err(HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"));
        }
        Ok(())
    }
}

/// Frames a body for the wire as its bytes come, keeping the sender to its word: bytes beyond a
/// `Content-Length` are dropped (the next message would otherwise start inside them), and a
/// body that ends short of it is reported, so the connection is closed rather than left out of
/// step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEncoder {
    /// A `Content-Length` body.
    Length {
        /// The length the head stated.
        promised: u64,
        /// What may still go on the wire.
        remaining: u64,
        /// More than `promised` came, and was reported.
        overflowed: bool,
    },
    /// Chunked coding: each piece framed as a chunk, and a last chunk at the end.
    Chunked,
    /// The body ends when the connection closes.
    UntilClose,
    /// No body may go on the wire.
    NoBody,
}

/// A body that broke its `Content-Length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// More bytes than promised came (reported once; the rest is dropped).
    Overrun {
        /// The length the head stated.
        promised: u64,
    },
    /// The body ended `missing` bytes short.
    Underrun {
        /// The length the head stated.
        promised: u64,
        /// The bytes that did not come.
        missing: u64,
    },
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Overrun { promised } => {
                write!(f, "app sent more bytes than its Content-Length ({promised}); the rest is dropped")
            }
            Broken::Underrun { promised, missing } => {
                write!(f, "app sent {missing} bytes fewer than its Content-Length ({promised}); closing the connection")
            }
        }
    }
}

impl BodyEncoder {
    /// A body of exactly `length` bytes.
    pub fn length(length: u64) -> BodyEncoder {
        BodyEncoder::Length { promised: length, remaining: length, overflowed: false }
    }

    /// The part of `data` that may go on the wire (all of it but past a `Content-Length`, none
    /// without a body), and an overrun the first time one happens. Chunked data still needs
    /// [`BodyEncoder::put`] (or its chunk framing) around it.
    pub fn admit<'d>(&mut self, data: &'d [u8]) -> (&'d [u8], Option<Broken>) {
        match self {
            BodyEncoder::Length { promised, remaining, overflowed } => {
                let mut broken = None;
                let mut data = data;
                if data.len() as u64 > *remaining {
                    if !*overflowed {
                        *overflowed = true;
                        broken = Some(Broken::Overrun { promised: *promised });
                    }
                    data = &data[..*remaining as usize];
                }
                *remaining -= data.len() as u64;
                (data, broken)
            }
            BodyEncoder::NoBody => (&[], None),
            BodyEncoder::Chunked | BodyEncoder::UntilClose => (data, None),
        }
    }

    /// How many more body bytes may go on the wire as they are, with nothing to frame them: the
    /// rest of a `Content-Length`, or any number before the close that ends the body. `None`
    /// when every piece needs framing (chunked) or none may go (no body).
    pub fn unframed_allowance(&self) -> Option<u64> {
        match *self {
            BodyEncoder::Length { remaining, .. } => Some(remaining),
            BodyEncoder::UntilClose => Some(u64::MAX),
            BodyEncoder::Chunked | BodyEncoder::NoBody => None,
        }
    }

    /// Counts `sent` bytes that went on the wire as they are, within
    /// [`BodyEncoder::unframed_allowance`].
    pub fn sent_unframed(&mut self, sent: u64) {
        if let BodyEncoder::Length { remaining, .. } = self {
            debug_assert!(sent <= *remaining, "past the allowance");
            *remaining -= sent.min(*remaining);
        }
    }

    /// Appends `data` (already admitted) as this framing carries it.
    pub fn put(&self, out: &mut BytesMut, data: &[u8]) {
        match self {
            BodyEncoder::Chunked => put_chunk(out, data),
            _ => out.put_slice(data),
        }
    }

    /// What ends the body on the wire, and whether it came out short.
    pub fn end(&self) -> (&'static [u8], Option<Broken>) {
        match *self {
            BodyEncoder::Chunked => (LAST_CHUNK, None),
            BodyEncoder::Length { promised, remaining, .. } if remaining > 0 => {
                (b"", Some(Broken::Underrun { promised, missing: remaining }))
            }
            _ => (b"", None),
        }
    }
}

/// Appends one chunk of a chunked body. Empty data writes nothing: an empty chunk would end
/// the body.
pub fn put_chunk(out: &mut BytesMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut size = [0u8; 16];
    let digits = hex_digits(data.len(), &mut size);
    out.reserve(digits.len() + data.len() + 4);
    out.put_slice(digits);
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// `n` in lower-case hex, written at the end of `buf`.
fn hex_digits(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            return &buf[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes; returns the body, the bytes consumed and
    /// whether the body ended.
    pub(crate) fn decode_in_steps(
        kind: BodyKind,
        input: &[u8],
        step: usize,
        max_body: u64,
    ) -> Result<(Vec<u8>, usize, bool), HttpError> {
        let mut decoder = BodyDecoder::new(kind, max_body);
        let mut body = Vec::new();
        let (mut consumed, mut available) = (0, 0);
        while !decoder.is_done() && consumed < input.len() {
            available = (available + step).min(input.len()).max(consumed);
            let decoded = decoder.decode(&input[consumed..available])?;
            body.extend_from_slice(&input[consumed..available][decoded.data]);
            consumed += decoded.consumed;
            if decoded.consumed == 0 && available == input.len() {
                break;
            }
        }
        assert_eq!(decoder.decoded(), body.len() as u64);
        Ok((body, consumed, decoder.is_done()))
    }

    #[test]
    fn chunked_decodes_in_any_split() {
        let input = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        for step in 1..input.len() {
            let (body, consumed, done) = decode_in_steps(BodyKind::Chunked, input, step, 1000).unwrap();
            assert_eq!(body, b"hello, world", "step {step}");
            assert!(done);
            assert_eq!(&input[consumed..], b"NEXT");
        }
    }

    #[test]
    fn hex_sizes_and_whitespace_before_extensions() {
        let (body, _, done) =
            decode_in_steps(BodyKind::Chunked, b"A \t;x\r\n0123456789\r\n0\r\n\r\n", 64, 100).unwrap();
        assert_eq!(body, b"0123456789");
        assert!(done);
    }

    #[test]
    fn an_incomplete_body_is_not_done() {
        let (body, consumed, done) = decode_in_steps(BodyKind::Chunked, b"5\r\nhel", 64, 100).unwrap();
        assert_eq!(body, b"hel");
        assert_eq!(consumed, 6);
        assert!(!done);
    }

    #[test]
    fn malformed_chunked_framing_is_refused() {
        let cases: [&[u8]; 13] = [
            b"x\r\n",                 // not hex
            b"5\nhello\r\n0\r\n\r\n", // bare LF after size
            b"5\r\nhelloX\r\n",       // data not followed by CRLF
            b";ext\r\n",              // no size
            b"-5\r\n",
            b"0x5\r\nhello\r\n",
            b"11111111111111111\r\n",     // 17 hex digits
            b"0\r\nX: y\n\r\n",           // bare LF in trailer
            b"0\r\nnot a field\r\n\r\n",  // a trailer line that is no field
            b"0\r\n: empty name\r\n\r\n", // nor this
            b"0\r\n folded\r\n\r\n",      // an obs-fold line
            b"0\r\nX: a\x00b\r\n\r\n",    // NUL in a trailer value
            b"0\r\n\n",                   // bare LF ends the trailer section
        ];
        for case in cases {
            let err = decode_in_steps(BodyKind::Chunked, case, 64, u64::MAX).expect_err(&String::from_utf8_lossy(case));
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(case));
        }
    }

    #[test]
    fn the_body_limit_is_checked_before_the_data_arrives() {
        let err = decode_in_steps(BodyKind::Chunked, b"3\r\nabc\r\n8\r\n", 64, 10).unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn an_oversized_trailer_is_refused() {
        let mut input = b"0\r\nX: ".to_vec();
        input.resize(input.len() + MAX_LINE + 10, b'a');
        let err = decode_in_steps(BodyKind::Chunked, &input, 1024, 100).unwrap_err();
        assert_eq!(err.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn fixed_lengths_and_close_delimited_bodies() {
        let (body, consumed, done) = decode_in_steps(BodyKind::Length(10), b"0123456789NEXT", 3, 0).unwrap();
        assert_eq!((body.as_slice(), consumed, done), (&b"0123456789"[..], 10, true));
        assert!(BodyDecoder::new(BodyKind::Empty, 0).is_done());
        assert!(BodyDecoder::new(BodyKind::Length(0), 0).is_done());
        let mut until_close = BodyDecoder::new(BodyKind::UntilClose, 0);
        assert_eq!(until_close.decode(b"abc").unwrap(), Decoded { consumed: 3, data: 0..3 });
        assert!(!until_close.is_done());
        assert!(until_close.finish_at_close().is_ok());
        let mut cut = BodyDecoder::new(BodyKind::Length(5), 0);
        cut.decode(b"abc").unwrap();
        assert!(cut.finish_at_close().is_err());
    }

    #[test]
    fn encoders_keep_the_sender_to_its_word() {
        let mut framing = BodyEncoder::length(5);
        assert_eq!(framing.admit(b"12345"), (&b"12345"[..], None));
        assert_eq!(framing.admit(b"67"), (&b""[..], Some(Broken::Overrun { promised: 5 })));
        assert_eq!(framing.admit(b"89"), (&b""[..], None)); // reported once
        let short = BodyEncoder::Length { promised: 100, remaining: 90, overflowed: false };
        assert_eq!(short.end(), (&b""[..], Some(Broken::Underrun { promised: 100, missing: 90 })));
        assert_eq!(BodyEncoder::Chunked.end(), (LAST_CHUNK, None));
        assert_eq!(BodyEncoder::NoBody.clone().admit(b"x"), (&b""[..], None));
    }

    #[test]
    fn bytes_sent_unframed_count_against_the_length() {
        let mut framing = BodyEncoder::length(10);
        assert_eq!(framing.unframed_allowance(), Some(10));
        framing.sent_unframed(7);
        assert_eq!(framing.unframed_allowance(), Some(3));
        assert_eq!(framing.admit(b"12345"), (&b"123"[..], Some(Broken::Overrun { promised: 10 })));
        assert_eq!(framing.end(), (&b""[..], None));
        assert_eq!(BodyEncoder::UntilClose.unframed_allowance(), Some(u64::MAX));
        assert_eq!(BodyEncoder::Chunked.unframed_allowance(), None);
        assert_eq!(BodyEncoder::NoBody.unframed_allowance(), None);
    }

    #[test]
    fn chunks() {
        let mut out = BytesMut::new();
        put_chunk(&mut out, b"hello world, hello!");
        put_chunk(&mut out, b"");
        BodyEncoder::Chunked.put(&mut out, &[b'x'; 26]);
        out.put_slice(LAST_CHUNK);
        let expected = [&b"13\r\nhello world, hello!\r\n1a\r\n"[..], &[b'x'; 26], b"\r\n0\r\n\r\n"].concat();
        assert_eq!(&out[..], &expected[..]);
        let mut big = BytesMut::new();
        put_chunk(&mut big, &vec![0; 0x10000]);
        assert!(big.starts_with(b"10000\r\n"));
    }
}
