//! The storage-backend contract: the only interface between the persistence coordinator and a
//! storage medium.
//!
//! # Contract
//!
//! A [`Backend`] stores append-only session logs. The coordinator above it owns every policy
//! decision (validation, migrations, crash closers, write batching, retries, caching); the
//! backend owns bytes or rows. An implementation for a new medium must honour these rules.
//!
//! **Identity and absence.** Sessions are addressed by id. `Ok(None)` from a read means the
//! session has no artifact at all. Any other problem is an error: corruption is never reported
//! as absence, and absence is never papered over by creating something.
//!
//! **Reads are observations.** [`Backend::load_stored`], [`Backend::read_stored_revision`],
//! [`Backend::load_stored_from`], [`Backend::load_stored_page`], [`Backend::list`],
//! [`Backend::list_snapshots`] and
//! [`Backend::read_raw`] never change storage. Returned values are fresh: the coordinator may
//! keep them without copying.
//!
//! **The stored prefix.** [`StoredPrefix::events`] is the valid, contiguous prefix of the log
//! (`events[i].seq() == i`), already expanded from any physical packing. Damage that can only be
//! a torn tail (an interrupted final write) is not an error: the prefix stops before it and
//! [`StoredPrefix::torn`] carries an opaque [`TornMarker`] saying what to cut. Damage inside the
//! committed region (anything before the last durable `turn/end`, or anything the medium can
//! prove was completely written) is an error. `torn` is present if and only if something must be
//! truncated.
//!
//! **Revisions.** [`Revision`] identifies exactly the bytes or rows a read saw. It stays equal
//! while the log and its backing store are unchanged, and changes after an append, after a
//! mutating repair and after the artifact is replaced. Revisions of two different stores never
//! compare equal. [`Backend::read_stored_revision`] is a cheap read in the same representation.
//!
//! **Appends.** [`Backend::append_batch`] receives a non-empty batch whose seqs continue the
//! stored log; the caller checks contiguity. It returns only once the batch is durable. When
//! `is_materialized` is false the session has no artifact yet: the header and this first batch
//! must become visible atomically (no header-only or half-written artifact may ever be
//! observable), and an existing artifact must be refused, never overwritten. A failed append
//! must leave storage exactly as it was (roll back partial bytes or rows), so that a retry of the
//! same batch neither duplicates nor skips a seq. An artifact that disappears under a writer is
//! an error, never silently re-created.
//!
//! **Bulk publication.** [`Backend::publish_batches`] publishes a new session and all of its
//! batches at once, with the same atomicity as a first [`Backend::append_batch`]: a crash leaves
//! no artifact or every event, and an existing artifact is refused. The default does exactly
//! that with one first batch; a backend that stores batch boundaries may keep them (the JSONL
//! backend writes one frame per batch under a temporary name and syncs once). The layout is
//! checked with [`check_batches`].
//!
//! **Repairs.** [`Backend::commit_repair`] cuts the torn tail described by the marker (when one
//! is given; it must be a marker this backend produced), then durably appends the closers. It
//! need not be atomic: a crash between the steps leaves a valid, shorter log and the next load
//! recomputes the closers. With neither marker nor closers it does nothing.
//!
//! **Single writer.** One writer per session is enforced, not assumed. A session is opened for
//! writing with [`Backend::acquire`] before its first append: the coordinator does so when it
//! creates a session, when it loads one to resume or append to it (after `load`, `prepare` or a
//! cold `append`), and for a fork child (a new session). From then on the backend instance holds
//! exclusive write ownership until [`Backend::release`] (the coordinator releases when it retires
//! the session) or [`Backend::close`]; a writer in another process or another backend instance
//! is refused when it opens the session, and writes nothing. `acquire` also makes the tail
//! check: under the ownership just taken, storage must be exactly at the revision the writer's
//! session was loaded from, or the writer is stale and gets an error naming both positions. A
//! backend whose appends check the stored tail themselves (a database comparing the stored next
//! seq in the appending transaction) may leave `acquire` as the default no-op. A backend
//! instance that appends without `acquire` (tools copying logs) takes ownership at its first
//! write.
//!
//! **Formats.** A backend refuses a header whose log format version is not 0 with
//! [`Error::FormatUnsupported`], located with [`Backend::locate`] when it can. Other
//! backend-level corruption errors propagate unwrapped; the coordinator wraps only its own
//! validation failures.
//!
//! **Blocking.** Methods may block on I/O internally, but must not block the async runtime's
//! worker threads (use `spawn_blocking` or native async I/O).
//!
//! [`Error::FormatUnsupported`]: crate::Error::FormatUnsupported

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use session_core::json::Value;
use session_core::{Event, SessionHeader};

