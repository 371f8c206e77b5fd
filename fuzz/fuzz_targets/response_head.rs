//! A worker's response head from arbitrary bytes: the parser never panics, and a head it accepts
//! has every line ending in CRLF (so no other parser can split its fields differently) and one
//! framing only.
#![no_main]

use headway_http1::response::{parse_head, Asked};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let asked = Asked { head: data.first().is_some_and(|b| b & 1 == 1), upgrade: data.first().is_some_and(|b| b & 2 == 2) };
    let Ok(Some((head, len))) = parse_head(data, asked, 8192) else { return };
    assert!(len <= data.len());
    let raw = &data[..len];
    for (at, &byte) in raw.iter().enumerate() {
        match byte {
            b'\r' => assert_eq!(raw.get(at + 1), Some(&b'\n'), "a bare CR in an accepted head"),
            b'\n' => assert_eq!(at.checked_sub(1).map(|before| raw[before]), Some(b'\r'), "a bare LF in an accepted head"),
            0 => panic!("a NUL in an accepted head"),
            _ => {}
        }
    }
    let by_length = head.headers.contains_key(http::header::CONTENT_LENGTH);
    let by_coding = head.headers.contains_key(http::header::TRANSFER_ENCODING);
    assert!(!(by_length && by_coding), "a response framed two ways was accepted");
});
