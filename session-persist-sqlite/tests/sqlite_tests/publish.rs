//! `publish_batches` on `SQLite`: a new session and all of its batches in one transaction, stored
//! row for row as the same batches appended one by one.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::ops::Range;

use crate::common::*;
use session_core::Event;
use session_persist::Backend;

/// `batches` batches cycling through 2 text deltas (two scalar rows: a run of 2 is not packed),
/// 4 text deltas (one packed row) and 2 scalar events. Packing is batch-local, so appended
/// or published in these batches the deltas make 2 + 1 rows a cycle; packed as one batch, the
/// 6 deltas of a cycle would be one run, one row.
fn session(batches: usize) -> (Vec<Event>, Vec<Range<usize>>) {
    let mut events = Vec::new();
    let mut layout = Vec::new();
    for b in 0..batches {
        let start = events.len();
        for i in 0..if b % 3 == 1 { 4 } else { 2 } {
            let seq = events.len() as u64;
            let time = 1_000 + seq as i64;
            events.push(if b % 3 == 2 {
                ev(
                    "note/marker",
                    seq,
                    time,
                    &format!(r#"{{"turn":1,"note":"b{b}-{i}"}}"#),
                )
            } else {
                text(seq, time, 0, &format!("b{b}-{i} "))
            });
        }
        layout.push(start..events.len());
    }
    (events, layout)
}

/// Every column of a session's event rows, as `SQLite` quotes them.
async fn rows(backend: &session_persist_sqlite::SqliteBackend, id: &str) -> Vec<String> {
    let id = id.to_owned();
    backend
        .with_connection(move |c| {
            let mut s = c
                .prepare(
                    "SELECT seq || '|' || type || '|' || time || '|' || quote(data) || '|' || \
                     quote(source_event_seqs) || '|' || quote(surface_op) || '|' || \
                     quote(ignorable) FROM events WHERE session_id = ?1 ORDER BY seq",
                )
                .unwrap();
            s.query_map([&id], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_publication_stores_the_rows_its_appends_store() {
    let backend = memory();
    let (events, layout) = session(300);
    for (k, batch) in layout.iter().enumerate() {
        backend
            .append_batch(&meta("appended"), &events[batch.clone()], k > 0)
            .await
            .unwrap();
    }
    backend
        .publish_batches(&meta("published"), events.clone(), &layout)
        .await
        .unwrap();
    let appended = rows(&backend, "appended").await;
    let published = rows(&backend, "published").await;
    // 100 cycles of 2 + 1 delta rows and 2 scalar rows.
    assert_eq!(appended.len(), 500);
    assert_eq!(published, appended);
    let stored = backend.load_stored("published").await.unwrap().unwrap();
    assert_eq!(stored.events, events);
    // The comparison sees the layout: the same events published as one batch pack into fewer
    // rows.
    let whole = 0..events.len();
    backend
        .publish_batches(
            &meta("one-batch"),
            events.clone(),
            std::slice::from_ref(&whole),
        )
        .await
        .unwrap();
    assert_eq!(rows(&backend, "one-batch").await.len(), 300);
}
