//! Auto-seal through the persistence service: a live session's retirement seals its log in
//! the background, and a writer that comes right after the retirement opens the sealed log.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::path::Path;
use std::sync::Arc;

use coord::{live, service, store, turn_end, turn_start, user};
use session_core::Event;
use session_persist::jsonl::scan_zstd_frames;
use session_persist::{Backend, JsonlBackend, JsonlConfig, SealPolicy};

fn frames(path: &Path) -> usize {
    scan_zstd_frames(&std::fs::read(path).unwrap(), None)
        .unwrap()
        .frames
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_live_session_is_sealed_and_the_next_writer_appends_after_it() {
    let dir = std::env::temp_dir().join(format!("autoseal-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let backend =
        JsonlBackend::open(JsonlConfig::new(&dir).seal_policy(SealPolicy::default())).unwrap();
    let store = store();
    let (persistence, warnings) = service(Arc::new(backend.clone()), &store);
    let (session, detach) = live(&store, "s", Some("/proj"));
    for n in 1..=100 {
        session.append(turn_start(n)).unwrap();
        session.append(user(&format!("u{n}"), "hi")).unwrap();
        // Two write-behind batches per turn, at least.
        store.flush(&session).await.unwrap();
        session.append(turn_end(n)).unwrap();
        store.flush(&session).await.unwrap();
    }
    let written: Vec<Event> = session.events().iter().cloned().collect();
    let path = backend.log_path(&coord::meta("s")).unwrap();
    let frames_before = frames(&path);
    assert!(frames_before > 200, "{frames_before} frames");
    detach.detach();
    drop(session);
    // The retirement's drain and release (which starts the background seal).
    while persistence.retiring("s") {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }

    // A cold append right after the retirement: it waits for the background seal if it still
    // runs, and opens the sealed log, whose revision differs from the one it may have loaded.
    let next = written.len() as u64;
    let more = vec![
        coord::ev(&format!(
            r#"{{"type":"turn/start","seq":{next},"time":1,"data":{{"turn":101}}}}"#
        )),
        coord::ev(&format!(
            r#"{{"type":"turn/end","seq":{},"time":1,"data":{{"turn":101,"reason":{{"kind":"completed"}}}}}}"#,
            next + 1
        )),
    ];
    persistence.append("s", &more).await.unwrap();
    let outcomes = backend.settle_auto_seals().await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    let report = outcomes[0].result.as_ref().unwrap();
    assert!(report.rewritten);
    assert_eq!(report.frames_after, 1 + 100);
    assert_eq!(report.frames_before, frames_before);
    // The sealed turns, then the appended batch.
    assert_eq!(frames(&path), 1 + 100 + 1);

    let mut expected = written;
    expected.extend(more);
    let fresh = JsonlBackend::open(JsonlConfig::new(&dir).seal_policy(SealPolicy::Never)).unwrap();
    let stored = fresh.load_stored("s").await.unwrap().unwrap();
    assert!(stored.torn.is_none());
    assert_eq!(stored.events, expected);
    persistence.dispose().await.unwrap();
    assert!(warnings.all().is_empty(), "{:?}", warnings.all());
    let _ = std::fs::remove_dir_all(&dir);
}
