//! Durable directory entries and honest errors of file databases: a new database's directories
//! are fsynced before anything is acknowledged, a full file system says "no space", and a failed
//! rollback names both failures.
#![allow(clippy::unwrap_used)]

use std::error::Error as _;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::common::*;
use session_core::Event;
use session_persist::Backend;
use session_persist_sqlite::rusqlite;
use session_persist_sqlite::{Error, JournalMode, SqliteBackend, SqliteConfig};

/// A directory-sync seam that records every call and fails the calls on paths in `failing`
/// (each once, with EIO).
#[derive(Clone, Default)]
struct Syncs {
    calls: Arc<Mutex<Vec<PathBuf>>>,
    failing: Arc<Mutex<Vec<PathBuf>>>,
}

impl Syncs {
    fn backend(&self, db: &Path) -> SqliteBackend {
        let me = self.clone();
        SqliteBackend::with_dir_sync(
            SqliteConfig::new(db.to_str().unwrap()),
            Arc::new(move |dir: &Path| {
                me.calls.lock().unwrap().push(dir.to_path_buf());
                let mut failing = me.failing.lock().unwrap();
                if let Some(i) = failing.iter().position(|p| p == dir) {
                    failing.remove(i);
                    return Err(io::Error::from_raw_os_error(5));
                }
                std::fs::File::open(dir)?.sync_all()
            }),
        )
        .unwrap()
    }

    fn fail_once(&self, dir: &Path) {
        self.failing.lock().unwrap().push(dir.to_path_buf());
    }

    fn calls(&self) -> Vec<PathBuf> {
        self.calls.lock().unwrap().clone()
    }
}

async fn stored_seqs(db: &Path, id: &str) -> Vec<u64> {
    let backend = backend_at(db);
    let stored = backend.load_stored(id).await.unwrap();
    let seqs = stored.map(|s| s.events.iter().map(Event::seq).collect());
    backend.close().await.unwrap();
    seqs.unwrap_or_default()
}

#[tokio::test]
async fn a_new_database_fsyncs_the_directories_it_created_and_is_not_acknowledged_when_that_fails()
{
    let dir = TempDir::new("dirsync");
    let a = dir.path().join("a");
    let b = a.join("b");
    let db = b.join("sessions.db");
    let syncs = Syncs::default();
    let backend = syncs.backend(&db);

    // Creating a/ and a/b/ changed the entries of the temporary directory and of a/.
    syncs.fail_once(&a);
    let e = backend.validate_path().await.unwrap_err();
    assert_eq!(e.code(), Some("EIO"));
    assert_eq!(
        e.to_string(),
        format!(
            "EIO: Input/output error (os error 5), fsync '{}'",
            a.display()
        )
    );
    assert_eq!(syncs.calls(), [dir.path().to_path_buf(), a.clone()]);
    // The failed directory stays pending: the next operation syncs it again, then creates the
    // database and syncs its directory. That sync fails too: the batch is not acknowledged.
    syncs.fail_once(&b);
    let e = backend
        .append_batch(&meta("s"), &[turn_start(0, 1)], false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("EIO"));
    assert!(
        e.to_string()
            .ends_with(&format!(", fsync '{}'", b.display())),
        "{e}"
    );
    assert!(db.is_file(), "the file exists, its entry is not durable");
    assert_eq!(
        stored_seqs(&db, "s").await,
        Vec::<u64>::new(),
        "nothing stored"
    );
    // The retry syncs the database's directory again, then stores and acknowledges the batch.
    backend
        .append_batch(&meta("s"), &[turn_start(0, 1)], false)
        .await
        .unwrap();
    assert_eq!(
        syncs.calls(),
        [
            dir.path().to_path_buf(),
            a.clone(),
            a.clone(),
            b.clone(),
            b.clone()
        ]
    );
    backend.close().await.unwrap();
    assert_eq!(stored_seqs(&db, "s").await, [0]);

    // Another backend (the next process) opening the existing database syncs its directory
    // before using it (its creator may have failed before that sync), and only it, once.
    let again = Syncs::default();
    let reopened = again.backend(&db);
    again.fail_once(&b);
    reopened
        .append_batch(&meta("s"), &[step_start(1, 1, 1)], true)
        .await
        .unwrap_err();
    reopened
        .append_batch(&meta("s"), &[step_start(1, 1, 1)], true)
        .await
        .unwrap();
    reopened
        .append_batch(&meta("s"), &[step_end(2, 1, 1)], true)
        .await
        .unwrap();
    reopened.close().await.unwrap();
    assert_eq!(again.calls(), [b.clone(), b.clone()]);
    assert_eq!(stored_seqs(&db, "s").await, [0, 1, 2]);
}

/// A tmpfs of `size` bytes mounted at a fresh directory, unmounted on drop.
struct SmallFs(PathBuf);

/// Set to `1` to let the tmpfs tests pass without running where `mount` is not permitted.
const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_MOUNT";

