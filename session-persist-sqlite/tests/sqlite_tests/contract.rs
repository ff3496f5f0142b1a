//! The persistence contract (persistence §7.1) and the storage-facing coordinator cases
//! (§7.2) run through the real coordinator (`session_persist::Persistence`) over this backend:
//! on a file (reopened as a fresh backend where the reference reloads) and on `:memory:`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::sync::Arc;

use crate::common::{TempDir, backend_at, memory, raw};
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::{Backend, Persistence, PersistenceOptions};
use session_persist_sqlite::rusqlite::params;
use session_store::SessionStore;

fn service(backend: impl Backend + 'static) -> Persistence {
    let store = SessionStore::new(Arc::new(FixedClock::new(1_767_225_600_000)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default()).unwrap()
}

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/proj".into());
    m
}

fn ev(text: &str) -> Event {
    Event::parse(text).unwrap()
}

fn turn(first: u64, turn: u64) -> Vec<Event> {
    let s = first;
    vec![
        ev(&format!(
            r#"{{"type":"turn/start","seq":{s},"time":1,"data":{{"turn":{turn}}}}}"#
        )),
        ev(&format!(
            r#"{{"type":"step/start","seq":{},"time":1,"data":{{"turn":{turn},"step":1}}}}"#,
            s + 1
        )),
        ev(&format!(
            r#"{{"type":"user/message","seq":{},"time":1,"data":{{"id":"u{turn}-{s}","role":"user","content":[{{"type":"text","text":"hi"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#,
            s + 2
        )),
        ev(&format!(
            r#"{{"type":"assistant/chunk","seq":{},"time":2,"data":{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"a"}}}}}}"#,
            s + 3
        )),
        ev(&format!(
            r#"{{"type":"step/end","seq":{},"time":3,"data":{{"turn":{turn},"step":1}}}}"#,
            s + 4
        )),
        ev(&format!(
            r#"{{"type":"turn/end","seq":{},"time":3,"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#,
            s + 5
        )),
    ]
}

fn types(events: impl IntoIterator<Item = Event>) -> Vec<String> {
    events
        .into_iter()
        .map(|e| e.event_type().to_owned())
        .collect()
}

// persistence §7.1 #1: create + append + load returns the metadata and the events.
#[tokio::test]
async fn create_append_load_round_trip() {
    let dir = TempDir::new("contract-1");
    let p = service(backend_at(&dir.db()));
    p.create(&meta("s1")).await.unwrap();
    let events = turn(0, 1);
    p.append("s1", &events).await.unwrap();
    p.dispose().await.unwrap();
    let loaded = service(backend_at(&dir.db())).load("s1").await.unwrap();
    assert_eq!(&*loaded.meta.id, "s1");
    assert_eq!(loaded.meta.cwd.as_deref(), Some("/proj"));
    assert_eq!(loaded.events.to_vec(), events);
}

// persistence §7.1 #3: an interrupted turn is balanced in memory by inspect (revision kept)
// and durably by load (revision changed); appends continue after it.
#[tokio::test]
async fn interrupted_turn_inspect_load_continue() {
    let dir = TempDir::new("contract-3");
    let p = service(backend_at(&dir.db()));
    p.create(&meta("s3")).await.unwrap();
    let mut events = turn(0, 1);
    events.push(ev(
        r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
    ));
    events.push(ev(
        r#"{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}"#,
    ));
    p.append("s3", &events).await.unwrap();
    p.dispose().await.unwrap();
    let fresh = service(backend_at(&dir.db()));
    let before = fresh.list_snapshots(None).await.unwrap()[0]
        .revision
        .clone();
    let inspected = fresh.inspect("s3", None).await.unwrap();
    assert_eq!(inspected.events.len(), 10);
    assert_eq!(
        fresh.list_snapshots(None).await.unwrap()[0].revision,
        before
    );
    let loaded = fresh.load("s3").await.unwrap();
    assert_eq!(
        loaded.events.iter().last().unwrap().to_json(),
        r#"{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#
    );
    assert_ne!(
        fresh.list_snapshots(None).await.unwrap()[0].revision,
        before
    );
    let mut more = turn(10, 3);
    more.truncate(2);
    fresh.append("s3", &more).await.unwrap();
    fresh.dispose().await.unwrap();
    let reloaded = service(backend_at(&dir.db()))
        .inspect("s3", None)
        .await
        .unwrap();
    let seqs: Vec<u64> = reloaded.events.iter().take(12).map(Event::seq).collect();
    assert_eq!(seqs, (0..12).collect::<Vec<_>>());
}

