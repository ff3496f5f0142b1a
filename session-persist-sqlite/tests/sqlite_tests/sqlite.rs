//! The reference's `sqlite.spec.ts` cases (persistence §7.10), plus the contract cases that
//! concern this backend's storage hooks.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use session_core::{Event, SessionHeader};
use session_persist::{Backend, TornMarker};
use session_persist_sqlite::rusqlite::{self, Connection, params};
use session_persist_sqlite::schema::{
    EventRow, SessionRow, decode_store_identity, is_sqlite_busy, retry_journal_busy,
};
use session_persist_sqlite::{
    APPLICATION_ID, BACKEND_NAME, DEFAULT_BUSY_TIMEOUT_MS, Error, JournalMode, SCHEMA_VERSION,
    SqliteBackend, SqliteConfig,
};

fn err_text<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.unwrap_err().to_string()
}

fn perr_text<T: std::fmt::Debug>(r: session_persist::Result<T>) -> String {
    r.unwrap_err().to_string()
}

fn log_104() -> Vec<Event> {
    let mut events = vec![
        turn_start(0, 1),
        step_start(1, 1, 1),
        ev("request/header", 2, 1_000, r#"{"model":"m"}"#),
        ev("request/context", 3, 1_000, r#"{"tokens":3}"#),
    ];
    for seq in 4..102 {
        events.push(text(seq, 1_000 + seq as i64, 0, &format!("t{seq}")));
    }
    events.push(step_end(102, 1, 1));
    events.push(turn_end(103, 1));
    events
}

// persistence §7.10 #1: loading from configuration works and packs (1 packed row).
#[tokio::test]
async fn configured_backend_packs_a_run_into_one_row() {
    let dir = TempDir::new("config");
    let backend = SqliteBackend::new(SqliteConfig::new(dir.db().to_str().unwrap())).unwrap();
    let m = meta("s");
    let batch: Vec<Event> = (0..5).map(|i| text(i, 10, 0, "x")).collect();
    backend.append_batch(&m, &batch, false).await.unwrap();
    let rows = physical(&raw(&dir.db()), "s");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].2, "text-chunks");
    assert_eq!(
        backend.load_stored("s").await.unwrap().unwrap().events,
        batch
    );
}

// persistence §7.10 #2: each append is packed once and earlier rowids are unchanged.
#[tokio::test]
async fn appends_pack_once_and_keep_earlier_rowids() {
    let dir = TempDir::new("rowids");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    let events = log_104();
    backend.append_batch(&m, &events[..3], false).await.unwrap();
    let conn = raw(&dir.db());
    let first = physical(&conn, "s");
    backend.append_batch(&m, &events[3..4], true).await.unwrap();
    let second = physical(&conn, "s");
    assert_eq!(&second[..3], &first[..]);
    backend.append_batch(&m, &events[4..], true).await.unwrap();
    let rows = physical(&conn, "s");
    assert_eq!(&rows[..4], &second[..]);
    assert_eq!(rows.len(), 7);
    assert_eq!(rows.iter().filter(|r| r.3 == Some(0)).count(), 1);
    let uv: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(uv, 17);
    for from in [0u64, 2, 25, 101, 104, 105] {
        let suffix = backend.load_stored_from("s", from).await.unwrap().unwrap();
        let expected = events.get(from as usize..).unwrap_or(&[]);
        assert_eq!(suffix.events, expected, "from {from}");
    }
}

