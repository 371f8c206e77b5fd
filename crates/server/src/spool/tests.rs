//! The spool: memory, the spill file and its limits, keeping pace, passing through.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::time::Duration;

use bytes::Bytes;

use super::*;

/// A spool of `memory` bytes in memory and a file of up to `file`, within a budget of its own
/// (`disk` bytes).
fn spool(memory: usize, file: u64, disk: u64) -> (Writer, Reader) {
    channel(&SpoolLimits { memory, file, disk: DiskBudget::new(disk) })
}

fn unbounded(memory: usize) -> (Writer, Reader) {
    channel(&SpoolLimits::unbounded(memory))
}

async fn read_all(reader: &mut Reader) -> Result<Vec<u8>, Truncated> {
    let mut body = Vec::new();
    while let Some(piece) = reader.next().await {
        body.extend_from_slice(&piece?);
    }
    Ok(body)
}

#[tokio::test]
async fn small_body_stays_in_memory() {
    let (writer, mut reader) = unbounded(100);
    writer.try_write(Bytes::from_static(b"hello ")).unwrap();
    writer.try_write(Bytes::from_static(b"world")).unwrap();
    assert!(writer.shared.lock().spill.is_none());
    writer.finish();
    assert_eq!(read_all(&mut reader).await.unwrap(), b"hello world");
}

#[tokio::test]
async fn large_body_spills_to_disk_in_order() {
    let (writer, mut reader) = unbounded(10);
    let pieces: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 1000 + i as usize]).collect();
    for piece in &pieces {
        writer.try_write(Bytes::from(piece.clone())).unwrap();
    }
    {
        let state = writer.shared.lock();
        assert!(state.memory_bytes <= 10, "memory bounded");
        assert!(state.spill.is_some());
    }
    writer.finish();
    assert_eq!(read_all(&mut reader).await.unwrap(), pieces.concat());
}

#[tokio::test]
async fn a_complete_body_past_memory_hands_its_file_on_once_its_memory_is_read() {
    let disk = DiskBudget::new(u64::MAX);
    let (writer, mut reader) = channel(&SpoolLimits { memory: 4, file: u64::MAX, disk: disk.clone() });
    writer.try_write(Bytes::from_static(b"head")).unwrap();
    writer.try_write(Bytes::from_static(b"rest of it")).unwrap();
    let offer = |reader: &mut Reader, took: bool| {
        reader.offer_file(|file, offset, len| {
            let mut rest = vec![0u8; len as usize];
            File::from(file.try_clone_to_owned().unwrap()).read_exact_at(&mut rest, offset).unwrap();
            assert_eq!(rest, b"rest of it");
            Ok::<_, io::Error>(took)
        })
    };
    assert_eq!(offer(&mut reader, true).unwrap(), None, "not complete yet");
    writer.finish();
    assert_eq!(offer(&mut reader, true).unwrap(), None, "memory first");
    assert_eq!(reader.next().await.unwrap().unwrap(), &b"head"[..]);
    assert_eq!(offer(&mut reader, false).unwrap(), Some(false));
    assert_eq!(offer(&mut reader, true).unwrap(), Some(true));
    assert!(reader.next().await.is_none(), "the body ends at the file handed on");
    assert_eq!(disk.used(), 10, "its disk counted while the reader lives");
    drop(reader);
    assert_eq!(disk.used(), 0);
}

#[tokio::test]
async fn reader_waits_for_writer_across_tasks() {
    let (writer, mut reader) = unbounded(4);
    let producer = tokio::spawn(async move {
        for i in 0..20u8 {
            writer.write(Bytes::from(vec![i; 3])).await.unwrap();
            tokio::task::yield_now().await;
        }
        writer.finish();
    });
    let body = read_all(&mut reader).await.unwrap();
    producer.await.unwrap();
    let expected: Vec<u8> = (0..20u8).flat_map(|i| [i; 3]).collect();
    assert_eq!(body, expected);
}

#[tokio::test]
async fn a_waiting_reader_has_bytes_passed_straight_to_its_socket_within_the_allowance() {
    use std::io::Read;
    let (writer, mut reader) = unbounded(100);
    let (mut client, server) = std::os::unix::net::UnixStream::pair().unwrap();
    reader.pass_through(server.into(), 10);
    assert_eq!(writer.pass_through(&[IoSlice::new(b"early")]), 0, "the reader is not waiting yet");
    writer.try_write(Bytes::from_static(b"first")).unwrap();
    let reader = tokio::spawn(async move {
        let first = reader.next().await.unwrap().unwrap();
        let after = reader.next().await.unwrap().unwrap();
        (first, reader.passed(), after, reader)
    });
    while !writer.shared.lock().reader_waits || !writer.shared.lock().memory.is_empty() {
        tokio::task::yield_now().await;
    }
    assert_eq!(writer.pass_through(&[IoSlice::new(b"hel"), IoSlice::new(b"lo")]), 5);
    assert_eq!(writer.pass_through(&[IoSlice::new(b"world!!!")]), 5, "no further than the allowance");
    writer.try_write(Bytes::from_static(b"!!!")).unwrap();
    let (first, passed, after, mut reader) = reader.await.unwrap();
    assert_eq!((&first[..], passed, &after[..]), (&b"first"[..], 10, &b"!!!"[..]));
    let mut wire = [0u8; 10];
    client.read_exact(&mut wire).unwrap();
    assert_eq!(&wire, b"helloworld");
    assert_eq!(writer.pass_through(&[IoSlice::new(b"late")]), 0, "the reader is not waiting");
    writer.finish();
    assert!(reader.next().await.is_none());
}

