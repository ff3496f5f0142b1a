//! The validated session: log, surface, derived messages and request folds (§2, §3).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use session_core::event::{END_SEED, int_value, is_surface_eligible_type};
use session_core::json::{self, Value};
use session_core::request::{
    RequestContextFold, RequestHeaderFold, check_request_header_shape, is_legacy_fallback_header,
};
use session_core::rules;
use session_core::{
    Event, EventParts, Events, KeyOrder, Log, SessionHeader, SharedClock, push_back_sealed,
};

use crate::derive::{Messages, derive_event_message};
use crate::error::{Error, Result, ShapeProblem};
use crate::surface::{Nodes, Plan, Surface};
use crate::transcript::{Transcript, TranscriptEntry};

/// A boxed error returned by hooks (vetoes and observers).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An event to append: type, payload and surface metadata (`Session.append(type, data, opts)`).
#[derive(Debug, Clone)]
pub struct Draft {
    /// The event type.
    pub ty: Arc<str>,
    /// The payload.
    pub data: Value,
    /// `opts.surfaceOp`, when given.
    pub surface_op: Option<Value>,
    /// `opts.sourceEventSeqs`, when given.
    pub source_event_seqs: Option<Value>,
    /// Whether the event carries `ignorable: true` (a reader hint: safe to skip when the type
    /// is unknown). An event of a type outside the known vocabulary is refused unless it is
    /// marked ignorable, since readers refuse it otherwise.
    pub ignorable: bool,
}

impl Draft {
    /// A draft without surface metadata (a log-only event).
    pub fn new(ty: impl Into<Arc<str>>, data: Value) -> Draft {
        Draft {
            ty: ty.into(),
            data,
            surface_op: None,
            source_event_seqs: None,
            ignorable: false,
        }
    }

    /// Marks the event `ignorable: true` (serialized last, after the surface metadata).
    #[must_use]
    pub fn ignorable(mut self) -> Draft {
        self.ignorable = true;
        self
    }

    /// Sets `surfaceOp: "append"`.
    #[must_use]
    pub fn append_op(mut self) -> Draft {
        self.surface_op = Some(Value::from("append"));
        self
    }

    /// Sets `surfaceOp: {op: "replace", start, end}`.
    #[must_use]
    pub fn replace_op(mut self, start: u64, end: u64) -> Draft {
        self.surface_op = Some(session_core::SurfaceOp::Replace { start, end }.to_value());
        self
    }

    /// Sets `sourceEventSeqs`.
    #[must_use]
    pub fn sources(mut self, seqs: &[u64]) -> Draft {
        self.source_event_seqs = Some(Value::array(
            seqs.iter().map(|&s| session_core::event::seq_value(s)),
        ));
        self
    }

    /// Sets a raw `surfaceOp` value (for callers that pass metadata through unchecked).
    #[must_use]
    pub fn surface_op_value(mut self, op: Value) -> Draft {
        self.surface_op = Some(op);
        self
    }

    /// Sets a raw `sourceEventSeqs` value.
    #[must_use]
    pub fn sources_value(mut self, seqs: Value) -> Draft {
        self.source_event_seqs = Some(seqs);
        self
    }
}

/// The lookup of a restore step at `index` of `seed`: earlier events only, exactly what the log
/// would hold at that point.
fn earlier(seed: &Events, index: usize) -> impl Fn(u64) -> Option<Event> + '_ {
    move |seq| {
        usize::try_from(seq)
            .ok()
            .filter(|&i| i < index)
            .and_then(|i| seed.get(i))
            .cloned()
    }
}

/// How a constructor treats its seed and header (§2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedMode {
    /// `Session.create`: the seed and header are borrowed data and go through the append JSON
    /// rules (non-finite numbers, `-0` and unsafe integers are refused); the header is
    /// validated after the seed.
    Snapshot,
    /// `Session.fromRestore`: the data was just read from storage and is kept exactly as
    /// read; the header is validated first.
    Restore,
}

/// A draft that passed the checks that need no session state (§2.2 steps 1–4).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    ty: Arc<str>,
    data: Value,
    surface_op: Option<Value>,
    source_event_seqs: Option<Value>,
    ignorable: bool,
}

/// A draft whose JSON values have been checked and frozen once (§2.2 steps 1–4, the checks
/// that need no session state), for appending many times: see [`Session::append_prepared`].
///
/// Values are immutable, so a draft that passed these checks passes them again; each append
/// still runs every check that depends on the session (request-header and message shapes, the
/// surface rules) and commits a new frozen event.
#[derive(Debug, Clone)]
pub struct PreparedDraft(Prepared);

impl PreparedDraft {
    /// Checks and freezes `draft`: the same checks, with the same errors, that
    /// [`Session::append`] runs before it looks at the session.
    pub fn new(draft: Draft) -> Result<PreparedDraft> {
        Session::prepare(draft).map(PreparedDraft)
    }

