//! The error type of `session-store`.

use std::fmt;
use std::sync::Arc;

use session_fork::ForkError;

/// A listener's error, shared so that [`Error`] stays cheap to clone.
pub type SharedError = Arc<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong in `session-store`. `Display` gives the reference's exact
/// message.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// `session "<id>" already exists`: the id is already in the store (prepare, enter).
    AlreadyExists {
        /// The session id.
        id: Arc<str>,
    },
    /// `session "<id>" is already attached to a store`: the object is entered in a store.
    AlreadyAttached {
        /// The session id.
        id: Arc<str>,
    },
    /// `session "<id>" is not live in this store`: announce or flush of a session that is not
    /// entered, or whose entry now belongs to another object.
    NotLive {
        /// The session id.
        id: Arc<str>,
    },
    /// `session "<id>" was already announced`.
    AlreadyAnnounced {
        /// The session id.
        id: Arc<str>,
    },
    /// `session header is not a plain JSON record`: `meta` is not a JSON object.
    MetaNotRecord,
    /// Constructing the session failed (seed or header validation); the session's message.
    Session(session_surface::Error),
    /// A `SessionForkError` (`name` `SessionForkError`, with a code).
    Fork(ForkError),
    /// A `session/created` listener or a dispatch hook refused a creation, or a
    /// `session/flush` listener failed; the listener's own error, unchanged.
    Listener(SharedError),
}

impl Error {
    /// The fork error, when this is one.
    pub fn as_fork(&self) -> Option<&ForkError> {
        match self {
            Error::Fork(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::AlreadyExists { id } => write!(f, "session \"{id}\" already exists"),
            Error::AlreadyAttached { id } => {
                write!(f, "session \"{id}\" is already attached to a store")
            }
            Error::NotLive { id } => write!(f, "session \"{id}\" is not live in this store"),
            Error::AlreadyAnnounced { id } => write!(f, "session \"{id}\" was already announced"),
            Error::MetaNotRecord => f.write_str("session header is not a plain JSON record"),
            Error::Session(e) => write!(f, "{e}"),
            Error::Fork(e) => write!(f, "{e}"),
            Error::Listener(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Session(e) => Some(e),
            Error::Fork(e) => Some(e),
            Error::Listener(e) => Some(&**e),
            _ => None,
        }
    }
}

impl From<session_surface::Error> for Error {
    fn from(e: session_surface::Error) -> Error {
        Error::Session(e)
    }
}

impl From<ForkError> for Error {
    fn from(e: ForkError) -> Error {
        Error::Fork(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
