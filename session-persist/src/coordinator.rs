//! The persistence coordinator (`PersistenceCoordinator`): everything between a
//! [`SessionStore`] and a [`Backend`] — live write-behind, per-id serialization, adoption and
//! collision rules, cold preparation with crash repair, and teardown.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;

use session_core::json::{self, MAX_SAFE_INTEGER, Value};
use session_core::{Event, Events, SessionHeader};
use session_repair::interrupted_turn_closers;
use session_store::{
    BoxError, PrepareOptions, SeedSource, SessionPreparation, SessionStore, SharedSession,
    Subscription, WarningSink,
};
use session_surface::Session;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};

use crate::backend::{Backend, Location, RawArtifact, Revision, StoredPrefix, TornMarker};
use crate::cancel::{self, AbortReason, CancelToken};
use crate::error::{Error, FormatRefusal, Result};
use crate::normalize::{
    assert_no_retired_shapes, first_unsupported, needs_legacy_prefix, normalize_events,
};
use crate::preparations::{Commit, Discard, Loader, Preparations, Reservation};
use crate::promise::{Promise, Resolver, observe_queued_abort, promise, settled, unshare};
use crate::service::{DetailedInspection, Inspection, SessionSnapshot, StoredEvents};
use crate::write_behind::{
    BatchSink, BoxFuture, DEFAULT_MAX_PENDING_BYTES, WriteBehind, WriteBehindOptions,
};

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

impl Error {
    /// JavaScript's `String(err)`: `<name>: <message>` (for example `Error: disk full`).
    pub fn js_string(&self) -> String {
        format!("{}: {self}", self.name())
    }

    /// The cancellation reason, when this error is a cancellation.
    pub fn abort_reason(&self) -> Option<&AbortReason> {
        match self {
            Error::Aborted(reason) => Some(reason),
            _ => None,
        }
    }
}

impl From<AbortReason> for Error {
    fn from(reason: AbortReason) -> Error {
        Error::Aborted(reason)
    }
}

/// Per-id coordinator state (`SessionState`).
struct SessionState {
    /// Identity of this state object (a replaced state has another).
    generation: u64,
    meta: SessionHeader,
    /// The next seq storage expects.
    cursor: u64,
    /// Whether the artifact exists.
    materialized: bool,
    /// The live session bound to this state, if any.
    owner: Option<SharedSession>,
    /// Write ownership not taken yet: the first append takes it, checked against this revision
    /// (a live session adopted from storage without writing, see `adopt_live_prefix`).
    unclaimed: Option<Revision>,
}

/// One live session's initialization and write-behind controller.
#[derive(Clone)]
struct LiveEntry {
    session: SharedSession,
    init: Promise<()>,
    writes: WriteBehind<Event, Arc<Error>>,
}

struct Retirement {
    token: u64,
    done: Promise<()>,
}

#[derive(Default)]
struct Core {
    states: HashMap<Arc<str>, SessionState>,
    live: HashMap<Arc<str>, Vec<LiveEntry>>,
    retirements: HashMap<Arc<str>, Retirement>,
    /// The ids this service opened for writing ([`Backend::acquire`]) and has not released;
    /// `true` once the opening covers a stored artifact (opened at a revision, or published by
    /// this service), `false` for a new session opened before its first publication.
    leased: HashMap<Arc<str>, bool>,
    next: u64,
    disposed: bool,
}

impl Core {
    fn next_token(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn live_entry(&self, session: &SharedSession) -> Option<&LiveEntry> {
        self.live
            .get(&session.id())?
            .iter()
            .find(|e| e.session.ptr_eq(session))
    }

    fn live_entries(&self) -> Vec<LiveEntry> {
        self.live.values().flatten().cloned().collect()
    }
}

/// One validated cold source and the exact unpublished session built from it.
pub(crate) struct PreparedSource {
    inspection: Inspection,
    session: SharedSession,
    revision: Revision,
    session_length: u64,
    torn: Option<TornMarker>,
    closers: Vec<Event>,
}

impl PreparedSource {
    fn detailed(&self) -> DetailedInspection {
        let (surface, messages, transcript) = self
            .session
            .read(|s| (s.surface_nodes(), s.derive_messages(), s.transcript()));
        DetailedInspection {
            stored: self
                .inspection
                .events
                .len()
                .saturating_sub(self.closers.len()),
            inspection: self.inspection.clone(),
            torn: self.torn.clone(),
            surface,
            messages,
            transcript,
        }
    }
}

type Source = Arc<PreparedSource>;

/// The tail of each id's chain: its generation and its settlement.
type Tails = HashMap<Arc<str>, (u64, watch::Receiver<bool>)>;

/// The per-id operation chains.
#[derive(Default)]
struct Chains {
    tails: Mutex<Tails>,
    next: AtomicU64,
}

/// Marks a chain link settled when dropped (also when its task panics or is cancelled).
struct LinkGuard {
    chains: Arc<CoordInner>,
    id: Arc<str>,
    generation: u64,
    done: watch::Sender<bool>,
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        self.done.send_replace(true);
        let mut tails = self.chains.chains_lock();
        if tails
            .get(&self.id)
            .is_some_and(|(g, _)| *g == self.generation)
        {
            tails.remove(&self.id);
        }
    }
}

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

