//! The reference's `differential.spec.ts` (persistence §4.10, §7.12): the same logical log,
//! appended in the same batch partitions, reads back identically from this backend and from the
//! JSONL backend with zstd.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::*;
use proptest::prelude::*;
use session_core::json::MAX_SAFE_INTEGER;
use session_core::{Event, SessionHeader};
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig};
use session_persist_sqlite::SqliteBackend;

struct Pair {
    _dir: TempDir,
    root: std::path::PathBuf,
    db: std::path::PathBuf,
    jsonl: JsonlBackend,
    sqlite: SqliteBackend,
}

impl Pair {
    fn new() -> Pair {
        let dir = TempDir::new("differential");
        let root = dir.path().join("jsonl");
        let db = dir.path().join("db").join("sessions.db");
        Pair {
            jsonl: jsonl_at(&root),
            sqlite: backend_at(&db),
            root,
            db,
            _dir: dir,
        }
    }

    fn reopen(&self) -> (JsonlBackend, SqliteBackend) {
        (jsonl_at(&self.root), backend_at(&self.db))
    }
}

fn jsonl_at(root: &std::path::Path) -> JsonlBackend {
    JsonlBackend::open(JsonlConfig::new(root).compression(Compression::Zstd)).unwrap()
}

fn header() -> SessionHeader {
    let mut m = SessionHeader::new("differential", 1_700_000_000_000);
    m.cwd = Some("/work/differential".into());
    m.delegation_depth = Some(0);
    m
}

/// Appends `events` to both backends in `sizes` (cycled) and checks every read agrees.
async fn check_same(events: &[Event], sizes: &[usize]) -> Pair {
    let pair = Pair::new();
    let m = header();
    append_in_batches(&pair.jsonl, &m, events, sizes).await;
    append_in_batches(&pair.sqlite, &m, events, sizes).await;
    compare(&pair.jsonl, &pair.sqlite, events).await;
    let (jsonl, sqlite) = pair.reopen();
    compare(&jsonl, &sqlite, events).await;
    pair
}

async fn compare(jsonl: &JsonlBackend, sqlite: &SqliteBackend, events: &[Event]) {
    let m = header();
    let before_j = jsonl.list_snapshots().await.unwrap();
    let before_s = sqlite.list_snapshots().await.unwrap();
    let j = jsonl.load_stored(&m.id).await.unwrap().unwrap();
    let s = sqlite.load_stored(&m.id).await.unwrap().unwrap();
    assert_eq!(j.meta, m);
    assert_eq!(s.meta, j.meta);
    assert_eq!(s.header_value, j.header_value);
    assert_eq!(j.events, events);
    assert_eq!(s.events, j.events);
    assert!(j.torn.is_none() && s.torn.is_none());
    assert_eq!(jsonl.list().await.unwrap(), std::slice::from_ref(&m));
    assert_eq!(sqlite.list().await.unwrap(), std::slice::from_ref(&m));
    // JSONL cannot seek: its readFrom is the prefix filtered by seq.
    for from in 0..=events.len() as u64 + 1 {
        let suffix = sqlite.load_stored_from(&m.id, from).await.unwrap().unwrap();
        let expected: Vec<Event> = j
            .events
            .iter()
            .filter(|e| e.seq() >= from)
            .cloned()
            .collect();
        assert_eq!(suffix.events, expected, "from {from}");
        assert_eq!(suffix.meta, m);
    }
    assert_eq!(jsonl.list_snapshots().await.unwrap(), before_j);
    assert_eq!(sqlite.list_snapshots().await.unwrap(), before_s);
}

