//! The mounts (`--static URL_PREFIX=DIR`) and the settings of files at the front: which request a
//! mount answers, and with which file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use tracing::debug;

use super::conditional::Preconditions;
use super::fields::MaxAge;
use super::open_files::Opened;
use super::resolve::{self, Resolution};
use super::response::{file_response, FileResponse, StaticAnswer};
use super::variant;

/// `--static` (with `--static-only` and `--static-dotfiles` folded into each mount's options),
/// `--static-max-age`, `--accel-mapping` and `--sendfile-root`.
#[derive(Debug, Clone, Default)]
pub struct StaticSettings {
    pub mounts: Vec<Mount>,
    /// `Cache-Control: public, max-age=` for every file served from a mount.
    pub max_age: Option<MaxAge>,
    /// Internal URI prefixes a worker's `X-Accel-Redirect` may name, and their directories.
    pub accel_mappings: Vec<Mount>,
    /// Directories (resolved) a worker's `X-Sendfile` may name a file under.
    pub sendfile_roots: Vec<PathBuf>,
    pub sendfile: Sendfile,
}

/// When a file's bytes go from the page cache to a socket by `sendfile(2)` (`--sendfile`), rather
/// than read into the front and written. `sendfile` spares the front a copy, and a network card
/// reads the pages itself; a client on this host copies them out of its socket with its own reads,
/// and for a large file those cost it more than a written copy's would (`send.rs`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sendfile {
    /// sendfile, except a file of 4 MiB or more to a client on this host, which is copied
    #[default]
    Auto,
    /// sendfile for every file on a plain socket
    On,
    /// every file read and written
    Off,
}

/// A URL path prefix and the directory (resolved) it maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Without a trailing `/`: `/assets`, or empty for the whole site.
    pub prefix: String,
    pub root: PathBuf,
    pub options: MountOptions,
}

/// What a mount does besides serving its files, named after its directory
/// (`/assets=public/assets:only`) or for every mount by a flag of the same name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// `:only` (`--static-only`): a file that is not there gets `404`, not the app.
    pub only: bool,
    /// `:dotfiles` (`--static-dotfiles`): names starting with `.` are served (`.well-known/`);
    /// `.` and `..` segments are refused all the same.
    pub dot_files: bool,
}

impl MountOptions {
    /// The options of each `:name` at the end of `text`, and the text before them.
    fn split_off(mut text: &str) -> (&str, MountOptions) {
        let mut options = MountOptions::default();
        while let Some((rest, name)) = text.rsplit_once(':') {
            match name {
                "only" => options.only = true,
                "dotfiles" => options.dot_files = true,
                _ => break,
            }
            text = rest;
        }
        (text, options)
    }

    /// These options, and `also`'s (the flags that set them for every mount).
    pub fn with(self, also: MountOptions) -> MountOptions {
        MountOptions { only: self.only || also.only, dot_files: self.dot_files || also.dot_files }
    }
}

impl Mount {
    /// `URL_PREFIX=DIR`, as `--accel-mapping` takes it; the directory must exist.
    pub fn parse(text: &str) -> Result<Mount, String> {
        let Some((prefix, dir)) = text.split_once('=') else {
            return Err(format!("'{text}' is not URL_PREFIX=DIR, such as /assets=public/assets"));
        };
        if !prefix.starts_with('/') || prefix.contains(['?', '#', '%']) || prefix.split('/').any(|s| s == "..") {
            return Err(format!("'{prefix}' is not a URL path prefix such as /assets"));
        }
        let root = Path::new(dir).canonicalize().map_err(|err| format!("{dir}: {err}"))?;
        if !root.is_dir() {
            return Err(format!("{dir} is not a directory"));
        }
        Ok(Mount { prefix: prefix.trim_end_matches('/').to_owned(), root, options: MountOptions::default() })
    }

    /// `URL_PREFIX=DIR[:only][:dotfiles]`, as `--static` takes it.
    pub fn parse_static(text: &str) -> Result<Mount, String> {
        let (text, options) = MountOptions::split_off(text);
        let mount = Mount::parse(text).map_err(|err| match text.rsplit_once(':') {
            Some((_, name)) if !name.contains('/') => format!("{err} (a mount's options are :only and :dotfiles)"),
            _ => err,
        })?;
        Ok(Mount { options, ..mount })
    }

    /// The rest of `path` (no query) after this mount's prefix and its `/`, if it is under it.
    pub(super) fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        path.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
    }
}

impl StaticSettings {
    /// The front's answer to `method` `target` (origin form), if a mount serves it; `None`: the
    /// request is the app's.
    pub fn answer(&self, method: &Method, target: &str, headers: &HeaderMap) -> Option<StaticAnswer> {
        if self.mounts.is_empty() || !matches!(*method, Method::GET | Method::HEAD) {
            return None;
        }
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        let (mount, relative) = self.mounts.iter().find_map(|mount| Some((mount, mount.relative(path)?)))?;
        let missing = mount.options.only.then_some(StaticAnswer::NotFound);
        match resolve::resolve(&mount.root, relative, mount.options.dot_files) {
            Resolution::Found(opened) => Some(StaticAnswer::File(self.file(&mount.root, opened, method, headers))),
            Resolution::Missing => missing,
            Resolution::Refused(why) => {
                debug!("refused a static path ({why}): {path}");
                Some(StaticAnswer::NotFound)
            }
        }
    }

