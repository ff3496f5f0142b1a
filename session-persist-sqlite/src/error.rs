//! The error type of `session-persist-sqlite`.
//!
//! Every variant's `Display` is the reference implementation's exact text, so tests can compare
//! whole messages; [`Error::kind`] classifies it as a [`session_persist::ErrorKind`]. [`Error`]
//! converts into [`session_persist::Error`] for the backend contract: I/O failures stay
//! [`session_persist::Error::Io`], format refusals stay
//! [`session_persist::Error::FormatUnsupported`], a closed store is
//! [`session_persist::Error::Closed`], a full file system is an `ENOSPC`
//! [`session_persist::Error::Io`] (whose source chain ends at `SQLite`'s error), and everything
//! else stays typed in [`session_persist::Error::Foreign`] with its kind: its `source()` is this
//! [`Error`], whose `source()` is the [`rusqlite::Error`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use session_persist::{ErrorKind, FormatRefusal, Position, io_code};

use crate::BACKEND_NAME;

/// Everything that can go wrong in the `SQLite` backend.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range (for example `busyTimeoutMs`).
    InvalidConfig(&'static str),
    /// `ERR_INVALID_ARG_VALUE`: the database path contains a NUL byte.
    PathHasNul {
        /// The path as given.
        path: String,
    },
    /// A file-system call failed. Display follows Node's shape:
    /// `<CODE>: <description>, <op> '<path>'` (the code is omitted when unknown).
    Io {
        /// The system call, in Node's naming (`mkdir`, `lstat`, `open`, `stat`).
        op: &'static str,
        /// The path the call was made on.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// `session database parent "<p>" must be a real directory`.
    ParentNotDirectory {
        /// The parent directory.
        path: PathBuf,
    },
    /// `session database parent "<p>" must be owned by the current user and not
    /// group/world-writable`.
    ParentNotPrivate {
        /// The parent directory.
        path: PathBuf,
    },
    /// `session database "<p>" must be a regular file, not a symbolic link`.
    NotRegularFile {
        /// The database file.
        path: PathBuf,
    },
    /// `session database "<p>" must be owned by the current user and accessible only by that
    /// user`.
    FileNotPrivate {
        /// The database file.
        path: PathBuf,
    },
    /// `SQLite` itself failed; displays `SQLite`'s message.
    Sqlite(rusqlite::Error),
    /// `session database at "<p>" retained <pragma>=<n>, expected <e>`: a hardening or
    /// durability pragma did not take effect.
    PragmaNotApplied {
        /// The database path (or `:memory:`).
        path: String,
        /// The pragma name.
        pragma: &'static str,
        /// The value read back.
        value: i64,
        /// The expected value as printed (`0`, `FULL (2)`).
        expected: &'static str,
    },
    /// `session database at "<p>" selected journal mode <m>, expected <e>`.
    JournalMode {
        /// The database path.
        path: String,
        /// The mode `SQLite` reported.
        selected: String,
        /// The mode that was asked for.
        expected: String,
    },
    /// `session database at "<p>" has an unversioned schema or application identity`.
    Unversioned {
        /// The database path.
        path: String,
    },
    /// `session database at "<p>" has schema version <v>, incompatible with this build (17)`.
    SchemaVersion {
        /// The database path.
        path: String,
        /// The stored `user_version`.
        version: i64,
    },
    /// `session database at "<p>" has application id <n>, expected 1146308688`.
    ApplicationId {
        /// The database path.
        path: String,
        /// The stored `application_id`.
        id: i64,
    },
    /// `session database at "<p>" does not contain the required schema objects`.
    SchemaObjects {
        /// The database path.
        path: String,
    },
    /// `session database at "<p>" has no valid store identity`.
    NoStoreIdentity {
        /// The database path.
        path: String,
        /// Why the stored identity was refused, when a row exists.
        cause: Option<Box<Error>>,
    },
    /// `session database application id changed before mutation (expected 1146308688, got
    /// <n>)`.
    ApplicationIdChanged {
        /// The application id found.
        got: i64,
    },
    /// `session database schema changed before mutation (expected 17, got <n>)`.
    SchemaChanged {
        /// The `user_version` found.
        got: i64,
    },
    /// A stored column failed strict decoding: `stored <column> <rule>`, for example
    /// `stored session cwd must be absolute` or `stored created_at must be non-negative`.
    InvalidStored {
        /// The column as named in the message (`created_at`, `session cwd`, `event ignorable`).
        column: &'static str,
        /// The rule it broke (`must be non-negative`, `must be a UUID`, …).
        rule: &'static str,
    },
    /// A packed row failed validation: `malformed <tag> storage row: <why>`.
    MalformedRow {
        /// The row's `type` column.
        tag: String,
        /// The reference's reason text.
        why: &'static str,
    },
    /// `malformed source_event_seqs storage value: <why>`.
    MalformedSourceSeqs {
        /// The reference's reason text.
        why: &'static str,
    },
    /// `TypeError` `sourceEventSeqs must contain non-negative safe integers` (encoder).
    SourceSeqsNotIntegers,
    /// A stored JSON text does not parse.
    Json(session_core::json::ParseError),
    /// A stored JSON text holds a lone UTF-16 surrogate escape, which this build cannot
    /// represent (a documented refusal; the reference would read it).
    LoneSurrogate {
        /// The first seq of the physical row.
        seq: u64,
    },
    /// `TypeError` `The encoded data was not valid for encoding utf-8` (fatal UTF-8 decoding of a
    /// compressed data value).
    InvalidUtf8,
    /// Zstandard compression or decompression of a data value failed.
    Zstd(io::Error),
    /// `Cannot create a Buffer larger than <n> bytes`: a compressed data value expands past its
    /// bound.
    BufferTooLarge {
        /// The bound in bytes.
        limit: usize,
    },
    /// `corrupt session log: invalid committed physical row at seq <s>`.
    CorruptCommitted {
        /// The first seq of the physical row.
        seq: u64,
    },
    /// `session <id> has an invalid physical tail at seq <s>`.
    InvalidTail {
        /// The session id.
        id: String,
        /// The first seq of the torn physical row.
        seq: u64,
    },
    /// `session <id> append starts at seq <s>, stored next seq is <e>`: a stale writer.
    AppendStart {
        /// The session id.
        id: String,
        /// The first seq of the batch.
        first: u64,
        /// The stored next seq.
        expected: u64,
    },
    /// `session <id> metadata row is missing`.
    MetadataRowMissing {
        /// The session id.
        id: String,
    },
    /// `session <id> repair is stale: physical tail no longer starts at seq <m>`.
    StaleRepairTail {
        /// The session id.
        id: String,
        /// The marker handed to the repair.
        marker: u64,
    },
    /// `session <id> repair omitted current torn tail at seq <t>`.
    OmittedTornTail {
        /// The session id.
        id: String,
        /// Where the current torn tail starts.
        seq: u64,
    },
    /// `session <id> repair is stale: closer starts at seq <s>, stored next seq is <e>`.
    StaleCloser {
        /// The session id.
        id: String,
        /// The first closer's seq.
        seq: u64,
        /// The stored next seq.
        expected: u64,
    },
    /// `AggregateError`: `session-persistence-sqlite <op> failed and rollback also failed`,
    /// followed by both failures, each with its code and the database path.
    RollbackFailed {
        /// The operation (`append`, `repair`, `read`).
        op: &'static str,
        /// The database path (or `:memory:`).
        path: String,
        /// The error that made the transaction fail.
        error: Box<Error>,
        /// The error of the rollback.
        rollback: Box<Error>,
    },
    /// The file system holding the database has no space left: `SQLite` reported it full
    /// (`SQLITE_FULL`), or an I/O error while the file system had almost no space left (in WAL
    /// mode a full file system surfaces as `disk I/O error` from growing the `-shm` or `-wal`
    /// file). Displays `ENOSPC: <NoSpace>, write '<path>'`.
    NoSpace {
        /// The database file.
        path: PathBuf,
        /// What `SQLite` reported and how much space was left.
        detail: NoSpace,
    },
    /// The stored header names a log format version other than 0.
    FormatUnsupported(FormatRefusal),
    /// A torn marker of another backend's kind was handed to this backend.
    ForeignMarker,
    /// The store was closed.
    Closed,
    /// A background blocking task did not complete.
    Task(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Free space below which an `SQLite` I/O error on a file database is reported as `ENOSPC`:
/// `SQLite` grows the WAL index in 32 KiB steps and writes whole pages, so a file system with
/// less than this left cannot take a transaction's pages plus their WAL frames.
pub const LOW_SPACE_BYTES: u64 = 1 << 20;

/// Why a database write ran out of space: `SQLite`'s own error (its source) and the space the
/// file system had left when it was checked.
#[derive(Debug)]
pub struct NoSpace {
    /// `SQLite`'s error.
    pub sqlite: rusqlite::Error,
    /// Bytes available to this process on the database's file system (`statvfs`), when known.
    pub available: Option<u64>,
}

impl fmt::Display for NoSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no space left on device (SQLite: ")?;
        sqlite_text(&self.sqlite, f)?;
        match self.available {
            Some(n) => write!(f, "; {n} bytes free on the file system)"),
            None => f.write_str(")"),
        }
    }
}

impl std::error::Error for NoSpace {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.sqlite)
    }
}

