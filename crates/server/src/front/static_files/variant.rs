//! Precompressed variants: `app.css.br` and `app.css.gz` beside `app.css`, as asset pipelines
//! write them (Rails' Sprockets and Propshaft, Django's compress, WhiteNoise, Vite plugins), sent
//! in its place to a client whose `Accept-Encoding` takes them, brotli first. A file that has a
//! variant is answered with `Vary: Accept-Encoding` whichever is sent, so that caches keep them
//! apart.

use std::path::{Path, PathBuf};

use http::header::{self, HeaderMap};

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
#[derive(Debug, PartialEq, Eq)]
pub struct Choice {
    /// The variant to send, by its resolved path, or `None` for the file itself.
    pub variant: Option<(Coding, PathBuf)>,
    /// Whether the file has any variant: the response then varies with `Accept-Encoding`.
    pub varies: bool,
}

/// Chooses between `file` (resolved, under `root`) and its variants for a request with `headers`.
pub fn choose(root: &Path, file: &Path, headers: &HeaderMap) -> Choice {
    let mut choice = Choice { variant: None, varies: false };
    for (coding, suffix, name) in Coding::ALL {
        let mut path = file.as_os_str().to_owned();
        path.push(suffix);
        let Resolution::Found(path) = within(root, Path::new(&path)) else { continue };
        choice.varies = true;
        if choice.variant.is_none() && accepts(headers, name) {
            choice.variant = Some((coding, path));
        }
    }
    choice
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
        let both = choose(&root, &css, &accept("gzip, br"));
        assert_eq!(both, Choice { variant: Some((Coding::Brotli, root.join("app.css.br"))), varies: true });
        let gzip = choose(&root, &css, &accept("gzip"));
        assert_eq!(gzip.variant, Some((Coding::Gzip, root.join("app.css.gz"))));
        assert_eq!(choose(&root, &css, &HeaderMap::new()), Choice { variant: None, varies: true });
        assert_eq!(choose(&root, &html, &accept("br")), Choice { variant: None, varies: true });
        assert_eq!(choose(&root, &txt, &accept("br, gzip")), Choice { variant: None, varies: false });
    }
}
