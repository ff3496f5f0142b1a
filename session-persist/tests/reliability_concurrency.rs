//! Concurrency: two writers of one session in one process (exactly one wins, no byte of the
//! loser reaches the log), and readers running while a writer appends (always a consistent,
//! contiguous prefix).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use coord::{complete_turn, meta_value, store};
use session_core::Event;
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::{PrepareOptions, SessionStore, SharedSession};

fn backend(root: &std::path::Path, compression: Compression) -> Arc<JsonlBackend> {
    Arc::new(JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap())
}

fn live(store: &SessionStore, id: &str) -> (SharedSession, session_store::Detach) {
    store
        .create(
            Some(id),
            PrepareOptions {
                meta: Some(meta_value(Some("/proj"))),
                ..PrepareOptions::default()
            },
        )
        .unwrap()
}

fn user_texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event_type() == "user/message")
        .map(|e| e.data().get("id").unwrap().as_str().unwrap().to_owned())
        .collect()
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rel-conc-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_writing_one_session_exactly_one_wins() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = tmp(&format!("two-writers-{compression:?}"));
        let root = dir.join("root");
        let (store_a, store_b) = (store(), store());
        let p_a = Persistence::new(
            backend(&root, compression),
            store_a.clone(),
            PersistenceOptions::default(),
        )
        .unwrap();
        let p_b = Persistence::new(
            backend(&root, compression),
            store_b.clone(),
            PersistenceOptions::default(),
        )
        .unwrap();
        let (a, _da) = live(&store_a, "shared");
        let (b, _db) = live(&store_b, "shared");
        // Different content per writer (user message ids `u1..` vs `u101..`).
        for t in 1..=3 {
            complete_turn(&a, t);
            complete_turn(&b, 100 + t);
        }
        let (ra, rb) = tokio::join!(store_a.flush(&a), store_b.flush(&b));
        let (winner, loser_err) = match (ra, rb) {
            (Ok(_), Err(e)) => ("a", e),
            (Err(e), Ok(_)) => ("b", e),
            (ra, rb) => panic!("exactly one writer must win: {ra:?} / {rb:?}"),
        };
        let text = loser_err.to_string();
        eprintln!("{compression:?}: writer {winner} won; the other got: {text}");
        // Both race the first publication; the loser finds the winner's log (or its lock).
        assert!(
            text == "refusing to materialize \"shared\": a log already exists on disk (load/resume it instead)"
                || text == "session \"shared\" is locked by another writer",
            "{text}"
        );
        // The winner keeps writing; the loser's retries keep failing and never write.
        let (w_store, w_session, l_store, l_session) = if winner == "a" {
            (&store_a, &a, &store_b, &b)
        } else {
            (&store_b, &b, &store_a, &a)
        };
        complete_turn(w_session, 4);
        w_store.flush(w_session).await.unwrap();
        assert!(l_store.flush(l_session).await.is_err());

        let stored = backend(&root, compression)
            .load_stored("shared")
            .await
            .unwrap()
            .unwrap()
            .events;
        let expected: Vec<String> = if winner == "a" {
            ["u1", "u2", "u3", "u4"].map(String::from).to_vec()
        } else {
            ["u101", "u102", "u103", "u4"].map(String::from).to_vec()
        };
        assert_eq!(user_texts(&stored), expected, "no interleaving");
        assert_eq!(
            stored.iter().map(Event::seq).collect::<Vec<_>>(),
            (0..24).collect::<Vec<_>>()
        );
        let _ = p_a.dispose().await;
        let _ = p_b.dispose().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_during_writes_see_a_contiguous_prefix() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = tmp(&format!("readers-{compression:?}"));
        let root = dir.join("root");
        let writer_store = store();
        let writer = Persistence::new(
            backend(&root, compression),
            writer_store.clone(),
            PersistenceOptions {
                write_batch_max_delay_ms: 1,
                ..PersistenceOptions::default()
            },
        )
        .unwrap();
        let reader = Arc::new(
            Persistence::new(
                backend(&root, compression),
                store(),
                PersistenceOptions::default(),
            )
            .unwrap(),
        );
        // The intended log, to compare every view with.
        let reference_store = store();
        let (reference, _dr) = live(&reference_store, "r");
        for t in 1..=40 {
            complete_turn(&reference, t);
        }
        let intended: Vec<Event> = reference.events().iter().cloned().collect();

        let done = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for mode in 0..2 {
            let (reader, done, intended) = (reader.clone(), done.clone(), intended.clone());
            readers.push(tokio::spawn(async move {
                let (mut views, mut longest) = (0usize, 0usize);
                while !done.load(Ordering::SeqCst) {
                    let events: Vec<Event> = if mode == 0 {
                        match reader.inspect("r", None).await {
                            Ok(i) => i.events.iter().cloned().collect(),
                            Err(Error::NotFound { .. }) if longest == 0 => {
                                tokio::task::yield_now().await;
                                continue;
                            }
                            Err(e) => panic!("inspect: {e}"),
                        }
                    } else {
                        match reader.read_from("r", 0, None).await {
                            Ok(s) => s.events,
                            Err(Error::NotFound { .. }) if longest == 0 => {
                                tokio::task::yield_now().await;
                                continue;
                            }
                            Err(e) => panic!("read_from: {e}"),
                        }
                    };
                    // `inspect` may add closers after the stored prefix: compare the stored
                    // part (everything the intended log has at that position).
                    let stored = events
                        .iter()
                        .zip(&intended)
                        .take_while(|(a, b)| a == b)
                        .count();
                    for (i, e) in events.iter().enumerate() {
                        assert_eq!(e.seq(), i as u64, "contiguous");
                    }
                    if mode == 1 {
                        assert_eq!(stored, events.len(), "read_from returns stored events only");
                    }
                    assert!(
                        stored >= longest,
                        "views never shrink: {stored} < {longest}"
                    );
                    longest = stored;
                    views += 1;
                    tokio::task::yield_now().await;
                }
                (views, longest)
            }));
        }
        let (session, _ds) = live(&writer_store, "r");
        for t in 1..=40 {
            complete_turn(&session, t);
            if t % 3 == 0 {
                writer_store.flush(&session).await.unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        writer_store.flush(&session).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        done.store(true, Ordering::SeqCst);
        for r in readers {
            let (views, _) = r.await.unwrap();
            assert!(views > 0, "each reader saw at least one view");
        }
        let last = reader.read_from("r", 0, None).await.unwrap().events;
        assert_eq!(last, intended);
        writer.dispose().await.unwrap();
        reader.dispose().await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
