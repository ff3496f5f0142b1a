//! What kind of failure an [`Error`] is, and where it happened: the small, stable view callers
//! decide on (exit codes, retries, hints) instead of matching the many variants.

use std::fmt;
use std::path::PathBuf;

use super::{Error, FormatRefusal};

/// The kind of an [`Error`]: what a caller can do about it, whichever backend reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The session (or the artifact asked for) does not exist.
    NotFound,
    /// A session with this identity already exists, or another live session or persisted log
    /// already owns it (an id collision).
    AlreadyExists,
    /// Stored data failed validation: a damaged log, a damaged frame, a stored identity or
    /// envelope that does not hold. [`Error::position`] says where, when known.
    Corrupt,
    /// The stored data uses a format, layout or retired shape this build refuses to interpret
    /// (a newer log version, an unknown event type, the flat-file layout).
    FormatUnsupported,
    /// Another writer holds the session (its writer lock or lease, a live owner, a reserved
    /// preparation); retrying later can succeed.
    Locked,
    /// This writer's claim on the session no longer holds: the stored log was changed, replaced
    /// or removed under it, or its lease moved on. Nothing was written; reload before writing.
    LeaseLost,
    /// A file-system or device call failed (the source is the [`std::io::Error`]).
    Io,
    /// The backend (or the store) was closed.
    Closed,
    /// The operation was cancelled.
    Aborted,
    /// The caller's input or configuration is refused (a bad argument, an event the session
    /// rejects, an unsupported operation, an unsafe directory).
    Invalid,
    /// The backend failed in a way none of the other kinds describes (a driver error, a failed
    /// background task, a compressor failure).
    Backend,
}

impl ErrorKind {
    /// The kind's name, as written in `snake_case` (`not_found`, `lease_lost`, …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::FormatUnsupported => "format_unsupported",
            ErrorKind::Locked => "locked",
            ErrorKind::LeaseLost => "lease_lost",
            ErrorKind::Io => "io",
            ErrorKind::Closed => "closed",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Backend => "backend",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a failure happened, as far as the error knows: the artifact, and a line, byte offset
/// or seq inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Position {
    /// The artifact (a log file, a database).
    pub path: Option<PathBuf>,
    /// The 1-based line of the log text; the header is line 1 (the reference's messages count
    /// lines after the header: its `at line 34` is line 35 here). For a Zstandard log the line
    /// counts in the decompressed text.
    pub line: Option<u64>,
    /// A byte offset: in the file for Zstandard frame errors, in the decompressed log text when
    /// [`Position::offset_in_text`] is set.
    pub offset: Option<u64>,
    /// Whether [`Position::offset`] counts in the logical (decompressed) log text rather than
    /// in the file.
    pub offset_in_text: bool,
    /// The seq of the event concerned (for a stored record the index of the record).
    pub seq: Option<u64>,
}

impl Position {
    /// A position naming only an artifact.
    #[must_use]
    pub fn at_path(path: impl Into<PathBuf>) -> Position {
        Position {
            path: Some(path.into()),
            ..Position::default()
        }
    }

    /// A position naming only a seq.
    #[must_use]
    pub fn at_seq(seq: u64) -> Position {
        Position {
            seq: Some(seq),
            ..Position::default()
        }
    }

    /// This position with its artifact set to `path`.
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Position {
        self.path = Some(path.into());
        self
    }

    /// Whether nothing is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self == &Position::default()
    }
}

