//! Honest errors of the JSONL write path: a failed rollback names both failures, and a first
//! publication whose directory `fsync` failed says what is on disk and completes on retry.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

#[path = "common/mod.rs"]
mod common;
mod coord;

use std::error::Error as _;
use std::path::Path;
use std::sync::Arc;

use common::{EIO, FaultFs, Op, TempDir, ev};
use session_core::{Event, SessionHeader};
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};

const ENOSPC: i32 = 28;

fn open(root: &Path, fs: &FaultFs, compression: Compression) -> JsonlBackend {
    JsonlBackend::open_with_fs(
        JsonlConfig::new(root).compression(compression),
        Arc::new(fs.clone()),
    )
    .unwrap()
}

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/w".into());
    m
}

fn turn_one() -> Vec<Event> {
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
        ev("user/message", 2, r#"{"text":"hi"}"#),
        ev("step/end", 3, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 4, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(Event::seq).collect()
}

/// The stored seqs, read by a fresh backend instance (what another process would see).
fn stored_seqs(root: &Path, compression: Compression, id: &str) -> Vec<u64> {
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap();
    let stored = common::rt()
        .block_on(backend.load_stored(id))
        .unwrap()
        .unwrap();
    seqs(&stored.events)
}

#[test]
fn a_failed_rollback_names_both_failures_with_errno_and_path() {
    for compression in [Compression::None, Compression::Zstd] {
        let tmp = TempDir::new("rollback-both");
        let fs = FaultFs::new();
        let backend = open(&tmp.root(), &fs, compression);
        let m = meta("s");
        let rt = common::rt();
        rt.block_on(backend.append_batch(&m, &turn_one()[..2], false))
            .unwrap();
        let path = backend.log_path(&m).unwrap();
        let before = std::fs::read(&path).unwrap();
        // The write stops after 7 bytes with ENOSPC, then the truncate back fails with EIO.
        fs.plan(common::Fault {
            op: Op::Write,
            path_contains: Some("session.jsonl".into()),
            nth: 0,
            errno: Some(ENOSPC),
            short: Some(7),
            times: 1,
        });
        fs.fail_next(Op::SetLen, "session.jsonl", EIO);
        let err = rt
            .block_on(backend.append_batch(&m, &turn_one()[2..], true))
            .unwrap_err();
        assert_eq!(err.name(), "AggregateError");
        let p = path.display();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("failed to roll back append to \"{p}\": ENOSPC: ")),
            "{text}"
        );
        assert!(text.contains(&format!(", write '{p}'; ")), "{text}");
        assert!(
            text.ends_with(&format!(
                "; the rollback also failed: EIO: Input/output error (os error 5), ftruncate '{p}'"
            )),
            "{text}"
        );
        // Both failures are typed: the original is the source, the rollback's is kept beside it.
        let Error::RollbackFailed {
            error, rollback, ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(error.code(), Some("ENOSPC"));
        assert_eq!(rollback.code(), Some("EIO"));
        let source = err.source().unwrap().downcast_ref::<Error>().unwrap();
        assert_eq!(source.code(), Some("ENOSPC"));
        let os = source.source().unwrap().downcast_ref::<std::io::Error>();
        assert_eq!(os.unwrap().raw_os_error(), Some(ENOSPC));
        // The torn bytes are still there until the next write cuts them.
        assert_eq!(std::fs::read(&path).unwrap().len(), before.len() + 7);
        rt.block_on(backend.append_batch(&m, &turn_one()[2..], true))
            .unwrap();
        assert_eq!(stored_seqs(&tmp.root(), compression, "s"), [0, 1, 2, 3, 4]);
    }
}

#[test]
fn a_failed_directory_fsync_after_publication_says_the_log_is_on_disk_and_a_retry_completes_it() {
    for compression in [Compression::None, Compression::Zstd] {
        let tmp = TempDir::new("publish-dirsync");
        let fs = FaultFs::new();
        let backend = open(&tmp.root(), &fs, compression);
        let m = meta("pub");
        let path = backend.log_path(&m).unwrap();
        let session_dir = path.parent().unwrap().display().to_string();
        let rt = common::rt();
        // The session directory is the last one synced, after the log was linked into place.
        fs.fail_next(Op::SyncDir, &session_dir, EIO);
        let err = rt
            .block_on(backend.append_batch(&m, &turn_one()[..3], false))
            .unwrap_err();
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert_eq!(
            err.to_string(),
            format!(
                "session \"pub\": the log \"{}\" is on disk ({bytes} bytes: the header and events \
                 0..=2, written and fsynced), but its directory entry is not durable: EIO: \
                 Input/output error (os error 5), fsync '{session_dir}'; the batch is not \
                 acknowledged, and a retry re-syncs the directories and writes only the events \
                 after seq 2",
                path.display()
            )
        );
        assert_eq!(err.code(), Some("EIO"));
        assert!(
            matches!(err, Error::PublicationNotDurable { bytes: b, seqs: (0, 2), .. } if b == bytes)
        );
        // What the message says is on disk is on disk.
        assert_eq!(stored_seqs(&tmp.root(), compression, "pub"), [0, 1, 2]);

        // A retry that fails the same way says the same and changes nothing.
        fs.fail_next(Op::SyncDir, &session_dir, EIO);
        let again = rt
            .block_on(backend.append_batch(&m, &turn_one()[..4], false))
            .unwrap_err();
        assert!(
            matches!(again, Error::PublicationNotDurable { seqs: (0, 2), .. }),
            "{again}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);

        // The next retry (the same first batch, grown meanwhile) re-syncs every directory and
        // writes only the events after the published ones: no "already exists", no duplicate.
        fs.reset_calls();
        rt.block_on(backend.append_batch(&m, &turn_one(), false))
            .unwrap();
        assert_eq!(
            fs.calls(Op::SyncDir),
            4,
            "dirname(root), root, project, session"
        );
        assert_eq!(fs.calls_on(Op::SyncDir, &session_dir), 1);
        assert_eq!(
            stored_seqs(&tmp.root(), compression, "pub"),
            [0, 1, 2, 3, 4]
        );
        // Once completed, the publication is an ordinary existing log again.
        let err = rt
            .block_on(backend.append_batch(&m, &turn_one(), false))
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyMaterialized { .. }), "{err}");
        rt.block_on(backend.append_batch(&m, &[ev("turn/start", 5, r#"{"turn":2}"#)], true))
            .unwrap();
        assert_eq!(
            stored_seqs(&tmp.root(), compression, "pub"),
            [0, 1, 2, 3, 4, 5]
        );
    }
}

#[test]
fn a_pending_publication_is_not_completed_with_other_events() {
    let tmp = TempDir::new("publish-other");
    let fs = FaultFs::new();
    let backend = open(&tmp.root(), &fs, Compression::None);
    let m = meta("other");
    let path = backend.log_path(&m).unwrap();
    let session_dir = path.parent().unwrap().display().to_string();
    let rt = common::rt();
    fs.fail_next(Op::SyncDir, &session_dir, EIO);
    rt.block_on(backend.append_batch(&m, &turn_one()[..3], false))
        .unwrap_err();
    let before = std::fs::read(&path).unwrap();
    // A batch that does not start with the published events is not this log's continuation.
    let different = [ev("turn/start", 0, r#"{"turn":7}"#)];
    let err = rt
        .block_on(backend.append_batch(&m, &different, false))
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyMaterialized { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // The matching retry still completes it.
    rt.block_on(backend.append_batch(&m, &turn_one()[..3], false))
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[tokio::test]
async fn a_flush_after_a_failed_publication_directory_fsync_succeeds_without_duplicates() {
    let dir = TempDir::new("flush-dirsync");
    let fs = FaultFs::new();
    let backend = Arc::new(open(&dir.root(), &fs, Compression::Zstd));
    let store = coord::store();
    let p = Persistence::new(
        backend.clone(),
        store.clone(),
        PersistenceOptions::default(),
    )
    .unwrap();
    let (session, detach) = coord::live(&store, "live", Some("/proj"));
    session.append(coord::turn_start(1)).unwrap();
    session.append(coord::step_start(1, 1)).unwrap();
    let path = backend.log_path(&session.header()).unwrap();
    let session_dir = path.parent().unwrap().display().to_string();
    fs.fail_next(Op::SyncDir, &session_dir, EIO);
    let err = store.flush(&session).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("is on disk ("), "{text}");
    assert!(text.contains("a retry re-syncs the directories"), "{text}");
    assert!(path.is_file());
    assert_eq!(p.pending_events(&session), Some(2), "not acknowledged");

    session.append(coord::step_end(1, 1)).unwrap();
    session.append(coord::turn_end(1)).unwrap();
    assert!(store.flush(&session).await.unwrap());
    assert_eq!(p.pending_events(&session), Some(0));
    let stored = backend.load_stored("live").await.unwrap().unwrap();
    assert_eq!(seqs(&stored.events), [0, 1, 2, 3], "no gap, no duplicate");
    coord::settle().await;
    detach.detach();
    p.dispose().await.unwrap();
}

#[test]
fn the_next_writer_of_a_log_syncs_its_directories_before_its_first_append() {
    let tmp = TempDir::new("next-writer");
    let m = meta("next");
    let rt = common::rt();
    // The first process published the log, but its directory fsync failed, and it exited.
    {
        let fs = FaultFs::new();
        let first = open(&tmp.root(), &fs, Compression::None);
        let session_dir = first.log_path(&m).unwrap();
        let session_dir = session_dir.parent().unwrap().display().to_string();
        fs.fail_next(Op::SyncDir, &session_dir, EIO);
        rt.block_on(first.append_batch(&m, &turn_one()[..3], false))
            .unwrap_err();
        rt.block_on(first.close()).unwrap();
    }
    let fs = FaultFs::new();
    let next = open(&tmp.root(), &fs, Compression::None);
    let path = next.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    let session_dir = path.parent().unwrap().display().to_string();
    // Its directory fsync fails: nothing is written, nothing acknowledged.
    fs.fail_next(Op::SyncDir, &session_dir, EIO);
    let err = rt
        .block_on(next.append_batch(&m, &turn_one()[3..], true))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("EIO: Input/output error (os error 5), fsync '{session_dir}'")
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // The retry syncs every directory of the path, then appends; later appends sync nothing.
    fs.reset_calls();
    rt.block_on(next.append_batch(&m, &turn_one()[3..4], true))
        .unwrap();
    assert_eq!(fs.calls(Op::SyncDir), 4);
    assert_eq!(fs.calls_on(Op::SyncDir, &session_dir), 1);
    rt.block_on(next.append_batch(&m, &turn_one()[4..], true))
        .unwrap();
    assert_eq!(fs.calls(Op::SyncDir), 4);
    assert_eq!(
        stored_seqs(&tmp.root(), Compression::None, "next"),
        [0, 1, 2, 3, 4]
    );
}

#[test]
fn releasing_a_session_forgets_its_synced_directories_and_pending_publication() {
    let tmp = TempDir::new("release-forgets");
    let fs = FaultFs::new();
    let backend = open(&tmp.root(), &fs, Compression::None);
    let m = meta("rel");
    let rt = common::rt();
    rt.block_on(backend.append_batch(&m, &turn_one()[..2], false))
        .unwrap();
    // Published and synced by this instance: its appends sync no directory.
    fs.reset_calls();
    rt.block_on(backend.append_batch(&m, &turn_one()[2..3], true))
        .unwrap();
    assert_eq!(fs.calls(Op::SyncDir), 0);
    // Once released, the next append takes the log over like a new writer: it syncs again.
    rt.block_on(backend.release("rel")).unwrap();
    rt.block_on(backend.append_batch(&m, &turn_one()[3..], true))
        .unwrap();
    assert_eq!(fs.calls(Op::SyncDir), 4);
    assert_eq!(
        stored_seqs(&tmp.root(), Compression::None, "rel"),
        [0, 1, 2, 3, 4]
    );
}
