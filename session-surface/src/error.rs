//! The error type of `session-surface`.

use std::fmt;
use std::sync::Arc;

use crate::surface::SurfaceError;

/// What is wrong with a message-bearing event's message (§2.9). The `Display` text follows
/// the subject in the reference's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeProblem {
    /// `lacks an identified message`
    NoIdentifiedMessage,
    /// `message must have role "<role>"`
    Role(&'static str),
    /// `message has invalid source`
    InvalidSource,
    /// `message has invalid content`
    InvalidContent,
    /// `message must have model source`
    ModelSource,
    /// `message must have tool source`
    ToolSource,
    /// `message must contain one tool-result block`
    OneToolResultBlock,
    /// `message has mismatched tool call ids`
    MismatchedToolCallIds,
}

impl fmt::Display for ShapeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeProblem::NoIdentifiedMessage => f.write_str("lacks an identified message"),
            ShapeProblem::Role(role) => write!(f, "message must have role \"{role}\""),
            ShapeProblem::InvalidSource => f.write_str("message has invalid source"),
            ShapeProblem::InvalidContent => f.write_str("message has invalid content"),
            ShapeProblem::ModelSource => f.write_str("message must have model source"),
            ShapeProblem::ToolSource => f.write_str("message must have tool source"),
            ShapeProblem::OneToolResultBlock => {
                f.write_str("message must contain one tool-result block")
            }
            ShapeProblem::MismatchedToolCallIds => {
                f.write_str("message has mismatched tool call ids")
            }
        }
    }
}

/// A shared error value from outside the crate (a veto).
pub type SharedError = Arc<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong in `session-surface`. `Display` gives the reference's exact
/// message.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// `session event "<type>" carries non-JSON-serializable data`
    NonJsonData {
        /// The event type.
        ty: String,
    },
    /// `session event "request/header-delta" uses unsupported legacy request/header-delta
    /// format`
    LegacyHeaderDelta,
    /// `session event "request/header" uses unsupported legacy request/header reason
    /// "fallback"`
    LegacyFallbackReason,
    /// `session event "<type>" carries non-JSON-serializable surface metadata`
    NonJsonSurfaceMetadata {
        /// The event type.
        ty: String,
    },
    /// `session append cannot reenter while another append is being published`
    Reentrant,
    /// `<subject> <problem>`: a message-bearing event's message has the wrong shape (§2.9).
    /// The subject is `session event at seq <seq>` on append and `seed <type> at index <i>`
    /// in a seed.
    MessageShape {
        /// Who is being checked.
        subject: String,
        /// What is wrong.
        problem: ShapeProblem,
    },
    /// A new event that a reader would refuse or rewrite (`session_core::rules`): a retired
    /// type or turn shape, an unknown type without `ignorable`, a packed-row storage tag, an
    /// unsafe `time`. The message is the reader's where it has one.
    Rule(session_core::rules::Violation),
    /// A surface transition was refused (§3.2); the message is the surface's, unwrapped.
    Surface(SurfaceError),
    /// A pre-commit hook vetoed the append; the message is the hook's.
    Vetoed(SharedError),
    /// `seed event at index <i> is not losslessly JSON-serializable`
    SeedNotLossless {
        /// Index in the seed.
        index: usize,
    },
    /// `seed event at index <i> uses unsupported legacy request/header-delta format`
    SeedLegacyHeaderDelta {
        /// Index in the seed.
        index: usize,
    },
    /// `seed event at index <i> has an invalid event envelope`
    SeedEnvelope {
        /// Index in the seed.
        index: usize,
        /// The envelope's error (its source says what is wrong).
        cause: session_core::Error,
    },
    /// `seed request/header at index <i> <problem>` (`lacks provider/model`, `has an invalid
    /// reasoningEffort`, `has invalid adapterDefaults`).
    SeedRequestHeader {
        /// Index in the seed.
        index: usize,
        /// The reference's text after the subject.
        problem: String,
    },
    /// `session event request/header at seq <seq> <problem>`: a live append of a
    /// `request/header` whose shape a reload would refuse (the seed checks of §2.8, applied
    /// on append so that every appendable log can be reloaded).
    RequestHeaderShape {
        /// The seq the event would have had.
        seq: u64,
        /// The reference's text after the subject, e.g. `lacks provider/model`.
        problem: String,
    },
    /// `seed event at index <i> uses unsupported legacy request/header reason "fallback"`
    SeedLegacyFallbackReason {
        /// Index in the seed.
        index: usize,
    },
    /// `seed event at index <i> has seq <seq> (expected <i>); seed must be contiguous from 0`
    SeedNotContiguous {
        /// Index in the seed.
        index: usize,
        /// The seq the event carried.
        seq: u64,
    },
    /// `invalid seed event at index <i>: <surface message>`
    SeedSurface {
        /// Index in the seed.
        index: usize,
        /// The surface's refusal.
        error: SurfaceError,
    },
    /// A session header was refused; the string is the reference's exact message (for
    /// example `session header is not losslessly JSON-serializable`).
    Header(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NonJsonData { ty } => {
                write!(f, "session event \"{ty}\" carries non-JSON-serializable data")
            }
            Error::LegacyHeaderDelta => f.write_str(
                "session event \"request/header-delta\" uses unsupported legacy request/header-delta format",
            ),
            Error::LegacyFallbackReason => f.write_str(
                "session event \"request/header\" uses unsupported legacy request/header reason \"fallback\"",
            ),
            Error::NonJsonSurfaceMetadata { ty } => write!(
                f,
                "session event \"{ty}\" carries non-JSON-serializable surface metadata"
            ),
            Error::Reentrant => f.write_str(
                "session append cannot reenter while another append is being published",
            ),
            Error::MessageShape { subject, problem } => write!(f, "{subject} {problem}"),
            Error::Rule(e) => write!(f, "{e}"),
            Error::Surface(e) => write!(f, "{e}"),
            Error::Vetoed(e) => write!(f, "{e}"),
            Error::SeedNotLossless { index } => write!(
                f,
                "seed event at index {index} is not losslessly JSON-serializable"
            ),
            Error::SeedLegacyHeaderDelta { index } => write!(
                f,
                "seed event at index {index} uses unsupported legacy request/header-delta format"
            ),
            Error::SeedEnvelope { index, .. } => {
                write!(f, "seed event at index {index} has an invalid event envelope")
            }
            Error::SeedRequestHeader { index, problem } => {
                write!(f, "seed request/header at index {index} {problem}")
            }
            Error::RequestHeaderShape { seq, problem } => {
                write!(f, "session event request/header at seq {seq} {problem}")
            }
            Error::SeedLegacyFallbackReason { index } => write!(
                f,
                "seed event at index {index} uses unsupported legacy request/header reason \"fallback\""
            ),
            Error::SeedNotContiguous { index, seq } => write!(
                f,
                "seed event at index {index} has seq {seq} (expected {index}); seed must be contiguous from 0"
            ),
            Error::SeedSurface { index, error } => {
                write!(f, "invalid seed event at index {index}: {error}")
            }
            Error::Header(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Surface(e) | Error::SeedSurface { error: e, .. } => Some(e),
            Error::Vetoed(e) => Some(&**e),
            Error::SeedEnvelope { cause, .. } => Some(cause),
            _ => None,
        }
    }
}

impl From<SurfaceError> for Error {
    fn from(e: SurfaceError) -> Error {
        Error::Surface(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