/// `SQLite`'s message with its extended result code: `disk I/O error (code 4874)`.
fn sqlite_text(e: &rusqlite::Error, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match e {
        rusqlite::Error::SqliteFailure(code, Some(message)) => {
            write!(f, "{message} (code {})", code.extended_code)
        }
        rusqlite::Error::SqliteFailure(code, None) => {
            write!(f, "{code} (code {})", code.extended_code)
        }
        other => write!(f, "{other}"),
    }
}

/// One failure of an aggregate: its text, `SQLite`'s extended code when it has one, and the
/// database it happened on (I/O errors name their path themselves).
struct Part<'a> {
    error: &'a Error,
    path: &'a str,
}

impl fmt::Display for Part<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error {
            Error::Sqlite(e) => {
                sqlite_text(e, f)?;
                write!(f, ", on '{}'", self.path)
            }
            Error::Io { .. } | Error::NoSpace { .. } | Error::RollbackFailed { .. } => {
                write!(f, "{}", self.error)
            }
            other => write!(f, "{other}, on '{}'", self.path),
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The reference's error class name: `TypeError`, `AggregateError`, `RangeError`,
    /// `SessionFormatUnsupportedError` or `Error`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::SourceSeqsNotIntegers | Error::InvalidUtf8 | Error::PathHasNul { .. } => {
                "TypeError"
            }
            Error::BufferTooLarge { .. } => "RangeError",
            Error::RollbackFailed { .. } => "AggregateError",
            Error::FormatUnsupported(_) => "SessionFormatUnsupportedError",
            _ => "Error",
        }
    }

    /// The Node-style error code, when there is one (`ENOENT`, `ERR_INVALID_ARG_VALUE`,
    /// `ERR_BUFFER_TOO_LARGE`, `ERR_ENCODING_INVALID_ENCODED_DATA`).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Error::Io { source, .. } => io_code(source),
            Error::NoSpace { .. } => Some("ENOSPC"),
            Error::PathHasNul { .. } => Some("ERR_INVALID_ARG_VALUE"),
            Error::BufferTooLarge { .. } => Some("ERR_BUFFER_TOO_LARGE"),
            Error::InvalidUtf8 => Some("ERR_ENCODING_INVALID_ENCODED_DATA"),
            _ => None,
        }
    }

    /// What kind of failure this is. `SQLite`'s own failures are classified by their primary
    /// result code: `SQLITE_BUSY`/`SQLITE_LOCKED` are [`ErrorKind::Locked`],
    /// `SQLITE_CORRUPT`/`SQLITE_NOTADB` [`ErrorKind::Corrupt`], `SQLITE_IOERR`/`SQLITE_FULL`/
    /// `SQLITE_CANTOPEN` [`ErrorKind::Io`], the rest [`ErrorKind::Backend`].
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidConfig(_)
            | Error::PathHasNul { .. }
            | Error::ParentNotDirectory { .. }
            | Error::ParentNotPrivate { .. }
            | Error::NotRegularFile { .. }
            | Error::FileNotPrivate { .. }
            | Error::SourceSeqsNotIntegers
            | Error::ForeignMarker => ErrorKind::Invalid,
            Error::Io { .. } | Error::NoSpace { .. } => ErrorKind::Io,
            Error::Sqlite(e) => sqlite_kind(e),
            Error::PragmaNotApplied { .. } | Error::JournalMode { .. } | Error::Task(_) => {
                ErrorKind::Backend
            }
            Error::Unversioned { .. }
            | Error::SchemaVersion { .. }
            | Error::ApplicationId { .. }
            | Error::LoneSurrogate { .. }
            | Error::FormatUnsupported(_) => ErrorKind::FormatUnsupported,
            Error::SchemaObjects { .. }
            | Error::NoStoreIdentity { .. }
            | Error::InvalidStored { .. }
            | Error::MalformedRow { .. }
            | Error::MalformedSourceSeqs { .. }
            | Error::Json(_)
            | Error::InvalidUtf8
            | Error::Zstd(_)
            | Error::BufferTooLarge { .. }
            | Error::CorruptCommitted { .. }
            | Error::InvalidTail { .. } => ErrorKind::Corrupt,
            Error::MetadataRowMissing { .. } => ErrorKind::NotFound,
            Error::ApplicationIdChanged { .. }
            | Error::SchemaChanged { .. }
            | Error::AppendStart { .. }
            | Error::StaleRepairTail { .. }
            | Error::OmittedTornTail { .. }
            | Error::StaleCloser { .. } => ErrorKind::LeaseLost,
            Error::RollbackFailed { error, .. } => error.kind(),
            Error::Closed => ErrorKind::Closed,
        }
    }

    /// Where the failure happened, when this error says: the file of a file-system refusal, the
    /// seq of a stored row.
    #[must_use]
    pub fn position(&self) -> Option<Position> {
        match self {
            Error::Io { path, .. }
            | Error::ParentNotDirectory { path }
            | Error::ParentNotPrivate { path }
            | Error::NotRegularFile { path }
            | Error::FileNotPrivate { path }
            | Error::NoSpace { path, .. } => Some(Position::at_path(path.clone())),
            Error::LoneSurrogate { seq }
            | Error::CorruptCommitted { seq }
            | Error::InvalidTail { seq, .. } => Some(Position::at_seq(*seq)),
            Error::RollbackFailed { error, .. } => error.position(),
            _ => None,
        }
    }

    /// `SQLite`'s extended result code, when `SQLite` reported the failure.
    pub fn sqlite_code(&self) -> Option<i32> {
        match self {
            Error::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => Some(e.extended_code),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(message) => f.write_str(message),
            Error::PathHasNul { path } => write!(
                f,
                "The argument 'path' must be a string, Uint8Array, or URL without null bytes. \
                 Received {}",
                js_quote(path)
            ),
            Error::Io { op, path, source } => {
                if let Some(code) = io_code(source) {
                    write!(f, "{code}: ")?;
                }
                write!(f, "{source}, {op} '{}'", path.display())
            }
            Error::ParentNotDirectory { path } => write!(
                f,
                "session database parent \"{}\" must be a real directory",
                path.display()
            ),
            Error::ParentNotPrivate { path } => write!(
                f,
                "session database parent \"{}\" must be owned by the current user and not \
                 group/world-writable",
                path.display()
            ),
            Error::NotRegularFile { path } => write!(
                f,
                "session database \"{}\" must be a regular file, not a symbolic link",
                path.display()
            ),
            Error::FileNotPrivate { path } => write!(
                f,
                "session database \"{}\" must be owned by the current user and accessible only \
                 by that user",
                path.display()
            ),
            Error::Sqlite(e) => match e {
                rusqlite::Error::SqliteFailure(_, Some(message)) => f.write_str(message),
                other => write!(f, "{other}"),
            },
            Error::PragmaNotApplied {
                path,
                pragma,
                value,
                expected,
            } => write!(
                f,
                "session database at \"{path}\" retained {pragma}={value}, expected {expected}"
            ),
            Error::JournalMode {
                path,
                selected,
                expected,
            } => write!(
                f,
                "session database at \"{path}\" selected journal mode {selected}, expected \
                 {expected}"
            ),
            Error::Unversioned { path } => write!(
                f,
                "session database at \"{path}\" has an unversioned schema or application identity"
            ),
            Error::SchemaVersion { path, version } => write!(
                f,
                "session database at \"{path}\" has schema version {version}, incompatible with \
                 this build ({})",
                crate::SCHEMA_VERSION
            ),
            Error::ApplicationId { path, id } => write!(
                f,
                "session database at \"{path}\" has application id {id}, expected {}",
                crate::APPLICATION_ID
            ),
            Error::SchemaObjects { path } => write!(
                f,
                "session database at \"{path}\" does not contain the required schema objects"
            ),
            Error::NoStoreIdentity { path, .. } => write!(
                f,
                "session database at \"{path}\" has no valid store identity"
            ),
            Error::ApplicationIdChanged { got } => write!(
                f,
                "session database application id changed before mutation (expected {}, got \
                 {got})",
                crate::APPLICATION_ID
            ),
            Error::SchemaChanged { got } => write!(
                f,
                "session database schema changed before mutation (expected {}, got {got})",
                crate::SCHEMA_VERSION
            ),
            Error::InvalidStored { column, rule } => write!(f, "stored {column} {rule}"),
            Error::MalformedRow { tag, why } => write!(f, "malformed {tag} storage row: {why}"),
            Error::MalformedSourceSeqs { why } => {
                write!(f, "malformed source_event_seqs storage value: {why}")
            }
            Error::SourceSeqsNotIntegers => {
                f.write_str("sourceEventSeqs must contain non-negative safe integers")
            }
            Error::Json(e) => write!(f, "{e}"),
            Error::LoneSurrogate { seq } => write!(
                f,
                "stored event row at seq {seq} holds a lone UTF-16 surrogate escape, which this \
                 build cannot represent; refusing to read it"
            ),
            Error::InvalidUtf8 => f.write_str("The encoded data was not valid for encoding utf-8"),
            Error::Zstd(e) => write!(f, "{e}"),
            Error::BufferTooLarge { limit } => {
                write!(f, "Cannot create a Buffer larger than {limit} bytes")
            }
            Error::CorruptCommitted { seq } => write!(
                f,
                "corrupt session log: invalid committed physical row at seq {seq}"
            ),
            Error::InvalidTail { id, seq } => {
                write!(f, "session {id} has an invalid physical tail at seq {seq}")
            }
            Error::AppendStart {
                id,
                first,
                expected,
            } => write!(
                f,
                "session {id} append starts at seq {first}, stored next seq is {expected}"
            ),
            Error::MetadataRowMissing { id } => write!(f, "session {id} metadata row is missing"),
            Error::StaleRepairTail { id, marker } => write!(
                f,
                "session {id} repair is stale: physical tail no longer starts at seq {marker}"
            ),
            Error::OmittedTornTail { id, seq } => write!(
                f,
                "session {id} repair omitted current torn tail at seq {seq}"
            ),
            Error::StaleCloser { id, seq, expected } => write!(
                f,
                "session {id} repair is stale: closer starts at seq {seq}, stored next seq is \
                 {expected}"
            ),
            Error::RollbackFailed {
                op,
                path,
                error,
                rollback,
            } => write!(
                f,
                "{BACKEND_NAME} {op} failed and rollback also failed: {}; the rollback failed: {}",
                Part { error, path },
                Part {
                    error: rollback,
                    path
                }
            ),
            Error::NoSpace { path, detail } => {
                write!(f, "ENOSPC: {detail}, write '{}'", path.display())
            }
            Error::FormatUnsupported(refusal) => write!(f, "{refusal}"),
            Error::ForeignMarker => write!(
                f,
                "{BACKEND_NAME} received a torn marker it did not produce (expected a seq marker)"
            ),
            Error::Closed => write!(f, "{BACKEND_NAME} is closed"),
            Error::Task(message) => write!(f, "background persistence task failed: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Zstd(source) => Some(source),
            Error::Sqlite(e) => Some(e),
            Error::Json(e) => Some(e),
            Error::NoStoreIdentity { cause: Some(c), .. } => Some(c.as_ref()),
            Error::RollbackFailed { error, .. } => Some(error.as_ref()),
            Error::NoSpace { detail, .. } => Some(detail),
            _ => None,
        }
    }
}