impl Error {
    /// What kind of failure this is. A wrapper (a failed rollback, a corruption report, a
    /// dispose failure, a listener failure inside the session store) has the kind of the
    /// failure it reports.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } | Error::PublicationNotDurable { .. } => ErrorKind::Io,
            Error::EmptyLog { .. }
            | Error::HeaderNotJson { .. }
            | Error::NotSessionHeader { .. }
            | Error::UnparsableCommitted { .. }
            | Error::RecordTooLong { .. }
            | Error::SeqGap { .. }
            | Error::ZstdStructure { .. }
            | Error::ZstdFrame { .. }
            | Error::ZstdTornRecord
            | Error::ZstdHeaderFrameLines
            | Error::ZstdHeaderFrame { .. }
            | Error::IdentityMismatch { .. }
            | Error::UnnameableHeader { .. }
            | Error::IdentityPath { .. }
            | Error::InvalidRawHeader { .. }
            | Error::DuplicateId { .. }
            | Error::StoredIdentityMismatch { .. }
            | Error::MalformedLegacy { .. }
            | Error::UpgradeWithoutData { .. }
            | Error::InvalidStoredEnvelope { .. }
            | Error::Corruption { .. } => ErrorKind::Corrupt,
            Error::FormatUnsupported { .. }
            | Error::RetiredHeaderFields
            | Error::LoneSurrogate { .. }
            | Error::FlatLayout { .. }
            | Error::LegacyEvent { .. } => ErrorKind::FormatUnsupported,
            Error::AlreadyMaterialized { .. }
            | Error::AlreadyTracked { .. }
            | Error::AlreadyPersisted { .. }
            | Error::CwdCollision { .. }
            | Error::SeedCollision { .. }
            | Error::OwnerCollision { .. }
            | Error::PrefixCollision { .. }
            | Error::CannotPublish { .. } => ErrorKind::AlreadyExists,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Locked { .. }
            | Error::PreparationReserved { .. }
            | Error::PrepareWhileLive { .. }
            | Error::LiveOwner { .. }
            | Error::LiveTurnOpen { .. } => ErrorKind::Locked,
            Error::Vanished { .. }
            | Error::Replaced { .. }
            | Error::StaleWriter { .. }
            | Error::StaleRepair { .. }
            | Error::PreparationMismatch { .. }
            | Error::NotReserved { .. }
            | Error::LostState { .. } => ErrorKind::LeaseLost,
            Error::Closed { .. } => ErrorKind::Closed,
            Error::Aborted(_) => ErrorKind::Aborted,
            Error::PermissiveDirectory { .. }
            | Error::ReadOnlyFile { .. }
            | Error::EncodingMismatch { .. }
            | Error::EmptySegment
            | Error::EmptyProjectPath
            | Error::SealRefused { .. }
            | Error::ForeignMarker { .. }
            | Error::Unsupported { .. }
            | Error::NoRawArtifacts
            | Error::MetadataNotLossless
            | Error::MetadataCreatedAt
            | Error::InvalidMetadata(_)
            | Error::BatchNotLossless
            | Error::VerbatimAppend { .. }
            | Error::AppendSeqMismatch { .. }
            | Error::InvalidFromSeq { .. }
            | Error::InvalidCacheSize
            | Error::InvalidBatchDelay
            | Error::InvalidBatches { .. }
            | Error::RedactionChangedEnvelope { .. }
            | Error::StoreNotConfigured
            | Error::Session(_) => ErrorKind::Invalid,
            Error::RollbackFailed { error, .. } => error.kind(),
            Error::Store(e) => store_kind(e),
            Error::DisposeFailed { errors, .. } => {
                errors.first().map_or(ErrorKind::Backend, Error::kind)
            }
            Error::Foreign { kind, .. } => *kind,
            Error::Encode { .. }
            | Error::Task { .. }
            | Error::WriteInterrupted { .. }
            | Error::Backend(_) => ErrorKind::Backend,
        }
    }

    /// Where the failure happened, as far as this error knows; `None` when it names no artifact,
    /// line, offset or seq. A wrapper reports the position of the failure it reports.
    #[must_use]
    pub fn position(&self) -> Option<Position> {
        let at = match self {
            Error::UnparsableCommitted { line, .. } | Error::SeqGap { line, .. } => Position {
                line: Some(line + 1),
                ..Position::default()
            },
            Error::HeaderNotJson { .. } | Error::NotSessionHeader { .. } => Position {
                line: Some(1),
                ..Position::default()
            },
            Error::LoneSurrogate { line, offset } => Position {
                line: Some(line.map_or(1, |l| l + 1)),
                offset: Some(*offset),
                offset_in_text: true,
                ..Position::default()
            },
            Error::RecordTooLong { offset, .. }
            | Error::ZstdStructure { offset, .. }
            | Error::ZstdFrame { offset, .. } => Position {
                offset: Some(*offset),
                ..Position::default()
            },
            Error::FormatUnsupported { refusal, location } => Position {
                path: location.as_ref().map(|l| l.path.clone()),
                seq: match refusal {
                    FormatRefusal::UnknownType { seq, .. } => Some(*seq),
                    FormatRefusal::Version { .. } => None,
                },
                ..Position::default()
            },
            Error::IdentityMismatch { path, .. }
            | Error::UnnameableHeader { path }
            | Error::IdentityPath { path, .. }
            | Error::InvalidRawHeader { path }
            | Error::PermissiveDirectory { path, .. }
            | Error::ReadOnlyFile { path }
            | Error::FlatLayout { path }
            | Error::EncodingMismatch { path, .. }
            | Error::Locked { path, .. }
            | Error::Vanished { path, .. }
            | Error::Replaced { path, .. }
            | Error::StaleWriter { path, .. }
            | Error::StaleRepair { path, .. }
            | Error::RollbackFailed { path, .. }
            | Error::PublicationNotDurable { path, .. }
            | Error::Io { path, .. } => Position::at_path(path.clone()),
            Error::LegacyEvent { seq, .. }
            | Error::MalformedLegacy { seq, .. }
            | Error::UpgradeWithoutData { seq, .. }
            | Error::VerbatimAppend { seq }
            | Error::RedactionChangedEnvelope { seq, .. } => Position::at_seq(*seq),
            Error::InvalidStoredEnvelope { index, .. } => Position::at_seq(*index as u64),
            Error::Corruption { cause, .. } => return cause.position(),
            Error::DisposeFailed { errors, .. } => return errors.first()?.position(),
            Error::Store(session_store::Error::Listener(e)) => {
                return e.downcast_ref::<Error>()?.position();
            }
            Error::Foreign { position, .. } => return position.as_deref().cloned(),
            _ => return None,
        };
        Some(at)
    }
}

/// The kind of a session-store refusal; a persistence listener's failure inside it keeps its
/// own kind.
fn store_kind(e: &session_store::Error) -> ErrorKind {
    match e {
        session_store::Error::AlreadyExists { .. }
        | session_store::Error::AlreadyAttached { .. }
        | session_store::Error::AlreadyAnnounced { .. } => ErrorKind::AlreadyExists,
        session_store::Error::NotLive { .. } => ErrorKind::NotFound,
        session_store::Error::Listener(inner) => inner
            .downcast_ref::<Error>()
            .map_or(ErrorKind::Backend, Error::kind),
        _ => ErrorKind::Invalid,
    }
}