    /// The event type.
    pub fn event_type(&self) -> &str {
        &self.0.ty
    }
}

/// A frozen candidate event with its surface plan (§2.2 steps 6–7).
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) event: Event,
    plan: Plan,
}

/// A session: its header, its frozen append-only log and everything derived from it.
///
/// Every derived view (surface nodes, messages, request header and context, transcript) is
/// updated when an event is committed, so reads are O(1) and return snapshots that never
/// change. An append that fails or is vetoed changes nothing (§3.3).
#[derive(Clone)]
pub struct Session {
    id: Arc<str>,
    header: SessionHeader,
    log: Log,
    first_live_seq: u64,
    surface: Surface,
    request_header: RequestHeaderFold,
    request_context: RequestContextFold,
    transcript: imbl::Vector<TranscriptEntry>,
    clock: SharedClock,
    /// Derived state after every [`CHECKPOINT_EVERY`] events: entry `i` holds the state after
    /// `(i + 1) * CHECKPOINT_EVERY` events. Persistent structures make each one O(1) to keep.
    checkpoints: imbl::Vector<Arc<Checkpoint>>,
    /// How many leading events were taken in restore mode (kept exactly as read, so possibly
    /// not in append form); every later event went through the append JSON rules.
    restored_len: u64,
    /// Whether the restored events are all in append form (computed on first need, shared by
    /// clones).
    restored_clean: Arc<OnceLock<bool>>,
}

/// Events between two checkpoints of derived state (see [`Session::fork_child`]).
const CHECKPOINT_EVERY: usize = 1024;

/// The derived state of a session after a number of events.
struct Checkpoint {
    surface: Surface,
    request_header: RequestHeaderFold,
    request_context: RequestContextFold,
    transcript: imbl::Vector<TranscriptEntry>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("seq", &self.seq())
            .field("first_live_seq", &self.first_live_seq)
            .field("surface", &self.surface)
            .finish_non_exhaustive()
    }
}

/// The seed of a constructor.
enum Seed {
    Values(Vec<Value>),
    Events(Events),
}

impl Session {
    /// `Session.create(id, seed?, header?)`: snapshot mode. Without a header the session gets
    /// `{version: 0, id, createdAt: now}`. A given seed (even an empty one) gets a
    /// `session/end-seed` marker unless it already ends with one.
    pub fn create(
        id: impl Into<Arc<str>>,
        seed: Option<Vec<Value>>,
        header: Option<Value>,
        clock: SharedClock,
    ) -> Result<Session> {
        Session::construct(
            id.into(),
            seed.map(Seed::Values),
            header.map(Cow::Owned),
            SeedMode::Snapshot,
            clock,
        )
    }

    /// Snapshot mode from already-built events (fork children, a stored log rebuilt as a
    /// session): every event is revalidated like a seed entry (envelope, shapes, contiguity,
    /// surface) and shared rather than copied. The events are data that was already accepted,
    /// so the stricter JSON rules of a live append (decision 3: `-0`, non-finite numbers,
    /// integers beyond 2^53) do not refuse them: numbers that JavaScript would respell are
    /// respelled and everything else is kept as it is (`Event::snapshot_for_seed`). A log that
    /// loads therefore also forks and rebuilds.
    pub fn create_from_events(
        id: impl Into<Arc<str>>,
        seed: Option<Events>,
        header: Option<Value>,
        clock: SharedClock,
    ) -> Result<Session> {
        Session::construct(
            id.into(),
            seed.map(Seed::Events),
            header.map(Cow::Owned),
            SeedMode::Snapshot,
            clock,
        )
    }

    /// `Session.fromRestore(id, seed, header)`: restore mode (the persistence load path). The
    /// header is validated first; values are kept exactly as read.
    pub fn from_restore(
        id: impl Into<Arc<str>>,
        seed: Vec<Value>,
        header: &Value,
        clock: SharedClock,
    ) -> Result<Session> {
        Session::construct(
            id.into(),
            Some(Seed::Values(seed)),
            Some(Cow::Borrowed(header)),
            SeedMode::Restore,
            clock,
        )
    }

    /// `Session.fromRestore` for events that are already parsed (the persistence load path):
    /// the same validation, in the same order and with the same messages, as
    /// [`Session::from_restore`] with the events' JSON values, without the round trip through
    /// JSON values. The session's log shares the given events (and, for an [`Events`]
    /// snapshot, its storage).
    pub fn from_restore_events(
        id: impl Into<Arc<str>>,
        seed: impl Into<Events>,
        header: &Value,
        clock: SharedClock,
    ) -> Result<Session> {
        Session::restore_events(id.into(), &seed.into(), header, clock)
    }

