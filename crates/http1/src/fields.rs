//! The rules of single header fields that decide how a message is framed and whether its
//! connection persists, shared by requests and responses: `Content-Length`, `Transfer-Encoding`,
//! `Connection`, and the connection-specific fields a proxy never forwards.
//!
//! Each rule is written once, strict where leniency has let two parsers frame the same bytes
//! differently: a `Content-Length` is digits and nothing else (a list only of one same number),
//! `chunked` is the only transfer-coding headway decodes and it may appear once.

use http::header::{self, HeaderMap, HeaderName};
use http::Version;

/// RFC 9110 `tchar`: what header names, methods and URL schemes are made of.
pub fn is_token(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(|&b| is_tchar(b))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `bytes` without leading and trailing spaces and tabs (RFC 9110's optional whitespace).
pub fn trim_blanks(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |last| last + 1);
    &bytes[start..end]
}

/// The items of a comma-separated field value, trimmed, empty ones skipped.
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_blanks).filter(|item| !item.is_empty())
}

/// The items of every field named `name` in `headers`.
pub fn comma_tokens<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a [u8]> {
    headers.get_all(name).iter().flat_map(|value| list_items(value.as_bytes()))
}

/// Whether any field named `name` lists `token` (case-insensitively).
pub fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    comma_tokens(headers, name).any(|item| item.eq_ignore_ascii_case(token.as_bytes()))
}

/// The body length the `Content-Length` values say, if there are any. Several fields or a list
/// are acceptable only when every item is the same number (RFC 9110 section 8.6); anything but
/// digits is refused, so `+5`, `0x5` and `5 5` never reach a parser that might read them.
pub fn content_length<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<u64>, &'static str> {
    let mut length: Option<u64> = None;
    for value in values {
        for item in value.split(|&b| b == b',') {
            let item = trim_blanks(item);
            // 19 digits always fit a u64.
            if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
                return Err("bad Content-Length");
            }
            let n = item.iter().fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
            if length.is_some_and(|seen| seen != n) {
                return Err("conflicting Content-Length values");
            }
            length = Some(n);
        }
    }
    Ok(length)
}

/// What the `Transfer-Encoding` values ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// Exactly `chunked`, once: the only coding headway decodes.
    Chunked,
    /// A coding other than `chunked` (gzip, a typo...): the body cannot be framed.
    Unsupported,
    /// `chunked` more than once.
    Repeated,
}

/// The transfer-coding of a message with these `Transfer-Encoding` values; `None` without any.
pub fn transfer_coding<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<Coding> {
    let mut chunked = 0;
    let mut any = false;
    for value in values {
        any = true;
        for item in list_items(value) {
            if !item.eq_ignore_ascii_case(b"chunked") {
                return Some(Coding::Unsupported);
            }
            chunked += 1;
        }
    }
    match chunked {
        _ if !any => None,
        0 => Some(Coding::Unsupported),
        1 => Some(Coding::Chunked),
        _ => Some(Coding::Repeated),
    }
}

