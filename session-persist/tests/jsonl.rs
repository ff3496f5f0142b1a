//! Backend-level cases of persistence §7.6 (`jsonl.spec.ts`, plain encoding) and the port's
//! decisions 6 (one writer per session) and 7 (no silent re-creation, stale temporary files).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{FaultFs, Op, TempDir, ev, rt, texts};
use session_core::{Event, SessionHeader};
use session_persist::jsonl::fs::RealFs;
use session_persist::jsonl::to_header_line;
use session_persist::{Backend, Compression, Error, JsonlBackend, JsonlConfig, TornMarker};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn config(root: &Path) -> JsonlConfig {
    JsonlConfig::new(root).compression(Compression::None)
}

fn open(root: &Path) -> JsonlBackend {
    JsonlBackend::open(config(root)).unwrap()
}

fn open_faulty(root: &Path) -> (JsonlBackend, FaultFs) {
    let fs = FaultFs::new();
    let backend = JsonlBackend::open_with_fs(config(root), Arc::new(fs.clone())).unwrap();
    (backend, fs)
}

fn meta(id: &str, cwd: Option<&str>) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = cwd.map(Into::into);
    m
}

/// Turn 1 as seqs `0..6`: turn/start, step/start, user/message, assistant/message, step/end,
/// turn/end.
fn turn_one() -> Vec<Event> {
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
        ev("user/message", 2, r#"{"text":"hi"}"#),
        ev("assistant/message", 3, r#"{"text":"hello"}"#),
        ev("step/end", 4, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 5, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(Event::seq).collect()
}

fn chunk(seq: u64, time: i64, text: &str) -> Event {
    Event::appended(
        "assistant/chunk",
        seq,
        time,
        session_core::json::Value::parse(&format!(
            r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
        ))
        .unwrap(),
        None,
        None,
    )
}

fn write_log(backend: &JsonlBackend, meta: &SessionHeader, batches: &[&[Event]]) {
    let rt = rt();
    for (i, batch) in batches.iter().enumerate() {
        rt.block_on(backend.append_batch(meta, batch, i > 0))
            .unwrap();
    }
}

// persistence §7.6 #9
#[test]
fn stored_foreign_version_refusal_names_the_raw_log() {
    let tmp = TempDir::new("v7");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let text =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("\"version\":0", "\"version\":7", 1);
    std::fs::write(&path, text).unwrap();
    let err = rt()
        .block_on(open(&tmp.root()).load_stored("s"))
        .unwrap_err();
    assert_eq!(err.name(), "SessionFormatUnsupportedError");
    assert_eq!(
        err.to_string(),
        format!(
            "session \"s\" uses log format v7, but this harness reads only v0: the log was \
             written by a newer harness \u{2014} upgrade the harness to open it (raw log: {})",
            path.display()
        )
    );
    assert_eq!(err.location().unwrap().path, path);
}

// persistence §7.6 #10 (the backend's part: `locate` without I/O, publication on first append)
#[test]
fn lazy_materialization() {
    let tmp = TempDir::new("lazy");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/proj"));
    let at = backend.locate(&m).unwrap();
    assert_eq!(at.kind, "jsonl");
    assert!(at.path.is_absolute());
    assert!(!at.path.exists());
    assert!(
        !tmp.root().exists(),
        "nothing is created before the first append"
    );
    let rt = rt();
    assert!(rt.block_on(backend.list()).unwrap().is_empty());
    rt.block_on(backend.append_batch(&m, &turn_one()[..1], false))
        .unwrap();
    assert!(at.path.is_file());
    let listed = rt.block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(&*listed[0].id, "s");
    // Only the transcript is left in the session directory (the temporary file is gone).
    let names: Vec<_> = std::fs::read_dir(at.path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("session.jsonl")]);
}

#[cfg(unix)]
#[test]
fn publication_uses_private_modes() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new("modes");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/proj"));
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()) & 0o077, 0);
    assert_eq!(mode(&tmp.root()) & 0o077, 0);
}

// persistence §7.6 #11
#[test]
fn read_raw_returns_the_exact_text() {
    let tmp = TempDir::new("raw");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    write_log(&backend, &m, &[&turn_one()[..2], &turn_one()[2..]]);
    let raw = rt().block_on(backend.read_raw("s")).unwrap().unwrap();
    assert_eq!(raw.filename, "session.jsonl");
    assert_eq!(
        raw.content,
        std::fs::read_to_string(backend.log_path(&m).unwrap()).unwrap()
    );
    assert_eq!(raw.content.lines().next().unwrap(), to_header_line(&m));
    assert_eq!(&*raw.meta.id, "s");
    assert!(backend.supports_raw_artifacts());
}

// persistence §7.6 #12, #13
#[test]
fn read_raw_of_absent_and_corrupt_logs() {
    let tmp = TempDir::new("raw2");
    let backend = open(&tmp.root());
    let rt = rt();
    assert!(rt.block_on(backend.read_raw("nope")).unwrap().is_none());
    let m = meta("s", Some("/w"));
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("{\"type\":\"session\"", "{\"type\":\"x\"", 1),
    )
    .unwrap();
    let err = rt.block_on(backend.read_raw("s")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "corrupt session log: invalid header line in \"{}\"",
            path.display()
        )
    );
}

/// Changes the log's mtime on the read that follows the first `stat` of the log, once.
fn race_one_read(fs: &FaultFs, log: &Path) {
    let fired = Arc::new(AtomicBool::new(false));
    let stats = fs.clone();
    let target = log.to_path_buf();
    fs.on(Op::OpenRead, move |p| {
        if p == target
            && stats.calls_on(Op::Stat, &target.display().to_string()) == 1
            && !fired.swap(true, Ordering::SeqCst)
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .unwrap();
            f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
                .unwrap();
        }
    });
}

