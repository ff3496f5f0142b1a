//! The error type of `session-persist`.
//!
//! Every variant's `Display` is the reference implementation's exact text, so tests can compare
//! whole messages (see `display.rs`). Variants carry where the failure happened (path, line, byte
//! offset, seq) as fields; [`Error::kind`] says what kind of failure it is and
//! [`Error::position`] where it is, and [`Error::name`] gives the reference's error class name.
//! Errors are cheap to clone (their I/O and foreign sources sit behind an [`Arc`]), so one
//! failure observed by several waiters is a clone of it.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::Location;

mod display;
mod errno;
mod kind;

pub use errno::io_code;
pub use kind::{ErrorKind, Position};

/// Everything that can go wrong in `session-persist`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A file-system call failed. Display follows Node's shape:
    /// `<CODE>: <description>, <op> '<path>'` (the code is omitted when unknown).
    Io {
        /// The system call, in Node's naming (`open`, `write`, `fsync`, `scandir`, …).
        op: &'static str,
        /// The path the call was made on.
        path: PathBuf,
        /// The underlying error.
        source: Arc<io::Error>,
    },
    /// A log with no complete header record: `empty or header-less session log`, or
    /// `empty or header-less Zstandard session log` when `zstd`.
    EmptyLog {
        /// Whether the log is a Zstandard log.
        zstd: bool,
    },
    /// `corrupt session log: header line is not valid JSON`.
    HeaderNotJson {
        /// The parser's error (the error's source), when the line is text.
        cause: Option<session_core::json::ParseError>,
    },
    /// `corrupt session log: first line is not a session header`.
    NotSessionHeader {
        /// What is wrong with the record (the error's source).
        problem: HeaderProblem,
    },
    /// `session header uses retired policy baseline fields`.
    RetiredHeaderFields,
    /// A record holds a lone UTF-16 surrogate escape, which this build cannot represent
    /// (a documented refusal; the reference would read it).
    LoneSurrogate {
        /// 1-based line number after the header; `None` for the header line itself.
        line: Option<u64>,
        /// Byte offset of the escape in the logical (decompressed) log text.
        offset: u64,
    },
    /// `corrupt session log: unparsable committed event at line <n>`.
    UnparsableCommitted {
        /// 1-based line number, counted after the header.
        line: u64,
        /// Why the line could not be decoded (the error's source; not part of its message).
        cause: UnparsableLine,
    },
    /// `corrupt session log: record at byte <offset> is longer than <limit> bytes without a
    /// newline (MAX_RECORD_BYTES)`: a line of a plain log, terminated or not, longer than
    /// [`crate::jsonl::MAX_RECORD_BYTES`], which no harness writes. It is refused before more
    /// than the limit of it is held. (The reference reads a whole plain log as one string,
    /// which fails beyond 2^29 - 24 UTF-16 units, so it reads no such file either.)
    RecordTooLong {
        /// Byte offset of the record in the file.
        offset: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// `corrupt session log: seq gap in committed region at line <n> (expected <e>, got <g>)`.
    SeqGap {
        /// 1-based line number, counted after the header.
        line: u64,
        /// The seq the log expected.
        expected: u64,
        /// The stored `seq`, as JavaScript's `String(seq)` prints it.
        got: String,
    },
    /// A structural error in a Zstandard log: `corrupt Zstandard session log: <what> at byte <n>`.
    ZstdStructure {
        /// What is wrong.
        kind: ZstdStructureError,
        /// Byte offset in the file of the offending field: the frame's magic for an invalid
        /// magic, the frame-header descriptor for a reserved frame-header bit, the block header
        /// for a reserved block type.
        offset: u64,
    },
    /// `corrupt Zstandard session log: frame at byte <n> failed validation`.
    ZstdFrame {
        /// Byte offset of the frame in the file.
        offset: u64,
        /// The decoder's error (for example `Restored data doesn't match checksum`).
        source: Arc<io::Error>,
    },
    /// `corrupt Zstandard session log: complete frame contains a torn JSONL record`.
    ZstdTornRecord,
    /// `corrupt Zstandard session log: first frame is not exactly one header line`.
    ZstdHeaderFrameLines,
    /// `corrupt Zstandard session log: header frame failed validation` (listing).
    ZstdHeaderFrame {
        /// The decoder's error.
        source: Arc<io::Error>,
    },
    /// `SessionFormatUnsupportedError`: the log uses a format this build refuses to interpret.
    /// Suffixed ` (raw log: <path>)` when the artifact's location is known.
    FormatUnsupported {
        /// Why the format is refused.
        refusal: FormatRefusal,
        /// Where the artifact is, when the backend can say.
        location: Option<Location>,
    },
    /// `corrupt session log "<path>": requested id "<id>" does not match header id "<hid>"`.
    IdentityMismatch {
        /// The artifact.
        path: PathBuf,
        /// The id that was asked for.
        requested: String,
        /// The id in the header.
        header_id: String,
    },
    /// `corrupt session log "<path>": header id cannot name a storage path`.
    UnnameableHeader {
        /// The artifact.
        path: PathBuf,
    },
    /// `corrupt session log "<path>": header id "<hid>" and cwd identify "<expected>"`.
    IdentityPath {
        /// The artifact as discovered.
        path: PathBuf,
        /// The id in the header.
        header_id: String,
        /// The path the header's id and cwd name.
        expected: PathBuf,
    },
    /// `corrupt session log: invalid header line in "<path>"` (raw artifact reads).
    InvalidRawHeader {
        /// The artifact.
        path: PathBuf,
    },
    /// `session directory "<path>" must not be group/world-writable (mode <octal>); …`: a JSONL
    /// root, project or session directory that another local user could plant links in.
    PermissiveDirectory {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// `session log "<path>" is read in place outside a store layout; it cannot be written`.
    ReadOnlyFile {
        /// The log file.
        path: PathBuf,
    },
    /// `session artifact <json path> uses the unsupported flat-file layout; …`.
    FlatLayout {
        /// The flat file.
        path: PathBuf,
    },
    /// `session artifact <json path> uses <suffix>, but this backend is configured for
    /// compression <json mode>; …`.
    EncodingMismatch {
        /// The artifact of the other encoding.
        path: PathBuf,
        /// Whether the backend is configured for Zstandard (the artifact is then plain).
        configured_zstd: bool,
    },
    /// `duplicate JSONL session id "<id>" appears in multiple project directories`.
    DuplicateId {
        /// The session id.
        id: String,
    },
    /// `cannot encode an empty path segment`.
    EmptySegment,
    /// `cannot encode an empty project path`.
    EmptyProjectPath,
    /// `refusing to materialize "<id>": a log already exists on disk (load/resume it instead)`.
    AlreadyMaterialized {
        /// The session id.
        id: String,
    },
    /// `AggregateError`: `failed to roll back append to "<path>": <error>; the rollback also
    /// failed: <rollback>`, carrying the append error and the rollback error (each names its
    /// call, errno and path). The reference's message is the text before the first `:`.
    RollbackFailed {
        /// The session log.
        path: PathBuf,
        /// The error that made the append fail.
        error: Box<Error>,
        /// The error that made the rollback fail.
        rollback: Box<Error>,
    },
    /// A first publication wrote and fsynced the whole log and linked it into place, but the
    /// `fsync` of its directory failed: the log is on disk, its directory entry may not survive
    /// a power loss. The batch is not acknowledged; the next publication of the same session by
    /// this backend instance re-syncs the directories and writes only the events after the
    /// published ones.
    PublicationNotDurable {
        /// The session id.
        id: String,
        /// The published log.
        path: PathBuf,
        /// Its length in bytes.
        bytes: u64,
        /// The seqs of the published events (first, last).
        seqs: (u64, u64),
        /// The failed directory `fsync`.
        source: Box<Error>,
    },
    /// `session "<id>" is locked by another writer`: another process or backend instance holds
    /// the session's writer lock.
    Locked {
        /// The session id.
        id: String,
        /// The session log.
        path: PathBuf,
    },
    /// `cannot seal session "<id>": <reason>`: the log is not in a state that sealing may
    /// rewrite (an open turn, a torn tail, an invalid stored envelope, or no log at all).
    SealRefused {
        /// The session id.
        id: String,
        /// Why sealing was refused.
        reason: String,
    },
    /// The session log disappeared under its writer; it is never silently re-created.
    Vanished {
        /// The session id.
        id: String,
        /// The session log.
        path: PathBuf,
    },
    /// The session log was replaced or changed by someone other than its writer.
    Replaced {
        /// The session id.
        id: String,
        /// The session log.
        path: PathBuf,
    },
    /// `session "<id>" log "<path>" changed since this writer loaded it: ...`: a writer opened a
    /// session built from one state of the log, and under the writer lock the stored log is no
    /// longer there (another writer appended or repaired in between). Nothing was written.
    StaleWriter {
        /// The session id.
        id: String,
        /// The session log.
        path: PathBuf,
        /// The length in bytes of the log the writer's session was loaded from, when its revision
        /// names one.
        loaded_len: Option<u64>,
        /// The revision the writer's session was loaded from.
        loaded: String,
        /// The length in bytes of the stored log, under the lock.
        stored_len: u64,
        /// The revision of the stored log, under the lock.
        stored: String,
    },
    /// A repair marker points past the end of the log (the log changed since it was read).
    StaleRepair {
        /// The session log.
        path: PathBuf,
        /// The offset the marker truncates to.
        truncate_to: u64,
        /// The current length of the log.
        len: u64,
    },
    /// A torn marker of another backend's kind was handed to this backend.
    ForeignMarker {
        /// The backend's name.
        backend: String,
    },
    /// The backend does not implement an optional operation.
    Unsupported {
        /// The backend's name.
        backend: String,
        /// The operation.
        operation: &'static str,
    },
    /// `this session persistence backend does not expose raw artifacts`.
    NoRawArtifacts,
    /// The backend was closed.
    Closed {
        /// The backend's name.
        backend: String,
    },
    /// Compressing a frame failed.
    Encode {
        /// The compressor's error.
        source: Arc<io::Error>,
    },
    /// A background blocking task did not complete.
    Task {
        /// What the runtime reported.
        message: String,
    },

    // ---- Coordinator errors: the persistence service (spec §1.4, §1.5) ----
    /// `TypeError`: `session metadata must be losslessly JSON-serializable`.
    MetadataNotLossless,
    /// `TypeError`: `session metadata createdAt must be a non-negative safe integer`.
    MetadataCreatedAt,
    /// Metadata given as JSON that is not a session header: the header validator's message.
    InvalidMetadata(String),
    /// `session "<id>" already exists in this backend`.
    AlreadyTracked {
        /// The session id.
        id: String,
    },
    /// `session "<id>" already has a persisted log on disk; load/resume it instead of
    /// creating`.
    AlreadyPersisted {
        /// The session id.
        id: String,
    },
    /// `TypeError`: `session event batch is not losslessly JSON-serializable because it contains
    /// non-JSON-serializable data`.
    BatchNotLossless,
    /// `event at seq <seq> is a stored record with an invalid event envelope and cannot be
    /// appended`: an event kept as stored by `read_from` ([`session_core::Event::verbatim`]).
    VerbatimAppend {
        /// The event's seq.
        seq: u64,
    },
    /// `append seq mismatch for "<id>": expected <e> at index <i>, got <g>`.
    AppendSeqMismatch {
        /// The session id.
        id: String,
        /// The seq the stored log expects at this index.
        expected: u64,
        /// Index in the batch.
        index: usize,
        /// The seq the event carries.
        got: u64,
    },
    /// `cannot append session "<id>" while its persisted preparation is reserved`.
    PreparationReserved {
        /// The session id.
        id: String,
    },
    /// `session "<id>" not found`.
    NotFound {
        /// The session id.
        id: String,
    },
    /// `cannot prepare session "<id>" while it is live`.
    PrepareWhileLive {
        /// The session id.
        id: String,
    },
    /// `session "<id>" already has a live persistence owner`.
    LiveOwner {
        /// The session id.
        id: String,
    },
    /// `cannot load session "<id>" while its live turn is open; use the live Session or wait
    /// for the turn to close`.
    LiveTurnOpen {
        /// The session id.
        id: String,
    },
    /// `TypeError`: `readFrom fromSeq must be a non-negative safe integer, got <n>`.
    InvalidFromSeq {
        /// `String(fromSeq)`.
        got: String,
    },
    /// `stored session identity mismatch: requested "<id>", header contains "<hid>"`.
    StoredIdentityMismatch {
        /// The id that was asked for.
        requested: String,
        /// The id in the stored header.
        header_id: String,
    },
    /// `session "<id>" is already persisted at a different cwd (persisted: <p>, live: <l>) (id
    /// collision)`; an absent cwd prints as `undefined`.
    CwdCollision {
        /// The session id.
        id: String,
        /// The persisted cwd.
        persisted: Option<String>,
        /// The live session's cwd.
        live: Option<String>,
    },
    /// `session "<id>" is already persisted with <n> event(s) that do not match this live
    /// session (id collision)`.
    SeedCollision {
        /// The session id.
        id: String,
        /// How many events are persisted.
        count: u64,
    },
    /// `session "<id>" is already bound to a different live session in this backend (id
    /// collision)`.
    OwnerCollision {
        /// The session id.
        id: String,
    },
    /// `session "<id>" already has a persisted log on disk that does not match this live
    /// session (id collision)`.
    PrefixCollision {
        /// The session id.
        id: String,
    },
    /// `session "<id>" preparation no longer matches its persistence state`.
    PreparationMismatch {
        /// The session id.
        id: String,
    },
    /// `cannot publish session "<id>": persisted state already owns this identity`.
    CannotPublish {
        /// The session id.
        id: String,
    },
    /// `session "<id>" preparation is no longer reserved`.
    NotReserved {
        /// The session id.
        id: String,
    },
    /// `session "<id>" contains unsupported legacy <what> at seq <s>`.
    LegacyEvent {
        /// The session id.
        id: String,
        /// Which retired shape.
        kind: LegacyKind,
        /// The event's seq.
        seq: u64,
    },
    /// `session "<id>" contains malformed pre-react-loop <type> at seq <s>`.
    MalformedLegacy {
        /// The session id.
        id: String,
        /// The stored event type (`turn/start`, `turn/end` or `steering/message`).
        event_type: &'static str,
        /// The event's seq.
        seq: u64,
    },
    /// `session "<id>" stores <type> at seq <seq> without a data object, which the read-time
    /// upgrade must read`: a stored `turn/start`, `turn/end`, `user/message`,
    /// `assistant/message`, `tool/result` or `request/header` without `data`, or a
    /// `request/header` whose `data` is `null` (the reference fails on it with a `TypeError`; see
    /// docs/format.md).
    UpgradeWithoutData {
        /// The session id.
        id: String,
        /// The stored event type.
        event_type: String,
        /// The event's seq.
        seq: u64,
    },
    /// `seed event at index <i> has an invalid event envelope`: a stored record whose envelope
    /// is not a session event.
    InvalidStoredEnvelope {
        /// Index of the record in the stored log.
        index: usize,
        /// The envelope's error (its source says what is wrong), when the record is at hand.
        cause: Option<session_core::Error>,
    },
    /// `TypeError`: `preparedSessionCacheSize must be a positive safe integer`.
    InvalidCacheSize,
    /// `TypeError`: `writeBatchMaxDelayMs must be an integer between 1 and 2147483647`.
    InvalidBatchDelay,
    /// `TypeError`: `batches of a publication must be non-empty consecutive ranges covering its
    /// <n> events (<what is wrong>)`: the batch layout given to `Backend::publish_batches`.
    InvalidBatches {
        /// How many events the publication holds.
        events: usize,
        /// What is wrong with the ranges.
        detail: String,
    },
    /// `SessionPersistenceCorruptionError`: `stored session "<id>" failed validation:
    /// <String(cause)>`.
    Corruption {
        /// The session id.
        id: String,
        /// The validation failure.
        cause: Box<Error>,
    },
    /// A redaction hook changed an event's envelope:
    /// `redaction of event <seq> of session "<id>" changed its <field>`.
    RedactionChangedEnvelope {
        /// The session id.
        id: String,
        /// The seq of the event as admitted.
        seq: u64,
        /// The envelope field that changed (`type`, `seq`, `time`, `surfaceOp`,
        /// `sourceEventSeqs` or `ignorable`).
        field: &'static str,
    },
    /// `session "<id>" lost persistence state during load`.
    LostState {
        /// The session id.
        id: String,
    },
    /// The operation was cancelled; displays the cancellation reason.
    Aborted(crate::cancel::AbortReason),
    /// Building or validating a session failed; the session layer's message.
    Session(session_surface::Error),
    /// The session store refused an operation; the store's message.
    Store(session_store::Error),
    /// `AggregateError`: `<backend> dispose failed`, with every drain failure.
    DisposeFailed {
        /// The backend's name.
        backend: String,
        /// The failures, in the order the sessions were drained.
        errors: Vec<Error>,
    },
    /// `cannot prepare a session: SessionStore is not configured`.
    StoreNotConfigured,
    /// The write task of a live session ended without reporting a result (its events stay
    /// buffered): `background write for session "<id>" was interrupted`.
    WriteInterrupted {
        /// The session id.
        id: String,
    },
    /// A failure reported by a backend as plain text (the memory backend, test doubles).
    Backend(String),
    /// A backend's own error, kept typed (its `source()`, downcastable to the backend's type,
    /// whose own `source()` is the driver's error): displays it, with the reference's class name
    /// (for example `AggregateError` for a failed `SQLite` rollback) and the kind the backend
    /// gives it.
    Foreign {
        /// The reference's error class name.
        name: &'static str,
        /// What kind of failure it is.
        kind: ErrorKind,
        /// Where it is, as far as the backend knows.
        position: Option<Box<Position>>,
        /// The backend's error.
        error: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// A retired event shape the coordinator refuses on read and on append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LegacyKind {
    /// Any `request/header-delta` event.
    HeaderDelta,
    /// Any `mode/set` event.
    ModeSet,
    /// A `request/header` whose `data.reason` is `"fallback"`.
    FallbackReason,
}

impl LegacyKind {
    fn text(self) -> &'static str {
        match self {
            LegacyKind::HeaderDelta => "request/header-delta event",
            LegacyKind::ModeSet => "mode/set event",
            LegacyKind::FallbackReason => "request/header reason \"fallback\"",
        }
    }
}

/// Structural problems the Zstandard frame scanner reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZstdStructureError {
    /// `invalid frame magic`.
    InvalidMagic,
    /// `reserved frame-header bit`.
    ReservedBit,
    /// `reserved block type`.
    ReservedBlockType,
}