    /// Either constructor, by mode. In restore mode a header is required (a missing one is
    /// `session header is not a plain JSON record`).
    pub fn from_seed(
        id: impl Into<Arc<str>>,
        seed: Option<Vec<Value>>,
        header: Option<&Value>,
        mode: SeedMode,
        clock: SharedClock,
    ) -> Result<Session> {
        Session::construct(
            id.into(),
            seed.map(Seed::Values),
            header.map(Cow::Borrowed),
            mode,
            clock,
        )
    }

    fn construct(
        id: Arc<str>,
        seed: Option<Seed>,
        header: Option<Cow<'_, Value>>,
        mode: SeedMode,
        clock: SharedClock,
    ) -> Result<Session> {
        let restored_header = match mode {
            SeedMode::Restore => Some(match &header {
                Some(h) => validate_header(h, &id)?,
                None => {
                    return Err(Error::Header(
                        "session header is not a plain JSON record".to_owned(),
                    ));
                }
            }),
            SeedMode::Snapshot => None,
        };
        let mut session = Session::empty(id.clone(), SessionHeader::new(id, 0), clock);
        let seeded = seed.is_some();
        match seed {
            None => {}
            Some(Seed::Values(values)) => {
                for (index, value) in values.iter().enumerate() {
                    session.seed_value(index, value, mode)?;
                }
            }
            Some(Seed::Events(events)) => session.seed_events(&events, mode)?,
        }
        session.first_live_seq = session.log.next_seq();
        if mode == SeedMode::Restore {
            session.restored_len = session.first_live_seq;
        }
        session.header = if let Some(h) = restored_header {
            h
        } else if let Some(h) = header {
            snapshot_header(&h, &session.id)?
        } else {
            let now = session.clock.now_ms();
            let synthesized = Value::object([
                ("version", Value::from(0u8)),
                ("id", Value::String(session.id.clone())),
                ("createdAt", int_value(now)),
            ]);
            validate_header(&synthesized, &session.id)?
        };
        if seeded
            && session
                .log
                .last()
                .is_none_or(|e| e.event_type() != END_SEED)
        {
            session.append(Draft::new(END_SEED, Value::empty_object()))?;
        }
        Ok(session)
    }

    /// The seed checks and folds of a seed of events. Events are stored data (a fork prefix, a
    /// stored log): the stricter rules of a live append do not apply to them (see
    /// `Event::snapshot_for_seed`). The leading events the seed takes as they are (in a
    /// stored log, usually all of them) are checked and folded like a restore's, and the log
    /// then shares the seed's storage for them instead of pushing their handles again; the
    /// events from the first one that is respelled on are committed one by one.
    fn seed_events(&mut self, seed: &Events, mode: SeedMode) -> Result<()> {
        for (index, event) in seed.iter().enumerate() {
            if mode == SeedMode::Snapshot {
                let taken = event.snapshot_for_seed();
                if !taken.ptr_eq(event) {
                    return self.seed_respelled_from(seed, index, taken);
                }
            }
            self.restore_step(index, event, &earlier(seed, index))?;
        }
        self.log = Log::from_events(seed.clone());
        Ok(())
    }

    /// The rest of [`Session::seed_events`] from the first event the seed respells (`taken`,
    /// at `first`): the log shares the seed's storage before it, and that event and every later
    /// one is committed one by one.
    fn seed_respelled_from(&mut self, seed: &Events, first: usize, taken: Event) -> Result<()> {
        self.log = Log::from_events(seed.prefix(first));
        let rest = seed.iter().skip(first + 1).map(Event::snapshot_for_seed);
        for (index, event) in (first..).zip(std::iter::once(taken).chain(rest)) {
            if event.event_type() == "request/header-delta" {
                return Err(Error::SeedLegacyHeaderDelta { index });
            }
            self.accept_seed_event(index, event)?;
        }
        Ok(())
    }

    /// Restore mode over parsed events: the header first, then every seed check of
    /// [`Session::seed_value`] after the envelope (which an [`Event`] always satisfies); the
    /// validated events become the log as they are.
    fn restore_events(
        id: Arc<str>,
        seed: &Events,
        header: &Value,
        clock: SharedClock,
    ) -> Result<Session> {
        let header = validate_header(header, &id)?;
        let mut session = Session::empty(id, header, clock);
        session.seed_events(seed, SeedMode::Restore)?;
        session.finish_restore()
    }

    /// One event of a restore (the loop body of [`Session::restore_events`]; its two halves are
    /// [`RestoreBuilder::try_push`]'s) or of a seed event taken as it is
    /// ([`Session::seed_events`]): the seed checks and the fold, without touching the log.
    fn restore_step(
        &mut self,
        index: usize,
        event: &Event,
        lookup: &dyn Fn(u64) -> Option<Event>,
    ) -> Result<()> {
        if self.restore_plain_step(index, event)? {
            return Ok(());
        }
        self.restore_seed_step(index, event, lookup)
    }

