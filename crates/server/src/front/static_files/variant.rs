//! Precompressed variants: `app.css.br` and `app.css.gz` beside `app.css`, as asset pipelines
//! write them (Rails' Sprockets and Propshaft, Django's compress, WhiteNoise, Vite plugins), sent
//! in its place to a client whose `Accept-Encoding` takes them, brotli first. A file that has a
//! variant is answered with `Vary: Accept-Encoding` whichever is sent, so that caches keep them
//! apart.
//!
//! A client that takes neither coding is sent the file without a look for its variants (two
//! `stat`s a request saved, for `curl`, health checks and load tools), and told
//! `Vary: Accept-Encoding` all the same: true of any file that may have a variant, and what keeps
//! a cache from handing that copy to a client that takes `br`.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use http::header::{self, HeaderMap};

use super::open_files::Opened;
use super::resolve::{within, Resolution};
use headway_http1::fields::{comma_tokens, trim_blanks};

/// A content coding a variant is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Brotli,
    Gzip,
}

impl Coding {
    /// The file name suffix and the `Content-Encoding` of each coding, in the order preferred.
    const ALL: [(Coding, &'static str, &'static str); 2] =
        [(Coding::Brotli, ".br", "br"), (Coding::Gzip, ".gz", "gzip")];

    pub fn name(self) -> &'static str {
        Coding::ALL.iter().find(|(coding, ..)| *coding == self).map_or("", |(_, _, name)| name)
    }
}

/// The variants of a file there are, and which of them to send.
#[derive(Debug)]
pub struct Choice {
    /// The variant to send, opened, or `None` for the file itself.
    pub variant: Option<(Coding, Arc<Opened>)>,
    /// Whether the response varies with `Accept-Encoding`: the file has a variant, or the client
    /// takes none (so none was looked for).
    pub varies: bool,
}

/// Chooses between `file` (resolved, under `root`) and its variants for a request with `headers`:
/// the first the client takes that is there, else the file, and whether any other is there.
pub fn choose(root: &Path, file: &Path, headers: &HeaderMap) -> Choice {
    let taken = Coding::ALL.map(|(_, _, name)| accepts(headers, name));
    if !taken.contains(&true) {
        return Choice { variant: None, varies: true };
    }
    let variant_of = |suffix: &str| {
        let mut path = OsString::from(file.as_os_str());
        path.push(suffix);
        within(root, Path::new(&path))
    };
    for ((coding, suffix, _), taken) in Coding::ALL.into_iter().zip(taken) {
        if let (true, Resolution::Found(opened)) = (taken, variant_of(suffix)) {
            return Choice { variant: Some((coding, opened)), varies: true };
        }
    }
    let varies = Coding::ALL
        .into_iter()
        .zip(taken)
        .any(|((_, suffix, _), taken)| !taken && matches!(variant_of(suffix), Resolution::Found(_)));
    Choice { variant: None, varies }
}

/// Whether `Accept-Encoding` takes `coding` (named, or by `*`, with a weight above 0).
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    let mut star = false;
    for item in comma_tokens(headers, &header::ACCEPT_ENCODING) {
        let mut parts = item.split(|&b| b == b';');
        let name = trim_blanks(parts.next().unwrap_or_default());
        let wanted = parts.all(|param| !is_zero_weight(trim_blanks(param)));
        if name.eq_ignore_ascii_case(coding.as_bytes()) {
            return wanted;
        }
        if name == b"*" {
            star = wanted;
        }
    }
    star
}

/// Whether a parameter is `q=0` (or `0.0`, `0.000`).
fn is_zero_weight(param: &[u8]) -> bool {
    let Some(weight) = param.strip_prefix(b"q=").or_else(|| param.strip_prefix(b"Q=")) else { return false };
    weight.first() == Some(&b'0') && weight[1..].iter().all(|&b| b == b'.' || b == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn accept_encoding_weights() {
        assert!(accepts(&accept("gzip, deflate, br, zstd"), "br"));
        assert!(accepts(&accept("gzip;q=0.5"), "gzip"));
        assert!(!accepts(&accept("gzip;q=0"), "gzip"));
        assert!(!accepts(&accept("gzip; q=0.000"), "gzip"));
        assert!(accepts(&accept("*"), "br"));
        assert!(!accepts(&accept("*, br;q=0"), "br"));
        assert!(!accepts(&accept("*;q=0"), "gzip"));
        assert!(!accepts(&accept("identity"), "gzip"));
        assert!(!accepts(&HeaderMap::new(), "gzip"));
    }

    #[test]
    fn the_variant_taken_is_the_preferred_one_there_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for name in ["app.css", "app.css.br", "app.css.gz", "page.html", "page.html.gz", "plain.txt"] {
            std::fs::write(root.join(name), name).unwrap();
        }
        let (css, html, txt) = (root.join("app.css"), root.join("page.html"), root.join("plain.txt"));
        let chosen = |file: &Path, headers: HeaderMap| {
            let choice = choose(&root, file, &headers);
            (choice.variant.map(|(coding, opened)| (coding, opened.path.clone())), choice.varies)
        };
        assert_eq!(chosen(&css, accept("gzip, br")), (Some((Coding::Brotli, root.join("app.css.br"))), true));
        assert_eq!(chosen(&css, accept("gzip")), (Some((Coding::Gzip, root.join("app.css.gz"))), true));
        assert_eq!(chosen(&html, accept("br")), (None, true), "only a gzip variant, which the client does not take");
        assert_eq!(chosen(&txt, accept("br, gzip")), (None, false));
    }

    #[test]
    fn a_client_that_takes_no_coding_is_sent_the_file_without_a_look() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("plain.txt"), "plain").unwrap();
        for headers in [HeaderMap::new(), accept("identity"), accept("br;q=0, gzip;q=0")] {
            let choice = choose(&root, &root.join("plain.txt"), &headers);
            assert!(choice.variant.is_none() && choice.varies, "no variant looked for, so it may vary");
        }
    }
}
