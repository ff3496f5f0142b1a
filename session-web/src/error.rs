//! The web view's error: a kind the HTTP status follows, a message naming the session or
//! seq, and the storage error (with its own source chain) underneath.

use std::fmt;

/// What went wrong, which decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such session, seq or page (404).
    NotFound,
    /// A malformed query or a log the view cannot fold (400).
    Invalid,
    /// A request without the server's token (401).
    Unauthorized,
    /// Reading storage failed (500); the source says how.
    Storage,
}

/// An error of the web view (boxed: it travels through every handler's `Result`).
#[derive(Debug, Clone)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone)]
struct Inner {
    kind: ErrorKind,
    message: String,
    source: Option<session_persist::Error>,
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    fn new(kind: ErrorKind, message: String, source: Option<session_persist::Error>) -> Error {
        Error(Box::new(Inner {
            kind,
            message,
            source,
        }))
    }

    /// A missing session, seq or route.
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message.into(), None)
    }

    /// A refused request.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Invalid, message.into(), None)
    }

    /// A request without the token.
    pub fn unauthorized() -> Error {
        Error::new(
            ErrorKind::Unauthorized,
            "this server needs its token: add ?token=… (printed at start) or an `Authorization: Bearer …` header".into(),
            None,
        )
    }

    /// A storage failure while reading `what`; a missing session keeps its not-found kind.
    pub fn storage(what: impl Into<String>, source: session_persist::Error) -> Error {
        let kind = match source.kind() {
            session_persist::ErrorKind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Storage,
        };
        Error::new(kind, what.into(), Some(source))
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The storage error underneath, when reading storage failed.
    pub fn storage_source(&self) -> Option<&session_persist::Error> {
        self.0.source.as_ref()
    }

    /// The HTTP status code for this error.
    pub fn status(&self) -> u16 {
        match self.0.kind {
            ErrorKind::NotFound => 404,
            ErrorKind::Invalid => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Storage => 500,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.source {
            Some(s) => write!(f, "{}: {s}", self.0.message),
            None => f.write_str(&self.0.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}