    /// [`Session::restore_step`] for an event that is not an ordinary log-only one (see
    /// [`Session::restore_plain_step`]): the seed checks, then the fold.
    fn restore_seed_step(
        &mut self,
        index: usize,
        event: &Event,
        lookup: &dyn Fn(u64) -> Option<Event>,
    ) -> Result<()> {
        if event.event_type() == "request/header-delta" {
            return Err(Error::SeedLegacyHeaderDelta { index });
        }
        let plan = self.plan_seed_event(index, event, lookup)?;
        self.fold(event, plan);
        Ok(())
    }

    /// [`Session::restore_step`] for an ordinary log-only event ([`is_plain_log_event`]), which
    /// needs no earlier event: what the general path does for an event that no seed check reads
    /// and that is not a surface candidate (the contiguity check and the log-only fold).
    /// `Ok(false)`, with nothing done, for any other event.
    fn restore_plain_step(&mut self, index: usize, event: &Event) -> Result<bool> {
        if !is_plain_log_event(event.event_type(), event) {
            return Ok(false);
        }
        if event.seq() != index as u64 {
            return Err(Error::SeedNotContiguous {
                index,
                seq: event.seq(),
            });
        }
        self.surface.push_log_only();
        // A plain log event is neither a `request/header` nor a `request/context`.
        self.request_header.push_other();
        self.request_context.push_other();
        self.keep_checkpoint();
        Ok(true)
    }

    /// The end of a restore whose log holds every restored event: the live part starts after
    /// them, behind a `session/end-seed` marker unless the log already ends with one.
    fn finish_restore(mut self) -> Result<Session> {
        self.first_live_seq = self.log.next_seq();
        self.restored_len = self.first_live_seq;
        if self.log.last().is_none_or(|e| e.event_type() != END_SEED) {
            self.append(Draft::new(END_SEED, Value::empty_object()))?;
        }
        Ok(self)
    }

    /// One seed entry given as a JSON value (§2.8 steps 2.1–2.7).
    fn seed_value(&mut self, index: usize, raw: &Value, mode: SeedMode) -> Result<()> {
        let value = match mode {
            SeedMode::Snapshot => {
                json::snapshot_for_append(raw).ok_or(Error::SeedNotLossless { index })?
            }
            SeedMode::Restore => raw.clone(),
        };
        if value.get("type").and_then(Value::as_str) == Some("request/header-delta") {
            return Err(Error::SeedLegacyHeaderDelta { index });
        }
        let event =
            Event::from_value(&value).map_err(|cause| Error::SeedEnvelope { index, cause })?;
        self.accept_seed_event(index, event)
    }

    /// §2.8 steps 2.3–2.7 for an event whose envelope is valid.
    fn accept_seed_event(&mut self, index: usize, event: Event) -> Result<()> {
        let plan = {
            let log = &self.log;
            self.plan_seed_event(index, &event, &|seq| log.get(seq).cloned())?
        };
        self.commit(Candidate { event, plan });
        Ok(())
    }

    /// §2.8 steps 2.3–2.7 without committing: the seed checks and the surface plan, with
    /// earlier events looked up through `lookup`.
    fn plan_seed_event(
        &self,
        index: usize,
        event: &Event,
        lookup: &dyn Fn(u64) -> Option<Event>,
    ) -> Result<Plan> {
        let ty = event.event_type();
        // The payload is only read for the types these checks concern.
        if ty == "request/header" {
            check_request_header_shape(event.data()).map_err(|issue| Error::SeedRequestHeader {
                index,
                problem: issue.message_tail().to_owned(),
            })?;
        }
        if is_message_type(ty)
            && let Some(problem) = message_shape_problem(ty, event.data())
        {
            return Err(Error::MessageShape {
                subject: format!("seed {ty} at index {index}"),
                problem,
            });
        }
        if ty == "request/header" && is_fallback_header(ty, event.data()) {
            return Err(Error::SeedLegacyFallbackReason { index });
        }
        if event.seq() != index as u64 {
            return Err(Error::SeedNotContiguous {
                index,
                seq: event.seq(),
            });
        }
        self.surface
            .plan(event, lookup)
            .map_err(|error| Error::SeedSurface { index, error })
    }

    /// §2.2 steps 1–4: the checks that need no session state.
    pub(crate) fn prepare(draft: Draft) -> Result<Prepared> {
        let Draft {
            ty,
            data,
            surface_op,
            source_event_seqs,
            ignorable,
        } = draft;
        let Some(data) = json::snapshot_for_append(&data) else {
            return Err(Error::NonJsonData { ty: ty.to_string() });
        };
        if &*ty == "request/header-delta" {
            return Err(Error::LegacyHeaderDelta);
        }
        if is_fallback_header(&ty, &data) {
            return Err(Error::LegacyFallbackReason);
        }
        let snapshot_meta = |v: Option<Value>| -> Result<Option<Value>> {
            match v {
                None => Ok(None),
                Some(v) => json::snapshot_for_append(&v)
                    .map(Some)
                    .ok_or_else(|| Error::NonJsonSurfaceMetadata { ty: ty.to_string() }),
            }
        };
        let source_event_seqs = snapshot_meta(source_event_seqs)?;
        let surface_op = snapshot_meta(surface_op)?;
        Ok(Prepared {
            ty,
            data,
            surface_op,
            source_event_seqs,
            ignorable,
        })
    }