pub(crate) struct CoordInner {
    backend: Arc<dyn Backend>,
    store: SessionStore,
    handle: Handle,
    write_options: WriteBehindOptions,
    core: Mutex<Core>,
    pool: Preparations<Source, u64>,
    chains: Chains,
    subscriptions: Mutex<Vec<Subscription>>,
    warnings: RwLock<WarningSink>,
    disposal: Mutex<Option<Promise<()>>>,
    redact: Option<crate::redact::Redactor>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a live seed reproduces a stored prefix exactly (key order included); with a
/// redaction hook, a stored event may also be the redacted copy of the seed's.
fn seed_covers_prefix(
    seed: &Events,
    prefix: &[Event],
    redact: Option<&crate::redact::Redactor>,
) -> bool {
    prefix.len() <= seed.len()
        && prefix
            .iter()
            .zip(seed.iter())
            .all(|(p, s)| p == s || redact.is_some_and(|r| *p == r(s)))
}

/// `String(n)` of a JSON number (or `undefined`).
fn js_number(v: Option<&Value>) -> String {
    session_core::header::js_string(v)
}

/// An estimate of an event's JSON size, for the back-pressure bound (no allocation).
fn approx_json_len(event: &Event) -> usize {
    let mut deep = Vec::new();
    let mut total = 48 + event.event_type().len() + approx_value_len(event.data(), 0, &mut deep);
    for v in event
        .surface_op_value()
        .into_iter()
        .chain(event.source_event_seqs_value())
    {
        total += approx_value_len(v, 0, &mut deep);
    }
    while let Some(v) = deep.pop() {
        total += approx_value_len(v, 0, &mut deep);
    }
    total
}

/// Nesting depth up to which [`approx_value_len`] recurses; deeper values are set aside in
/// `deep` and weighed by the caller, so any depth costs bounded stack and shallow values
/// (nearly all events) cost no allocation.
const APPROX_MAX_DEPTH: u32 = 32;

fn approx_value_len<'a>(v: &'a Value, depth: u32, deep: &mut Vec<&'a Value>) -> usize {
    if depth == APPROX_MAX_DEPTH {
        deep.push(v);
        return 0;
    }
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            2 + items.len()
                + items
                    .iter()
                    .map(|item| approx_value_len(item, depth + 1, deep))
                    .sum::<usize>()
        }
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, item)| k.len() + 4 + approx_value_len(item, depth + 1, deep))
                .sum::<usize>()
        }
    }
}

/// Where a coordinator's live write-behind controllers send their batches.
struct LiveSink {
    coordinator: Weak<CoordInner>,
    id: Arc<str>,
    name: String,
    init: Promise<()>,
}

impl BatchSink<Event, Arc<Error>> for LiveSink {
    fn write(&self, batch: Arc<Vec<Event>>) -> BoxFuture<std::result::Result<(), Arc<Error>>> {
        let coordinator = self.coordinator.clone();
        let id = self.id.clone();
        let init = self.init.clone();
        let name = self.name.clone();
        Box::pin(async move {
            init.wait().await?;
            let Some(me) = coordinator.upgrade() else {
                return Err(Arc::new(Error::Closed { backend: name }));
            };
            let op_id = id.clone();
            me.serialize(&id, None, move |me| async move {
                me.append_live_batch(&op_id, &batch).await
            })
            .await
            .map_err(Arc::new)
        })
    }

    fn report_background_failure(&self, error: &Arc<Error>) {
        if let Some(me) = self.coordinator.upgrade() {
            me.warn(&format!(
                "{}: background write for session \"{}\" failed (buffered events retained): {}",
                self.name,
                self.id,
                error.js_string()
            ));
        }
    }

    fn interrupted(&self) -> Arc<Error> {
        Arc::new(Error::WriteInterrupted {
            id: self.id.to_string(),
        })
    }

    fn weigh(&self, event: &Event) -> usize {
        approx_json_len(event)
    }
}