fn chunk(seq: u64, time: i64, chunk: &str) -> Event {
    ev(
        "assistant/chunk",
        seq,
        time,
        &format!(r#"{{"turn":1,"step":1,"chunk":{chunk}}}"#),
    )
}

/// The packing matrix: every packed kind, a negative-gap run, runs below the minimum, an
/// ignorable delta and non-delta chunks.
fn packing_matrix() -> Vec<Event> {
    let mut events = vec![turn_start(0, 1), step_start(1, 1, 1)];
    let mut seq = 2;
    let mut push = |e: &dyn Fn(u64) -> Event| {
        events.push(e(seq));
        seq += 1;
    };
    for i in 0..5 {
        push(&|s| text(s, 1_000 + i, 0, &format!("text {i}")));
    }
    for i in 0..4 {
        push(&|s| reasoning(s, 990 - i, 1, &format!("thought {i}")));
    }
    for i in 0..4 {
        push(&|s| {
            tool(
                s,
                1_100 + i,
                2,
                "call-named",
                Some("bash"),
                &format!("{{{i}"),
            )
        });
    }
    for i in 0..3 {
        push(&|s| tool(s, 1_200 + i, 3, "call-anon", None, &format!("}}{i}")));
    }
    push(&|s| chunk(s, 1_300, r#"{"type":"text-start","index":4}"#));
    push(&|s| text(s, 1_301, 4, "short"));
    push(&|s| text(s, 1_302, 4, "run"));
    push(&|s| with_ignorable(&text(s, 1_303, 4, "ignorable")));
    push(&|s| chunk(s, 1_304, r#"{"type":"finish","reason":"stop"}"#));
    events
}

// persistence §7.12 differential #2: the packing-matrix log matches JSONL with zstd for three
// partitions, with exact physical row-type counts.
#[tokio::test]
async fn packing_matrix_matches_jsonl() {
    let events = packing_matrix();
    for (sizes, expected) in [
        (vec![events.len()], (1, 1, 2)),
        (vec![1], (0, 0, 0)),
        (vec![2, 1, 5, 3], (1, 1, 1)),
    ] {
        let pair = check_same(&events, &sizes).await;
        let conn = raw(&pair.db);
        assert_eq!(packed_counts(&conn, "differential"), expected, "{sizes:?}");
        let ignorable: i64 = conn
            .query_row("SELECT count(*) FROM events WHERE ignorable = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(ignorable, 1);
    }
}

// persistence §7.12 differential #1 (SQLite only): ignorable events named like a storage tag
// stay scalar rows (no packed types, 3 ignorable rows).
#[tokio::test]
async fn ignorable_tag_named_events_are_scalar_rows() {
    let dir = TempDir::new("tag-named");
    let backend = backend_at(&dir.db());
    let m = header();
    let events: Vec<Event> = ["text-chunks", "reasoning-chunks", "tool-call-chunks"]
        .iter()
        .enumerate()
        .map(|(i, tag)| with_ignorable(&ev(tag, i as u64, 5, r#"{"plugin":true}"#)))
        .collect();
    backend.append_batch(&m, &events, false).await.unwrap();
    let conn = raw(&dir.db());
    assert_eq!(packed_counts(&conn, "differential"), (0, 0, 0));
    let rows = physical(&conn, "differential");
    assert_eq!(rows.iter().filter(|r| r.3 == Some(1)).count(), 3);
    assert_eq!(
        backend
            .load_stored("differential")
            .await
            .unwrap()
            .unwrap()
            .events,
        events
    );
    for from in 0..4 {
        assert_eq!(
            backend
                .load_stored_from("differential", from)
                .await
                .unwrap()
                .unwrap()
                .events,
            events[from as usize..]
        );
    }
}

#[derive(Debug, Clone)]
enum Entry {
    Text(u8, String),
    Reasoning(u8, String),
    Tool(u8, bool, String),
    BlockStart(u8),
    Finish,
}

fn entry() -> impl Strategy<Value = Entry> {
    let text = "[a-z\"\\\\é\n]{0,4}";
    prop_oneof![
        (0u8..2, text).prop_map(|(i, t)| Entry::Text(i, t)),
        (0u8..2, text).prop_map(|(i, t)| Entry::Reasoning(i, t)),
        (0u8..2, any::<bool>(), text).prop_map(|(i, n, t)| Entry::Tool(i, n, t)),
        (0u8..2).prop_map(Entry::BlockStart),
        Just(Entry::Finish),
    ]
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..10_000, -MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER]
}

fn build(entries: &[(Entry, i64, bool)]) -> Vec<Event> {
    entries
        .iter()
        .enumerate()
        .map(|(seq, (entry, time, ignorable))| {
            let seq = seq as u64;
            let e = match entry {
                Entry::Text(i, t) => text(seq, *time, u64::from(*i), t),
                Entry::Reasoning(i, t) => reasoning(seq, *time, u64::from(*i), t),
                Entry::Tool(i, named, t) => tool(
                    seq,
                    *time,
                    u64::from(*i),
                    "call",
                    named.then_some("read"),
                    t,
                ),
                Entry::BlockStart(i) => chunk(
                    seq,
                    *time,
                    &format!(r#"{{"type":"text-start","index":{i}}}"#),
                ),
                Entry::Finish => chunk(seq, *time, r#"{"type":"finish","reason":"stop"}"#),
            };
            if *ignorable { with_ignorable(&e) } else { e }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5A17E), ..ProptestConfig::default() })]

    // persistence §7.12 differential #3: random chunk logs in random batch partitions read
    // back identically from both backends (100 runs, seed 0x5A17E).
    #[test]
    fn random_logs_match_jsonl(
        entries in prop::collection::vec((entry(), time(), prop::bool::weighted(0.1)), 1..=30),
        sizes in prop::collection::vec(1usize..=8, 1..=8),
    ) {
        let events = build(&entries);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            check_same(&events, &sizes).await;
        });
    }
}