fn snapshot_rows(conn: &Connection) -> Vec<(i64, i64, String, Vec<u8>)> {
    let mut stmt = conn
        .prepare("SELECT rowid, seq, type, CAST(data AS BLOB) FROM events ORDER BY rowid")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

// persistence §7.10 #3: 1,000 chunks in 40-event batches give 31 rows, 31 inserted, 0 changed,
// 0 removed, every row within 1 MiB, and no WAL change while idle.
#[tokio::test]
async fn write_amplification_stays_bounded() {
    let dir = TempDir::new("amplification");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    // The block index changes every 130 chunks: six of those changes fall inside a batch.
    let events: Vec<Event> = (0..1000u64)
        .map(|i| text(i, 1_000 + i as i64, i / 130, &format!("chunk {i}")))
        .collect();
    backend.open().await.unwrap();
    let conn = raw(&dir.db());
    let (mut inserted, mut changed, mut removed) = (0, 0, 0);
    let mut before: Vec<(i64, i64, String, Vec<u8>)> = Vec::new();
    for (n, batch) in events.chunks(40).enumerate() {
        backend.append_batch(&m, batch, n > 0).await.unwrap();
        let after = snapshot_rows(&conn);
        for old in &before {
            match after.iter().find(|r| r.0 == old.0) {
                None => removed += 1,
                Some(new) if new != old => changed += 1,
                Some(_) => {}
            }
        }
        inserted += after
            .iter()
            .filter(|r| !before.iter().any(|o| o.0 == r.0))
            .count();
        before = after;
    }
    assert_eq!(before.len(), 31);
    assert_eq!((inserted, changed, removed), (31, 0, 0));
    let largest: i64 = conn
        .query_row(
            "SELECT max(length(CAST(data AS BLOB))) FROM events",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(largest <= 1_048_576);
    assert_eq!(
        backend.load_stored("s").await.unwrap().unwrap().events,
        events
    );
    let wal = dir.path().join("sessions.db-wal");
    let stat = || {
        let m = std::fs::metadata(&wal).unwrap();
        (m.len(), m.modified().unwrap())
    };
    let idle = stat();
    tokio::time::sleep(Duration::from_millis(50)).await;
    backend.load_stored_from("s", 990).await.unwrap();
    backend.list_snapshots().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(stat(), idle);
}

// persistence §7.10 #4: a seeking read includes a packed predecessor hidden by an overlapping
// scalar row, and a malformed predecessor gives nothing.
#[tokio::test]
async fn seeking_read_uses_a_covering_packed_predecessor() {
    let dir = TempDir::new("predecessor");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    let run = [text(0, 5, 0, "a"), text(1, 6, 0, "b"), text(2, 7, 0, "c")];
    backend.append_batch(&m, &run, false).await.unwrap();
    let conn = raw(&dir.db());
    conn.execute(
        "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 2, 'hidden', 9, '{}')",
        [],
    )
    .unwrap();
    let suffix = backend.load_stored_from("s", 2).await.unwrap().unwrap();
    assert_eq!(suffix.events, [run[2].clone()]);
    conn.execute("UPDATE events SET data = '{\"turn\":1}' WHERE seq = 0", [])
        .unwrap();
    let suffix = backend.load_stored_from("s", 2).await.unwrap().unwrap();
    assert!(suffix.events.is_empty());
}

// persistence §7.10 #5: an append waits for a competing connection's BEGIN IMMEDIATE within
// the busy timeout.
#[tokio::test]
async fn append_waits_for_a_competing_immediate_transaction() {
    let dir = TempDir::new("busy");
    let backend =
        SqliteBackend::new(SqliteConfig::new(dir.db().to_str().unwrap()).busy_timeout_ms(1_000))
            .unwrap();
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let path = dir.db();
    let holder = std::thread::spawn(move || {
        let conn = raw(&path);
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        conn.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    let started = Instant::now();
    backend
        .append_batch(&m, &[turn_end(1, 1)], true)
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    holder.join().unwrap();
    assert_eq!(
        backend
            .load_stored("s")
            .await
            .unwrap()
            .unwrap()
            .events
            .len(),
        2
    );
}

fn make_db(path: &std::path::Path, script: &str) {
    let conn = raw(path);
    conn.execute_batch(script).unwrap();
    drop(conn);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

// persistence §7.10 #6: user_version 16 is refused as incompatible.
#[tokio::test]
async fn schema_version_16_is_incompatible() {
    let dir = TempDir::new("v16");
    make_db(&dir.db(), "PRAGMA user_version = 16");
    let e = err_text(backend_at(&dir.db()).open().await);
    assert_eq!(
        e,
        format!(
            "session database at \"{}\" has schema version 16, incompatible with this build (17)",
            dir.db().display()
        )
    );
}

// persistence §7.10 #7: a stale append from a second store is refused and the winner's tail
// is kept.
#[tokio::test]
async fn stale_append_from_a_second_store_is_refused() {
    let dir = TempDir::new("stale-append");
    let a = backend_at(&dir.db());
    let b = backend_at(&dir.db());
    let m = meta("s");
    let winner = [turn_start(0, 1), ev("request/context", 1, 1, r#"{"w":1}"#)];
    a.append_batch(&m, &winner, false).await.unwrap();
    let loser = [turn_start(0, 1), ev("request/context", 1, 1, r#"{"l":1}"#)];
    let e = perr_text(b.append_batch(&m, &loser, false).await);
    assert_eq!(e, "session s append starts at seq 0, stored next seq is 2");
    assert_eq!(a.load_stored("s").await.unwrap().unwrap().events, winner);
    assert_eq!(b.load_stored("s").await.unwrap().unwrap().events, winner);
}

fn corrupt_row(conn: &Connection, id: &str, seq: u64) {
    conn.execute(
        "INSERT INTO events (session_id, seq, type, time, data) \
         VALUES (?1, ?2, 'assistant/chunk', 1, '{not valid json')",
        params![id, seq as i64],
    )
    .unwrap();
}

// persistence §7.10 #8: a stale repair is refused and the newer tail is kept.
#[tokio::test]
async fn stale_repair_is_refused() {
    let dir = TempDir::new("stale-repair");
    let a = backend_at(&dir.db());
    let b = backend_at(&dir.db());
    let m = meta("s");
    a.append_batch(&m, &[turn_start(0, 1), step_start(1, 1, 1)], false)
        .await
        .unwrap();
    corrupt_row(&raw(&dir.db()), "s", 2);
    let seen_a = a.load_stored("s").await.unwrap().unwrap();
    assert_eq!(seen_a.torn, Some(TornMarker::FromSeq(2)));
    let seen_b = b.load_stored("s").await.unwrap().unwrap();
    let newer = [step_end(2, 1, 1), turn_end(3, 1)];
    b.commit_repair(&m, seen_b.torn, &newer).await.unwrap();
    let e = perr_text(a.commit_repair(&m, seen_a.torn, &newer).await);
    assert_eq!(
        e,
        "session s repair is stale: physical tail no longer starts at seq 2"
    );
    let events = a.load_stored("s").await.unwrap().unwrap().events;
    assert_eq!(events.len(), 4);
    assert_eq!(&events[2..], &newer);
}

async fn pragma(backend: &SqliteBackend, name: &'static str) -> rusqlite::types::Value {
    backend
        .with_connection(move |c| {
            c.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .unwrap()
        })
        .await
        .unwrap()
}

// persistence §7.10 #9: all four journal modes, the memory result, and the hardening and
// durability pragmas.
#[tokio::test]
async fn journal_modes_and_pragmas_are_applied() {
    use rusqlite::types::Value as V;
    for mode in JournalMode::ALL {
        let dir = TempDir::new("journal");
        let backend =
            SqliteBackend::new(SqliteConfig::new(dir.db().to_str().unwrap()).journal_mode(mode))
                .unwrap();
        backend.open().await.unwrap();
        assert_eq!(
            pragma(&backend, "journal_mode").await,
            V::Text(mode.as_str().into())
        );
        assert_eq!(pragma(&backend, "trusted_schema").await, V::Integer(0));
        assert_eq!(pragma(&backend, "mmap_size").await, V::Integer(0));
        assert_eq!(pragma(&backend, "synchronous").await, V::Integer(2));
        assert_eq!(pragma(&backend, "foreign_keys").await, V::Integer(1));
    }
    let backend = memory();
    backend.open().await.unwrap();
    assert_eq!(
        pragma(&backend, "journal_mode").await,
        V::Text("memory".into())
    );
    assert_eq!(pragma(&backend, "trusted_schema").await, V::Integer(0));
    assert_eq!(pragma(&backend, "synchronous").await, V::Integer(2));
}

fn failure(code: i32) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(code),
        Some("database is locked".into()),
    )
}

// persistence §7.10 #10: a busy journal transition is retried within budget (2 attempts).
#[test]
fn busy_journal_transition_is_retried_within_budget() {
    let start = Instant::now();
    let mut attempts = 0;
    let result = retry_journal_busy(
        start + Duration::from_secs(5),
        || {
            attempts += 1;
            if attempts == 1 {
                Err(failure(5))
            } else {
                Ok("wal")
            }
        },
        Instant::now,
        std::thread::sleep,
    );
    assert_eq!(result.unwrap(), "wal");
    assert_eq!(attempts, 2);
}

// persistence §7.10 #11: no retry for errcode 5 with timeout 0, nor for errcode 6.
#[test]
fn no_retry_without_budget_or_for_other_codes() {
    let now = Instant::now();
    let mut attempts = 0;
    let e = retry_journal_busy(
        now,
        || -> rusqlite::Result<()> {
            attempts += 1;
            Err(failure(5))
        },
        || now,
        |_| {},
    );
    assert!(is_sqlite_busy(&e.unwrap_err()));
    assert_eq!(attempts, 1);
    let mut attempts = 0;
    let e = retry_journal_busy(
        now + Duration::from_secs(5),
        || -> rusqlite::Result<()> {
            attempts += 1;
            Err(failure(6))
        },
        Instant::now,
        |_| {},
    );
    assert!(!is_sqlite_busy(&e.unwrap_err()));
    assert_eq!(attempts, 1);
    // Extended busy codes are not plain SQLITE_BUSY either.
    assert!(!is_sqlite_busy(&failure(5 | (2 << 8))));
}

// persistence §7.10 #12: no retry after the open-relative cutoff (mocked clock).
#[test]
fn no_retry_after_the_open_relative_cutoff() {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(100);
    let clock = Arc::new(Mutex::new(start));
    let mut attempts = 0;
    let sleeps = Arc::new(Mutex::new(Vec::new()));
    let result = retry_journal_busy(
        deadline,
        || -> rusqlite::Result<()> {
            attempts += 1;
            Err(failure(5))
        },
        || *clock.lock().unwrap(),
        |d| {
            sleeps.lock().unwrap().push(d);
            // The pause overshoots the deadline: no further attempt may start.
            *clock.lock().unwrap() = deadline + Duration::from_millis(1);
        },
    );
    assert!(result.is_err());
    assert_eq!(attempts, 1);
    assert_eq!(*sleeps.lock().unwrap(), [Duration::from_millis(10)]);
}

// persistence §7.10 #13: repeated busy attempts are paced (50 ms budget: more than 1 and at
// most 6 attempts).
#[test]
fn busy_attempts_are_paced() {
    let start = Instant::now();
    let mut attempts = 0;
    let result = retry_journal_busy(
        start + Duration::from_millis(50),
        || -> rusqlite::Result<()> {
            attempts += 1;
            Err(failure(5))
        },
        Instant::now,
        std::thread::sleep,
    );
    assert!(result.is_err());
    assert!(attempts > 1 && attempts <= 6, "{attempts} attempts");
    assert!(start.elapsed() >= Duration::from_millis(50));
}

// persistence §7.10 #14: an unversioned database with a table, version 16 and a foreign
// application id are each refused with their message.
#[tokio::test]
async fn foreign_databases_are_refused() {
    let cases = [
        (
            "CREATE TABLE notes (x TEXT)",
            "has an unversioned schema or application identity",
        ),
        (
            "PRAGMA application_id = 7",
            "has an unversioned schema or application identity",
        ),
        (
            "PRAGMA user_version = 16",
            "has schema version 16, incompatible with this build (17)",
        ),
        (
            "PRAGMA user_version = 17; PRAGMA application_id = 12345",
            "has application id 12345, expected 1146308688",
        ),
    ];
    for (script, message) in cases {
        let dir = TempDir::new("foreign");
        make_db(&dir.db(), script);
        let e = err_text(backend_at(&dir.db()).open().await);
        assert_eq!(
            e,
            format!("session database at \"{}\" {message}", dir.db().display())
        );
    }
}

// persistence §7.10 #15: an extra column, a non-STRICT events table or an extra object fail
// with `required schema objects`.
#[tokio::test]
async fn loose_schemas_are_refused() {
    let variants = [
        REFERENCE_DDL.replace(
            "  revision         INTEGER NOT NULL\n",
            "  revision INTEGER NOT NULL,\n  extra TEXT\n",
        ),
        REFERENCE_DDL.replace(
            "  PRIMARY KEY (session_id, seq)\n) STRICT;",
            "  PRIMARY KEY (session_id, seq)\n);",
        ),
        format!("{REFERENCE_DDL} CREATE INDEX events_by_type ON events(type);"),
    ];
    for script in variants {
        let dir = TempDir::new("loose");
        make_db(&dir.db(), &script);
        let e = err_text(backend_at(&dir.db()).open().await);
        assert_eq!(
            e,
            format!(
                "session database at \"{}\" does not contain the required schema objects",
                dir.db().display()
            )
        );
    }
    // The exact reference DDL itself is accepted.
    let dir = TempDir::new("exact");
    make_db(&dir.db(), REFERENCE_DDL);
    let backend = backend_at(&dir.db());
    assert_eq!(
        backend
            .store_identity()
            .await
            .unwrap()
            .rsplit(":store:")
            .next(),
        Some("3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d")
    );
}

// persistence §7.10 #16: ownership changes seen at mutation time are refused.
#[tokio::test]
async fn ownership_changes_are_seen_at_mutation_time() {
    let dir = TempDir::new("ownership");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let conn = raw(&dir.db());
    conn.execute_batch("PRAGMA user_version = 18").unwrap();
    assert_eq!(
        perr_text(backend.append_batch(&m, &[turn_end(1, 1)], true).await),
        "session database schema changed before mutation (expected 17, got 18)"
    );
    conn.execute_batch("PRAGMA user_version = 17; PRAGMA application_id = 7")
        .unwrap();
    assert_eq!(
        perr_text(backend.commit_repair(&m, None, &[turn_end(1, 1)]).await),
        "session database application id changed before mutation (expected 1146308688, got 7)"
    );
    conn.execute_batch("PRAGMA application_id = 1146308688; CREATE TABLE extra (x)")
        .unwrap();
    assert_eq!(
        perr_text(backend.append_batch(&m, &[turn_end(1, 1)], true).await),
        format!(
            "session database at \"{}\" does not contain the required schema objects",
            dir.db().display()
        )
    );
    conn.execute_batch("DROP TABLE extra").unwrap();
    backend
        .append_batch(&m, &[turn_end(1, 1)], true)
        .await
        .unwrap();
    assert_eq!(
        backend
            .load_stored("s")
            .await
            .unwrap()
            .unwrap()
            .events
            .len(),
        2
    );
}

// persistence §7.10 #17: a row restores every optional header field; created_at −1, origin
// `external` and delegation_depth −1 are refused.
#[tokio::test]
async fn session_rows_restore_all_fields_and_are_strict() {
    let dir = TempDir::new("meta");
    let backend = backend_at(&dir.db());
    let mut m = SessionHeader::new("full", 42);
    m.cwd = Some("/work/p".into());
    m.parent_session = Some("parent".into());
    m.seed_length = Some(3);
    m.origin_subagent = true;
    m.delegation_depth = Some(2);
    m.agent_preset = Some("preset".into());
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let stored = backend.load_stored("full").await.unwrap().unwrap();
    assert_eq!(stored.meta, m);
    assert_eq!(
        stored.header_value.to_json(),
        r#"{"version":0,"id":"full","createdAt":42,"cwd":"/work/p","parentSession":"parent","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"preset"}"#
    );
    let conn = raw(&dir.db());
    for (update, message) in [
        (
            "UPDATE sessions SET created_at = -1",
            "stored created_at must be non-negative",
        ),
        (
            "UPDATE sessions SET origin = 'external'",
            "stored session origin must be subagent or null",
        ),
        (
            "UPDATE sessions SET delegation_depth = -1",
            "stored delegation_depth must be non-negative or null",
        ),
    ] {
        conn.execute_batch(update).unwrap();
        assert_eq!(perr_text(backend.load_stored("full").await), message);
        conn.execute_batch(
            "UPDATE sessions SET created_at = 42, origin = 'subagent', delegation_depth = 2",
        )
        .unwrap();
    }
    // A minimal header keeps every optional field absent, delegationDepth included.
    backend
        .append_batch(&meta("bare"), &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let bare = backend.load_stored("bare").await.unwrap().unwrap();
    assert_eq!(bare.meta, meta("bare"));
    assert_eq!(
        bare.header_value.to_json(),
        r#"{"version":0,"id":"bare","createdAt":1000}"#
    );
}

fn session_cells() -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    vec![
        V::Text("s".into()),
        V::Integer(0),
        V::Integer(1),
        V::Null,
        V::Null,
        V::Null,
        V::Null,
        V::Null,
        V::Null,
        V::Text("3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d".into()),
        V::Integer(1),
    ]
}

fn event_cells() -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    vec![
        V::Integer(0),
        V::Text("turn/start".into()),
        V::Integer(5),
        V::Text("{}".into()),
        V::Null,
        V::Null,
        V::Null,
    ]
}

// persistence §7.10 #18: malformed row primitives are refused generically.
#[test]
fn malformed_row_primitives_are_refused() {
    use rusqlite::types::Value as V;
    assert!(SessionRow::decode(&session_cells()).is_ok());
    let session_cases: Vec<(usize, V, &str)> = vec![
        (0, V::Integer(1), "stored id must be a string"),
        (0, V::Text(String::new()), "stored id must not be empty"),
        (
            1,
            V::Text("0".into()),
            "stored version must be a safe integer",
        ),
        (
            1,
            V::Integer(1 << 53),
            "stored version must be a safe integer",
        ),
        (2, V::Real(1.5), "stored created_at must be a safe integer"),
        (3, V::Integer(1), "stored cwd must be a string or null"),
        (
            3,
            V::Text("rel/dir".into()),
            "stored session cwd must be absolute",
        ),
        (
            4,
            V::Blob(vec![1]),
            "stored parent_session must be a string or null",
        ),
        (
            5,
            V::Integer(-2),
            "stored seed_length must be non-negative or null",
        ),
        (
            5,
            V::Real(0.5),
            "stored seed_length must be a safe integer or null",
        ),
        (
            6,
            V::Text("root".into()),
            "stored session origin must be subagent or null",
        ),
        (
            8,
            V::Integer(3),
            "stored agent_preset must be a string or null",
        ),
        (9, V::Null, "stored incarnation must be a string"),
        (
            9,
            V::Text("inc-1".into()),
            "stored session incarnation must be a UUID",
        ),
        (10, V::Integer(-1), "stored revision must be non-negative"),
    ];
    for (index, value, message) in session_cases {
        let mut cells = session_cells();
        cells[index] = value;
        assert_eq!(SessionRow::decode(&cells).unwrap_err().to_string(), message);
    }
    assert!(EventRow::decode(&event_cells()).is_ok());
    let event_cases: Vec<(usize, V, &str)> = vec![
        (
            6,
            V::Integer(2),
            "stored event ignorable must be 0, 1, or null",
        ),
        (
            6,
            V::Text("1".into()),
            "stored ignorable must be a safe integer or null",
        ),
        (0, V::Integer(-1), "stored seq must be non-negative"),
        (0, V::Null, "stored seq must be a safe integer"),
        (1, V::Text(String::new()), "stored type must not be empty"),
        (2, V::Real(0.5), "stored time must be a safe integer"),
        (3, V::Integer(1), "stored data must be a string or blob"),
        (3, V::Null, "stored data must be a string or blob"),
        (
            4,
            V::Text("[1]".into()),
            "stored source_event_seqs must be a blob or null",
        ),
        (
            5,
            V::Integer(1),
            "stored surface_op must be a string or null",
        ),
    ];
    for (index, value, message) in event_cases {
        let mut cells = event_cells();
        cells[index] = value;
        assert_eq!(EventRow::decode(&cells).unwrap_err().to_string(), message);
    }
    assert_eq!(
        decode_store_identity(&V::Text("not-a-uuid".into()))
            .unwrap_err()
            .to_string(),
        "stored store_id must be a UUID"
    );
    assert_eq!(
        decode_store_identity(&V::Integer(1))
            .unwrap_err()
            .to_string(),
        "stored store_id must be a string"
    );
}

// persistence §7.10 #19: invalid metadata in the database makes `list` and `loadStored` fail.
#[tokio::test]
async fn invalid_metadata_fails_list_and_load() {
    let dir = TempDir::new("invalid-meta");
    let backend = backend_at(&dir.db());
    backend
        .append_batch(&meta("s"), &[turn_start(0, 1)], false)
        .await
        .unwrap();
    raw(&dir.db())
        .execute_batch("UPDATE sessions SET cwd = 'relative'")
        .unwrap();
    assert_eq!(
        perr_text(backend.list().await),
        "stored session cwd must be absolute"
    );
    assert_eq!(
        perr_text(backend.list_snapshots().await),
        "stored session cwd must be absolute"
    );
    assert_eq!(
        perr_text(backend.load_stored("s").await),
        "stored session cwd must be absolute"
    );
    assert_eq!(
        perr_text(backend.read_stored_revision("s").await),
        "stored session cwd must be absolute"
    );
}

// persistence §7.10 #20: the application id constant is 0x44534850 ("DSHP").
#[test]
fn application_id_is_dshp() {
    assert_eq!(APPLICATION_ID, 0x4453_4850);
    assert_eq!(APPLICATION_ID, 1_146_308_688);
    assert_eq!(&APPLICATION_ID.to_be_bytes()[4..], b"DSHP");
    assert_eq!(SCHEMA_VERSION, 17);
}

// persistence §7.10 #21: the database stays unopened (no file) until the first operation.
// (The reference's restoration of Node's `emitWarning` hook has no Rust counterpart.)
#[tokio::test]
async fn database_opens_lazily() {
    let dir = TempDir::new("lazy");
    let db = dir.path().join("nested").join("sessions.db");
    let backend = backend_at(&db);
    backend.validate_path().await.unwrap();
    assert!(db.parent().unwrap().is_dir());
    assert!(!db.exists());
    assert!(!backend.is_open());
    assert!(backend.list().await.unwrap().is_empty());
    assert!(backend.is_open());
    assert!(db.exists());
    let mode = std::fs::metadata(&db).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let parent_mode = std::fs::metadata(db.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(parent_mode & 0o777, 0o700);
}

// persistence §7.10 #22: disposal after path validation creates no file; a store that is never
// validated creates nothing either.
#[tokio::test]
async fn disposal_before_opening_creates_no_file() {
    let dir = TempDir::new("dispose");
    let db = dir.db();
    let backend = backend_at(&db);
    backend.validate_path().await.unwrap();
    backend.close().await.unwrap();
    assert!(!db.exists());
    let untouched = dir.path().join("never").join("sessions.db");
    let backend = backend_at(&untouched);
    backend.close().await.unwrap();
    assert!(!untouched.parent().unwrap().exists());
    assert!(matches!(
        backend.list().await.unwrap_err(),
        session_persist::Error::Closed { .. }
    ));
}

// persistence §7.10 #23: constructor defaults, no `locate`, no raw artifacts, seeking reads.
// (`prepare` is the coordinator's; the storage hooks it needs are covered here.)
#[tokio::test]
async fn constructor_defaults() {
    let config = SqliteConfig::new("/tmp/x.db");
    assert_eq!(config.journal_mode, JournalMode::Wal);
    assert_eq!(config.busy_timeout_ms, DEFAULT_BUSY_TIMEOUT_MS);
    assert_eq!(DEFAULT_BUSY_TIMEOUT_MS, 5_000);
    assert_eq!(JournalMode::parse("truncate"), Some(JournalMode::Truncate));
    assert_eq!(JournalMode::parse("WAL"), None);
    let backend = memory();
    assert_eq!(backend.name(), BACKEND_NAME);
    assert_eq!(BACKEND_NAME, "session-persistence-sqlite");
    assert!(backend.locate(&meta("s")).is_none());
    assert!(!backend.supports_raw_artifacts());
    assert!(backend.supports_seek());
    assert_eq!(
        perr_text(backend.read_raw("s").await),
        "this session persistence backend does not expose raw artifacts"
    );
    assert_eq!(
        err_text(SqliteBackend::new(
            SqliteConfig::new(":memory:").busy_timeout_ms(2_147_483_648)
        )),
        "busyTimeoutMs must be an integer between 0 and 2147483647"
    );
    assert!(
        SqliteBackend::new(SqliteConfig::new(":memory:").busy_timeout_ms(2_147_483_647)).is_ok()
    );
}

// persistence §7.10 #24: empty mutations do nothing; a repair without a metadata row fails and
// is rolled back.
#[tokio::test]
async fn empty_mutations_and_missing_metadata() {
    let backend = memory();
    let m = meta("s");
    backend.append_batch(&m, &[], false).await.unwrap();
    backend.commit_repair(&m, None, &[]).await.unwrap();
    assert!(backend.list().await.unwrap().is_empty());
    assert_eq!(
        perr_text(backend.commit_repair(&m, None, &[turn_start(0, 1)]).await),
        "session s metadata row is missing"
    );
    let count: i64 = backend
        .with_connection(|c| {
            c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                .unwrap()
        })
        .await
        .unwrap();
    assert_eq!(count, 0);
    // A repair with nothing to do leaves the revision alone.
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let before = backend.read_stored_revision("s").await.unwrap();
    backend.commit_repair(&m, None, &[]).await.unwrap();
    assert_eq!(backend.read_stored_revision("s").await.unwrap(), before);
}

// persistence §7.10 #25: an omitted torn marker, a stale closer position, and a closer on an
// empty table.
#[tokio::test]
async fn repair_checks_the_current_tail() {
    let dir = TempDir::new("repair-checks");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1), step_start(1, 1, 1)], false)
        .await
        .unwrap();
    let conn = raw(&dir.db());
    corrupt_row(&conn, "s", 2);
    assert_eq!(
        perr_text(backend.commit_repair(&m, None, &[turn_end(2, 1)]).await),
        "session s repair omitted current torn tail at seq 2"
    );
    conn.execute_batch("DELETE FROM events WHERE seq = 2")
        .unwrap();
    assert_eq!(
        perr_text(backend.commit_repair(&m, None, &[step_end(3, 1, 1)]).await),
        "session s repair is stale: closer starts at seq 3, stored next seq is 2"
    );
    conn.execute_batch("DELETE FROM events").unwrap();
    let before = backend.read_stored_revision("s").await.unwrap().unwrap();
    backend
        .commit_repair(&m, None, &[turn_start(0, 1)])
        .await
        .unwrap();
    let stored = backend.load_stored("s").await.unwrap().unwrap();
    assert_eq!(stored.events, [turn_start(0, 1)]);
    assert_ne!(stored.revision, before);
}

// persistence §7.10 #26: a malformed physical tail row blocks append.
#[tokio::test]
async fn malformed_tail_blocks_append() {
    let dir = TempDir::new("tail");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    corrupt_row(&raw(&dir.db()), "s", 1);
    assert_eq!(
        perr_text(backend.append_batch(&m, &[turn_end(1, 1)], true).await),
        "session s has an invalid physical tail at seq 1"
    );
    assert_eq!(
        perr_text(backend.append_batch(&m, &[turn_end(2, 1)], true).await),
        "session s has an invalid physical tail at seq 1"
    );
}

// persistence §7.10 #27: a missing or empty store_id means no valid store identity.
#[tokio::test]
async fn store_identity_must_be_valid() {
    for script in [
        "DELETE FROM persistence_state",
        "UPDATE persistence_state SET store_id = ''",
    ] {
        let dir = TempDir::new("store-id");
        make_db(&dir.db(), &format!("{REFERENCE_DDL} {script};"));
        let e = backend_at(&dir.db()).open().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "session database at \"{}\" has no valid store identity",
                dir.db().display()
            )
        );
    }
}

// persistence §7.10 #28: a path with NUL is refused at initialization (ERR_INVALID_ARG_VALUE).
#[tokio::test]
async fn nul_in_path_is_refused() {
    let backend = SqliteBackend::new(SqliteConfig::new("/tmp/a\0b.db")).unwrap();
    let e = backend.validate_path().await.unwrap_err();
    assert_eq!(e.code(), Some("ERR_INVALID_ARG_VALUE"));
    assert_eq!(e.name(), "TypeError");
    assert!(e.to_string().contains("without null bytes"), "{e}");
}

// persistence §7.10 #29: a directory path, a symlinked file and a symlinked parent are refused.
#[tokio::test]
async fn path_shapes_are_checked() {
    let dir = TempDir::new("shapes");
    let as_dir = dir.path().join("dir.db");
    std::fs::create_dir(&as_dir).unwrap();
    assert_eq!(
        err_text(backend_at(&as_dir).validate_path().await),
        format!(
            "session database \"{}\" must be a regular file, not a symbolic link",
            as_dir.display()
        )
    );
    let target = dir.path().join("target.db");
    std::fs::write(&target, b"").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(
        err_text(backend_at(&link).validate_path().await),
        format!(
            "session database \"{}\" must be a regular file, not a symbolic link",
            link.display()
        )
    );
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let linked_parent = dir.path().join("alias");
    std::os::unix::fs::symlink(&real, &linked_parent).unwrap();
    assert_eq!(
        err_text(
            backend_at(&linked_parent.join("s.db"))
                .validate_path()
                .await
        ),
        format!(
            "session database parent \"{}\" must be a real directory",
            linked_parent.display()
        )
    );
}

// persistence §7.10 #30: a 0644 file and a 0770 parent are refused.
#[tokio::test]
async fn permissions_are_checked() {
    let dir = TempDir::new("perms");
    let db = dir.db();
    std::fs::write(&db, b"").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        err_text(backend_at(&db).validate_path().await),
        format!(
            "session database \"{}\" must be owned by the current user and accessible only by that user",
            db.display()
        )
    );
    let open = dir.path().join("shared");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_eq!(
        err_text(backend_at(&open.join("s.db")).validate_path().await),
        format!(
            "session database parent \"{}\" must be owned by the current user and not group/world-writable",
            open.display()
        )
    );
}

// persistence §7.10 #31: database creation failing after path validation reports the OS error.
#[tokio::test]
async fn creation_failure_after_validation_is_reported() {
    let dir = TempDir::new("vanish");
    let parent = dir.path().join("p");
    let db = parent.join("s.db");
    let backend = backend_at(&db);
    backend.validate_path().await.unwrap();
    std::fs::remove_dir(&parent).unwrap();
    std::fs::write(&parent, b"not a directory").unwrap();
    let e = backend.open().await.unwrap_err();
    assert!(matches!(e.code(), Some("ENOENT" | "ENOTDIR")), "{e}");
    assert!(
        e.to_string()
            .ends_with(&format!(", open '{}'", db.display())),
        "{e}"
    );
    // The failure is not remembered: once the directory is back, the store opens.
    std::fs::remove_file(&parent).unwrap();
    std::fs::create_dir(&parent).unwrap();
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
    backend.open().await.unwrap();
}

// persistence §7.10 (coordinator suite's torn tail): a corrupt scalar row at the next seq is a
// torn tail; repair removes it atomically with the closers, and appends continue.
#[tokio::test]
async fn torn_tail_is_repaired_atomically() {
    let dir = TempDir::new("torn");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    let mut log = vec![
        turn_start(0, 1),
        turn_end(1, 1),
        turn_start(2, 2),
        step_start(3, 2, 1),
    ];
    backend.append_batch(&m, &log, false).await.unwrap();
    corrupt_row(&raw(&dir.db()), "s", 4);
    let stored = backend.load_stored("s").await.unwrap().unwrap();
    assert_eq!(stored.events, log);
    assert_eq!(stored.torn, Some(TornMarker::FromSeq(4)));
    // Reads never mutate: the revision and the torn row stay.
    assert_eq!(
        backend.read_stored_revision("s").await.unwrap(),
        Some(stored.revision.clone())
    );
    assert_eq!(
        backend
            .load_stored_from("s", 0)
            .await
            .unwrap()
            .unwrap()
            .events,
        log
    );
    let closers = [step_end(4, 2, 1), turn_end(5, 2)];
    backend
        .commit_repair(&m, stored.torn, &closers)
        .await
        .unwrap();
    log.extend(closers);
    let repaired = backend.load_stored("s").await.unwrap().unwrap();
    assert_eq!(repaired.events, log);
    assert!(repaired.torn.is_none());
    assert_ne!(repaired.revision, stored.revision);
    backend
        .append_batch(&m, &[turn_start(6, 3)], true)
        .await
        .unwrap();
    assert_eq!(
        backend
            .load_stored("s")
            .await
            .unwrap()
            .unwrap()
            .events
            .len(),
        7
    );
    // A foreign marker kind is refused.
    assert!(matches!(
        backend
            .commit_repair(
                &m,
                Some(TornMarker::Truncate {
                    truncate_to: 0,
                    recovered: vec![]
                }),
                &[]
            )
            .await
            .unwrap_err(),
        session_persist::Error::ForeignMarker { .. }
    ));
}

// persistence §7.10, §4.6: damage before the last durable turn/end is committed corruption.
#[tokio::test]
async fn committed_corruption_is_an_error() {
    let dir = TempDir::new("committed");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1), step_start(1, 1, 1)], false)
        .await
        .unwrap();
    let conn = raw(&dir.db());
    corrupt_row(&conn, "s", 2);
    conn.execute(
        "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 3, 'turn/end', 1, '{\"turn\":1}')",
        [],
    )
    .unwrap();
    let expected = "corrupt session log: invalid committed physical row at seq 2";
    assert_eq!(perr_text(backend.load_stored("s").await), expected);
    assert_eq!(perr_text(backend.load_stored_from("s", 1).await), expected);
    // A seek past the damage reads only the rows after it.
    assert!(
        backend
            .load_stored_from("s", 4)
            .await
            .unwrap()
            .unwrap()
            .events
            .is_empty()
    );
}

