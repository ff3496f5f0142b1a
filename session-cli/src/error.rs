//! The error type of `sessionctl`: every failure, where it happened, and what to do about it.

use std::fmt::{self, Write as _};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use session_core::json::Value;
use session_fork::ForkError;
use session_persist::jsonl::{PlaintextLimit, PlaintextLimitKind};
use session_persist::{Error as PersistError, ErrorKind};

use crate::json::{num, obj, opt_num, opt_str};
use crate::store::StoreAt;

/// Where a failure is: the file, and a line, byte offset or seq inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Location {
    /// The file.
    pub(crate) file: Option<PathBuf>,
    /// The 1-based line of the file (the header is line 1).
    pub(crate) line: Option<u64>,
    /// The byte offset in the file (or in the decompressed text, see `in_plaintext`).
    pub(crate) offset: Option<u64>,
    /// Whether `line` and `offset` count in the decompressed log text of a zstd file.
    pub(crate) in_plaintext: bool,
    /// The seq of the event concerned.
    pub(crate) seq: Option<u64>,
}

/// Everything that can make `sessionctl` fail.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Error {
    /// The command line is wrong (exit code 2).
    Usage {
        /// What is wrong.
        message: String,
    },
    /// The persistence layer refused; `file` is the session file when known.
    Persist {
        /// The persistence error (its text is the reference's).
        error: Box<PersistError>,
        /// The session log the command was working on.
        file: Option<PathBuf>,
        /// The store.
        store: StoreAt,
    },
    /// A fork was refused.
    Fork {
        /// The refusal.
        error: ForkError,
        /// A suggestion (nearest valid boundaries).
        hint: Option<String>,
    },
    /// Any other failure, with its location and a hint.
    Failed {
        /// What went wrong.
        message: String,
        /// What to do.
        hint: Option<String>,
        /// Where.
        location: Box<Location>,
    },
    /// `verify` found violations (already reported on stdout).
    Violations {
        /// How many sessions were read and violated an invariant.
        violated: usize,
        /// How many session logs could not be read at all.
        unreadable: usize,
    },
    /// Writing the output failed (a closed pipe ends the command quietly).
    Output(io::Error),
}

