//! The reusable backend suite: one named async case per behaviour of the storage-backend
//! contract ([`Backend`]), which any backend, in this workspace or in another crate, runs
//! against itself.
//!
//! # Running the suite on a backend
//!
//! A backend author writes a [`Harness`]: how to open a backend over fresh, empty storage, how
//! to reopen the same storage as a restart would, and which [`Capabilities`] the backend has.
//! Then one line in a test file expands every case into its own `#[test]`, each with its own
//! tokio runtime, so a failure names the behaviour:
//!
//! ```
//! // tests/backend_suite.rs of the backend's crate (conformance as a dev-dependency)
//! # use conformance::backend_suite::harnesses::MemoryHarness as MyHarness;
//! conformance::backend_suite!(MyHarness::new());
//! # fn main() {}
//! ```
//!
//! Cases are listed once (the macro) and exported by name in [`CASES`]; [`run_case`] and
//! [`run_all`] run them without the macro. A case whose capability the harness does not declare
//! checks nothing and passes; it is recorded as not applicable ([`Verdict::NotApplicable`],
//! from [`run_case_verdict`]), and [`not_applicable`] lists every such case of a harness, so a
//! backend's tests assert the exact list (`conformance/tests/backend_suite.rs` does for the
//! workspace's backends) instead of printing a line nobody sees. Differences between backends
//! are capabilities, never forks of the suite.
//!
//! What the cases check is the contract written on [`session_persist::backend`]: absence is
//! `None` and never papered over; reads are observations; the stored prefix is contiguous,
//! ordered and JSON-identical to what was appended, whatever the batch split or size; a first
//! append publishes header and batch together and refuses an existing artifact; revisions are
//! stable until an append or a mutating repair and differ between stores; torn tails are
//! reported (never as corruption), cut by the repair and followed by the closers; listing shows
//! exactly the materialized sessions; acknowledged appends survive a restart; one writer per
//! session when the backend enforces it. A few cases run the persistence service
//! ([`session_persist::Persistence`]) over the backend, for the rules the coordinator enforces on
//! top of it (contiguity of appends, crash closers on load, reads from a seq).
//!
//! Ready-made harnesses for the workspace's backends are in [`harnesses`]; the events the cases
//! write are in [`fixtures`].
//!
//! # Example: an outside backend runs the suite
//!
//! The memory backend stands in for a backend written elsewhere. The harness keeps track of
//! which storage each backend instance it handed out belongs to ([`Storages`]) so that
//! [`Harness::reopen`] can open a new instance over the same storage:
//!
//! ```
//! use std::sync::Arc;
//!
//! use conformance::backend_suite::{self, Capabilities, Harness, Storages, async_trait};
//! use session_persist::Backend;
//! use session_persist::memory::MemoryBackend;
//!
//! #[derive(Default)]
//! struct MemoryHarness {
//!     storages: Storages<MemoryBackend>,
//! }
//!
//! #[async_trait]
//! impl Harness for MemoryHarness {
//!     async fn open(&self) -> Arc<dyn Backend> {
//!         let storage = MemoryBackend::new();
//!         let backend: Arc<dyn Backend> = Arc::new(storage.clone());
//!         self.storages.register(&backend, storage);
//!         backend
//!     }
//!
//!     async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
//!         let storage = self.storages.get(&old).expect("a backend of this harness");
//!         let _ = old.close().await;
//!         let backend: Arc<dyn Backend> = Arc::new(storage.reopen());
//!         self.storages.register(&backend, storage);
//!         backend
//!     }
//!
//!     fn capabilities(&self) -> Capabilities {
//!         Capabilities::none()
//!             .with_revision_changes_on_append()
//!             .with_seq_checks()
//!     }
//! }
//!
//! let harness = MemoryHarness::default();
//! backend_suite::run_case(&harness, "create_append_load_round_trip")?;
//! backend_suite::run_case(&harness, "every_flushed_event_survives_reopen")?;
//! // A skipped case passes (and says so on standard error).
//! backend_suite::run_case(&harness, "repair_truncates_torn_tail_and_appends_closers")?;
//! assert!(backend_suite::run_case(&harness, "no_such_case").is_err());
//! # Ok::<(), conformance::backend_suite::SuiteFailure>(())
//! ```
//!
//! In the backend's own `tests/` directory the same harness runs every case as a named test
//! with `conformance::backend_suite!(MemoryHarness::default());`.