impl ZstdStructureError {
    fn text(self) -> &'static str {
        match self {
            ZstdStructureError::InvalidMagic => "invalid frame magic",
            ZstdStructureError::ReservedBit => "reserved frame-header bit",
            ZstdStructureError::ReservedBlockType => "reserved block type",
        }
    }
}

/// Why a log's format is refused (`SessionFormatUnsupportedError`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatRefusal {
    /// The header names a log format version other than 0.
    Version {
        /// `String(id)` of the header id.
        id: String,
        /// The version, in JavaScript number formatting.
        version: String,
        /// Whether the version is newer than 0.
        newer: bool,
    },
    /// A stored event type is unknown and not marked ignorable.
    UnknownType {
        /// The session id.
        id: String,
        /// The unknown type, as JavaScript's `String(type)` prints it (`undefined` when the
        /// record has none).
        event_type: String,
        /// The event's seq.
        seq: u64,
    },
}

impl fmt::Display for FormatRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatRefusal::Version {
                id,
                version,
                newer: true,
            } => write!(
                f,
                "session \"{id}\" uses log format v{version}, but this harness reads only v0: \
                 the log was written by a newer harness \u{2014} upgrade the harness to open it"
            ),
            FormatRefusal::Version {
                id,
                version,
                newer: false,
            } => write!(
                f,
                "session \"{id}\" uses log format v{version}, older than the supported v0, and \
                 this build ships no upgrade path for it"
            ),
            FormatRefusal::UnknownType {
                id,
                event_type,
                seq,
            } => session_core::rules::Violation::UnknownType {
                id: id.clone(),
                event_type: event_type.clone(),
                seq: *seq,
            }
            .fmt(f),
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// A backend's own error kept typed as [`Error::Foreign`], with the reference's class name,
    /// its kind and, when known, its position.
    pub fn foreign(
        name: &'static str,
        kind: ErrorKind,
        position: Option<Position>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Foreign {
            name,
            kind,
            position: position.map(Box::new),
            error: Arc::new(error),
        }
    }

    /// The reference's error class name: `SessionFormatUnsupportedError` for format refusals,
    /// `AggregateError` for a failed rollback, `Error` otherwise.
    pub fn name(&self) -> &'static str {
        match self {
            Error::FormatUnsupported { .. } => "SessionFormatUnsupportedError",
            Error::RollbackFailed { .. } | Error::DisposeFailed { .. } => "AggregateError",
            Error::Corruption { .. } => "SessionPersistenceCorruptionError",
            Error::MetadataNotLossless
            | Error::MetadataCreatedAt
            | Error::BatchNotLossless
            | Error::InvalidFromSeq { .. }
            | Error::InvalidCacheSize
            | Error::InvalidBatchDelay
            | Error::InvalidBatches { .. } => "TypeError",
            Error::Foreign { name, .. } => name,
            _ => "Error",
        }
    }

    /// The Node-style error code of an I/O failure (`ENOENT`, `ENOSPC`, …).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Error::Io { source, .. } => io_code(source),
            Error::PublicationNotDurable { source, .. } => source.code(),
            _ => None,
        }
    }

    /// The `code` of any link of an error's cause chain: [`Error::code`] for our errors, the
    /// `ZSTD_ErrorCode` name for a libzstd decoder failure
    /// ([`crate::jsonl::ZstdDecodeError`], inside an `io::Error`).
    pub fn code_of(err: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
        if let Some(ours) = err.downcast_ref::<Error>() {
            return ours.code();
        }
        err.downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<crate::jsonl::ZstdDecodeError>())
            .and_then(crate::jsonl::ZstdDecodeError::code_name)
    }

    /// The artifact location of a format refusal, when known.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::FormatUnsupported { location, .. } => location.as_ref(),
            _ => None,
        }
    }

    /// Attaches an artifact location to a format refusal (other errors are returned as is).
    #[must_use]
    pub fn with_location(self, at: Location) -> Error {
        match self {
            Error::FormatUnsupported { refusal, .. } => Error::FormatUnsupported {
                refusal,
                location: Some(at),
            },
            other => other,
        }
    }

    /// Whether this is a layout error of one listed session that fails a whole listing, as in
    /// the reference: a header whose id and cwd do not name its own path, or an id stored under
    /// two project directories.
    pub fn fails_listing(&self) -> bool {
        matches!(
            self,
            Error::IdentityPath { .. } | Error::UnnameableHeader { .. } | Error::DuplicateId { .. }
        )
    }

    /// What lies beneath the message: the texts of the source chain that the message (or an
    /// earlier source) does not already show, joined with `: `; `None` when there are none.
    /// For example `the line is not JSON: unexpected character 'r' at byte 9` beneath
    /// `corrupt session log: unparsable committed event at line 4`.
    pub fn cause_text(&self) -> Option<String> {
        let mut shown = self.to_string();
        let mut parts = Vec::new();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            let text = e.to_string();
            if !shown.contains(&text) {
                shown.push_str(&text);
                parts.push(text);
            }
            next = e.source();
        }
        (!parts.is_empty()).then(|| parts.join(": "))
    }

    /// JavaScript's `String(err)`: `<name>: <message>` (for example `Error: disk full`).
    pub fn js_string(&self) -> String {
        format!("{}: {self}", self.name())
    }

    /// The cancellation reason, when this error is a cancellation.
    pub fn abort_reason(&self) -> Option<&crate::cancel::AbortReason> {
        match self {
            Error::Aborted(reason) => Some(reason),
            _ => None,
        }
    }
}

