//! Files the front opened lately, kept open for a second, as nginx's `open_file_cache` keeps
//! them: a hot asset asked for thousands of times a second is resolved and opened once a second,
//! not on every request. Its `openat` and `close` alone were a sixth of the front's CPU for a
//! 1 KiB file under load (docs/design/static-files.md).
//!
//! The price is the second: a file replaced (renamed over, as deploys do) is served as it was for
//! up to [`KEPT_FOR`] after, and a deleted one too; a file written in place is read as it is now,
//! with the length and validators it had. Each front thread keeps its own, so a look takes no
//! lock; only what was found a regular file under its root is kept, by the path it was asked by.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A regular file opened to be sent, by its resolved path, with what `fstat` said of it; shared
/// by the requests that send it while it is kept open.
#[derive(Debug, Clone)]
pub struct Opened {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub meta: Metadata,
}

/// How long a file stays open after it was resolved.
pub const KEPT_FOR: Duration = Duration::from_secs(1);
/// The most files one front thread keeps open: past it, those past their time go, and if none
/// has, all of them.
const MOST: usize = 512;

struct Kept {
    opened: Opened,
    until: Instant,
}

thread_local! {
    static KEPT: RefCell<HashMap<PathBuf, Kept>> = RefCell::new(HashMap::new());
}

/// The file kept for `path` (under a root, as it was asked for), if it is still in its time.
pub fn kept(path: &Path) -> Option<Opened> {
    KEPT.with_borrow(|kept| {
        let entry = kept.get(path)?;
        (Instant::now() < entry.until).then(|| entry.opened.clone())
    })
}

/// Keeps `opened`, found for `path`, for [`KEPT_FOR`].
pub fn keep(path: &Path, opened: &Opened) {
    let now = Instant::now();
    KEPT.with_borrow_mut(|kept| {
        if kept.len() >= MOST && !kept.contains_key(path) {
            kept.retain(|_, entry| now < entry.until);
            if kept.len() >= MOST {
                kept.clear();
            }
        }
        kept.insert(path.to_path_buf(), Kept { opened: opened.clone(), until: now + KEPT_FOR });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(path: &Path) -> Opened {
        let file = std::fs::File::open(path).unwrap();
        let meta = file.metadata().unwrap();
        Opened { path: path.to_path_buf(), file: Arc::new(file), meta }
    }

    #[test]
    fn a_kept_file_is_found_until_its_time_is_up_and_the_most_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        assert!(kept(&path).is_none());
        keep(&path, &opened(&path));
        assert_eq!(kept(&path).unwrap().path, path);
        KEPT.with_borrow_mut(|kept| kept.get_mut(&path).unwrap().until = Instant::now());
        assert!(kept(&path).is_none(), "past its time");
        for n in 0..MOST + 10 {
            keep(&dir.path().join(n.to_string()), &opened(&path));
        }
        assert!(KEPT.with_borrow(HashMap::len) <= MOST);
    }
}
