//! Files the front opened lately, kept open for a second, as nginx's `open_file_cache` keeps
//! them: a hot asset asked for thousands of times a second is resolved and opened once a second,
//! not on every request. Its `openat` and `close` alone were a sixth of the front's CPU for a
//! 1 KiB file under load (docs/design/static-files.md). What a file's responses say of it (its
//! validators, length and content type, whether its name carries a digest) is made when it is
//! opened and kept with it, so a request shares it rather than formatting it again.
//!
//! The price is the second: a file replaced (renamed over, as deploys do) is served as it was for
//! up to [`KEPT_FOR`] after, and a deleted one too; a file written in place is read as it is now,
//! with the length and validators it had. Each front thread keeps its own, so a look takes no
//! lock; only what was found a regular file under its root is kept, by the path it was asked by,
//! and found again for any root its resolved path lies under (`resolve` checks).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::HeaderValue;

use super::conditional::Validators;
use super::fields;

/// A regular file opened to be sent, and what its responses say of it; shared by the requests
/// that send it while it is kept open.
#[derive(Debug)]
pub struct Opened {
    /// Resolved.
    pub path: PathBuf,
    pub file: File,
    /// Its length when it was opened, which its responses say.
    pub len: u64,
    /// `len` as a `Content-Length`, for a response with the whole file.
    pub content_length: HeaderValue,
    pub validators: Validators,
    /// By its name; a precompressed variant's goes unused, as it is sent with its file's.
    pub content_type: HeaderValue,
    /// Whether its name carries a digest of its content (`Cache-Control: immutable`).
    pub carries_digest: bool,
}

impl Opened {
    /// `file`, opened at the resolved `path`, of which `fstat` said `meta`.
    pub fn new(path: PathBuf, file: File, meta: &Metadata) -> Opened {
        Opened {
            content_type: fields::content_type(&path),
            carries_digest: fields::carries_digest(&path),
            validators: Validators::of(meta),
            len: meta.len(),
            content_length: HeaderValue::from(meta.len()),
            file,
            path,
        }
    }
}

/// How long a file stays open after it was resolved.
pub const KEPT_FOR: Duration = Duration::from_secs(1);
/// The most files one front thread keeps open: past it, those past their time go, and if none
/// has, all of them.
const MOST: usize = 512;

struct Kept {
    opened: Arc<Opened>,
    until: Instant,
}

/// By the bytes of the path asked for, hashed whole by a fast hasher: `Path`'s own `Hash` goes
/// component by component, and std's SipHash is slow for a look on every request.
type KeptFiles = HashMap<Box<[u8]>, Kept, foldhash::fast::RandomState>;

thread_local! {
    static KEPT: RefCell<KeptFiles> = RefCell::new(KeptFiles::default());
}

/// The file kept for `path` (under a root, as it was asked for), if it is still in its time.
pub fn kept(path: &Path) -> Option<Arc<Opened>> {
    KEPT.with_borrow(|kept| {
        let entry = kept.get(path.as_os_str().as_bytes())?;
        (Instant::now() < entry.until).then(|| Arc::clone(&entry.opened))
    })
}

/// Keeps `opened`, found for `path`, for [`KEPT_FOR`].
pub fn keep(path: &Path, opened: &Arc<Opened>) {
    let now = Instant::now();
    let key = path.as_os_str().as_bytes();
    KEPT.with_borrow_mut(|kept| {
        if kept.len() >= MOST && !kept.contains_key(key) {
            kept.retain(|_, entry| now < entry.until);
            if kept.len() >= MOST {
                kept.clear();
            }
        }
        kept.insert(key.into(), Kept { opened: Arc::clone(opened), until: now + KEPT_FOR });
    });
}

#[cfg(test)]
pub(super) mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// The file at `path`, opened as it is to be sent.
    pub(in crate::front::static_files) fn opened(path: &Path) -> Arc<Opened> {
        let file = File::open(path).unwrap();
        let meta = file.metadata().unwrap();
        Arc::new(Opened::new(path.to_path_buf(), file, &meta))
    }

    #[test]
    fn a_kept_file_is_found_until_its_time_is_up_and_the_most_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        assert!(kept(&path).is_none());
        keep(&path, &opened(&path));
        assert_eq!(kept(&path).unwrap().path, path);
        let key = path.as_os_str().as_bytes();
        KEPT.with_borrow_mut(|kept| kept.get_mut(key).unwrap().until = Instant::now());
        assert!(kept(&path).is_none(), "past its time");
        for n in 0..MOST + 10 {
            keep(&dir.path().join(n.to_string()), &opened(&path));
        }
        assert!(KEPT.with_borrow(HashMap::len) <= MOST);
    }

    #[test]
    fn an_opened_file_carries_the_fields_its_responses_send() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app-5c1f4d8e.css");
        std::fs::write(&path, "0123456789").unwrap();
        let opened = opened(&path);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((opened.len, &opened.content_length), (10, &HeaderValue::from_static("10")));
        assert_eq!(opened.content_type, "text/css; charset=utf-8");
        assert!(opened.carries_digest);
        assert_eq!(opened.validators.etag, format!("\"{:x}-a\"", meta.mtime()));
        assert_eq!(opened.validators.last_modified, httpdate::fmt_http_date(meta.modified().unwrap()));
    }
}
