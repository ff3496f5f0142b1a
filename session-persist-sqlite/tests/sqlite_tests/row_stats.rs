//! `SqliteBackend::row_stats`: what a session's rows hold, checked against the rows themselves.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::*;
use session_core::Event;
use session_persist::Backend;
use session_persist_sqlite::RowStats;

fn log() -> Vec<Event> {
    let mut events = vec![turn_start(0, 1), step_start(1, 1, 1)];
    for seq in 2..52 {
        events.push(text(seq, 1_000 + seq as i64, 0, &format!("t{seq}")));
    }
    // Large data is stored as a zstd BLOB.
    events.push(ev(
        "x-big",
        52,
        1_000,
        &format!(r#"{{"text":"{}"}}"#, "a".repeat(20_000)),
    ));
    events.push(step_end(53, 1, 1));
    events.push(turn_end(54, 1));
    events
}

#[tokio::test]
async fn row_stats_measure_the_rows_of_one_session() {
    let dir = TempDir::new("row-stats");
    let backend = backend_at(&dir.db());
    assert_eq!(backend.row_stats("s").await.unwrap(), None);
    let events = log();
    backend
        .append_batch(&meta("s"), &events, false)
        .await
        .unwrap();
    backend
        .append_batch(&meta("other"), &events[..5], false)
        .await
        .unwrap();
    let stats = backend.row_stats("s").await.unwrap().unwrap();

    let conn = raw(&dir.db());
    let (rows, packed, blobs, data, columns): (i64, i64, i64, i64, i64) = conn
        .query_row(
            "SELECT count(*), sum(ignorable IS 0), sum(typeof(data) = 'blob'), \
             sum(length(CAST(data AS BLOB))), \
             sum(length(CAST(type AS BLOB)) + coalesce(length(source_event_seqs), 0) \
                 + coalesce(length(CAST(surface_op AS BLOB)), 0)) \
             FROM events WHERE session_id = 's'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    let [rows, packed, blobs, data, columns] =
        [rows, packed, blobs, data, columns].map(|n| u64::try_from(n).unwrap());
    // 2 scalar rows, one packed row of 50 deltas, the blob row, 2 scalar rows.
    assert_eq!(rows, 6);
    assert_eq!(packed, 1);
    assert_eq!(blobs, 1);
    assert_eq!(
        stats,
        RowStats {
            rows,
            packed_rows: packed,
            compressed_rows: blobs,
            data_bytes: data,
            text_bytes: stats.text_bytes,
            column_bytes: columns,
        }
    );
    // The blob's JSON text is its 20,000 bytes and more; everything else is stored as text.
    assert!(stats.text_bytes > data + 19_000, "{stats:?}");
    let small = backend.row_stats("other").await.unwrap().unwrap();
    // turn/start, step/start, and three deltas packed into one row.
    assert_eq!((small.rows, small.packed_rows), (3, 1));
    assert_eq!(small.data_bytes, small.text_bytes);
}
