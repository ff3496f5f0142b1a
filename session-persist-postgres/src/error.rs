//! The error type of `session-persist-postgres`.
//!
//! [`Error`] converts into [`session_persist::Error`] for the backend contract: a refused first
//! publication is [`session_persist::Error::AlreadyMaterialized`], format refusals stay
//! [`session_persist::Error::FormatUnsupported`], a closed backend is
//! [`session_persist::Error::Closed`], a foreign torn marker is
//! [`session_persist::Error::ForeignMarker`], and everything else stays typed in
//! [`session_persist::Error::Foreign`] with its [`Error::kind`]: its `source()` is this [`Error`],
//! whose `source()` is the [`tokio_postgres::Error`] when the driver failed.

use std::fmt;
use std::io;

use session_persist::{ErrorKind, FormatRefusal, Position};

use crate::BACKEND_NAME;

/// Everything that can go wrong in the `PostgreSQL` backend.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The connection string or an option is invalid.
    InvalidConfig(String),
    /// The configuration requires TLS, and this build has no TLS connector.
    TlsUnavailable,
    /// The TLS configuration cannot be used: `what` names the parameter and its file.
    Tls {
        /// What failed (`sslrootcert /etc/ca.pem`, `the system root store`, ...).
        what: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A `PostgreSQL` call failed; `op` says which operation was running.
    Postgres {
        /// The operation (`connect`, `migrate`, `append`, `load`, ...).
        op: &'static str,
        /// The driver's error.
        source: tokio_postgres::Error,
    },
    /// Connecting did not finish within the configured timeout.
    ConnectTimeout {
        /// The timeout, in ms.
        ms: u128,
    },
    /// Every pooled connection stayed checked out for the pool timeout.
    PoolTimeout {
        /// The timeout, in ms.
        ms: u128,
        /// The pool size.
        size: usize,
    },
    /// The database holds a schema version newer than this build knows.
    SchemaTooNew {
        /// The newest applied migration.
        found: i32,
        /// The newest migration this build knows.
        known: i32,
    },
    /// The backend was closed.
    Closed,
    /// `refusing to materialize "<id>": the session already exists`.
    AlreadyMaterialized {
        /// The session id.
        id: String,
    },
    /// The session row disappeared under its writer (it is never silently re-created).
    SessionMissing {
        /// The session id.
        id: String,
    },
    /// Another writer holds a live lease on the session.
    LeaseHeld {
        /// The session id.
        id: String,
        /// The epoch of the live lease.
        epoch: i64,
        /// How long until it expires, in ms.
        expires_in_ms: i64,
    },
    /// This writer's lease was taken over (the stored epoch moved on) or released: nothing was
    /// written. Call [`session_persist::Backend::release`] and write again to re-acquire.
    LeaseLost {
        /// The session id.
        id: String,
        /// The epoch this writer held.
        held: i64,
        /// The epoch stored now.
        current: i64,
    },
    /// The batch does not continue the stored log (a stale writer): nothing was written.
    AppendStart {
        /// The session id.
        id: String,
        /// The batch's first seq.
        first: u64,
        /// The stored next seq.
        expected: u64,
    },
    /// A stored row or header could not be decoded; names the session and the row's seq.
    Corrupt {
        /// The session id.
        id: String,
        /// The seq of the offending row (`None`: the session row).
        seq: Option<u64>,
        /// What is wrong.
        why: String,
    },
    /// The stored header names a log format other than 0.
    FormatUnsupported(FormatRefusal),
    /// A torn marker of another backend's kind was handed to this backend.
    ForeignMarker,
    /// A repair's torn marker does not match the stored log.
    StaleRepair {
        /// The session id.
        id: String,
        /// The marker's seq.
        marker: u64,
        /// The stored next seq.
        next_seq: u64,
    },
    /// A repair's closers do not continue the stored log.
    StaleCloser {
        /// The session id.
        id: String,
        /// The first closer's seq.
        seq: u64,
        /// The seq the closers must start at.
        expected: u64,
    },
    /// An append's commit outcome was unknown (the connection broke while committing), and
    /// re-reading the tail found the batch neither whole nor absent.
    CommitOutcomeMismatch {
        /// The session id.
        id: String,
        /// The batch's first seq.
        first: u64,
        /// What the tail showed.
        why: String,
    },
    /// A publication's batch layout does not cover its events in order: nothing was written.
    InvalidBatches {
        /// How many events were given.
        events: usize,
        /// What is wrong with the layout.
        detail: String,
    },
    /// A server-side fork was refused.
    Fork {
        /// The parent session id.
        parent: String,
        /// The child session id.
        child: String,
        /// Why.
        why: String,
    },
    /// Compressing or decompressing a row failed.
    Zstd(io::Error),
}

