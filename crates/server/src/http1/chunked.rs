//! An incremental decoder for chunked request bodies (RFC 9112 section 7.1).
//!
//! The front must hold a request's whole body before the request may queue, so it decodes
//! chunked uploads itself, as bytes arrive, and forwards a plain `Content-Length` body. The
//! decoder is strict where leniency has enabled request smuggling: chunk sizes are hex digits
//! only, lines end in CRLF, chunk data is followed by CRLF. Extensions and trailer fields are
//! read, bounded, and dropped.

use bytes::BytesMut;
use http::StatusCode;

use super::HttpError;

/// Longest chunk-size line (size, extensions) we accept, and longest trailer section.
const MAX_LINE: usize = 4096;
/// 16 hex digits fill a u64.
const MAX_SIZE_DIGITS: usize = 16;

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
    /// After the last chunk: trailer lines until an empty line. `at_line_start` tells whether
    /// the current line is still empty.
    Trailer {
        at_line_start: bool,
    },
    /// Expecting the LF of a trailer line (or of the final empty line when `last`).
    TrailerLf {
        last: bool,
    },
    Done,
}

/// Decodes one chunked body; feed it bytes with [`ChunkedDecoder::decode`].
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    line_len: usize,
    trailer_len: usize,
    decoded: u64,
    max_body: u64,
}

impl ChunkedDecoder {
    pub fn new(max_body: u64) -> Self {
        ChunkedDecoder { state: State::Size { value: 0, digits: 0 }, line_len: 0, trailer_len: 0, decoded: 0, max_body }
    }

    /// Whether the terminating chunk and trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes as much of `input` as possible, appending body bytes to `out`. Returns how many
    /// bytes of `input` were consumed; that is all of them unless the body ended inside
    /// `input` (what follows then belongs to the next request).
    pub fn decode(&mut self, input: &[u8], out: &mut BytesMut) -> Result<usize, HttpError> {
        let mut pos = 0;
        while pos < input.len() && self.state != State::Done {
            let byte = input[pos];
            match self.state {
                State::Data { remaining } => {
                    let available = (input.len() - pos) as u64;
                    let take = remaining.min(available) as usize;
                    out.extend_from_slice(&input[pos..pos + take]);
                    pos += take;
                    let remaining = remaining - take as u64;
                    self.state = if remaining == 0 { State::DataCr } else { State::Data { remaining } };
                    continue;
                }
                State::Size { value, digits } => {
                    self.bump_line()?;
                    if let Some(digit) = (byte as char).to_digit(16) {
                        if digits == MAX_SIZE_DIGITS {
                            return Err(HttpError::bad_request("chunk size too large"));
                        }
                        self.state = State::Size { value: value << 4 | u64::from(digit), digits: digits + 1 };
                    } else if digits == 0 {
                        return Err(HttpError::bad_request("malformed chunk size"));
                    } else {
                        self.count(value)?;
                        self.state = State::Extension { size: value, in_extension: false };
                        continue; // re-read this byte as the start of the extension part
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
                        0 => State::Trailer { at_line_start: true },
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
                State::Trailer { at_line_start } => {
                    self.trailer_len += 1;
                    if self.trailer_len > MAX_LINE {
                        return Err(HttpError::new(
                            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                            "chunked trailer too large",
                        ));
                    }
                    match byte {
                        b'\r' => self.state = State::TrailerLf { last: at_line_start },
                        b'\n' => return Err(HttpError::bad_request("bare LF in chunked trailer")),
                        _ => self.state = State::Trailer { at_line_start: false },
                    }
                }
                State::TrailerLf { last } => {
                    if byte != b'\n' {
                        return Err(HttpError::bad_request("malformed chunked trailer"));
                    }
                    self.state = if last { State::Done } else { State::Trailer { at_line_start: true } };
                }
                State::Done => unreachable!("loop stops at Done"),
            }
            pos += 1;
        }
        Ok(pos)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes; returns the body and bytes consumed.
    fn decode_in_steps(input: &[u8], step: usize, max_body: u64) -> Result<(Vec<u8>, usize, bool), HttpError> {
        let mut decoder = ChunkedDecoder::new(max_body);
        let mut out = BytesMut::new();
        let mut consumed = 0;
        while consumed < input.len() && !decoder.is_done() {
            let end = (consumed + step).min(input.len());
            consumed += decoder.decode(&input[consumed..end], &mut out)?;
        }
        Ok((out.to_vec(), consumed, decoder.is_done()))
    }

    #[test]
    fn decodes_in_any_split() {
        let input = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        for step in 1..input.len() {
            let (body, consumed, done) = decode_in_steps(input, step, 1000).unwrap();
            assert_eq!(body, b"hello, world", "step {step}");
            assert!(done);
            assert_eq!(&input[consumed..], b"NEXT");
        }
    }

    #[test]
    fn hex_sizes_and_whitespace_before_extensions() {
        let (body, _, done) = decode_in_steps(b"A \t;x\r\n0123456789\r\n0\r\n\r\n", 64, 100).unwrap();
        assert_eq!(body, b"0123456789");
        assert!(done);
    }

    #[test]
    fn incomplete_body_is_not_done() {
        let (body, consumed, done) = decode_in_steps(b"5\r\nhel", 64, 100).unwrap();
        assert_eq!(body, b"hel");
        assert_eq!(consumed, 6);
        assert!(!done);
    }

    #[test]
    fn refuses_malformed_framing() {
        let cases: [&[u8]; 8] = [
            b"x\r\n",                 // not hex
            b"5\nhello\r\n0\r\n\r\n", // bare LF after size
            b"5\r\nhelloX\r\n",       // data not followed by CRLF
            b";ext\r\n",              // no size
            b"-5\r\n",
            b"0x5\r\nhello\r\n",
            b"11111111111111111\r\n", // 17 hex digits
            b"0\r\nX: y\n\r\n",       // bare LF in trailer
        ];
        for case in cases {
            let err = decode_in_steps(case, 64, u64::MAX).expect_err(&String::from_utf8_lossy(case));
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(case));
        }
    }

    #[test]
    fn body_limit_is_checked_before_data_arrives() {
        let err = decode_in_steps(b"3\r\nabc\r\n8\r\n", 64, 10).unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn oversized_trailer_is_refused() {
        let mut input = b"0\r\nX: ".to_vec();
        input.resize(input.len() + MAX_LINE + 10, b'a');
        let err = decode_in_steps(&input, 1024, 100).unwrap_err();
        assert_eq!(err.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
}
