//! The cores run inside an id's chain (create, append) and the cold operations: reading and
//! validating a stored log, preparing its repaired session, committing the repair, `read_from`.

use std::sync::atomic::AtomicU8;
use std::sync::{Arc, Mutex, PoisonError};

use session_core::json::Value;
use session_core::{Event, Events, SessionHeader};
use session_repair::interrupted_turn_closers;
use session_store::{PrepareOptions, SeedSource, SharedSession};
use session_surface::{RestoreBuilder, Session};

use super::restore::{Received, RestoreSink};
use super::state::{CoordInner, PreparedSource, QUEUED, SessionState, Source};
use crate::backend::{Backend, SharedEventSink, StoredPrefix};
use crate::cancel::{self, CancelToken};
use crate::error::{Error, FormatRefusal, Result};
use crate::normalize::{
    assert_no_retired_shapes, first_unsupported, needs_legacy_prefix, normalize_events,
};
use crate::preparations::{Commit, Loader};
use crate::service::{DetailedInspection, Inspection, StoredEvents};

impl CoordInner {
    // ---- validation helpers ----

    pub(super) fn assert_stored_id(id: &str, meta: &SessionHeader) -> Result<()> {
        if &*meta.id != id {
            return Err(Error::StoredIdentityMismatch {
                requested: id.to_owned(),
                header_id: meta.id.to_string(),
            });
        }
        Ok(())
    }

    pub(super) fn refusal(&self, meta: &SessionHeader, refusal: FormatRefusal) -> Error {
        Error::FormatUnsupported {
            refusal,
            location: self.backend.locate(meta),
        }
    }

    pub(super) fn assert_version(&self, meta: &SessionHeader, header: &Value) -> Result<()> {
        let version = header.get("version");
        if version.and_then(Value::as_f64) == Some(0.0) {
            return Ok(());
        }
        Err(self.refusal(
            meta,
            FormatRefusal::Version {
                id: meta.id.to_string(),
                version: session_core::header::js_string(version),
                newer: version.and_then(Value::as_f64).is_some_and(|v| v > 0.0),
            },
        ))
    }