// persistence §4.8: revisions count transactions, reads never change them, and stores never
// share them.
#[tokio::test]
async fn revisions_and_store_identity() {
    let dir = TempDir::new("revisions");
    let backend = backend_at(&dir.db());
    let m = meta("s");
    assert_eq!(backend.read_stored_revision("s").await.unwrap(), None);
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let identity = backend.store_identity().await.unwrap();
    let meta_fs = std::fs::metadata(dir.db()).unwrap();
    assert!(
        identity.starts_with(&format!("file:{}:{}:", meta_fs.dev(), meta_fs.ino())),
        "{identity}"
    );
    let r1 = backend.read_stored_revision("s").await.unwrap().unwrap();
    assert!(r1.as_str().starts_with(&format!("{identity}:incarnation:")));
    assert!(r1.as_str().ends_with(":revision:1"));
    backend.load_stored("s").await.unwrap();
    backend.load_stored_from("s", 0).await.unwrap();
    backend.list().await.unwrap();
    assert_eq!(
        backend.read_stored_revision("s").await.unwrap().unwrap(),
        r1
    );
    backend
        .append_batch(&m, &[turn_end(1, 1)], true)
        .await
        .unwrap();
    let r2 = backend.read_stored_revision("s").await.unwrap().unwrap();
    assert!(r2.as_str().ends_with(":revision:2"));
    let snapshots = backend.list_snapshots().await.unwrap();
    assert_eq!(snapshots, [(m.clone(), r2.clone())]);
    // A second store on the same file sees the same revision; a memory store never does.
    assert_eq!(
        backend_at(&dir.db())
            .read_stored_revision("s")
            .await
            .unwrap(),
        Some(r2.clone())
    );
    let (a, b) = (memory(), memory());
    a.append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    b.append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let ra = a.read_stored_revision("s").await.unwrap().unwrap();
    let rb = b.read_stored_revision("s").await.unwrap().unwrap();
    assert!(ra.as_str().starts_with("memory:store:"));
    assert_ne!(ra, rb);
}

