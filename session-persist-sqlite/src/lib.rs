//! `session-persist-sqlite` owns the `SQLite` session-persistence backend
//! ([`SqliteBackend`], `session-persistence-sqlite`): every session of a store in one database
//! file, readable and writable by the reference implementation (schema 17, application id
//! `DSHP`).
//!
//! Primary types: [`SqliteBackend`] configured by [`SqliteConfig`] (with [`JournalMode`]),
//! implementing [`session_persist::Backend`], with [`RowStats`] for what a session's rows
//! hold; the physical row codec in [`codec`] and the schema and row decoding in [`schema`];
//! the crate's [`Error`].
//!
//! # Key design decision
//!
//! Every mutation is one `BEGIN IMMEDIATE` transaction that first re-checks the database's
//! ownership (application id, exact schema objects, `user_version`) and then checks the log's
//! physical tail: a batch that does not start at the stored next seq — a stale writer, in this
//! or another process — is refused before anything changes. Repairs are atomic, revisions
//! count transactions (`<store identity>:incarnation:<uuid>:revision:<n>`), and seeking reads
//! touch only the rows that can hold the requested seqs. Chunk deltas are stored as packed rows
//! of 3 to 1,024 members (at most 1 MiB of data each, zstd-compressed from 4 KiB when that is
//! smaller), so a streamed answer costs a handful of rows instead of thousands. All `SQLite` work
//! runs on tokio's blocking pool (see [`backend`]).
//!
//! Differences from the JSONL backend that are kept on purpose: an absent `delegationDepth`
//! stays absent, any undecodable row after the last durable `turn/end` is a removable torn
//! tail, logical ignorable events named like a packed-row tag are stored (as scalar rows), and
//! there is no `locate` and no raw artifact. Unknown header fields are not stored. A row holds
//! an event's envelope as columns, so every event is read back with its keys in the
//! live-append order (`type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?`): a
//! crash closer (written `surfaceOp` first) or a seeded event with keys in another order
//! comes back with the same content in that order.
//!
//! The workspace's backend suite runs against this backend in `tests/backend_suite.rs`
//! (every case passes; it declares torn tails, seeking reads, revisions that change on every
//! write, seq checks and the fixed envelope order).
//!
//! # Example
//!
//! ```
//! use session_core::{Event, SessionHeader, json::Value};
//! use session_persist::Backend;
//! use session_persist_sqlite::{SqliteBackend, SqliteConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! rt.block_on(async {
//!     let backend = SqliteBackend::new(SqliteConfig::new(":memory:"))?;
//!     let meta = SessionHeader::new("demo", 1_000);
//!     let chunk = |seq: u64, text: &str| {
//!         let data = Value::parse(&format!(
//!             r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
//!         ))?;
//!         Ok::<_, session_core::Error>(Event::appended("assistant/chunk", seq, 1_000, data, None, None))
//!     };
//!     let batch = [chunk(0, "Hel")?, chunk(1, "lo")?, chunk(2, "!")?];
//!     backend.append_batch(&meta, &batch, false).await?; // first publication: one packed row
//!
//!     let stored = backend.load_stored("demo").await?.expect("stored");
//!     assert_eq!(stored.events, batch);
//!     assert!(stored.torn.is_none());
//!     assert!(stored.revision.as_str().ends_with(":revision:1"));
//!     // The three deltas were stored as one packed physical row.
//!     assert_eq!(session_persist_sqlite::codec::pack_batch(&batch)?.len(), 1);
//!     let suffix = backend.load_stored_from("demo", 2).await?.expect("stored");
//!     assert_eq!(suffix.events, batch[2..]);
//!     backend.close().await?;
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(())
//! # }
//! ```

pub mod backend;
pub mod codec;
mod error;
pub mod path;
pub mod schema;
mod sql;
mod store;
pub mod uuid;

pub use backend::{
    DEFAULT_BUSY_TIMEOUT_MS, DirSync, MAX_BUSY_TIMEOUT_MS, RowStats, SqliteBackend, SqliteConfig,
};
pub use error::{Error, LOW_SPACE_BYTES, NoSpace, Result};
pub use rusqlite;

/// The backend's name, used in diagnostics.
pub const BACKEND_NAME: &str = "session-persistence-sqlite";

/// `SCHEMA_VERSION`: the `user_version` of a database this build reads and writes.
pub const SCHEMA_VERSION: i64 = 17;

/// `SESSION_PERSISTENCE_SQLITE_APPLICATION_ID`: `0x44534850`, "DSHP".
pub const APPLICATION_ID: i64 = 0x4453_4850;

/// The path of a private in-memory database.
pub const MEMORY_PATH: &str = ":memory:";

/// The journal mode a store selects at open (`journalMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalMode {
    /// `wal` (the default).
    #[default]
    Wal,
    /// `delete`.
    Delete,
    /// `truncate`.
    Truncate,
    /// `persist`.
    Persist,
}

impl JournalMode {
    /// Every mode, in configuration order.
    pub const ALL: [JournalMode; 4] = [
        JournalMode::Wal,
        JournalMode::Delete,
        JournalMode::Truncate,
        JournalMode::Persist,
    ];

    /// The configuration spelling (`wal`, `delete`, `truncate`, `persist`), which is also what
    /// `PRAGMA journal_mode` reports, lowercased.
    pub fn as_str(self) -> &'static str {
        match self {
            JournalMode::Wal => "wal",
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
        }
    }

    /// Parses a configuration spelling.
    pub fn parse(text: &str) -> Option<JournalMode> {
        JournalMode::ALL.into_iter().find(|m| m.as_str() == text)
    }
}
