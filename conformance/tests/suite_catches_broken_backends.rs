//! The backend suite catches broken backends: wrappers around good backends that lose, reorder
//! or under-persist appended events each make named cases fail, while a faithful wrapper passes
//! every case.

use std::collections::BTreeSet;
use std::sync::Arc;

use conformance::backend_suite::harnesses::{CrashJsonlHarness, MemoryHarness};
use conformance::backend_suite::{self, Capabilities, Harness, Storages, async_trait};
use session_core::{Event, SessionHeader};
use session_persist::{
    Backend, Location, RawArtifact, Result, Revision, StoredPrefix, StoredSuffix, TornMarker,
};

/// What a wrapper does to `append_batch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Nothing: forwards faithfully.
    None,
    /// Stores every event of a batch but the last.
    DropLast,
    /// Stores a batch in reverse order.
    Reverse,
}

/// A backend that forwards every call to `inner`, except that `append_batch` applies `fault`.
struct Wrapper {
    inner: Arc<dyn Backend>,
    fault: Fault,
}

#[async_trait]
impl Backend for Wrapper {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
        self.inner.load_stored(id).await
    }
    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.inner.read_stored_revision(id).await
    }
    fn supports_seek(&self) -> bool {
        self.inner.supports_seek()
    }
    async fn load_stored_from(&self, id: &str, from_seq: u64) -> Result<Option<StoredSuffix>> {
        self.inner.load_stored_from(id, from_seq).await
    }
    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        let batch: Vec<Event> = match self.fault {
            Fault::None => events.to_vec(),
            Fault::DropLast => events[..events.len().saturating_sub(1)].to_vec(),
            Fault::Reverse => events.iter().rev().cloned().collect(),
        };
        self.inner.append_batch(meta, &batch, is_materialized).await
    }
    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()> {
        self.inner.commit_repair(meta, torn, closers).await
    }
    async fn list(&self) -> Result<Vec<SessionHeader>> {
        self.inner.list().await
    }
    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        self.inner.list_snapshots().await
    }
    fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        self.inner.locate(meta)
    }
    fn supports_raw_artifacts(&self) -> bool {
        self.inner.supports_raw_artifacts()
    }
    async fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
        self.inner.read_raw(id).await
    }
    async fn acquire(&self, meta: &SessionHeader, stored: Option<&Revision>) -> Result<()> {
        self.inner.acquire(meta, stored).await
    }
    async fn release(&self, id: &str) -> Result<()> {
        self.inner.release(id).await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

/// A harness handing out `Wrapper`s around the backends of a good harness.
struct Wrapped<H> {
    good: H,
    fault: Fault,
    inner: Storages<Arc<dyn Backend>>,
}

impl<H: Harness> Wrapped<H> {
    fn new(good: H, fault: Fault) -> Wrapped<H> {
        Wrapped {
            good,
            fault,
            inner: Storages::new(),
        }
    }

    fn wrap(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let wrapper: Arc<dyn Backend> = Arc::new(Wrapper {
            inner: inner.clone(),
            fault: self.fault,
        });
        self.inner.register(&wrapper, inner);
        wrapper
    }

    fn unwrap(&self, wrapper: &Arc<dyn Backend>) -> Arc<dyn Backend> {
        self.inner.get(wrapper).expect("a wrapper of this harness")
    }
}

#[async_trait]
impl<H: Harness> Harness for Wrapped<H> {
    async fn open(&self) -> Arc<dyn Backend> {
        self.wrap(self.good.open().await)
    }
    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let inner = self.unwrap(&old);
        drop(old);
        self.wrap(self.good.reopen(inner).await)
    }
    fn capabilities(&self) -> Capabilities {
        self.good.capabilities()
    }
    async fn open_concurrent(&self, live: &Arc<dyn Backend>) -> Option<Arc<dyn Backend>> {
        let inner = self.unwrap(live);
        Some(self.wrap(self.good.open_concurrent(&inner).await?))
    }
    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> std::result::Result<Arc<dyn Backend>, String> {
        let inner = self.unwrap(&backend);
        drop(backend);
        Ok(self.wrap(self.good.tear_append(inner, meta, batch).await?))
    }
}

