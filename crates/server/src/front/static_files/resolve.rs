//! Which file a URL path names under a directory, never one outside it.
//!
//! The rule is on the resolved path, not on the string: the path's segments are decoded, and a
//! segment that could climb or hide (`.`, `..`, one holding a `/` or a NUL once decoded, a dot
//! file unless the mount serves them) refuses the request outright; what is left is joined to the root and resolved, symlinks
//! followed (by `realpath` when a component below the root is one; a path with none is its own
//! resolution), and the result must still lie under the root's own resolved path. A symlink inside
//! the directory pointing inside it is served; one pointing out is refused.
//!
//! The file found is opened here, and what it is read from the open descriptor (one `fstat`), as
//! nginx does: the directories above it are looked at with `lstat`, the file itself only opened,
//! without following a symlink (one there goes through `realpath`). What was found stays open for
//! a second (`open_files`), found again by the path it was asked by, for any root its resolved
//! path lies under.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;

use super::open_files::{self, Opened};

/// What a path names under a root.
#[derive(Debug)]
pub enum Resolution {
    /// A regular file, opened.
    Found(Arc<Opened>),
    /// Nothing (or a directory, or something not a regular file).
    Missing,
    /// A path that tries to leave the root, or names a dot file: never served.
    Refused(&'static str),
}

/// Resolves `relative` (the rest of a URL path after its mount, still percent-encoded, without
/// its query) under `root`, which must be a resolved (canonical) directory; `dot_files`: names
/// starting with `.` may be served (never `.` or `..` themselves).
pub fn resolve(root: &Path, relative: &str, dot_files: bool) -> Resolution {
    // One allocation for the path; a segment without a `%` is taken as it is, not copied.
    let mut path = PathBuf::with_capacity(root.as_os_str().len() + 1 + relative.len());
    path.push(root);
    let mut named = false;
    for segment in relative.split('/') {
        let decoded: Cow<'_, [u8]> = percent_decode_str(segment).into();
        match &*decoded {
            [] => continue,
            b"." | b".." => return Resolution::Refused("a . or .. segment"),
            [b'.', ..] if !dot_files => return Resolution::Refused("a dot file"),
            bytes if bytes.contains(&b'/') => return Resolution::Refused("an encoded /"),
            bytes if bytes.contains(&0) => return Resolution::Refused("a NUL byte"),
            bytes => path.push(OsStr::from_bytes(bytes)),
        }
        named = true;
    }
    if !named {
        return Resolution::Missing; // the mount itself: a directory, never listed
    }
    within(root, &path)
}

/// `path` resolved and opened, if it is a regular file under `root` (canonical); symlinks
/// followed.
///
/// `root` is resolved already, so only the components below it can be symlinks: each directory
/// is looked at (`lstat`; none for a file at the top of its mount) and the file opened without
/// following a symlink, so a path with none is its own resolution. One with a symlink, or one not
/// spelled below `root` (an `X-Sendfile` path, which may hold `..`), is resolved whole by
/// `realpath`.
pub fn within(root: &Path, path: &Path) -> Resolution {
    if let Some(opened) = open_files::kept(path).filter(|opened| lies_under(&opened.path, root)) {
        return Resolution::Found(opened);
    }
    let resolution = walked_within(root, path);
    if let Resolution::Found(opened) = &resolution {
        open_files::keep(path, opened);
    }
    resolution
}

/// [`within`], looked up on the file system.
fn walked_within(root: &Path, path: &Path) -> Resolution {
    let below = path.strip_prefix(root).ok().filter(|below| below.components().all(is_named));
    let Some(below) = below else { return resolved_within(root, path) };
    let mut walked = root.to_path_buf();
    let mut components = below.components().peekable();
    while let Some(component) = components.next() {
        walked.push(component);
        if components.peek().is_none() {
            break;
        }
        match walked.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => return resolved_within(root, path),
            Ok(_) => {}
            Err(_) => return Resolution::Missing,
        }
    }
    match open(&walked) {
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => resolved_within(root, path),
        opened => found(walked, opened),
    }
}

/// Whether a path component names an entry (not `..`, `.` or a root).
fn is_named(component: Component<'_>) -> bool {
    matches!(component, Component::Normal(_))
}

/// Whether `path` is `root` or below it, both resolved: spelled alike, so their bytes say it
/// without `Path::starts_with`'s walk of their components.
fn lies_under(path: &Path, root: &Path) -> bool {
    let (path, root) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    match path.strip_prefix(root) {
        Some(rest) => rest.is_empty() || rest[0] == b'/' || root.ends_with(b"/"),
        None => false,
    }
}

/// `path` resolved by `realpath`, if it is a regular file under `root`.
fn resolved_within(root: &Path, path: &Path) -> Resolution {
    let resolved = match path.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => return Resolution::Missing,
    };
    if !lies_under(&resolved, root) {
        return Resolution::Refused("a symlink out of the directory");
    }
    let opened = open(&resolved);
    found(resolved, opened)
}

