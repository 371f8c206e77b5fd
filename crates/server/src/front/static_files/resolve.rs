//! Which file a URL path names under a directory, never one outside it.
//!
//! The rule is on the resolved path, not on the string: the path's segments are decoded, and a
//! segment that could climb or hide (`.`, `..`, one holding a `/` or a NUL once decoded, a dot
//! file unless the mount serves them) refuses the request outright; what is left is joined to the root and resolved, symlinks
//! followed (by `realpath` when a component below the root is one; a path with none is its own
//! resolution), and the result must still lie under the root's own resolved path. A symlink inside
//! the directory pointing inside it is served; one pointing out is refused.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use percent_encoding::percent_decode_str;

/// What a path names under a root.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// A regular file, by its resolved path.
    Found(PathBuf),
    /// Nothing (or a directory, or something not a regular file).
    Missing,
    /// A path that tries to leave the root, or names a dot file: never served.
    Refused(&'static str),
}

/// Resolves `relative` (the rest of a URL path after its mount, still percent-encoded, without
/// its query) under `root`, which must be a resolved (canonical) directory; `dot_files`: names
/// starting with `.` may be served (never `.` or `..` themselves).
pub fn resolve(root: &Path, relative: &str, dot_files: bool) -> Resolution {
    let mut path = root.to_path_buf();
    for segment in relative.split('/') {
        let decoded: Vec<u8> = percent_decode_str(segment).collect();
        match decoded.as_slice() {
            [] => continue,
            b"." | b".." => return Resolution::Refused("a . or .. segment"),
            [b'.', ..] if !dot_files => return Resolution::Refused("a dot file"),
            bytes if bytes.contains(&b'/') => return Resolution::Refused("an encoded /"),
            bytes if bytes.contains(&0) => return Resolution::Refused("a NUL byte"),
            bytes => path.push(OsStr::from_bytes(bytes)),
        }
    }
    if path.as_path() == root {
        return Resolution::Missing; // the mount itself: a directory, never listed
    }
    within(root, &path)
}

/// `path` resolved, if it is a regular file under `root` (canonical); symlinks followed.
///
/// `root` is resolved already, so only the components below it can be symlinks: each is looked
/// at (`lstat`, one call for a file at the top of its mount), and a path with none is its own
/// resolution. One with a symlink, or one not spelled below `root` (an `X-Sendfile` path, which
/// may hold `..`), is resolved whole by `realpath`.
pub fn within(root: &Path, path: &Path) -> Resolution {
    let below = path.strip_prefix(root).ok().filter(|below| below.components().all(is_named));
    let Some(below) = below else { return resolved_within(root, path) };
    let mut walked = root.to_path_buf();
    let mut last = None;
    for component in below.components() {
        walked.push(component);
        match walked.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => return resolved_within(root, path),
            Ok(meta) => last = Some(meta),
            Err(_) => return Resolution::Missing,
        }
    }
    match last {
        Some(meta) if meta.is_file() => Resolution::Found(walked),
        _ => Resolution::Missing,
    }
}

/// Whether a path component names an entry (not `..`, `.` or a root).
fn is_named(component: Component<'_>) -> bool {
    matches!(component, Component::Normal(_))
}

/// `path` resolved by `realpath`, if it is a regular file under `root`.
fn resolved_within(root: &Path, path: &Path) -> Resolution {
    let resolved = match path.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => return Resolution::Missing,
    };
    if !resolved.starts_with(root) {
        return Resolution::Refused("a symlink out of the directory");
    }
    match resolved.metadata() {
        Ok(meta) if meta.is_file() => Resolution::Found(resolved),
        _ => Resolution::Missing,
    }
}

/// Opens a resolved file for sending. The last component is not followed if it became a
/// symlink since it was resolved.
pub fn open(resolved: &Path) -> io::Result<File> {
    File::options().read(true).custom_flags(libc::O_NOFOLLOW).open(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(resolve(&tree.root, "a.css", false), Resolution::Found(tree.root.join("a.css")));
        assert_eq!(resolve(&tree.root, "sub/b.js", false), Resolution::Found(tree.root.join("sub/b.js")));
        assert_eq!(resolve(&tree.root, "sub//b.js", false), Resolution::Found(tree.root.join("sub/b.js")));
        assert_eq!(resolve(&tree.root, "%61.css", false), Resolution::Found(tree.root.join("a.css")), "decoded");
        assert_eq!(
            resolve(&tree.root, "in.css", false),
            Resolution::Found(tree.root.join("a.css")),
            "a symlink within"
        );
        assert_eq!(
            resolve(&tree.root, "up/public/a.css", false),
            Resolution::Found(tree.root.join("a.css")),
            "out and in"
        );
    }

    #[test]
    fn misses_and_directories_are_missing() {
        let tree = tree();
        for path in ["", "nope.css", "sub", "sub/", "a.css/x"] {
            assert_eq!(resolve(&tree.root, path, false), Resolution::Missing, "{path}");
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
    fn dot_files_are_served_only_when_asked_and_never_dot_segments() {
        let tree = tree();
        assert_eq!(resolve(&tree.root, ".env", true), Resolution::Found(tree.root.join(".env")));
        assert_eq!(
            resolve(&tree.root, "sub/%2egit/config", true),
            Resolution::Found(tree.root.join("sub/.git/config"))
        );
        for path in ["../secret.txt", "%2e%2e/secret.txt", "./a.css", "sub/../a.css", "out.txt", "up/secret.txt"] {
            assert!(matches!(resolve(&tree.root, path, true), Resolution::Refused(_)), "{path}");
        }
    }
}
