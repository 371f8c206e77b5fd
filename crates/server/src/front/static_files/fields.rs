//! The fields a file is sent with that say what it is and how long it may be kept: its content
//! type, by its name's extension, and `Cache-Control` from `--static-max-age`, `immutable` for a
//! file whose name carries a digest of its content (it can never change under that name). Both
//! are made once, not for each request: a file's type and whether its name carries a digest
//! while it is kept open (`open_files`), the two `Cache-Control` values with the settings.

use std::path::Path;
use std::time::Duration;

use http::header::HeaderValue;

/// The content type of a file named `name`: by its extension, with `charset=utf-8` for text (what
/// asset pipelines write), `application/octet-stream` when the extension says nothing.
pub fn content_type(name: &Path) -> HeaderValue {
    let Some(mime) = mime_guess::from_path(name).first() else {
        return HeaderValue::from_static("application/octet-stream");
    };
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(mime.essence_str(), "application/javascript" | "application/json" | "image/svg+xml");
    let value = if textual && mime.get_param(mime_guess::mime::CHARSET).is_none() {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

/// `--static-max-age`, as the `Cache-Control` values it makes: one for a file whose name carries a
/// digest, one for any other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxAge {
    plain: HeaderValue,
    immutable: HeaderValue,
}

impl MaxAge {
    pub fn new(max_age: Duration) -> MaxAge {
        let plain = format!("public, max-age={}", max_age.as_secs());
        let immutable = format!("{plain}, immutable");
        let value = |text: String| HeaderValue::from_str(&text).expect("words and digits");
        MaxAge { plain: value(plain), immutable: value(immutable) }
    }

    /// `Cache-Control` for a file whose name does or does not carry a digest ([`carries_digest`]).
    pub fn cache_control(&self, carries_digest: bool) -> HeaderValue {
        if carries_digest { &self.immutable } else { &self.plain }.clone()
    }
}

/// Whether a file name carries a digest of its content, as fingerprinted assets' names do:
/// Sprockets' `app-<64 hex>.css`, Propshaft's `app-<8 hex>.css`, Django's manifest storage's
/// `app.<12 hex>.css`, webpack's `[contenthash]` (20 hex): a run of at least 8 hex digits after
/// the last `-` or `.` of the name without its extensions (`.css`, `.js.map`, `.css.gz`).
pub fn carries_digest(name: &Path) -> bool {
    let Some(name) = name.file_name().and_then(|name| name.to_str()) else { return false };
    let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
    // Django's `app.<hex>.css`: the digest is a dotted part of its own.
    let dotted = name.split('.').skip(1).any(is_digest);
    let dashed = stem.rsplit_once('-').is_some_and(|(_, tail)| is_digest(tail));
    dotted || dashed
}

fn is_digest(part: &str) -> bool {
    part.len() >= 8 && part.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_by_extension() {
        let of = |name: &str| content_type(Path::new(name));
        assert_eq!(of("app.css"), "text/css; charset=utf-8");
        assert_eq!(of("page.html"), "text/html; charset=utf-8");
        assert_eq!(of("logo.png"), "image/png");
        assert_eq!(of("font.woff2"), "font/woff2");
        assert_eq!(of("data.json"), "application/json; charset=utf-8");
        assert!(of("app.js").to_str().unwrap().ends_with("javascript; charset=utf-8"));
        assert_eq!(of("README"), "application/octet-stream");
        assert_eq!(of("blob.unknownext"), "application/octet-stream");
    }

    #[test]
    fn fingerprinted_names_are_immutable() {
        for name in [
            "application-4f3c2e1d0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d.css",
            "application-5c1f4d8e.js",
            "app.3f9a1c2b7d4e.css",
            "admin/css/base.5af66c1b1797.css",
            "main-0123456789abcdef0123.js.map",
            "app-5c1f4d8e.css.gz",
        ] {
            assert!(carries_digest(Path::new(name)), "{name}");
        }
        for name in ["app.css", "jquery-3.7.1.min.js", "logo-dark.png", "facade.css", "cafe-beef.css", "a-1234567.js"] {
            assert!(!carries_digest(Path::new(name)), "{name}");
        }
        let max_age = MaxAge::new(Duration::from_secs(3600));
        assert_eq!(max_age.cache_control(carries_digest(Path::new("app.css"))), "public, max-age=3600");
        let fingerprinted = max_age.cache_control(carries_digest(Path::new("app-5c1f4d8e.css")));
        assert_eq!(fingerprinted, "public, max-age=3600, immutable");
    }
}
