//! What the preloaded parent (`ruby/lib/headway/preload.rb`) needs of the process that Ruby has
//! no call for: a pidfd of the front, which each forked worker watches so that it ends with the
//! front rather than with the parent that forked it, and pinning a forked worker to its CPU.

use magnus::{Error, Ruby};

/// `Native.pidfd_open(pid)`: a descriptor that becomes readable once process `pid` has exited;
/// a RuntimeError saying why if the kernel refuses.
pub fn pidfd_open(ruby: &Ruby, pid: i32) -> Result<i32, Error> {
    // SAFETY: pidfd_open has no memory arguments; a negative result is an error.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        return Err(Error::new(ruby.exception_runtime_error(), format!("pidfd_open({pid}): {error}")));
    }
    Ok(fd as i32)
}

/// `Native.pin_to_cpu(cpu)`: keeps this process on `cpu` and schedules it as batch work, as the
/// front pins a worker it starts (`pin_child` in crates/server/src/workers/affinity.rs), for a
/// worker forked by the preloaded parent; called before any slot thread starts, so that they all
/// inherit it. Best effort, as there: a kernel that refuses leaves the process where it is.
pub fn pin_to_cpu(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: cpu_set_t is plain data and `cpu` is within it; the calls read live values.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        libc::sched_setscheduler(0, libc::SCHED_BATCH, &libc::sched_param { sched_priority: 0 });
    }
}
