//! Finding programs the way a shell does: a file with an execute bit, looked up on a `PATH`.
//! The server finds the Python and Ruby workers' interpreters this way, and the lab the peers it
//! runs.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The first `program` in the directories of `path` (a `PATH`-like list) that can be run.
pub fn which(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file someone may execute.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// What is wrong with an interpreter given by name (looked for on `path`) or by path, if
/// anything: the end of the line the user gets.
pub fn interpreter_problem(given: &Path, path: &OsStr) -> Option<&'static str> {
    if given.components().count() == 1 {
        which(&given.to_string_lossy(), path).is_none().then_some("not found on PATH")
    } else if !given.exists() {
        Some("no such file")
    } else {
        (!is_executable(given)).then_some("not an executable file")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn finds_the_first_runnable_file_on_the_path() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(first.path().join("tool"), "not runnable").unwrap();
        std::fs::create_dir(first.path().join("dir")).unwrap();
        let runnable = second.path().join("tool");
        std::fs::write(&runnable, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&runnable, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([first.path(), second.path()]).unwrap();
        assert_eq!(which("tool", &path), Some(runnable));
        assert_eq!(which("dir", &path), None);
        assert_eq!(which("absent", &path), None);
    }
}