impl Error {
    pub(crate) fn pg(op: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error {
        move |source| Error::Postgres { op, source }
    }

    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn tls(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Error {
        Error::Tls {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn corrupt(id: &str, seq: Option<u64>, why: impl Into<String>) -> Error {
        Error::Corrupt {
            id: id.to_owned(),
            seq,
            why: why.into(),
        }
    }

    /// Whether the error is a broken connection (as opposed to an error the server reported).
    pub fn is_connection_loss(&self) -> bool {
        match self {
            Error::Postgres { source, .. } => source.as_db_error().is_none(),
            _ => false,
        }
    }
}

impl Error {
    /// What kind of failure this is. A driver failure is [`ErrorKind::Locked`] when `PostgreSQL`
    /// reports a lock it could not take (`55P03`, `40P01`), [`ErrorKind::Backend`] otherwise.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidConfig(_)
            | Error::TlsUnavailable
            | Error::Tls { .. }
            | Error::ForeignMarker
            | Error::InvalidBatches { .. }
            | Error::Fork { .. } => ErrorKind::Invalid,
            Error::Postgres { source, .. } => {
                match source.code().map(tokio_postgres::error::SqlState::code) {
                    Some("55P03" | "40P01") => ErrorKind::Locked,
                    _ => ErrorKind::Backend,
                }
            }
            Error::ConnectTimeout { .. }
            | Error::PoolTimeout { .. }
            | Error::CommitOutcomeMismatch { .. } => ErrorKind::Backend,
            Error::SchemaTooNew { .. } | Error::FormatUnsupported(_) => {
                ErrorKind::FormatUnsupported
            }
            Error::Closed => ErrorKind::Closed,
            Error::AlreadyMaterialized { .. } => ErrorKind::AlreadyExists,
            Error::LeaseHeld { .. } => ErrorKind::Locked,
            Error::SessionMissing { .. }
            | Error::LeaseLost { .. }
            | Error::AppendStart { .. }
            | Error::StaleRepair { .. }
            | Error::StaleCloser { .. } => ErrorKind::LeaseLost,
            Error::Corrupt { .. } | Error::Zstd(_) => ErrorKind::Corrupt,
        }
    }

    /// Where the failure happened, when this error says: the seq of a stored row.
    #[must_use]
    pub fn position(&self) -> Option<Position> {
        match self {
            Error::Corrupt { seq: Some(seq), .. } => Some(Position::at_seq(*seq)),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(why) => write!(f, "invalid PostgreSQL configuration: {why}"),
            Error::TlsUnavailable => f.write_str(
                "the PostgreSQL configuration requires TLS, but this build has no TLS connector \
                 (use sslmode=disable or sslmode=prefer)",
            ),
            Error::Postgres { op, source } => {
                write!(f, "PostgreSQL {op} failed: {source}")?;
                if let Some(db) = source.as_db_error() {
                    write!(f, " ({}: {})", db.code().code(), db.message())?;
                }
                Ok(())
            }
            Error::Tls { what, source } => write!(f, "TLS: {what}: {source}"),
            Error::PoolTimeout { ms, size } => write!(
                f,
                "all {size} pooled PostgreSQL connections stayed busy for {ms} ms"
            ),
            Error::ConnectTimeout { ms } => {
                write!(f, "connecting to PostgreSQL timed out after {ms} ms")
            }
            Error::SchemaTooNew { found, known } => write!(
                f,
                "the database schema is at migration {found}, newer than this build's {known}"
            ),
            Error::Closed => f.write_str("the PostgreSQL session backend is closed"),
            Error::AlreadyMaterialized { id } => write!(
                f,
                "refusing to materialize \"{id}\": the session already exists (load/resume it instead)"
            ),
            Error::SessionMissing { id } => write!(
                f,
                "session \"{id}\" disappeared under its writer; it is not re-created"
            ),
            Error::LeaseHeld {
                id,
                epoch,
                expires_in_ms,
            } => write!(
                f,
                "session \"{id}\" is leased by another writer (epoch {epoch}, expires in \
                 {expires_in_ms} ms)"
            ),
            Error::LeaseLost { id, held, current } => write!(
                f,
                "lost the writer lease on session \"{id}\": held epoch {held}, the session is now \
                 at epoch {current}; nothing was written"
            ),
            Error::AppendStart {
                id,
                first,
                expected,
            } => write!(
                f,
                "append to session \"{id}\" starts at seq {first}, but the stored log continues \
                 at seq {expected}; nothing was written"
            ),
            Error::Corrupt { id, seq, why } => match seq {
                Some(seq) => write!(f, "session \"{id}\": stored row at seq {seq}: {why}"),
                None => write!(f, "session \"{id}\": stored session row: {why}"),
            },
            Error::FormatUnsupported(refusal) => refusal.fmt(f),
            Error::ForeignMarker => write!(
                f,
                "{BACKEND_NAME} cannot use a torn marker produced by another backend"
            ),
            Error::StaleRepair {
                id,
                marker,
                next_seq,
            } => write!(
                f,
                "repair of session \"{id}\" cuts from seq {marker}, but the stored log ends \
                 before seq {next_seq}"
            ),
            Error::StaleCloser { id, seq, expected } => write!(
                f,
                "closers for session \"{id}\" start at seq {seq}, expected seq {expected}"
            ),
            Error::CommitOutcomeMismatch { id, first, why } => write!(
                f,
                "append to session \"{id}\" from seq {first}: the connection broke while \
                 committing and the stored tail does not settle the outcome: {why}"
            ),
            Error::InvalidBatches { events, detail } => {
                write!(
                    f,
                    "batches of a publication must be non-empty consecutive ranges covering its \
                     {events} events ({detail})"
                )
            }
            Error::Fork { parent, child, why } => {
                write!(f, "cannot fork \"{parent}\" into \"{child}\": {why}")
            }
            Error::Zstd(e) => write!(f, "zstd: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Postgres { source, .. } => Some(source),
            Error::Zstd(e) => Some(e),
            Error::Tls { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl From<Error> for session_persist::Error {
    fn from(e: Error) -> session_persist::Error {
        match e {
            Error::AlreadyMaterialized { id } => session_persist::Error::AlreadyMaterialized { id },
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
            Error::InvalidBatches { events, detail } => {
                session_persist::Error::InvalidBatches { events, detail }
            }
            other => {
                let (kind, position) = (other.kind(), other.position());
                session_persist::Error::foreign("Error", kind, position, other)
            }
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
