//! Request bytes from memory instead of a socket: how the tests of the core and of each
//! language binding feed a reader.

use std::io;

use super::source::Source;

/// A source handing out `data` `step` bytes at a time, then end-of-file (peer closed).
pub struct Feeder {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

pub fn feeder(data: &[u8], step: usize) -> Feeder {
    Feeder { data: data.to_vec(), at: 0, step }
}

impl Source for Feeder {
    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let end = (self.at + self.step).min(self.data.len());
        buf.extend_from_slice(&self.data[self.at..end]);
        let count = end - self.at;
        self.at = end;
        Ok(count)
    }
}