    /// §2.2 steps 6–7, with every rule a reader applies to a stored event (decision 5): the
    /// rules of `session_core::rules` (retired types, the turn upgrades, known types,
    /// storage tags), the request-header and message shapes, the envelope's `time`, then the
    /// surface plan. Builds the frozen candidate; changes nothing.
    pub(crate) fn candidate(&self, prepared: Prepared) -> Result<Candidate> {
        let seq = self.log.next_seq();
        rules::check_new_event(
            &self.id,
            &prepared.ty,
            &prepared.data,
            seq,
            prepared.ignorable,
        )
        .map_err(Error::Rule)?;
        if &*prepared.ty == "request/header" {
            check_request_header_shape(&prepared.data).map_err(|issue| {
                Error::RequestHeaderShape {
                    seq,
                    problem: issue.message_tail().to_owned(),
                }
            })?;
        }
        if let Some(problem) = message_shape_problem(&prepared.ty, &prepared.data) {
            return Err(Error::MessageShape {
                subject: format!("session event at seq {seq}"),
                problem,
            });
        }
        let time = self.clock.now_ms();
        if !rules::is_safe_time(time) {
            return Err(Error::Rule(rules::Violation::UnsafeTime {
                id: self.id.to_string(),
                seq,
                time,
            }));
        }
        let event = Event::from_parts(
            EventParts {
                ty: prepared.ty,
                seq,
                time,
                data: prepared.data,
                surface_op: prepared.surface_op,
                source_event_seqs: prepared.source_event_seqs,
                ignorable: prepared.ignorable,
            },
            KeyOrder::APPEND,
        );
        let log = &self.log;
        let plan = self.surface.plan(&event, &|s| log.get(s).cloned())?;
        Ok(Candidate { event, plan })
    }

    /// §2.2 step 9: commits a candidate built on the current state.
    pub(crate) fn commit(&mut self, candidate: Candidate) -> Event {
        let Candidate { event, plan } = candidate;
        if self.log.push(event.clone()).is_err() {
            // A candidate is always built for the next seq; a stale one is dropped.
            return event;
        }
        self.fold(&event, plan);
        event
    }

    /// Folds an event that is (or is about to become) the log's next one into every derived
    /// view.
    fn fold(&mut self, event: &Event, plan: Plan) {
        if let Some(entry) = TranscriptEntry::for_event(event, plan.shadowed()) {
            push_back_sealed(&mut self.transcript, entry);
        }
        self.surface.apply(plan);
        self.request_header.push(event);
        self.request_context.push(event);
        self.keep_checkpoint();
    }

    /// A session with no events and an empty derived state.
    fn empty(id: Arc<str>, header: SessionHeader, clock: SharedClock) -> Session {
        Session {
            header,
            id,
            log: Log::new(),
            first_live_seq: 0,
            surface: Surface::new(),
            request_header: RequestHeaderFold::new(),
            request_context: RequestContextFold::new(),
            transcript: imbl::Vector::new(),
            clock,
            checkpoints: imbl::Vector::new(),
            restored_len: 0,
            restored_clean: Arc::new(OnceLock::new()),
        }
    }

    /// Keeps a checkpoint of the derived state when the number of folded events is a multiple
    /// of [`CHECKPOINT_EVERY`] (O(1): every derived structure is persistent).
    fn keep_checkpoint(&mut self) {
        let folded = self.surface.next_seq();
        if folded == 0 || !folded.is_multiple_of(CHECKPOINT_EVERY as u64) {
            return;
        }
        let index = usize::try_from(folded).map_or(usize::MAX, |f| f / CHECKPOINT_EVERY - 1);
        if index == self.checkpoints.len() {
            self.checkpoints.push_back(Arc::new(Checkpoint {
                surface: self.surface.clone(),
                request_header: self.request_header.clone(),
                request_context: self.request_context.clone(),
                transcript: self.transcript.clone(),
            }));
        }
    }

    /// Whether the first `len` events are in seed form, i.e. a seed of events
    /// ([`Session::create_from_events`]) would take each of them as it is (the same frozen
    /// object). Events appended live or seeded in snapshot mode always are; events kept as
    /// read in restore mode are checked once.
    fn prefix_in_seed_form(&self, len: usize) -> bool {
        if self.restored_len == 0 || len == 0 {
            return true;
        }
        let restored = usize::try_from(self.restored_len).unwrap_or(usize::MAX);
        *self.restored_clean.get_or_init(|| {
            self.log
                .iter()
                .take(restored)
                .all(|event| event.snapshot_for_seed().ptr_eq(event))
        })
    }

