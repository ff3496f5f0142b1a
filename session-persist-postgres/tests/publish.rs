//! `publish_batches` on `PostgreSQL`: a new session and all of its batches in one transaction.
//! The stored rows are the rows the appends store, and a connection cut anywhere leaves the
//! session whole or absent. Each test runs in a schema of its own.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::ops::Range;

use common::{Cut, TestSchema, server_available};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist_postgres::Error;

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/publish".into());
    m
}

/// `batches` batches cycling through 2 text deltas (two scalar rows: a run of 2 is not packed),
/// 4 text deltas (one packed row) and 2 scalar events. Packing is batch-local, so these
/// batches make 5 rows a cycle, where the same events as one batch would make 3 (the 6 deltas
/// one run); a few thousand batches span several insert groups (a group closes at 1,024
/// rows). Returns the events and their layout.
fn session(batches: usize) -> (Vec<Event>, Vec<Range<usize>>) {
    tagged_session(batches, "b")
}

/// [`session`] with every text starting with `tag`.
fn tagged_session(batches: usize, tag: &str) -> (Vec<Event>, Vec<Range<usize>>) {
    let mut events = Vec::new();
    let mut layout = Vec::new();
    for b in 0..batches {
        let start = events.len();
        let (ty, len) = match b % 3 {
            0 => ("assistant/chunk", 2),
            1 => ("assistant/chunk", 4),
            _ => ("note/marker", 2),
        };
        for i in 0..len {
            let seq = events.len() as u64;
            let text = if b % 3 < 2 {
                format!(
                    r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{tag}{b}-{i} "}}}}"#
                )
            } else {
                format!(r#"{{"turn":1,"note":"{tag}{b}-{i}"}}"#)
            };
            let data = Value::parse(&text).unwrap();
            events.push(Event::appended(
                ty,
                seq,
                1_000 + seq as i64,
                data,
                None,
                None,
            ));
        }
        layout.push(start..events.len());
    }
    (events, layout)
}

fn lines(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// Every column of a session's event rows, and its session row's tail, as text.
async fn stored_rows(schema: &TestSchema, id: &str) -> (Vec<String>, String) {
    let client = schema.client().await;
    let rows = client
        .query(
            "SELECT concat_ws('|', seq, last_seq, type, time, packed, line_text, \
             encode(line_zstd, 'hex'), surface_op, source_event_seqs, ignorable) \
             FROM events WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await
        .unwrap();
    let tail: String = client
        .query_one(
            "SELECT concat_ws('|', next_seq, last_batch_seq, lease_epoch) FROM sessions \
             WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    (rows.iter().map(|r| r.get(0)).collect(), tail)
}

/// Published at once, a session is stored row for row as its batches appended one by one,
/// across several insert groups, and its session row records the same tail.
#[tokio::test]
async fn a_publication_stores_the_rows_its_appends_store() {
    if !server_available("a_publication_stores_the_rows_its_appends_store") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let (events, layout) = session(3_001);
    for (k, batch) in layout.iter().enumerate() {
        backend
            .append(&meta("appended"), &events[batch.clone()], k > 0)
            .await
            .unwrap();
    }
    backend
        .publish_batches(&meta("published"), events.clone(), &layout)
        .await
        .unwrap();
    let (appended, appended_tail) = stored_rows(&schema, "appended").await;
    let (published, published_tail) = stored_rows(&schema, "published").await;
    // 1,000 cycles of 5 rows, and the first batch of another.
    assert_eq!(appended.len(), 5_002, "rows appended");
    assert_eq!(published.len(), appended.len(), "row counts differ");
    for (i, (p, a)) in published.iter().zip(&appended).enumerate() {
        assert_eq!(p, a, "row {i} differs");
    }
    // The next seq, the last batch's first seq and the lease epoch (both writers took their
    // lease once, at epoch 1).
    assert_eq!(published_tail, appended_tail);
    assert_eq!(
        published_tail,
        format!("{}|{}|1", events.len(), layout[3_000].start)
    );
    let stored = backend.load("published").await.unwrap().unwrap().events;
    assert_eq!(lines(&stored), lines(&events));
    // The publisher holds the lease and appends on.
    let (more, _) = session(1);
    let next: Vec<Event> = more
        .iter()
        .map(|e| {
            Event::appended(
                e.event_type(),
                events.len() as u64 + e.seq(),
                e.time(),
                e.data().clone(),
                None,
                None,
            )
        })
        .collect();
    backend
        .append(&meta("published"), &next, true)
        .await
        .unwrap();
    // The comparison sees the layout: the same events published as one batch pack into
    // fewer rows.
    let whole = 0..events.len();
    backend
        .publish(&meta("one-batch"), &events, std::slice::from_ref(&whole))
        .await
        .unwrap();
    assert_eq!(stored_rows(&schema, "one-batch").await.0.len(), 3_002);
    // A bad layout is refused before anything is written.
    let bad = backend
        .publish(&meta("bad"), &events, &[0..2, 3..events.len()])
        .await;
    assert!(matches!(bad, Err(Error::InvalidBatches { .. })), "{bad:?}");
    assert!(backend.load("bad").await.unwrap().is_none());
}

/// The connection is cut right after the publication's COMMIT reaches the server: every row
/// group is re-read, the session is found whole, and the publication succeeds once.
#[tokio::test]
async fn a_publication_whose_commit_answer_is_lost_resolves_as_committed() {
    if !server_available("a_publication_whose_commit_answer_is_lost_resolves_as_committed") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let (events, layout) = session(3_001);
    proxy.arm(Cut::AfterCommit);
    backend
        .publish_batches(&meta("cut-after"), events.clone(), &layout)
        .await
        .unwrap();
    assert_eq!(proxy.cuts(), 1, "the publication's commit was cut");
    let stored = backend.load("cut-after").await.unwrap().unwrap().events;
    assert_eq!(lines(&stored), lines(&events));
    assert!(
        backend.held_epoch("cut-after").is_some(),
        "the lease is held"
    );
}

/// The connection is cut instead of sending the COMMIT: the server rolls back, the session is
/// absent, and the single retry publishes it once.
#[tokio::test]
async fn a_publication_whose_commit_is_never_sent_is_retried_once() {
    if !server_available("a_publication_whose_commit_is_never_sent_is_retried_once") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let (events, layout) = session(41);
    proxy.arm(Cut::BeforeCommit);
    backend
        .publish_batches(&meta("cut-before"), events.clone(), &layout)
        .await
        .unwrap();
    assert_eq!(proxy.cuts(), 1);
    let stored = backend.load("cut-before").await.unwrap().unwrap().events;
    assert_eq!(lines(&stored), lines(&events));
}

/// Cuts at byte offsets all over a publication, and at each of the last 12 bytes a measured
/// publication sent (its `COMMIT`) and just past them: each one either succeeds and stores the
/// whole session, or fails with a lost connection and stores nothing of it.
#[tokio::test]
async fn a_publication_cut_at_any_byte_is_whole_or_absent() {
    if !server_available("a_publication_cut_at_any_byte_is_whole_or_absent") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let (events, layout) = session(2_801);
    // The first write creates the schema; measure the second. Every publication has an id of
    // the same length and starts on a pooled connection that is already open (a read opens
    // one after a cut), so that each sends the same bytes.
    backend
        .publish(&meta("warm-up"), &events, &layout)
        .await
        .unwrap();
    backend.load("warm-up").await.unwrap();
    proxy.arm(Cut::Never);
    backend
        .publish(&meta("measure"), &events, &layout)
        .await
        .unwrap();
    let span = proxy.forwarded();
    assert!(span > 10_000, "a publication sent only {span} bytes");
    // The simple-query `COMMIT` message is the last 12 bytes the client sends.
    let spread = (0..30u64).map(|k| k * 104_729 % span);
    let offsets: Vec<u64> = spread.chain(span - 12..=span + 1).collect();
    let (mut whole, mut absent) = (0, 0);
    for (round, &offset) in offsets.iter().enumerate() {
        let id = format!("cut-{round:03}");
        backend.load("warm-up").await.unwrap();
        proxy.arm(Cut::AfterBytes(offset));
        let published = backend.publish(&meta(&id), &events, &layout).await;
        proxy.arm(Cut::Never);
        let stored = backend.load(&id).await.unwrap();
        match published {
            Ok(()) => {
                let stored =
                    stored.unwrap_or_else(|| panic!("cut at byte {offset}: published, absent"));
                assert_eq!(
                    lines(&stored.events),
                    lines(&events),
                    "cut at byte {offset}"
                );
                whole += 1;
            }
            Err(e) => {
                assert!(e.is_connection_loss(), "cut at byte {offset}: {e}");
                assert!(stored.is_none(), "cut at byte {offset}: failed, yet stored");
                absent += 1;
            }
        }
    }
    // The spread cuts all land before the COMMIT; around its bytes both outcomes occur (a
    // publication's byte count varies by a few bytes, so exactly where is not asserted).
    assert!(
        whole >= 1 && absent >= 30,
        "the cuts did not cover both outcomes ({whole} whole, {absent} absent, span {span})"
    );
}

/// Writers racing to publish the same new session, with and without advisory locks: exactly
/// one publication commits, the others are refused as already materialized, and the stored
/// session is the winner's, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_publications_of_one_id_commit_exactly_one() {
    if !server_available("racing_publications_of_one_id_commit_exactly_one") {
        return;
    }
    for advisory_locks in [true, false] {
        let schema = TestSchema::new();
        let options = schema.options().advisory_locks(advisory_locks);
        let mut writers = Vec::new();
        for _ in 0..4 {
            writers.push(schema.backend_with(options.clone()).await);
        }
        for round in 0..8_u32 {
            let id = format!("race-{round}");
            let tasks: Vec<_> = writers
                .iter()
                .enumerate()
                .map(|(w, backend)| {
                    let backend = backend.clone();
                    let m = meta(&id);
                    // Several insert groups, so that the race spans many statements.
                    let (events, layout) = tagged_session(1_501, &format!("w{w}-"));
                    tokio::spawn(async move {
                        let outcome = backend.publish(&m, &events, &layout).await;
                        (events, outcome)
                    })
                })
                .collect();
            let mut winners = Vec::new();
            for task in tasks {
                match task.await.unwrap() {
                    (events, Ok(())) => winners.push(events),
                    (_, Err(Error::AlreadyMaterialized { .. })) => {}
                    (_, Err(e)) => panic!("round {round}: unexpected error {e}"),
                }
            }
            assert_eq!(
                winners.len(),
                1,
                "round {round}, advisory locks {advisory_locks}"
            );
            let stored = writers[0].load(&id).await.unwrap().unwrap().events;
            assert_eq!(
                lines(&stored),
                lines(&winners[0]),
                "round {round}: the stored session is not the winner's"
            );
        }
    }
}