impl From<crate::cancel::AbortReason> for Error {
    fn from(reason: crate::cancel::AbortReason) -> Error {
        Error::Aborted(reason)
    }
}

/// What is wrong with a first line that is JSON but not a session header (`` `createdAt` is not
/// a non-negative safe integer ``): the source of [`Error::NotSessionHeader`], whose message is
/// the reference's and does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderProblem(pub &'static str);

impl fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for HeaderProblem {}

/// Why a committed line could not be decoded: the source of [`Error::UnparsableCommitted`],
/// whose message (the reference's) names only the line.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum UnparsableLine {
    /// The line is not JSON. The parser's offset counts in the line as decoded, with any
    /// invalid UTF-8 replaced by U+FFFD (as the reference decodes it).
    NotJson(session_core::json::ParseError),
    /// The line is JSON, but not an object.
    NotAnObject,
    /// The line is a packed storage row that fails validation.
    MalformedRow(session_core::Error),
    /// The log ends inside the line: its last bytes have no newline.
    Unterminated,
    /// The line decodes to a kind of record this build does not read.
    Unrecognized,
    /// The line is longer than [`crate::jsonl::MAX_RECORD_BYTES`].
    TooLong {
        /// The limit, in bytes.
        limit: u64,
    },
}

impl UnparsableLine {
    /// Why a decoded line that is neither an event, a chunk row nor a record is unparsable.
    pub(crate) fn of(record: &session_core::chunk_rows::LineRecord) -> UnparsableLine {
        use session_core::chunk_rows::LineRecord;
        match record {
            LineRecord::NotJson(e) => UnparsableLine::NotJson(e.clone()),
            LineRecord::MalformedRow(e) => UnparsableLine::MalformedRow(e.clone()),
            _ => UnparsableLine::Unrecognized,
        }
    }
}