    /// A fork child of this session (§6.2 step 5, `Session.create(childId, {seed, meta})`):
    /// exactly the session that [`Session::create_from_events`] builds from the first
    /// `seed_length` events of this session's log, `header` and `clock`, without revisiting the
    /// inherited events.
    ///
    /// The inherited events were validated when they entered this session, so the child takes
    /// them and the derived state at the boundary as they are: the log shares this session's
    /// storage, and the surface, messages, request folds and transcript are the persistent
    /// structures of this session (when `seed_length` is its whole log) or of the nearest
    /// checkpoint at or before the boundary, brought forward over fewer than 1,024 events. Cost:
    /// O(log n). The header is validated and the `session/end-seed` marker appended as in
    /// [`Session::create_from_events`]. Events that this session kept as read in restore mode
    /// and that a seed of events would respell (non-canonical number spellings) make the child
    /// go through the validating path instead, so the result is the same either way.
    pub fn fork_child(
        &self,
        seed_length: usize,
        id: impl Into<Arc<str>>,
        header: Option<Value>,
        clock: SharedClock,
    ) -> Result<Session> {
        let id = id.into();
        let shared = if seed_length <= self.log.len() && self.prefix_in_seed_form(seed_length) {
            self.state_at(seed_length, id.clone(), clock.clone())
        } else {
            None
        };
        let Some(mut child) = shared else {
            let seed = self.events().prefix(seed_length);
            return Session::create_from_events(id, Some(seed), header, clock);
        };
        child.header = if let Some(h) = header {
            snapshot_header(&h, &child.id)?
        } else {
            let synthesized = Value::object([
                ("version", Value::from(0u8)),
                ("id", Value::String(child.id.clone())),
                ("createdAt", int_value(child.clock.now_ms())),
            ]);
            validate_header(&synthesized, &child.id)?
        };
        if child.log.last().is_none_or(|e| e.event_type() != END_SEED) {
            child.append(Draft::new(END_SEED, Value::empty_object()))?;
        }
        Ok(child)
    }

    /// A session holding the first `len` events of this one and the derived state after them,
    /// with an empty header; `None` if the state cannot be brought forward (which a log that
    /// was validated on entry never causes).
    fn state_at(&self, len: usize, id: Arc<str>, clock: SharedClock) -> Option<Session> {
        let mut child = Session::empty(id.clone(), SessionHeader::new(id, 0), clock);
        let prefix = self.events().prefix(len);
        let mut checkpoints = self.checkpoints.clone();
        checkpoints.truncate(len / CHECKPOINT_EVERY);
        let from = if len == self.log.len() {
            child.surface = self.surface.clone();
            child.request_header = self.request_header.clone();
            child.request_context = self.request_context.clone();
            child.transcript = self.transcript.clone();
            len
        } else if let Some(checkpoint) = checkpoints.last() {
            child.surface = checkpoint.surface.clone();
            child.request_header = checkpoint.request_header.clone();
            child.request_context = checkpoint.request_context.clone();
            child.transcript = checkpoint.transcript.clone();
            checkpoints.len() * CHECKPOINT_EVERY
        } else {
            0
        };
        child.checkpoints = checkpoints;
        for index in from..len {
            let event = prefix.get(index)?;
            let plan = child
                .plan_seed_event(index, event, &earlier(&prefix, index))
                .ok()?;
            child.fold(event, plan);
        }
        if child.surface.next_seq() != len as u64 {
            return None;
        }
        child.log = Log::from_events(prefix);
        child.first_live_seq = child.log.next_seq();
        Some(child)
    }

    /// The session id.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// The validated header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// An O(1) frozen snapshot of the log.
    pub fn events(&self) -> Events {
        self.log.snapshot()
    }

    /// The event at `seq`.
    pub fn event(&self, seq: u64) -> Option<&Event> {
        self.log.get(seq)
    }

    /// The log length: the seq the next event gets.
    pub fn seq(&self) -> u64 {
        self.log.next_seq()
    }

    /// The length of the construction seed (0 without one); fixed at construction.
    pub fn first_live_seq(&self) -> u64 {
        self.first_live_seq
    }

    /// The surface (the same object for the whole life of the session).
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// Shorthand for `surface().nodes()`.
    pub fn surface_nodes(&self) -> Nodes {
        self.surface.nodes()
    }

    /// Shorthand for `surface().replace_generation()`.
    pub fn replace_generation(&self) -> u64 {
        self.surface.replace_generation()
    }

    /// `deriveMessages()`: the messages of the current surface nodes, in surface order (O(1)).
    pub fn derive_messages(&self) -> Messages {
        self.surface.messages()
    }

