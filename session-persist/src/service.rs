//! The public persistence service contract (`SessionPersistence`) and its value types.
//!
//! First-party backends implement the storage hooks ([`Backend`](crate::Backend)) and get the
//! whole service from [`Persistence`]; a third-party medium may implement
//! [`SessionPersistence`] directly and inherit the default [`SessionPersistence::read_raw`]
//! (refused) and [`SessionPersistence::prepare`] (`load`, then the store's `prepare`).

use async_trait::async_trait;
use session_core::{Event, Events, SessionHeader};
use session_store::{PrepareOptions, SeedSource, SessionPreparation, SessionStore};

use crate::backend::{Location, RawArtifact, Revision};
use crate::cancel::{self, CancelToken};
use crate::coordinator::Persistence;
use crate::error::{Error, Result};

/// A session's metadata and events as read (`SessionInspection`): immutable, shared.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The header.
    pub meta: SessionHeader,
    /// The events (balanced by closers for `load`; possibly an open turn for `inspect`).
    pub events: Events,
}

/// [`Persistence::inspect_detailed`]: an inspection together with what storage held, from one
/// read of the log.
#[derive(Debug, Clone)]
pub struct DetailedInspection {
    /// What [`Persistence::inspect`] returns.
    pub inspection: Inspection,
    /// How many leading events of `inspection.events` are stored; the rest are the closers
    /// `load` would append (added in memory only).
    pub stored: usize,
    /// The torn tail `load` would cut, when storage has one.
    pub torn: Option<crate::backend::TornMarker>,
    /// The surface after every event of `inspection.events` (O(1) snapshot of the session
    /// the inspection built, so a caller need not fold the log again).
    pub surface: session_surface::Nodes,
    /// The messages derived from that surface.
    pub messages: session_surface::Messages,
    /// The human transcript of those events, replacement markers included.
    pub transcript: session_surface::Transcript,
}

/// The stored events from some seq on (`readFrom`).
#[derive(Debug, Clone)]
pub struct StoredEvents {
    /// The stored header.
    pub meta: SessionHeader,
    /// The stored events with `seq >= fromSeq`.
    pub events: Vec<Event>,
}

/// One entry of [`SessionPersistence::list_snapshots`].
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    /// The stored header.
    pub header: SessionHeader,
    /// The opaque, source-qualified revision of the stored log.
    pub revision: Revision,
}

/// The public persistence service (`SessionPersistence`).
#[async_trait]
pub trait SessionPersistence: Send + Sync {
    /// Where the artifact of `meta` lives or will live; no I/O.
    fn locate(&self, meta: &SessionHeader) -> Option<Location>;

    /// Whether [`SessionPersistence::read_raw`] is supported.
    fn supports_raw_artifacts(&self) -> bool {
        false
    }

    /// The verbatim artifact of `id`. The default refuses with
    /// `this session persistence backend does not expose raw artifacts` (a cancelled token
    /// wins with its reason).
    async fn read_raw(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<RawArtifact>> {
        let _ = id;
        cancel::check(cancel)?;
        Err(Error::NoRawArtifacts)
    }

    /// Registers metadata; nothing is written until the first append.
    async fn create(&self, meta: &SessionHeader) -> Result<()>;

    /// Durably appends a contiguous batch.
    async fn append(&self, id: &str, events: &[Event]) -> Result<()>;

    /// Commits cold recovery and returns the balanced log.
    async fn load(&self, id: &str) -> Result<Inspection>;

    /// Reads without changing storage.
    async fn inspect(&self, id: &str, cancel: Option<&CancelToken>) -> Result<Inspection>;

    /// The stored events with `seq >= from_seq`.
    async fn read_from(
        &self,
        id: &str,
        from_seq: u64,
        cancel: Option<&CancelToken>,
    ) -> Result<StoredEvents>;

    /// Every stored session's metadata.
    async fn list(&self, cancel: Option<&CancelToken>) -> Result<Vec<SessionHeader>>;

    /// Every stored session with its revision.
    async fn list_snapshots(&self, cancel: Option<&CancelToken>) -> Result<Vec<SessionSnapshot>>;

    /// The session store resumed sessions are prepared in, if any.
    fn sessions(&self) -> Option<SessionStore> {
        None
    }

    /// The exact unpublished session used to resume `id`. The default loads the session, then
    /// builds it with the store's `prepare` (restore mode); it refuses with
    /// `cannot prepare a session: SessionStore is not configured` without a store.
    async fn prepare(&self, id: &str, cancel: Option<&CancelToken>) -> Result<SessionPreparation> {
        cancel::check(cancel)?;
        let Some(store) = self.sessions() else {
            return Err(Error::StoreNotConfigured);
        };
        let inspection = self.load(id).await?;
        cancel::check(cancel)?;
        let session = store
            .prepare(
                Some(id),
                PrepareOptions {
                    seed: None,
                    seed_events: Some(inspection.events),
                    meta: Some(inspection.meta.to_value()),
                    seed_source: SeedSource::Persistence,
                },
            )
            .map_err(Error::Store)?;
        Ok(SessionPreparation::new(session, None))
    }
}

#[async_trait]
impl SessionPersistence for Persistence {
    fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        Persistence::locate(self, meta)
    }

    fn supports_raw_artifacts(&self) -> bool {
        Persistence::supports_raw_artifacts(self)
    }

    async fn read_raw(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<RawArtifact>> {
        Persistence::read_raw(self, id, cancel).await
    }

    async fn create(&self, meta: &SessionHeader) -> Result<()> {
        Persistence::create(self, meta).await
    }

    async fn append(&self, id: &str, events: &[Event]) -> Result<()> {
        Persistence::append(self, id, events).await
    }

    async fn load(&self, id: &str) -> Result<Inspection> {
        Persistence::load(self, id).await
    }

    async fn inspect(&self, id: &str, cancel: Option<&CancelToken>) -> Result<Inspection> {
        Persistence::inspect(self, id, cancel).await
    }

    async fn read_from(
        &self,
        id: &str,
        from_seq: u64,
        cancel: Option<&CancelToken>,
    ) -> Result<StoredEvents> {
        Persistence::read_from(self, id, from_seq, cancel).await
    }

    async fn list(&self, cancel: Option<&CancelToken>) -> Result<Vec<SessionHeader>> {
        Persistence::list(self, cancel).await
    }

    async fn list_snapshots(&self, cancel: Option<&CancelToken>) -> Result<Vec<SessionSnapshot>> {
        Persistence::list_snapshots(self, cancel).await
    }

    fn sessions(&self) -> Option<SessionStore> {
        Some(self.store().clone())
    }

    async fn prepare(&self, id: &str, cancel: Option<&CancelToken>) -> Result<SessionPreparation> {
        Persistence::prepare(self, id, cancel).await
    }
}
