//! The `Range` field of a request for a file (RFC 9110 section 14.2): one byte range is served
//! as asked (`206`); several may be answered whole, as they are here (a multipart body buys
//! a client little and costs a server much); one that starts past the end cannot be served
//! (`416`); anything the field does not say clearly is ignored, and the whole file sent.

/// What a `Range` field asks of a file of a given length.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RangeAsk {
    /// The whole file: no range, several, another unit, or a field that does not parse.
    Whole,
    /// Bytes `start..=end`, within the file.
    Part { start: u64, end: u64 },
    /// A range no byte of the file is in.
    Unsatisfiable,
}

/// Reads a `Range` field's value against a file of `len` bytes.
pub fn parse_range(value: &[u8], len: u64) -> RangeAsk {
    let Ok(value) = std::str::from_utf8(value) else { return RangeAsk::Whole };
    let Some((unit, set)) = value.split_once('=') else { return RangeAsk::Whole };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeAsk::Whole;
    }
    let mut specs = set.split(',').map(str::trim).filter(|spec| !spec.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else { return RangeAsk::Whole };
    let Some((first, last)) = spec.split_once('-') else { return RangeAsk::Whole };
    let number = |text: &str| {
        let text = text.trim();
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse::<u64>().ok()).flatten()
    };
    match (first.trim().is_empty(), number(first), number(last)) {
        // `-N`: the last N bytes.
        (true, None, Some(suffix)) if suffix == 0 || len == 0 => RangeAsk::Unsatisfiable,
        (true, None, Some(suffix)) => RangeAsk::Part { start: len.saturating_sub(suffix), end: len - 1 },
        // `A-` and `A-B`.
        (false, Some(start), end) => {
            let end = match end {
                Some(end) if end < start => return RangeAsk::Whole,
                Some(end) => end,
                None if last.trim().is_empty() => u64::MAX,
                None => return RangeAsk::Whole,
            };
            if start >= len {
                RangeAsk::Unsatisfiable
            } else {
                RangeAsk::Part { start, end: end.min(len - 1) }
            }
        }
        _ => RangeAsk::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_is_served_within_the_file() {
        let part = |start, end| RangeAsk::Part { start, end };
        assert_eq!(parse_range(b"bytes=0-0", 10), part(0, 0));
        assert_eq!(parse_range(b"bytes=2-5", 10), part(2, 5));
        assert_eq!(parse_range(b"bytes=2-", 10), part(2, 9));
        assert_eq!(parse_range(b"bytes=2-100", 10), part(2, 9), "an end past the file stops at it");
        assert_eq!(parse_range(b"bytes=-3", 10), part(7, 9));
        assert_eq!(parse_range(b"bytes=-30", 10), part(0, 9), "a suffix longer than the file is all of it");
        assert_eq!(parse_range(b"Bytes = 9-9 ", 10), part(9, 9));
        assert_eq!(parse_range(b"bytes=1-2,", 10), part(1, 2), "empty list items are nothing");
    }

    #[test]
    fn past_the_end_is_unsatisfiable() {
        assert_eq!(parse_range(b"bytes=10-", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=10-20", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 10), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-", 0), RangeAsk::Unsatisfiable, "an empty file has no bytes");
        assert_eq!(parse_range(b"bytes=-5", 0), RangeAsk::Unsatisfiable);
    }

    #[test]
    fn what_is_unclear_or_several_gets_the_whole_file() {
        for value in [
            &b"bytes=0-1,3-4"[..],
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