// persistence §7.6 #14
#[test]
fn read_raw_retries_when_the_revision_changes() {
    let tmp = TempDir::new("raw-race");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let (backend, fs) = open_faulty(&tmp.root());
    let log = backend.log_path(&m).unwrap();
    race_one_read(&fs, &log);
    let raw = rt().block_on(backend.read_raw("s")).unwrap().unwrap();
    assert!(raw.content.ends_with("\"completed\"}}}\n"));
    assert_eq!(fs.calls_on(Op::Stat, &log.display().to_string()), 4);
}

// persistence §7.6 #19
#[test]
fn full_prefix_read_retries_on_a_stat_race() {
    let tmp = TempDir::new("load-race");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let (backend, fs) = open_faulty(&tmp.root());
    let log = backend.log_path(&m).unwrap();
    race_one_read(&fs, &log);
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(fs.calls_on(Op::Stat, &log.display().to_string()), 4);
    // The revision is the one of the bytes finally read.
    let now = rt().block_on(backend.read_stored_revision("s")).unwrap();
    assert_eq!(now, Some(stored.revision));
}

// persistence §7.6 #15
#[test]
fn locate_is_stable_and_forks_get_their_own_path() {
    let tmp = TempDir::new("locate");
    let m = meta("parent", Some("/w"));
    let a = open(&tmp.root()).locate(&m).unwrap();
    let b = open(&tmp.root()).locate(&m).unwrap();
    assert_eq!(a, b);
    let mut child = meta("child", Some("/w"));
    child.parent_session = Some("parent".into());
    child.seed_length = Some(3);
    let c = open(&tmp.root()).locate(&child).unwrap();
    assert_ne!(a.path, c.path);
    assert_eq!(
        a.path.parent().unwrap().parent(),
        c.path.parent().unwrap().parent()
    );
    assert!(open(&tmp.root()).locate(&meta("", None)).is_none());
}

// persistence §7.6 #16
#[test]
fn round_trip_with_chunks_and_source_event_seqs() {
    let tmp = TempDir::new("roundtrip");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    let mut events = vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
    ];
    for (i, seq) in (2..7).enumerate() {
        events.push(chunk(seq, 100 + i as i64 * 3, &format!("t{i}")));
    }
    events.push(Event::appended(
        "tool/result",
        7,
        5,
        session_core::json::Value::parse(r#"{"message":{"id":"m"}}"#).unwrap(),
        Some(session_core::json::Value::parse("[1,3]").unwrap()),
        Some(session_core::json::Value::from("append")),
    ));
    write_log(&backend, &m, &[&events]);
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(texts(&stored.events), texts(&events));
    assert_eq!(stored.events, events);
}