/// Whether a message of `version` with these `Connection` values leaves its connection open for
/// another: HTTP/1.1 unless `close`, HTTP/1.0 only with `keep-alive` (RFC 9112 section 9.3).
pub fn persists<'a>(version: Version, connection: impl IntoIterator<Item = &'a [u8]>) -> bool {
    let (mut close, mut keep_alive) = (false, false);
    for value in connection {
        for item in list_items(value) {
            close |= item.eq_ignore_ascii_case(b"close");
            keep_alive |= item.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    !close && (version == Version::HTTP_11 || keep_alive)
}

/// Connection-specific fields: they describe one connection, not the message (RFC 9110 section
/// 7.6.1). The front never
/// forwards them in either direction; it decides framing and persistence itself.
const CONNECTION_FIELDS: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the connection-specific fields, including every field named in `Connection`.
pub fn strip_connection_fields(headers: &mut HeaderMap) {
    // Most messages have none of them, `Connection` included: one look at each name settles it
    // without looking `Connection` up.
    if !has_any(headers, &CONNECTION_FIELDS) {
        return;
    }
    let listed: Vec<HeaderName> =
        comma_tokens(headers, &header::CONNECTION).filter_map(|token| HeaderName::from_bytes(token).ok()).collect();
    for name in listed.iter().chain(&CONNECTION_FIELDS) {
        headers.remove(name);
    }
}

/// Removes every field named in `names`. A message has a handful of fields and most often none
/// of these: one look at each field's name costs less than a removal attempt (a hash and a
/// probe) for each of the names, which was a measurable share of the front's time a request.
pub fn remove_fields(headers: &mut HeaderMap, names: &[HeaderName]) {
    if has_any(headers, names) {
        for name in names {
            headers.remove(name);
        }
    }
}

/// Whether any field is named in `names`, by one look at each of the message's names.
fn has_any(headers: &HeaderMap, names: &[HeaderName]) -> bool {
    headers.keys().any(|name| names.contains(name))
}

/// Refuses a head whose lines do not all end in CRLF: a CR or LF alone, or a NUL, anywhere.
/// Two parsers can split such a head into different fields (a bare LF inside a value is a second
/// field to one of them), so a message that is to be passed on must not have one.
pub fn check_line_ends(head: &[u8]) -> Result<(), &'static str> {
    let mut at = 0;
    while let Some(offset) = head[at..].iter().position(|&b| b == b'\r' || b == b'\n' || b == 0) {
        let position = at + offset;
        match head[position] {
            b'\r' if head.get(position + 1) == Some(&b'\n') => at = position + 2,
            // The end of what was given: the rest of the line is not here yet.
            b'\r' if position + 1 == head.len() => return Ok(()),
            0 => return Err("NUL in a message head"),
            _ => return Err("a CR or LF that does not end a line"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn blanks_are_trimmed_from_both_ends_only() {
        assert_eq!(trim_blanks(b" a=b "), b"a=b");
        assert_eq!(trim_blanks(b"\t 1 2 \t"), b"1 2");
        assert_eq!(trim_blanks(b"a"), b"a");
        assert_eq!(trim_blanks(b" \t "), b"");
        assert_eq!(trim_blanks(b""), b"");
        assert_eq!(trim_blanks(b"\x0ba\r"), b"\x0ba\r", "only SP and HTAB are optional whitespace");
    }

    #[test]
    fn content_lengths() {
        let parse = |values: &[&str]| content_length(values.iter().map(|value| value.as_bytes()));
        assert_eq!(parse(&[]), Ok(None));
        assert_eq!(parse(&["5"]), Ok(Some(5)));
        assert_eq!(parse(&["5, 5", " 5 "]), Ok(Some(5)));
        assert_eq!(parse(&["18446744073709551615"]), Err("bad Content-Length"), "20 digits");
        assert_eq!(parse(&["9999999999999999999"]), Ok(Some(9_999_999_999_999_999_999)));
        for bad in ["", "-1", "+5", "0x10", "5 5", "1e3", "5,", "\u{b2}"] {
            assert_eq!(parse(&[bad]), Err("bad Content-Length"), "{bad:?}");
        }
        assert_eq!(parse(&["5", "6"]), Err("conflicting Content-Length values"));
        assert_eq!(parse(&["5, 6"]), Err("conflicting Content-Length values"));
    }

    #[test]
    fn transfer_codings() {
        let coding = |values: &[&str]| transfer_coding(values.iter().map(|value| value.as_bytes()));
        assert_eq!(coding(&[]), None);
        assert_eq!(coding(&["Chunked"]), Some(Coding::Chunked));
        assert_eq!(coding(&["gzip, chunked"]), Some(Coding::Unsupported));
        assert_eq!(coding(&["chunked, gzip"]), Some(Coding::Unsupported));
        assert_eq!(coding(&[""]), Some(Coding::Unsupported));
        assert_eq!(coding(&["chunked", "chunked"]), Some(Coding::Repeated));
        assert_eq!(coding(&["chunked, chunked"]), Some(Coding::Repeated));
    }

    #[test]
    fn persistence() {
        let persist = |version, values: &[&str]| persists(version, values.iter().map(|value| value.as_bytes()));
        assert!(persist(Version::HTTP_11, &[]));
        assert!(!persist(Version::HTTP_11, &["close"]));
        assert!(!persist(Version::HTTP_11, &["Keep-Alive, Close"]));
        assert!(persist(Version::HTTP_11, &["closed-captions"]));
        assert!(!persist(Version::HTTP_10, &[]));
        assert!(persist(Version::HTTP_10, &["keep-alive"]));
    }

    #[test]
    fn line_ends() {
        assert_eq!(check_line_ends(b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n"), Ok(()));
        assert_eq!(check_line_ends(b"HTTP/1.1 200 OK\r\nA: b\r"), Ok(()), "a CR whose LF is still to come");
        assert!(check_line_ends(b"HTTP/1.1 200 OK\r\nA: b\nSet-Cookie: x\r\n\r\n").is_err());
        assert!(check_line_ends(b"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n").is_err());
        assert!(check_line_ends(b"HTTP/1.1 200 OK\r\nA: b\0\r\n\r\n").is_err());
    }

    #[test]
    fn strips_listed_and_standard_connection_fields() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, X-Secret"));
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        strip_connection_fields(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::CONTENT_TYPE));

        // Only a `Connection` field: what it names goes too.
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("x-secret"));
        headers.append("x-secret", HeaderValue::from_static("1"));
        headers.append("x-secret", HeaderValue::from_static("2"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_connection_fields(&mut headers);
        assert_eq!(headers.keys().collect::<Vec<_>>(), [header::ACCEPT]);
    }

    #[test]
    fn removes_every_value_of_the_fields_named_and_nothing_else() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        headers.append(header::EXPECT, HeaderValue::from_static("100-continue"));
        headers.append(header::EXPECT, HeaderValue::from_static("100-continue"));
        let untouched = headers.clone();
        remove_fields(&mut headers, &[header::CONTENT_LENGTH]);
        assert_eq!(headers, untouched);
        remove_fields(&mut headers, &[header::CONTENT_LENGTH, header::EXPECT]);
        assert_eq!(headers.keys().collect::<Vec<_>>(), [header::ACCEPT]);
    }
}
