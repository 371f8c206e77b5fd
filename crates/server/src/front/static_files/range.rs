//! The `Range` field of a request for a file (RFC 9110 section 14.2): the byte ranges asked are
//! served (`206`, several as a `multipart/byteranges` body); a field that asks no byte of the
//! file cannot be served (`416`); anything it does not say clearly is ignored, and the whole file
//! sent.
//!
//! Against a field made to cost the server (RFC 9110 section 14.2 lets a server ignore it), the
//! whole file is sent instead when it asks more than [`MAX_RANGES`] ranges, or more bytes in all
//! than the file holds, as nginx does (overlapping or repeated ranges); ranges that overlap or
//! lie within [`COALESCE_GAP`] bytes of each other are sent as one part, in ascending order.

/// The most ranges one field may ask for; more are answered with the whole file.
pub const MAX_RANGES: usize = 16;
/// Ranges closer than this are sent as one part: about what a part's own head costs.
pub const COALESCE_GAP: u64 = 80;

/// Bytes `start..=end` of a file.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(self) -> u64 {
        self.end - self.start + 1
    }
}

/// What a `Range` field asks of a file of a given length.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum RangeAsk {
    /// The whole file: no range, another unit, a field that does not parse, or one refused.
    Whole,
    /// One range or more, within the file, ascending and apart.
    Parts(Vec<ByteRange>),
    /// A field no byte of the file is in.
    Unsatisfiable,
}

/// Reads a `Range` field's value against a file of `len` bytes.
pub fn parse_range(value: &[u8], len: u64) -> RangeAsk {
    let Ok(value) = std::str::from_utf8(value) else { return RangeAsk::Whole };
    let Some((unit, set)) = value.split_once('=') else { return RangeAsk::Whole };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeAsk::Whole;
    }
    let specs: Vec<&str> = set.split(',').map(str::trim).filter(|spec| !spec.is_empty()).collect();
    if specs.is_empty() || specs.len() > MAX_RANGES {
        return RangeAsk::Whole;
    }
    let mut ranges = Vec::with_capacity(specs.len());
    for spec in specs {
        match parse_spec(spec, len) {
            Spec::Unclear => return RangeAsk::Whole,
            Spec::Past => {}
            Spec::Within(range) => ranges.push(range),
        }
    }
    if ranges.is_empty() {
        return RangeAsk::Unsatisfiable;
    }
    if ranges.iter().map(|range| range.len()).sum::<u64>() > len {
        return RangeAsk::Whole;
    }
    RangeAsk::Parts(coalesced(ranges))
}

/// One `range-spec` against a file of `len` bytes.
enum Spec {
    Unclear,
    /// No byte of the file.
    Past,
    Within(ByteRange),
}

fn parse_spec(spec: &str, len: u64) -> Spec {
    let Some((first, last)) = spec.split_once('-') else { return Spec::Unclear };
    let number = |text: &str| {
        let text = text.trim();
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse::<u64>().ok()).flatten()
    };
    match (first.trim().is_empty(), number(first), number(last)) {
        // `-N`: the last N bytes.
        (true, None, Some(suffix)) if suffix == 0 || len == 0 => Spec::Past,
        (true, None, Some(suffix)) => Spec::Within(ByteRange { start: len.saturating_sub(suffix), end: len - 1 }),
        // `A-` and `A-B`.
        (false, Some(start), end) => {
            let end = match end {
                Some(end) if end < start => return Spec::Unclear,
                Some(end) => end,
                None if last.trim().is_empty() => u64::MAX,
                None => return Spec::Unclear,
            };
            if start >= len {
                Spec::Past
            } else {
                Spec::Within(ByteRange { start, end: end.min(len - 1) })
            }
        }
        _ => Spec::Unclear,
    }
}