use crate::error::{Error, Result};

/// An opaque, source-qualified revision of a stored log (`SessionPersistenceRevision`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision(Arc<str>);

impl Revision {
    /// Wraps a backend-built revision string.
    pub fn new(text: impl Into<Arc<str>>) -> Revision {
        Revision(text.into())
    }

    /// The revision text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a session's artifact lives (`{kind, path}`), for diagnostics and consumers that read
/// transcripts directly. The artifact may not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The artifact kind, for example `"jsonl"`.
    pub kind: String,
    /// The absolute path of the artifact.
    pub path: PathBuf,
}

impl Location {
    /// A JSONL transcript location.
    pub fn jsonl(path: impl Into<PathBuf>) -> Location {
        Location {
            kind: "jsonl".to_owned(),
            path: path.into(),
        }
    }
}

/// What a repair must cut from a stored log. Opaque to the coordinator: it is produced by
/// [`Backend::load_stored`] and handed back to [`Backend::commit_repair`] unchanged.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TornMarker {
    /// Byte-oriented media (JSONL): truncate the artifact to `truncate_to` bytes, then re-append
    /// `recovered` (complete records salvaged from a torn compressed frame) before the closers.
    Truncate {
        /// The length to truncate to.
        truncate_to: u64,
        /// Events recovered from the torn region; they are part of the stored prefix.
        recovered: Vec<Event>,
    },
    /// Row-oriented media: delete everything from this seq on.
    FromSeq(u64),
}

/// The stored prefix of a session (`StoredPrefix`).
#[derive(Debug, Clone)]
pub struct StoredPrefix {
    /// The header, read leniently: fields the storage layer does not check are taken when they
    /// have the expected type and omitted otherwise. Validate [`StoredPrefix::header_value`].
    pub meta: SessionHeader,
    /// The header record as read (without any storage tag such as JSONL's `"type"`), for the
    /// coordinator's validation.
    pub header_value: Value,
    /// The valid contiguous prefix, packed rows expanded. It stops before
    /// [`StoredPrefix::invalid_envelope`] when there is one.
    pub events: Vec<Event>,
    /// The index of the first stored record whose seq is contiguous but whose envelope is
    /// invalid, and the stored events from that index on: every record with an invalid
    /// envelope kept as stored ([`Event::verbatim`]), the others as read. Reading does not fail
    /// on it: `read_from` returns these events as stored, while `inspect` and `load` refuse
    /// the log (the reference's restore does: `seed event at index <i> has an invalid event
    /// envelope`).
    pub invalid_envelope: Option<(usize, Vec<Event>)>,
    /// The revision of exactly the data read.
    pub revision: Revision,
    /// Present if and only if a torn tail must be truncated.
    pub torn: Option<TornMarker>,
}

/// A stored suffix from a seeking read (`StoredSuffix`): never torn, never mutating.
#[derive(Debug, Clone)]
pub struct StoredSuffix {
    /// The header, read leniently (see [`StoredPrefix::meta`]).
    pub meta: SessionHeader,
    /// The header record as read.
    pub header_value: Value,
    /// The stored events with `seq >= from_seq`.
    pub events: Vec<Event>,
}

/// One page of a stored log ([`Backend::load_stored_page`]): a bounded run of the stored
/// prefix, read in one snapshot of the store.
#[derive(Debug, Clone)]
pub struct StoredPage {
    /// The header, read leniently (see [`StoredPrefix::meta`]).
    pub meta: SessionHeader,
    /// The header record as read.
    pub header_value: Value,
    /// The revision of the log this page was read from: pages of one pass over an unchanged
    /// log all carry the same revision.
    pub revision: Revision,
    /// The stored events from the requested seq on, in seq order, at most the requested
    /// number; fewer only when the page reaches the end of the valid stored prefix.
    pub events: Vec<Event>,
    /// Whether stored records follow the valid prefix this page ends: a torn tail (and, for
    /// the default implementation, records with an invalid envelope,
    /// [`StoredPrefix::invalid_envelope`]). Only the last page of a pass can have it.
    pub torn: bool,
}