mod cases;
pub mod fixtures;
pub mod harnesses;

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};

pub use async_trait::async_trait;
use session_core::{Event, SessionHeader};
use session_persist::Backend;

pub use self::cases::*;

/// What a backend under test supports beyond the mandatory contract. Cases that need a
/// capability the harness does not declare are skipped loudly.
///
/// Build one with [`Capabilities::none`] and the `with_*` methods (the struct may grow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[allow(clippy::struct_excessive_bools)] // independent capability flags, one per feature
pub struct Capabilities {
    /// The backend reports torn tails ([`StoredPrefix::torn`](session_persist::StoredPrefix))
    /// and the harness can produce one with [`Harness::tear_append`].
    pub torn_tails: bool,
    /// The backend implements seeking reads ([`Backend::load_stored_from`]).
    pub seek: bool,
    /// The backend exposes raw artifacts ([`Backend::read_raw`]).
    pub raw_artifacts: bool,
    /// The backend enforces one writer per session across instances, and the harness can
    /// open a second live instance with [`Harness::open_concurrent`].
    pub writer_lock: bool,
    /// Revisions change after every append and every mutating repair.
    pub revision_changes_on_append: bool,
    /// The backend itself refuses an append whose first seq does not continue the stored log
    /// (the contract leaves this to the caller; the coordinator always checks).
    pub seq_checks: bool,
    /// The backend stores an event field by field rather than as text, and gives every event
    /// back with its envelope keys in the live-append order (`type, seq, time, data,
    /// sourceEventSeqs?, surfaceOp?, ignorable?`) whatever order it was appended in (a crash
    /// closer's `surfaceOp, sourceEventSeqs`, a parsed line's own order). The cases then expect
    /// that order; `data` must still be identical, key order and number spelling included.
    /// Without it, every event must come back exactly as appended.
    pub fixed_envelope_order: bool,
}

impl Capabilities {
    /// No optional capability.
    pub const fn none() -> Capabilities {
        Capabilities {
            torn_tails: false,
            seek: false,
            raw_artifacts: false,
            writer_lock: false,
            revision_changes_on_append: false,
            seq_checks: false,
            fixed_envelope_order: false,
        }
    }

    /// With [`Capabilities::torn_tails`].
    #[must_use]
    pub const fn with_torn_tails(mut self) -> Capabilities {
        self.torn_tails = true;
        self
    }

    /// With [`Capabilities::seek`].
    #[must_use]
    pub const fn with_seek(mut self) -> Capabilities {
        self.seek = true;
        self
    }

    /// With [`Capabilities::raw_artifacts`].
    #[must_use]
    pub const fn with_raw_artifacts(mut self) -> Capabilities {
        self.raw_artifacts = true;
        self
    }

    /// With [`Capabilities::writer_lock`].
    #[must_use]
    pub const fn with_writer_lock(mut self) -> Capabilities {
        self.writer_lock = true;
        self
    }

    /// With [`Capabilities::revision_changes_on_append`].
    #[must_use]
    pub const fn with_revision_changes_on_append(mut self) -> Capabilities {
        self.revision_changes_on_append = true;
        self
    }

    /// With [`Capabilities::seq_checks`].
    #[must_use]
    pub const fn with_seq_checks(mut self) -> Capabilities {
        self.seq_checks = true;
        self
    }

    /// With [`Capabilities::fixed_envelope_order`].
    #[must_use]
    pub const fn with_fixed_envelope_order(mut self) -> Capabilities {
        self.fixed_envelope_order = true;
        self
    }
}

/// How the suite gets backends to test. One harness value serves any number of cases; every
/// [`Harness::open`] must give storage of its own.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A backend over fresh, empty storage.
    async fn open(&self) -> Arc<dyn Backend>;

    /// A new backend instance over the storage of `old` (a backend this harness handed out),
    /// as after a restart: the harness ends `old` first, the way its process would end (by
    /// closing it, or by dropping it as in a crash, which must not lose acknowledged appends).
    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend>;

    /// What the backend supports (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// A second live instance over the storage of `live`, as another process would open it,
    /// without ending `live`. Needed only with [`Capabilities::writer_lock`]; the default has
    /// none.
    async fn open_concurrent(&self, live: &Arc<dyn Backend>) -> Option<Arc<dyn Backend>> {
        let _ = live;
        None
    }

    /// Leaves storage as a crash in the middle of appending `batch` to the materialized
    /// session `meta` would: part of the batch written, cut inside a record, so that the
    /// backend must report a torn tail. Ends `backend` as a crash does and returns a new
    /// instance over the same storage. Needed only with [`Capabilities::torn_tails`]; the
    /// default refuses.
    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> Result<Arc<dyn Backend>, String> {
        let _ = (backend, meta, batch);
        Err("this harness cannot tear an append".to_owned())
    }
}

