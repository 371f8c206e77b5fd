//! Which Python runs the bundled worker. `headway serve` needs it to start its workers, and the
//! lab needs the same one to know which gunicorn, granian or uvicorn sit beside the worker's
//! `headway` package; one set of rules here keeps the two from picking different interpreters.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::executable::{is_executable, which};

/// The environment variable that names the interpreter, like `--python`.
pub const PYTHON_ENV: &str = "HEADWAY_PYTHON";

/// The interpreter for the bundled worker, by the first rule that gives one:
/// 1. `given` (`--python` or `$HEADWAY_PYTHON`), as it is;
/// 2. the `python3`, else `python`, in the directory of the `headway` binary: `pip install`
///    puts the binary next to the environment's interpreter, the one that has the `headway`
///    package;
/// 3. `python3` on `path`.
pub fn find_python(given: Option<PathBuf>, headway: Option<&Path>, path: &OsStr) -> Option<PathBuf> {
    if given.is_some() {
        return given;
    }
    let beside = headway.and_then(Path::parent).and_then(|dir| {
        ["python3", "python"].iter().map(|name| dir.join(name)).find(|candidate| is_executable(candidate))
    });
    beside.or_else(|| which("python3", path))
}

/// `$HEADWAY_PYTHON`, read as `--python`'s default is: an empty value counts as unset.
pub fn python_from_env() -> Option<PathBuf> {
    std::env::var_os(PYTHON_ENV).filter(|value| !value.is_empty()).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn runnable(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn given_then_beside_the_binary_then_path() {
        let (bin, on_path) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let headway = bin.path().join("headway");
        let path = on_path.path().as_os_str();
        assert_eq!(find_python(None, Some(&headway), path), None, "none anywhere");

        let path_python = runnable(on_path.path(), "python3");
        assert_eq!(find_python(None, Some(&headway), path), Some(path_python.clone()));
        assert_eq!(find_python(None, None, path), Some(path_python), "binary unknown: PATH");

        let beside_python = runnable(bin.path(), "python");
        assert_eq!(find_python(None, Some(&headway), path), Some(beside_python));
        let beside_python3 = runnable(bin.path(), "python3");
        assert_eq!(find_python(None, Some(&headway), path), Some(beside_python3), "python3 before python");

        let given = PathBuf::from("/opt/py/bin/python3.12");
        assert_eq!(find_python(Some(given.clone()), Some(&headway), path), Some(given), "given, unchecked");
    }
}