/// `ranges` in ascending order, those that overlap or lie within [`COALESCE_GAP`] of each other
/// made one.
fn coalesced(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    ranges.sort_by_key(|range| range.start);
    let mut merged: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(COALESCE_GAP) => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(ranges: &[(u64, u64)]) -> RangeAsk {
        RangeAsk::Parts(ranges.iter().map(|&(start, end)| ByteRange { start, end }).collect())
    }

    #[test]
    fn one_range_is_served_within_the_file() {
        assert_eq!(parse_range(b"bytes=0-0", 10), parts(&[(0, 0)]));
        assert_eq!(parse_range(b"bytes=2-5", 10), parts(&[(2, 5)]));
        assert_eq!(parse_range(b"bytes=2-", 10), parts(&[(2, 9)]));
        assert_eq!(parse_range(b"bytes=2-100", 10), parts(&[(2, 9)]), "an end past the file stops at it");
        assert_eq!(parse_range(b"bytes=-3", 10), parts(&[(7, 9)]));
        assert_eq!(parse_range(b"bytes=-30", 10), parts(&[(0, 9)]), "a suffix longer than the file is all of it");
        assert_eq!(parse_range(b"Bytes = 9-9 ", 10), parts(&[(9, 9)]));
        assert_eq!(parse_range(b"bytes=1-2,", 10), parts(&[(1, 2)]), "empty list items are nothing");
    }

    #[test]
    fn several_ranges_are_parts_in_ascending_order() {
        let len = 1000;
        assert_eq!(parse_range(b"bytes=0-1, 500-509", len), parts(&[(0, 1), (500, 509)]));
        assert_eq!(parse_range(b"bytes=500-509,0-1,-5", len), parts(&[(0, 1), (500, 509), (995, 999)]));
        assert_eq!(parse_range(b"bytes=0-1,5000-", len), parts(&[(0, 1)]), "a part past the end is left out");
        assert_eq!(parse_range(b"bytes=0-9,5-19", len), parts(&[(0, 19)]), "overlapping: one part");
        assert_eq!(parse_range(b"bytes=0-9,80-89", len), parts(&[(0, 89)]), "a gap smaller than a part's head");
        assert_eq!(parse_range(b"bytes=0-9,91-99", len), parts(&[(0, 9), (91, 99)]));
    }

    #[test]
    fn costly_range_sets_get_the_whole_file() {
        let many = format!(
            "bytes={}",
            (0..=MAX_RANGES as u64).map(|i| format!("{0}-{0}", i * 100)).collect::<Vec<_>>().join(",")
        );
        assert_eq!(parse_range(many.as_bytes(), 10_000), RangeAsk::Whole, "more than MAX_RANGES");
        assert_eq!(parse_range(b"bytes=0-,0-", 10), RangeAsk::Whole, "more bytes than the file");
        assert_eq!(parse_range(b"bytes=0-5,1-6", 10), RangeAsk::Whole);
        let sixteen = format!(
            "bytes={}",
            (0..MAX_RANGES as u64).map(|i| format!("{0}-{0}", i * 100)).collect::<Vec<_>>().join(",")
        );
        assert!(matches!(parse_range(sixteen.as_bytes(), 10_000), RangeAsk::Parts(found) if found.len() == MAX_RANGES));
    }

    #[test]
    fn past_the_end_is_unsatisfiable() {
        assert_eq!(parse_range(b"bytes=10-", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=10-20", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=10-,20-", 10), RangeAsk::Unsatisfiable, "no part has a byte");
        assert_eq!(parse_range(b"bytes=0-", 0), RangeAsk::Unsatisfiable, "an empty file has no bytes");
        assert_eq!(parse_range(b"bytes=-5", 0), RangeAsk::Unsatisfiable);
    }

    #[test]
    fn what_is_unclear_gets_the_whole_file() {
        for value in [
            &b"bytes=0-1,x"[..],
            b"items=0-1",
            b"bytes=5-2",
            b"bytes=a-b",
            b"bytes=-",
            b"bytes=1",
            b"bytes=+1-2",
            b"bytes=1-+2",
            b"bytes=",
            b"0-1",
            b"bytes=99999999999999999999999-",
            b"bytes=\xff-1",
        ] {
            assert_eq!(parse_range(value, 10), RangeAsk::Whole, "{}", String::from_utf8_lossy(value));
        }
    }
}
