//! Coordinator behaviour that needs instrumentation (spec §7.3, `persistence.spec.ts`): bounded
//! writes, stored identity, the preparation pool through the service, cancellation,
//! retirement, teardown, the service contract and legacy refusals. Memory backend with gates
//! and injected failures.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coord::*;
use session_core::{Event, SessionHeader};
use session_persist::cancel::{AbortReason, CancelToken};
use session_persist::memory::{GateKind, MemoryBackend, MemoryCall};
use session_persist::{
    Backend, Error, Inspection, Persistence, PersistenceOptions, Revision, SessionPersistence,
    SessionSnapshot, StoredEvents, StoredPrefix, StoredSuffix, TornMarker,
};
use session_store::{PrepareOptions, SessionStore};
use session_surface::Draft;

fn mem() -> MemoryBackend {
    MemoryBackend::new()
}

fn with(backend: &MemoryBackend, store: &SessionStore) -> (Persistence, Warnings) {
    service(Arc::new(backend.clone()), store)
}

fn fast(backend: &MemoryBackend, store: &SessionStore) -> (Persistence, Warnings) {
    service_with(
        Arc::new(backend.clone()),
        store,
        PersistenceOptions {
            write_batch_max_delay_ms: 1,
            ..PersistenceOptions::default()
        },
    )
}

fn header(id: &str) -> session_core::json::Value {
    let mut m = meta(id);
    m.delegation_depth = Some(0);
    m.to_value()
}

fn one_turn(backend: &MemoryBackend, id: &str) {
    backend.inject(id, header(id), turn_events(0, 1));
}

async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..5_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("timed out waiting for {what}");
}

fn reason(text: &str) -> AbortReason {
    AbortReason::new(std::io::Error::other(text.to_owned()))
}

fn is_reason(e: &Error, r: &AbortReason) -> bool {
    e.abort_reason().is_some_and(|x| x.ptr_eq(r))
}

