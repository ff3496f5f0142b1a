//! The error type of `session-repair`.

use std::fmt;

use crate::invariant::InvariantError;

/// Everything that can go wrong in `session-repair`. Messages are the reference's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A tool-pairing query named a seq that is not a current surface node.
    SurfaceSeqNotFound {
        /// The queried seq.
        seq: u64,
    },
    /// A `tool/result` on the surface has no open `tool-call` block before it.
    UnmatchedToolResult {
        /// The seq of the result.
        seq: u64,
    },
    /// A surface node has no event in the log.
    MissingEvent {
        /// The seq of the node.
        seq: u64,
    },
    /// The turn/step invariant was violated.
    Invariant(InvariantError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::SurfaceSeqNotFound { seq } => {
                write!(f, "tool-pairing balance: surface seq {seq} not found")
            }
            Error::UnmatchedToolResult { seq } => write!(
                f,
                "tool-pairing balance: tool/result at surface seq {seq} has no matching tool-call (corrupt surface)"
            ),
            Error::MissingEvent { seq } => write!(
                f,
                "tool-pairing balance: surface seq {seq} has no matching session event (corrupt surface)"
            ),
            Error::Invariant(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Invariant(e) => Some(e),
            _ => None,
        }
    }
}

impl From<InvariantError> for Error {
    fn from(e: InvariantError) -> Error {
        Error::Invariant(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
