//! Database compatibility with the reference, in both directions: a database built by hand
//! from the documented DDL and row codec (raw SQL, as the reference writes it) loads with the
//! expected events, and a database this crate writes reads back with plain SQL as the
//! documented schema says.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use session_core::Event;
use session_persist::Backend;
use session_persist_sqlite::rusqlite::{params, types::Value as SqlValue};
use session_persist_sqlite::schema::normalize_sql;
use session_persist_sqlite::uuid::is_uuid;

type SessionColumns = (
    String,
    i64,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    String,
    i64,
);

const INCARNATION: &str = "0c7d5e1a-2b3f-4c6d-8e9f-a1b2c3d4e5f6";

fn event(text: &str) -> Event {
    Event::parse(text).unwrap()
}

fn reference_log() -> Vec<Event> {
    [
        r#"{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":100,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/chunk","seq":2,"time":100,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"He"}}}"#,
        r#"{"type":"assistant/chunk","seq":3,"time":105,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"l"}}}"#,
        r#"{"type":"assistant/chunk","seq":4,"time":103,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"lo"}}}"#,
        r#"{"type":"assistant/chunk","seq":5,"time":110,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"{"}}}"#,
        r#"{"type":"assistant/chunk","seq":6,"time":110,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"\"p\""}}}"#,
        r#"{"type":"assistant/chunk","seq":7,"time":111,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"}"}}}"#,
        r#"{"type":"assistant/message","seq":8,"time":120,"data":{"turn":1,"step":1,"message":{"id":"m1","role":"assistant","content":[]}},"sourceEventSeqs":[],"surfaceOp":"append"}"#,
        r#"{"type":"plugin/note","seq":9,"time":121,"data":null,"ignorable":true}"#,
        r#"{"type":"step/end","seq":10,"time":130,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":11,"time":130,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]
    .iter()
    .map(|t| event(t))
    .collect()
}

fn big_result_json() -> String {
    format!(
        r#"{{"turn":1,"step":1,"output":"{}"}}"#,
        "0123456789abcdef".repeat(400)
    )
}

/// Writes the reference log with raw SQL, row by row, as the reference's writer lays it out.
fn write_by_hand(path: &std::path::Path) {
    let conn = raw(path);
    conn.execute_batch(REFERENCE_DDL).unwrap();
    conn.execute(
        "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, \
         delegation_depth, agent_preset, incarnation, revision) \
         VALUES ('ref', 0, 1700000000000, '/work/ref', NULL, NULL, NULL, NULL, NULL, ?1, 3)",
        [INCARNATION],
    )
    .unwrap();
    let insert = |seq: i64,
                  ty: &str,
                  time: i64,
                  data: SqlValue,
                  sources: Option<Vec<u8>>,
                  surface: Option<&str>,
                  ignorable: Option<i64>| {
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) \
             VALUES ('ref', ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![seq, ty, time, data, sources, surface, ignorable],
        )
        .unwrap();
    };
    let text = |s: &str| SqlValue::Text(s.to_owned());
    insert(
        0,
        "turn/start",
        100,
        text(r#"{"turn":1}"#),
        None,
        None,
        None,
    );
    insert(
        1,
        "step/start",
        100,
        text(r#"{"turn":1,"step":1}"#),
        None,
        None,
        None,
    );
    insert(
        2,
        "text-chunks",
        100,
        text(r#"{"turn":1,"step":1,"index":0,"dt":[5,-2],"texts":["He","l","lo"]}"#),
        None,
        None,
        Some(0),
    );
    insert(
        5,
        "tool-call-chunks",
        110,
        text(
            r#"{"turn":1,"step":1,"index":1,"dt":[0,1],"id":"c1","name":"read","args":["{","\"p\"","}"]}"#,
        ),
        None,
        None,
        Some(0),
    );
    insert(
        8,
        "assistant/message",
        120,
        text(r#"{"turn":1,"step":1,"message":{"id":"m1","role":"assistant","content":[]}}"#),
        Some(vec![]),
        Some("\"append\""),
        None,
    );
    insert(9, "plugin/note", 121, text("null"), None, None, Some(1));
    insert(
        10,
        "step/end",
        130,
        text(r#"{"turn":1,"step":1}"#),
        None,
        None,
        None,
    );
    insert(
        11,
        "turn/end",
        130,
        text(r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        None,
        None,
        None,
    );
    // A second turn whose tool result is large: zstd level 3, no checksum; provenance [8, 5]
    // is varint 8 then ZigZag(5 − 8) = 5.
    let compressed = zstd::bulk::compress(big_result_json().as_bytes(), 3).unwrap();
    insert(
        12,
        "turn/start",
        200,
        text(r#"{"turn":2}"#),
        None,
        None,
        None,
    );
    insert(
        13,
        "tool/result",
        201,
        SqlValue::Blob(compressed),
        Some(vec![8, 5]),
        Some("\"append\""),
        None,
    );
    drop(conn);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn full_log() -> Vec<Event> {
    let mut log = reference_log();
    log.push(event(
        r#"{"type":"turn/start","seq":12,"time":200,"data":{"turn":2}}"#,
    ));
    log.push(event(&format!(
        r#"{{"type":"tool/result","seq":13,"time":201,"data":{},"sourceEventSeqs":[8,5],"surfaceOp":"append"}}"#,
        big_result_json()
    )));
    log
}

// persistence §4.3–§4.6: a database written by hand from the documented DDL and row codec
// loads with exactly the reference's events, seeks, and accepts appends.
#[tokio::test]
async fn hand_built_reference_database_loads() {
    let dir = TempDir::new("compat-in");
    write_by_hand(&dir.db());
    let backend = backend_at(&dir.db());
    let stored = backend.load_stored("ref").await.unwrap().unwrap();
    let log = full_log();
    assert_eq!(stored.events, log);
    assert!(stored.torn.is_none());
    assert_eq!(stored.meta.cwd.as_deref(), Some("/work/ref"));
    assert_eq!(stored.meta.delegation_depth, None);
    let identity = backend.store_identity().await.unwrap();
    assert!(identity.ends_with(":store:3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"));
    assert_eq!(
        stored.revision.as_str(),
        format!("{identity}:incarnation:{INCARNATION}:revision:3")
    );
    for from in [0u64, 3, 4, 6, 9, 13, 14] {
        let suffix = backend
            .load_stored_from("ref", from)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(suffix.events, log[from as usize..], "from {from}");
    }
    // Events serialize exactly as the reference's JSONL writer would write them.
    assert_eq!(stored.events[8].to_json(), reference_log()[8].to_json());
    let m = stored.meta.clone();
    backend
        .append_batch(&m, &[turn_end(14, 2)], true)
        .await
        .unwrap();
    let after = backend.load_stored("ref").await.unwrap().unwrap();
    assert_eq!(after.events.len(), 15);
    assert!(after.revision.as_str().ends_with(":revision:4"));
    // A stale writer is still refused against the hand-written tail.
    assert_eq!(
        backend
            .append_batch(&m, &[turn_end(14, 2)], true)
            .await
            .unwrap_err()
            .to_string(),
        "session ref append starts at seq 14, stored next seq is 15"
    );
}

const EVENTS_SQL: &str = "CREATE TABLE events ( session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT, ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)), PRIMARY KEY (session_id, seq) ) STRICT";
const STATE_SQL: &str = "CREATE TABLE persistence_state ( singleton INTEGER PRIMARY KEY CHECK (singleton = 1), store_id TEXT NOT NULL ) STRICT";
const SESSIONS_SQL: &str = "CREATE TABLE sessions ( id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER, origin TEXT, delegation_depth INTEGER, agent_preset TEXT, incarnation TEXT NOT NULL, revision INTEGER NOT NULL ) STRICT";

type Row = (
    i64,
    String,
    i64,
    SqlValue,
    Option<Vec<u8>>,
    Option<String>,
    Option<i64>,
);

// persistence §4.3, §4.4: a database this crate writes reads back with plain SQL exactly as the
// documented schema and codec say (token-identical DDL, DSHP, version 17, row layout).
#[tokio::test]
async fn written_database_reads_back_with_plain_sql() {
    let dir = TempDir::new("compat-out");
    let backend = backend_at(&dir.db());
    let log = full_log();
    let mut m = session_core::SessionHeader::new("ref", 1_700_000_000_000);
    m.cwd = Some("/work/ref".into());
    backend.append_batch(&m, &log[..12], false).await.unwrap();
    backend.append_batch(&m, &log[12..], true).await.unwrap();

    let conn = raw(&dir.db());
    let int = |q: &str| -> i64 { conn.query_row(q, [], |r| r.get(0)).unwrap() };
    assert_eq!(int("PRAGMA application_id"), 1_146_308_688);
    assert_eq!(int("PRAGMA user_version"), 17);
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name")
        .unwrap();
    let objects: Vec<(String, String, String, String)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                normalize_sql(&r.get::<_, String>(3)?),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        objects,
        [
            (
                "table".into(),
                "events".into(),
                "events".into(),
                EVENTS_SQL.into()
            ),
            (
                "table".into(),
                "persistence_state".into(),
                "persistence_state".into(),
                STATE_SQL.into()
            ),
            (
                "table".into(),
                "sessions".into(),
                "sessions".into(),
                SESSIONS_SQL.into()
            ),
        ]
    );
    let store_id: String = conn
        .query_row(
            "SELECT store_id FROM persistence_state WHERE singleton = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(is_uuid(&store_id) && &store_id[14..15] == "4");

    let session: SessionColumns = conn
        .query_row(
            "SELECT id, version, created_at, cwd, delegation_depth, origin, incarnation, revision FROM sessions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
        )
        .unwrap();
    assert_eq!(
        (
            session.0.as_str(),
            session.1,
            session.2,
            session.3.as_deref(),
            session.4,
            session.5
        ),
        ("ref", 0, 1_700_000_000_000, Some("/work/ref"), None, None)
    );
    assert!(is_uuid(&session.6));
    assert_eq!(session.7, 2);

    let mut stmt = conn
        .prepare("SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable FROM events WHERE session_id = 'ref' ORDER BY seq")
        .unwrap();
    let rows: Vec<Row> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let text = |s: &str| SqlValue::Text(s.to_owned());
    let expected: Vec<Row> = vec![
        (
            0,
            "turn/start".into(),
            100,
            text(r#"{"turn":1}"#),
            None,
            None,
            None,
        ),
        (
            1,
            "step/start".into(),
            100,
            text(r#"{"turn":1,"step":1}"#),
            None,
            None,
            None,
        ),
        (
            2,
            "text-chunks".into(),
            100,
            text(r#"{"turn":1,"step":1,"index":0,"dt":[5,-2],"texts":["He","l","lo"]}"#),
            None,
            None,
            Some(0),
        ),
        (
            5,
            "tool-call-chunks".into(),
            110,
            text(
                r#"{"turn":1,"step":1,"index":1,"dt":[0,1],"id":"c1","name":"read","args":["{","\"p\"","}"]}"#,
            ),
            None,
            None,
            Some(0),
        ),
        (
            8,
            "assistant/message".into(),
            120,
            text(r#"{"turn":1,"step":1,"message":{"id":"m1","role":"assistant","content":[]}}"#),
            Some(vec![]),
            Some("\"append\"".into()),
            None,
        ),
        (
            9,
            "plugin/note".into(),
            121,
            text("null"),
            None,
            None,
            Some(1),
        ),
        (
            10,
            "step/end".into(),
            130,
            text(r#"{"turn":1,"step":1}"#),
            None,
            None,
            None,
        ),
        (
            11,
            "turn/end".into(),
            130,
            text(r#"{"turn":1,"reason":{"kind":"completed"}}"#),
            None,
            None,
            None,
        ),
        (
            12,
            "turn/start".into(),
            200,
            text(r#"{"turn":2}"#),
            None,
            None,
            None,
        ),
    ];
    assert_eq!(&rows[..9], &expected[..]);
    let last = &rows[9];
    assert_eq!((last.0, last.1.as_str(), last.2), (13, "tool/result", 201));
    assert_eq!(last.4.as_deref(), Some(&[8u8, 5][..]));
    assert_eq!(last.5.as_deref(), Some("\"append\""));
    assert_eq!(last.6, None);
    let SqlValue::Blob(frame) = &last.3 else {
        panic!("large data must be a zstd BLOB");
    };
    assert_eq!(&frame[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    // No content checksum: the frame descriptor's checksum bit is clear.
    assert_eq!(frame[4] & 0x04, 0);
    assert_eq!(
        zstd::stream::decode_all(&frame[..]).unwrap(),
        big_result_json().as_bytes()
    );
    assert!(frame.len() < big_result_json().len());
}