    /// The response for `file` (opened, under `root`): its precompressed variant if the client
    /// takes one, with its content fields.
    fn file(&self, root: &Path, file: Arc<Opened>, method: &Method, headers: &HeaderMap) -> FileResponse {
        let choice = variant::choose(root, &file.path, headers);
        let mut fields = HeaderMap::with_capacity(8);
        fields.insert(header::CONTENT_TYPE, file.content_type.clone());
        let cache_control = self.max_age.as_ref().map(|max_age| max_age.cache_control(file.carries_digest));
        let sent = match choice.variant {
            Some((coding, variant)) => {
                fields.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
                variant
            }
            None => file,
        };
        if choice.varies {
            fields.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        if let Some(cache_control) = cache_control {
            fields.insert(header::CACHE_CONTROL, cache_control);
        }
        let preconditions = Preconditions::of(headers);
        let is_head = *method == Method::HEAD;
        file_response(sent, StatusCode::OK, fields, &preconditions, !is_head, is_head)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::time::Duration;

    use super::*;

    #[test]
    fn mounts_parse_and_match_whole_segments() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let text = format!("/assets/={}", dir.path().display());
        let mount = Mount::parse(&text).unwrap();
        assert_eq!(mount, Mount { prefix: "/assets".to_owned(), root: root.clone(), options: MountOptions::default() });
        assert_eq!(mount.relative("/assets/app.css"), Some("app.css"));
        assert_eq!(mount.relative("/assets"), None);
        assert_eq!(mount.relative("/assetsx/app.css"), None);
        let whole_site = Mount::parse(&format!("/={}", dir.path().display())).unwrap();
        assert_eq!(whole_site.relative("/robots.txt"), Some("robots.txt"));
        for bad in ["assets", "/assets", "nope=/tmp", "/a/../b=/tmp", "/a%2f=/tmp"] {
            assert!(Mount::parse(bad).is_err(), "{bad}");
        }
        assert!(Mount::parse("/a=/no/such/dir").is_err());
        let file = root.join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(Mount::parse(&format!("/a={}", file.display())).unwrap_err().contains("not a directory"));
    }

    #[test]
    fn static_mounts_take_options_after_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let shown = dir.path().display();
        let options = |text: String| Mount::parse_static(&text).map(|mount| mount.options);
        assert_eq!(options(format!("/a={shown}")), Ok(MountOptions::default()));
        assert_eq!(options(format!("/a={shown}:only")), Ok(MountOptions { only: true, dot_files: false }));
        let both = MountOptions { only: true, dot_files: true };
        assert_eq!(options(format!("/a={shown}:dotfiles:only")), Ok(both));
        assert_eq!(Mount::parse_static(&format!("/a={shown}:only")).unwrap().root, dir.path().canonicalize().unwrap());
        assert!(options(format!("/a={shown}:olny")).unwrap_err().contains("options are :only and :dotfiles"));
        assert!(Mount::parse(&format!("/a={shown}:only")).is_err(), "an --accel-mapping takes no options");
        let flags = MountOptions { only: false, dot_files: true };
        assert_eq!(MountOptions { only: true, dot_files: false }.with(flags), both);
    }

    #[test]
    fn a_file_and_its_variant_are_sent_with_the_same_fields_opened_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("app-5c1f4d8e.css"), "body{}").unwrap();
        std::fs::write(root.join("app-5c1f4d8e.css.br"), "br").unwrap();
        let settings = StaticSettings {
            mounts: vec![Mount { prefix: "/assets".to_owned(), root: root.clone(), options: MountOptions::default() }],
            max_age: Some(MaxAge::new(Duration::from_secs(60))),
            ..StaticSettings::default()
        };
        let fields = |accept: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(accept));
            let answer = settings.answer(&Method::GET, "/assets/app-5c1f4d8e.css", &headers);
            let Some(StaticAnswer::File(response)) = answer else { panic!("no file") };
            assert_eq!(response.status, StatusCode::OK);
            let fields = response.headers.iter();
            fields.map(|(name, value)| format!("{name}: {}", value.to_str().unwrap())).collect::<Vec<_>>()
        };
        let validators = |name: &str| {
            let meta = std::fs::metadata(root.join(name)).unwrap();
            let date = httpdate::fmt_http_date(meta.modified().unwrap());
            [format!("etag: \"{:x}-{:x}\"", meta.mtime(), meta.len()), format!("last-modified: {date}")]
        };
        let [etag, last_modified] = validators("app-5c1f4d8e.css");
        let plain = [
            "content-type: text/css; charset=utf-8",
            "vary: Accept-Encoding",
            "cache-control: public, max-age=60, immutable",
            &etag,
            &last_modified,
            "accept-ranges: bytes",
            "content-length: 6",
        ];
        let [etag, last_modified] = validators("app-5c1f4d8e.css.br");
        let brotli = [
            "content-type: text/css; charset=utf-8",
            "content-encoding: br",
            "vary: Accept-Encoding",
            "cache-control: public, max-age=60, immutable",
            &etag,
            &last_modified,
            "accept-ranges: bytes",
            "content-length: 2",
        ];
        for asked in ["opened", "kept"] {
            assert_eq!(fields("identity"), plain, "{asked}");
            assert_eq!(fields("br"), brotli, "{asked}");
        }
    }
}
