//! The public service: [`Persistence`], its options, and the store listeners it installs.

use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use session_core::json::{self, MAX_SAFE_INTEGER, Value};
use session_core::{Event, SessionHeader};
use session_store::{BoxError, SessionPreparation, SessionStore, SharedSession, WarningSink};
use tokio::runtime::Handle;
use tokio::sync::watch;

use super::state::{Chains, CoordInner, Core, lock};
use crate::backend::{Backend, Location, RawArtifact};
use crate::cancel::{self, CancelToken};
use crate::error::{Error, Result};
use crate::preparations::{Discard, Preparations};
use crate::promise::{Promise, promise, unshare};
use crate::service::{DetailedInspection, Inspection, SessionSnapshot, StoredEvents};
use crate::write_behind::{DEFAULT_MAX_PENDING_BYTES, WriteBehindOptions};

/// The default number of ready preparations kept for reuse.
pub const DEFAULT_PREPARED_SESSION_CACHE_SIZE: u64 = 5;
/// The default batching window of live sessions, in milliseconds.
pub const DEFAULT_WRITE_BATCH_MAX_DELAY_MS: u64 = 200;
/// The largest accepted batching window, in milliseconds (the largest timer delay Node
/// accepts).
pub const MAX_WRITE_BATCH_DELAY_MS: u64 = 2_147_483_647;

/// Tuning of a [`Persistence`] service.
#[derive(Clone)]
pub struct PersistenceOptions {
    /// How many completed, unpublished preparations are kept for reuse (at least 1).
    pub prepared_session_cache_size: u64,
    /// The fixed batching window of live sessions, in ms (`1..=2147483647`).
    pub write_batch_max_delay_ms: u64,
    /// The back-pressure bound of a live session's write-behind queue, in estimated bytes of
    /// JSON: once reached, a write starts without waiting for the window.
    pub max_pending_bytes: usize,
    /// The runtime that runs background writes and batching timers (its time driver must be
    /// enabled); by default the runtime current when the service is built.
    pub runtime: Option<Handle>,
    /// A redaction hook applied to every event right before it is written (off by default):
    /// the stored copy is the hook's result, the in-memory session keeps the original. See
    /// [`crate::redact`].
    pub redact: Option<crate::redact::Redactor>,
}