/// `Result` with [`Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A usage error.
    pub(crate) fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
        }
    }

    /// A failure with a hint.
    pub(crate) fn failed(message: impl Into<String>, hint: Option<String>) -> Error {
        Error::Failed {
            message: message.into(),
            hint,
            location: Box::default(),
        }
    }

    /// A failure at a location.
    pub(crate) fn failed_at(
        message: impl Into<String>,
        hint: Option<String>,
        location: Location,
    ) -> Error {
        Error::Failed {
            message: message.into(),
            hint,
            location: Box::new(location),
        }
    }

    /// An I/O failure on `path`.
    pub(crate) fn io(what: &str, path: &Path, e: &io::Error) -> Error {
        Error::Failed {
            message: format!("cannot {what} {}: {e}", path.display()),
            hint: Some(io_hint(e)),
            location: Box::new(Location {
                file: Some(path.to_path_buf()),
                ..Location::default()
            }),
        }
    }

    /// The process exit code: 2 for usage errors, 1 otherwise.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Error::Usage { .. } => 2,
            _ => 1,
        }
    }

    /// The error's name: the reference's error class for persistence and fork errors.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Error::Usage { .. } => "UsageError",
            Error::Persist { error, .. } => error.name(),
            Error::Fork { .. } => ForkError::NAME,
            Error::Violations { .. } => "InvariantViolation",
            Error::Failed { .. } | Error::Output(_) => "Error",
        }
    }

    /// The persistence layer's kind of the failure (`not_found`, `corrupt`, `locked`, …), for
    /// persistence and fork refusals.
    pub(crate) fn kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Persist { error, .. } => Some(error.kind()),
            Error::Fork { .. } => Some(ErrorKind::Invalid),
            _ => None,
        }
    }

    /// The error code, when the error has one.
    pub(crate) fn code(&self) -> Option<&'static str> {
        match self {
            Error::Fork { error, .. } => Some(error.code().as_str()),
            Error::Persist { error, .. } => match &**error {
                PersistError::Store(s) => s.as_fork().map(|f| f.code().as_str()),
                _ => None,
            },
            _ => None,
        }
    }

    /// Where the failure is.
    pub(crate) fn location(&self) -> Location {
        match self {
            Error::Persist { error, file, store } => {
                let zstd = store.is_zstd();
                let mut loc = persist_location(error);
                if loc.file.is_none() {
                    loc.file.clone_from(file);
                }
                if loc.file.is_none()
                    && let StoreAt::Sqlite { path } = store
                {
                    loc.file = Some(path.clone());
                }
                if zstd && loc.line.is_some() {
                    loc.in_plaintext = true;
                }
                if !zstd
                    && loc.offset.is_none()
                    && let (Some(path), Some(line)) = (&loc.file, loc.line)
                {
                    loc.offset = line_offset(path, line);
                }
                loc
            }
            Error::Failed { location, .. } => (**location).clone(),
            _ => Location::default(),
        }
    }

    /// What caused it: the texts of the failure's source chain that its message does not
    /// already show (a decoder's error name, a decompression limit, an I/O error), or `None`.
    pub(crate) fn cause(&self) -> Option<String> {
        let Error::Persist { error, .. } = self else {
            return None;
        };
        error.cause_text()
    }

    /// What to do about it.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            Error::Usage { .. } => Some("run `sessionctl help` for the commands and options".into()),
            Error::Persist { error, store, .. } => persist_hint(error, store, &self.location()),
            Error::Fork { hint, .. } | Error::Failed { hint, .. } => hint.clone(),
            Error::Violations { violated: 0, .. } => Some(
                "each FAIL line says why the file could not be read; the files were not changed"
                    .into(),
            ),
            Error::Violations { .. } => Some(
                "each violation names the invariant and what was observed; the files were not changed"
                    .into(),
            ),
            Error::Output(_) => None,
        }
    }

    /// The error as the documented JSON object `{"error":{...}}`.
    pub(crate) fn to_json(&self) -> Value {
        let loc = self.location();
        let mut fields = vec![
            ("name", Value::from(self.name())),
            ("message", Value::from(self.to_string())),
        ];
        if let Some(code) = self.code() {
            fields.push(("code", Value::from(code)));
        }
        fields.push(("kind", opt_str(self.kind().map(ErrorKind::as_str))));
        fields.push((
            "file",
            opt_str(loc.file.as_ref().map(|p| p.display().to_string())),
        ));
        fields.push(("line", opt_num(loc.line)));
        fields.push(("offset", opt_num(loc.offset)));
        fields.push(("inPlaintext", Value::from(loc.in_plaintext)));
        fields.push(("seq", opt_num(loc.seq)));
        fields.push(("cause", opt_str(self.cause())));
        fields.push(("hint", opt_str(self.hint())));
        fields.push(("exitCode", num(u64::from(self.exit_code()))));
        obj([("error", obj(fields))])
    }

    /// The error for people: the message, then `where:`, `cause:` and `hint:` lines.
    pub(crate) fn render(&self, red: &dyn Fn(&str) -> String) -> String {
        let mut text = format!("sessionctl: {} {self}", red("error:"));
        if let Some(code) = self.code() {
            let _ = write!(text, " [{code}]");
        }
        text.push('\n');
        let loc = self.location();
        let mut parts = Vec::new();
        if let Some(file) = &loc.file {
            parts.push(file.display().to_string());
        }
        let unit = if loc.in_plaintext {
            " of the decompressed log"
        } else {
            ""
        };
        if let Some(line) = loc.line {
            parts.push(format!("line {line}{unit}"));
        }
        if let Some(offset) = loc.offset {
            let unit = if loc.in_plaintext && loc.line.is_some() {
                unit
            } else {
                ""
            };
            parts.push(format!("byte {offset}{unit}"));
        }
        if let Some(seq) = loc.seq {
            parts.push(format!("seq {seq}"));
        }
        if !parts.is_empty() {
            let _ = writeln!(text, "  where: {}", parts.join(", "));
        }
        if let Some(cause) = self.cause() {
            let _ = writeln!(text, "  cause: {cause}");
        }
        if let Some(hint) = self.hint() {
            let _ = writeln!(text, "  hint: {hint}");
        }
        text
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage { message } | Error::Failed { message, .. } => f.write_str(message),
            Error::Persist { error, .. } => fmt::Display::fmt(error, f),
            Error::Fork { error, .. } => fmt::Display::fmt(error, f),
            Error::Violations {
                violated,
                unreadable,
            } => {
                let plural = |n: usize| if n == 1 { "" } else { "s" };
                match (*violated, *unreadable) {
                    (v, 0) => write!(f, "{v} session{} violated invariants", plural(v)),
                    (0, u) => write!(f, "{u} session log{} could not be read", plural(u)),
                    (v, u) => write!(
                        f,
                        "{v} session{} violated invariants and {u} session log{} could not be read",
                        plural(v),
                        plural(u)
                    ),
                }
            }
            Error::Output(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Output(e)
    }
}