/// The kind of a failure `SQLite` reported, by its primary result code.
fn sqlite_kind(e: &rusqlite::Error) -> ErrorKind {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => ErrorKind::Locked,
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => ErrorKind::Corrupt,
        Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::CannotOpen) => {
            ErrorKind::Io
        }
        _ => ErrorKind::Backend,
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        Error::Sqlite(e)
    }
}

impl From<Error> for session_persist::Error {
    fn from(e: Error) -> session_persist::Error {
        match e {
            Error::Io { op, path, source } => session_persist::Error::io(op, path, source),
            Error::NoSpace { path, detail } => session_persist::Error::io(
                "write",
                path,
                io::Error::new(io::ErrorKind::StorageFull, detail),
            ),
            Error::FormatUnsupported(refusal) => session_persist::Error::FormatUnsupported {
                refusal,
                location: None,
            },
            Error::Closed => session_persist::Error::Closed {
                backend: BACKEND_NAME.to_owned(),
            },
            Error::ForeignMarker => session_persist::Error::ForeignMarker {
                backend: BACKEND_NAME.to_owned(),
            },
            Error::Task(message) => session_persist::Error::Task { message },
            other => {
                let (name, kind, position) = (other.name(), other.kind(), other.position());
                session_persist::Error::foreign(name, kind, position, other)
            }
        }
    }
}

/// Node's `inspect` quoting of a string argument: single quotes, with `'` and `\` escaped.
fn js_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\0' => out.push_str("\\x00"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