impl fmt::Display for UnparsableLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnparsableLine::NotJson(_) => f.write_str("the line is not JSON"),
            UnparsableLine::NotAnObject => f.write_str("the line is JSON but not an object"),
            UnparsableLine::MalformedRow(e) => fmt::Display::fmt(e, f),
            UnparsableLine::Unterminated => {
                f.write_str("the log ends inside the line (no newline after it)")
            }
            UnparsableLine::Unrecognized => {
                f.write_str("the line decodes to a kind of record this build does not read")
            }
            UnparsableLine::TooLong { limit } => write!(
                f,
                "the line is longer than {limit} bytes (MAX_RECORD_BYTES)"
            ),
        }
    }
}

impl std::error::Error for UnparsableLine {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UnparsableLine::NotJson(e) => Some(e),
            // Its text is this error's text.
            UnparsableLine::MalformedRow(e) => e.source(),
            _ => None,
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. }
            | Error::ZstdFrame { source, .. }
            | Error::ZstdHeaderFrame { source }
            | Error::Encode { source } => Some(source.as_ref()),
            Error::RollbackFailed { error, .. } => Some(error.as_ref()),
            Error::PublicationNotDurable { source, .. } => Some(source.as_ref()),
            Error::Foreign { error, .. } => Some(&**error),
            Error::Corruption { cause, .. } => Some(cause.as_ref()),
            Error::UnparsableCommitted { cause, .. } => Some(cause),
            Error::HeaderNotJson { cause: Some(cause) } => Some(cause),
            Error::NotSessionHeader { problem } => Some(problem),
            Error::InvalidStoredEnvelope {
                cause: Some(cause), ..
            } => Some(cause),
            Error::Session(e) => Some(e),
            Error::Store(e) => Some(e),
            Error::DisposeFailed { errors, .. } => errors.first().map(|e| e as _),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_display_has_node_code_and_call() {
        let e = Error::io(
            "scandir",
            "/r",
            io::Error::from_raw_os_error(20), // ENOTDIR
        );
        let text = e.to_string();
        assert!(text.starts_with("ENOTDIR: "), "{text}");
        assert!(text.ends_with(", scandir '/r'"), "{text}");
        assert_eq!(e.code(), Some("ENOTDIR"));
        assert_eq!(e.name(), "Error");
    }

    #[test]
    fn refusal_texts() {
        let newer = Error::FormatUnsupported {
            refusal: FormatRefusal::Version {
                id: "s".into(),
                version: "42".into(),
                newer: true,
            },
            location: Some(Location::jsonl("/r/p/s/session.jsonl")),
        };
        assert_eq!(newer.name(), "SessionFormatUnsupportedError");
        assert_eq!(
            newer.to_string(),
            "session \"s\" uses log format v42, but this harness reads only v0: the log was \
             written by a newer harness \u{2014} upgrade the harness to open it (raw log: \
             /r/p/s/session.jsonl)"
        );
        let older = Error::FormatUnsupported {
            refusal: FormatRefusal::Version {
                id: "s".into(),
                version: "-1".into(),
                newer: false,
            },
            location: None,
        };
        assert_eq!(
            older.to_string(),
            "session \"s\" uses log format v-1, older than the supported v0, and this build ships \
             no upgrade path for it"
        );
    }

    #[test]
    fn layout_messages_quote_paths_as_json() {
        let e = Error::FlatLayout {
            path: PathBuf::from("/r/p/a\"b.jsonl"),
        };
        assert_eq!(
            e.to_string(),
            "session artifact \"/r/p/a\\\"b.jsonl\" uses the unsupported flat-file layout; use a \
             separate root or move it into a project/session directory before loading"
        );
        let m = Error::EncodingMismatch {
            path: PathBuf::from("/r/p/s/session.jsonl"),
            configured_zstd: true,
        };
        assert_eq!(
            m.to_string(),
            "session artifact \"/r/p/s/session.jsonl\" uses .jsonl, but this backend is \
             configured for compression \"zstd\"; use a separate root or select the matching \
             compression mode"
        );
    }

    #[test]
    fn js_string_of_a_shared_error() {
        let e = std::sync::Arc::new(Error::NotFound { id: "s".into() });
        let shared = crate::promise::unshare(std::sync::Arc::clone(&e));
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
}