// persistence §7.1 #6, #8, #9, #10, #11 on `:memory:`: lazy creation, readFrom, revisions and
// contiguity.
#[tokio::test]
async fn memory_contract_basics() {
    let p = service(memory());
    p.create(&meta("lazy")).await.unwrap();
    assert!(p.list(None).await.unwrap().is_empty());
    assert!(p.list_snapshots(None).await.unwrap().is_empty());
    p.create(&meta("s")).await.unwrap();
    let events = turn(0, 1);
    p.append("s", &events).await.unwrap();
    let r1 = p.list_snapshots(None).await.unwrap()[0].revision.clone();
    assert_eq!(p.list_snapshots(None).await.unwrap()[0].revision, r1);
    let all = p.read_from("s", 0, None).await.unwrap();
    assert_eq!(all.events, events);
    assert_eq!(all.meta.cwd.as_deref(), Some("/proj"));
    assert_eq!(p.read_from("s", 3, None).await.unwrap().events, events[3..]);
    assert!(p.read_from("s", 6, None).await.unwrap().events.is_empty());
    assert!(p.read_from("s", 60, None).await.unwrap().events.is_empty());
    assert_eq!(
        p.read_from("missing", 0, None)
            .await
            .unwrap_err()
            .to_string(),
        "session \"missing\" not found"
    );
    assert!(p.append("s", &turn(0, 2)).await.is_err());
    let mut gap = turn(6, 2);
    gap.remove(1);
    assert!(p.append("s", &gap).await.is_err());
    p.append("s", &turn(6, 2)).await.unwrap();
    assert_ne!(p.list_snapshots(None).await.unwrap()[0].revision, r1);
}

// persistence §7.2 #5, #6: seedLength and delegationDepth round-trip; an absent
// delegationDepth stays absent (§4.11).
#[tokio::test]
async fn header_fields_round_trip() {
    let dir = TempDir::new("contract-header");
    let p = service(backend_at(&dir.db()));
    let mut m = meta("h");
    m.seed_length = Some(3);
    m.delegation_depth = Some(2);
    m.parent_session = Some("parent".into());
    p.create(&m).await.unwrap();
    p.append("h", &turn(0, 1)).await.unwrap();
    p.create(&meta("plain")).await.unwrap();
    p.append("plain", &turn(0, 1)).await.unwrap();
    p.dispose().await.unwrap();
    let fresh = service(backend_at(&dir.db()));
    assert_eq!(fresh.load("h").await.unwrap().meta, m);
    assert_eq!(
        fresh.load("plain").await.unwrap().meta.delegation_depth,
        None
    );
}

// persistence §7.2 #35, #36, #37: header versions and unknown types are refused through the
// coordinator.
#[tokio::test]
async fn format_refusals_through_the_coordinator() {
    let dir = TempDir::new("contract-format");
    let p = service(backend_at(&dir.db()));
    p.create(&meta("f")).await.unwrap();
    p.append("f", &turn(0, 1)).await.unwrap();
    p.dispose().await.unwrap();
    let conn = raw(&dir.db());
    conn.execute_batch("UPDATE sessions SET version = 99")
        .unwrap();
    let e = service(backend_at(&dir.db())).load("f").await.unwrap_err();
    assert_eq!(e.name(), "SessionFormatUnsupportedError");
    assert!(e.to_string().contains("newer harness"), "{e}");
    conn.execute_batch("UPDATE sessions SET version = -1")
        .unwrap();
    let e = service(backend_at(&dir.db()))
        .inspect("f", None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no upgrade path"), "{e}");
    conn.execute_batch("UPDATE sessions SET version = 0")
        .unwrap();
    conn.execute(
        "INSERT INTO events (session_id, seq, type, time, data) VALUES ('f', 6, 'future/event', 1, '{}')",
        [],
    )
    .unwrap();
    let e = service(backend_at(&dir.db())).load("f").await.unwrap_err();
    assert!(e.to_string().contains("\"future/event\" (seq 6)"), "{e}");
    conn.execute_batch("UPDATE events SET ignorable = 1 WHERE seq = 6")
        .unwrap();
    assert_eq!(
        service(backend_at(&dir.db()))
            .load("f")
            .await
            .unwrap()
            .events
            .len(),
        7
    );
}

// persistence §7.2 #40: a torn tail (a corrupt scalar row at the next seq) is truncated by a
// fresh instance's load, which closes the open turn; appends continue.
#[tokio::test]
async fn torn_tail_through_the_coordinator() {
    let dir = TempDir::new("contract-40");
    let p = service(backend_at(&dir.db()));
    p.create(&meta("t")).await.unwrap();
    let mut events = turn(0, 1);
    events.push(ev(
        r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
    ));
    events.push(ev(
        r#"{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}"#,
    ));
    p.append("t", &events).await.unwrap();
    p.dispose().await.unwrap();
    raw(&dir.db())
        .execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('t', ?1, 'assistant/chunk', 9, '{not valid json')",
            params![8],
        )
        .unwrap();
    let fresh = service(backend_at(&dir.db()));
    let loaded = fresh.load("t").await.unwrap();
    assert_eq!(loaded.events.len(), 10);
    assert_eq!(
        types(loaded.events.iter().skip(8).cloned()),
        ["step/end", "turn/end"]
    );
    fresh.append("t", &turn(10, 3)[..2]).await.unwrap();
    fresh.dispose().await.unwrap();
    let again = service(backend_at(&dir.db())).load("t").await.unwrap();
    let seqs: Vec<u64> = again.events.iter().map(Event::seq).collect();
    assert_eq!(seqs[..12], (0..12).collect::<Vec<_>>());
}
