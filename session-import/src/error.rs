//! The typed import error: a kind, the file, and where in it (line, byte offset).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// What went wrong, for callers that decide on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportErrorKind {
    /// The file could not be opened or read.
    Io,
    /// A `.zst` file is not a valid zstd stream (or exceeds the decompression bound).
    Decompress,
    /// A line is not a JSON object, or is longer than the line bound.
    Malformed,
    /// The file holds no record that can make a session.
    Empty,
    /// The session could not be built (a rule of `Session::append` refused an event the
    /// mapping itself produced).
    Build,
}

impl ImportErrorKind {
    /// A stable name (`io`, `decompress`, `malformed`, `empty`, `build`).
    pub fn as_str(self) -> &'static str {
        match self {
            ImportErrorKind::Io => "io",
            ImportErrorKind::Decompress => "decompress",
            ImportErrorKind::Malformed => "malformed",
            ImportErrorKind::Empty => "empty",
            ImportErrorKind::Build => "build",
        }
    }
}

/// An import failure, naming the file and, where one applies, the 1-based line and the byte
/// offset of the line's start (in the plaintext, for a compressed file).
#[derive(Debug, Clone)]
pub struct ImportError {
    kind: ImportErrorKind,
    file: PathBuf,
    line: Option<u64>,
    offset: Option<u64>,
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl ImportError {
    pub(crate) fn new(
        kind: ImportErrorKind,
        file: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> ImportError {
        ImportError {
            kind,
            file: file.into(),
            line: None,
            offset: None,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn at(mut self, line: u64, offset: u64) -> ImportError {
        self.line = Some(line);
        self.offset = Some(offset);
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ImportError {
        self.source = Some(Arc::new(source));
        self
    }

    /// The kind.
    pub fn kind(&self) -> ImportErrorKind {
        self.kind
    }

    /// The file.
    pub fn file(&self) -> &std::path::Path {
        &self.file
    }

    /// The 1-based line, when the failure is in one.
    pub fn line(&self) -> Option<u64> {
        self.line
    }

    /// The byte offset of that line's first byte.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The message, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let (Some(line), Some(offset)) = (self.line, self.offset) {
            write!(f, ":{line} (byte {offset})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
