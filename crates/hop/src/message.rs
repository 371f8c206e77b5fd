//! What the records of a slot's rings carry.
//!
//! A request is a [`REQUEST_HEAD`] record, then [`BODY`] records until the body length the head
//! announced is reached (the front knows it: it read the whole body before the request queued,
//! or the body had a `Content-Length`). The rest of a body that waits in a file may come as one
//! [`BODY_FILE`] record instead, naming the file the front passed beside the ring
//! ([`crate::files`]). A body still arriving when the request queued may end early with
//! [`ABORT`]: its client went away, and the app is told so. A response is a [`RESPONSE_HEAD`]
//! record, [`BODY`] records, and [`END`]; or,
//! when the app fails after its head was written, [`ABORT`], after which the front cuts the
//! client's connection so the client sees a truncated response, not a complete one.
//!
//! The head records are a flat, length-prefixed encoding (little-endian) of what the HTTP/1.1
//! head would say: the worker turns it straight into a WSGI environ, and the front straight into
//! its response head, with no text to parse on either side.

use crate::error::HopError;

/// A request head ([`encode_request_head`]), first on the request ring.
pub const REQUEST_HEAD: u8 = 1;
/// A piece of a body, either way.
pub const BODY: u8 = 2;
/// A response head ([`encode_response_head`]), first on the response ring.
pub const RESPONSE_HEAD: u8 = 3;
/// The response is complete.
pub const END: u8 = 4;
/// A body ends early: the client went away (a request's), or the app failed (a response's).
pub const ABORT: u8 = 5;
/// The rest of a request body is a file the front sent beside the ring ([`BodyFile`]).
pub const BODY_FILE: u8 = 6;

/// Header fields as (name, value), borrowing a record's bytes.
pub type Fields<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The HTTP version the client spoke, as the app is told it (WSGI's `SERVER_PROTOCOL`, ASGI's
/// `http_version`). One byte: 0 and 1 are what a flag for HTTP/1.1 said before HTTP/2 came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0.
    Http10 = 0,
    /// HTTP/1.1.
    Http11 = 1,
    /// HTTP/2.
    Http2 = 2,
}

/// A request head as the worker reads it, borrowing the record's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// How many body bytes follow the head.
    pub body_len: u64,
    /// The HTTP version the client spoke.
    pub version: Version,
    /// `GET`, `POST`...
    pub method: &'a [u8],
    /// Origin form (`/path?query`) or `*`.
    pub target: &'a [u8],
    /// The client's address as the front judged it (trusting only trusted proxies' word),
    /// empty when nothing names one.
    pub client: &'a [u8],
    /// The header fields, in the order the client sent them.
    pub headers: Fields<'a>,
}

/// Appends the encoding of a request head to `out`.
///
/// ```
/// use headway_hop::message::{decode_request_head, encode_request_head, Version};
///
/// let mut record = Vec::new();
/// let headers = [(&b"host"[..], &b"example.com"[..])];
/// encode_request_head(&mut record, 5, Version::Http11, b"POST", b"/form?x=1", b"10.0.0.7", headers);
/// let head = decode_request_head(&record).unwrap();
/// assert_eq!((head.body_len, head.method, head.target), (5, &b"POST"[..], &b"/form?x=1"[..]));
/// assert_eq!(head.headers, headers);
/// ```
pub fn encode_request_head<'a>(
    out: &mut Vec<u8>,
    body_len: u64,
    version: Version,
    method: &[u8],
    target: &[u8],
    client: &[u8],
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.extend_from_slice(&body_len.to_le_bytes());
    out.push(version as u8);
    put_short(out, method);
    put_long(out, target);
    put_short(out, client);
    put_headers(out, headers);
}

/// Reads a [`REQUEST_HEAD`] record's payload; an encoding that does not add up is
/// [`HopError::Corrupt`].
pub fn decode_request_head(record: &[u8]) -> Result<RequestHead<'_>, HopError> {
    let mut reader = Reader(record);
    let body_len = u64::from_le_bytes(reader.take(8)?.try_into().expect("8 bytes"));
    let version = match reader.take(1)?[0] {
        0 => Version::Http10,
        1 => Version::Http11,
        2 => Version::Http2,
        _ => return Err(HopError::Corrupt("a request head of no HTTP version")),
    };
    let method = reader.short()?;
    let target = reader.long()?;
    let client = reader.short()?;
    let headers = reader.headers()?;
    reader.end()?;
    Ok(RequestHead { body_len, version, method, target, client, headers })
}

/// A response head as the front reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct ResponseHead<'a> {
    /// The status code.
    pub status: u16,
    /// The header fields, in the order the app gave them.
    pub headers: Fields<'a>,
}

/// Appends the encoding of a response head to `out`.
pub fn encode_response_head<'a>(
    out: &mut Vec<u8>,
    status: u16,
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.extend_from_slice(&status.to_le_bytes());
    put_headers(out, headers);
}

/// Reads a [`RESPONSE_HEAD`] record's payload; an encoding that does not add up is
/// [`HopError::Corrupt`].
pub fn decode_response_head(record: &[u8]) -> Result<ResponseHead<'_>, HopError> {
    let mut reader = Reader(record);
    let status = u16::from_le_bytes(reader.take(2)?.try_into().expect("2 bytes"));
    let headers = reader.headers()?;
    reader.end()?;
    Ok(ResponseHead { status, headers })
}

