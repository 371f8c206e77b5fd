//! A request head from arbitrary bytes: the parser never panics, never claims more bytes than it
//! was given, and a head it accepts is framed one way only; given again in two pieces it is
//! parsed the same.
#![no_main]

use headway_http1::request::{parse_head, Limits};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits { max_head: 8192, max_body: 1 << 20 };

fuzz_target!(|data: &[u8]| {
    let Ok(Some((head, len))) = parse_head(data, &LIMITS) else { return };
    assert!(len <= data.len());
    let by_length = head.headers.contains_key(http::header::CONTENT_LENGTH);
    let by_coding = head.headers.contains_key(http::header::TRANSFER_ENCODING);
    assert!(!(by_length && by_coding), "a head framed two ways was accepted");
    // Any prefix of a complete head is incomplete, or refused, never a different head.
    for end in [len / 2, len.saturating_sub(1)] {
        if let Ok(Some((_, shorter))) = parse_head(&data[..end], &LIMITS) {
            assert_eq!(shorter, len, "a prefix parsed as a head of another length");
        }
    }
});
