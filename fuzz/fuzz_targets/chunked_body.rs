//! A chunked body from arbitrary bytes, given whole and byte by byte: the decoder never panics,
//! never hands out bytes it was not given, and decodes the same body with the same end
//! whichever way the bytes arrive.
#![no_main]

use headway_http1::body::{BodyDecoder, BodyKind};
use libfuzzer_sys::fuzz_target;

/// The body decoded from `data` given in pieces of `step` bytes, and where it ended.
fn decode(data: &[u8], step: usize) -> Result<(Vec<u8>, Option<usize>), ()> {
    let mut decoder = BodyDecoder::new(BodyKind::Chunked, 1 << 20);
    let (mut body, mut used, mut given) = (Vec::new(), 0, 0);
    while given < data.len() && !decoder.is_done() {
        given = (given + step).min(data.len());
        loop {
            let piece = &data[used..given];
            let decoded = decoder.decode(piece).map_err(|_| ())?;
            assert!(decoded.consumed <= piece.len() && decoded.data.end <= decoded.consumed);
            body.extend_from_slice(&piece[decoded.data]);
            used += decoded.consumed;
            if decoded.consumed == 0 || decoder.is_done() {
                break;
            }
        }
    }
    assert_eq!(decoder.decoded(), body.len() as u64);
    Ok((body, decoder.is_done().then_some(used)))
}

fuzz_target!(|data: &[u8]| {
    let whole = decode(data, data.len().max(1));
    let bytewise = decode(data, 1);
    assert_eq!(whole, bytewise, "the body depends on how its bytes arrived");
});