/// A session entered in the store (so `get` finds it) without being announced.
fn enter_unannounced(store: &SessionStore, id: &str) -> session_store::Detach {
    let session = store
        .prepare(
            Some(id),
            PrepareOptions {
                seed: Some(turn_events(0, 1).iter().map(Event::to_value).collect()),
                meta: Some(meta_value(Some("/proj"))),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    store.enter(&session).unwrap()
}

fn external_turn(backend: &MemoryBackend, id: &str) -> impl std::future::Future<Output = ()> {
    let other = backend.reopen();
    let id = id.to_owned();
    async move {
        let events = vec![
            ev(r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#),
            ev(
                r#"{"type":"turn/end","seq":7,"time":8,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
            ),
        ];
        other.append_batch(&meta(&id), &events, true).await.unwrap();
    }
}

/// A third-party service that implements only the required methods and inherits the
/// defaults (`read_raw`, `prepare`).
struct Minimal {
    inner: Persistence,
    store: Option<SessionStore>,
    cancel_after_load: Option<(CancelToken, AbortReason)>,
}

#[async_trait]
impl SessionPersistence for Minimal {
    fn locate(&self, _meta: &SessionHeader) -> Option<session_persist::Location> {
        None
    }
    async fn create(&self, meta: &SessionHeader) -> session_persist::Result<()> {
        self.inner.create(meta).await
    }
    async fn append(&self, id: &str, events: &[Event]) -> session_persist::Result<()> {
        self.inner.append(id, events).await
    }
    async fn load(&self, id: &str) -> session_persist::Result<Inspection> {
        let loaded = self.inner.load(id).await;
        if let Some((token, r)) = &self.cancel_after_load {
            token.cancel_with(r.clone());
        }
        loaded
    }
    async fn inspect(
        &self,
        id: &str,
        c: Option<&CancelToken>,
    ) -> session_persist::Result<Inspection> {
        self.inner.inspect(id, c).await
    }
    async fn read_from(
        &self,
        id: &str,
        from: u64,
        c: Option<&CancelToken>,
    ) -> session_persist::Result<StoredEvents> {
        self.inner.read_from(id, from, c).await
    }
    async fn list(&self, c: Option<&CancelToken>) -> session_persist::Result<Vec<SessionHeader>> {
        self.inner.list(c).await
    }
    async fn list_snapshots(
        &self,
        c: Option<&CancelToken>,
    ) -> session_persist::Result<Vec<SessionSnapshot>> {
        self.inner.list_snapshots(c).await
    }
    fn sessions(&self) -> Option<SessionStore> {
        self.store.clone()
    }
}

// persistence §7.3 #1
#[tokio::test]
async fn the_default_read_raw_refuses_and_honours_cancellation() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    assert!(!p.supports_raw_artifacts());
    let minimal = Minimal {
        inner: p.clone(),
        store: None,
        cancel_after_load: None,
    };
    for svc in [&p as &dyn SessionPersistence, &minimal] {
        assert!(!svc.supports_raw_artifacts());
        assert_eq!(
            svc.read_raw("any-session", None)
                .await
                .unwrap_err()
                .to_string(),
            "this session persistence backend does not expose raw artifacts"
        );
        let r = reason("boom");
        let err = svc
            .read_raw("any-session", Some(&CancelToken::cancelled_with(r.clone())))
            .await
            .unwrap_err();
        assert!(is_reason(&err, &r));
        let token = CancelToken::new();
        token.cancel();
        let err = svc.read_raw("any-session", Some(&token)).await.unwrap_err();
        assert_eq!(err.to_string(), "aborted");
    }
}

// persistence §7.3 #2
#[tokio::test]
async fn the_seed_is_borrowed_not_copied() {
    let backend = mem();
    let store = store();
    let (_p, _) = with(&backend, &store);
    let (session, detach) = live_seeded(&store, "borrowed", Some("/proj"), &turn_events(0, 1));
    store.flush(&session).await.unwrap();
    let stored = backend.stored_events("borrowed").unwrap();
    assert_eq!(stored.len(), 7);
    for (i, e) in stored.iter().enumerate() {
        assert!(
            e.ptr_eq(&session.event(i as u64).unwrap()),
            "event {i} was copied"
        );
    }
    assert_eq!(backend.appends(), 1, "the seed went out as one batch");
    detach.detach();
}

// persistence §7.3 #3
#[tokio::test]
async fn a_rejected_initialization_cancels_the_batching_timer() {
    let backend = mem();
    let store = store();
    let (p, _) = service_with(
        Arc::new(backend.clone()),
        &store,
        PersistenceOptions {
            write_batch_max_delay_ms: session_persist::MAX_WRITE_BATCH_DELAY_MS,
            ..PersistenceOptions::default()
        },
    );
    backend.fail_next_load("initialization failed");
    let (session, detach) = live(&store, "bounded-init-failure", None);
    session.append(turn_start(1)).unwrap();
    assert_eq!(p.timer_armed(&session), Some(true));
    let err = store.flush(&session).await.unwrap_err();
    assert_eq!(err.to_string(), "initialization failed");
    assert_eq!(p.timer_armed(&session), Some(false));
    // The rejection is permanent for this session: teardown reports it too.
    let err = p.dispose().await.unwrap_err();
    assert_eq!(err.name(), "AggregateError");
    assert_eq!(err.to_string(), "session-persistence-memory dispose failed");
    assert_eq!(p.timer_armed(&session), Some(false));
    detach.detach();
}

// persistence §7.3 #4
#[tokio::test]
async fn an_event_admitted_during_a_write_starts_a_follow_up_batch() {
    let backend = mem();
    let store = store();
    let (_p, _) = fast(&backend, &store);
    let (session, detach) = live(&store, "bounded-follow-up", None);
    store.flush(&session).await.unwrap();
    let gate = backend.hold(GateKind::Append);
    session.append(turn_start(1)).unwrap();
    gate.wait_arrived(1).await;
    session.append(turn_end(1)).unwrap();
    gate.open();
    wait_until("the follow-up batch", || {
        backend.stored_seqs("bounded-follow-up") == [0, 1]
    })
    .await;
    assert_eq!(backend.appends(), 2);
    detach.detach();
}

// persistence §7.3 #5
#[tokio::test]
async fn explicit_flushes_retry_an_overlapping_background_failure() {
    let backend = mem();
    let store = store();
    let (_p, warnings) = fast(&backend, &store);
    let (session, detach) = live(&store, "bounded-flush-retry", None);
    store.flush(&session).await.unwrap();
    let gate = backend.hold(GateKind::Append);
    backend.fail_next_append("transient background failure");
    session.append(turn_start(1)).unwrap();
    session.append(turn_end(1)).unwrap();
    gate.wait_arrived(1).await;
    let a = tokio::spawn(store.flush(&session));
    let b = tokio::spawn(store.flush(&session));
    gate.open();
    assert!(a.await.unwrap().unwrap());
    assert!(b.await.unwrap().unwrap());
    assert_eq!(backend.appends(), 2);
    assert_eq!(backend.stored_seqs("bounded-flush-retry"), [0, 1]);
    assert_eq!(
        warnings.all(),
        [
            r#"session-persistence-memory: background write for session "bounded-flush-retry" failed (buffered events retained): Error: transient background failure"#
        ]
    );
    detach.detach();
}

// persistence §7.3 #6
#[tokio::test]
async fn a_mismatched_stored_header_is_refused_before_repair_or_state() {
    let backend = mem();
    backend.inject(
        "requested",
        header("different"),
        vec![ev(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        )],
    );
    let (p, _) = with(&backend, &store());
    let err = p.load("requested").await.unwrap_err();
    assert!(
        err.to_string().contains(
            r#"stored session identity mismatch: requested "requested", header contains "different""#
        ),
        "{err}"
    );
    assert_eq!(backend.repairs(), 0);
    assert_eq!(p.tracked_sessions(), 0);
}

// persistence §7.3 #7
#[tokio::test]
async fn a_cold_load_reserves_the_id_across_its_read() {
    let backend = mem();
    let start = ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    backend.inject("cold", header("cold"), vec![start.clone()]);
    let store = store();
    let (p, _) = with(&backend, &store);
    let gate = backend.hold(GateKind::Load);
    let loading = tokio::spawn({
        let p = p.clone();
        async move { p.load("cold").await }
    });
    gate.wait_arrived(1).await;
    let err = store
        .create(
            Some("cold"),
            PrepareOptions {
                seed: Some(vec![start.to_value()]),
                meta: Some(meta_value(Some("/proj"))),
                ..PrepareOptions::default()
            },
        )
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("persisted state already owns this identity"),
        "{err}"
    );
    assert!(store.get("cold").is_none());
    gate.open();
    let loaded = loading.await.unwrap().unwrap();
    assert_eq!(
        types(loaded.events.iter().cloned()),
        ["turn/start", "turn/end"]
    );
    let (resumed, detach) = store
        .create(
            Some("cold"),
            PrepareOptions {
                seed: Some(loaded.events.iter().map(Event::to_value).collect()),
                meta: Some(loaded.meta.to_value()),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    assert!(store.flush(&resumed).await.unwrap());
    detach.detach();
}

// persistence §7.3 #8, #9
#[tokio::test]
async fn invalid_options_are_refused() {
    let store = store();
    for size in [0, 1 << 53] {
        let err = Persistence::new(
            Arc::new(mem()),
            store.clone(),
            PersistenceOptions {
                prepared_session_cache_size: size,
                ..PersistenceOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.name(), "TypeError");
        assert_eq!(
            err.to_string(),
            "preparedSessionCacheSize must be a positive safe integer"
        );
    }
    for delay in [0, session_persist::MAX_WRITE_BATCH_DELAY_MS + 1] {
        let err = Persistence::new(
            Arc::new(mem()),
            store.clone(),
            PersistenceOptions {
                write_batch_max_delay_ms: delay,
                ..PersistenceOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "writeBatchMaxDelayMs must be an integer between 1 and 2147483647"
        );
    }
    assert!(
        Persistence::new(
            Arc::new(mem()),
            store,
            PersistenceOptions {
                prepared_session_cache_size: 1,
                write_batch_max_delay_ms: session_persist::MAX_WRITE_BATCH_DELAY_MS,
                ..PersistenceOptions::default()
            },
        )
        .is_ok()
    );
}

// persistence §7.3 #10 (a reservation made stale by a revision change resolves to nothing and
// both callers retry)
#[tokio::test]
async fn stale_reservations_make_prepare_and_load_retry() {
    let backend = mem();
    one_turn(&backend, "prepare-retry");
    one_turn(&backend, "load-retry");
    let (p, _) = with(&backend, &store());
    backend.stale_next_revision();
    let prep = p.prepare("prepare-retry", None).await.unwrap();
    assert_eq!(prep.session().seq(), 7);
    assert_eq!(backend.loads(), 2);
    prep.dispose();
    backend.stale_next_revision();
    let loaded = p.load("load-retry").await.unwrap();
    assert_eq!(&*loaded.meta.id, "load-retry");
    assert_eq!(backend.loads(), 4);
}

// persistence §7.3 #11
#[tokio::test]
async fn a_session_that_becomes_live_during_preparation_wins() {
    // prepare
    let backend = mem();
    one_turn(&backend, "x");
    let store = store();
    let (p, _) = with(&backend, &store);
    let gate = backend.hold(GateKind::Revision);
    let preparing = tokio::spawn({
        let p = p.clone();
        async move { p.prepare("x", None).await.map(|_| ()) }
    });
    gate.wait_arrived(1).await;
    let d = enter_unannounced(&store, "x");
    gate.open();
    assert_eq!(
        preparing.await.unwrap().unwrap_err().to_string(),
        r#"cannot prepare session "x" while it is live"#
    );
    d.detach();

    // load, inspect, a validated inspect and a failed inspect return the live view
    for case in ["load", "inspect", "validated", "failed"] {
        let backend = mem();
        one_turn(&backend, "y");
        let store = coord::store();
        let (p, _) = with(&backend, &store);
        // Entering the session while the cold read runs would make building the restored
        // session fail; `load` and the validated inspect see it become live after that.
        let kind = if matches!(case, "validated" | "load") {
            GateKind::Revision
        } else {
            GateKind::Load
        };
        if case == "failed" {
            backend.fail_next_load("load failed");
        }
        let gate = backend.hold(kind);
        let reading = tokio::spawn({
            let p = p.clone();
            async move {
                if case == "load" {
                    p.load("y").await
                } else {
                    p.inspect("y", None).await
                }
            }
        });
        gate.wait_arrived(1).await;
        let d = enter_unannounced(&store, "y");
        gate.open();
        let view = reading.await.unwrap().unwrap();
        assert_eq!(&*view.meta.id, "y", "{case}");
        assert_eq!(
            view.events.last().unwrap().event_type(),
            "session/end-seed",
            "{case}: the live view"
        );
        d.detach();
    }
}

// persistence §7.3 #14
#[tokio::test]
async fn a_failing_restored_suffix_rejects_initialization() {
    let backend = mem();
    one_turn(&backend, "suffix-fail");
    let store = store();
    let (p, _) = with(&backend, &store);
    let prep = p.prepare("suffix-fail", None).await.unwrap();
    backend.fail_next_append("restored suffix append failed");
    prep.session().append(turn_start(2)).unwrap();
    let detach = store.enter(prep.session()).unwrap();
    store.announce(prep.session()).unwrap();
    assert_eq!(
        store.flush(prep.session()).await.unwrap_err().to_string(),
        "restored suffix append failed"
    );
    detach.detach();
}

// persistence §7.3 #15
#[tokio::test]
async fn a_preparation_without_a_suffix_writes_new_events_after_it() {
    let backend = mem();
    let mut stored = turn_events(0, 1);
    stored.push(ev(
        r#"{"type":"session/end-seed","seq":6,"time":7,"data":{}}"#,
    ));
    backend.inject("no-suffix", header("no-suffix"), stored);
    let store = store();
    let (p, _) = with(&backend, &store);
    let prep = p.prepare("no-suffix", None).await.unwrap();
    assert_eq!(prep.session().seq(), 7);
    let detach = store.enter(prep.session()).unwrap();
    store.announce(prep.session()).unwrap();
    prep.session().append(turn_start(2)).unwrap();
    prep.session().append(turn_end(2)).unwrap();
    assert!(store.flush(prep.session()).await.unwrap());
    assert_eq!(backend.stored_seqs("no-suffix"), (0..9).collect::<Vec<_>>());
    detach.detach();
}

// persistence §7.3 #16
#[tokio::test]
async fn inspect_then_prepare_reuses_the_exact_session() {
    let backend = mem();
    one_turn(&backend, "reuse");
    let (p, _) = with(&backend, &store());
    let inspected = p.inspect("reuse", None).await.unwrap();
    let first = p.prepare("reuse", None).await.unwrap();
    assert_eq!(backend.loads(), 1);
    assert!(
        first
            .session()
            .event(0)
            .unwrap()
            .ptr_eq(inspected.events.get(0).unwrap())
    );
    let session = first.session().clone();
    first.dispose();
    let second = p.prepare("reuse", None).await.unwrap();
    assert!(second.session().ptr_eq(&session));
    assert_eq!(backend.loads(), 1);
}

// persistence §7.3 #17
#[tokio::test]
async fn a_cached_inspection_is_reloaded_after_the_revision_changes() {
    let backend = mem();
    one_turn(&backend, "refresh");
    let (p, _) = with(&backend, &store());
    let first = p.inspect("refresh", None).await.unwrap();
    external_turn(&backend, "refresh").await;
    let refreshed = p.inspect("refresh", None).await.unwrap();
    assert_eq!(refreshed.events.len(), 8);
    assert_eq!(first.events.len(), 6);
    assert_eq!(backend.loads(), 2);
}

// persistence §7.3 #18
#[tokio::test]
async fn prepare_does_not_reuse_a_stale_inspection() {
    let backend = mem();
    one_turn(&backend, "stale");
    let (p, _) = with(&backend, &store());
    let inspected = p.inspect("stale", None).await.unwrap();
    external_turn(&backend, "stale").await;
    let prep = p.prepare("stale", None).await.unwrap();
    assert_eq!(prep.session().seq(), 9);
    assert!(
        !prep
            .session()
            .event(0)
            .unwrap()
            .ptr_eq(inspected.events.get(0).unwrap())
    );
    assert_eq!(inspected.events.len(), 6);
    assert_eq!(backend.loads(), 2);
}

// persistence §7.3 #19
#[tokio::test]
async fn a_reserved_preparation_survives_an_inspection_of_a_newer_revision() {
    let backend = mem();
    one_turn(&backend, "retained");
    let store = store();
    let (p, _) = with(&backend, &store);
    let cached = p.inspect("retained", None).await.unwrap();
    let prep = p.prepare("retained", None).await.unwrap();
    external_turn(&backend, "retained").await;
    let seen = p.inspect("retained", None).await.unwrap();
    assert_eq!(seen.events.len(), 6, "the cached view is returned");
    assert!(
        seen.events
            .get(0)
            .unwrap()
            .ptr_eq(cached.events.get(0).unwrap())
    );
    assert_eq!(p.cached_preparations(), 1);
    let detach = store.enter(prep.session()).unwrap();
    store.announce(prep.session()).unwrap();
    assert_eq!(
        p.cached_preparations(),
        0,
        "publication consumed the reservation"
    );
    detach.detach();
}

// persistence §7.3 #20
#[tokio::test]
async fn a_same_tick_cold_append_queues_behind_an_inspection() {
    let backend = mem();
    one_turn(&backend, "race");
    let (p, _) = with(&backend, &store());
    let inspection = tokio::spawn({
        let p = p.clone();
        async move { p.inspect("race", None).await }
    });
    let append = tokio::spawn({
        let p = p.clone();
        async move {
            p.append(
                "race",
                &[ev(
                    r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
                )],
            )
            .await
        }
    });
    let seen = inspection.await.unwrap().unwrap();
    append.await.unwrap().unwrap();
    assert_eq!(
        seqs(seen.events.iter().cloned()),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(backend.loads(), 2);
    assert_eq!(backend.stored_seqs("race").len(), 7);
}

// persistence §7.3 #21
#[tokio::test]
async fn a_same_tick_cold_append_before_an_inspection() {
    let backend = mem();
    one_turn(&backend, "race2");
    let (p, _) = with(&backend, &store());
    let append = tokio::spawn({
        let p = p.clone();
        async move {
            p.append(
                "race2",
                &[ev(
                    r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
                )],
            )
            .await
        }
    });
    let inspection = tokio::spawn({
        let p = p.clone();
        async move { p.inspect("race2", None).await }
    });
    append.await.unwrap().unwrap();
    let seen = inspection.await.unwrap().unwrap();
    assert_eq!(
        seqs(seen.events.iter().cloned()),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(backend.loads(), 2);
    assert_eq!(backend.stored_seqs("race2").len(), 7);
}

// persistence §7.3 #22
#[tokio::test]
async fn cold_append_adoption_retries_a_stale_revision() {
    let backend = mem();
    one_turn(&backend, "adopt-stale");
    let (p, _) = with(&backend, &store());
    backend.stale_next_revision();
    p.append(
        "adopt-stale",
        &[ev(
            r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
        )],
    )
    .await
    .unwrap();
    assert_eq!(backend.loads(), 2);
    assert_eq!(backend.appends(), 1);
    assert_eq!(backend.stored_seqs("adopt-stale").len(), 7);
}

// persistence §7.3 #23
#[tokio::test]
async fn inspect_borrows_an_open_live_turn_and_load_refuses_it() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    let (session, detach) = live(&store, "live-open", None);
    session.append(turn_start(1)).unwrap();
    let seen = p.inspect("live-open", None).await.unwrap();
    assert_eq!(seen.events.len(), 1);
    assert!(
        seen.events
            .get(0)
            .unwrap()
            .ptr_eq(&session.event(0).unwrap())
    );
    assert_eq!(types(seen.events.iter().cloned()), ["turn/start"]);
    assert!(
        p.load("live-open")
            .await
            .unwrap_err()
            .to_string()
            .contains("live turn is open")
    );
    detach.detach();
}

// persistence §7.3 #24
#[tokio::test]
async fn inspect_keeps_closers_in_memory_and_prepare_commits_them_once() {
    let backend = mem();
    backend.inject(
        "repair-once",
        header("repair-once"),
        vec![ev(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        )],
    );
    let (p, _) = with(&backend, &store());
    let seen = p.inspect("repair-once", None).await.unwrap();
    assert_eq!(
        types(seen.events.iter().cloned()),
        ["turn/start", "turn/end"]
    );
    assert_eq!(
        types(backend.stored_events("repair-once").unwrap()),
        ["turn/start"]
    );
    assert_eq!(backend.repairs(), 0);
    let first = p.prepare("repair-once", None).await.unwrap();
    assert_eq!(backend.repairs(), 1);
    assert_eq!(
        types(backend.stored_events("repair-once").unwrap()),
        ["turn/start", "turn/end"]
    );
    let session = first.session().clone();
    first.dispose();
    let second = p.prepare("repair-once", None).await.unwrap();
    assert!(second.session().ptr_eq(&session));
    assert_eq!(backend.loads(), 2);
    assert_eq!(backend.repairs(), 1);
}

/// A memory backend whose repairs are followed by something else touching the log.
struct AfterRepair {
    inner: MemoryBackend,
    then: fn(&MemoryBackend, &str),
}

#[async_trait]
impl Backend for AfterRepair {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn load_stored(&self, id: &str) -> session_persist::Result<Option<StoredPrefix>> {
        self.inner.load_stored(id).await
    }
    async fn read_stored_revision(&self, id: &str) -> session_persist::Result<Option<Revision>> {
        self.inner.read_stored_revision(id).await
    }
    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        m: bool,
    ) -> session_persist::Result<()> {
        self.inner.append_batch(meta, events, m).await
    }
    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> session_persist::Result<()> {
        self.inner.commit_repair(meta, torn, closers).await?;
        (self.then)(&self.inner, &meta.id);
        Ok(())
    }
    async fn list(&self) -> session_persist::Result<Vec<SessionHeader>> {
        self.inner.list().await
    }
    async fn list_snapshots(&self) -> session_persist::Result<Vec<(SessionHeader, Revision)>> {
        self.inner.list_snapshots().await
    }
}

// persistence §7.3 #25
#[tokio::test]
async fn prepare_reloads_the_committed_graph_after_another_writer() {
    let backend = mem();
    backend.inject(
        "external",
        header("external"),
        vec![ev(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        )],
    );
    let wrapped = AfterRepair {
        inner: backend.clone(),
        then: |b, id| {
            let mut events = b.stored_events(id).unwrap();
            let n = events.len() as u64;
            events.push(ev(&format!(
                r#"{{"type":"turn/start","seq":{n},"time":3,"data":{{"turn":2}}}}"#
            )));
            events.push(ev(&format!(
                r#"{{"type":"turn/end","seq":{},"time":4,"data":{{"turn":2,"reason":{{"kind":"completed"}}}}}}"#,
                n + 1
            )));
            b.inject(id, b.stored_header(id).unwrap(), events);
        },
    };
    let (p, _) = service(Arc::new(wrapped), &store());
    let prep = p.prepare("external", None).await.unwrap();
    assert_eq!(
        types(prep.session().events().iter().cloned()),
        [
            "turn/start",
            "turn/end",
            "turn/start",
            "turn/end",
            "session/end-seed"
        ]
    );
    assert_eq!(backend.loads(), 2);
    assert_eq!(backend.repairs(), 1);
}

// persistence §7.3 #26
#[tokio::test]
async fn prepare_rejects_when_storage_disappears_after_repair() {
    let backend = mem();
    backend.inject(
        "gone",
        header("gone"),
        vec![ev(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        )],
    );
    let wrapped = AfterRepair {
        inner: backend.clone(),
        then: |b, id| {
            b.remove(id);
        },
    };
    let (p, _) = service(Arc::new(wrapped), &store());
    let err = p.prepare("gone", None).await.unwrap_err();
    assert_eq!(err.to_string(), r#"session "gone" not found"#);
    assert_eq!(backend.repairs(), 1);
    assert_eq!(backend.loads(), 2);
}

// persistence §7.3 #27
#[tokio::test]
async fn a_second_prepare_waits_for_the_first_and_reuses_it() {
    let backend = mem();
    one_turn(&backend, "wait");
    let (p, _) = with(&backend, &store());
    let first = p.prepare("wait", None).await.unwrap();
    let waiting = tokio::spawn({
        let p = p.clone();
        async move { p.prepare("wait", None).await }
    });
    settle().await;
    assert!(!waiting.is_finished());
    let session = first.session().clone();
    first.dispose();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.session().ptr_eq(&session));
    assert_eq!(backend.loads(), 1);
}

// persistence §7.3 #28
#[tokio::test]
async fn the_lru_evicts_only_ready_entries() {
    let backend = mem();
    one_turn(&backend, "a");
    one_turn(&backend, "b");
    let (p, _) = service_with(
        Arc::new(backend.clone()),
        &store(),
        PersistenceOptions {
            prepared_session_cache_size: 1,
            ..PersistenceOptions::default()
        },
    );
    p.inspect("a", None).await.unwrap();
    p.inspect("b", None).await.unwrap();
    p.inspect("a", None).await.unwrap();
    assert_eq!(backend.loads(), 3);
}

// persistence §7.3 #29
#[tokio::test]
async fn append_is_refused_while_a_preparation_is_reserved() {
    let backend = mem();
    one_turn(&backend, "reserved");
    let (p, _) = with(&backend, &store());
    let prep = p.prepare("reserved", None).await.unwrap();
    let err = p
        .append(
            "reserved",
            &[ev(
                r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#,
            )],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"cannot append session "reserved" while its persisted preparation is reserved"#
    );
    drop(prep);
}

// persistence §7.3 #30
#[tokio::test]
async fn a_queued_cancelled_inspect_rejects_promptly_and_the_chain_stays_healthy() {
    let backend = mem();
    one_turn(&backend, "queued");
    let (p, _) = with(&backend, &store());
    let gate = backend.hold(GateKind::Load);
    let prior = tokio::spawn({
        let p = p.clone();
        async move { p.inspect("queued", None).await }
    });
    gate.wait_arrived(1).await;
    let token = CancelToken::new();
    let queued = tokio::spawn({
        let (p, token) = (p.clone(), token.clone());
        async move { p.inspect("queued", Some(&token)).await }
    });
    settle().await;
    let r = reason("queued inspect cancelled");
    token.cancel_with(r.clone());
    assert!(is_reason(&queued.await.unwrap().unwrap_err(), &r));
    assert_eq!(backend.loads(), 1);
    let subsequent = tokio::spawn({
        let p = p.clone();
        async move { p.inspect("queued", None).await }
    });
    gate.open();
    assert_eq!(&*prior.await.unwrap().unwrap().meta.id, "queued");
    assert_eq!(&*subsequent.await.unwrap().unwrap().meta.id, "queued");
    assert_eq!(backend.loads(), 1);
    wait_until("the chains to drain", || p.pending_operations() == 0).await;
}

// persistence §7.3 #31
#[tokio::test]
async fn cancelling_the_inspect_that_started_a_shared_read_does_not_kill_it() {
    let backend = mem();
    one_turn(&backend, "shared");
    let (p, _) = with(&backend, &store());
    let gate = backend.hold(GateKind::Load);
    let token = CancelToken::new();
    let inspection = tokio::spawn({
        let (p, token) = (p.clone(), token.clone());
        async move { p.inspect("shared", Some(&token)).await }
    });
    gate.wait_arrived(1).await;
    let reservation = tokio::spawn({
        let p = p.clone();
        async move { p.prepare("shared", None).await }
    });
    settle().await;
    let r = reason("creating inspect cancelled");
    token.cancel_with(r.clone());
    assert!(is_reason(&inspection.await.unwrap().unwrap_err(), &r));
    gate.open();
    let prepared = reservation.await.unwrap().unwrap();
    assert_eq!(&*prepared.session().id(), "shared");
    assert_eq!(backend.loads(), 1);
}

// persistence §7.3 #32
#[tokio::test]
async fn inspect_cancellation_wins_over_a_session_that_became_live() {
    let backend = mem();
    one_turn(&backend, "cancel-live");
    let store = store();
    let (p, _) = with(&backend, &store);
    backend.fail_next_load("load stopped after cancellation");
    let gate = backend.hold(GateKind::Load);
    let token = CancelToken::new();
    let inspection = tokio::spawn({
        let (p, token) = (p.clone(), token.clone());
        async move { p.inspect("cancel-live", Some(&token)).await }
    });
    gate.wait_arrived(1).await;
    let d = enter_unannounced(&store, "cancel-live");
    let r = reason("inspect cancelled while publishing");
    token.cancel_with(r.clone());
    gate.open();
    assert!(is_reason(&inspection.await.unwrap().unwrap_err(), &r));
    d.detach();
}

/// A memory backend with a scripted seeking read.
struct Seeking {
    inner: MemoryBackend,
    mode: std::sync::Mutex<SeekMode>,
    gate: session_persist::memory::Gate,
}

#[derive(Clone, Copy)]
enum SeekMode {
    Suffix,
    Fail,
    FailAfterGate,
}

#[async_trait]
impl Backend for Seeking {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn load_stored(&self, id: &str) -> session_persist::Result<Option<StoredPrefix>> {
        self.inner.load_stored(id).await
    }
    async fn read_stored_revision(&self, id: &str) -> session_persist::Result<Option<Revision>> {
        self.inner.read_stored_revision(id).await
    }
    fn supports_seek(&self) -> bool {
        true
    }
    async fn load_stored_from(
        &self,
        id: &str,
        from: u64,
    ) -> session_persist::Result<Option<StoredSuffix>> {
        let mode = *self.mode.lock().unwrap();
        match mode {
            SeekMode::Suffix => Ok(self.inner.load_stored(id).await?.map(|s| StoredSuffix {
                meta: s.meta,
                header_value: s.header_value,
                events: s.events.into_iter().filter(|e| e.seq() >= from).collect(),
            })),
            SeekMode::Fail => Err(Error::Backend("seek backend exploded".into())),
            SeekMode::FailAfterGate => {
                self.gate.pass().await;
                Err(Error::Backend("backend teardown after abort".into()))
            }
        }
    }
    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        m: bool,
    ) -> session_persist::Result<()> {
        self.inner.append_batch(meta, events, m).await
    }
    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> session_persist::Result<()> {
        self.inner.commit_repair(meta, torn, closers).await
    }
    async fn list(&self) -> session_persist::Result<Vec<SessionHeader>> {
        self.inner.list().await
    }
    async fn list_snapshots(&self) -> session_persist::Result<Vec<(SessionHeader, Revision)>> {
        self.inner.list_snapshots().await
    }
}

// `create` tests existence with the revision lookup alone: it never reads a stored log, so a
// log whose read would fail still counts as persisted, and a fresh id costs no read either.
#[tokio::test]
async fn create_checks_existence_without_reading_the_log() {
    let backend = mem();
    one_turn(&backend, "on-disk");
    let (p, _) = with(&backend, &store());
    backend.clear_calls();
    backend.fail_next_load("create read the whole log");
    let err = p.create(&meta("on-disk")).await.unwrap_err();
    assert!(matches!(err, Error::AlreadyPersisted { .. }), "{err}");
    p.create(&meta("fresh")).await.unwrap();
    assert_eq!(backend.loads(), 0, "{:?}", backend.calls());
}

// persistence §7.3 #33
#[tokio::test]
async fn read_from_through_a_seek_hook() {
    let inner = mem();
    one_turn(&inner, "seek");
    let seeking = Arc::new(Seeking {
        inner: inner.clone(),
        mode: std::sync::Mutex::new(SeekMode::Suffix),
        gate: session_persist::memory::Gate::new(),
    });
    let (p, _) = service(seeking.clone(), &store());
    let suffix = p.read_from("seek", 3, None).await.unwrap();
    assert_eq!(suffix.events, turn_events(0, 1)[3..].to_vec());
    assert_eq!(inner.loads(), 1, "only the suffix read");
    assert!(
        p.read_from("missing-seek", 0, None)
            .await
            .unwrap_err()
            .to_string()
            .contains("not found")
    );
    *seeking.mode.lock().unwrap() = SeekMode::Fail;
    assert_eq!(
        p.read_from("seek", 0, None).await.unwrap_err().to_string(),
        "seek backend exploded"
    );
    *seeking.mode.lock().unwrap() = SeekMode::FailAfterGate;
    let token = CancelToken::new();
    let pending = tokio::spawn({
        let (p, token) = (p.clone(), token.clone());
        async move { p.read_from("seek", 0, Some(&token)).await }
    });
    seeking.gate.wait_arrived(1).await;
    let r = reason("read-from cancelled mid-hook");
    token.cancel_with(r.clone());
    seeking.gate.open();
    assert!(is_reason(&pending.await.unwrap().unwrap_err(), &r));
}

// persistence §7.3 #34
#[tokio::test]
async fn a_cancelled_inspect_does_not_wait_for_a_pending_retirement() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    let gate = backend.hold(GateKind::Append);
    let (session, detach) = live(&store, "retiring-inspect", None);
    session.append(turn_start(1)).unwrap();
    session.append(turn_end(1)).unwrap();
    detach.detach();
    gate.wait_arrived(1).await;
    assert!(p.retiring("retiring-inspect"));
    let loads = backend.loads();
    let token = CancelToken::new();
    let pending = tokio::spawn({
        let (p, token) = (p.clone(), token.clone());
        async move { p.inspect("retiring-inspect", Some(&token)).await }
    });
    settle().await;
    let r = reason("inspect cancelled during retirement");
    token.cancel_with(r.clone());
    assert!(is_reason(&pending.await.unwrap().unwrap_err(), &r));
    assert_eq!(backend.loads(), loads);
    gate.open();
    wait_until("the retirement to finish", || {
        !p.retiring("retiring-inspect")
    })
    .await;
}

// persistence §7.3 #35
#[tokio::test]
async fn a_retiring_unmaterialized_owner_releases_its_id() {
    let backend = mem();
    let store = store();
    let (_p, _) = with(&backend, &store);
    let gate = backend.hold(GateKind::Load);
    let (_first, detach) = live(&store, "lazy-owner", None);
    gate.wait_arrived(1).await;
    detach.detach();
    let (reuse, detach) = live(&store, "lazy-owner", None);
    let flush = tokio::spawn(store.flush(&reuse));
    gate.open();
    assert!(flush.await.unwrap().unwrap());
    detach.detach();
}

// persistence §7.3 #36
#[tokio::test]
async fn a_superseded_retirement_keeps_its_successor() {
    let inner = mem();
    let seeking = Arc::new(Seeking {
        inner: inner.clone(),
        mode: std::sync::Mutex::new(SeekMode::FailAfterGate),
        gate: session_persist::memory::Gate::new(),
    });
    let store = store();
    let (p, _) = service(seeking.clone(), &store);
    let (first, detach_first) = live(&store, "superseded", None);
    store.flush(&first).await.unwrap();
    // Park the id's chain on a held read.
    let parked = tokio::spawn({
        let p = p.clone();
        async move { p.read_from("superseded", 0, None).await }
    });
    seeking.gate.wait_arrived(1).await;
    detach_first.detach();
    wait_until("the first retirement", || p.retiring("superseded")).await;
    // A successor retires while the first drain is still queued; its drain is held too.
    let append_gate = inner.hold(GateKind::Append);
    let (second, detach_second) = live(&store, "superseded", None);
    second.append(turn_start(1)).unwrap();
    detach_second.detach();
    settle().await;
    assert_eq!(p.live_sessions(), 2);
    seeking.gate.open();
    assert!(parked.await.unwrap().is_err());
    wait_until("the first drain", || p.live_sessions() == 1).await;
    settle().await;
    assert!(
        p.retiring("superseded"),
        "the first drain did not remove its successor's entry"
    );
    append_gate.open();
    wait_until("the second drain", || !p.retiring("superseded")).await;
    assert_eq!(inner.stored_seqs("superseded"), [0]);
}

// persistence §7.3 #37
#[tokio::test]
async fn a_replacement_queued_before_retirement_cleanup_collides() {
    let backend = mem();
    let store = store();
    let (_p, _) = fast(&backend, &store);
    let (first, detach) = live(&store, "retiring-owner", None);
    store.flush(&first).await.unwrap();
    let gate = backend.hold(GateKind::Append);
    first.append(turn_start(1)).unwrap();
    first.append(turn_end(1)).unwrap();
    gate.wait_arrived(1).await;
    detach.detach();
    let (reuse, detach) = live(&store, "retiring-owner", None);
    let flush = tokio::spawn(store.flush(&reuse));
    gate.open();
    let err = flush.await.unwrap().unwrap_err().to_string();
    assert!(err.contains("bound to a different live session"), "{err}");
    assert_eq!(backend.stored_seqs("retiring-owner"), [0, 1]);
    detach.detach();
}

// persistence §7.3 #38
#[tokio::test]
async fn a_racing_cold_load_survives_retirement_cleanup() {
    let backend = mem();
    let store = store();
    let (p, _) = fast(&backend, &store);
    let (first, detach) = live(&store, "buffered-owner", None);
    store.flush(&first).await.unwrap();
    let append_gate = backend.hold(GateKind::Append);
    first.append(turn_start(1)).unwrap();
    first.append(turn_end(1)).unwrap();
    append_gate.wait_arrived(1).await;
    detach.detach();
    let loads = backend.loads();
    let load_gate = backend.hold(GateKind::Load);
    let cold = tokio::spawn({
        let p = p.clone();
        async move { p.load("buffered-owner").await }
    });
    append_gate.open();
    wait_until("the cold read", || backend.loads() == loads + 1).await;
    let err = store
        .create(Some("buffered-owner"), PrepareOptions::default())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("persisted state already owns this identity"),
        "{err}"
    );
    load_gate.open();
    let loaded = cold.await.unwrap().unwrap();
    assert_eq!(seqs(loaded.events.iter().cloned()), [0, 1]);
    let (reuse, detach) = live(&store, "buffered-owner", None);
    let err = store.flush(&reuse).await.unwrap_err().to_string();
    assert!(err.contains("id collision"), "{err}");
    assert_eq!(backend.stored_seqs("buffered-owner"), [0, 1]);
    detach.detach();
}

// persistence §7.3 #39
#[tokio::test]
async fn a_settled_chain_tail_does_not_delete_a_newer_operation() {
    let backend = mem();
    let (p, _) = with(&backend, &store());
    p.create(&meta("chain-tail")).await.unwrap();
    let first_gate = backend.hold(GateKind::Append);
    let first = tokio::spawn({
        let p = p.clone();
        async move {
            p.append(
                "chain-tail",
                &[ev(
                    r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
                )],
            )
            .await
        }
    });
    let second = tokio::spawn({
        let p = p.clone();
        async move {
            p.append("chain-tail", &[ev(r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#)])
                .await
        }
    });
    first_gate.wait_arrived(1).await;
    let second_gate = backend.hold(GateKind::Append);
    first_gate.open();
    second_gate.wait_arrived(1).await;
    assert_eq!(p.pending_operations(), 1);
    second_gate.open();
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    wait_until("the chain to drain", || p.pending_operations() == 0).await;
    assert_eq!(backend.stored_seqs("chain-tail"), [0, 1]);
}

fn last_calls(backend: &MemoryBackend, n: usize) -> Vec<MemoryCall> {
    let calls = backend.calls();
    calls[calls.len().saturating_sub(n)..].to_vec()
}

// persistence §7.3 #40
#[tokio::test]
async fn teardown_retries_a_failed_retirement_before_close() {
    let backend = mem();
    let store = store();
    let (p, warnings) = with(&backend, &store);
    backend.fail_appends(Some("transient append failure"));
    let (session, detach) = live(&store, "retry-retirement", None);
    session.append(turn_start(1)).unwrap();
    session.append(turn_end(1)).unwrap();
    detach.detach();
    wait_until("the failed retirement", || {
        !p.retiring("retry-retirement") && backend.appends() >= 1
    })
    .await;
    assert_eq!(
        p.pending_events(&session),
        Some(2),
        "the events stay buffered"
    );
    assert!(warnings.all().iter().any(|w| w
        == r#"session-persistence-memory: session "retry-retirement" retirement failed: Error: transient append failure"#));
    backend.fail_appends(None);
    p.dispose().await.unwrap();
    assert_eq!(backend.stored_seqs("retry-retirement"), [0, 1]);
    assert_eq!(
        last_calls(&backend, 2),
        [
            MemoryCall::AppendBatch {
                id: "retry-retirement".into(),
                seqs: vec![0, 1],
                materialized: false
            },
            MemoryCall::Close
        ]
    );
}

// persistence §7.3 #41
#[tokio::test]
async fn teardown_waits_for_an_in_flight_retirement() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    let gate = backend.hold(GateKind::Append);
    let (session, detach) = live(&store, "inflight-retirement", None);
    session.append(turn_start(1)).unwrap();
    session.append(turn_end(1)).unwrap();
    detach.detach();
    gate.wait_arrived(1).await;
    let teardown = tokio::spawn({
        let p = p.clone();
        async move { p.dispose().await }
    });
    settle().await;
    assert!(!teardown.is_finished());
    assert!(!backend.calls().contains(&MemoryCall::Close));
    gate.open();
    teardown.await.unwrap().unwrap();
    assert_eq!(backend.stored_seqs("inflight-retirement"), [0, 1]);
    assert_eq!(last_calls(&backend, 1), [MemoryCall::Close]);
    assert_eq!(backend.count(|c| *c == MemoryCall::Close), 1);
}

// persistence §7.3 #42
#[tokio::test]
async fn teardown_waits_for_a_detached_public_append() {
    let backend = mem();
    let (p, _) = with(&backend, &store());
    p.create(&meta("inflight-public")).await.unwrap();
    let gate = backend.hold(GateKind::Append);
    let append = tokio::spawn({
        let p = p.clone();
        async move {
            p.append(
                "inflight-public",
                &[ev(
                    r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
                )],
            )
            .await
        }
    });
    gate.wait_arrived(1).await;
    let teardown = tokio::spawn({
        let p = p.clone();
        async move { p.dispose().await }
    });
    settle().await;
    assert!(!teardown.is_finished());
    gate.open();
    append.await.unwrap().unwrap();
    teardown.await.unwrap().unwrap();
    assert!(matches!(
        last_calls(&backend, 2)[0],
        MemoryCall::AppendBatch { .. }
    ));
    assert_eq!(last_calls(&backend, 1), [MemoryCall::Close]);
}

// persistence §7.3 #43
#[tokio::test]
async fn the_default_prepare_works_and_honours_cancellation() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    let m = meta("default-preparation");
    p.create(&m).await.unwrap();
    p.append(&m.id, &turn_events(0, 1)).await.unwrap();
    let minimal = Minimal {
        inner: p.clone(),
        store: Some(store.clone()),
        cancel_after_load: None,
    };
    let prep = minimal.prepare(&m.id, None).await.unwrap();
    let mut expected = m.clone();
    expected.delegation_depth = Some(0);
    assert_eq!(prep.session().header(), expected);
    prep.dispose();

    let pre = reason("pre-aborted preparation");
    let err = minimal
        .prepare(&m.id, Some(&CancelToken::cancelled_with(pre.clone())))
        .await
        .err()
        .unwrap();
    assert!(is_reason(&err, &pre));

    let post_token = CancelToken::new();
    let post = reason("post-load preparation abort");
    let minimal = Minimal {
        inner: p.clone(),
        store: Some(store.clone()),
        cancel_after_load: Some((post_token.clone(), post.clone())),
    };
    let err = minimal
        .prepare(&m.id, Some(&post_token))
        .await
        .err()
        .unwrap();
    assert!(is_reason(&err, &post));
}

// persistence §7.3 #44
#[tokio::test]
async fn the_default_prepare_needs_a_store() {
    let backend = mem();
    one_turn(&backend, "no-store");
    let (p, _) = with(&backend, &store());
    let minimal = Minimal {
        inner: p,
        store: None,
        cancel_after_load: None,
    };
    assert_eq!(
        minimal
            .prepare("no-store", None)
            .await
            .err()
            .unwrap()
            .to_string(),
        "cannot prepare a session: SessionStore is not configured"
    );
}

// persistence §7.3 #45 (registration is the store wiring: disposal removes it)
#[tokio::test]
async fn disposal_unregisters_the_service() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    p.dispose().await.unwrap();
    let (session, detach) = live(&store, "after-dispose", None);
    session.append(turn_start(1)).unwrap();
    assert!(
        !store.flush(&session).await.unwrap(),
        "no flush listener any more"
    );
    assert!(backend.stored_events("after-dispose").is_none());
    assert_eq!(
        p.load("after-dispose").await.unwrap_err().to_string(),
        "session-persistence-memory is closed"
    );
    detach.detach();
}

// persistence §7.3 #46
#[tokio::test]
async fn round_trip_through_the_service_trait() {
    let backend = mem();
    let (p, _) = with(&backend, &store());
    let svc: Arc<dyn SessionPersistence> = Arc::new(p);
    let m = meta("reg");
    svc.create(&m).await.unwrap();
    svc.append(&m.id, &turn_events(0, 1)).await.unwrap();
    assert_eq!(svc.load(&m.id).await.unwrap().events.len(), 6);
}

// persistence §7.3 #47 (a non-JSON value Rust can hold: `-0`)
#[tokio::test]
async fn non_json_metadata_is_refused_before_registration() {
    let (p, _) = with(&mem(), &store());
    let mut m = meta("invalid-meta");
    m.extra.push(("x".into(), v("-0")));
    assert_eq!(
        p.create(&m).await.unwrap_err().to_string(),
        "session metadata must be losslessly JSON-serializable"
    );
    assert_eq!(p.tracked_sessions(), 0);
}

// persistence §7.3 #48, #49
#[tokio::test]
async fn live_legacy_appends_are_refused_at_the_session() {
    let store = store();
    let (_p, _) = with(&mem(), &store);
    let (session, detach) = live(&store, "legacy-live", Some("/legacy"));
    let err = session
        .append(Draft::new(
            "request/header-delta",
            v(r#"{"config":{"model":"legacy"}}"#),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unsupported legacy request/header-delta format"),
        "{err}"
    );
    let err = session
        .append(Draft::new(
            "request/header",
            v(r#"{"header":{"config":{"model":"legacy"}},"reason":"fallback"}"#),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"unsupported legacy request/header reason "fallback""#),
        "{err}"
    );
    assert_eq!(session.seq(), 0);
    detach.detach();
}

// persistence §7.3 #50
#[tokio::test]
async fn a_stored_legacy_prefix_is_refused_during_live_adoption() {
    let backend = mem();
    let mut m = meta("legacy-hmr");
    m.cwd = Some("/legacy".into());
    m.delegation_depth = Some(0);
    backend.inject(
        "legacy-hmr",
        m.to_value(),
        vec![ev(r#"{"type":"request/header-delta","seq":0,"time":1,"data":{"config":{"model":"legacy"}}}"#)],
    );
    let store = store();
    let (session, detach) = live(&store, "legacy-hmr", Some("/legacy"));
    let (_p, _) = with(&backend, &store);
    let err = store.flush(&session).await.unwrap_err().to_string();
    assert!(
        err.contains("unsupported legacy request/header-delta event at seq 0"),
        "{err}"
    );
    detach.detach();
}

// persistence §7.3 #51, #52
#[tokio::test]
async fn stored_legacy_shapes_are_refused_on_load() {
    let backend = mem();
    backend.inject(
        "legacy-fallback",
        header("legacy-fallback"),
        vec![ev(r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"legacy"}},"reason":"fallback"}}"#)],
    );
    backend.inject(
        "legacy-mode",
        header("legacy-mode"),
        vec![ev(
            r#"{"type":"mode/set","seq":0,"time":1,"data":{"mode":"plan"}}"#,
        )],
    );
    let (p, _) = with(&backend, &store());
    let err = p.load("legacy-fallback").await.unwrap_err().to_string();
    assert!(
        err.contains(r#"unsupported legacy request/header reason "fallback" at seq 0"#),
        "{err}"
    );
    let err = p.load("legacy-mode").await.unwrap_err().to_string();
    assert!(
        err.contains("unsupported legacy mode/set event at seq 0"),
        "{err}"
    );
}

// persistence §7.3 #53
#[tokio::test]
async fn disposed_sessions_leave_no_bookkeeping() {
    let backend = mem();
    let store = store();
    let (p, _) = with(&backend, &store);
    for i in 0..3 {
        let (session, detach) = live(&store, &format!("disposed-{i}"), None);
        session.append(turn_start(1)).unwrap();
        session.append(turn_end(1)).unwrap();
        store.flush(&session).await.unwrap();
        detach.detach();
    }
    wait_until("bookkeeping to drain", || {
        store.list().is_empty()
            && p.tracked_sessions() == 0
            && p.live_sessions() == 0
            && p.pending_operations() == 0
    })
    .await;
    p.dispose().await.unwrap();
}

// The write path never blocks `append` on storage, and events stay in order across a failure.
#[tokio::test]
async fn a_failing_backend_never_blocks_the_producer() {
    let backend = mem();
    let store = store();
    let (p, warnings) = fast(&backend, &store);
    let (session, detach) = live(&store, "producer", None);
    backend.fail_appends(Some("disk unavailable"));
    for turn in 1..=3 {
        session.append(turn_start(turn)).unwrap();
        session.append(turn_end(turn)).unwrap();
    }
    wait_until("a background failure", || !warnings.all().is_empty()).await;
    assert_eq!(session.seq(), 6);
    assert_eq!(
        store.flush(&session).await.unwrap_err().to_string(),
        "disk unavailable"
    );
    backend.fail_appends(None);
    assert!(store.flush(&session).await.unwrap());
    assert_eq!(backend.stored_seqs("producer"), (0..6).collect::<Vec<_>>());
    detach.detach();
    drop(p);
}

/// Every public future of the service can move between threads.
#[test]
fn public_futures_are_send() {
    fn send<T: Send>(_: T) {}
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let store = store();
    let (p, _) = with(&mem(), &store);
    let (session, detach) = live(&store, "send", None);
    let m = meta("send");
    let token = CancelToken::new();
    send(p.create(&m));
    send(p.append("send", &[]));
    send(p.load("send"));
    send(p.inspect("send", Some(&token)));
    send(p.read_from("send", 0, Some(&token)));
    send(p.list(Some(&token)));
    send(p.list_snapshots(Some(&token)));
    send(p.prepare("send", Some(&token)));
    send(p.read_raw("send", Some(&token)));
    send(p.flush(&session));
    send(p.dispose());
    detach.detach();
}

// Many sessions appended from several threads at once, with back-pressure and explicit
// flushes racing the background writes: every event is stored once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_lose_and_reorder_nothing() {
    let backend = mem();
    let store = store();
    let (p, warnings) = service_with(
        Arc::new(backend.clone()),
        &store,
        PersistenceOptions {
            write_batch_max_delay_ms: 1,
            max_pending_bytes: 2_000,
            ..PersistenceOptions::default()
        },
    );
    let mut threads = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        threads.push(std::thread::spawn(move || {
            let id = format!("stress-{n}");
            let (session, detach) = live(&store, &id, None);
            for turn in 1..=50 {
                session.append(turn_start(turn)).unwrap();
                session.append(turn_end(turn)).unwrap();
            }
            (session, detach)
        }));
    }
    let mut sessions = Vec::new();
    for t in threads {
        sessions.push(t.join().unwrap());
    }
    for (session, _) in &sessions {
        assert!(store.flush(session).await.unwrap());
    }
    for (session, detach) in sessions {
        assert_eq!(
            backend.stored_seqs(&session.id()),
            (0..100).collect::<Vec<_>>()
        );
        detach.detach();
    }
    p.dispose().await.unwrap();
    assert!(warnings.all().is_empty(), "{:?}", warnings.all());
    assert_eq!(p.live_sessions(), 0);
}

// A read's prepared session can be taken out of the pool (and dropped or kept by the caller)
// once; the next read loads again.
#[tokio::test]
async fn a_prepared_session_is_taken_once_and_the_next_read_loads_again() {
    let backend = mem();
    one_turn(&backend, "taken");
    let (p, _) = with(&backend, &store());
    assert!(p.take_prepared("taken").is_none(), "nothing read yet");
    let first = p.inspect("taken", None).await.unwrap();
    assert_eq!(p.cached_preparations(), 1);
    let loads = backend.loads();
    let prepared = p.take_prepared("taken");
    assert!(prepared.is_some(), "the read's preparation is ready");
    assert_eq!(p.cached_preparations(), 0);
    assert!(p.take_prepared("taken").is_none(), "taken once");
    drop(prepared);
    let again = p.inspect("taken", None).await.unwrap();
    assert_eq!(backend.loads(), loads + 1, "the next read loads again");
    assert_eq!(again.events.len(), first.events.len());
}