impl CoordInner {
    fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    fn chains_lock(&self) -> MutexGuard<'_, Tails> {
        lock(&self.chains.tails)
    }

    fn name(&self) -> &str {
        self.backend.name()
    }

    fn warn(&self, message: &str) {
        let sink = self
            .warnings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        sink(message);
    }

    fn closed(&self) -> Error {
        Error::Closed {
            backend: self.name().to_owned(),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.core().disposed {
            return Err(self.closed());
        }
        Ok(())
    }

    // ---- per-id serialization ----

    /// Queues `op` behind every earlier operation on `id` and starts it when they have
    /// settled, whatever their outcome. `deliver` receives the outcome. With `cancel`, an
    /// operation cancelled before it starts does not run.
    fn enqueue<T, F, Fut>(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<CancelToken>,
        flag: Arc<AtomicU8>,
        op: F,
        deliver: impl FnOnce(Result<T>) + Send + 'static,
    ) where
        T: Send + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let id: Arc<str> = Arc::from(id);
        let generation = self.chains.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (done, rx) = watch::channel(false);
        let previous = self
            .chains_lock()
            .insert(id.clone(), (generation, rx))
            .map(|(_, prev)| prev);
        let me = self.clone();
        self.handle.spawn(async move {
            let guard = LinkGuard {
                chains: me.clone(),
                id,
                generation,
                done,
            };
            if let Some(mut previous) = previous {
                let _ = previous.wait_for(|settled| *settled).await;
            }
            let outcome = match cancel.as_ref().and_then(CancelToken::reason) {
                Some(reason) => Err(Error::Aborted(reason)),
                None => {
                    if flag
                        .compare_exchange(QUEUED, STARTED, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        op(me).await
                    } else {
                        Err(Error::Aborted(
                            cancel
                                .as_ref()
                                .and_then(CancelToken::reason)
                                .unwrap_or_else(AbortReason::aborted),
                        ))
                    }
                }
            };
            // The outcome is delivered before the next operation on this id may start.
            deliver(outcome);
            drop(guard);
        });
    }

    /// Runs `op` in `id`'s chain; the returned future gives its outcome. With `cancel`, a
    /// caller whose operation has not started yet gets the exact reason at once.
    fn serialize<T, F, Fut>(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<&CancelToken>,
        op: F,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let flag = Arc::new(AtomicU8::new(QUEUED));
        self.enqueue(id, cancel.cloned(), flag.clone(), op, move |outcome| {
            let _ = tx.send(outcome);
        });
        let cancel = cancel.cloned();
        async move {
            let result = async {
                rx.await.unwrap_or_else(|_| {
                    Err(Error::Task {
                        message: "a serialized operation ended without a result".to_owned(),
                    })
                })
            };
            observe_queued_abort(result, cancel.as_ref(), || {
                flag.compare_exchange(QUEUED, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
            })
            .await
        }
    }

    /// Runs `op` in `id`'s chain and returns its settlement as a shareable promise.
    fn serialize_shared<T, F, Fut>(self: &Arc<Self>, id: &str, op: F) -> Promise<T>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (resolver, result): (Resolver<T>, Promise<T>) = promise();
        self.enqueue(
            id,
            None,
            Arc::new(AtomicU8::new(QUEUED)),
            op,
            move |outcome| resolver.settle(outcome.map_err(Arc::new)),
        );
        result
    }

    // ---- validation helpers ----

    fn assert_stored_id(id: &str, meta: &SessionHeader) -> Result<()> {
        if &*meta.id != id {
            return Err(Error::StoredIdentityMismatch {
                requested: id.to_owned(),
                header_id: meta.id.to_string(),
            });
        }
        Ok(())
    }

    fn refusal(&self, meta: &SessionHeader, refusal: FormatRefusal) -> Error {
        Error::FormatUnsupported {
            refusal,
            location: self.backend.locate(meta),
        }
    }

    fn assert_version(&self, meta: &SessionHeader, header: &Value) -> Result<()> {
        let version = header.get("version");
        if version.and_then(Value::as_f64) == Some(0.0) {
            return Ok(());
        }
        Err(self.refusal(
            meta,
            FormatRefusal::Version {
                id: meta.id.to_string(),
                version: js_number(version),
                newer: version.and_then(Value::as_f64).is_some_and(|v| v > 0.0),
            },
        ))
    }

    fn assert_events_supported(&self, meta: &SessionHeader, events: &[Event]) -> Result<()> {
        match first_unsupported(events) {
            None => Ok(()),
            Some(e) => Err(self.refusal(
                meta,
                FormatRefusal::UnknownType {
                    id: meta.id.to_string(),
                    // `String(type)`: a record kept as stored may have no string type.
                    event_type: match e.stored_record() {
                        Some(record) => session_core::header::js_string(record.get("type")),
                        None => e.event_type().to_owned(),
                    },
                    seq: e.seq(),
                },
            )),
        }
    }

    /// Normalized events of a stored read (steps 1–4), refusing an invalid stored envelope.
    fn stored_events(
        &self,
        id: &str,
        stored: StoredPrefix,
    ) -> Result<(SessionHeader, Value, Vec<Event>)> {
        let (meta, header, events, invalid) = self.stored_events_in_order(id, stored)?;
        if let Some(index) = invalid {
            return Err(Error::InvalidStoredEnvelope { index });
        }
        Ok((meta, header, events))
    }

    /// Steps 1–4 of a stored read in the reference's order: the header version, the
    /// read-time upgrades, then the unknown-type check over every stored record (the records
    /// kept as stored from an invalid envelope on included: a missing `type` is refused as
    /// `"undefined"`). The index of the first invalid record, if any, is returned rather than
    /// refused: `read_from` applies no session validation, and the restore checks the header
    /// and every event before it first. The events are every stored event, those from the
    /// invalid record on kept as stored.
    fn stored_events_in_order(
        &self,
        id: &str,
        stored: StoredPrefix,
    ) -> Result<(SessionHeader, Value, Vec<Event>, Option<usize>)> {
        Self::assert_stored_id(id, &stored.meta)?;
        self.assert_version(&stored.meta, &stored.header_value)?;
        let mut events = stored.events;
        let invalid = stored.invalid_envelope.map(|(index, after)| {
            events.extend(after);
            index
        });
        let events = normalize_events(events, id)?;
        self.assert_events_supported(&stored.meta, &events)?;
        Ok((stored.meta, stored.header_value, events, invalid))
    }

    // ---- live wiring ----

    /// The live entry of `session`, creating it (and starting its initialization) if needed.
    /// An error here vetoes the session's publication.
    fn init_for(self: &Arc<Self>, session: &SharedSession) -> Result<LiveEntry> {
        // The fast path of every event after the first: no snapshot of the session.
        if let Some(entry) = self.core().live_entry(session) {
            return Ok(entry.clone());
        }
        let id = session.id();
        let seed = session.events();
        let first_live = session.first_live_seq();
        let mut core = self.core();
        if let Some(entry) = core.live_entry(session) {
            return Ok(entry.clone());
        }
        let reservation = self
            .pool
            .reservation_for(&id, |source| source.session.ptr_eq(session))?;
        if let Some(reservation) = reservation {
            let entry =
                self.attach_prepared(&mut core, session, &seed, first_live, &reservation)?;
            core.live.entry(id).or_default().push(entry.clone());
            return Ok(entry);
        }
        let (resolver, init) = promise();
        let entry = LiveEntry {
            session: session.clone(),
            writes: self.write_behind(&id, init.clone()),
            init,
        };
        core.live.entry(id.clone()).or_default().push(entry.clone());
        drop(core);
        let owner = session.clone();
        self.enqueue(
            &id,
            None,
            Arc::new(AtomicU8::new(QUEUED)),
            move |me| async move { me.on_created(&owner, seed).await },
            move |outcome| resolver.settle(outcome.map_err(Arc::new)),
        );
        Ok(entry)
    }

    fn write_behind(
        self: &Arc<Self>,
        id: &Arc<str>,
        init: Promise<()>,
    ) -> WriteBehind<Event, Arc<Error>> {
        WriteBehind::new(
            Arc::new(LiveSink {
                coordinator: Arc::downgrade(self),
                id: id.clone(),
                name: self.name().to_owned(),
                init,
            }),
            self.write_options,
            self.handle.clone(),
        )
    }

    /// Binds a reserved preparation to its exact published session; persists only the
    /// session's unpublished suffix (normally its `session/end-seed`).
    fn attach_prepared(
        self: &Arc<Self>,
        core: &mut Core,
        session: &SharedSession,
        events: &Events,
        first_live: u64,
        reservation: &Reservation<Source, u64>,
    ) -> Result<LiveEntry> {
        let id = session.id();
        let source = &reservation.source;
        let expected = source.inspection.events.len() as u64;
        let matches = core.states.get(&id).is_some_and(|state| {
            state.generation == reservation.state
                && state.owner.is_none()
                && state.cursor == expected
                && first_live == state.cursor
        });
        if !source.session.ptr_eq(session) || !matches {
            return Err(Error::PreparationMismatch { id: id.to_string() });
        }
        let suffix = events.suffix(expected as usize).to_vec();
        self.pool.attach(reservation)?;
        if let Some(state) = core.states.get_mut(&id) {
            state.owner = Some(session.clone());
        }
        let init = if suffix.is_empty() {
            settled(Ok(()))
        } else {
            let op_id = id.clone();
            self.serialize_shared(&id, move |me| async move {
                me.append_core(&op_id, suffix).await
            })
        };
        Ok(LiveEntry {
            session: session.clone(),
            writes: self.write_behind(&id, init.clone()),
            init,
        })
    }

    /// `onCreated`: adoption and collision rules for a newly live session (in its chain).
    async fn on_created(self: &Arc<Self>, session: &SharedSession, seed: Events) -> Result<()> {
        let id = session.id();
        let header = session.header();
        let claim = {
            let mut core = self.core();
            let live_has_work = |core: &Core, owner: &SharedSession| {
                core.live_entry(owner).is_some_and(|e| e.writes.has_work())
            };
            match core.states.get(&id) {
                None => None,
                Some(state) => match &state.owner {
                    Some(owner) if owner.ptr_eq(session) => return Ok(()),
                    None => {
                        if state.meta.cwd != header.cwd {
                            return Err(Error::CwdCollision {
                                id: id.to_string(),
                                persisted: state.meta.cwd.as_deref().map(str::to_owned),
                                live: header.cwd.as_deref().map(str::to_owned),
                            });
                        }
                        Some((state.generation, state.cursor))
                    }
                    Some(owner) => {
                        if !state.materialized && !live_has_work(&core, owner) {
                            core.states.remove(&id);
                            None
                        } else {
                            return Err(Error::OwnerCollision { id: id.to_string() });
                        }
                    }
                },
            }
        };
        if let Some((generation, cursor)) = claim {
            if !self.seed_matches_persisted(&id, &seed, cursor).await? {
                return Err(Error::SeedCollision {
                    id: id.to_string(),
                    count: cursor,
                });
            }
            {
                let mut core = self.core();
                match core.states.get_mut(&id) {
                    Some(state) if state.generation == generation && state.owner.is_none() => {
                        state.owner = Some(session.clone());
                    }
                    _ => return Err(Error::OwnerCollision { id: id.to_string() }),
                }
            }
            let suffix = seed.suffix(cursor as usize).to_vec();
            return self.append_core(&id, suffix).await;
        }
        if let Some(stored) = self.backend.load_stored(&id).await? {
            return self
                .adopt_live_prefix(session, &header, &seed, stored)
                .await;
        }
        self.create_core(header).await?;
        {
            let mut core = self.core();
            if let Some(state) = core.states.get_mut(&id) {
                state.owner = Some(session.clone());
            }
        }
        self.append_core(&id, seed.to_vec()).await
    }

    /// Whether the first `cursor` stored events (normalized) equal the seed's.
    async fn seed_matches_persisted(&self, id: &str, seed: &Events, cursor: u64) -> Result<bool> {
        if cursor == 0 {
            return Ok(true);
        }
        let Some(stored) = self.backend.load_stored(id).await? else {
            return Ok(false);
        };
        Self::assert_stored_id(id, &stored.meta)?;
        let events = normalize_events(stored.events, id)?;
        let n = events
            .len()
            .min(usize::try_from(cursor).unwrap_or(usize::MAX));
        Ok(seed_covers_prefix(seed, &events[..n], self.redact.as_ref()))
    }

    /// Adopts a stored log as the history of a live session (HMR): the seed must cover it;
    /// a torn tail is cut without closing the live turn.
    async fn adopt_live_prefix(
        self: &Arc<Self>,
        session: &SharedSession,
        header: &SessionHeader,
        seed: &Events,
        stored: StoredPrefix,
    ) -> Result<()> {
        let id = session.id();
        Self::assert_stored_id(&id, &stored.meta)?;
        if stored.meta.cwd != header.cwd {
            return Err(Error::CwdCollision {
                id: id.to_string(),
                persisted: stored.meta.cwd.as_deref().map(str::to_owned),
                live: header.cwd.as_deref().map(str::to_owned),
            });
        }
        let torn = stored.torn.clone();
        let revision = stored.revision.clone();
        let (meta, _, events) = self.stored_events(&id, stored)?;
        if !seed_covers_prefix(seed, &events, self.redact.as_ref()) {
            return Err(Error::PrefixCollision { id: id.to_string() });
        }
        // A second service adopting a session the first one still writes (hot reload) writes
        // nothing here: ownership is then taken at its first append, checked against the
        // revision read now.
        let suffix = seed.suffix(events.len()).to_vec();
        let unclaimed = if torn.is_none() && suffix.is_empty() {
            Some(revision)
        } else {
            self.open_for_writing(&meta, Some(&revision)).await?;
            None
        };
        if torn.is_some() {
            self.backend.commit_repair(&meta, torn, &[]).await?;
        }
        let cursor = events.len() as u64;
        {
            let mut core = self.core();
            let generation = core.next_token();
            core.states.insert(
                id.clone(),
                SessionState {
                    generation,
                    meta,
                    cursor,
                    materialized: true,
                    owner: Some(session.clone()),
                    unclaimed,
                },
            );
        }
        self.append_core(&id, suffix).await
    }

    /// The flush a `session/flush` listener performs: waits for the session's initialization,
    /// then for its write-behind barrier.
    fn flush_session(self: &Arc<Self>, session: &SharedSession) -> BoxFuture<Result<()>> {
        let live = match self.init_for(session) {
            Ok(live) => live,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        live.writes.cancel_automatic_wait();
        Box::pin(async move {
            if let Err(e) = live.init.wait().await {
                live.writes.cancel_automatic_wait();
                return Err(unshare(e));
            }
            live.writes.flush().await.map_err(unshare)
        })
    }

    /// Appends what a live controller batched, minus what initialization already stored.
    async fn append_live_batch(self: &Arc<Self>, id: &str, batch: &[Event]) -> Result<()> {
        let cursor = self.core().states.get(id).map_or(0, |s| s.cursor);
        let fresh: Vec<Event> = batch
            .iter()
            .filter(|e| e.seq() >= cursor)
            .cloned()
            .collect();
        self.append_core(id, fresh).await
    }

    /// Starts the final drain of a disposed live session.
    fn retire(self: &Arc<Self>, session: &SharedSession) {
        let id = session.id();
        let (resolver, done) = promise();
        let token = {
            let mut core = self.core();
            if core.live_entry(session).is_none() {
                return;
            }
            let token = core.next_token();
            core.retirements.insert(
                id.clone(),
                Retirement {
                    token,
                    done: done.clone(),
                },
            );
            token
        };
        let me = self.clone();
        let session = session.clone();
        self.handle.spawn(async move {
            let outcome = me.retire_core(&session).await;
            if let Err(e) = &outcome {
                me.warn(&format!(
                    "{}: session \"{id}\" retirement failed: {}",
                    me.name(),
                    e.js_string()
                ));
            }
            {
                let mut core = me.core();
                if core.retirements.get(&id).is_some_and(|r| r.token == token) {
                    core.retirements.remove(&id);
                }
            }
            resolver.settle(Ok(()));
            // When the application has let go of the session already, this is its last
            // handle, and dropping a large session frees every event: do that on the blocking
            // pool rather than stall an asynchronous worker.
            let handle = me.handle.clone();
            drop(me);
            drop(handle.spawn_blocking(move || drop(session)));
        });
    }

    async fn retire_core(self: &Arc<Self>, session: &SharedSession) -> Result<()> {
        self.flush_session(session).await?;
        let id = session.id();
        let session = session.clone();
        let op_id = id.clone();
        self.serialize(&id, None, move |me| async move {
            let released = {
                let mut core = me.core();
                if let Some(entries) = core.live.get_mut(&op_id) {
                    entries.retain(|e| !e.session.ptr_eq(&session));
                    if entries.is_empty() {
                        core.live.remove(&op_id);
                    }
                }
                let owned = core
                    .states
                    .get(&op_id)
                    .and_then(|s| s.owner.as_ref())
                    .is_some_and(|o| o.ptr_eq(&session));
                if owned {
                    core.states.remove(&op_id);
                    core.leased.remove(&op_id);
                }
                owned
            };
            if released {
                me.backend.release(&op_id).await?;
            }
            Ok(())
        })
        .await
    }

    /// Opens the session of `meta` for writing ([`Backend::acquire`]) unless this service holds
    /// it already: a service opens a session once, until it releases it at retirement.
    async fn open_for_writing(
        &self,
        meta: &SessionHeader,
        stored: Option<&Revision>,
    ) -> Result<()> {
        let held = self.core().leased.get(&*meta.id).copied();
        match (held, stored) {
            (Some(true), _) | (Some(false), None) => return Ok(()),
            (None | Some(false), _) => {}
        }
        self.backend.acquire(meta, stored).await?;
        self.core().leased.insert(meta.id.clone(), stored.is_some());
        Ok(())
    }

    /// Waits for a retiring lifecycle of `id`, if any.
    async fn wait_for_retirement(&self, id: &str, cancel: Option<&CancelToken>) -> Result<()> {
        let done = self.core().retirements.get(id).map(|r| r.done.clone());
        match done {
            None => cancel::check(cancel).map_err(Error::Aborted),
            Some(done) => {
                observe_queued_abort(
                    async move { done.wait().await.map_err(unshare) },
                    cancel,
                    || false,
                )
                .await
            }
        }
    }

    // ---- cores (run inside the id's chain) ----

    async fn create_core(&self, meta: SessionHeader) -> Result<()> {
        let id = meta.id.clone();
        {
            let core = self.core();
            if core.states.contains_key(&id) || self.pool.has(&id) {
                return Err(Error::AlreadyTracked { id: id.to_string() });
            }
        }
        if self.backend.load_stored(&id).await?.is_some() {
            return Err(Error::AlreadyPersisted { id: id.to_string() });
        }
        self.open_for_writing(&meta, None).await?;
        let mut core = self.core();
        let generation = core.next_token();
        core.states.insert(
            id,
            SessionState {
                generation,
                meta,
                cursor: 0,
                materialized: false,
                owner: None,
                unclaimed: None,
            },
        );
        Ok(())
    }

    async fn append_core(self: &Arc<Self>, id: &str, events: Vec<Event>) -> Result<()> {
        assert_no_retired_shapes(&events, id)?;
        if events.is_empty() {
            return Ok(());
        }
        self.pool.assert_writable(id)?;
        let tracked = self.core().states.get(id).map(|s| s.generation);
        let generation = match tracked {
            Some(g) => g,
            None => self.adopt(id).await?,
        };
        let (meta, cursor, materialized, unclaimed) = {
            let core = self.core();
            let state = core
                .states
                .get(id)
                .filter(|s| s.generation == generation)
                .ok_or_else(|| Error::LostState { id: id.to_owned() })?;
            (
                state.meta.clone(),
                state.cursor,
                state.materialized,
                state.unclaimed.clone(),
            )
        };
        for (index, event) in events.iter().enumerate() {
            let expected = cursor + index as u64;
            if event.seq() != expected {
                return Err(Error::AppendSeqMismatch {
                    id: id.to_owned(),
                    expected,
                    index,
                    got: event.seq(),
                });
            }
        }
        let events = match &self.redact {
            Some(redactor) => crate::redact::apply(redactor, id, events)?,
            None => events,
        };
        if let Some(revision) = unclaimed {
            self.open_for_writing(&meta, Some(&revision)).await?;
            if let Some(state) = self
                .core()
                .states
                .get_mut(id)
                .filter(|s| s.generation == generation)
            {
                state.unclaimed = None;
            }
        }
        self.backend
            .append_batch(&meta, &events, materialized)
            .await?;
        {
            let mut core = self.core();
            if !materialized {
                // The first publication leaves the published log opened by this service.
                core.leased.insert(meta.id.clone(), true);
            }
            if let Some(state) = core
                .states
                .get_mut(id)
                .filter(|s| s.generation == generation)
            {
                state.materialized = true;
                state.cursor += events.len() as u64;
            }
        }
        self.pool.invalidate(id);
        Ok(())
    }

    /// Builds the state of an untracked stored session (a cold append): commits its crash
    /// repair first.
    async fn adopt(self: &Arc<Self>, id: &str) -> Result<u64> {
        loop {
            let source = match self.pool.take_ready(id) {
                Some(source) => source,
                None => self.prepare_core(id).await?,
            };
            if let Some(generation) = self.commit_prepared(&source).await? {
                return Ok(generation);
            }
        }
    }

    /// Reads, validates and repairs in memory one cold source, and builds its unpublished
    /// session.
    async fn prepare_core(self: &Arc<Self>, id: &str) -> Result<Source> {
        let Some(stored) = self.backend.load_stored(id).await? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let revision = stored.revision.clone();
        let torn = stored.torn.clone();
        let prepared = (|| {
            let (_, header, mut events, invalid) = self.stored_events_in_order(id, stored)?;
            if let Some(index) = invalid {
                // The restore validates the header, then every event in seq order: a problem
                // before the invalid record is the one reported.
                events.truncate(index);
                let clock: session_core::SharedClock = Arc::new(session_core::FixedClock::new(0));
                Session::from_restore_events(id, events, &header, clock).map_err(Error::Session)?;
                return Err(Error::InvalidStoredEnvelope { index });
            }
            let closers = interrupted_turn_closers(events.iter());
            let mut balanced = events;
            balanced.extend(closers.iter().cloned());
            let balanced = Events::from_vec(balanced);
            let session = self
                .store
                .prepare(
                    Some(id),
                    PrepareOptions {
                        seed: None,
                        seed_events: Some(balanced.clone()),
                        meta: Some(header),
                        seed_source: SeedSource::Persistence,
                    },
                )
                .map_err(|e| match e {
                    session_store::Error::Session(inner) => Error::Session(inner),
                    other => Error::Store(other),
                })?;
            let session_length = session.seq();
            // The inspection shares the session's own (restored) events.
            let events = session.events().prefix(balanced.len());
            Ok(PreparedSource {
                inspection: Inspection {
                    meta: session.header(),
                    events,
                },
                session,
                revision,
                session_length,
                torn,
                closers,
            })
        })();
        match prepared {
            Ok(source) => Ok(Arc::new(source)),
            Err(e @ Error::FormatUnsupported { .. }) => Err(e),
            Err(cause) => Err(Error::Corruption {
                id: id.to_owned(),
                cause: Box::new(cause),
            }),
        }
    }

    async fn is_current(&self, source: &PreparedSource) -> Result<bool> {
        let current = self
            .backend
            .read_stored_revision(&source.inspection.meta.id)
            .await?;
        Ok(current.as_ref() == Some(&source.revision))
    }

    /// Commits one prepared repair and establishes its ownerless cursor. `Ok(None)`: the
    /// source was stale or a repair was committed; the caller reloads.
    async fn commit_prepared(self: &Arc<Self>, source: &PreparedSource) -> Result<Option<u64>> {
        let id = source.inspection.meta.id.clone();
        let cursor = source.inspection.events.len() as u64;
        if self
            .core()
            .states
            .get(&id)
            .is_some_and(|s| s.owner.is_some())
        {
            return Err(Error::LiveOwner { id: id.to_string() });
        }
        // Opening for writing: the backend takes the session's write ownership now and checks,
        // under it, that storage is still the state this source was read from. A stale source
        // is read again (whoever changed storage has let go of it, or this would be `Locked`).
        match self
            .open_for_writing(&source.inspection.meta, Some(&source.revision))
            .await
        {
            Ok(()) => {}
            Err(Error::StaleWriter { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        if !self.is_current(source).await? {
            return Ok(None);
        }
        if source.torn.is_some() || !source.closers.is_empty() {
            self.backend
                .commit_repair(
                    &source.inspection.meta,
                    source.torn.clone(),
                    &source.closers,
                )
                .await?;
            return Ok(None);
        }
        let mut core = self.core();
        if let Some(state) = core.states.get_mut(&id) {
            state.meta = source.inspection.meta.clone();
            state.cursor = cursor;
            state.materialized = true;
            return Ok(Some(state.generation));
        }
        let generation = core.next_token();
        core.states.insert(
            id,
            SessionState {
                generation,
                meta: source.inspection.meta.clone(),
                cursor,
                materialized: true,
                owner: None,
                unclaimed: None,
            },
        );
        Ok(Some(generation))
    }

    fn loader(self: &Arc<Self>, id: &str) -> Loader<'static, Source, u64> {
        let me = self.clone();
        let id: Arc<str> = Arc::from(id);
        Box::new(move |settle| {
            let op_id = id.clone();
            me.enqueue(
                &id,
                None,
                Arc::new(AtomicU8::new(QUEUED)),
                move |me| async move { me.prepare_core(&op_id).await },
                move |outcome| settle.settle(outcome),
            );
        })
    }

    fn committer(self: &Arc<Self>, id: &str, cancel: Option<&CancelToken>) -> Commit<Source, u64> {
        let me = self.clone();
        let id: Arc<str> = Arc::from(id);
        let cancel = cancel.cloned();
        Box::new(move |source: Source| {
            Box::pin(async move {
                let committed = source.clone();
                me.serialize(&id, cancel.as_ref(), move |me| async move {
                    me.commit_prepared(&committed).await
                })
                .await
                .map(|generation| generation.map(|g| (source, g)))
            })
        })
    }

    /// A durable view of a live session: flushes it, and refuses an open turn.
    async fn load_live_snapshot(self: &Arc<Self>, session: &SharedSession) -> Result<Inspection> {
        let id = session.id();
        let events = session.events();
        self.flush_session(session).await?;
        let meta = self
            .core()
            .states
            .get(&id)
            .map(|s| s.meta.clone())
            .ok_or_else(|| Error::LostState { id: id.to_string() })?;
        if events.is_empty() {
            return Err(Error::NotFound { id: id.to_string() });
        }
        if !interrupted_turn_closers(events.iter()).is_empty() {
            return Err(Error::LiveTurnOpen { id: id.to_string() });
        }
        Ok(Inspection { meta, events })
    }

    fn detailed_live(session: &SharedSession) -> DetailedInspection {
        // One read, so that the events and what is derived from them agree.
        let (meta, events, surface, messages, transcript) = session.read(|s| {
            (
                s.header().clone(),
                s.events(),
                s.surface_nodes(),
                s.derive_messages(),
                s.transcript(),
            )
        });
        DetailedInspection {
            stored: events.len(),
            inspection: Inspection { meta, events },
            torn: None,
            surface,
            messages,
            transcript,
        }
    }

    /// The whole stored log as stored, without session validation (`read_from`).
    async fn read_stored_prefix(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<StoredEvents> {
        cancel::check(cancel)?;
        let stored = self.backend.load_stored(id).await;
        cancel::check(cancel)?;
        let Some(stored) = stored? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let (meta, _, events, _) = self.stored_events_in_order(id, stored)?;
        Ok(StoredEvents { meta, events })
    }

    async fn read_from_core(
        self: &Arc<Self>,
        id: &str,
        from_seq: u64,
        cancel: Option<&CancelToken>,
    ) -> Result<StoredEvents> {
        cancel::check(cancel)?;
        if self.backend.supports_seek() {
            let suffix = self.backend.load_stored_from(id, from_seq).await;
            cancel::check(cancel)?;
            let Some(suffix) = suffix? else {
                return Err(Error::NotFound { id: id.to_owned() });
            };
            Self::assert_stored_id(id, &suffix.meta)?;
            self.assert_version(&suffix.meta, &suffix.header_value)?;
            if suffix.events.iter().any(needs_legacy_prefix) {
                let whole = self.read_stored_prefix(id, cancel).await?;
                return Ok(StoredEvents {
                    meta: whole.meta,
                    events: whole
                        .events
                        .into_iter()
                        .filter(|e| e.seq() >= from_seq)
                        .collect(),
                });
            }
            let events = normalize_events(suffix.events, id)?;
            self.assert_events_supported(&suffix.meta, &events)?;
            return Ok(StoredEvents {
                meta: suffix.meta,
                events,
            });
        }
        let mut whole = self.read_stored_prefix(id, cancel).await?;
        let start = usize::try_from(from_seq)
            .unwrap_or(usize::MAX)
            .min(whole.events.len());
        whole.events.drain(..start);
        Ok(whole)
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
    inner: Arc<CoordInner>,
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
            let _ = self.inner.init_for(&session);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryBackend;
    use session_core::FixedClock;

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
            err.to_string().contains(
                r#"session "tampered" preparation no longer matches its persistence state"#
            ),
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

    #[test]
    fn js_string_of_a_shared_error() {
        let e = Arc::new(Error::NotFound { id: "s".into() });
        let shared = crate::promise::unshare(Arc::clone(&e));
        assert_eq!(shared.js_string(), r#"Error: session "s" not found"#);
        assert!(matches!(shared, Error::NotFound { .. }));
        assert_eq!(
            Error::InvalidCacheSize.js_string().split(':').next(),
            Some("TypeError")
        );
        let corruption = Error::Corruption {
            id: "s".into(),
            cause: Box::new(Error::Backend("bad".into())),
        };
        assert_eq!(corruption.name(), "SessionPersistenceCorruptionError");
        assert_eq!(
            corruption.to_string(),
            r#"stored session "s" failed validation: Error: bad"#
        );
    }

    #[test]
    fn the_size_estimate_grows_with_the_payload() {
        let small = ev(r#"{"type":"x","seq":0,"time":0,"data":null}"#);
        let big = ev(&format!(
            r#"{{"type":"x","seq":0,"time":0,"data":{{"text":"{}"}}}}"#,
            "a".repeat(10_000)
        ));
        assert!(approx_json_len(&big) > approx_json_len(&small) + 9_000);
        assert!(approx_json_len(&big) < 11_000);
    }

    #[test]
    fn the_size_estimate_counts_every_level_of_a_deep_payload() {
        // 1,000 nested arrays around a 5,000-byte string: deeper than the recursion bound,
        // so the estimate goes through the set-aside path and still sees the whole value.
        let depth = 1_000;
        let line = format!(
            r#"{{"type":"x","seq":0,"time":0,"data":{}"{}"{}}}"#,
            "[".repeat(depth),
            "a".repeat(5_000),
            "]".repeat(depth)
        );
        let len = approx_json_len(&ev(&line));
        assert!(len >= 5_000 + 3 * depth, "{len}");
        assert!(len < 5_000 + 4 * depth + 100, "{len}");
    }
}
