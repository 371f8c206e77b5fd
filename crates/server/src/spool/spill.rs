//! The spill file: an unlinked temporary file that holds a body past its memory, written at its
//! end and read from where the reader is.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use headway_hop::files::read_at;

pub(super) struct Spill {
    pub(super) file: File,
    /// The file's length: what it takes of the disk budget.
    pub(super) written: u64,
    pub(super) read: u64,
}

/// Writes `data` at the end of the spill file, making the file first if there is none.
pub(super) fn append(spill: &mut Option<Spill>, data: &[u8]) -> io::Result<()> {
    if spill.is_none() {
        *spill = Some(Spill { file: tempfile::tempfile()?, written: 0, read: 0 });
    }
    let spill = spill.as_mut().expect("just made");
    spill.file.write_all_at(data, spill.written)?;
    spill.written += data.len() as u64;
    Ok(())
}

/// `len` bytes of `file` from `offset`, in a new buffer.
pub(super) fn read_exact_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        if read_at(file.as_fd(), offset + data.len() as u64, len - data.len(), &mut data)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(data)
}
