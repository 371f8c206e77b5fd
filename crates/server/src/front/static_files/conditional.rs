//! A file's validators (`ETag`, `Last-Modified`) and what a request's conditional fields make of
//! them (RFC 9110 section 13): `If-None-Match`, else `If-Modified-Since`, answer `304` when the
//! client's copy is current; a `Range` is honoured only if `If-Range` (when sent) still names this
//! version of the file.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};

use super::range::{parse_range, ByteRange, RangeAsk};
use headway_http1::fields::list_items;

/// What identifies one version of a file, and the fields that say it, made once when the file is
/// opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// Strong, from the modification time and the length, as nginx makes it: `"<mtime>-<len>"`
    /// in hex. A precompressed variant is another file, so it has its own.
    pub etag: HeaderValue,
    /// Whole seconds, as an HTTP date carries it.
    pub modified: SystemTime,
    /// `modified` as an HTTP date.
    pub last_modified: HeaderValue,
}

impl Validators {
    pub fn of(meta: &Metadata) -> Validators {
        let secs = u64::try_from(meta.mtime()).unwrap_or(0);
        let etag = HeaderValue::from_str(&format!("\"{secs:x}-{:x}\"", meta.len())).expect("hex digits and quotes");
        Validators::new(etag, UNIX_EPOCH + Duration::from_secs(secs))
    }

    fn new(etag: HeaderValue, modified: SystemTime) -> Validators {
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(modified));
        Validators { etag, modified, last_modified: last_modified.expect("an HTTP date is a valid value") }
    }
}

/// The request fields that make a file response conditional or partial, kept apart from the
/// request (which may go on to a worker, for `X-Accel-Redirect`).
#[derive(Debug, Default, Clone)]
pub struct Preconditions {
    if_none_match: Option<HeaderValue>,
    if_modified_since: Option<HeaderValue>,
    range: Option<HeaderValue>,
    if_range: Option<HeaderValue>,
}

/// What to send of a file.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Selection {
    /// `304`: the client's copy is current.
    NotModified,
    /// The whole file.
    Whole,
    /// `206`: these ranges, ascending and apart.
    Parts(Vec<ByteRange>),
    /// `416`.
    Unsatisfiable,
}

impl Preconditions {
    pub fn of(headers: &HeaderMap) -> Preconditions {
        let field = |name| headers.get(name).cloned();
        Preconditions {
            if_none_match: field(header::IF_NONE_MATCH),
            if_modified_since: field(header::IF_MODIFIED_SINCE),
            range: field(header::RANGE),
            if_range: field(header::IF_RANGE),
        }
    }

    /// What to send of a file of `len` bytes with these `validators`; `ranged`: whether a `Range`
    /// may apply (a GET answered `200`).
    pub fn select(&self, validators: &Validators, len: u64, ranged: bool) -> Selection {
        if self.not_modified(validators) {
            return Selection::NotModified;
        }
        let Some(range) = self.range.as_ref().filter(|_| ranged) else { return Selection::Whole };
        if self.if_range.as_ref().is_some_and(|if_range| !still_current(if_range, validators)) {
            return Selection::Whole;
        }
        match parse_range(range.as_bytes(), len) {
            RangeAsk::Whole => Selection::Whole,
            RangeAsk::Parts(ranges) => Selection::Parts(ranges),
            RangeAsk::Unsatisfiable => Selection::Unsatisfiable,
        }
    }

    /// `If-None-Match` (weak comparison, `*` for any), else `If-Modified-Since`.
    fn not_modified(&self, validators: &Validators) -> bool {
        if let Some(tags) = &self.if_none_match {
            return list_items(tags.as_bytes()).any(|tag| tag == b"*" || weak_match(tag, validators.etag.as_bytes()));
        }
        let since =
            self.if_modified_since.as_ref().and_then(|value| value.to_str().ok()).map(httpdate::parse_http_date);
        matches!(since, Some(Ok(since)) if validators.modified <= since)
    }
}