    /// `session.deriveEventMessage(e)`: see [`derive_event_message`].
    pub fn derive_event_message<'e>(&self, event: &'e Event) -> Option<&'e Value> {
        derive_event_message(event)
    }

    /// `requestHeader()`: the canonical header of the last `request/header`, if any.
    pub fn request_header(&self) -> Option<Value> {
        self.request_header.current().cloned()
    }

    /// `requestContext()`: the data of the last `request/context`, if any.
    pub fn request_context(&self) -> Option<Value> {
        self.request_context.current().cloned()
    }

    /// The human view: append-origin events plus replacement markers (see [`Transcript`]).
    pub fn transcript(&self) -> Transcript {
        Transcript::from_vector(self.transcript.clone())
    }

    /// The session's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Validated append (§2.2; message shapes are checked too). Returns the committed event.
    pub fn append(&mut self, draft: Draft) -> Result<Event> {
        let candidate = self.candidate(Session::prepare(draft)?)?;
        Ok(self.commit(candidate))
    }

    /// Appends an event built elsewhere, at this session's next seq: an event of another log
    /// carried over unchanged or with its references rewritten, as `session_fork::uncompact`
    /// carries a parent's later events. It is validated as a snapshot-mode seed entry
    /// (message and request-header shapes, contiguity, the surface rules; numbers respelled as
    /// JavaScript would, see [`Session::create_from_events`]), keeps its `time` and envelope
    /// key order, and is shared rather than copied (a compact chunk member stays compact).
    /// Returns the committed event.
    pub fn append_carried(&mut self, event: &Event) -> Result<Event> {
        let event = event.snapshot_for_seed();
        let index = usize::try_from(self.log.next_seq()).unwrap_or(usize::MAX);
        self.accept_seed_event(index, event.clone())?;
        Ok(event)
    }

    /// [`Session::append`] for a draft that was checked once by [`PreparedDraft::new`]: the
    /// session-dependent checks and the commit, without walking the draft's JSON again.
    /// Returns the committed event.
    pub fn append_prepared(&mut self, draft: &PreparedDraft) -> Result<Event> {
        let candidate = self.candidate(draft.0.clone())?;
        Ok(self.commit(candidate))
    }

    /// Like [`Session::append`], with a pre-commit hook that sees the frozen candidate while
    /// the log still has its old length. An `Err` vetoes the append: nothing changes and the
    /// error is returned as [`Error::Vetoed`].
    pub fn append_with(
        &mut self,
        draft: Draft,
        veto: &mut dyn FnMut(&Session, &Event) -> Result<(), BoxError>,
    ) -> Result<Event> {
        let candidate = self.candidate(Session::prepare(draft)?)?;
        veto(self, &candidate.event).map_err(|e| Error::Vetoed(Arc::from(e)))?;
        Ok(self.commit(candidate))
    }
}

/// Validates a snapshot-mode header: it goes through the append JSON rules first.
fn snapshot_header(value: &Value, id: &str) -> Result<SessionHeader> {
    let snapshot = json::snapshot_for_append(value).ok_or_else(|| {
        Error::Header("session header is not losslessly JSON-serializable".into())
    })?;
    validate_header(&snapshot, id)
}

/// Validates a header value, mapping the core error to this crate's.
fn validate_header(value: &Value, id: &str) -> Result<SessionHeader> {
    SessionHeader::from_value(value, id).map_err(|e| Error::Header(e.to_string()))
}

/// A `request/header` whose data is an object with `reason: "fallback"`.
fn is_fallback_header(ty: &str, data: &Value) -> bool {
    ty == "request/header" && is_legacy_fallback_header(data)
}

/// The message-shape check of §2.9 for `event_type`'s message inside `data`; `subject` names
/// the event in the error (`session event at seq <seq>` on append, `seed <type> at index <i>`
/// in a seed). Types other than the three message types always pass.
pub fn check_message_shape(event_type: &str, data: &Value, subject: &str) -> Result<()> {
    match message_shape_problem(event_type, data) {
        None => Ok(()),
        Some(problem) => Err(Error::MessageShape {
            subject: subject.to_owned(),
            problem,
        }),
    }
}

/// [`Session::from_restore_events`] fed one event at a time, so that a reader can build the
/// session while it is still reading the log: the same checks and folds in the same order,
/// each event pushed onto the log as it is accepted.
///
/// Invariant: pushing the events of a seed one by one and finishing gives the session
/// [`Session::from_restore_events`] gives for that seed, and the first failing push fails
/// with its error (`session-surface/tests/surface_tests/restore_events.rs`).
pub struct RestoreBuilder {
    session: Session,
}

impl RestoreBuilder {
    /// Starts a restore of `id`: the header is validated first, as in
    /// [`Session::from_restore_events`].
    pub fn new(id: impl Into<Arc<str>>, header: &Value, clock: SharedClock) -> Result<Self> {
        let id = id.into();
        let header = validate_header(header, &id)?;
        Ok(RestoreBuilder {
            session: Session::empty(id, header, clock),
        })
    }

