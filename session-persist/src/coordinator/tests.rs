use std::sync::Arc;
use std::time::Duration;

use session_core::json::Value;
use session_core::{Event, FixedClock};
use session_store::{PrepareOptions, SessionStore};
use session_surface::Draft;

use super::state::{Retirement, SessionState};
use super::{Persistence, PersistenceOptions};
use crate::memory::MemoryBackend;
use crate::promise::promise;

fn ev(text: &str) -> Event {
    Event::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn stored_turn() -> Vec<Event> {
    vec![
        ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#),
        ev(
            r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ),
    ]
}

fn setup(id: &str) -> (Persistence, MemoryBackend, SessionStore) {
    let backend = MemoryBackend::new();
    let header = Value::parse(&format!(
        r#"{{"version":0,"id":"{id}","createdAt":1000,"cwd":"/proj","delegationDepth":0}}"#
    ))
    .unwrap();
    backend.inject(id, header, stored_turn());
    let store = SessionStore::new(Arc::new(FixedClock::new(5)));
    let p = Persistence::new(
        Arc::new(backend.clone()),
        store.clone(),
        PersistenceOptions::default(),
    )
    .unwrap();
    (p, backend, store)
}

// persistence §7.3 #12
#[tokio::test]
async fn a_prepared_commit_refuses_a_live_owner() {
    let (p, _, store) = setup("owned");
    let owner = store
        .prepare(Some("someone-else"), PrepareOptions::default())
        .unwrap();
    {
        let mut core = p.inner.core();
        let generation = core.next_token();
        core.states.insert(
            Arc::from("owned"),
            SessionState {
                generation,
                meta: owner.header(),
                cursor: 2,
                materialized: true,
                owner: Some(owner),
                unclaimed: None,
            },
        );
    }
    assert_eq!(
        p.prepare("owned", None).await.unwrap_err().to_string(),
        r#"session "owned" already has a live persistence owner"#
    );
}

// persistence §7.3 #13
#[tokio::test]
async fn publication_refuses_a_preparation_whose_state_changed() {
    let (p, _, store) = setup("tampered");
    let prep = p.prepare("tampered", None).await.unwrap();
    if let Some(state) = p.inner.core().states.get_mut("tampered") {
        state.cursor += 1;
    }
    let detach = store.enter(prep.session()).unwrap();
    let err = store.announce(prep.session()).unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"session "tampered" preparation no longer matches its persistence state"#),
        "{err}"
    );
    detach.detach();
}

// A retirement that finishes after its successor started keeps the successor's entry.
#[tokio::test]
async fn retirement_cleanup_only_removes_its_own_entry() {
    let (p, backend, store) = setup("r");
    let gate = backend.hold(crate::memory::GateKind::Append);
    let (first, detach) = store.create(Some("r2"), PrepareOptions::default()).unwrap();
    first
        .append(session_surface::Draft::new(
            "turn/start",
            Value::parse(r#"{"turn":1}"#).unwrap(),
        ))
        .unwrap();
    detach.detach();
    gate.wait_arrived(1).await;
    // A successor lifecycle's retirement replaces the entry while the first drains.
    let (resolver, done) = promise();
    {
        let mut core = p.inner.core();
        let token = core.next_token();
        core.retirements
            .insert(Arc::from("r2"), Retirement { token, done });
    }
    gate.open();
    for _ in 0..1_000 {
        if p.live_sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(p.live_sessions(), 0, "the first drain finished");
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(
        p.retiring("r2"),
        "a stale cleanup removed a newer retirement"
    );
    resolver.settle(Ok(()));
}

// HMR seeding cannot refuse a session (a service being built holds no preparation), and what
// its `onCreated` finds is not lost: a session live before the service was built, colliding
// with a stored log at another cwd, gets a controller and its flush reports the collision.
#[tokio::test]
async fn a_seeded_session_reports_its_initialization_error_on_flush() {
    let store = SessionStore::new(Arc::new(FixedClock::new(5)));
    let options = PrepareOptions {
        meta: Some(Value::parse(r#"{"cwd":"/elsewhere"}"#).unwrap()),
        ..PrepareOptions::default()
    };
    let (session, detach) = store.create(Some("seeded"), options).unwrap();
    let (fresh, fresh_detach) = store
        .create(Some("fresh"), PrepareOptions::default())
        .unwrap();
    for s in [&session, &fresh] {
        s.append(Draft::new(
            "turn/start",
            Value::parse(r#"{"turn":1}"#).unwrap(),
        ))
        .unwrap();
    }
    let backend = MemoryBackend::new();
    let header = Value::parse(
        r#"{"version":0,"id":"seeded","createdAt":1000,"cwd":"/proj","delegationDepth":0}"#,
    )
    .unwrap();
    backend.inject("seeded", header, stored_turn());
    let p = Persistence::new(
        Arc::new(backend.clone()),
        store.clone(),
        PersistenceOptions::default(),
    )
    .unwrap();
    assert_eq!(p.live_sessions(), 2, "both live sessions were seeded");
    let err = store.flush(&session).await.unwrap_err().to_string();
    assert!(
        err.contains(r#"session "seeded" is already persisted at a different cwd"#),
        "{err}"
    );
    assert_eq!(
        backend.stored_seqs("seeded"),
        [0, 1],
        "the stored log is untouched"
    );
    assert!(store.flush(&fresh).await.unwrap());
    assert_eq!(backend.stored_seqs("fresh"), [0]);
    detach.detach();
    fresh_detach.detach();
}
