//! Where a spool may hold a body, and how much: its memory, its file, and the disk every spool's
//! file shares ([`SpoolLimits`]).

use std::sync::Arc;

use super::disk_budget::DiskBudget;

/// Where a spool may hold a body, and how much.
#[derive(Debug, Clone)]
pub struct SpoolLimits {
    /// Bytes held in memory before the rest goes to a file.
    pub memory: usize,
    /// The most its file holds at once; 0: no file, the memory alone. (A single piece larger
    /// than either still goes where it is alone.)
    pub file: u64,
    pub disk: Arc<DiskBudget>,
}

#[cfg(test)]
impl SpoolLimits {
    /// `memory` bytes in memory, and any file on any disk.
    pub fn unbounded(memory: usize) -> SpoolLimits {
        SpoolLimits { memory, file: u64::MAX, disk: DiskBudget::new(u64::MAX) }
    }
}