    /// The next seed event. After an error the builder holds a partial state: drop it.
    pub fn push(&mut self, event: Event) -> Result<()> {
        self.try_push(event).map_err(|(_, e)| e)
    }

    /// [`RestoreBuilder::push`], handing a refused event back with the error (so that a
    /// caller that keeps the events of a failed restore needs no copy of each one it pushes).
    pub fn try_push(&mut self, event: Event) -> std::result::Result<(), (Event, Error)> {
        let session = &mut self.session;
        let index = session.log.len();
        let step = match session.restore_plain_step(index, &event) {
            Ok(true) => Ok(()),
            Ok(false) => {
                // The log is moved out for the step (which never reads it), so that the lookup
                // can borrow it while the step changes the rest of the session, and no snapshot
                // makes the push below copy the log's tail. An ordinary log-only event, most
                // of a log, needs no lookup and skips this.
                let log = std::mem::replace(&mut session.log, Log::new());
                let step = session.restore_seed_step(index, &event, &|seq| log.get(seq).cloned());
                session.log = log;
                step
            }
            Err(e) => Err(e),
        };
        if let Err(e) = step {
            return Err((event, e));
        }
        // The step checked that the event's seq is `index`, the log's next seq; the push
        // checks it again and hands the event back if it is not.
        session.log.try_push(event).map_err(|(event, _)| {
            let seq = event.seq();
            (event, Error::SeedNotContiguous { index, seq })
        })
    }

    /// How many events were pushed.
    pub fn len(&self) -> usize {
        self.session.log.len()
    }

    /// Whether no event was pushed.
    pub fn is_empty(&self) -> bool {
        self.session.log.is_empty()
    }

    /// The events pushed so far (an O(1) snapshot).
    pub fn events(&self) -> Events {
        self.session.log.snapshot()
    }

    /// The restored session.
    pub fn finish(self) -> Result<Session> {
        self.session.finish_restore()
    }
}

/// Whether `event` (of type `ty`) is an ordinary log-only event: not surface-eligible, without
/// surface metadata, and of no type that a seed check or a request fold reads.
fn is_plain_log_event(ty: &str, event: &Event) -> bool {
    !matches!(
        ty,
        "request/header" | "request/context" | "request/header-delta"
    ) && !is_surface_eligible_type(ty)
        && event.surface_op_value().is_none()
        && event.source_event_seqs_value().is_none()
}

/// Whether `ty` is one of the three types whose message shape is checked.
fn is_message_type(ty: &str) -> bool {
    matches!(ty, "user/message" | "assistant/message" | "tool/result")
}

/// The first shape problem of the message in `data`, in the reference's order.
fn message_shape_problem(event_type: &str, data: &Value) -> Option<ShapeProblem> {
    let message = match event_type {
        "user/message" => Some(data),
        "assistant/message" | "tool/result" => data.get("message"),
        _ => return None,
    };
    let Some(message) = message.and_then(Value::as_object) else {
        return Some(ShapeProblem::NoIdentifiedMessage);
    };
    if !message.get("id").is_some_and(Value::is_non_empty_str) {
        return Some(ShapeProblem::NoIdentifiedMessage);
    }
    let role = if event_type == "assistant/message" {
        "assistant"
    } else {
        "user"
    };
    if message.get("role").and_then(Value::as_str) != Some(role) {
        return Some(ShapeProblem::Role(role));
    }
    let Some(source) = message.get("source").and_then(Value::as_object) else {
        return Some(ShapeProblem::InvalidSource);
    };
    let kind = source.get("kind").and_then(Value::as_str);
    if kind.is_none_or(str::is_empty) {
        return Some(ShapeProblem::InvalidSource);
    }
    let Some(content) = message.get("content").and_then(Value::as_array) else {
        return Some(ShapeProblem::InvalidContent);
    };
    let non_empty = |key: &str| source.get(key).is_some_and(Value::is_non_empty_str);
    match event_type {
        "assistant/message"
            if kind != Some("model") || !non_empty("provider") || !non_empty("model") =>
        {
            return Some(ShapeProblem::ModelSource);
        }
        "tool/result" => {
            if kind != Some("tool") || !non_empty("callId") {
                return Some(ShapeProblem::ToolSource);
            }
            let block = match content.as_slice() {
                [block] => block.as_object().filter(|b| {
                    b.get("type").and_then(Value::as_str) == Some("tool-result")
                        && b.get("content").and_then(Value::as_array).is_some()
                }),
                _ => None,
            };
            let Some(block) = block else {
                return Some(ShapeProblem::OneToolResultBlock);
            };
            let call_id = source.get("callId").and_then(Value::as_str);
            if block.get("toolCallId").and_then(Value::as_str) != call_id {
                return Some(ShapeProblem::MismatchedToolCallIds);
            }
        }
        _ => {}
    }
    None
}
