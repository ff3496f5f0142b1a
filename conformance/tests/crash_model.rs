//! The crash model (`conformance::crash_model`): random appends, flushes, torn writes and
//! restarts of a live session persisted through the service and the JSONL backend onto
//! crash-simulating storage. After every restart the loaded log is a prefix of everything
//! appended plus honest closers, keeps every flushed event and leaves no turn open.
//!
//! The number of random cases comes from `PROPTEST_CASES` (default 64).

use conformance::backend_suite::fixtures::{partial_turn, turn, turns};
use conformance::crash_model::{self, CrashStorage, ModelConfig, Op, arb_ops, check_reload};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use session_persist::Compression;
use session_repair::interrupted_turn_closers;
use std::io::Write as _;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// Failing seeds are kept here; promote real failures to named tests below as well.
const REGRESSIONS: &str = "proptest-regressions/crash_model.txt";

fn config() -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..Config::with_cases(cases())
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn raw_logs_survive_any_crash(ops in arb_ops()) {
        let report = crash_model::run(&ModelConfig::new(Compression::None), &ops);
        prop_assert!(report.is_ok(), "{}", report.unwrap_err());
    }

    #[test]
    fn zstd_logs_survive_any_crash(ops in arb_ops()) {
        let report = crash_model::run(&ModelConfig::new(Compression::Zstd), &ops);
        prop_assert!(report.is_ok(), "{}", report.unwrap_err());
    }
}

/// A flush torn a few bytes in: the next boot finds a torn tail, the load cuts it and closes
/// the open turn, and only the unflushed events are lost.
#[test]
fn a_torn_flush_loses_only_unflushed_events() {
    for compression in [Compression::None, Compression::Zstd] {
        let ops = [
            Op::Append(7),
            Op::Flush,
            Op::Append(3),
            Op::CrashAt(40),
            Op::Reopen,
            Op::Append(11),
            Op::Flush,
        ];
        let report = crash_model::run(&ModelConfig::new(compression), &ops).unwrap();
        assert_eq!(report.torn_tails, 1, "{compression:?}: {report:?}");
        assert_eq!(report.lost_unacknowledged, 3, "{compression:?}: {report:?}");
        assert_eq!(report.restarts, 2);
        assert!(report.closers >= 2, "the open turn was closed: {report:?}");
    }
}

/// A crash with nothing left to write, a crash during the very first publication, orderly
/// restarts and a long write that completes before the machine dies.
#[test]
fn scripted_crashes_and_restarts_hold() {
    let scripts: [&[Op]; 5] = [
        &[Op::CrashAt(0)],
        &[
            Op::Append(4),
            Op::CrashAt(10),
            Op::Reopen,
            Op::Append(2),
            Op::Flush,
        ],
        &[
            Op::Append(9),
            Op::Reopen,
            Op::Append(9),
            Op::Reopen,
            Op::Reopen,
        ],
        &[Op::Append(5), Op::CrashAt(100_000), Op::Reopen, Op::Flush],
        &[
            Op::Append(3),
            Op::Flush,
            Op::Append(3),
            Op::Flush,
            Op::CrashAt(0),
            Op::Reopen,
        ],
    ];
    for compression in [Compression::None, Compression::Zstd] {
        for ops in scripts {
            if let Err(e) = crash_model::run(&ModelConfig::new(compression), ops) {
                panic!("{compression:?} {ops:?}: {e}");
            }
        }
    }
    // A crash during the first publication leaves no session: nothing was acknowledged.
    let report = crash_model::run(
        &ModelConfig::new(Compression::None),
        &[Op::Append(4), Op::CrashAt(10), Op::Reopen],
    )
    .unwrap();
    assert_eq!(report.lost_unacknowledged, 4);
    // A long enough budget lets the flush finish: nothing is lost.
    let report = crash_model::run(
        &ModelConfig::new(Compression::Zstd),
        &[Op::Append(5), Op::CrashAt(100_000)],
    )
    .unwrap();
    assert_eq!(report.lost_unacknowledged, 0);
    assert_eq!(report.flushes, 1);
}

/// Storage that ignores `fsync` loses flushed events at the next power loss, and the model
/// says so.
#[test]
fn the_model_catches_storage_that_ignores_fsync() {
    for compression in [Compression::None, Compression::Zstd] {
        let config = ModelConfig {
            honor_sync: false,
            ..ModelConfig::new(compression)
        };
        let failure = crash_model::run(&config, &[Op::Append(11), Op::Flush]).unwrap_err();
        assert_eq!(failure.step, 2, "found at the final power loss");
        assert!(
            failure
                .message
                .starts_with("an acknowledged event was lost: 11 events were flushed"),
            "{failure}"
        );
    }
}