/// Opens a file to send, and reads what it is. A symlink is not followed (`ELOOP`: one made since
/// the path was resolved, or one the caller resolves); neither a FIFO nor a terminal can hold the
/// open up or be taken by it before `fstat` shows it is no regular file.
fn open(path: &Path) -> io::Result<(File, Metadata)> {
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let file = File::options().read(true).custom_flags(flags).open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// What an open of the resolved `path` says of it: a regular file is found; nothing, or anything
/// else, is missing.
fn found(path: PathBuf, opened: io::Result<(File, Metadata)>) -> Resolution {
    match opened {
        Ok((file, meta)) if meta.is_file() => Resolution::Found(Arc::new(Opened::new(path, file, &meta))),
        _ => Resolution::Missing,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The resolved path of what was found, if a file was.
    pub(in crate::front::static_files) fn found_path(resolution: &Resolution) -> Option<PathBuf> {
        match resolution {
            Resolution::Found(opened) => Some(opened.path.clone()),
            _ => None,
        }
    }

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    /// A root with `a.css`, `sub/b.js`, `.env`, `sub/.git/config`, a symlink in (`in.css` to
    /// `a.css`) and symlinks out (`out.txt` to a file beside the root, `up` to its parent), and
    /// `secret.txt` beside the root.
    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("public");
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        for (name, text) in [("a.css", "a"), ("sub/b.js", "b"), (".env", "x"), ("sub/.git/config", "x")] {
            std::fs::write(root.join(name), text).unwrap();
        }
        let outside = base.join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        std::os::unix::fs::symlink(root.join("a.css"), root.join("in.css")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out.txt")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("up")).unwrap();
        Tree { _dir: dir, root, outside }
    }

    #[test]
    fn files_under_the_root_are_found_by_their_resolved_path() {
        let tree = tree();
        assert_eq!(found_path(&resolve(&tree.root, "a.css", false)), Some(tree.root.join("a.css")));
        assert_eq!(found_path(&resolve(&tree.root, "sub/b.js", false)), Some(tree.root.join("sub/b.js")));
        assert_eq!(found_path(&resolve(&tree.root, "sub//b.js", false)), Some(tree.root.join("sub/b.js")));
        assert_eq!(found_path(&resolve(&tree.root, "%61.css", false)), Some(tree.root.join("a.css")), "decoded");
        assert_eq!(
            found_path(&resolve(&tree.root, "in.css", false)),
            Some(tree.root.join("a.css")),
            "a symlink within"
        );
        assert_eq!(
            found_path(&resolve(&tree.root, "up/public/a.css", false)),
            Some(tree.root.join("a.css")),
            "out and in"
        );
    }

    #[test]
    fn misses_and_directories_are_missing() {
        let tree = tree();
        let fifo = std::ffi::CString::new(tree.root.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for path in ["", "nope.css", "sub", "sub/", "a.css/x", "fifo"] {
            assert!(matches!(resolve(&tree.root, path, false), Resolution::Missing), "{path}");
        }
    }

    #[test]
    fn every_way_out_is_refused() {
        let tree = tree();
        let cases = [
            "../secret.txt",
            "sub/../../secret.txt",
            "sub/../a.css",
            "./a.css",
            "%2e%2e/secret.txt",
            "%2E%2E/secret.txt",
            ".%2e/secret.txt",
            "sub%2f..%2f..%2fsecret.txt",
            "..%2fsecret.txt",
            "a.css%00.png",
            "%00",
            ".env",
            "%2eenv",
            "sub/.git/config",
            "out.txt",
            "up/secret.txt",
        ];
        for path in cases {
            assert!(matches!(resolve(&tree.root, path, false), Resolution::Refused(_)), "{path}");
        }
        assert!(tree.outside.exists());
    }

    #[test]
    fn a_path_lies_under_a_root_by_whole_components() {
        let under = |path: &str, root: &str| lies_under(Path::new(path), Path::new(root));
        assert!(under("/srv/public/a.css", "/srv/public"));
        assert!(under("/srv/public", "/srv/public"));
        assert!(under("/srv/public/a.css", "/"));
        assert!(!under("/srv/publicity/a.css", "/srv/public"), "a longer name is another directory");
        assert!(!under("/srv/pub", "/srv/public"));
        assert!(!under("/srv/secret", "/srv/public"));
    }

    #[test]
    fn a_file_kept_for_one_root_is_not_served_for_a_root_it_lies_outside() {
        let tree = tree();
        let sub = tree.root.join("sub");
        std::os::unix::fs::symlink(tree.root.join("a.css"), sub.join("up.css")).unwrap();
        let asked = sub.join("up.css");
        assert_eq!(found_path(&within(&tree.root, &asked)), Some(tree.root.join("a.css")), "inside the root");
        assert!(open_files::kept(&asked).is_some(), "kept for the next ask");
        assert!(matches!(within(&sub, &asked), Resolution::Refused(_)), "outside sub");
        assert!(matches!(resolve(&sub, "up.css", false), Resolution::Refused(_)), "by a mount's path");
        assert_eq!(found_path(&within(&tree.root, &asked)), Some(tree.root.join("a.css")));
    }

    #[test]
    fn dot_files_are_served_only_when_asked_and_never_dot_segments() {
        let tree = tree();
        assert_eq!(found_path(&resolve(&tree.root, ".env", true)), Some(tree.root.join(".env")));
        assert_eq!(
            found_path(&resolve(&tree.root, "sub/%2egit/config", true)),
            Some(tree.root.join("sub/.git/config"))
        );
        for path in ["../secret.txt", "%2e%2e/secret.txt", "./a.css", "sub/../a.css", "out.txt", "up/secret.txt"] {
            assert!(matches!(resolve(&tree.root, path, true), Resolution::Refused(_)), "{path}");
        }
    }
}
