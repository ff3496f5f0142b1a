//! What is on disk when `flush` returns (the crate documentation's durability paragraph),
//! checked against the JSONL backend with an instrumented file system.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

#[path = "common/mod.rs"]
mod common;
mod coord;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{FaultFs, Op};
use coord::{live, settle, step_end, step_start, store, turn_end, turn_start};
use session_persist::{Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions};

fn open(root: &std::path::Path, fs: &FaultFs, compression: Compression) -> JsonlBackend {
    JsonlBackend::open_with_fs(
        JsonlConfig::new(root).compression(compression),
        Arc::new(fs.clone()),
    )
    .unwrap()
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn flush_makes_admitted_events_durable_and_publishes_directories() {
    let dir = common::TempDir::new("flush-durable");
    let fs = FaultFs::new();
    let backend = Arc::new(open(&dir.root(), &fs, Compression::None));
    let store = store();
    let p = Persistence::new(
        backend.clone(),
        store.clone(),
        PersistenceOptions::default(),
    )
    .unwrap();
    let (session, detach) = live(&store, "durable", Some("/proj"));
    session.append(turn_start(1)).unwrap();
    session.append(step_start(1, 1)).unwrap();

    // An event admitted while the flush is writing is part of the same flush.
    let admitted = Arc::new(AtomicBool::new(false));
    {
        let (session, admitted) = (session.clone(), admitted.clone());
        fs.on(Op::Write, move |_| {
            if !admitted.swap(true, Ordering::SeqCst) {
                session.append(step_end(1, 1)).unwrap();
            }
        });
    }
    assert!(store.flush(&session).await.unwrap());
    let path = backend.log_path(&session.header()).unwrap();
    let stored = lines(&path);
    assert_eq!(stored.len(), 4, "header + every admitted event: {stored:?}");
    assert!(stored[3].contains(r#""type":"step/end""#));
    // Written and fsynced: the log was synced after its writes, and the first publication
    // synced the root's parent, the root, the project and the session directories.
    assert!(fs.calls_on(Op::Sync, "durable") >= 2);
    assert!(
        fs.calls(Op::SyncDir) >= 4,
        "{} directory syncs",
        fs.calls(Op::SyncDir)
    );
    detach.detach();
    p.dispose().await.unwrap();
}

#[tokio::test]
async fn a_failed_flush_rolls_back_and_keeps_events_buffered_in_order() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = common::TempDir::new("flush-rollback");
        let fs = FaultFs::new();
        let backend = Arc::new(open(&dir.root(), &fs, compression));
        let store = store();
        let p = Persistence::new(
            backend.clone(),
            store.clone(),
            PersistenceOptions::default(),
        )
        .unwrap();
        let (session, detach) = live(&store, "rollback", Some("/proj"));
        session.append(turn_start(1)).unwrap();
        store.flush(&session).await.unwrap();
        let path = backend.log_path(&session.header()).unwrap();
        let before = std::fs::read(&path).unwrap();

        session.append(step_start(1, 1)).unwrap();
        session.append(step_end(1, 1)).unwrap();
        fs.fail_next(Op::Sync, "rollback", 5); // EIO
        let err = store.flush(&session).await.unwrap_err();
        assert!(
            err.to_string().contains("EIO") || err.to_string().contains("Input/output"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "rolled back to the previous bytes"
        );
        assert_eq!(
            p.pending_events(&session),
            Some(2),
            "the events stay buffered"
        );

        session.append(turn_end(1)).unwrap();
        assert!(store.flush(&session).await.unwrap());
        let stored = backend.load_stored_events("rollback").await;
        assert_eq!(stored, [0, 1, 2, 3], "in order, no gap, no duplicate");
        assert_eq!(p.pending_events(&session), Some(0));
        settle().await;
        detach.detach();
        p.dispose().await.unwrap();
    }
}

trait LoadSeqs {
    async fn load_stored_events(&self, id: &str) -> Vec<u64>;
}

impl LoadSeqs for JsonlBackend {
    async fn load_stored_events(&self, id: &str) -> Vec<u64> {
        use session_persist::Backend as _;
        self.load_stored(id)
            .await
            .unwrap()
            .unwrap()
            .events
            .iter()
            .map(session_core::Event::seq)
            .collect()
    }
}