/// One session of a listing ([`Backend::list_entries`]).
#[derive(Debug)]
pub struct ListedSession {
    /// Where its artifact is, when the medium has per-session artifacts.
    pub location: Option<Location>,
    /// Its header as stored (read leniently, see [`Backend::list`]), or why it cannot be
    /// listed (an unreadable or invalid header, a header that does not belong at its location,
    /// a duplicate id).
    pub header: std::result::Result<SessionHeader, Error>,
}

/// A verbatim artifact, decoded from its physical encoding.
#[derive(Debug, Clone)]
pub struct RawArtifact {
    /// The header, read leniently.
    pub meta: SessionHeader,
    /// The logical file name, for example `session.jsonl`.
    pub filename: String,
    /// The logical text.
    pub content: String,
}

/// What receives the valid events of a stored prefix while [`Backend::load_stored_into`]
/// reads the log.
pub trait StoredEventSink: Send {
    /// A read of the log starts, with its header record as read
    /// ([`StoredPrefix::header_value`]); events received before belong to an abandoned read.
    fn start(&mut self, header: &Value);
    /// The next valid events of the prefix, in seq order: the sink takes them out of `events`.
    fn accept(&mut self, events: &mut Vec<Event>);
}

/// A [`StoredEventSink`] shared between the caller and the reading thread.
pub type SharedEventSink = Arc<Mutex<dyn StoredEventSink>>;

