//! A request body whose rest waits in a file: the front writes the bytes it holds in memory as
//! body records, then hands the worker the file (`headway_hop::files`); the worker finds the
//! whole body, in order, and the ring is clean for the next request.

use std::io::Write;
use std::os::fd::AsFd;

use headway_hop::files::read_at;
use headway_hop::front::FrontEnd;
use headway_hop::message::{self, BODY, BODY_FILE, REQUEST_HEAD};
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

#[test]
fn the_rest_of_a_body_comes_as_its_file_and_the_worker_reads_it_there() {
    let front = FrontEnd::new(Layout::new(2, 4096)).unwrap();
    let worker = WorkerEnd::beside(&front).unwrap();
    let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let (in_memory, in_file) = body.split_at(1000);
    // The file holds other bytes before the body's rest, as a spool read from its start does not.
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(b"not the body").unwrap();
    file.write_all(in_file).unwrap();

    let mut head = Vec::new();
    message::encode_request_head(
        &mut head,
        body.len() as u64,
        message::Version::Http11,
        b"POST",
        b"/",
        b"",
        std::iter::empty(),
    );
    let slot = front.slot(1);
    assert!(slot.push(REQUEST_HEAD, &[&head]).unwrap());
    slot.publish();
    assert!(slot.push(BODY, &[in_memory]).unwrap());
    assert!(slot.push_file(file.as_fd(), 12, in_file.len() as u64).unwrap());
    drop(file); // the worker holds its own descriptor now

    let index = worker.try_claim().unwrap();
    let slot = worker.slot(index);
    let mut record = Vec::new();
    assert_eq!(slot.pop(&mut record).unwrap(), Some(REQUEST_HEAD));
    let mut left = message::decode_request_head(&record).unwrap().body_len;
    let mut received = Vec::new();
    while left > 0 {
        let kind = slot.pop(&mut record).unwrap().expect("the whole body is on the ring");
        left -= message::body_bytes(kind, &record).unwrap();
        match kind {
            BODY => received.extend_from_slice(&record),
            BODY_FILE => {
                let (file, named) = slot.body_file(&record).unwrap();
                assert_eq!(
                    read_at(file.as_fd(), named.offset, named.len as usize, &mut received).unwrap(),
                    in_file.len()
                );
            }
            other => panic!("record {other} in a request body"),
        }
    }
    assert_eq!(received, body);
    assert_eq!(slot.pop(&mut record).unwrap(), None, "nothing after the body");
}

#[test]
fn a_file_record_the_ring_has_no_room_for_sends_no_file() {
    let front = FrontEnd::new(Layout::new(1, 4096)).unwrap();
    let worker = WorkerEnd::beside(&front).unwrap();
    let slot = front.slot(0);
    let filler = vec![0u8; slot.max_payload()];
    assert!(slot.push(BODY, &[&filler]).unwrap());
    let file = tempfile::tempfile().unwrap();
    assert!(!slot.push_file(file.as_fd(), 0, 1).unwrap(), "the ring is full");
    let mut record = Vec::new();
    assert_eq!(worker.slot(0).pop(&mut record).unwrap(), Some(BODY));
    assert!(slot.push_file(file.as_fd(), 0, 1).unwrap());
    assert_eq!(worker.slot(0).pop(&mut record).unwrap(), Some(BODY_FILE));
    // The refused push sent nothing: the first file ever sent is the one this record names.
    let (_, named) = worker.slot(0).body_file(&record).unwrap();
    assert_eq!((named.token, named.len), (0, 1));
}