/// The location a persistence error carries: its [`session_persist::Position`], and for a
/// corruption report whose cause names no seq, the seq or index its message names.
fn persist_location(error: &PersistError) -> Location {
    let mut loc = Location::default();
    if let Some(at) = error.position() {
        loc.file = at.path;
        loc.line = at.line;
        loc.offset = at.offset;
        loc.in_plaintext = at.offset_in_text;
        loc.seq = at.seq;
    }
    if let PersistError::Corruption { cause, .. } = error
        && loc.seq.is_none()
    {
        let message = cause.to_string();
        loc.seq = index_in(&message).or_else(|| number_after(&message, " at seq "));
    }
    loc
}

/// `N` from the first `at index N` in a message.
fn index_in(message: &str) -> Option<u64> {
    number_after(message, "at index ")
}

/// The number that follows the first `marker` in a message.
fn number_after(message: &str, marker: &str) -> Option<u64> {
    let rest = &message[message.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The byte offset where 1-based `line` starts in a plain file.
fn line_offset(path: &Path, line: u64) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = BufReader::new(file);
    let mut offset = 0u64;
    let mut buf = Vec::new();
    for _ in 1..line {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        offset += n as u64;
    }
    Some(offset)
}

fn io_hint(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "check the path; nothing exists there".into(),
        io::ErrorKind::PermissionDenied => {
            "check the permissions (session files are created 0600, directories 0700)".into()
        }
        _ => "check the file system (space, permissions, mounts) and retry".into(),
    }
}

/// What to do about a persistence failure: chosen by its [`ErrorKind`], refined by where the
/// failure is ([`PersistError::position`]: a line, a byte of the file, a seq, an artifact) and
/// by the store the command opened. `loc` is the failure's full location (with the byte
/// offset of a line of a plain file).
fn persist_hint(error: &PersistError, store: &StoreAt, loc: &Location) -> Option<String> {
    if let StoreAt::Postgres { url, .. } = store
        && matches!(error.kind(), ErrorKind::Backend | ErrorKind::Io)
    {
        return Some(postgres_hint(url));
    }
    let at = error.position().unwrap_or_default();
    Some(match error.kind() {
        ErrorKind::NotFound => match store {
            StoreAt::Jsonl { root, .. } => format!(
                "no such session is stored under {root}; `sessionctl --root {root} list` shows the stored sessions, or pass a session directory or file path",
                root = root.display()
            ),
            StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } => format!(
                "no such session is stored in {}; `sessionctl {} list` shows the stored sessions",
                store.spec(),
                store.option()
            ),
        },
        ErrorKind::AlreadyExists => {
            "choose another session id, or remove the existing session first".into()
        }
        ErrorKind::Corrupt => match (error, plaintext_limit(error)) {
            (PersistError::RecordTooLong { offset, .. }, _) => format!(
                "the line at byte {offset} is longer than any harness writes, so this is not a log a harness wrote; reading stopped at the limit and nothing was changed; the lines before it are intact: keep a copy, cut the file at byte {offset}, then run `sessionctl repair`"
            ),
            (_, Some(limit)) => limit_hint(limit, loc),
            (_, None) => corrupt_hint(&at, loc),
        },
        ErrorKind::FormatUnsupported => unsupported_hint(&at, loc),
        ErrorKind::Invalid => return invalid_hint(&at, store),
        ErrorKind::Locked => {
            "another process is writing this session; wait for it to finish".into()
        }
        ErrorKind::LeaseLost => "another writer changed this session since it was read; nothing was written: run the command again on the current state".into(),
        ErrorKind::Io => match io_source(error) {
            Some(source) => io_hint(source),
            None => "check the file system (space, permissions, mounts) and retry".into(),
        },
        _ => return None,
    })
}

/// The first [`io::Error`] in a failure's source chain.
fn io_source(error: &PersistError) -> Option<&io::Error> {
    let mut next = std::error::Error::source(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io);
        }
        next = e.source();
    }
    None
}

/// `line N` with `(byte B)` when the offset counts in the file itself.
fn line_at(line: u64, loc: &Location) -> String {
    match loc.offset {
        Some(offset) if !loc.in_plaintext => format!("line {line} (byte {offset})"),
        _ if loc.in_plaintext => format!("line {line} of the decompressed log"),
        _ => format!("line {line}"),
    }
}

