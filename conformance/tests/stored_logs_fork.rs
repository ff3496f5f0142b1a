//! A session that loads also forks and verifies (issue #15 item 8): stored logs holding
//! numbers a live append would refuse or respell (integers beyond 2^53, `-0`, `1e400`,
//! `1E2`, `1.0`) and every event kind of the history generator are written through the JSONL
//! backend; whenever `load` accepts one, it forks at every closed-turn boundary (as a stored
//! log and from the restored session) and rebuilds as `sessionctl verify` rebuilds it, with
//! every invariant holding.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use conformance::r#gen::arb_history;
use conformance::r#gen::json::respell_numbers;
use conformance::invariants::{
    check_closers_balance, check_incremental_derivation, check_persistence_round_trip,
    check_replay_marker, check_session, check_surface_matches_fold, check_transcript_holds_appends,
};
use proptest::collection::vec;
use proptest::prelude::*;
use session_core::json::Value;
use session_core::{Event, Events, FixedClock, SharedClock};
use session_fork::{fork_events, fork_session};
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::SessionStore;
use session_surface::Session;

/// Spellings a JavaScript writer produces (`100000000000000000000` for 1e20) or another
/// writer may, that a live append refuses or respells.
const ODD_NUMBERS: [&str; 8] = [
    "100000000000000000000",
    "9007199254740993",
    "12345678901234567890",
    "1E2",
    "1.0",
    "-0",
    "1e400",
    "1.5e300",
];

/// Types whose payload takes an extra key without a reader refusing the log.
const OPEN_PAYLOADS: [&str; 9] = [
    "user/message",
    "assistant/message",
    "assistant/chunk",
    "tool/call",
    "step/start",
    "feedback/record",
    "todo/write",
    "session/title",
    "plan/mode",
];

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig::with_cases(cases)
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_783_352_050_748))
}

static NEXT_ROOT: AtomicU64 = AtomicU64::new(0);

fn fail(what: &str, e: &dyn std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {e}"))
}

/// Forks at every closed boundary and rebuilds the log; `Err` names what failed.
fn forks_and_verifies(
    id: &str,
    cwd: Option<&str>,
    events: &Events,
    header: &Value,
) -> Result<(), TestCaseError> {
    let restored = Session::from_restore_events(id, events.clone(), header, clock())
        .map_err(|e| fail("restore", &e))?;
    let mut boundaries: Vec<u64> = events
        .iter()
        .filter(|e| e.event_type() == "turn/end")
        .map(Event::seq)
        .collect();
    if !events.iter().any(|e| e.event_type() == "turn/start") {
        boundaries.extend(events.iter().last().map(Event::seq));
    }
    for b in boundaries {
        let boundary = session_core::event::seq_value(b);
        let child = fork_events(id, cwd, events, Some(&boundary), "child", clock())
            .map_err(|e| fail(&format!("fork_events at {b}"), &e))?;
        check_session(&child).map_err(|e| fail(&format!("child at {b}"), &e))?;
        let live_child = fork_session(&restored, Some(&boundary), "child", clock())
            .map_err(|e| fail(&format!("fork_session at {b}"), &e))?;
        prop_assert_eq!(
            live_child.events(),
            child.events(),
            "the two fork paths differ at {}",
            b
        );
    }
    // `sessionctl verify`'s rebuild.
    let rebuilt =
        Session::create_from_events(id, Some(events.clone()), Some(header.clone()), clock())
            .map_err(|e| fail("verify rebuild", &e))?;
    for check in [
        check_surface_matches_fold(&rebuilt),
        check_incremental_derivation(&rebuilt),
        check_transcript_holds_appends(&rebuilt),
        check_replay_marker(&rebuilt),
        check_closers_balance(events),
        check_persistence_round_trip(events, &[], Compression::None, true),
    ] {
        check.map_err(|e| fail("verify", &e))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn stored_logs_that_load_also_fork_and_verify(
        history in arb_history(),
        picks in vec(0u8..5, 1..8),
        planted in vec((any::<prop::sample::Index>(), 0..ODD_NUMBERS.len()), 0..8),
        zstd in any::<bool>(),
    ) {
        let session = history.build();
        let mut values: Vec<Value> = session
            .events()
            .iter()
            .map(|e| {
                let v = e.to_value();
                let o = v.as_object().unwrap().with("data", respell_numbers(e.data(), &picks));
                Value::Object(o)
            })
            .collect();
        for (at, n) in planted {
            if values.is_empty() {
                break;
            }
            let i = at.index(values.len());
            let v = &values[i];
            let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
            let Some(data) = v.get("data").and_then(Value::as_object) else { continue };
            if !OPEN_PAYLOADS.contains(&ty) {
                continue;
            }
            let data = data.with("n", Value::parse(ODD_NUMBERS[n]).unwrap());
            values[i] = Value::Object(v.as_object().unwrap().with("data", Value::Object(data)));
        }
        let events: Vec<Event> = values
            .iter()
            .map(|v| Event::from_value(v).unwrap())
            .collect();
        let root = std::env::temp_dir().join(format!(
            "conformance-stored-fork-{}-{}",
            std::process::id(),
            NEXT_ROOT.fetch_add(1, Ordering::Relaxed)
        ));
        let compression = if zstd { Compression::Zstd } else { Compression::None };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let header = session.header().clone();
        let result = runtime.block_on(async {
            if events.is_empty() {
                return Ok(None);
            }
            let backend = JsonlBackend::open(JsonlConfig::new(&root).compression(compression))
                .map_err(|e| fail("open", &e))?;
            backend
                .append_batch(&header, &events, false)
                .await
                .map_err(|e| fail("write", &e))?;
            let persistence = Persistence::new(
                Arc::new(backend),
                SessionStore::new(clock()),
                PersistenceOptions::default(),
            )
            .map_err(|e| fail("persistence", &e))?;
            let loaded = persistence.load(history.id()).await;
            persistence.dispose().await.map_err(|e| fail("dispose", &e))?;
            Ok::<_, TestCaseError>(Some(loaded.map_err(|e| fail("load", &e))?))
        });
        let _ = std::fs::remove_dir_all(&root);
        if let Some(loaded) = result? {
            forks_and_verifies(
                history.id(),
                loaded.meta.cwd.as_deref(),
                &loaded.events,
                &loaded.meta.to_value(),
            )?;
        }
    }
}