impl std::fmt::Debug for PersistenceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistenceOptions")
            .field(
                "prepared_session_cache_size",
                &self.prepared_session_cache_size,
            )
            .field("write_batch_max_delay_ms", &self.write_batch_max_delay_ms)
            .field("max_pending_bytes", &self.max_pending_bytes)
            .field("runtime", &self.runtime)
            .field("redact", &self.redact.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

impl Default for PersistenceOptions {
    fn default() -> PersistenceOptions {
        PersistenceOptions {
            prepared_session_cache_size: DEFAULT_PREPARED_SESSION_CACHE_SIZE,
            write_batch_max_delay_ms: DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            runtime: None,
            redact: None,
        }
    }
}

/// The persistence service (`SessionPersistence` over a `PersistenceCoordinator`): durable
/// sessions for a [`SessionStore`] on any [`Backend`].
///
/// Building one wires it into the store: every announced session gets a write-behind
/// controller, its events are persisted in the background, and `store.flush(session)` waits
/// until they are durable. Cloning gives another handle to the same service. Call
/// [`Persistence::dispose`] to drain and close; dropping the last handle without disposing
/// leaves buffered events unwritten.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use session_core::{FixedClock, json::Value};
/// use session_persist::{Persistence, PersistenceOptions, memory::MemoryBackend};
/// use session_store::{PrepareOptions, SessionStore};
/// use session_surface::Draft;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// rt.block_on(async {
///     let store = SessionStore::new(Arc::new(FixedClock::new(1_000)));
///     let backend = MemoryBackend::new();
///     let persistence =
///         Persistence::new(Arc::new(backend.clone()), store.clone(), PersistenceOptions::default())?;
///
///     let meta = Value::parse(r#"{"cwd":"/work/project"}"#)?;
///     let options = PrepareOptions { meta: Some(meta), ..PrepareOptions::default() };
///     let (session, detach) = store.create(Some("demo"), options)?;
///     session.append(Draft::new("turn/start", Value::parse(r#"{"turn":1}"#)?))?;
///     session.append(Draft::new(
///         "turn/end",
///         Value::parse(r#"{"turn":1,"reason":{"kind":"completed"}}"#)?,
///     ))?;
///
///     // The checkpoint: once this returns, both events are durable.
///     assert!(store.flush(&session).await?);
///     assert_eq!(backend.stored_seqs("demo"), [0, 1]);
///
///     detach.detach();
///     let loaded = persistence.load("demo").await?;
///     assert_eq!(loaded.events.len(), 2);
///     persistence.dispose().await?;
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Persistence {
    pub(super) inner: Arc<CoordInner>,
}

impl fmt::Debug for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Persistence")
            .field("backend", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl Persistence {
    /// Builds the service over `backend` and wires it into `store`. Sessions already live in
    /// the store are adopted at once (the reference's hot-reload seeding). Background work runs
    /// on [`PersistenceOptions::runtime`]; the store's listeners may be called from any thread.
    ///
    /// # Errors
    /// [`Error::InvalidCacheSize`], [`Error::InvalidBatchDelay`]; [`Error::Task`] when no
    /// runtime is given and none is current.
    pub fn new(
        backend: Arc<dyn Backend>,
        store: SessionStore,
        options: PersistenceOptions,
    ) -> Result<Persistence> {
        let cache = options.prepared_session_cache_size;
        if cache < 1 || cache > MAX_SAFE_INTEGER as u64 {
            return Err(Error::InvalidCacheSize);
        }
        let delay = options.write_batch_max_delay_ms;
        if !(1..=MAX_WRITE_BATCH_DELAY_MS).contains(&delay) {
            return Err(Error::InvalidBatchDelay);
        }
        let handle = match options.runtime {
            Some(handle) => handle,
            None => Handle::try_current().map_err(|e| Error::Task {
                message: format!("the persistence service needs a tokio runtime: {e}"),
            })?,
        };
        let inner = Arc::new(CoordInner {
            backend,
            store,
            pool: Preparations::new(usize::try_from(cache).unwrap_or(usize::MAX), handle.clone()),
            handle,
            write_options: WriteBehindOptions {
                max_delay: Duration::from_millis(delay),
                max_pending_bytes: options.max_pending_bytes,
            },
            core: Mutex::new(Core::default()),
            chains: Chains::default(),
            subscriptions: Mutex::new(Vec::new()),
            warnings: RwLock::new(Arc::new(|w: &str| eprintln!("{w}"))),
            disposal: Mutex::new(None),
            redact: options.redact,
        });
        let service = Persistence { inner };
        service.install();
        Ok(service)
    }

    fn install(&self) {
        let store = &self.inner.store;
        let weak = Arc::downgrade(&self.inner);
        let mut subs = Vec::with_capacity(4);
        let w = weak.clone();
        subs.push(store.on_created(move |session| {
            if let Some(me) = w.upgrade() {
                me.init_for(session).map_err(|e| Box::new(e) as BoxError)?;
            }
            Ok(())
        }));
        let w = weak.clone();
        subs.push(store.on_event(move |session, event| {
            if let Some(me) = w.upgrade() {
                let live = me.init_for(session).map_err(|e| Box::new(e) as BoxError)?;
                live.writes.enqueue(event.clone());
            }
            Ok(())
        }));
        let w = weak.clone();
        subs.push(store.on_flush(move |session| {
            let Some(me) = w.upgrade() else {
                return Box::pin(async { Ok(()) });
            };
            let flush = me.flush_session(session);
            Box::pin(async move { flush.await.map_err(|e| Box::new(e) as BoxError) })
        }));
        let w = weak;
        subs.push(store.on_disposed(move |session| {
            if let Some(me) = w.upgrade() {
                me.retire(session);
            }
            Ok(())
        }));
        *lock(&self.inner.subscriptions) = subs;
        for session in store.list() {
            self.inner.seed_live(&session);
        }
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The store this service persists.
    pub fn store(&self) -> &SessionStore {
        &self.inner.store
    }

    /// Where warnings go (background write and retirement failures). Default: standard error.
    pub fn set_warning_sink(&self, sink: WarningSink) {
        *self
            .inner
            .warnings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = sink;
    }

    /// Where the artifact of `meta` lives or will live (no I/O; it may not exist yet and
    /// holds only the last flushed prefix).
    pub fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        self.inner.backend.locate(meta)
    }

    /// Whether [`Persistence::read_raw`] is supported.
    pub fn supports_raw_artifacts(&self) -> bool {
        self.inner.backend.supports_raw_artifacts()
    }

    /// The verbatim artifact of `id` (`None`: absent). Not serialized with writes.
    pub async fn read_raw(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<RawArtifact>> {
        cancel::check(cancel)?;
        self.inner.check_open()?;
        if !self.inner.backend.supports_raw_artifacts() {
            return Err(Error::NoRawArtifacts);
        }
        let raw = self.inner.backend.read_raw(id).await;
        cancel::check(cancel)?;
        raw
    }

    /// Registers metadata for lazy creation: nothing is written until the first append.
    ///
    /// # Errors
    /// [`Error::MetadataNotLossless`], [`Error::MetadataCreatedAt`] (checked at call time);
    /// [`Error::AlreadyTracked`], [`Error::AlreadyPersisted`].
    pub async fn create(&self, meta: &SessionHeader) -> Result<()> {
        self.inner.check_open()?;
        let mut value = meta.to_value();
        if let Value::Object(o) = &value {
            // `createdAt` is checked on its own below (an unsafe integer is a valid number
            // for the reference, refused by the `createdAt` rule).
            value = Value::Object(o.without("createdAt"));
        }
        if !json::is_appendable(&value) {
            return Err(Error::MetadataNotLossless);
        }
        if meta.created_at > MAX_SAFE_INTEGER as u64 {
            return Err(Error::MetadataCreatedAt);
        }
        let meta = meta.clone();
        let id = meta.id.clone();
        self.inner
            .serialize(
                &id,
                None,
                move |me| async move { me.create_core(meta).await },
            )
            .await
    }

    /// [`Persistence::create`] from a JSON header record, checked the way the reference
    /// checks untyped metadata: lossless JSON, then `createdAt`, then the header rules.
    pub async fn create_value(&self, meta: &Value) -> Result<()> {
        let without_created_at = match meta {
            Value::Object(o) => Value::Object(o.without("createdAt")),
            other => other.clone(),
        };
        if !json::is_appendable(&without_created_at) {
            return Err(Error::MetadataNotLossless);
        }
        if meta.get("createdAt").and_then(Value::as_u64).is_none() {
            return Err(Error::MetadataCreatedAt);
        }
        let id = meta.get("id").and_then(Value::as_str).unwrap_or_default();
        let header = SessionHeader::from_value(meta, id)
            .map_err(|e| Error::InvalidMetadata(e.to_string()))?;
        self.create(&header).await
    }

    /// Durably appends a contiguous batch: resolves once it is durable. A cold id is adopted
    /// first (its crash repair is committed before the batch).
    ///
    /// # Errors
    /// [`Error::BatchNotLossless`] (checked at call time), [`Error::LegacyEvent`],
    /// [`Error::PreparationReserved`], [`Error::NotFound`], [`Error::AppendSeqMismatch`],
    /// backend errors.
    pub async fn append(&self, id: &str, events: &[Event]) -> Result<()> {
        self.inner.check_open()?;
        if let Some(e) = events.iter().find(|e| e.is_verbatim()) {
            return Err(Error::VerbatimAppend { seq: e.seq() });
        }
        let appendable = |v: Option<&Value>| v.is_none_or(json::is_appendable);
        if !events.iter().all(|e| {
            json::is_appendable(e.data())
                && appendable(e.surface_op_value())
                && appendable(e.source_event_seqs_value())
        }) {
            return Err(Error::BatchNotLossless);
        }
        let batch = events.to_vec();
        let op_id: Arc<str> = Arc::from(id);
        self.inner
            .serialize(id, None, move |me| async move {
                me.append_core(&op_id, batch).await
            })
            .await
    }

    /// Commits cold recovery (cuts a torn tail, durably appends closers) and returns the
    /// balanced log. For a live id: flushes and returns its snapshot, or refuses an open turn.
    /// A cold load opens the session for writing ([`Backend::acquire`]): the backend's write
    /// ownership is held until the session built from it is retired, or the service disposed.
    pub async fn load(&self, id: &str) -> Result<Inspection> {
        self.inner.check_open()?;
        let me = &self.inner;
        loop {
            me.wait_for_retirement(id, None).await?;
            if let Some(live) = me.store.get(id) {
                return me.load_live_snapshot(&live).await;
            }
            let Some(reservation) = me
                .pool
                .reserve(id, me.loader(id), me.committer(id, None), None)
                .await?
            else {
                continue;
            };
            me.pool.discard(&reservation);
            if let Some(live) = me.store.get(id) {
                return me.load_live_snapshot(&live).await;
            }
            return Ok(reservation.source.inspection.clone());
        }
    }

    /// Reads a session without changing storage: closers are added in memory only. For a live
    /// id: its current (unflushed) view, which may have an open turn.
    pub async fn inspect(&self, id: &str, cancel: Option<&CancelToken>) -> Result<Inspection> {
        self.inspect_detailed(id, cancel)
            .await
            .map(|detailed| detailed.inspection)
    }

    /// [`Persistence::inspect`], also telling how many of the events are stored and which torn
    /// tail `load` would cut, from the same read of the log. A live id counts every event as
    /// stored and has no torn tail.
    pub async fn inspect_detailed(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<DetailedInspection> {
        self.inner.check_open()?;
        let me = &self.inner;
        loop {
            cancel::check(cancel)?;
            if me.core().retirements.contains_key(id) {
                me.wait_for_retirement(id, cancel).await?;
            }
            if let Some(live) = me.store.get(id) {
                return Ok(CoordInner::detailed_live(&live));
            }
            let attempt = async {
                let observed = me.pool.inspect(id, me.loader(id), cancel).await?;
                if let Some(live) = me.store.get(id) {
                    return Ok(Some(CoordInner::detailed_live(&live)));
                }
                let source = observed.source.clone();
                let current = me
                    .serialize(
                        id,
                        cancel,
                        move |me| async move { me.is_current(&source).await },
                    )
                    .await?;
                if let Some(live) = me.store.get(id) {
                    return Ok(Some(CoordInner::detailed_live(&live)));
                }
                if current || me.pool.discard_ready(id, observed.entry) == Discard::Retained {
                    return Ok(Some(observed.source.detailed()));
                }
                Ok(None)
            };
            match attempt.await {
                Ok(Some(view)) => return Ok(view),
                Ok(None) => {}
                Err(e) => {
                    cancel::check(cancel)?;
                    if let Some(live) = me.store.get(id) {
                        return Ok(CoordInner::detailed_live(&live));
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The stored events with `seq >= from_seq`: no closers, no caching, no repair.
    pub async fn read_from(
        &self,
        id: &str,
        from_seq: u64,
        cancel: Option<&CancelToken>,
    ) -> Result<StoredEvents> {
        self.inner.check_open()?;
        if from_seq > MAX_SAFE_INTEGER as u64 {
            return Err(Error::InvalidFromSeq {
                got: from_seq.to_string(),
            });
        }
        self.inner.wait_for_retirement(id, cancel).await?;
        let op_id: Arc<str> = Arc::from(id);
        let op_cancel = cancel.cloned();
        self.inner
            .serialize(id, cancel, move |me| async move {
                me.read_from_core(&op_id, from_seq, op_cancel.as_ref())
                    .await
            })
            .await
    }

    /// The metadata of every stored session (created-but-empty sessions are absent).
    pub async fn list(&self, cancel: Option<&CancelToken>) -> Result<Vec<SessionHeader>> {
        self.inner.check_open()?;
        cancel::check(cancel)?;
        let listed = self.inner.backend.list().await;
        cancel::check(cancel)?;
        listed
    }

    /// Every stored session, each with its header or the error that keeps it from being
    /// listed ([`Backend::list_entries`]): one damaged session never fails the listing.
    pub async fn list_entries(
        &self,
        cancel: Option<&CancelToken>,
    ) -> Result<Vec<crate::backend::ListedSession>> {
        self.inner.check_open()?;
        cancel::check(cancel)?;
        let listed = self.inner.backend.list_entries().await;
        cancel::check(cancel)?;
        listed
    }

    /// Every stored session with its revision.
    pub async fn list_snapshots(
        &self,
        cancel: Option<&CancelToken>,
    ) -> Result<Vec<SessionSnapshot>> {
        self.inner.check_open()?;
        cancel::check(cancel)?;
        let listed = self.inner.backend.list_snapshots().await;
        cancel::check(cancel)?;
        Ok(listed?
            .into_iter()
            .map(|(header, revision)| SessionSnapshot { header, revision })
            .collect())
    }

    /// Prepares and reserves the exact unpublished session used to resume `id`. Publish it
    /// through the store (`enter` + `announce`) while the preparation is held; dropping or
    /// disposing the preparation releases the reservation. Preparing opens the session for
    /// writing ([`Backend::acquire`]): a second writer is refused now, not at its first write,
    /// and ownership is held until the published session is retired, or the service disposed.
    pub async fn prepare(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<SessionPreparation> {
        self.inner.check_open()?;
        let me = &self.inner;
        loop {
            me.wait_for_retirement(id, cancel).await?;
            if me.store.get(id).is_some() {
                return Err(Error::PrepareWhileLive { id: id.to_owned() });
            }
            let Some(reservation) = me
                .pool
                .reserve(id, me.loader(id), me.committer(id, cancel), cancel)
                .await?
            else {
                continue;
            };
            if me.store.get(id).is_some() {
                me.pool.release(&reservation, false);
                return Err(Error::PrepareWhileLive { id: id.to_owned() });
            }
            let weak = Arc::downgrade(&self.inner);
            let session = reservation.source.session.clone();
            let release: Box<dyn FnOnce() + Send> = Box::new(move || {
                let Some(me) = weak.upgrade() else {
                    return;
                };
                let id = reservation.id().clone();
                let unowned = me
                    .core()
                    .states
                    .get(&id)
                    .is_some_and(|s| s.generation == reservation.state && s.owner.is_none());
                let reusable = unowned
                    && reservation.source.session.seq() == reservation.source.session_length;
                me.pool.release(&reservation, reusable);
            });
            return Ok(SessionPreparation::new(session, Some(release)));
        }
    }

    /// Flushes one live session: resolves once every event admitted before the call (and any
    /// admitted while it runs) is durable. This is what the store's `flush` runs for this
    /// service; prefer [`SessionStore::flush`], which also runs other flush listeners.
    pub async fn flush(&self, session: &SharedSession) -> Result<()> {
        self.inner.check_open()?;
        self.inner.flush_session(session).await
    }

    /// Drains and closes: stops admitting events, flushes every live session, waits for every
    /// queued operation, then closes the backend. Drain failures are reported together
    /// ([`Error::DisposeFailed`]); a close failure only when the drain succeeded. A second call
    /// waits for the first and succeeds.
    pub async fn dispose(&self) -> Result<()> {
        let started = {
            let mut disposal = lock(&self.inner.disposal);
            if let Some(done) = disposal.as_ref() {
                Err(done.clone())
            } else {
                let (resolver, done) = promise();
                *disposal = Some(done);
                Ok(resolver)
            }
        };
        let resolver = match started {
            Ok(resolver) => resolver,
            Err(done) => {
                let _ = done.wait().await;
                return Ok(());
            }
        };
        let subscriptions = std::mem::take(&mut *lock(&self.inner.subscriptions));
        for sub in &subscriptions {
            sub.unsubscribe();
        }
        let me = &self.inner;
        let entries = me.core().live_entries();
        let mut errors = Vec::new();
        // Drain the controllers captured above directly: going through `flush_session` would
        // re-initialize a session whose retirement completed in the meantime.
        let flushes: Vec<_> = entries
            .into_iter()
            .map(|e| {
                e.writes.cancel_automatic_wait();
                me.handle.spawn(async move {
                    if let Err(err) = e.init.wait().await {
                        e.writes.cancel_automatic_wait();
                        return Err(unshare(err));
                    }
                    e.writes.flush().await.map_err(unshare)
                })
            })
            .collect();
        for flush in flushes {
            match flush.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(Error::Task {
                    message: e.to_string(),
                }),
            }
        }
        loop {
            let tails: Vec<watch::Receiver<bool>> = me
                .chains_lock()
                .values()
                .map(|(_, rx)| rx.clone())
                .collect();
            let retirements: Vec<Promise<()>> = me
                .core()
                .retirements
                .values()
                .map(|r| r.done.clone())
                .collect();
            if tails.is_empty() && retirements.is_empty() {
                break;
            }
            for mut tail in tails {
                let _ = tail.wait_for(|settled| *settled).await;
            }
            for retirement in retirements {
                let _ = retirement.wait().await;
            }
        }
        me.core().disposed = true;
        let drained = if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::DisposeFailed {
                backend: me.name().to_owned(),
                errors,
            })
        };
        let closed = me.backend.close().await;
        resolver.settle(Ok(()));
        drained?;
        closed
    }

    // ---- introspection ----

    /// How many ids have queued or running operations.
    pub fn pending_operations(&self) -> usize {
        self.inner.chains_lock().len()
    }

    /// Whether a disposed live session of `id` is still draining.
    pub fn retiring(&self, id: &str) -> bool {
        self.inner.core().retirements.contains_key(id)
    }

    /// How many live sessions have a write-behind controller.
    pub fn live_sessions(&self) -> usize {
        self.inner.core().live.values().map(Vec::len).sum()
    }

    /// How many ids have coordinator state.
    pub fn tracked_sessions(&self) -> usize {
        self.inner.core().states.len()
    }

    /// Drops the ready preparation of `id` that a read ([`Persistence::inspect`]) keeps for
    /// reuse, if there is one (a loading, committing or reserved one stays); returns whether
    /// one was dropped. A caller that reads a session once frees its derived state this way.
    pub fn discard_prepared(&self, id: &str) -> bool {
        self.inner.pool.take_ready(id).is_some()
    }

    /// Takes the ready preparation of `id` out of the pool, as [`Persistence::discard_prepared`]
    /// does, and hands it to the caller instead of dropping it: a process about to exit can
    /// `std::mem::forget` it and leave the memory of a large session to the operating system
    /// rather than free it event by event after its output is written.
    pub fn take_prepared(&self, id: &str) -> Option<PreparedSession> {
        self.inner
            .pool
            .take_ready(id)
            .map(|source| PreparedSession { _source: source })
    }

    /// How many preparations the pool holds (loading, ready, committing or reserved).
    pub fn cached_preparations(&self) -> usize {
        self.inner.pool.len()
    }

    /// How many events a live session's controller has queued (not yet being written).
    pub fn pending_events(&self, session: &SharedSession) -> Option<usize> {
        self.inner
            .core()
            .live_entry(session)
            .map(|e| e.writes.pending_len())
    }

    /// Whether a live session's controller has an armed batching timer.
    pub fn timer_armed(&self, session: &SharedSession) -> Option<bool> {
        self.inner
            .core()
            .live_entry(session)
            .map(|e| e.writes.timer_armed())
    }
}

/// A session a read prepared, taken out of the persistence's pool
/// ([`Persistence::take_prepared`]): its log and derived state, opaque. Dropping it frees
/// them.
pub struct PreparedSession {
    _source: super::state::Source,
}

impl std::fmt::Debug for PreparedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreparedSession")
    }
}