/// Whether two entity tags are the same but for weakness (RFC 9110 section 8.8.3.2).
fn weak_match(tag: &[u8], ours: &[u8]) -> bool {
    tag.strip_prefix(b"W/").unwrap_or(tag) == ours
}

/// Whether `If-Range` names this version: our entity tag (strong comparison), or exactly our
/// modification date.
fn still_current(if_range: &HeaderValue, validators: &Validators) -> bool {
    let value = if_range.as_bytes();
    if value.starts_with(b"\"") {
        return value == validators.etag.as_bytes();
    }
    if_range.to_str().ok().and_then(|text| httpdate::parse_http_date(text).ok()) == Some(validators.modified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validators() -> Validators {
        Validators::new(HeaderValue::from_static("\"5f-a\""), UNIX_EPOCH + Duration::from_secs(1_700_000_000))
    }

    fn asking(fields: &[(&'static str, &str)]) -> Preconditions {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        Preconditions::of(&headers)
    }

    #[test]
    fn validators_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "0123456789").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let validators = Validators::of(&meta);
        assert_eq!(validators.etag, format!("\"{:x}-a\"", meta.mtime()));
        let last_modified = validators.last_modified.to_str().unwrap();
        assert_eq!(httpdate::parse_http_date(last_modified).unwrap(), validators.modified);
        assert_eq!(validators.modified.duration_since(UNIX_EPOCH).unwrap().as_secs(), meta.mtime() as u64);
    }

    #[test]
    fn a_current_copy_is_not_sent_again() {
        let date = httpdate::fmt_http_date(validators().modified);
        let later = httpdate::fmt_http_date(validators().modified + Duration::from_secs(1));
        let earlier = httpdate::fmt_http_date(validators().modified - Duration::from_secs(1));
        let select = |fields: &[(&'static str, &str)]| asking(fields).select(&validators(), 10, true);
        assert_eq!(select(&[("if-none-match", "\"5f-a\"")]), Selection::NotModified);
        assert_eq!(select(&[("if-none-match", "W/\"5f-a\"")]), Selection::NotModified, "weak comparison");
        assert_eq!(select(&[("if-none-match", "\"x\", \"5f-a\"")]), Selection::NotModified);
        assert_eq!(select(&[("if-none-match", "*")]), Selection::NotModified);
        assert_eq!(select(&[("if-none-match", "\"x\"")]), Selection::Whole);
        assert_eq!(select(&[("if-modified-since", &date)]), Selection::NotModified);
        assert_eq!(select(&[("if-modified-since", &later)]), Selection::NotModified);
        assert_eq!(select(&[("if-modified-since", &earlier)]), Selection::Whole);
        assert_eq!(select(&[("if-modified-since", "yesterday")]), Selection::Whole);
        // If-None-Match decides alone when both are sent (RFC 9110 section 13.1.3).
        assert_eq!(select(&[("if-none-match", "\"x\""), ("if-modified-since", &date)]), Selection::Whole);
    }

    #[test]
    fn a_range_applies_while_if_range_names_this_version() {
        let date = httpdate::fmt_http_date(validators().modified);
        let other = httpdate::fmt_http_date(validators().modified - Duration::from_secs(1));
        let part = Selection::Parts(vec![ByteRange { start: 0, end: 1 }]);
        let select = |fields: &[(&'static str, &str)]| asking(fields).select(&validators(), 10, true);
        assert_eq!(select(&[("range", "bytes=0-1")]), part.clone());
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-range", "\"5f-a\"")]), part.clone());
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-range", &date)]), part);
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-range", "W/\"5f-a\"")]), Selection::Whole, "strong only");
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-range", "\"old\"")]), Selection::Whole);
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-range", &other)]), Selection::Whole);
        assert_eq!(select(&[("range", "bytes=10-")]), Selection::Unsatisfiable);
        assert_eq!(asking(&[("range", "bytes=0-1")]).select(&validators(), 10, false), Selection::Whole, "not ranged");
        assert_eq!(select(&[("range", "bytes=0-1"), ("if-none-match", "\"5f-a\"")]), Selection::NotModified);
    }
}
