//! The error type of `session-core`.

use std::fmt;

use crate::json::{ParseError, SerdeError};

/// Everything that can go wrong in `session-core`. Messages are the reference's texts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// JSON text could not be parsed.
    Json(ParseError),
    /// An event object breaks the envelope rules (allowed keys, `type` string, `seq`
    /// non-negative safe integer, `time` safe integer, `data` present, `ignorable` absent or
    /// `true`). The message is the reference's context-free text, to which callers add their
    /// position; `problem` (the error's source) says what is wrong.
    InvalidEnvelope {
        /// What is wrong with the envelope.
        problem: EnvelopeProblem,
    },
    /// An event pushed onto a log does not carry the next seq.
    SeqMismatch {
        /// The seq the log expected.
        expected: u64,
        /// The seq the event carried.
        got: u64,
    },
    /// A session header failed validation; the string is the reference's exact message.
    Header(String),
    /// A packed chunk row failed validation: `malformed <tag> storage row: <why>`.
    MalformedRow {
        /// The row tag (`text-chunks`, `reasoning-chunks` or `tool-call-chunks`).
        tag: String,
        /// The reference's reason text.
        why: &'static str,
    },
    /// A packed chunk row whose `dt` array does not have one entry fewer than its members:
    /// `malformed <tag> storage row: dt length <dt_len> does not match <members> members`.
    MalformedRowArity {
        /// The row tag.
        tag: String,
        /// The length of the row's `dt` array.
        dt_len: usize,
        /// The number of members (`texts` or `args` entries).
        members: usize,
    },
    /// An event's `data` does not fit the type it was read as ([`crate::Event::data_as`]).
    Data {
        /// The event's seq.
        seq: u64,
        /// The event's type.
        ty: String,
        /// What did not fit, and where in `data`.
        source: SerdeError,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Json(e) => write!(f, "{e}"),
            Error::InvalidEnvelope { .. } => f.write_str("invalid event envelope"),
            Error::SeqMismatch { expected, got } => {
                write!(
                    f,
                    "session event seq {got} is not contiguous; expected {expected}"
                )
            }
            Error::Header(msg) => f.write_str(msg),
            Error::MalformedRow { tag, why } => write!(f, "malformed {tag} storage row: {why}"),
            Error::MalformedRowArity {
                tag,
                dt_len,
                members,
            } => write!(
                f,
                "malformed {tag} storage row: dt length {dt_len} does not match {members} members"
            ),
            Error::Data { seq, ty, source } => {
                write!(
                    f,
                    "event at seq {seq} ({ty:?}): data does not fit: {source}"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Json(e) => Some(e),
            Error::Data { source, .. } => Some(source),
            Error::InvalidEnvelope { problem } => Some(problem),
            _ => None,
        }
    }
}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Error {
        Error::Json(e)
    }
}

/// What is wrong with an event envelope (`` `time` is not a safe integer ``): the source of
/// [`Error::InvalidEnvelope`], whose message is the reference's and does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeProblem(pub &'static str);

impl fmt::Display for EnvelopeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for EnvelopeProblem {}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