#[tokio::test]
async fn writer_dropped_early_truncates() {
    let (writer, mut reader) = unbounded(100);
    writer.try_write(Bytes::from_static(b"partial")).unwrap();
    drop(writer);
    assert_eq!(reader.next().await.unwrap().unwrap(), "partial");
    assert!(reader.next().await.unwrap().is_err());
}

#[tokio::test]
async fn the_writer_hears_the_reader_leave() {
    let (writer, reader) = unbounded(100);
    let left = tokio::spawn(async move { writer.reader_left().await });
    tokio::task::yield_now().await;
    assert!(!left.is_finished());
    drop(reader);
    tokio::time::timeout(Duration::from_secs(10), left).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_keeps_pace_gets_the_body_from_memory_alone() {
    let (writer, mut reader) = unbounded(100);
    let producer = tokio::spawn(async move {
        for i in 0..50u8 {
            writer.room(60).await;
            writer.try_write(Bytes::from(vec![i; 60])).unwrap();
        }
        let spilled = writer.shared.lock().spill.is_some();
        writer.finish();
        spilled
    });
    let body = read_all(&mut reader).await.unwrap();
    assert!(!producer.await.unwrap(), "nothing spilled for a reader that kept up");
    assert_eq!(body, (0..50u8).flat_map(|i| [i; 60]).collect::<Vec<u8>>());
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_does_not_read_costs_disk_not_waiting() {
    let (writer, mut reader) = unbounded(2500);
    let started = tokio::time::Instant::now();
    for i in 0..20u8 {
        writer.room(1000).await;
        writer.try_write(Bytes::from(vec![i; 1000])).unwrap();
    }
    let waited = started.elapsed();
    assert!(writer.shared.lock().spill.is_some());
    // Two pieces fit; then one wait, until the client was too far behind a reader keeping
    // pace; then the rest went to disk without waiting.
    assert!(waited >= BEHIND && waited <= BEHIND + Duration::from_millis(1), "{waited:?}");
    writer.finish();
    assert_eq!(read_all(&mut reader).await.unwrap(), (0..20u8).flat_map(|i| [i; 1000]).collect::<Vec<u8>>());
}

#[tokio::test]
async fn writes_after_reader_left_are_dropped() {
    let (writer, reader) = unbounded(1);
    drop(reader);
    assert!(writer.reader_gone());
    writer.try_write(Bytes::from(vec![0; 1000])).unwrap();
    assert!(writer.shared.lock().spill.is_none());
}

#[tokio::test]
async fn a_full_file_holds_the_writer_back_until_the_reader_has_read_it() {
    let (writer, mut reader) = spool(10, 3000, u64::MAX);
    let disk = writer.shared.limits.disk.clone();
    for i in 0..3u8 {
        writer.try_write(Bytes::from(vec![i; 1000])).unwrap();
    }
    assert_eq!(disk.used(), 3000);
    assert!(matches!(writer.try_write(Bytes::from(vec![3; 1000])), Err(WriteError::Full(_))));
    let writer = tokio::spawn(async move {
        writer.write(Bytes::from(vec![3; 1000])).await.unwrap();
        writer.finish();
    });
    tokio::task::yield_now().await;
    assert!(!writer.is_finished(), "held back");
    assert_eq!(disk.held_back(), 1);
    let body = read_all(&mut reader).await.unwrap();
    writer.await.unwrap();
    assert_eq!(body, (0..4u8).flat_map(|i| [i; 1000]).collect::<Vec<u8>>());
    assert_eq!(disk.used(), 0, "a file read to its end is emptied");
}

#[tokio::test]
async fn spools_share_the_disk_budget_and_a_reader_leaving_gives_its_share_back() {
    let disk = DiskBudget::new(2000);
    let limits = SpoolLimits { memory: 0, file: u64::MAX, disk: disk.clone() };
    let (first, first_reader) = channel(&limits);
    let (second, _second_reader) = channel(&limits);
    first.try_write(Bytes::from(vec![1; 1500])).unwrap();
    assert!(matches!(second.try_write(Bytes::from(vec![2; 1000])), Err(WriteError::Full(_))));
    let waiting = tokio::spawn(async move { second.write(Bytes::from(vec![2; 1000])).await });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    drop(first_reader); // its client left
    tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(disk.used(), 1000);
    drop(first);
}

#[tokio::test]
async fn without_a_file_the_writer_waits_for_the_reader_to_take_from_memory() {
    let (writer, mut reader) = spool(4, 0, u64::MAX);
    writer.try_write(Bytes::from_static(b"abcd")).unwrap();
    assert!(matches!(writer.try_write(Bytes::from_static(b"efgh")), Err(WriteError::Full(_))));
    let writer = tokio::spawn(async move {
        writer.write(Bytes::from_static(b"efgh")).await.unwrap();
        writer.finish();
    });
    assert_eq!(read_all(&mut reader).await.unwrap(), b"abcdefgh");
    writer.await.unwrap();
    assert_eq!(reader.shared.limits.disk.used(), 0);
}

#[tokio::test]
async fn a_piece_bigger_than_its_room_goes_whole_where_it_is_alone() {
    for (file, disk) in [(0, u64::MAX), (u64::MAX, 0), (4, 4)] {
        let (writer, mut reader) = spool(4, file, disk);
        writer.try_write(Bytes::from_static(b"a piece larger than memory")).unwrap();
        writer.try_write(Bytes::from_static(b"!")).unwrap_err();
        writer.finish();
        assert_eq!(read_all(&mut reader).await.unwrap(), b"a piece larger than memory", "{file} {disk}");
    }
}
