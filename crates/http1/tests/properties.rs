//! Properties of the parsers, over generated messages and arbitrary bytes: what a well-formed
//! message is framed as does not depend on how its bytes arrive, what one parser accepts
//! another reads the same way, and no input makes a parser panic or read past what it was
//! given. These are the properties request smuggling and response splitting break.

use bytes::BytesMut;
use headway_http1::body::{put_chunk, BodyDecoder, BodyKind, LAST_CHUNK};
use headway_http1::request::{self, Limits};
use headway_http1::response::{self, Asked};
use http::StatusCode;
use proptest::prelude::*;

const LIMITS: Limits = Limits { max_head: 64 * 1024, max_body: u64::MAX };

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}"
}

/// A field value: visible characters and inner spaces, no leading or trailing blank.
fn value() -> impl Strategy<Value = String> {
    "[!-~]([ !-~]{0,20}[!-~])?"
}

/// Fields that do not frame the message (those are chosen apart).
fn plain_fields() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((token(), value()), 0..8).prop_map(|fields| {
        fields
            .into_iter()
            .filter(|(name, _)| {
                let name = name.to_ascii_lowercase();
                !matches!(name.as_str(), "host" | "content-length" | "transfer-encoding" | "connection" | "expect")
            })
            .collect()
    })
}

fn path() -> impl Strategy<Value = String> {
    "/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,30}(\\?[A-Za-z0-9=&%]{0,20})?"
}

/// A body and how it is framed on the wire: by length or chunked, in chunks of the given sizes.
fn body() -> impl Strategy<Value = (Vec<u8>, Option<Vec<usize>>)> {
    (prop::collection::vec(any::<u8>(), 0..300), prop::option::of(prop::collection::vec(1usize..64, 1..8)))
}

/// `body` as the wire carries it: chunked in pieces of `sizes` (cycled), or as is.
fn encode_body(body: &[u8], chunks: &Option<Vec<usize>>) -> Vec<u8> {
    let Some(sizes) = chunks else { return body.to_vec() };
    let mut out = BytesMut::new();
    let mut rest = body;
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at((*size).min(rest.len()));
        put_chunk(&mut out, piece);
        rest = after;
    }
    out.extend_from_slice(LAST_CHUNK);
    out.to_vec()
}

/// A message: `start` (its first line, and any fields before the others), `fields`, the field
/// that frames `body`, and the body on the wire. Returns the head and the whole message.
fn message(start: &str, fields: &[(String, String)], body: &[u8], chunks: &Option<Vec<usize>>) -> (String, Vec<u8>) {
    let mut head = start.to_owned();
    for (name, value) in fields {
        head += &format!("{name}: {value}\r\n");
    }
    head += &match chunks {
        Some(_) => "Transfer-Encoding: chunked\r\n".to_owned(),
        None => format!("Content-Length: {}\r\n", body.len()),
    };
    head += "\r\n";
    let mut wire = head.clone().into_bytes();
    wire.extend(encode_body(body, chunks));
    (head, wire)
}