// persistence §7.1 #6, §4.6: a session only appears in `list` once materialized.
#[tokio::test]
async fn only_materialized_sessions_are_listed() {
    let backend = memory();
    assert!(backend.list().await.unwrap().is_empty());
    assert!(backend.load_stored("s").await.unwrap().is_none());
    assert!(backend.load_stored_from("s", 0).await.unwrap().is_none());
    let mut m = meta("s");
    m.cwd = Some("/w".into());
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    assert_eq!(backend.list().await.unwrap(), [m]);
}

// persistence §1.4 (format refusal): a stored header version other than 0 is refused when the
// session is opened; a listing returns it as stored.
#[tokio::test]
async fn foreign_header_versions_are_refused_on_open_and_listed_as_stored() {
    let dir = TempDir::new("version");
    let backend = backend_at(&dir.db());
    backend
        .append_batch(&meta("s"), &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let conn = raw(&dir.db());
    conn.execute_batch("UPDATE sessions SET version = 99")
        .unwrap();
    let e = backend.load_stored("s").await.unwrap_err();
    assert_eq!(e.name(), "SessionFormatUnsupportedError");
    assert_eq!(
        e.to_string(),
        "session \"s\" uses log format v99, but this harness reads only v0: the log was written by a newer harness \u{2014} upgrade the harness to open it"
    );
    conn.execute_batch("UPDATE sessions SET version = -1")
        .unwrap();
    assert_eq!(
        perr_text(backend.load_stored("s").await),
        "session \"s\" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it"
    );
    // Listing reads headers leniently: the session is listed with its stored version.
    let listed = backend.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].to_value().get("version").unwrap().to_json(), "-1");
}