/// Why a case failed: what the backend did, against what the contract requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteFailure {
    message: String,
}

impl SuiteFailure {
    /// A failure with this explanation.
    pub fn new(message: impl Into<String>) -> SuiteFailure {
        SuiteFailure {
            message: message.into(),
        }
    }

    /// The explanation.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SuiteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SuiteFailure {}

/// Which storage each backend instance a harness handed out belongs to, so that
/// [`Harness::reopen`] can find the storage of the instance it is given. Instances are matched
/// by identity and forgotten once dropped.
pub struct Storages<S> {
    entries: Mutex<Vec<(Weak<dyn Backend>, S)>>,
}

impl<S> Default for Storages<S> {
    fn default() -> Storages<S> {
        Storages {
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl<S> fmt::Debug for Storages<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Storages")
            .field("instances", &n)
            .finish_non_exhaustive()
    }
}

impl<S: Clone> Storages<S> {
    /// An empty map.
    pub fn new() -> Storages<S> {
        Storages::default()
    }

    /// Records that `backend` works on `storage`.
    pub fn register(&self, backend: &Arc<dyn Backend>, storage: S) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(w, _)| w.strong_count() > 0);
        entries.push((Arc::downgrade(backend), storage));
    }

    /// The storage of `backend`, when this map registered it.
    pub fn get(&self, backend: &Arc<dyn Backend>) -> Option<S> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(w, _)| w.upgrade().is_some_and(|b| Arc::ptr_eq(&b, backend)))
            .map(|(_, s)| s.clone())
    }
}

/// Expands every case of the suite into a `#[test]` function of the same name that runs it
/// against the harness the expression evaluates to (evaluated once per test), on a runtime of
/// its own. Put it in a module per harness when one test file runs several:
///
/// ```
/// mod jsonl_zstd {
///     conformance::backend_suite!(
///         conformance::backend_suite::harnesses::JsonlHarness::new(
///             session_persist::Compression::Zstd,
///         )
///     );
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! backend_suite {
    (@cases $arm:ident $args:tt) => {
        $crate::backend_suite! { @$arm $args
            create_append_load_round_trip,
            first_append_materializes_header_and_batch_atomically,
            append_is_contiguous_and_refuses_gaps,
            reappend_of_stored_seqs_is_refused,
            load_stored_returns_events_in_order_with_identical_json,
            header_round_trips_every_field,
            revision_stable_until_append,
            revision_changes_after_repair,
            revisions_of_different_stores_differ,
            list_shows_only_materialized_sessions,
            list_snapshots_matches_revisions,
            read_from_suffix,
            read_pages_of_the_prefix,
            repair_truncates_torn_tail_and_appends_closers,
            torn_tail_reads_are_observations,
            repair_without_marker_only_appends,
            repair_without_marker_or_closers_changes_nothing,
            closers_survive_reopen,
            unknown_session_is_none,
            batches_of_any_split_load_identically,
            publishing_batches_at_once_stores_what_appending_them_stores,
            large_batch_round_trip,
            every_flushed_event_survives_reopen,
            sessions_are_independent,
            second_writer_is_refused_until_release,
            raw_artifact_holds_the_header_and_events,
            declared_capabilities_match_backend,
            service_round_trip_over_the_backend,
            service_load_repairs_an_interrupted_turn,
            service_load_repairs_a_torn_tail,
        }
    };
    (@tests ($harness:expr) $($case:ident,)*) => {
        $(
            #[test]
            fn $case() {
                $crate::backend_suite::run_test(&$harness, ::std::stringify!($case));
            }
        )*
    };
    (@names () $($case:ident,)*) => {
        &[$(::std::stringify!($case)),*]
    };
    (@dispatch ($name:expr, $harness:expr) $($case:ident,)*) => {
        match $name {
            $(::std::stringify!($case) => ::std::option::Option::Some(
                $crate::backend_suite::boxed($crate::backend_suite::$case($harness)),
            ),)*
            _ => ::std::option::Option::None,
        }
    };
    ($harness:expr $(,)?) => {
        $crate::backend_suite!(@cases tests ($harness));
    };
}