/// The storage hooks of a persistence backend (`PersistenceBackend`). See the
/// [module documentation](self) for the contract.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A label for diagnostics, for example `session-persistence-jsonl`.
    fn name(&self) -> &str;

    /// Reads the stored prefix of `id` across every storage scope. `None`: no artifact.
    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>>;

    /// [`Backend::load_stored`], handing valid events of the prefix to `sink` in seq order,
    /// as the read finds them, so that the caller can work on them while the log is still
    /// being read. The returned prefix's [`StoredPrefix::events`] are the rest of the prefix,
    /// after the ones the sink received. The default reads the whole prefix, then hands it
    /// over. A read that starts again (the log changed under it) calls
    /// [`StoredEventSink::start`] again.
    async fn load_stored_into(
        &self,
        id: &str,
        sink: SharedEventSink,
    ) -> Result<Option<StoredPrefix>> {
        let mut prefix = self.load_stored(id).await?;
        if let Some(p) = &mut prefix {
            let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
            sink.start(&p.header_value);
            sink.accept(&mut p.events);
        }
        Ok(prefix)
    }

    /// The current revision of `id`, in the representation [`Backend::load_stored`] uses.
    /// `None`: no artifact.
    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>>;

    /// Whether [`Backend::load_stored_from`] is implemented.
    fn supports_seek(&self) -> bool {
        false
    }

    /// Reads the committed events with `seq >= from_seq` without reading the whole log. Never
    /// mutates and never reports a torn tail. The default refuses with [`Error::Unsupported`].
    async fn load_stored_from(&self, id: &str, from_seq: u64) -> Result<Option<StoredSuffix>> {
        let _ = (id, from_seq);
        Err(Error::Unsupported {
            backend: self.name().to_owned(),
            operation: "seeking reads (loadStoredFrom)",
        })
    }

    /// Reads one page of the stored prefix of `id`: its events with `seq >= from_seq`, at most
    /// `max_events` of them (0 reads as 1), so that a whole-log pass that keeps nothing holds
    /// one page at a time. Never mutates. Committed corruption in or before the rows the page
    /// reads fails as [`Backend::load_stored`] fails; a torn tail ends the prefix, and the page
    /// that reaches it says so ([`StoredPage::torn`]). Pages are separate reads: a caller that
    /// needs one snapshot compares their revisions. The default reads the whole prefix with
    /// [`Backend::load_stored`] and keeps the page (correct, not bounded); a medium that reads
    /// by seq range overrides it.
    async fn load_stored_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> Result<Option<StoredPage>> {
        let Some(mut prefix) = self.load_stored(id).await? else {
            return Ok(None);
        };
        let len = prefix.events.len();
        let start = usize::try_from(from_seq).map_or(len, |s| s.min(len));
        let end = start.saturating_add(max_events.max(1)).min(len);
        prefix.events.truncate(end);
        Ok(Some(StoredPage {
            meta: prefix.meta,
            header_value: prefix.header_value,
            revision: prefix.revision,
            events: prefix.events.split_off(start),
            torn: end == len && (prefix.torn.is_some() || prefix.invalid_envelope.is_some()),
        }))
    }

    /// Durably appends a non-empty, contiguous batch. When `!is_materialized`, the header and
    /// this batch commit atomically and an existing artifact is refused.
    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()>;

    /// Publishes a new session whose stored events are `events`, laid out as the consecutive
    /// append batches `batches` (non-empty ranges of `events`, in order, covering all of
    /// them; [`check_batches`]), atomically: after a crash either nothing of the session is
    /// stored or all of it, and an existing artifact is refused as by a first
    /// [`Backend::append_batch`]. A bulk copy (a fork's child, a converted session) is then
    /// never left half written, and is synced once instead of once per batch.
    ///
    /// A backend whose storage keeps batch boundaries (the JSONL backend: one Zstandard frame
    /// per batch) keeps them; others may ignore them. The default checks `batches` and
    /// publishes every event as one first batch, which that method's contract makes atomic.
    /// The events are taken by value: a backend that writes on another thread moves them there
    /// instead of copying a whole session.
    async fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: Vec<Event>,
        batches: &[Range<usize>],
    ) -> Result<()> {
        check_batches(events.len(), batches)?;
        self.append_batch(meta, &events, false).await
    }

    /// Truncates the torn tail if and only if `torn` is present, then durably appends
    /// `closers`. Need not be atomic.
    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()>;

    /// The headers of every stored session (unordered). A header is read leniently: a session
    /// whose header has another version is returned as stored (only opening it refuses). A
    /// session whose header cannot be read is left out ([`Backend::list_entries`] reports it);
    /// layout errors (a header whose id and location disagree, a duplicated id) fail the
    /// listing, as the reference's do.
    async fn list(&self) -> Result<Vec<SessionHeader>>;

    /// Every stored session, each with its header or the error that keeps it from being
    /// listed (layout errors included), so that one damaged session never fails the listing
    /// of the others; only problems of the store itself do. The default lists
    /// [`Backend::list`]'s headers, none with an error.
    async fn list_entries(&self) -> Result<Vec<ListedSession>> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .map(|header| ListedSession {
                location: self.locate(&header),
                header: Ok(header),
            })
            .collect())
    }

    /// The headers of every stored session with their revisions.
    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>>;

    /// Where the artifact of `meta` lives or will live; no I/O. `None` when the medium has no
    /// per-session artifact or `meta` cannot name one.
    fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        let _ = meta;
        None
    }

    /// Whether [`Backend::read_raw`] is implemented.
    fn supports_raw_artifacts(&self) -> bool {
        false
    }

    /// The verbatim artifact of `id`; `None` when absent. The default refuses with
    /// [`Error::NoRawArtifacts`].
    async fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
        let _ = id;
        Err(Error::NoRawArtifacts)
    }

    /// Opens the session of `meta` for writing (see the single-writer rule): takes exclusive
    /// write ownership now, and checks under it that storage is exactly at `stored`, the
    /// revision the writer's session was loaded from (`None`: a new session, no artifact may
    /// exist). Ownership taken here is held until [`Backend::release`] or [`Backend::close`]; a
    /// session is opened once per instance: opening it again through the same instance (a
    /// second coordinator over it) is refused like another writer until it is released. The
    /// default does nothing.
    async fn acquire(&self, meta: &SessionHeader, stored: Option<&Revision>) -> Result<()> {
        let _ = (meta, stored);
        Ok(())
    }

    /// Gives up write ownership of `id` (see the single-writer rule). Later writes re-acquire
    /// it. The default does nothing.
    async fn release(&self, id: &str) -> Result<()> {
        let _ = id;
        Ok(())
    }

    /// Releases every resource; awaited after the coordinator's final drain.
    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