/// The decompression limit a failure's source chain names, if any.
fn plaintext_limit(error: &PersistError) -> Option<&PlaintextLimit> {
    let mut next = std::error::Error::source(error);
    while let Some(e) = next {
        // An `io::Error` carrying the limit shows the limit's text but does not return it as
        // its source: the limit is what it wraps.
        let inner = e
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .map_or(e, |inner| inner as &(dyn std::error::Error + 'static));
        if let Some(limit) = inner.downcast_ref::<PlaintextLimit>() {
            return Some(limit);
        }
        next = e.source();
    }
    None
}

/// The remedy for a frame that expands beyond a decompression limit: no harness writes such a
/// frame (the limits are above what the reference can write), so it is not a torn write.
fn limit_hint(limit: &PlaintextLimit, loc: &Location) -> String {
    let what = match limit.kind {
        PlaintextLimitKind::Record => "a line longer than any harness writes",
        PlaintextLimitKind::Frame => "more plaintext than any harness writes in one frame",
    };
    let at = loc
        .offset
        .map_or_else(String::new, |offset| format!(" at byte {offset}"));
    let cut = loc.offset.map_or_else(String::new, |offset| {
        format!(": keep a copy, cut the file at byte {offset}, then run `sessionctl repair`")
    });
    format!(
        "the frame{at} expands to {what}, so it was not written by a harness (a decompression bomb, or data that is not a session log); reading stopped at the limit and nothing was changed; the frames before it are intact{cut}"
    )
}

/// The remedy for damaged stored data: where the damage is decides what can be cut.
fn corrupt_hint(at: &session_persist::Position, loc: &Location) -> String {
    match (at.line, at.offset, at.seq.or(loc.seq), &at.path) {
        (Some(1), ..) => format!(
            "{} must be the session header record; this file is not a usable session log",
            line_at(1, loc)
        ),
        (Some(line), ..) => format!(
            "{} is damaged before the log's last turn/end, so it is not a torn tail and repair will not cut it; keep a copy, cut the file before that line, then run `sessionctl repair`",
            line_at(line, loc)
        ),
        (None, Some(offset), ..) => format!(
            "a complete Zstandard frame is damaged at byte {offset} (only a torn final frame is recoverable); the frames before it are intact: keep a copy, cut the file at byte {offset}, then run `sessionctl repair`"
        ),
        (None, None, Some(seq), _) => format!(
            "the stored event at seq {seq} does not form a valid session event; nothing was changed"
        ),
        (None, None, None, Some(_)) => "the file's header does not match where it is stored (<root>/<project of cwd>/<id>/); move the file there, or pass the file from its own root".into(),
        (None, None, None, None) => "the stored data does not form a valid session (the message says what is wrong; a log whose first line is not the session header record is not usable at all); nothing was changed".into(),
    }
}

/// Whether `path` names a session log of the store layout (`session.jsonl[.zstd]`).
fn is_layout_log(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "session.jsonl" || n == "session.jsonl.zstd")
}

/// The remedy for a format this build refuses.
fn unsupported_hint(at: &session_persist::Position, loc: &Location) -> String {
    match (at.line, at.seq, &at.path) {
        (Some(line), ..) => format!(
            "{} holds text this build cannot represent; read it with a build that supports it",
            line_at(line, loc)
        ),
        (None, Some(seq), _) => format!(
            "the event at seq {seq} has a type or shape this build does not read: a newer harness's type (read it with a newer sessionctl) or a retired shape with no upgrade path"
        ),
        (None, None, Some(path)) if is_layout_log(path) => {
            "the log format version is not 0; read it with a build that supports that version"
                .into()
        }
        (None, None, Some(path)) => format!(
            "the stray log {} refuses every command on this root: a session log must live at <root>/<project>/<session id>/session.jsonl[.zstd]; move it into its own session directory, or out of the root",
            path.display()
        ),
        (None, None, None) => "the header uses a format version or retired fields this build refuses (no upgrade path exists for retired fields); read it with a build that supports it".into(),
    }
}

/// The remedy for refused input or configuration, when there is one to give: a directory
/// another user can write, or a log of the other encoding than the root is opened with.
fn invalid_hint(at: &session_persist::Position, store: &StoreAt) -> Option<String> {
    let path = at.path.as_deref()?;
    if path.is_dir() {
        return Some(
            "another local user can write into this directory; run `chmod go-w` on it".into(),
        );
    }
    let zstd = store.is_zstd();
    let file_zstd = path.extension().is_some_and(|e| e == "zstd");
    (matches!(store, StoreAt::Jsonl { .. }) && file_zstd != zstd).then(|| format!(
        "this root is opened as --compression {}; pass --compression {} to read the file, or re-encode it with `sessionctl convert`",
        if zstd { "zstd" } else { "none" },
        if zstd { "none" } else { "zstd" },
    ))
}

/// The server a `PostgreSQL` URL names (`HOST:PORT`, port 5432 when not given), without the
/// user info.
pub(crate) fn postgres_server(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.is_empty() { "localhost" } else { host };
    let has_port = host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()) && !host.ends_with(']'));
    if has_port {
        host.to_owned()
    } else {
        format!("{host}:5432")
    }
}

/// Names the server of a `PostgreSQL` failure (its cause is on the error's `cause:` line).
fn postgres_hint(url: &str) -> String {
    format!(
        "server {}; check that it runs and accepts this connection",
        postgres_server(url)
    )
}
