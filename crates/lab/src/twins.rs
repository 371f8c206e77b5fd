//! The demo app and its twins for the peers, shipped inside the binary and written to a
//! temporary directory at run time, so the lab runs the same app wherever `headway` is installed.
//!
//! The directory mirrors the package's layout (the twins read `../demo_index.txt` and
//! `../demo_fortunes.txt`): `headway/demo.py` (WSGI), `headway/twins/demo_asgi.py` (ASGI) and
//! `headway/twins/flask_bench.py` (Flask; both import `headway.demo`) are importable with
//! PYTHONPATH set to the directory; `headway/twins/demo.ru` (Rack, Puma) and
//! `headway/twins/demo.js` (Node) are run as files.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

const FILES: [(&str, &str); 9] = [
    ("headway/__init__.py", "\"\"\"The headway demo app and its twins, as shipped by headway lab.\"\"\"\n"),
    ("headway/demo.py", include_str!("../../../python/headway/demo.py")),
    ("headway/demo_index.txt", include_str!("../../../python/headway/demo_index.txt")),
    ("headway/demo_fortunes.txt", include_str!("../../../python/headway/demo_fortunes.txt")),
    ("headway/twins/__init__.py", ""),
    ("headway/twins/demo_asgi.py", include_str!("../../../python/headway/twins/demo_asgi.py")),
    ("headway/twins/demo.ru", include_str!("../../../python/headway/twins/demo.ru")),
    ("headway/twins/demo.js", include_str!("../../../python/headway/twins/demo.js")),
    ("headway/twins/flask_bench.py", include_str!("../../../python/headway/twins/flask_bench.py")),
];

/// WSGI callable of the demo app, for gunicorn and granian.
pub const WSGI_APP: &str = "headway.demo:app";
/// ASGI callable of the twin, for uvicorn.
pub const ASGI_APP: &str = "headway.twins.demo_asgi:app";
/// The Flask app of the throughput scenario, for headway, gunicorn and granian.
pub const FLASK_APP: &str = "headway.twins.flask_bench:app";

/// The written files; removed when dropped.
pub struct Twins {
    dir: tempfile::TempDir,
}

impl Twins {
    pub fn write() -> anyhow::Result<Twins> {
        let dir =
            tempfile::Builder::new().prefix("headway-lab-").tempdir().context("cannot make a temporary directory")?;
        for (name, text) in FILES {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("every twin is inside the directory"))?;
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
        std::fs::create_dir_all(dir.path().join("logs"))?;
        Ok(Twins { dir })
    }

    /// Directory to put first on PYTHONPATH for the Python twins.
    pub fn python_path(&self) -> &Path {
        self.dir.path()
    }

    pub fn rack_app(&self) -> PathBuf {
        self.dir.path().join("headway/twins/demo.ru")
    }

    pub fn node_app(&self) -> PathBuf {
        self.dir.path().join("headway/twins/demo.js")
    }

    /// Where the servers' output goes.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join("logs").join(format!("{name}.log"))
    }
}
