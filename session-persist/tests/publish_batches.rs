//! `Backend::publish_batches`: a new session published in several batches at once stores what
//! the same batches appended one by one store, byte for byte in a JSONL log (one frame or run
//! of lines per batch), and a bad layout or an existing log is refused with nothing written.
#![allow(clippy::unwrap_used)]
#![allow(clippy::single_range_in_vec_init)] // one-range layouts are cases under test

mod common;
mod coord;

use std::ops::Range;

use common::TempDir;
use coord::{meta, turn_events};
use session_core::Event;
use session_persist::memory::MemoryBackend;
use session_persist::{Backend, Compression, Error, JsonlBackend, JsonlConfig};

/// Three turns, laid out as a live loop writes them: a batch per turn/start and step/start.
fn events_and_batches() -> (Vec<Event>, Vec<Range<usize>>) {
    let mut events = Vec::new();
    for turn in 1..=3 {
        events.extend(turn_events(events.len() as u64, turn));
    }
    let mut batches = Vec::new();
    let mut start = 0;
    for (i, e) in events.iter().enumerate() {
        if i > start && matches!(e.event_type(), "turn/start" | "step/start") {
            batches.push(start..i);
            start = i;
        }
    }
    batches.push(start..events.len());
    assert!(batches.len() >= 6, "{batches:?}");
    (events, batches)
}

fn jsonl(root: &std::path::Path, compression: Compression) -> JsonlBackend {
    JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap()
}

#[tokio::test]
async fn a_publication_of_batches_stores_the_bytes_of_the_same_batches_appended_one_by_one() {
    let (events, batches) = events_and_batches();
    for compression in [Compression::Zstd, Compression::None] {
        let scratch = TempDir::new("publish-bytes");
        let appended = jsonl(&scratch.path().join("appended"), compression);
        for (i, batch) in batches.iter().enumerate() {
            appended
                .append_batch(&meta("s"), &events[batch.clone()], i > 0)
                .await
                .unwrap();
        }
        let published = jsonl(&scratch.path().join("published"), compression);
        published
            .publish_batches(&meta("s"), events.clone(), &batches)
            .await
            .unwrap();
        let read = |b: &JsonlBackend| std::fs::read(b.log_path(&meta("s")).unwrap()).unwrap();
        assert_eq!(read(&published), read(&appended), "{compression:?}");
        let loaded = published.load_stored("s").await.unwrap().unwrap();
        assert_eq!(loaded.events.len(), events.len());
        // The publication leaves the log open for appends, as a first batch does.
        let next = turn_events(events.len() as u64, 4);
        published
            .append_batch(&meta("s"), &next, true)
            .await
            .unwrap();
        appended
            .append_batch(&meta("s"), &next, true)
            .await
            .unwrap();
        assert_eq!(read(&published), read(&appended), "{compression:?}");
    }
}

#[tokio::test]
async fn a_bad_layout_or_an_existing_log_is_refused_with_nothing_written() {
    let (events, batches) = events_and_batches();
    let scratch = TempDir::new("publish-refused");
    let backend = jsonl(scratch.path(), Compression::Zstd);
    let memory = MemoryBackend::new();
    let n = events.len();
    for bad in [
        vec![],
        vec![0..2, 3..n],
        vec![0..2, 2..2, 2..n],
        vec![0..n - 1],
        vec![1..n],
        vec![0..n + 1],
    ] {
        for b in [&backend as &dyn Backend, &memory] {
            let err = b
                .publish_batches(&meta("s"), events.clone(), &bad)
                .await
                .unwrap_err();
            assert!(
                matches!(err, Error::InvalidBatches { events, .. } if events == n),
                "{bad:?}: {err}"
            );
            assert!(b.load_stored("s").await.unwrap().is_none(), "{bad:?}");
        }
    }
    assert!(!backend.log_path(&meta("s")).unwrap().exists());
    // An existing log is refused as by a first append, and stays as it was.
    backend
        .publish_batches(&meta("s"), events.clone(), &batches)
        .await
        .unwrap();
    let before = std::fs::read(backend.log_path(&meta("s")).unwrap()).unwrap();
    let again = jsonl(scratch.path(), Compression::Zstd);
    let err = again
        .publish_batches(&meta("s"), events.clone(), &batches)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyMaterialized { .. }), "{err}");
    assert_eq!(
        std::fs::read(backend.log_path(&meta("s")).unwrap()).unwrap(),
        before
    );
    // The default implementation (the memory backend) publishes every event at once.
    memory
        .publish_batches(&meta("s"), events.clone(), &batches)
        .await
        .unwrap();
    let stored = memory.load_stored("s").await.unwrap().unwrap();
    assert_eq!(stored.events.len(), n);
    assert!(matches!(
        memory
            .publish_batches(&meta("s"), events.clone(), &batches)
            .await
            .unwrap_err(),
        Error::AlreadyMaterialized { .. }
    ));
}