macro_rules! forward_backend {
    ($ptr:ident) => {
        // Every method is forwarded, provided ones included: a default would silently replace
        // the wrapped backend's override. Clippy refuses an impl that leaves one out.
        #[async_trait]
        #[deny(clippy::missing_trait_methods)]
        impl<T: Backend + ?Sized> Backend for $ptr<T> {
            fn name(&self) -> &str {
                (**self).name()
            }
            async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
                (**self).load_stored(id).await
            }
            async fn load_stored_into(
                &self,
                id: &str,
                sink: SharedEventSink,
            ) -> Result<Option<StoredPrefix>> {
                (**self).load_stored_into(id, sink).await
            }
            async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
                (**self).read_stored_revision(id).await
            }
            fn supports_seek(&self) -> bool {
                (**self).supports_seek()
            }
            async fn load_stored_from(
                &self,
                id: &str,
                from_seq: u64,
            ) -> Result<Option<StoredSuffix>> {
                (**self).load_stored_from(id, from_seq).await
            }
            async fn load_stored_page(
                &self,
                id: &str,
                from_seq: u64,
                max_events: usize,
            ) -> Result<Option<StoredPage>> {
                (**self).load_stored_page(id, from_seq, max_events).await
            }
            async fn append_batch(
                &self,
                meta: &SessionHeader,
                events: &[Event],
                is_materialized: bool,
            ) -> Result<()> {
                (**self).append_batch(meta, events, is_materialized).await
            }
            async fn publish_batches(
                &self,
                meta: &SessionHeader,
                events: Vec<Event>,
                batches: &[Range<usize>],
            ) -> Result<()> {
                (**self).publish_batches(meta, events, batches).await
            }
            async fn commit_repair(
                &self,
                meta: &SessionHeader,
                torn: Option<TornMarker>,
                closers: &[Event],
            ) -> Result<()> {
                (**self).commit_repair(meta, torn, closers).await
            }
            async fn list(&self) -> Result<Vec<SessionHeader>> {
                (**self).list().await
            }
            async fn list_entries(&self) -> Result<Vec<ListedSession>> {
                (**self).list_entries().await
            }
            async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
                (**self).list_snapshots().await
            }
            fn locate(&self, meta: &SessionHeader) -> Option<Location> {
                (**self).locate(meta)
            }
            fn supports_raw_artifacts(&self) -> bool {
                (**self).supports_raw_artifacts()
            }
            async fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
                (**self).read_raw(id).await
            }
            async fn acquire(&self, meta: &SessionHeader, stored: Option<&Revision>) -> Result<()> {
                (**self).acquire(meta, stored).await
            }
            async fn release(&self, id: &str) -> Result<()> {
                (**self).release(id).await
            }
            async fn close(&self) -> Result<()> {
                (**self).close().await
            }
        }
    };
}

forward_backend!(Box);
forward_backend!(Arc);

/// Checks the batch layout of a [`Backend::publish_batches`] of `events` events: at least one
/// batch, each non-empty, each starting where the one before ended, the first at 0 and the
/// last ending at `events`.
pub fn check_batches(events: usize, batches: &[Range<usize>]) -> Result<()> {
    let fail = |detail: String| Err(Error::InvalidBatches { events, detail });
    if batches.is_empty() {
        return fail("there are none".to_owned());
    }
    let mut next = 0;
    for (i, batch) in batches.iter().enumerate() {
        if batch.start != next {
            return fail(format!("batch {i} starts at {}, not {next}", batch.start));
        }
        if batch.end <= batch.start {
            return fail(format!(
                "batch {i} ({}..{}) is empty",
                batch.start, batch.end
            ));
        }
        next = batch.end;
    }
    if next != events {
        return fail(format!("the last batch ends at {next}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_batches;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one-range layouts are the cases under test
    fn batch_layouts_must_cover_the_events_in_order_without_empty_batches() {
        assert!(check_batches(5, &[0..2, 2..5]).is_ok());
        assert!(check_batches(1, &[0..1]).is_ok());
        let fails = |events, batches: &[std::ops::Range<usize>]| {
            check_batches(events, batches).unwrap_err().to_string()
        };
        assert_eq!(
            fails(0, &[]),
            "batches of a publication must be non-empty consecutive ranges covering its 0 events (there are none)"
        );
        assert!(fails(5, &[0..2, 3..5]).ends_with("(batch 1 starts at 3, not 2)"));
        assert!(fails(5, &[1..5]).ends_with("(batch 0 starts at 1, not 0)"));
        assert!(fails(5, &[0..2, 2..2, 2..5]).ends_with("(batch 1 (2..2) is empty)"));
        assert!(fails(5, &[0..2, 2..4]).ends_with("(the last batch ends at 4)"));
        assert!(fails(5, &[0..2, 2..6]).ends_with("(the last batch ends at 6)"));
    }
}