/// The name of every case, in the order the macro runs them.
pub const CASES: &[&str] = crate::backend_suite!(@cases names ());

/// A case's future, boxed.
type CaseFuture<'a> = Pin<Box<dyn Future<Output = Result<(), SuiteFailure>> + 'a>>;

#[doc(hidden)]
pub fn boxed<'a>(future: impl Future<Output = Result<(), SuiteFailure>> + 'a) -> CaseFuture<'a> {
    Box::pin(future)
}

fn case_future<'a>(harness: &'a dyn Harness, case: &str) -> Option<CaseFuture<'a>> {
    crate::backend_suite!(@cases dispatch (case, harness))
}

/// What a case that did not fail did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The case ran its checks.
    Checked,
    /// The case needs a capability the harness does not declare, and checked nothing.
    NotApplicable {
        /// The missing capability (a [`Capabilities`] field name).
        capability: &'static str,
    },
}

thread_local! {
    /// The capability a case running on this thread found missing ([`run_case_verdict`] runs
    /// each case on a current-thread runtime, so the case runs on the caller's thread).
    static NOT_APPLICABLE: std::cell::Cell<Option<&'static str>> =
        const { std::cell::Cell::new(None) };
}

/// Called by a case that stops because the harness lacks `capability`.
fn record_not_applicable(case: &str, capability: &'static str) {
    let _ = case;
    NOT_APPLICABLE.with(|c| c.set(Some(capability)));
}

/// Runs the case named `case` against `harness` on a new tokio runtime. A panic inside the
/// case or the backend is reported as a failure.
///
/// # Errors
/// The case's [`SuiteFailure`]; a failure naming an unknown case.
pub fn run_case(harness: &dyn Harness, case: &str) -> Result<(), SuiteFailure> {
    run_case_verdict(harness, case).map(|_| ())
}

/// [`run_case`], telling a case that checked apart from one that was not applicable.
///
/// # Errors
/// As [`run_case`].
pub fn run_case_verdict(harness: &dyn Harness, case: &str) -> Result<Verdict, SuiteFailure> {
    let Some(future) = case_future(harness, case) else {
        return Err(SuiteFailure::new(format!(
            "unknown backend suite case {case:?}"
        )));
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SuiteFailure::new(format!("cannot start a tokio runtime: {e}")))?;
    NOT_APPLICABLE.with(|c| c.set(None));
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(future)));
    let missing = NOT_APPLICABLE.with(std::cell::Cell::take);
    match outcome {
        Ok(Ok(())) => Ok(
            missing.map_or(Verdict::Checked, |capability| Verdict::NotApplicable {
                capability,
            }),
        ),
        Ok(Err(failure)) => Err(failure),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned());
            Err(SuiteFailure::new(format!("panicked: {what}")))
        }
    }
}

/// Every case that is not applicable to `harness`, with the capability it lacks, in
/// [`CASES`] order (running every case).
///
/// # Errors
/// The first case that fails, named.
pub fn not_applicable(
    harness: &dyn Harness,
) -> Result<Vec<(&'static str, &'static str)>, SuiteFailure> {
    let mut out = Vec::new();
    for case in CASES {
        match run_case_verdict(harness, case) {
            Ok(Verdict::Checked) => {}
            Ok(Verdict::NotApplicable { capability }) => out.push((*case, capability)),
            Err(e) => return Err(SuiteFailure::new(format!("{case}: {e}"))),
        }
    }
    Ok(out)
}

/// Runs every case against `harness`, in [`CASES`] order, and returns each outcome.
pub fn run_all(harness: &dyn Harness) -> Vec<(&'static str, Result<(), SuiteFailure>)> {
    CASES
        .iter()
        .map(|case| (*case, run_case(harness, case)))
        .collect()
}

/// What a test generated by [`backend_suite!`](crate::backend_suite!) runs: the case, with a
/// panic naming it when it fails.
#[doc(hidden)]
pub fn run_test(harness: &dyn Harness, case: &str) {
    if let Err(failure) = run_case(harness, case) {
        panic!("backend suite case {case} failed: {failure}");
    }
}
