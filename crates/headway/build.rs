//! Gives `headway --version` the commit and the target it was built for. A build script is
//! where cargo tells the target triple, and git is asked for the commit; built outside a
//! checkout (an sdist unpacked by pip), the commit is `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=HEADWAY_TARGET={target}");
    let crate_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let commit = git(&crate_dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HEADWAY_COMMIT={commit}");
    // Run again when HEAD moves: HEAD itself (a checkout, a detached commit), the branch it
    // names (a commit on it), and the packed refs (where the branch may live instead). git
    // prints their paths relative to the directory it ran in.
    let branch = git(&crate_dir, &["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().map(String::from).chain(branch) {
        if let Some(path) = git(&crate_dir, &["rev-parse", "--git-path", &name]).map(|path| crate_dir.join(path)) {
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}

/// The first line git prints for `args`, run in `dir`; `None` when git is missing or `dir` is
/// not in a repository.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (output.status.success() && !line.is_empty()).then(|| line.to_string())
}
