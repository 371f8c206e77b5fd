//! The value of `-w`/`--workers`: a number of workers, fixed, or a range `MIN:MAX` the pool
//! grows and shrinks within ([`crate::workers::scaling`]). Its own module, as both the command
//! line ([`super::args`]) and the parser of its text ([`super::parse`]) name it.

/// `--workers`: `N`, or `MIN:MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerCount {
    Fixed(usize),
    Range { min: usize, max: usize },
}

impl std::fmt::Display for WorkerCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerCount::Fixed(workers) => write!(f, "{workers}"),
            WorkerCount::Range { min, max } => write!(f, "{min}:{max}"),
        }
    }
}
