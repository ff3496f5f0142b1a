//! Shared helpers of the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use session_core::json::Value;
use session_core::{Event, EventParts, KeyOrder, SessionHeader};
use session_persist_sqlite::rusqlite::Connection;
use session_persist_sqlite::{SqliteBackend, SqliteConfig};

/// A private (0700) temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "sqlite-i-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&path)
            .unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn db(&self) -> PathBuf {
        self.0.join("sessions.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn backend_at(path: &Path) -> SqliteBackend {
    SqliteBackend::new(SqliteConfig::new(path.to_str().unwrap())).unwrap()
}

pub fn memory() -> SqliteBackend {
    SqliteBackend::new(SqliteConfig::new(":memory:")).unwrap()
}

pub fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

pub fn meta(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_000)
}

pub fn json(text: &str) -> Value {
    Value::parse(text).unwrap()
}

pub fn ev(ty: &str, seq: u64, time: i64, data: &str) -> Event {
    Event::appended(ty, seq, time, json(data), None, None)
}

pub fn turn_start(seq: u64, turn: u64) -> Event {
    ev("turn/start", seq, 1_000, &format!(r#"{{"turn":{turn}}}"#))
}

pub fn turn_end(seq: u64, turn: u64) -> Event {
    ev(
        "turn/end",
        seq,
        1_000,
        &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
    )
}

pub fn step_start(seq: u64, turn: u64, step: u64) -> Event {
    ev(
        "step/start",
        seq,
        1_000,
        &format!(r#"{{"turn":{turn},"step":{step}}}"#),
    )
}

pub fn step_end(seq: u64, turn: u64, step: u64) -> Event {
    ev(
        "step/end",
        seq,
        1_000,
        &format!(r#"{{"turn":{turn},"step":{step}}}"#),
    )
}

fn quote(s: &str) -> String {
    let mut out = String::new();
    session_core::json::write_str(s, &mut out);
    out
}

pub fn text(seq: u64, time: i64, index: u64, text: &str) -> Event {
    delta("text-delta", seq, time, index, text)
}

pub fn reasoning(seq: u64, time: i64, index: u64, text: &str) -> Event {
    delta("reasoning-delta", seq, time, index, text)
}

pub fn delta(kind: &str, seq: u64, time: i64, index: u64, text: &str) -> Event {
    ev(
        "assistant/chunk",
        seq,
        time,
        &format!(
            r#"{{"turn":1,"step":1,"chunk":{{"type":"{kind}","index":{index},"text":{}}}}}"#,
            quote(text)
        ),
    )
}

pub fn tool(seq: u64, time: i64, index: u64, id: &str, name: Option<&str>, args: &str) -> Event {
    let name = name.map_or(String::new(), |n| format!(r#","name":{}"#, quote(n)));
    ev(
        "assistant/chunk",
        seq,
        time,
        &format!(
            r#"{{"turn":1,"step":1,"chunk":{{"type":"tool-call-delta","index":{index},"id":{}{name},"argumentsDelta":{}}}}}"#,
            quote(id),
            quote(args)
        ),
    )
}

pub fn with_ignorable(e: &Event) -> Event {
    Event::from_parts(
        EventParts {
            ty: e.event_type_arc().clone(),
            seq: e.seq(),
            time: e.time(),
            data: e.data().clone(),
            surface_op: e.surface_op_value().cloned(),
            source_event_seqs: e.source_event_seqs_value().cloned(),
            ignorable: true,
        },
        KeyOrder::APPEND,
    )
}

/// Physical rows of a session: `(rowid, seq, type, ignorable, typeof(data))`.
pub fn physical(conn: &Connection, id: &str) -> Vec<(i64, i64, String, Option<i64>, String)> {
    let mut stmt = conn
        .prepare(
            "SELECT rowid, seq, type, ignorable, typeof(data) FROM events \
             WHERE session_id = ?1 ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([id], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// How many physical rows of each packed type a session has: (text, reasoning, tool-call).
pub fn packed_counts(conn: &Connection, id: &str) -> (usize, usize, usize) {
    let rows = physical(conn, id);
    let count = |tag: &str| rows.iter().filter(|r| r.2 == tag && r.3 == Some(0)).count();
    (
        count("text-chunks"),
        count("reasoning-chunks"),
        count("tool-call-chunks"),
    )
}

/// Appends `events` to `backend` in batches of the given sizes (cycled).
pub async fn append_in_batches(
    backend: &dyn session_persist::Backend,
    meta: &SessionHeader,
    events: &[Event],
    sizes: &[usize],
) {
    let mut offset = 0;
    let mut i = 0;
    while offset < events.len() {
        let n = sizes[i % sizes.len()].max(1).min(events.len() - offset);
        backend
            .append_batch(meta, &events[offset..offset + n], offset > 0)
            .await
            .unwrap();
        offset += n;
        i += 1;
    }
}

/// The schema-17 DDL as the reference documents it, with a fixed store id, application id
/// and user version: a database exactly as the reference creates it.
pub const REFERENCE_DDL: &str = "
CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;
CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;
CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
INSERT INTO persistence_state (singleton, store_id) VALUES (1, '3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d');
PRAGMA application_id = 1146308688;
PRAGMA user_version = 17;
";
