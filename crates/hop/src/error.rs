//! Why an exchange over the hop failed, for both ends.

/// Why an exchange over the hop failed.
#[derive(Debug, thiserror::Error)]
pub enum HopError {
    /// The other side wrote something that is not a valid record: it is broken, and nothing more
    /// it writes can be trusted.
    #[error("the shared memory holds an invalid record: {0}")]
    Corrupt(&'static str),
    /// A system call on the region, a doorbell or the files' socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
