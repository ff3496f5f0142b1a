//! Paged reads of a stored log (`Backend::load_stored_page`): the pages of any size give
//! exactly the stored prefix, packed rows split across pages included; a torn tail ends the
//! last page; committed corruption fails the page that reaches it.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use session_core::Event;
use session_persist::{Backend, TornMarker};
use session_persist_sqlite::rusqlite::params;

use crate::common::*;

/// Turns of one step each with a run of text deltas (packed into rows), appended one turn
/// per batch.
fn log() -> Vec<Event> {
    let mut out = Vec::new();
    for turn in 1..=5u64 {
        let seq = out.len() as u64;
        out.push(turn_start(seq, turn));
        out.push(step_start(seq + 1, turn, 1));
        for k in 0..37u64 {
            let seq = out.len() as u64;
            out.push(text(seq, 1_000, 0, &format!("w{turn}.{k} ")));
        }
        let seq = out.len() as u64;
        out.push(step_end(seq, turn, 1));
        out.push(turn_end(seq + 1, turn));
    }
    out
}

async fn store(backend: &dyn Backend, events: &[Event]) {
    let m = meta("s");
    let mut first = 0;
    for i in 0..events.len() {
        if i + 1 == events.len() || events[i + 1].event_type() == "turn/start" {
            backend
                .append_batch(&m, &events[first..=i], first > 0)
                .await
                .unwrap();
            first = i + 1;
        }
    }
}

/// Every page from seq 0, `max` events at a time, until a short page.
async fn pages(backend: &dyn Backend, max: usize) -> Vec<session_persist::StoredPage> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let page = backend
            .load_stored_page("s", from, max)
            .await
            .unwrap()
            .unwrap();
        let n = page.events.len();
        let torn = page.torn;
        out.push(page);
        if n < max || torn {
            return out;
        }
        from += n as u64;
    }
}

#[tokio::test]
async fn pages_of_any_size_give_the_stored_prefix() {
    let backend = memory();
    let events = log();
    store(&backend, &events).await;
    let (packed, _, _) = backend
        .with_connection(|c| packed_counts(c, "s"))
        .await
        .unwrap();
    assert!(packed >= 5, "{packed} packed rows");
    let whole = backend.load_stored("s").await.unwrap().unwrap();
    assert_eq!(whole.events, events);
    for max in [1, 2, 3, 10, 36, 37, 38, 41, 1_000] {
        let pages = pages(&backend, max).await;
        let read: Vec<Event> = pages.iter().flat_map(|p| p.events.clone()).collect();
        assert_eq!(read, events, "pages of {max}");
        for (i, page) in pages.iter().enumerate() {
            assert_eq!(page.revision, whole.revision);
            assert_eq!(page.meta, whole.meta);
            assert!(!page.torn);
            if i + 1 < pages.len() {
                assert_eq!(page.events.len(), max);
            }
        }
    }
    // A page from inside a packed row starts at the requested seq.
    let page = backend.load_stored_page("s", 20, 5).await.unwrap().unwrap();
    assert_eq!(page.events, events[20..25]);
    // Past the end: no events, not torn; an unknown session: none.
    let past = backend
        .load_stored_page("s", events.len() as u64 + 3, 5)
        .await
        .unwrap()
        .unwrap();
    assert!(past.events.is_empty() && !past.torn);
    assert!(backend.load_stored_page("t", 0, 5).await.unwrap().is_none());
}

#[tokio::test]
async fn a_torn_tail_ends_the_last_page() {
    let dir = TempDir::new("page-torn");
    let backend = backend_at(&dir.db());
    let events = log();
    store(&backend, &events).await;
    let next = events.len() as u64;
    raw(&dir.db())
        .execute(
            "INSERT INTO events (session_id, seq, type, time, data) \
             VALUES ('s', ?1, 'assistant/chunk', 1, '{not valid json')",
            params![next as i64],
        )
        .unwrap();
    let whole = backend.load_stored("s").await.unwrap().unwrap();
    assert_eq!(whole.torn, Some(TornMarker::FromSeq(next)));
    for max in [7, 41, 1_000] {
        let pages = pages(&backend, max).await;
        let read: Vec<Event> = pages.iter().flat_map(|p| p.events.clone()).collect();
        assert_eq!(read, events, "pages of {max}");
        let (last, earlier) = pages.split_last().unwrap();
        assert!(last.torn, "pages of {max}");
        assert!(earlier.iter().all(|p| !p.torn));
    }
}

#[tokio::test]
async fn committed_corruption_fails_the_page_that_reaches_it() {
    let dir = TempDir::new("page-corrupt");
    let backend = backend_at(&dir.db());
    let events = log();
    store(&backend, &events).await;
    // The first turn's packed row no longer decodes; later turns end with turn/end rows.
    let changed = raw(&dir.db())
        .execute(
            "UPDATE events SET data = '{not valid json' WHERE session_id = 's' AND seq = \
             (SELECT min(seq) FROM events WHERE session_id = 's' AND ignorable = 0)",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let whole = backend.load_stored("s").await;
    assert!(whole.is_err(), "{whole:?}");
    // The page before the damaged row reads; the one that reaches it fails, as the whole
    // read does.
    let before = backend.load_stored_page("s", 0, 2).await.unwrap().unwrap();
    assert_eq!(before.events, events[..2]);
    let failed = backend.load_stored_page("s", 2, 10).await;
    assert_eq!(
        failed.unwrap_err().to_string(),
        whole.unwrap_err().to_string()
    );
}
