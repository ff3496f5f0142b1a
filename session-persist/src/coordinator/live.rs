//! Live wiring: a published session's write-behind controller, its initialization
//! (`onCreated`: adoption of a stored prefix and the collision rules), and its flush.

use std::sync::atomic::AtomicU8;
use std::sync::{Arc, MutexGuard, Weak};

use session_core::{Event, Events, SessionHeader};
use session_store::SharedSession;

use super::state::{CoordInner, Core, LiveEntry, QUEUED, SessionState, Source};
use crate::backend::{Backend, StoredPrefix};
use crate::error::{Error, Result};
use crate::normalize::normalize_events;
use crate::preparations::Reservation;
use crate::promise::{Promise, promise, settled, unshare};
use crate::write_behind::{BatchSink, BoxFuture, WriteBehind};

/// Whether a live seed reproduces a stored prefix exactly (key order included); with a
/// redaction hook, a stored event may also be the redacted copy of the seed's.
pub(super) fn seed_covers_prefix(
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

/// Where a coordinator's live write-behind controllers send their batches.
pub(super) struct LiveSink {
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
        event.approx_json_len()
    }
}

impl CoordInner {
    // ---- live wiring ----

    /// The live entry of `session`, creating it (and starting its initialization) if needed.
    /// An error here vetoes the session's publication.
    pub(super) fn init_for(self: &Arc<Self>, session: &SharedSession) -> Result<LiveEntry> {
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
        Ok(self.start_unprepared(core, session, seed))
    }

    /// HMR seeding: gives a session that was already live when this service was built its
    /// controller, and starts its `onCreated`. Only a reserved preparation can refuse a session
    /// ([`CoordInner::init_for`]) and a service being built holds none, so this cannot fail.
    pub(super) fn seed_live(self: &Arc<Self>, session: &SharedSession) {
        let seed = session.events();
        let core = self.core();
        debug_assert_eq!(self.pool.len(), 0, "seeding runs before any preparation");
        if core.live_entry(session).is_none() {
            self.start_unprepared(core, session, seed);
        }
    }

    /// Registers the controller of a session with no reserved preparation and queues its
    /// `onCreated` in its chain (`core` is released before queueing).
    fn start_unprepared(
        self: &Arc<Self>,
        mut core: MutexGuard<'_, Core>,
        session: &SharedSession,
        seed: Events,
    ) -> LiveEntry {
        let id = session.id();
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
        entry
    }

    pub(super) fn write_behind(
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
    pub(super) fn attach_prepared(
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
    pub(super) async fn on_created(
        self: &Arc<Self>,
        session: &SharedSession,
        seed: Events,
    ) -> Result<()> {
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
    pub(super) async fn seed_matches_persisted(
        &self,
        id: &str,
        seed: &Events,
        cursor: u64,
    ) -> Result<bool> {
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
    pub(super) async fn adopt_live_prefix(
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
    pub(super) fn flush_session(
        self: &Arc<Self>,
        session: &SharedSession,
    ) -> BoxFuture<Result<()>> {
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
    pub(super) async fn append_live_batch(
        self: &Arc<Self>,
        id: &str,
        batch: &[Event],
    ) -> Result<()> {
        let cursor = self.core().states.get(id).map_or(0, |s| s.cursor);
        let fresh: Vec<Event> = batch
            .iter()
            .filter(|e| e.seq() >= cursor)
            .cloned()
            .collect();
        self.append_core(id, fresh).await
    }
}
