//! `--reload`, for development: watch the app's files and replace the workers when one changes.
//!
//! The kernel says when a file changes (inotify, through the `notify` crate), so nothing polls.
//! Editors write a file in several steps (and save several files at once), so changes are
//! gathered for a moment ([`SETTLE`]) and answered with one reload. The reload is the SIGHUP
//! one: workers are replaced one at a time while requests wait in the queue.
//!
//! A change that breaks the app must not take down the workers that still serve the old code:
//! before a reload, the bundled worker's app is imported once in a throwaway process (the same
//! `load_app` the worker uses), and if that fails its traceback is shown and the workers are
//! left alone. A `--cmd` worker has no such check: its reload stops at the first process that
//! does not start, and the workers not yet replaced keep the old code, as after SIGHUP.

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::process::Command;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::workers::launch::{Launch, PythonApp};
use crate::workers::output::Output;
use crate::workers::supervisor::Reloader;

/// How long to gather changes after the first before reloading.
const SETTLE: Duration = Duration::from_millis(200);

/// What `--reload` watches.
#[derive(Debug, Clone)]
pub struct ReloadSettings {
    /// `--reload-dir`, each watched with everything below it; the working directory by default.
    pub dirs: Vec<PathBuf>,
    /// `--reload-include`: file name patterns that count (`*.py` by default).
    pub include: Vec<glob::Pattern>,
}

impl ReloadSettings {
    /// Whether a change to `path` should reload: its name matches a pattern, and it is not
    /// inside a hidden directory (`.git`, `.venv`) or a bytecode cache below a watched one.
    fn counts(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else { return false };
        if !self.include.iter().any(|pattern| pattern.matches(name)) {
            return false;
        }
        let below = self.dirs.iter().find_map(|dir| path.strip_prefix(dir).ok()).unwrap_or(path);
        !below.components().any(|part| match part {
            Component::Normal(part) => part.to_str().is_some_and(|part| part.starts_with('.') || part == "__pycache__"),
            _ => false,
        })
    }
}

/// Starts watching; the returned guard stops the watch when dropped. Fails if a directory
/// cannot be watched (it does not exist, or inotify's limits are reached).
pub fn start(settings: ReloadSettings, launch: Launch, reloader: Reloader) -> anyhow::Result<Watch> {
    let (changes, received) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Runs on notify's own thread; the receiver going away is the end of the watch.
        let _ = changes.send(event);
    })
    .context("cannot watch files for --reload")?;
    for dir in &settings.dirs {
        watcher
            .watch(dir, RecursiveMode::Recursive)
            .with_context(|| format!("cannot watch --reload-dir {}", dir.display()))?;
    }
    let patterns: Vec<&str> = settings.include.iter().map(glob::Pattern::as_str).collect();
    info!("reloading on changes to {} under {}", patterns.join(", "), display_dirs(&settings.dirs));
    let task = tokio::spawn(reload_on_changes(settings, launch, reloader, received));
    Ok(Watch { _watcher: watcher, task })
}

/// A running watch: the watcher, and the task that reloads on what it reports.
pub struct Watch {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn display_dirs(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|dir| dir.display().to_string()).collect::<Vec<_>>().join(", ")
}

async fn reload_on_changes(
    settings: ReloadSettings,
    launch: Launch,
    reloader: Reloader,
    mut received: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
) {
    while let Some(event) = received.recv().await {
        let mut changed = relevant(&settings, event);
        if changed.is_empty() {
            continue;
        }
        // Gather the rest of the save, then reload once for all of it.
        let settle = tokio::time::sleep(SETTLE);
        tokio::pin!(settle);
        loop {
            tokio::select! {
                () = &mut settle => break,
                Some(event) = received.recv() => changed.extend(relevant(&settings, event)),
            }
        }
        changed.sort();
        changed.dedup();
        let names: Vec<String> = changed.iter().map(|path| path.display().to_string()).collect();
        info!("changed: {}; reloading", names.join(", "));
        if let Err(err) = check_app(&launch).await {
            warn!("not reloading: {err:#}; the workers keep the code they run");
            continue;
        }
        match reloader.reload().await {
            Ok(()) => info!("reload done"),
            Err(err) => warn!("reload stopped: {err:#}"),
        }
    }
}

/// The paths of `event` that should reload.
fn relevant(settings: &ReloadSettings, event: notify::Result<notify::Event>) -> Vec<PathBuf> {
    match event {
        Ok(event) if matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)) => {
            event.paths.into_iter().filter(|path| settings.counts(path)).collect()
        }
        Ok(_) => Vec::new(),
        Err(err) => {
            warn!("--reload: {err}");
            Vec::new()
        }
    }
}

/// Imports the bundled worker's app (and `--hooks` module) in a throwaway process, as the worker
/// would: its traceback (in the server's log) says what is wrong.
async fn check_app(launch: &Launch) -> anyhow::Result<()> {
    let Launch::Python { python, app: PythonApp { spec, hooks, .. } } = launch else { return Ok(()) };
    let app = spec.as_deref().unwrap_or("headway.demo:app");
    let check = "import sys; from headway.worker.__main__ import load_app_and_hooks as load; \
                 sys.exit(load(sys.argv[1], sys.argv[2] or None) is None)";
    let mut command = Command::new(python);
    command.args(["-c", check, app, hooks.as_deref().unwrap_or("")]).stdin(Stdio::null()).kill_on_drop(true);
    let (mut child, mut output) = Output::spawn(&mut command, |_| tracing::info_span!("reload", check = app))
        .with_context(|| format!("cannot run {}", python.display()))?;
    let status = child.wait().await.with_context(|| format!("cannot run {}", python.display()))?;
    output.finished().await;
    anyhow::ensure!(status.success(), "{app} does not import ({status}); {}", output.said());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_files_count_unless_hidden_or_cached() {
        let settings = ReloadSettings {
            dirs: vec![PathBuf::from("/src/.app")],
            include: vec![glob::Pattern::new("*.py").unwrap(), glob::Pattern::new("*.html").unwrap()],
        };
        assert!(settings.counts(Path::new("/src/.app/site/views.py")), "a hidden watched dir still counts");
        assert!(settings.counts(Path::new("/src/.app/templates/index.html")));
        assert!(!settings.counts(Path::new("/src/.app/site/views.pyc")));
        assert!(!settings.counts(Path::new("/src/.app/site/__pycache__/views.py")));
        assert!(!settings.counts(Path::new("/src/.app/.venv/lib/six.py")));
        assert!(!settings.counts(Path::new("/src/.app/notes.txt")));
    }
}