/// The cases that fail against `harness`, with their failures printed.
fn failing(harness: &dyn Harness) -> BTreeSet<&'static str> {
    backend_suite::run_all(harness)
        .into_iter()
        .filter_map(|(case, outcome)| {
            outcome.err().map(|failure| {
                eprintln!("{case}: {failure}");
                case
            })
        })
        .collect()
}

#[track_caller]
fn assert_caught(failed: &BTreeSet<&'static str>, must_fail: &[&str], must_pass: &[&str]) {
    for case in must_fail {
        assert!(
            failed.contains(case),
            "{case} did not fail; failing: {failed:?}"
        );
    }
    for case in must_pass {
        assert!(!failed.contains(case), "{case} failed; failing: {failed:?}");
    }
}

/// Cases that never look at what an append stored; no append fault can make them fail.
const UNAFFECTED: &[&str] = &["declared_capabilities_match_backend"];

#[test]
fn faithful_wrappers_pass_every_case() {
    for good in [
        Box::new(Wrapped::new(
            CrashJsonlHarness::new(session_persist::Compression::None),
            Fault::None,
        )) as Box<dyn Harness>,
        Box::new(Wrapped::new(MemoryHarness::new(), Fault::None)),
    ] {
        let failed = failing(good.as_ref());
        assert!(failed.is_empty(), "a faithful wrapper fails {failed:?}");
    }
}

#[test]
fn a_backend_that_drops_the_last_event_of_a_batch_is_caught() {
    let must_fail = [
        "create_append_load_round_trip",
        "first_append_materializes_header_and_batch_atomically",
        "append_is_contiguous_and_refuses_gaps",
        "load_stored_returns_events_in_order_with_identical_json",
        "batches_of_any_split_load_identically",
        "publishing_batches_at_once_stores_what_appending_them_stores",
        "large_batch_round_trip",
        "every_flushed_event_survives_reopen",
        "service_round_trip_over_the_backend",
    ];
    for compression in [
        session_persist::Compression::None,
        session_persist::Compression::Zstd,
    ] {
        let broken = Wrapped::new(CrashJsonlHarness::new(compression), Fault::DropLast);
        assert_caught(&failing(&broken), &must_fail, UNAFFECTED);
    }
    let broken = Wrapped::new(MemoryHarness::new(), Fault::DropLast);
    assert_caught(&failing(&broken), &must_fail, UNAFFECTED);
}

#[test]
fn a_backend_that_reorders_a_batch_is_caught() {
    let must_fail = [
        "create_append_load_round_trip",
        "first_append_materializes_header_and_batch_atomically",
        "load_stored_returns_events_in_order_with_identical_json",
        "batches_of_any_split_load_identically",
        "publishing_batches_at_once_stores_what_appending_them_stores",
        "large_batch_round_trip",
        "every_flushed_event_survives_reopen",
        "service_round_trip_over_the_backend",
    ];
    for compression in [
        session_persist::Compression::None,
        session_persist::Compression::Zstd,
    ] {
        let broken = Wrapped::new(CrashJsonlHarness::new(compression), Fault::Reverse);
        assert_caught(&failing(&broken), &must_fail, UNAFFECTED);
    }
    let broken = Wrapped::new(MemoryHarness::new(), Fault::Reverse);
    assert_caught(&failing(&broken), &must_fail, UNAFFECTED);
}

/// A storage whose durable bytes change only on `fsync`, under a backend whose `fsync`s do
/// nothing: appends are acknowledged but not durable, and a restart (a power loss) shows it.
#[test]
fn a_backend_that_acknowledges_before_durable_is_caught() {
    let must_fail = [
        "create_append_load_round_trip",
        "every_flushed_event_survives_reopen",
        "closers_survive_reopen",
        "batches_of_any_split_load_identically",
        "publishing_batches_at_once_stores_what_appending_them_stores",
        "large_batch_round_trip",
        "service_round_trip_over_the_backend",
        "service_load_repairs_an_interrupted_turn",
    ];
    // Without restarts nothing can tell durable from acknowledged.
    let must_pass = [
        "declared_capabilities_match_backend",
        "append_is_contiguous_and_refuses_gaps",
        "repair_without_marker_only_appends",
        "sessions_are_independent",
    ];
    for compression in [
        session_persist::Compression::None,
        session_persist::Compression::Zstd,
    ] {
        let broken = CrashJsonlHarness::ignoring_sync(compression);
        assert_caught(&failing(&broken), &must_fail, &must_pass);
    }
}