impl SmallFs {
    fn mount(tag: &str, size: usize) -> Option<SmallFs> {
        let at = std::env::temp_dir().join(format!("sqlite-tmpfs-{tag}-{}", std::process::id()));
        let _ = Command::new("umount").arg(&at).status();
        let _ = std::fs::remove_dir_all(&at);
        std::fs::create_dir_all(&at).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&at)
            .output();
        let ok = out.as_ref().is_ok_and(|o| o.status.success());
        if !ok {
            let _ = std::fs::remove_dir(&at);
            let why = match out {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            conformance::skip::unless_allowed(
                ALLOW_SKIP,
                format_args!("cannot mount a small tmpfs (needs root): {why}"),
                || false,
            );
            return None;
        }
        Some(SmallFs(at))
    }

    /// Fills the file system completely, then gives back `free` bytes.
    fn fill_to(&self, free: u64) {
        use std::io::Write as _;
        let path = self.0.join("filler");
        let mut filler = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let chunk = vec![0u8; 4096];
        // Space of files removed or truncated just before may be given back a little later:
        // repeat until the amount left is stable.
        let mut left = u64::MAX;
        for _ in 0..100 {
            while filler.write_all(&chunk).is_ok() {}
            let len = filler.metadata().unwrap().len();
            filler.set_len(len.saturating_sub(free)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            left = available(&self.0);
            if left <= free + 8192 {
                return;
            }
        }
        panic!("wanted {free} bytes free, {left} are");
    }
}

/// The bytes `df` reports available on the file system holding `dir`.
fn available(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test]
async fn a_full_file_system_at_create_says_no_space_in_every_journal_mode() {
    let Some(small) = SmallFs::mount("create", 256 * 1024) else {
        return;
    };
    // With these amounts left, SQLite reports "database or disk is full" or, in WAL mode,
    // "disk I/O error" (growing the WAL index fails).
    let mut io_errors = 0;
    for free in [0, 8 * 1024, 16 * 1024, 32 * 1024, 40 * 1024] {
        for mode in JournalMode::ALL {
            for entry in std::fs::read_dir(&small.0).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
            small.fill_to(free);
            let db = small.0.join(format!("{}.db", mode.as_str()));
            let backend =
                SqliteBackend::new(SqliteConfig::new(db.to_str().unwrap()).journal_mode(mode))
                    .unwrap();
            let e = backend
                .append_batch(&meta("s"), &[turn_start(0, 1)], false)
                .await
                .expect_err(&format!(
                    "{free} {mode:?}: {} bytes free",
                    available(&small.0)
                ));
            let text = e.to_string();
            io_errors += usize::from(text.contains("(SQLite: disk I/O error"));
            assert_eq!(e.code(), Some("ENOSPC"), "{free} {mode:?}: {text}");
            assert!(
                text.starts_with("ENOSPC: no space left on device (SQLite: "),
                "{free} {mode:?}: {text}"
            );
            assert!(
                text.ends_with(&format!(", write '{}'", db.display())),
                "{free} {mode:?}: {text}"
            );
            // Typed: an I/O error of kind StorageFull whose source is SQLite's error.
            let session_persist::Error::Io { source, .. } = &e else {
                panic!("{e:?}");
            };
            assert_eq!(source.kind(), io::ErrorKind::StorageFull);
            let detail = source
                .get_ref()
                .unwrap()
                .downcast_ref::<session_persist_sqlite::NoSpace>()
                .unwrap();
            assert!(detail.available.unwrap() < session_persist_sqlite::LOW_SPACE_BYTES);
            assert!(detail.source().unwrap().is::<rusqlite::Error>());
            // Once there is room again, the same backend stores the batch.
            std::fs::remove_file(small.0.join("filler")).unwrap();
            backend
                .append_batch(&meta("s"), &[turn_start(0, 1)], false)
                .await
                .unwrap();
            backend.close().await.unwrap();
        }
    }
    assert!(
        io_errors > 0,
        "no case reached SQLite's \"disk I/O error\" (the WAL index)"
    );
}

#[tokio::test]
async fn a_full_file_system_during_an_append_says_no_space_and_keeps_the_stored_prefix() {
    let Some(small) = SmallFs::mount("append", 512 * 1024) else {
        return;
    };
    for mode in JournalMode::ALL {
        for entry in std::fs::read_dir(&small.0).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let db = small.0.join(format!("{}.db", mode.as_str()));
        let backend =
            SqliteBackend::new(SqliteConfig::new(db.to_str().unwrap()).journal_mode(mode)).unwrap();
        backend
            .append_batch(&meta("s"), &[turn_start(0, 1)], false)
            .await
            .unwrap();
        small.fill_to(16 * 1024);
        // A batch far larger than what is left.
        let big: Vec<Event> = (1..200)
            .map(|seq| {
                ev(
                    "user/message",
                    seq,
                    1,
                    &format!(r#"{{"text":"{}"}}"#, "x".repeat(4000)),
                )
            })
            .collect();
        let e = backend
            .append_batch(&meta("s"), &big, true)
            .await
            .unwrap_err();
        // SQLite rolled the transaction back itself: one failure, not an aggregate.
        assert_eq!(e.name(), "Error", "{mode:?}: {e}");
        assert_eq!(e.code(), Some("ENOSPC"), "{mode:?}: {e}");
        assert!(
            e.to_string().starts_with("ENOSPC: no space left on device"),
            "{mode:?}: {e}"
        );
        std::fs::remove_file(small.0.join("filler")).unwrap();
        backend.close().await.unwrap();
        assert_eq!(stored_seqs(&db, "s").await, [0], "{mode:?}");
    }
}

/// Set when the connection under test starts a `ROLLBACK`; its progress handler then interrupts.
static ROLLBACK_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[allow(clippy::needless_pass_by_value)] // the signature `Connection::trace_v2` takes
fn arm_on_rollback(event: rusqlite::trace::TraceEvent<'_>) {
    if let rusqlite::trace::TraceEvent::Stmt(_, sql) = event
        && sql.trim() == "ROLLBACK"
    {
        ROLLBACK_STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_real_failed_rollback_is_an_aggregate_naming_both_failures() {
    let dir = TempDir::new("rollback-real");
    let db = dir.db();
    let backend = backend_at(&db);
    backend
        .append_batch(&meta("s"), &[turn_start(0, 1)], false)
        .await
        .unwrap();
    // From now on the connection interrupts every ROLLBACK it runs.
    backend
        .with_connection(|c| {
            c.trace_v2(
                rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
                Some(arm_on_rollback),
            );
            c.progress_handler(
                1,
                Some(|| ROLLBACK_STARTED.load(std::sync::atomic::Ordering::SeqCst)),
            )
            .unwrap();
        })
        .await
        .unwrap();
    // A stale batch (seq 5, the stored next seq is 1) fails inside the transaction, and the
    // ROLLBACK that follows is interrupted.
    let e = backend
        .append_batch(&meta("s"), &[step_start(5, 1, 1)], true)
        .await
        .unwrap_err();
    assert!(ROLLBACK_STARTED.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(e.name(), "AggregateError", "{e}");
    let p = db.display();
    assert_eq!(
        e.to_string(),
        format!(
            "session-persistence-sqlite append failed and rollback also failed: session s \
             append starts at seq 5, stored next seq is 1, on '{p}'; the rollback failed: \
             interrupted (code 9), on '{p}'"
        )
    );
    let inner = e.source().unwrap().downcast_ref::<Error>().unwrap();
    let Error::RollbackFailed {
        error, rollback, ..
    } = inner
    else {
        panic!("{inner:?}");
    };
    assert!(matches!(**error, Error::AppendStart { .. }), "{error:?}");
    assert_eq!(rollback.sqlite_code(), Some(9)); // SQLITE_INTERRUPT
    // Nothing of the batch was committed, and the backend is not stuck in the failed
    // transaction: it reopened its connection (without the interrupting handler) and appends.
    ROLLBACK_STARTED.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(stored_seqs(&db, "s").await, [0]);
    backend
        .append_batch(&meta("s"), &[step_start(1, 1, 1)], true)
        .await
        .unwrap();
    backend.close().await.unwrap();
    assert_eq!(stored_seqs(&db, "s").await, [0, 1]);
}

#[test]
fn a_failed_rollback_names_both_failures_and_stays_typed() {
    let failure = |code: i32, text: &str| {
        Error::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            Some(text.to_owned()),
        ))
    };
    let e = Error::RollbackFailed {
        op: "append",
        path: "/data/sessions.db".into(),
        error: Box::new(failure(1034, "disk I/O error")), // SQLITE_IOERR_FSYNC
        rollback: Box::new(failure(5, "database is locked")), // SQLITE_BUSY
    };
    assert_eq!(e.name(), "AggregateError");
    assert_eq!(
        e.to_string(),
        "session-persistence-sqlite append failed and rollback also failed: disk I/O error \
         (code 1034), on '/data/sessions.db'; the rollback failed: database is locked (code 5), \
         on '/data/sessions.db'"
    );
    // Through the backend contract the aggregate keeps its name, text and both typed errors.
    let text = e.to_string();
    let p: session_persist::Error = e.into();
    assert_eq!(p.name(), "AggregateError");
    assert_eq!(p.to_string(), text);
    let inner = p.source().unwrap().downcast_ref::<Error>().unwrap();
    let Error::RollbackFailed {
        error, rollback, ..
    } = inner
    else {
        panic!("{inner:?}");
    };
    assert_eq!(error.sqlite_code(), Some(1034));
    assert_eq!(rollback.sqlite_code(), Some(5));
}
