//! `--cpu-affinity`: the CPU each worker process runs on, and how it shares it with the front.
//!
//! Why pin. A bundled worker runs its app on T threads that pass the GIL between them, and the
//! front wakes them as it publishes requests. Left to the kernel, a woken thread is queued on the
//! CPU it last ran on, often the busy one, and the other CPU, going idle a moment later, does
//! not take it (the kernel leaves a task that ran within the last half millisecond where its
//! cache is): under full load part of the machine stayed idle, and less of it pinned as below
//! (the front, which floats, can still be queued so; docs/design/scheduling.md has the figures).
//! And each hand-over of the GIL to a thread on the other CPU moved the app's objects between
//! the CPUs' caches. With each worker process on one CPU of its own, its threads queue where
//! they will run and its data stays in one cache. The front is not pinned: it takes whichever
//! CPU is free, as its work is short and on every request's path.
//!
//! A pinned worker runs as `SCHED_BATCH`, which any process may ask for: the same share of the
//! CPU, but a thread of it that wakes does not preempt the one running. The front shares a CPU
//! with a pinned worker whenever it runs there, and with a light app (the demo's hello world)
//! its threads, woken as the front published each request, kept preempting it, the one stage
//! every request passes through; as `SCHED_BATCH` they run when the front sleeps or its turn
//! ends. The cost: a woken worker thread on a CPU that another program keeps busy waits for
//! that program's turn to end (a few milliseconds at most) rather than taking the CPU at once.
//! What a worker starts (a subprocess of the app) inherits both its CPU and its policy.
//!
//! What pinning and `SCHED_BATCH` changed on 2 cores, with 2 workers x 5 slots (Flask's pages,
//! the demo's hello world): docs/design/scheduling.md.
//!
//! When. `auto` pins the bundled worker when the workers cover every CPU the server may use
//! (at least as many workers as CPUs, and more than one CPU): a server sized to its machine or
//! cpuset. With fewer workers than CPUs, on a large host whose CPUs are shared (a CPU quota
//! rather than a cpuset), a few pinned CPUs that others also use would do worse than the
//! kernel's choice; and a `--cmd` worker may be a server with processes of its own, which one
//! CPU would starve. `pin` pins any worker; `off` never.
//!
//! Worker N (from 1) gets the N-th CPU of the set the server was started with, round robin;
//! a worker started again (after a crash, a reload, a recycle) gets the same one.
//!
//! Measured on 2 cores; on larger machines (docs/design/speed.md, "Defaults tuned on 2 cores"):
//! `-w`'s default is the number of CPUs, so `auto` pins on 8, 16 or 64 CPUs alike, each worker on
//! a CPU of its own, while the front's threads (a quarter of the CPUs, `--front-threads auto`)
//! float over the same CPUs and, not being batch threads, preempt a worker when they wake. A CPU
//! quota without a cpuset (4 of a host's 64) makes `-w` 4 against 64 CPUs: nothing is pinned.
//! Where the machine has several NUMA nodes, pinning is untested.

use std::io;

use tokio::process::Command;

/// `--cpu-affinity`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuAffinity {
    /// Pin the bundled worker's processes when the workers cover every CPU
    Auto,
    /// Pin every worker process, one CPU each, round robin
    Pin,
    /// Let the kernel place the workers
    Off,
}

/// The CPU of each worker, when they are pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCpus(Vec<usize>);

impl WorkerCpus {
    /// What `mode` asks for, with `workers` workers on the CPUs this process may use;
    /// `bundled`: the workers are the bundled Python worker, not a `--cmd`.
    pub fn choose(mode: CpuAffinity, workers: usize, bundled: bool) -> io::Result<Option<WorkerCpus>> {
        if mode == CpuAffinity::Off {
            return Ok(None);
        }
        Ok(WorkerCpus::among(mode, workers, bundled, allowed_cpus()?))
    }

    fn among(mode: CpuAffinity, workers: usize, bundled: bool, cpus: Vec<usize>) -> Option<WorkerCpus> {
        let pin = match mode {
            CpuAffinity::Off => false,
            CpuAffinity::Pin => !cpus.is_empty(),
            CpuAffinity::Auto => bundled && cpus.len() > 1 && workers >= cpus.len(),
        };
        pin.then_some(WorkerCpus(cpus))
    }

    /// The CPU of worker `index` (from 1).
    pub fn of(&self, index: usize) -> usize {
        self.0[(index.max(1) - 1) % self.0.len()]
    }

    /// The CPUs, for the startup line.
    pub fn describe(&self) -> String {
        self.0.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
    }
}

/// Makes the process `command` starts, and every thread it makes, run on `cpu` only, as
/// `SCHED_BATCH` (see the module's comment). Best effort: pinning is never a reason for a worker
/// not to start, so a child whose kernel refuses either (a seccomp policy, a cpuset changed
/// since) runs as the kernel places it.
pub fn pin_child(command: &mut Command, cpu: usize) {
    // SAFETY: sched_setaffinity and sched_setscheduler are async-signal-safe and change only
    // the child's own settings, between fork and exec; their arguments live on its stack.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &libc::sched_param { sched_priority: 0 });
            Ok(())
        });
    }
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it and the result is checked.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(mode: CpuAffinity, workers: usize, bundled: bool, cpus: &[usize]) -> Option<Vec<usize>> {
        WorkerCpus::among(mode, workers, bundled, cpus.to_vec()).map(|cpus| (1..=workers).map(|n| cpus.of(n)).collect())
    }

    #[test]
    fn auto_pins_the_bundled_worker_only_when_the_workers_cover_every_cpu() {
        assert_eq!(chosen(CpuAffinity::Auto, 2, true, &[0, 1]), Some(vec![0, 1]));
        assert_eq!(chosen(CpuAffinity::Auto, 5, true, &[2, 3]), Some(vec![2, 3, 2, 3, 2]));
        assert_eq!(chosen(CpuAffinity::Auto, 2, true, &[0, 1, 2, 3]), None, "fewer workers than CPUs");
        assert_eq!(chosen(CpuAffinity::Auto, 4, true, &[0]), None, "one CPU: nothing to choose");
        assert_eq!(chosen(CpuAffinity::Auto, 2, false, &[0, 1]), None, "a --cmd worker may have processes of its own");
    }

    #[test]
    fn pin_and_off_do_as_they_say() {
        assert_eq!(chosen(CpuAffinity::Pin, 3, false, &[4, 6]), Some(vec![4, 6, 4]));
        assert_eq!(chosen(CpuAffinity::Pin, 1, true, &[0, 1, 2]), Some(vec![0]));
        assert_eq!(chosen(CpuAffinity::Off, 2, true, &[0, 1]), None);
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed_cpus().unwrap().is_empty());
    }
}