// persistence §7.6 #17, #18
#[test]
fn revisions_identify_the_store_and_the_bytes() {
    let tmp = TempDir::new("rev");
    let m = meta("s", Some("/w"));
    let backend = open(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let rt = rt();
    let first = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(
        rt.block_on(backend.read_stored_revision("s")).unwrap(),
        Some(first.revision.clone())
    );
    let reopened = open(&tmp.root());
    assert_eq!(
        rt.block_on(reopened.read_stored_revision("s")).unwrap(),
        Some(first.revision.clone())
    );
    assert_eq!(
        rt.block_on(backend.read_stored_revision("missing"))
            .unwrap(),
        None
    );

    // The same log in another root has another revision.
    let other = TempDir::new("rev2");
    let other_backend = open(&other.root());
    write_log(&other_backend, &m, &[&turn_one()]);
    assert_ne!(
        rt.block_on(other_backend.read_stored_revision("s"))
            .unwrap(),
        Some(first.revision.clone())
    );

    // An append changes it.
    rt.block_on(backend.append_batch(&m, &[ev("turn/start", 6, r#"{"turn":2}"#)], true))
        .unwrap();
    let after = rt
        .block_on(backend.read_stored_revision("s"))
        .unwrap()
        .unwrap();
    assert_ne!(after, first.revision);
    let snapshots = rt.block_on(backend.list_snapshots()).unwrap();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(snapshots[0].1, after);
}

// persistence §7.6 #20
#[test]
fn revision_reads_of_removed_or_invalid_paths() {
    let tmp = TempDir::new("rev-race");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let (backend, fs) = open_faulty(&tmp.root());
    let log = backend.log_path(&m).unwrap();
    // The file disappears between discovery and the revision stat.
    let target = log.clone();
    fs.on(Op::Stat, move |p| {
        if p == target {
            let _ = std::fs::remove_file(&target);
        }
    });
    assert_eq!(
        rt().block_on(backend.read_stored_revision("s")).unwrap(),
        None
    );
    fs.clear();
    // A path the file system refuses (NUL byte) is an error, not an absence.
    let err = JsonlBackend::open(config(&tmp.root().join("a\0b"))).unwrap_err();
    assert_eq!(err.code(), Some("EINVAL"), "{err}");
}

// persistence §7.6 #21
#[test]
fn artifact_removed_after_discovery_is_omitted_from_snapshots() {
    let tmp = TempDir::new("snap-race");
    let a = meta("a", Some("/w"));
    let b = meta("b", Some("/w"));
    let writer = open(&tmp.root());
    write_log(&writer, &a, &[&turn_one()]);
    write_log(&writer, &b, &[&turn_one()]);
    let (backend, fs) = open_faulty(&tmp.root());
    let log = backend.log_path(&a).unwrap();
    let target = log.clone();
    fs.on(Op::Stat, move |p| {
        if p == target {
            let _ = std::fs::remove_file(&target);
        }
    });
    let snapshots = rt().block_on(backend.list_snapshots()).unwrap();
    let ids: Vec<&str> = snapshots.iter().map(|(h, _)| &*h.id).collect();
    assert_eq!(ids, vec!["b"]);
}

// persistence §7.6 #22
#[test]
fn snapshot_stat_failures_other_than_absence_propagate() {
    let tmp = TempDir::new("snap-eio");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let (backend, fs) = open_faulty(&tmp.root());
    fs.fail_next(Op::Stat, "session.jsonl", EIO);
    let err = rt().block_on(backend.list_snapshots()).unwrap_err();
    assert_eq!(err.code(), Some("EIO"), "{err}");
}

// persistence §7.6 #27 (the backend's part: lineage metadata persists in the header)
#[test]
fn fork_metadata_round_trips() {
    let tmp = TempDir::new("fork-meta");
    let backend = open(&tmp.root());
    let mut m = meta("child", Some("/w"));
    m.parent_session = Some("parent".into());
    m.seed_length = Some(3);
    m.origin_subagent = true;
    m.delegation_depth = Some(2);
    m.agent_preset = Some("reviewer".into());
    write_log(&backend, &m, &[&turn_one()]);
    let stored = rt()
        .block_on(backend.load_stored("child"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.meta, m);
    assert_eq!(
        stored.header_value.to_json(),
        r#"{"version":0,"id":"child","createdAt":1000,"cwd":"/w","parentSession":"parent","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"reviewer"}"#
    );
    // `delegationDepth` is always written; absent on the way in, 0 on the way out.
    let plain = meta("plain", None);
    write_log(&backend, &plain, &[&turn_one()]);
    let stored = rt()
        .block_on(backend.load_stored("plain"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.meta.delegation_depth, Some(0));
}

/// Turn 1, then turn/start 6 and step/start 7, then a torn chunk fragment.
fn crashed_log(backend: &JsonlBackend, m: &SessionHeader) -> (PathBuf, u64) {
    write_log(
        backend,
        m,
        &[
            &turn_one(),
            &[
                ev("turn/start", 6, r#"{"turn":2}"#),
                ev("step/start", 7, r#"{"turn":2,"step":1}"#),
            ],
        ],
    );
    let path = backend.log_path(m).unwrap();
    let committed = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"assistant/chunk","seq":8,"ti"#);
    std::fs::write(&path, bytes).unwrap();
    (path, committed)
}

fn closers(from: u64) -> Vec<Event> {
    vec![
        ev("step/end", from, r#"{"turn":2,"step":1}"#),
        ev(
            "turn/end",
            from + 1,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        ),
    ]
}

// persistence §7.6 #28, #29
#[test]
fn crash_recovery_truncates_the_torn_fragment_and_appends_closers() {
    let tmp = TempDir::new("crash");
    let m = meta("s", Some("/w"));
    let (path, committed) = crashed_log(&open(&tmp.root()), &m);
    let prefix = std::fs::read(&path).unwrap()[..committed as usize].to_vec();

    let backend = open(&tmp.root());
    let rt = rt();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..8).collect::<Vec<_>>());
    assert_eq!(
        stored.torn,
        Some(TornMarker::Truncate {
            truncate_to: committed,
            recovered: vec![]
        })
    );
    rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &closers(8)))
        .unwrap();
    let repaired = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert!(repaired.torn.is_none());
    assert_eq!(seqs(&repaired.events), (0..10).collect::<Vec<_>>());
    assert_eq!(repaired.events[8].event_type(), "step/end");
    assert_ne!(repaired.revision, stored.revision);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("assistant/chunk"), "the torn chunk is gone");

    rt.block_on(backend.append_batch(&m, &[ev("turn/start", 10, r#"{"turn":3}"#)], true))
        .unwrap();
    let after = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&after.events), (0..11).collect::<Vec<_>>());
    assert_eq!(
        &std::fs::read(&path).unwrap()[..committed as usize],
        &prefix[..]
    );
}

#[test]
fn repair_without_marker_or_closers_does_nothing() {
    let tmp = TempDir::new("noop-repair");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let before = std::fs::read(open(&tmp.root()).log_path(&m).unwrap()).unwrap();
    let backend = open(&tmp.root());
    rt().block_on(backend.commit_repair(&m, None, &[])).unwrap();
    assert_eq!(
        std::fs::read(backend.log_path(&m).unwrap()).unwrap(),
        before
    );
    // No write means no ownership: another instance may write.
    rt().block_on(open(&tmp.root()).append_batch(&m, &closers(6), true))
        .unwrap();
}

#[test]
fn stale_or_foreign_repair_markers_are_refused() {
    let tmp = TempDir::new("stale-repair");
    let m = meta("s", Some("/w"));
    let backend = open(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let rt = rt();
    let err = rt
        .block_on(backend.commit_repair(
            &m,
            Some(TornMarker::Truncate {
                truncate_to: len + 10,
                recovered: vec![],
            }),
            &[],
        ))
        .unwrap_err();
    assert!(matches!(err, Error::StaleRepair { .. }), "{err}");
    let err = rt
        .block_on(backend.commit_repair(&m, Some(TornMarker::FromSeq(3)), &[]))
        .unwrap_err();
    assert!(matches!(err, Error::ForeignMarker { .. }), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
}

// persistence §7.6 #30
#[test]
fn failed_fsync_rolls_back_and_a_retry_has_no_gap() {
    let tmp = TempDir::new("fsync");
    let m = meta("s", Some("/w"));
    let (backend, fs) = open_faulty(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    fs.fail_next(Op::Sync, "session.jsonl", EIO);
    let batch = [
        ev("turn/start", 6, r#"{"turn":2}"#),
        ev("turn/end", 7, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
    ];
    let rt = rt();
    let err = rt
        .block_on(backend.append_batch(&m, &batch, true))
        .unwrap_err();
    assert_eq!(err.code(), Some("EIO"));
    assert!(err.to_string().contains(", fsync '"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "rolled back");
    rt.block_on(backend.append_batch(&m, &batch, true)).unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..8).collect::<Vec<_>>());
}

#[test]
fn torn_and_short_writes() {
    let tmp = TempDir::new("short");
    let m = meta("s", Some("/w"));
    let (backend, fs) = open_faulty(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    let batch = [ev("turn/start", 6, r#"{"turn":2}"#)];
    let rt = rt();
    // ENOSPC after 10 bytes made it to the file: the partial bytes are cut.
    fs.plan(common::Fault {
        op: Op::Write,
        path_contains: Some("session.jsonl".into()),
        nth: 0,
        errno: Some(ENOSPC),
        short: Some(10),
        times: 1,
    });
    let err = rt
        .block_on(backend.append_batch(&m, &batch, true))
        .unwrap_err();
    assert_eq!(err.code(), Some("ENOSPC"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Short writes without an error are continued.
    fs.plan(common::Fault {
        op: Op::Write,
        path_contains: Some("session.jsonl".into()),
        nth: 0,
        errno: None,
        short: Some(3),
        times: 2,
    });
    rt.block_on(backend.append_batch(&m, &batch, true)).unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..7).collect::<Vec<_>>());
}

// persistence §7.6 #31
#[test]
fn append_and_rollback_failure_is_an_aggregate_error() {
    let tmp = TempDir::new("aggregate");
    let m = meta("s", Some("/w"));
    let (backend, fs) = open_faulty(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    fs.fail_next(Op::Sync, "session.jsonl", EIO);
    fs.fail_next(Op::SetLen, "session.jsonl", ENOSPC);
    let batch = [ev("turn/start", 6, r#"{"turn":2}"#)];
    let rt = rt();
    let err = rt
        .block_on(backend.append_batch(&m, &batch, true))
        .unwrap_err();
    assert_eq!(err.name(), "AggregateError");
    let p = path.display();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to roll back append to \"{p}\": EIO: Input/output error (os error 5), fsync \
             '{p}'; the rollback also failed: ENOSPC: No space left on device (os error 28), \
             ftruncate '{p}'"
        )
    );
    match &err {
        Error::RollbackFailed {
            error, rollback, ..
        } => {
            assert_eq!(error.code(), Some("EIO"));
            assert_eq!(rollback.code(), Some("ENOSPC"));
        }
        other => panic!("{other:?}"),
    }
    // The next write first finishes the rollback, so the retry leaves no duplicate.
    rt.block_on(backend.append_batch(&m, &batch, true)).unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..7).collect::<Vec<_>>());
    assert!(std::fs::read(&path).unwrap().starts_with(&before));
}

// persistence §7.6 #32 (the backend's part: appends go to the path derived from the metadata)
#[test]
fn appends_follow_the_metadata_path() {
    let tmp = TempDir::new("meta-path");
    let m = meta("s", Some("/proj"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let backend = open(&tmp.root());
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    rt().block_on(backend.append_batch(&stored.meta, &closers(6), true))
        .unwrap();
    assert!(tmp.root().join("--proj--/s/session.jsonl").is_file());
    assert_eq!(std::fs::read_dir(tmp.root()).unwrap().count(), 1);
}

// persistence §7.6 #33
#[test]
fn header_id_of_another_session_is_an_identity_error() {
    let tmp = TempDir::new("identity");
    let backend = open(&tmp.root());
    let a = meta("identity-a", Some("/w"));
    let b = meta("identity-b", Some("/w"));
    write_log(&backend, &a, &[&turn_one()]);
    write_log(&backend, &b, &[&turn_one()]);
    let pa = backend.log_path(&a).unwrap();
    let pb = backend.log_path(&b).unwrap();
    let text = std::fs::read_to_string(&pa)
        .unwrap()
        .replacen("identity-a", "identity-b", 1);
    std::fs::write(&pa, &text).unwrap();
    let before_b = std::fs::read(&pb).unwrap();
    let err = rt()
        .block_on(open(&tmp.root()).load_stored("identity-a"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "corrupt session log \"{}\": requested id \"identity-a\" does not match header id \
             \"identity-b\"",
            pa.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&pa).unwrap(), text);
    assert_eq!(std::fs::read(&pb).unwrap(), before_b);
}

// persistence §7.6 #35
#[test]
fn path_traversal_ids_stay_under_the_root() {
    let tmp = TempDir::new("traversal");
    let backend = open(&tmp.root());
    let m = meta("../../etc/pwn", None);
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    assert!(path.starts_with(tmp.root()));
    assert!(path.is_file());
    let stored = rt()
        .block_on(backend.load_stored("../../etc/pwn"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.events.len(), 6);
}

// persistence §7.6 #36
#[test]
fn concurrent_sessions_do_not_mix_buffers() {
    let tmp = TempDir::new("concurrent");
    let backend = open(&tmp.root());
    let rt = rt();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for n in 0..8 {
            let backend = backend.clone();
            tasks.push(tokio::spawn(async move {
                let m = meta(&format!("s{n}"), Some("/w"));
                for (i, e) in turn_one().into_iter().enumerate() {
                    let e =
                        Event::appended(e.event_type(), e.seq(), n, e.data().clone(), None, None);
                    backend.append_batch(&m, &[e], i > 0).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    for n in 0..8 {
        let stored = rt
            .block_on(backend.load_stored(&format!("s{n}")))
            .unwrap()
            .unwrap();
        assert_eq!(seqs(&stored.events), (0..6).collect::<Vec<_>>());
        assert!(stored.events.iter().all(|e| e.time() == n));
    }
}

// persistence §7.6 #41, #53 (through the backend)
#[test]
fn empty_and_header_only_logs() {
    let tmp = TempDir::new("empty");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    let path = backend.log_path(&m).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "").unwrap();
    let rt = rt();
    assert_eq!(
        rt.block_on(backend.load_stored("s"))
            .unwrap_err()
            .to_string(),
        "empty or header-less session log"
    );
    std::fs::write(&path, format!("{}\n", to_header_line(&m))).unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert!(stored.events.is_empty());
    assert!(stored.torn.is_none());
}

fn five_deltas() -> Vec<Event> {
    let mut events = vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
    ];
    for i in 0..5 {
        events.push(chunk(2 + i, 1_000 + i as i64 * 10, &format!("t{i}")));
    }
    events.push(ev("step/end", 7, r#"{"turn":1,"step":1}"#));
    events.push(ev(
        "turn/end",
        8,
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ));
    events
}

// persistence §7.6 #56
#[test]
fn chunk_runs_are_packed_by_default() {
    let tmp = TempDir::new("pack");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    let events = five_deltas();
    write_log(&backend, &m, &[&events]);
    let text = std::fs::read_to_string(backend.log_path(&m).unwrap()).unwrap();
    assert_eq!(text.matches("\"type\":\"text-chunks\"").count(), 1);
    assert_eq!(text.matches("\"type\":\"assistant/chunk\"").count(), 0);
    assert!(text.contains(
        r#"{"type":"text-chunks","seq0":2,"time0":1000,"data":{"turn":1,"step":1,"index":0,"dt":[10,10,10,10],"texts":["t0","t1","t2","t3","t4"]}}"#
    ));
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(stored.events, events);
}

// persistence §7.6 #57
#[test]
fn packing_can_be_turned_off() {
    let tmp = TempDir::new("nopack");
    let backend = JsonlBackend::open(config(&tmp.root()).pack_chunks(false)).unwrap();
    assert!(!backend.packs_chunks());
    let m = meta("s", Some("/w"));
    let events = five_deltas();
    write_log(&backend, &m, &[&events]);
    let text = std::fs::read_to_string(backend.log_path(&m).unwrap()).unwrap();
    assert_eq!(text.matches("\"type\":\"assistant/chunk\"").count(), 5);
    assert_eq!(text.matches("-chunks\"").count(), 0);
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(stored.events, events);
}

// persistence §7.6 #58
#[test]
fn mixed_packed_and_unpacked_logs_load_identically() {
    let tmp = TempDir::new("mixed");
    let m = meta("s", Some("/w"));
    let turn1 = five_deltas();
    // Turn 1 planted unpacked (as an older writer would), turn 2 appended packed.
    let plain = JsonlBackend::open(config(&tmp.root()).pack_chunks(false)).unwrap();
    write_log(&plain, &m, &[&turn1]);
    rt().block_on(plain.close()).unwrap();
    let packed = open(&tmp.root());
    let turn2: Vec<Event> = five_deltas()
        .into_iter()
        .map(|e| {
            Event::appended(
                e.event_type(),
                e.seq() + 9,
                e.time(),
                e.data().clone(),
                None,
                None,
            )
        })
        .collect();
    rt().block_on(packed.append_batch(&m, &turn2, true))
        .unwrap();
    let text = std::fs::read_to_string(packed.log_path(&m).unwrap()).unwrap();
    assert_eq!(text.matches("\"type\":\"text-chunks\"").count(), 1);
    assert_eq!(text.matches("\"type\":\"assistant/chunk\"").count(), 5);
    let stored = rt().block_on(packed.load_stored("s")).unwrap().unwrap();
    let all: Vec<Event> = turn1.into_iter().chain(turn2).collect();
    assert_eq!(stored.events, all);
}

// persistence §7.6 #62
#[test]
fn unpacked_batch_lines_are_one_event_per_line() {
    let tmp = TempDir::new("lines");
    let backend = JsonlBackend::open(config(&tmp.root()).pack_chunks(false)).unwrap();
    let m = meta("s", Some("/w"));
    let events = five_deltas();
    write_log(&backend, &m, &[&events]);
    let text = std::fs::read_to_string(backend.log_path(&m).unwrap()).unwrap();
    let expected: String = events.iter().fold(String::new(), |mut out, e| {
        out.push_str(&e.to_json());
        out.push('\n');
        out
    });
    assert_eq!(text, format!("{}\n{expected}", to_header_line(&m)));
}

// persistence §7.6 #65, #66, #67, #82
#[test]
fn listing_spans_project_directories() {
    let tmp = TempDir::new("list");
    let backend = open(&tmp.root());
    let rt = rt();
    assert!(
        rt.block_on(backend.list()).unwrap().is_empty(),
        "missing root"
    );
    std::fs::create_dir_all(tmp.root()).unwrap();
    assert!(
        rt.block_on(backend.list()).unwrap().is_empty(),
        "empty root"
    );
    let metas = [
        meta("a", Some("/a/b-c")),
        meta("b", Some("/a-b/c")),
        meta("c", None),
        meta("d", Some("/elsewhere")),
    ];
    for m in &metas {
        write_log(&backend, m, &[&turn_one()[..1]]);
    }
    assert_eq!(
        backend
            .log_path(&metas[0])
            .unwrap()
            .parent()
            .unwrap()
            .parent(),
        backend
            .log_path(&metas[1])
            .unwrap()
            .parent()
            .unwrap()
            .parent(),
        "cwds that normalize alike share a project directory"
    );
    assert!(tmp.root().join("_no-cwd/c/session.jsonl").is_file());
    let mut listed = rt.block_on(backend.list()).unwrap();
    listed.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(
        listed,
        metas
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.delegation_depth = Some(0);
                m
            })
            .collect::<Vec<_>>()
    );
}

// persistence §7.6 #68
#[test]
fn extra_files_are_ignored() {
    let tmp = TempDir::new("extra");
    let backend = open(&tmp.root());
    let m = meta("s", Some("/w"));
    write_log(&backend, &m, &[&turn_one()]);
    let dir = backend
        .log_path(&m)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::write(dir.join("metadata.json"), "{}").unwrap();
    std::fs::write(dir.parent().unwrap().join("notes.txt"), "x").unwrap();
    std::fs::create_dir_all(dir.parent().unwrap().join("empty-session")).unwrap();
    std::fs::write(tmp.root().join("README"), "x").unwrap();
    let rt = rt();
    assert_eq!(rt.block_on(backend.list()).unwrap().len(), 1);
    assert_eq!(
        rt.block_on(backend.load_stored("s"))
            .unwrap()
            .unwrap()
            .events
            .len(),
        6
    );
}

// persistence §7.6 #69, #70
#[test]
fn flat_file_layouts_are_refused() {
    for suffix in [".jsonl", ".jsonl.zstd"] {
        let tmp = TempDir::new("flat");
        let flat = tmp.root().join("--w--").join(format!("s{suffix}"));
        std::fs::create_dir_all(flat.parent().unwrap()).unwrap();
        std::fs::write(&flat, "{}\n").unwrap();
        let backend = open(&tmp.root());
        let rt = rt();
        let want = format!(
            "session artifact \"{}\" uses the unsupported flat-file layout; use a separate root \
             or move it into a project/session directory before loading",
            flat.display()
        );
        assert_eq!(
            rt.block_on(backend.load_stored("s"))
                .unwrap_err()
                .to_string(),
            want
        );
        assert_eq!(rt.block_on(backend.list()).unwrap_err().to_string(), want);
    }
}

// persistence §7.6 #71, #72
#[test]
fn listing_skips_unpublished_headers_and_reads_long_ones() {
    let tmp = TempDir::new("list-skip");
    let backend = open(&tmp.root());
    let project = tmp.root().join("--w--");
    for (id, content) in [
        ("empty", String::new()),
        (
            "not-header",
            "{\"type\":\"turn/start\",\"seq\":0}\n".to_owned(),
        ),
        ("not-json", "{not json\n".to_owned()),
        (
            "no-newline",
            to_header_line(&meta("no-newline", Some("/w"))),
        ),
    ] {
        let dir = project.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("session.jsonl"), content).unwrap();
    }
    let mut long = meta("long", Some("/w"));
    long.agent_preset = Some("p".repeat(9_000).into());
    write_log(&backend, &long, &[&turn_one()]);
    let listed = rt().block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(&*listed[0].id, "long");
    assert_eq!(listed[0].agent_preset.as_deref().map(str::len), Some(9_000));
}

// persistence §7.6 #73 (through the backend)
#[test]
fn retired_policy_fields_are_refused_on_load() {
    for key in ["sandboxMode", "approvalPolicy"] {
        let tmp = TempDir::new("retired");
        let backend = open(&tmp.root());
        let m = meta("s", Some("/w"));
        write_log(&backend, &m, &[&turn_one()]);
        let path = backend.log_path(&m).unwrap();
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "\"delegationDepth\":0",
            &format!("\"delegationDepth\":0,\"{key}\":\"x\""),
            1,
        );
        std::fs::write(&path, text).unwrap();
        assert_eq!(
            rt().block_on(backend.load_stored("s"))
                .unwrap_err()
                .to_string(),
            "session header uses retired policy baseline fields"
        );
    }
}

/// Writes a raw log with `header` as its first line at `<root>/<project>/<dir>/session.jsonl`.
fn plant(root: &Path, project: &str, dir: &str, header: &str) -> PathBuf {
    let path = root.join(project).join(dir).join("session.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("{header}\n")).unwrap();
    path
}

/// The error of the only session a listing finds: `list` fails with it, as the reference's
/// does, and `list_entries` reports it as that session's error.
fn only_listing_error(backend: &JsonlBackend) -> String {
    let rt = rt();
    let failed = rt.block_on(backend.list()).unwrap_err().to_string();
    let entries = rt.block_on(backend.list_entries()).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let reported = entries[0].header.as_ref().unwrap_err().to_string();
    assert_eq!(failed, reported);
    reported
}

// persistence §7.6 #74
#[test]
fn header_cwd_must_name_the_physical_path() {
    let tmp = TempDir::new("cwd-path");
    let path = plant(
        &tmp.root(),
        "--w--",
        "s",
        &to_header_line(&meta("s", Some("/elsewhere"))),
    );
    let backend = open(&tmp.root());
    assert_eq!(
        only_listing_error(&backend),
        format!(
            "corrupt session log \"{}\": header id \"s\" and cwd identify \"{}\"",
            path.display(),
            tmp.root().join("--elsewhere--/s/session.jsonl").display()
        )
    );
    assert!(
        rt().block_on(backend.load_stored("s"))
            .unwrap_err()
            .to_string()
            .contains("and cwd identify")
    );
}

// persistence §7.6 #75
#[cfg(unix)]
#[test]
fn aliases_that_resolve_to_the_same_file_are_accepted() {
    let tmp = TempDir::new("alias");
    let m = meta("s", Some("/w"));
    plant(&tmp.root(), "real-project", "s", &to_header_line(&m));
    // The expected project directory is a link to the real one: links are not listed, and the
    // real directory's log resolves to the expected path.
    std::os::unix::fs::symlink(tmp.root().join("real-project"), tmp.root().join("--w--")).unwrap();
    let backend = open(&tmp.root());
    let listed = rt().block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(&*listed[0].id, "s");
}

// persistence §7.6 #76
#[test]
fn empty_header_id_cannot_name_a_path() {
    let tmp = TempDir::new("empty-id");
    let path = plant(
        &tmp.root(),
        "--w--",
        "x",
        r#"{"type":"session","version":0,"id":"","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    );
    assert_eq!(
        only_listing_error(&open(&tmp.root())),
        format!(
            "corrupt session log \"{}\": header id cannot name a storage path",
            path.display()
        )
    );
}

// persistence §7.6 #77
#[test]
fn the_same_id_in_two_project_directories_is_refused() {
    let tmp = TempDir::new("dup");
    let backend = open(&tmp.root());
    write_log(&backend, &meta("s", Some("/a")), &[&turn_one()]);
    write_log(&backend, &meta("s", Some("/b")), &[&turn_one()]);
    let want = "duplicate JSONL session id \"s\" appears in multiple project directories";
    let rt = rt();
    assert_eq!(
        rt.block_on(backend.load_stored("s"))
            .unwrap_err()
            .to_string(),
        want
    );
    assert_eq!(rt.block_on(backend.list()).unwrap_err().to_string(), want);
    let entries = rt.block_on(backend.list_entries()).unwrap();
    assert_eq!(entries.len(), 2);
    for entry in entries {
        assert_eq!(entry.header.unwrap_err().to_string(), want);
    }
}

// persistence §7.6 #83
#[test]
fn a_root_that_is_a_file_is_refused_at_open() {
    let tmp = TempDir::new("root-file");
    std::fs::write(tmp.root(), "x").unwrap();
    let err = JsonlBackend::open(config(&tmp.root())).unwrap_err();
    assert!(err.to_string().contains("ENOTDIR"), "{err}");
}

// persistence §7.6 #84
#[test]
fn a_root_replaced_by_a_file_fails_listing() {
    let tmp = TempDir::new("root-replaced");
    let backend = open(&tmp.root());
    std::fs::write(tmp.root(), "x").unwrap();
    let err = rt().block_on(backend.list()).unwrap_err();
    assert!(err.to_string().contains("ENOTDIR"), "{err}");
}

// persistence §7.6 #85
#[test]
fn existence_checks_surface_enotdir() {
    let tmp = TempDir::new("enotdir");
    std::fs::create_dir_all(tmp.root().join("--w--")).unwrap();
    std::fs::write(tmp.root().join("--w--").join("s"), "not a directory").unwrap();
    let err = rt()
        .block_on(open(&tmp.root()).load_stored("s"))
        .unwrap_err();
    assert_eq!(err.code(), Some("ENOTDIR"), "{err}");
}

// persistence §7.6 #86
#[test]
fn a_project_path_that_is_a_file_fails_publication() {
    let tmp = TempDir::new("project-file");
    std::fs::create_dir_all(tmp.root()).unwrap();
    std::fs::write(tmp.root().join("--w--"), "x").unwrap();
    let backend = open(&tmp.root());
    let err = rt()
        .block_on(backend.append_batch(&meta("s", Some("/w")), &turn_one(), false))
        .unwrap_err();
    assert!(matches!(err.code(), Some("EEXIST" | "ENOTDIR")), "{err}");
}

// persistence §7.6 #90 (the backend's part: a failed publication leaves nothing behind, and a
// retry publishes)
#[test]
fn failed_publication_leaves_nothing_and_can_be_retried() {
    let tmp = TempDir::new("publish-fail");
    let (backend, fs) = open_faulty(&tmp.root());
    let m = meta("s", Some("/w"));
    let path = backend.log_path(&m).unwrap();
    let rt = rt();
    for (op, errno) in [(Op::Write, ENOSPC), (Op::Sync, EIO), (Op::HardLink, EIO)] {
        fs.fail_next(op, "session.jsonl", errno);
        let err = rt
            .block_on(backend.append_batch(&m, &turn_one()[..3], false))
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some(if errno == EIO { "EIO" } else { "ENOSPC" })
        );
        assert!(!path.exists(), "{op:?}: nothing published");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 0, "{op:?}: temporary file removed");
    }
    rt.block_on(backend.append_batch(&m, &turn_one()[..3], false))
        .unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), vec![0, 1, 2]);
}

/// A publication of several batches that fails writing a later batch or syncing leaves nothing (no log, no temporary file), and a retry publishes every batch.
#[test]
fn a_failed_publication_of_batches_leaves_nothing_and_can_be_retried() {
    let tmp = TempDir::new("publish-batches-fail");
    let (backend, fs) = open_faulty(&tmp.root());
    let m = meta("s", Some("/w"));
    let path = backend.log_path(&m).unwrap();
    let rt = rt();
    let events = turn_one();
    let batches = [0..1, 1..3, 3..events.len()];
    let fault = |nth: usize, op: Op| common::Fault {
        op,
        path_contains: Some("session.jsonl".to_owned()),
        nth,
        errno: Some(ENOSPC),
        short: None,
        times: 1,
    };
    // The header frame and first batch are one write; later batches are one write each.
    for (what, f) in [
        ("the second batch's write fails", fault(1, Op::Write)),
        ("the last batch's write fails", fault(2, Op::Write)),
        ("the sync fails", fault(0, Op::Sync)),
    ] {
        fs.plan(f);
        let err = rt
            .block_on(backend.publish_batches(&m, events.clone(), &batches))
            .unwrap_err();
        assert!(err.code().is_some(), "{what}: {err}");
        assert!(!path.exists(), "{what}: nothing published");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 0, "{what}: temporary file removed");
        fs.clear();
    }
    fs.reset_calls();
    rt.block_on(backend.publish_batches(&m, events.clone(), &batches))
        .unwrap();
    assert_eq!(
        fs.calls_on(Op::Sync, "session.jsonl"),
        1,
        "one sync for every batch"
    );
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), seqs(&events));
}

#[test]
fn publication_syncs_every_directory_and_refuses_existing_logs() {
    let tmp = TempDir::new("publish-sync");
    let (backend, fs) = open_faulty(&tmp.root());
    let m = meta("s", Some("/w"));
    let rt = rt();
    rt.block_on(backend.append_batch(&m, &turn_one(), false))
        .unwrap();
    let root = tmp.root().display().to_string();
    // dirname(root), root, project, session directory.
    assert_eq!(fs.calls(Op::SyncDir), 4);
    assert_eq!(fs.calls_on(Op::SyncDir, &format!("{root}/--w--/s")), 1);
    let err = rt
        .block_on(open(&tmp.root()).append_batch(&m, &turn_one(), false))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "refusing to materialize \"s\": a log already exists on disk (load/resume it instead)"
    );
}

// ---- Decision 6: one writer per session ----

#[test]
fn a_second_backend_instance_is_locked_out() {
    let tmp = TempDir::new("lock");
    let m = meta("s", Some("/w"));
    let first = open(&tmp.root());
    write_log(&first, &m, &[&turn_one()]);
    let path = first.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    let second = open(&tmp.root());
    let rt = rt();
    let err = rt
        .block_on(second.append_batch(&m, &closers(6), true))
        .unwrap_err();
    assert_eq!(err.to_string(), "session \"s\" is locked by another writer");
    let err = rt
        .block_on(second.commit_repair(
            &m,
            Some(TornMarker::Truncate {
                truncate_to: 10,
                recovered: vec![],
            }),
            &closers(6),
        ))
        .unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "not a byte written");
    // Reads are not blocked.
    assert_eq!(
        rt.block_on(second.load_stored("s"))
            .unwrap()
            .unwrap()
            .events
            .len(),
        6
    );
    // Releasing hands the session over.
    rt.block_on(first.release("s")).unwrap();
    rt.block_on(second.append_batch(&m, &closers(6), true))
        .unwrap();
    let err = rt
        .block_on(first.append_batch(&m, &closers(8), true))
        .unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    // Closing releases everything.
    rt.block_on(second.close()).unwrap();
    rt.block_on(first.append_batch(&m, &closers(8), true))
        .unwrap();
    let err = rt.block_on(second.load_stored("s")).unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err}");
}

#[test]
fn a_concurrent_first_publication_is_refused() {
    let tmp = TempDir::new("race-publish");
    let m = meta("s", Some("/w"));
    let first = open(&tmp.root());
    let second = open(&tmp.root());
    let rt = rt();
    rt.block_on(first.append_batch(&m, &turn_one(), false))
        .unwrap();
    let err = rt
        .block_on(second.append_batch(&m, &turn_one(), false))
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyMaterialized { .. }), "{err}");
}

const CHILD_ROOT: &str = "PERSIST_F_LOCK_CHILD_ROOT";

/// Decision 6 across processes: this test re-runs itself as a child process that takes the
/// session's writer lock and holds it; the parent's writes are refused until the child exits.
#[test]
fn a_writer_in_another_process_is_locked_out() {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        let root = PathBuf::from(root);
        let backend = open(&root);
        let m = meta("s", Some("/w"));
        rt().block_on(backend.commit_repair(&m, None, &closers(6)))
            .unwrap();
        std::fs::write(root.join("child-ready"), "").unwrap();
        for _ in 0..600 {
            if root.join("child-done").exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("parent never finished");
    }
    let tmp = TempDir::new("cross-process");
    let root = tmp.root();
    let m = meta("s", Some("/w"));
    let setup = open(&root);
    write_log(&setup, &m, &[&turn_one()]);
    rt().block_on(setup.close()).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_writer_in_another_process_is_locked_out",
            "--nocapture",
        ])
        .env(CHILD_ROOT, &root)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = false;
    for _ in 0..600 {
        if root.join("child-ready").exists() {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(ready, "child did not take the lock");
    let path = setup.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    let backend = open(&root);
    let err = rt()
        .block_on(backend.append_batch(&m, &closers(8), true))
        .unwrap_err();
    assert_eq!(err.to_string(), "session \"s\" is locked by another writer");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    std::fs::write(root.join("child-done"), "").unwrap();
    assert!(child.wait().unwrap().success());
    rt().block_on(backend.append_batch(&m, &closers(8), true))
        .unwrap();
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..10).collect::<Vec<_>>());
}

// ---- Decision 7: no silent re-creation, stale temporary files ----

#[test]
fn a_vanished_log_is_never_recreated() {
    let tmp = TempDir::new("vanish");
    let m = meta("s", Some("/w"));
    let backend = open(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    std::fs::remove_file(&path).unwrap();
    let rt = rt();
    let err = rt
        .block_on(backend.append_batch(&m, &closers(6), true))
        .unwrap_err();
    assert!(matches!(err, Error::Vanished { .. }), "{err}");
    assert!(err.to_string().contains("disappeared"));
    assert!(!path.exists());
    // A fresh instance (no open handle) refuses too.
    let err = rt
        .block_on(open(&tmp.root()).append_batch(&m, &closers(6), true))
        .unwrap_err();
    assert!(matches!(err, Error::Vanished { .. }), "{err}");
    assert!(!path.exists());
}

#[test]
fn a_replaced_or_modified_log_is_not_appended_to() {
    let tmp = TempDir::new("replace");
    let m = meta("s", Some("/w"));
    let backend = open(&tmp.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let content = std::fs::read(&path).unwrap();
    // Replaced by another file with the same content.
    let tmp_copy = path.with_extension("copy");
    std::fs::write(&tmp_copy, &content).unwrap();
    std::fs::rename(&tmp_copy, &path).unwrap();
    let rt = rt();
    let err = rt
        .block_on(backend.append_batch(&m, &closers(6), true))
        .unwrap_err();
    assert!(matches!(err, Error::Replaced { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), content);

    // Changed behind the writer's back.
    let other = TempDir::new("modified");
    let backend = open(&other.root());
    write_log(&backend, &m, &[&turn_one()]);
    let path = backend.log_path(&m).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"foreign\":1}\n").unwrap();
    let err = rt
        .block_on(backend.append_batch(&m, &closers(6), true))
        .unwrap_err();
    assert!(matches!(err, Error::Replaced { .. }), "{err}");
}

#[test]
fn stale_temporary_files_are_removed_on_open() {
    let tmp = TempDir::new("stale-tmp");
    let m = meta("s", Some("/w"));
    write_log(&open(&tmp.root()), &m, &[&turn_one()]);
    let dir = tmp.root().join("--w--/s");
    let stale = dir.join("session.jsonl.0123456789ab.tmp");
    let live = dir.join("session.jsonl.zstd.ba9876543210.tmp");
    let other = dir.join("session.jsonl.notes.tmp");
    for p in [&stale, &live, &other] {
        std::fs::write(p, "partial").unwrap();
    }
    // A publication in progress holds the lock on its temporary file.
    let held = RealFsHandle::lock(&live);
    let _backend = open(&tmp.root());
    assert!(!stale.exists(), "an unlocked temporary file is removed");
    assert!(live.exists(), "a locked temporary file is kept");
    assert!(
        other.exists(),
        "files that are not temporary files are kept"
    );
    assert!(dir.join("session.jsonl").exists());
    drop(held);
    let _backend = open(&tmp.root());
    assert!(!live.exists());
}

/// A locked handle on a file, through the backend's own file-system implementation.
struct RealFsHandle(#[allow(dead_code)] Box<dyn session_persist::jsonl::fs::FsFile>);

impl RealFsHandle {
    fn lock(path: &Path) -> RealFsHandle {
        use session_persist::jsonl::fs::Fs as _;
        let f = RealFs.open_read(path).unwrap();
        assert!(f.try_lock().unwrap());
        RealFsHandle(f)
    }
}
