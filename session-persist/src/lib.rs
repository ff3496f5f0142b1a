//! `session-persist` owns durable sessions: the storage-backend contract ([`Backend`]) that the
//! persistence coordinator talks to, and the JSONL / zstd-JSONL backend ([`JsonlBackend`]),
//! file-compatible with the reference implementation.
//!
//! Primary types: [`Backend`] with [`StoredPrefix`], [`TornMarker`] and [`Revision`];
//! [`JsonlBackend`] configured by [`JsonlConfig`]; the persistence service [`Persistence`]
//! (the [`SessionPersistence`] contract over any backend, wired into a `SessionStore`) with its
//! per-session [`write_behind::WriteBehind`] controller; the crate's [`Error`].
//!
//! # Key design decision
//!
//! The backend is a byte store with a precise contract, not a policy engine: it reports the
//! valid prefix of a log plus an opaque marker of what a repair must cut, and the coordinator
//! decides everything else (validation, closers, batching, retries). The JSONL backend keeps the
//! reference's files byte-for-byte (same header line, JSON text, packed chunk rows and one
//! checksummed zstd frame per batch) and adds what the reference only documents: one writer per
//! session enforced with a file lock, no silent re-creation of a vanished log, and removal of
//! stale temporary files. Every file-system call goes through a small trait ([`jsonl::fs::Fs`])
//! so faults can be injected, and all blocking work runs on tokio's blocking pool.
//!
//! # Durability: what `flush` guarantees
//!
//! When `store.flush(session)` (or [`Persistence::flush`]) returns `Ok`, every event the session
//! admitted before the flush started, and every event admitted while it ran, is written to the
//! backend and fsynced; the first publication of a session also fsyncs the directories leading
//! to its log, so the log survives a crash from then on. Without a flush, events reach storage
//! in the background within the batching window (200 ms by default), and a crash can lose that
//! window. When a write fails, the backend rolls the log back to its previous length, the error
//! reaches the caller of the flush, and the events stay buffered in memory, in order, for the
//! next flush (or the window opened by the next event) to retry; appending to a session never
//! waits for storage.
//!
//! # Example
//!
//! ```
//! use session_core::{Event, SessionHeader, json::Value};
//! use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("session-persist-doc-{}", std::process::id()));
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! rt.block_on(async {
//!     let backend = JsonlBackend::open(JsonlConfig::new(&root).compression(Compression::Zstd))?;
//!     let mut meta = SessionHeader::new("demo", 1_000);
//!     meta.cwd = Some("/work/project".into());
//!     let turn = Event::appended("turn/start", 0, 1_000, Value::parse(r#"{"turn":1}"#)?, None, None);
//!     backend.append_batch(&meta, &[turn], false).await?; // first publication
//!
//!     let stored = backend.load_stored("demo").await?.expect("stored");
//!     assert_eq!(stored.events.len(), 1);
//!     assert!(stored.torn.is_none());
//!     assert!(backend.locate(&meta).unwrap().path.ends_with(
//!         "--work-project--/demo/session.jsonl.zstd"
//!     ));
//!     backend.close().await?;
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```

pub mod backend;
pub mod cancel;
pub mod checkpoint;
mod coordinator;
mod error;
pub mod jsonl;
pub mod memory;
mod normalize;
mod preparations;
mod promise;
pub mod redact;
mod service;
pub mod write_behind;

pub use backend::{
    Backend, ListedSession, Location, RawArtifact, Revision, SharedEventSink, StoredEventSink,
    StoredPage, StoredPrefix, StoredSuffix, TornMarker, check_batches,
};
pub use coordinator::{
    DEFAULT_PREPARED_SESSION_CACHE_SIZE, DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
    MAX_WRITE_BATCH_DELAY_MS, Persistence, PersistenceOptions, PreparedSession,
};
pub use error::LegacyKind;
pub use error::{
    Error, ErrorKind, FormatRefusal, HeaderProblem, Position, Result, UnparsableLine,
    ZstdStructureError, io_code,
};
pub use jsonl::{
    AutoSealOutcome, Compression, JSONL_BACKEND_NAME, JsonlBackend, JsonlConfig, LogStream,
    SEAL_PAUSE_ENV, SealPolicy, SealStep,
};
pub use service::{
    DetailedInspection, Inspection, SessionPersistence, SessionSnapshot, StoredEvents,
};
