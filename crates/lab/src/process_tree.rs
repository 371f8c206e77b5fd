//! A server as a tree of processes: the one the lab started and every descendant (workers,
//! a shell's children, the Puma that `headway serve --cmd` runs). Used to sum their memory, to
//! read their CPU time, and to signal all of them when the server is stopped, whatever process
//! groups they made.
//! `/proc` is read by the parser the server uses too ([`headway_common::procfs`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use headway_common::procfs::processes;

/// How often memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The processes of one server at one moment.
#[derive(Debug, Default)]
pub struct Tree {
    pub pids: BTreeSet<u32>,
    pub groups: BTreeSet<u32>,
    pub rss_bytes: u64,
    /// Each process's CPU time so far (user + system, all its threads), in seconds.
    pub cpu_secs: BTreeMap<u32, f64>,
}

/// `root` and its descendants, now.
pub fn tree_of(root: u32) -> Tree {
    let all = processes();
    let mut tree = Tree::default();
    let mut frontier = vec![root];
    while let Some(pid) = frontier.pop() {
        let Some(info) = all.get(&pid) else { continue };
        if !tree.pids.insert(pid) {
            continue;
        }
        tree.groups.insert(info.pgrp);
        let usage = info.usage();
        tree.rss_bytes += usage.rss_bytes;
        tree.cpu_secs.insert(pid, usage.cpu_secs);
        frontier.extend(all.iter().filter(|(_, p)| p.ppid == pid).map(|(child, _)| *child));
    }
    tree
}

/// Makes `command` start a server's tree apart from the lab: in a process group of its own,
/// and with `own_session` in a session of its own, which with the kernel's autogroup on is a
/// scheduling group of its own too (`headway lab run --own-sessions`).
pub fn start_apart(command: &mut Command, own_session: bool) {
    if own_session {
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent's.
        unsafe { command.pre_exec(|| if libc::setsid() < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }) };
    } else {
        command.process_group(0);
    }
}

/// Sends `signal` to every process group of the tree and to each process in it (a process may
/// have left its group; signalling it twice is harmless). Never to the lab's own process or
/// group, whatever the tree holds.
pub fn signal_tree(tree: &Tree, signal: libc::c_int) {
    // SAFETY: getpgrp and kill have no memory preconditions; a vanished target gives ESRCH.
    let own_group = unsafe { libc::getpgrp() } as u32;
    for &group in tree.groups.iter().filter(|&&group| group != own_group && group > 1) {
        unsafe { libc::kill(-(group as libc::pid_t), signal) };
    }
    for &pid in tree.pids.iter().filter(|&&pid| pid != std::process::id() && pid > 1) {
        unsafe { libc::kill(pid as libc::pid_t, signal) };
    }
}

/// Samples the summed RSS of a process tree in the background and keeps the peak since the last
/// [`MemorySampler::take_peak`].
pub struct MemorySampler {
    root: u32,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MemorySampler {
    pub fn start(root: u32) -> MemorySampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(tree_of(root).rss_bytes, Ordering::Relaxed);
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
        };
        MemorySampler { root, peak, stop, thread: Some(thread) }
    }

    /// The peak since the previous call (or the start), counting a sample taken now (a case may
    /// be shorter than the sampling interval), and a fresh start for the next one.
    pub fn take_peak(&self) -> u64 {
        self.peak.swap(0, Ordering::Relaxed).max(tree_of(self.root).rss_bytes)
    }
}

impl Drop for MemorySampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_part_of_its_parents_tree() {
        let mut child = Command::new("sleep").arg("5").process_group(0).spawn().expect("sleep runs");
        let tree = tree_of(std::process::id());
        assert!(tree.pids.contains(&std::process::id()));
        assert!(tree.pids.contains(&child.id()));
        assert!(tree.rss_bytes > 1 << 20);
        let child_tree = tree_of(child.id());
        assert_eq!(child_tree.groups.iter().copied().collect::<Vec<_>>(), vec![child.id()]);
        signal_tree(&child_tree, libc::SIGKILL);
        assert!(!child.wait().expect("reaped").success());
    }

    #[test]
    fn a_server_starts_in_a_group_of_its_own_and_in_a_session_of_its_own_if_asked() {
        let session_and_group = |pid: u32| unsafe { (libc::getsid(pid as i32), libc::getpgid(pid as i32)) };
        for own_session in [false, true] {
            let mut command = Command::new("sleep");
            command.arg("5");
            start_apart(&mut command, own_session);
            let mut child = command.spawn().expect("sleep runs");
            let (session, group) = session_and_group(child.id());
            assert_eq!(group, child.id() as i32);
            let expected_session = if own_session { child.id() as i32 } else { session_and_group(0).0 };
            assert_eq!(session, expected_session, "own session: {own_session}");
            signal_tree(&tree_of(child.id()), libc::SIGKILL);
            let _ = child.wait();
        }
    }
}