    pub(super) fn assert_events_supported(
        &self,
        meta: &SessionHeader,
        events: &[Event],
    ) -> Result<()> {
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
    pub(super) fn stored_events(
        &self,
        id: &str,
        stored: StoredPrefix,
    ) -> Result<(SessionHeader, Value, Vec<Event>)> {
        let (meta, header, events, invalid) = self.stored_events_in_order(id, stored)?;
        if let Some(index) = invalid {
            return Err(invalid_envelope(&events, index));
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
    pub(super) fn stored_events_in_order(
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

    // ---- cores (run inside the id's chain) ----

    pub(super) async fn create_core(&self, meta: SessionHeader) -> Result<()> {
        let id = meta.id.clone();
        {
            let core = self.core();
            if core.states.contains_key(&id) || self.pool.has(&id) {
                return Err(Error::AlreadyTracked { id: id.to_string() });
            }
        }
        // Existence only: the revision lookup answers it without reading the log.
        if self.backend.read_stored_revision(&id).await?.is_some() {
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

    pub(super) async fn append_core(self: &Arc<Self>, id: &str, events: Vec<Event>) -> Result<()> {
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
    pub(super) async fn adopt(self: &Arc<Self>, id: &str) -> Result<u64> {
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

    /// The end of a restore done during the read, when every event was kept as read: the
    /// closers, then the session, prepared in the store. `Err` gives the events back when the
    /// restore refuses a closer or its end, for the whole-log path to report.
    fn finish_restore(
        &self,
        mut builder: RestoreBuilder,
        revision: crate::backend::Revision,
        torn: Option<crate::backend::TornMarker>,
    ) -> std::result::Result<PreparedSource, Vec<Event>> {
        let stored = builder.events();
        let closers = interrupted_turn_closers(stored.iter());
        let back = || stored.iter().cloned().collect::<Vec<Event>>();
        for closer in &closers {
            if builder.push(closer.clone()).is_err() {
                return Err(back());
            }
        }
        let length = builder.len();
        let Ok(session) = builder.finish() else {
            return Err(back());
        };
        let Ok(session) = self.store.prepare_restored(session) else {
            return Err(back());
        };
        Ok(PreparedSource::new(
            session, length, revision, torn, closers,
        ))
    }

    /// Reads, validates and repairs in memory one cold source, and builds its unpublished
    /// session.
    pub(super) async fn prepare_core(self: &Arc<Self>, id: &str) -> Result<Source> {
        // The session is restored while the log is read (`restore.rs`).
        let sink = Arc::new(Mutex::new(RestoreSink::new(id, self.store.clock().clone())));
        let shared: SharedEventSink = sink.clone();
        let Some(mut stored) = self.backend.load_stored_into(id, shared).await? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let received = sink.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(sink);
        let revision = stored.revision.clone();
        let torn = stored.torn.clone();
        let prepared = (|| {
            let received = match received {
                Received::Built(builder)
                    if stored.events.is_empty()
                        && stored.invalid_envelope.is_none()
                        && Self::assert_stored_id(id, &stored.meta).is_ok()
                        && self
                            .assert_version(&stored.meta, &stored.header_value)
                            .is_ok() =>
                {
                    match self.finish_restore(*builder, revision.clone(), torn.clone()) {
                        Ok(source) => return Ok(source),
                        Err(events) => events,
                    }
                }
                Received::Built(builder) => builder.events().iter().cloned().collect(),
                Received::Raw(events) => events,
            };
            // The whole-log path, over the events the sink received and the rest of the
            // prefix.
            let rest = std::mem::replace(&mut stored.events, received);
            stored.events.extend(rest);
            let (_, header, mut events, invalid) = self.stored_events_in_order(id, stored)?;
            if let Some(index) = invalid {
                // The restore validates the header, then every event in seq order: a problem
                // before the invalid record is the one reported.
                let refused = invalid_envelope(&events, index);
                events.truncate(index);
                let clock: session_core::SharedClock = Arc::new(session_core::FixedClock::new(0));
                Session::from_restore_events(id, events, &header, clock).map_err(Error::Session)?;
                return Err(refused);
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
            Ok(PreparedSource::new(
                session,
                balanced.len(),
                revision,
                torn,
                closers,
            ))
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

    pub(super) async fn is_current(&self, source: &PreparedSource) -> Result<bool> {
        let current = self
            .backend
            .read_stored_revision(&source.inspection.meta.id)
            .await?;
        Ok(current.as_ref() == Some(&source.revision))
    }

    /// Commits one prepared repair and establishes its ownerless cursor. `Ok(None)`: the
    /// source was stale or a repair was committed; the caller reloads.
    pub(super) async fn commit_prepared(
        self: &Arc<Self>,
        source: &PreparedSource,
    ) -> Result<Option<u64>> {
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

    pub(super) fn loader(self: &Arc<Self>, id: &str) -> Loader<'static, Source, u64> {
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

    pub(super) fn committer(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Commit<Source, u64> {
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
    pub(super) async fn load_live_snapshot(
        self: &Arc<Self>,
        session: &SharedSession,
    ) -> Result<Inspection> {
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

    pub(super) fn detailed_live(session: &SharedSession) -> DetailedInspection {
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
    pub(super) async fn read_stored_prefix(
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

    pub(super) async fn read_from_core(
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

/// The refusal of the stored record at `index`, whose envelope is invalid: its cause is the
/// envelope's error, found by validating the record (kept as stored) again.
fn invalid_envelope(events: &[Event], index: usize) -> Error {
    Error::InvalidStoredEnvelope {
        index,
        cause: events
            .get(index)
            .and_then(|event| Event::from_value(&event.to_value()).err()),
    }
}