/// Decodes a body of `kind` from `wire` given in pieces that end at `cuts`: the body and how many
/// bytes of `wire` it took.
fn decode_in_pieces(kind: BodyKind, wire: &[u8], cuts: &[usize]) -> (Vec<u8>, usize) {
    let mut decoder = BodyDecoder::new(kind, u64::MAX);
    let (mut body, mut used) = (Vec::new(), 0);
    let mut ends: Vec<usize> = cuts.iter().map(|cut| cut % (wire.len() + 1)).collect();
    ends.push(wire.len());
    ends.sort_unstable();
    for end in ends {
        while !decoder.is_done() && used < end {
            let decoded = decoder.decode(&wire[used..end]).expect("a well-formed body");
            body.extend_from_slice(&wire[used..end][decoded.data]);
            used += decoded.consumed;
            if decoded.consumed == 0 {
                break;
            }
        }
    }
    assert!(decoder.is_done(), "the whole body was given");
    (body, used)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A request is parsed the same however its head and body are cut into arrivals, and the
    /// body ends exactly where it was written to end: what follows is the next request.
    #[test]
    fn requests_parse_the_same_in_any_pieces(
        method in prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
        target in path(),
        fields in plain_fields(),
        (body, chunks) in body(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let (head, mut wire) =
            message(&format!("{method} {target} HTTP/1.1\r\nHost: example.test\r\n"), &fields, &body, &chunks);
        let next = b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n";
        wire.extend_from_slice(next);

        for end in 0..head.len() {
            prop_assert!(request::parse_head(&wire[..end], &LIMITS).unwrap().is_none(), "complete before its end");
        }
        let (parsed, len) = request::parse_head(&wire, &LIMITS).unwrap().unwrap();
        prop_assert_eq!(len, head.len());
        prop_assert_eq!(parsed.method.as_str(), method);
        prop_assert_eq!(&parsed.target, &target);
        for (name, value) in &fields {
            prop_assert!(parsed.headers.get_all(name.as_str()).iter().any(|v| v == value.as_str()));
        }
        let (decoded, used) = decode_in_pieces(parsed.body, &wire[len..], &cuts);
        prop_assert_eq!(decoded, body);
        prop_assert_eq!(&wire[len + used..], &next[..]);
    }

    /// A response a worker could send is framed as it says, in any pieces.
    #[test]
    fn responses_parse_the_same_in_any_pieces(
        status in prop::sample::select(vec![200u16, 201, 301, 404, 500, 503]),
        fields in plain_fields(),
        (body, chunks) in body(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let (head, wire) = message(&format!("HTTP/1.1 {status} Whatever\r\n"), &fields, &body, &chunks);
        for end in 0..head.len() {
            prop_assert!(response::parse_head(&wire[..end], Asked::default(), 65536).unwrap().is_none());
        }
        let (parsed, len) = response::parse_head(&wire, Asked::default(), 65536).unwrap().unwrap();
        prop_assert_eq!(len, head.len());
        prop_assert_eq!(parsed.info.status, StatusCode::from_u16(status).unwrap());
        let (decoded, used) = decode_in_pieces(parsed.info.body, &wire[len..], &cuts);
        prop_assert_eq!(decoded, body);
        prop_assert_eq!(len + used, wire.len());
    }

    /// No bytes make the request parser panic, and whatever it accepts it frames one way only:
    /// a head it takes is followed by a body of one kind, never both a length and chunks.
    #[test]
    fn any_bytes_are_judged_without_panic(raw in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(Some((head, len))) = request::parse_head(&raw, &LIMITS) {
            prop_assert!(len <= raw.len());
            let framed_by_length = head.headers.contains_key(http::header::CONTENT_LENGTH);
            let framed_by_coding = head.headers.contains_key(http::header::TRANSFER_ENCODING);
            prop_assert!(!(framed_by_length && framed_by_coding));
        }
        let _ = response::parse_head(&raw, Asked::default(), 1024);
        let mut decoder = BodyDecoder::new(BodyKind::Chunked, u64::MAX);
        if let Ok(decoded) = decoder.decode(&raw) {
            prop_assert!(decoded.consumed <= raw.len() && decoded.data.end <= decoded.consumed);
        }
    }

    /// Head-like bytes with a CR or LF out of place, or a NUL, are never taken as a response:
    /// the front would pass on fields another parser splits differently.
    #[test]
    fn a_response_head_with_a_stray_line_end_is_refused(
        fields in plain_fields(),
        at in any::<usize>(),
        stray in prop::sample::select(vec![b'\r', b'\n', 0u8]),
    ) {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for (name, value) in &fields {
            head.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        head.extend_from_slice(b"X-Last: value\r\nContent-Length: 0\r\n\r\n");
        // Into a field value (after its ": "), where a stray byte hides a second field.
        let values: Vec<usize> = head.windows(2).enumerate().filter(|(_, w)| w == b": ").map(|(i, _)| i + 2).collect();
        let position = values[at % values.len()];
        head.insert(position, stray);
        prop_assert!(response::parse_head(&head, Asked::default(), 65536).is_err());
    }
}