/// What a [`BODY_FILE`] record says: the body's next `len` bytes are those of the file sent as
/// `token`, from `offset` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFile {
    /// Which of the files sent beside the ring ([`crate::files`]).
    pub token: u64,
    /// Where in the file the bytes start.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
}

impl BodyFile {
    /// The length of a [`BODY_FILE`] record's payload.
    pub const ENCODED: usize = 24;

    /// The record's payload.
    pub fn encode(&self) -> [u8; BodyFile::ENCODED] {
        let mut record = [0u8; BodyFile::ENCODED];
        for (field, value) in record.chunks_exact_mut(8).zip([self.token, self.offset, self.len]) {
            field.copy_from_slice(&value.to_le_bytes());
        }
        record
    }

    /// Reads a record's payload; one that is not [`BodyFile::ENCODED`] bytes is [`HopError::Corrupt`].
    pub fn decode(record: &[u8]) -> Result<BodyFile, HopError> {
        let mut reader = Reader(record);
        let mut field = || Ok::<_, HopError>(u64::from_le_bytes(reader.take(8)?.try_into().expect("8 bytes")));
        let file = BodyFile { token: field()?, offset: field()?, len: field()? };
        reader.end()?;
        Ok(file)
    }
}

/// How many body bytes a request record stands for: a body record its payload, a file record
/// the file's part it names.
pub fn body_bytes(kind: u8, record: &[u8]) -> Result<u64, HopError> {
    match kind {
        BODY => Ok(record.len() as u64),
        BODY_FILE => Ok(BodyFile::decode(record)?.len),
        _ => Err(HopError::Corrupt("a request body record was expected")),
    }
}

fn put_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u16::try_from(bytes.len()).expect("a name is shorter than 64 KiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_long(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("a value is shorter than 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_headers<'a>(out: &mut Vec<u8>, headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) {
    let count_at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut count = 0u32;
    for (name, value) in headers {
        put_short(out, name);
        put_long(out, value);
        count += 1;
    }
    out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
}

/// Reads a record front to back, refusing anything that runs past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HopError> {
        if n > self.0.len() {
            return Err(HopError::Corrupt("a head record ends early"));
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(taken)
    }

    fn short(&mut self) -> Result<&'a [u8], HopError> {
        let len = u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes"));
        self.take(len as usize)
    }

    fn long(&mut self) -> Result<&'a [u8], HopError> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"));
        self.take(len as usize)
    }

    fn headers(&mut self) -> Result<Fields<'a>, HopError> {
        let count = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        // Each header takes at least 6 bytes: a count beyond that is a lie, not an allocation.
        if count > self.0.len() / 6 {
            return Err(HopError::Corrupt("more headers than bytes"));
        }
        let mut headers = Vec::with_capacity(count);
        for _ in 0..count {
            headers.push((self.short()?, self.long()?));
        }
        Ok(headers)
    }

    fn end(&self) -> Result<(), HopError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(HopError::Corrupt("bytes after the end of a head record"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_file_records_round_trip_and_count_their_bytes() {
        let file = BodyFile { token: 3, offset: 262_144, len: 1 << 30 };
        assert_eq!(BodyFile::decode(&file.encode()).unwrap(), file);
        assert_eq!(body_bytes(BODY_FILE, &file.encode()).unwrap(), 1 << 30);
        assert_eq!(body_bytes(BODY, b"abc").unwrap(), 3);
        assert!(BodyFile::decode(&file.encode()[..23]).is_err());
        assert!(body_bytes(END, b"").is_err());
    }

    #[test]
    fn request_heads_round_trip() {
        let headers: Vec<(&[u8], &[u8])> = vec![(b"host", b"example.com"), (b"x-forwarded-for", b"192.0.2.1")];
        let mut record = Vec::new();
        encode_request_head(
            &mut record,
            42,
            Version::Http2,
            b"POST",
            b"/p?q=1",
            b"203.0.113.9",
            headers.iter().copied(),
        );
        let head = decode_request_head(&record).unwrap();
        assert_eq!(
            head,
            RequestHead {
                body_len: 42,
                version: Version::Http2,
                method: b"POST",
                target: b"/p?q=1",
                client: b"203.0.113.9",
                headers: headers.clone()
            }
        );
    }

    #[test]
    fn response_heads_round_trip() {
        let headers: Vec<(&[u8], &[u8])> = vec![(b"content-type", b"text/plain"), (b"set-cookie", b"a=1")];
        let mut record = Vec::new();
        encode_response_head(&mut record, 404, headers.iter().copied());
        assert_eq!(decode_response_head(&record).unwrap(), ResponseHead { status: 404, headers });
    }

    #[test]
    fn truncated_and_lying_records_are_refused() {
        let mut record = Vec::new();
        encode_response_head(&mut record, 200, [(&b"a"[..], &b"b"[..])]);
        for cut in 0..record.len() {
            assert!(decode_response_head(&record[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = record.clone();
        longer.push(0);
        assert!(decode_response_head(&longer).is_err());
        // A header count of four billion in a short record.
        let lie = [200u8, 0, 255, 255, 255, 255];
        assert!(decode_response_head(&lie).is_err());
    }
}