/// The reload check itself accepts exactly the prefixes-plus-closers that contain every
/// acknowledged event.
#[test]
fn check_reload_accepts_prefixes_with_honest_closers_only() {
    let appended = [turn(0, 1), partial_turn(11, 2, 8)].concat();
    let cut = &appended[..15];
    let closers = interrupted_turn_closers(cut.iter());
    let reloaded = [cut, &closers].concat();
    assert_eq!(check_reload(&appended, 11, &reloaded, false), Ok(15));
    assert_eq!(check_reload(&appended, 15, &reloaded, false), Ok(15));
    assert!(
        check_reload(&appended, 16, &reloaded, false)
            .unwrap_err()
            .starts_with("an acknowledged event was lost: 16 events were flushed")
    );
    assert!(
        check_reload(&appended, 11, &reloaded, true)
            .unwrap_err()
            .starts_with("an orderly restart lost events")
    );
    // Without closers the turn stays open.
    assert_eq!(
        check_reload(&appended, 11, cut, false),
        Err("the loaded log leaves turn 2 open".to_owned())
    );
    // Closers that do not match the prefix are refused.
    let wrong = [&appended[..14], &closers].concat();
    assert!(check_reload(&appended, 11, &wrong, false).is_err());
    // A complete log needs no closers.
    let complete = turns(2);
    assert_eq!(check_reload(&complete, 22, &complete, true), Ok(22));
}

/// The storage keeps unsynced bytes and directory entries apart and drops them on a crash.
#[test]
fn crash_storage_drops_what_was_not_synced() {
    use std::path::Path;
    let storage = CrashStorage::new();
    let fs = storage.fs();
    let dir = Path::new("/d");
    let file = Path::new("/d/f");
    fs.create_dir(dir, 0o700).unwrap();
    let mut f = fs.create_new(file, 0o600).unwrap();
    f.write(b"abc").unwrap();
    f.sync().unwrap();
    // The directory entries were never synced: the file and its directory vanish.
    storage.crash();
    assert!(storage.live_bytes(file).is_none());
    assert!(
        f.write(b"x").is_err(),
        "a handle from before the crash is dead"
    );
    let fs = storage.fs();
    fs.create_dir(dir, 0o700).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    let mut f = fs.create_new(file, 0o600).unwrap();
    fs.sync_dir(dir).unwrap();
    f.write(b"durable").unwrap();
    f.sync().unwrap();
    f.write(b" lost").unwrap();
    let before = fs.stat(file).unwrap();
    storage.crash_keeping(2);
    assert_eq!(storage.live_bytes(file).unwrap(), b"durable l");
    let fs = storage.fs();
    assert_ne!(
        fs.stat(file).unwrap().revision_text(),
        before.revision_text()
    );
    // Locks die with the process; a second open file description cannot take a held lock.
    let a = fs.open_append(file).unwrap();
    let b = fs.open_append(file).unwrap();
    assert!(a.try_lock().unwrap());
    assert!(!b.try_lock().unwrap());
    drop(a);
    assert!(b.try_lock().unwrap());
    // A machine that dies mid-write keeps the bytes before the limit.
    let mut c = fs.open_append(file).unwrap();
    storage.die_after(3);
    assert_eq!(c.write(b"123456").unwrap(), 3);
    assert!(storage.is_dead());
    assert!(c.write(b"4").is_err());
    assert!(fs.stat(file).is_err());
    storage.crash_keeping(u64::MAX);
    assert_eq!(storage.live_bytes(file).unwrap(), b"durable l123");
    assert_eq!(storage.boots(), 3);
}

/// The random operation lists do exercise what the property is about: torn tails found at
/// boot, unflushed events lost, closers committed, orderly restarts.
#[test]
fn random_runs_tear_lose_and_repair() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut total = crash_model::Report::default();
    for k in 0..32 {
        let ops = arb_ops().new_tree(&mut runner).unwrap().current();
        let compression = if k % 2 == 0 {
            Compression::None
        } else {
            Compression::Zstd
        };
        let r = crash_model::run(&ModelConfig::new(compression), &ops).unwrap();
        total.appended += r.appended;
        total.flushes += r.flushes;
        total.crashes += r.crashes;
        total.restarts += r.restarts;
        total.torn_tails += r.torn_tails;
        total.lost_unacknowledged += r.lost_unacknowledged;
        total.closers += r.closers;
        total.retirements += r.retirements;
        total.sealed_boots += r.sealed_boots;
    }
    assert!(total.retirements > 0, "{total:?}");
    assert!(total.torn_tails >= 3, "{total:?}");
    assert!(total.lost_unacknowledged > 0, "{total:?}");
    assert!(total.closers > 0, "{total:?}");
    assert!(total.restarts > 32, "{total:?}");
}

/// A crash anywhere in a retirement's drain and background seal: the swept byte counts land
/// before, inside and after the seal's writes (the run checks every restart), and some runs
/// find the sealed log after the crash.
#[test]
fn a_crash_during_the_retirement_seal_keeps_the_acknowledged_events() {
    // Three complete turns, each written as three batches, then a retirement.
    let mut ops = Vec::new();
    for _ in 0..3 {
        ops.extend([Op::Append(4), Op::Flush, Op::Append(4), Op::Flush]);
        ops.extend([Op::Append(3), Op::Flush]);
    }
    let mut sealed = 0;
    let mut runs = 0;
    for k in (0..6000).step_by(97).chain([u64::MAX]) {
        let mut case = ops.clone();
        case.push(Op::RetireCrashAt(k));
        case.push(Op::Reopen);
        let report = crash_model::run(&ModelConfig::new(Compression::Zstd), &case)
            .unwrap_or_else(|e| panic!("crash after {k} bytes: {e}"));
        assert_eq!(report.retirements, 1);
        sealed += usize::from(report.sealed_boots > 0);
        runs += 1;
    }
    assert!(sealed > 0, "no run found a sealed log");
    assert!(
        sealed < runs,
        "every run found a sealed log: no crash landed before the seal"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{sealed} of {runs} runs found the log sealed"
    );
}
