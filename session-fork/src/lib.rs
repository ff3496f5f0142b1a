//! `session-fork` owns fork boundaries: it turns a closed-turn prefix of a session's log into
//! the seed of a child session that records its lineage.
//!
//! Primary items: [`resolve_boundary`] (the pure boundary rules), [`fork_session`] /
//! [`fork_events`] (building the child), [`child_header`], and the [`ForkError`] /
//! [`ForkErrorCode`] pair every fork failure is reported with. [`uncompact`] builds a child
//! with chosen compactions undone (the `uncompact` module docs give its exact shape).
//!
//! # Key design decision
//!
//! The child does not copy its inherited events: its seed is [`Events::prefix`] of the
//! parent's frozen snapshot, so it shares the parent's storage (O(log n)) while its log is
//! exactly what the reference produces: the prefix verbatim, then a `session/end-seed` marker
//! unless the prefix already ends with one. Forking a live [`Session`] ([`fork_session`]) also
//! shares the parent's derived state at the boundary, since the prefix was validated when it
//! was appended; a log given as events ([`fork_events`]) is revalidated as a seed. Store-level
//! checks (a child id that already exists, resolving the source by id) belong to the store;
//! this crate exposes the error constructors it needs.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use session_core::{FixedClock, SharedClock, json::Value};
//! use session_fork::{ForkErrorCode, fork_session, resolve_boundary};
//! use session_surface::Session;
//!
//! let clock: SharedClock = Arc::new(FixedClock::new(1_000));
//! let seed = [
//!     r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
//!     r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
//!     r#"{"type":"turn/start","seq":2,"time":3,"data":{"turn":2}}"#,
//! ];
//! let seed = seed.iter().map(|t| Value::parse(t)).collect::<Result<Vec<_>, _>>()?;
//! let parent = Session::create("parent", Some(seed), None, clock.clone())?;
//!
//! // The tail is inside turn 2, so the default boundary is refused...
//! let err = resolve_boundary(&parent.events(), "parent", None).unwrap_err();
//! assert_eq!(err.code(), ForkErrorCode::OpenTurn);
//! assert_eq!(err.to_string(), r#"fork boundary 3 in session "parent" ends inside open turn 2"#);
//!
//! // ...but the end of turn 1 is a valid boundary.
//! let child = fork_session(&parent, Some(&Value::from(1)), "child", clock)?;
//! assert_eq!(child.header().seed_length, Some(2));
//! assert_eq!(child.header().parent_session.as_deref(), Some("parent"));
//! assert_eq!(child.seq(), 3); // two inherited events and the child's end-seed marker
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use session_core::event::{int_value, seq_value};
use session_core::header::js_string;
use session_core::json::Value;
use session_core::{Events, SharedClock};
use session_surface::Session;

mod uncompact;

pub use uncompact::{
    PROVENANCE_TYPE, UNDONE_TYPE, UncompactError, Undo, uncompact, uncompact_events,
};

/// What kind of fork failure a [`ForkError`] is (`SessionForkError.code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForkErrorCode {
    /// `SESSION_NOT_FOUND`: the source is not in the store.
    SessionNotFound,
    /// `SESSION_NOT_LIVE`: the source object is not the store's live instance of its id.
    SessionNotLive,
    /// `SESSION_ALREADY_EXISTS`: the requested child id is already live.
    SessionAlreadyExists,
    /// `INVALID_BOUNDARY`: the boundary is not a seq of the source's log.
    InvalidBoundary,
    /// `OPEN_TURN`: the prefix up to the boundary ends inside an open turn.
    OpenTurn,
}

impl ForkErrorCode {
    /// The code as the reference spells it, e.g. `"OPEN_TURN"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ForkErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ForkErrorCode::SessionNotLive => "SESSION_NOT_LIVE",
            ForkErrorCode::SessionAlreadyExists => "SESSION_ALREADY_EXISTS",
            ForkErrorCode::InvalidBoundary => "INVALID_BOUNDARY",
            ForkErrorCode::OpenTurn => "OPEN_TURN",
        }
    }

    /// The code for its spelling, e.g. `"OPEN_TURN"`.
    pub fn parse(code: &str) -> Option<ForkErrorCode> {
        Some(match code {
            "SESSION_NOT_FOUND" => ForkErrorCode::SessionNotFound,
            "SESSION_NOT_LIVE" => ForkErrorCode::SessionNotLive,
            "SESSION_ALREADY_EXISTS" => ForkErrorCode::SessionAlreadyExists,
            "INVALID_BOUNDARY" => ForkErrorCode::InvalidBoundary,
            "OPEN_TURN" => ForkErrorCode::OpenTurn,
            _ => return None,
        })
    }
}

impl fmt::Display for ForkErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fork failure (`SessionForkError`): a [`ForkErrorCode`] and the reference's exact message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkError {
    code: ForkErrorCode,
    message: String,
}

impl ForkError {
    /// The error's name, `"SessionForkError"`.
    pub const NAME: &'static str = "SessionForkError";

    /// An error with an explicit code and message.
    pub fn new(code: ForkErrorCode, message: impl Into<String>) -> ForkError {
        ForkError {
            code,
            message: message.into(),
        }
    }

    /// `session "<id>" not found` (`SESSION_NOT_FOUND`).
    pub fn not_found(id: &str) -> ForkError {
        ForkError::new(
            ForkErrorCode::SessionNotFound,
            format!("session \"{id}\" not found"),
        )
    }

    /// `session "<id>" is not the live store instance` (`SESSION_NOT_LIVE`).
    pub fn not_live(id: &str) -> ForkError {
        ForkError::new(
            ForkErrorCode::SessionNotLive,
            format!("session \"{id}\" is not the live store instance"),
        )
    }

    /// `session "<id>" already exists` (`SESSION_ALREADY_EXISTS`).
    pub fn already_exists(id: &str) -> ForkError {
        ForkError::new(
            ForkErrorCode::SessionAlreadyExists,
            format!("session \"{id}\" already exists"),
        )
    }

    /// The failure kind.
    pub fn code(&self) -> ForkErrorCode {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error's name, `"SessionForkError"`.
    pub fn name(&self) -> &'static str {
        ForkError::NAME
    }
}

impl fmt::Display for ForkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ForkError {}

/// Everything that can go wrong while forking.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The fork itself was refused (`SessionForkError`).
    Fork(ForkError),
    /// Building the child session failed; the session's own error propagates unchanged.
    Session(session_surface::Error),
    /// An uncompact request named no compaction to undo.
    Uncompact(UncompactError),
}

impl Error {
    /// The fork failure, when this is one.
    pub fn as_fork(&self) -> Option<&ForkError> {
        match self {
            Error::Fork(e) => Some(e),
            Error::Session(_) | Error::Uncompact(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Fork(e) => fmt::Display::fmt(e, f),
            Error::Session(e) => fmt::Display::fmt(e, f),
            Error::Uncompact(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Fork(e) => Some(e),
            Error::Session(e) => Some(e),
            Error::Uncompact(e) => Some(e),
        }
    }
}

impl From<ForkError> for Error {
    fn from(e: ForkError) -> Error {
        Error::Fork(e)
    }
}

impl From<session_surface::Error> for Error {
    fn from(e: session_surface::Error) -> Error {
        Error::Session(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The length of the seed a fork of `events` (the log of session `source_id`) at `boundary`
/// inherits: `boundary + 1`, or the whole log when `boundary` is `None`.
///
/// The boundary is inclusive and names a seq. It is taken as a JSON value so that every
/// argument a caller can pass is expressible; the rules, in order:
/// - omitted: the last event's seq; an empty log gives an empty seed and nothing is checked;
/// - it must be a non-negative safe integer (a string such as `"0"` is not):
///   `fork boundary for session "<id>" must be a non-negative safe integer, got <String(b)>`;
/// - it must be a position in the log: `fork boundary <b> does not exist in session "<id>"
///   (last seq: <last seq | none>)`;
/// - the event there must carry it as its seq (otherwise the log is corrupt):
///   `fork boundary <b> does not match a contiguous event seq in session "<id>"`;
/// - the last `turn/start` or `turn/end` at or before it must not be a `turn/start`:
///   `fork boundary <b> in session "<id>" ends inside open turn <turn>` (`OPEN_TURN`). Steps,
///   tool calls and unpaired surface events are not examined.
///
/// All but the last fail with [`ForkErrorCode::InvalidBoundary`]. Cost: O(boundary) at worst,
/// for the backward scan of the open-turn rule.
pub fn resolve_boundary(
    events: &Events,
    source_id: &str,
    boundary: Option<&Value>,
) -> Result<usize, ForkError> {
    let b = match boundary {
        None => match events.last() {
            None => return Ok(0),
            Some(last) => last.seq(),
        },
        Some(v) => v.as_u64().ok_or_else(|| {
            ForkError::new(
                ForkErrorCode::InvalidBoundary,
                format!(
                    "fork boundary for session \"{source_id}\" must be a non-negative safe integer, got {}",
                    js_string(Some(v))
                ),
            )
        })?,
    };
    let index = usize::try_from(b).ok().filter(|&i| i < events.len());
    let Some(index) = index else {
        let last = events
            .last()
            .map_or_else(|| "none".to_owned(), |e| e.seq().to_string());
        return Err(ForkError::new(
            ForkErrorCode::InvalidBoundary,
            format!(
                "fork boundary {b} does not exist in session \"{source_id}\" (last seq: {last})"
            ),
        ));
    };
    if events.get(index).map(session_core::Event::seq) != Some(b) {
        return Err(ForkError::new(
            ForkErrorCode::InvalidBoundary,
            format!(
                "fork boundary {b} does not match a contiguous event seq in session \"{source_id}\""
            ),
        ));
    }
    let last_turn_event = events
        .prefix(index + 1)
        .iter()
        .rev()
        .find(|e| matches!(e.event_type(), "turn/start" | "turn/end"))
        .cloned();
    if let Some(start) = last_turn_event.filter(|e| e.event_type() == "turn/start") {
        return Err(ForkError::new(
            ForkErrorCode::OpenTurn,
            format!(
                "fork boundary {b} in session \"{source_id}\" ends inside open turn {}",
                js_string(start.data().get("turn"))
            ),
        ));
    }
    Ok(index + 1)
}

/// The header of a fork child, in the store's key order:
/// `{version: 0, id, createdAt, cwd?, parentSession, seedLength}`.
pub fn child_header(
    child_id: &str,
    created_at: i64,
    cwd: Option<&str>,
    parent_session: &str,
    seed_length: usize,
) -> Value {
    let mut entries: Vec<(&str, Value)> = Vec::with_capacity(6);
    entries.push(("version", Value::from(0u8)));
    entries.push(("id", Value::from(child_id)));
    entries.push(("createdAt", int_value(created_at)));
    if let Some(cwd) = cwd {
        entries.push(("cwd", Value::from(cwd)));
    }
    entries.push(("parentSession", Value::from(parent_session)));
    entries.push(("seedLength", seq_value(seed_length as u64)));
    Value::object(entries)
}

/// Forks the log `events` of session `source_id` (working directory `source_cwd`) at
/// `boundary` into a new session `child_id`.
///
/// This is [`fork_session`] for a source that is not loaded as a [`Session`], e.g. a stored
/// log. The child's seed is a prefix of `events` that shares their storage; it is revalidated
/// as a snapshot-mode seed, and the child's `createdAt` is `clock`'s now.
pub fn fork_events(
    source_id: &str,
    source_cwd: Option<&str>,
    events: &Events,
    boundary: Option<&Value>,
    child_id: &str,
    clock: SharedClock,
) -> Result<Session> {
    let seed_length = resolve_boundary(events, source_id, boundary)?;
    let header = child_header(child_id, clock.now_ms(), source_cwd, source_id, seed_length);
    let seed = events.prefix(seed_length);
    let child = Session::create_from_events(child_id, Some(seed), Some(header), clock)?;
    Ok(child)
}

/// Forks `source` at `boundary` (inclusive seq; `None` = its whole log) into a new session
/// `child_id` (`SessionStore.fork` minus the store-level checks).
///
/// The child inherits `source.events[0..=boundary]` (see [`resolve_boundary`] for the rules),
/// the source's `cwd`, and records `parentSession` = the source id and `seedLength` = the
/// number of inherited events. `origin`, `delegationDepth`, `agentPreset` and the source's
/// `createdAt` are not inherited.
///
/// The source's events were validated when they entered it, so the child is built by
/// [`Session::fork_child`]: it shares the source's prefix and its derived state at the boundary
/// (surface, messages, request folds, transcript) instead of revalidating the prefix, and is
/// the same session [`fork_events`] builds from `source.events()`. Cost: O(log n) plus the
/// backward scan of [`resolve_boundary`].
pub fn fork_session(
    source: &Session,
    boundary: Option<&Value>,
    child_id: &str,
    clock: SharedClock,
) -> Result<Session> {
    let source_id = source.id();
    let seed_length = resolve_boundary(&source.events(), source_id, boundary)?;
    let header = child_header(
        child_id,
        clock.now_ms(),
        source.header().cwd.as_deref(),
        source_id,
        seed_length,
    );
    let child = source.fork_child(seed_length, child_id, Some(header), clock)?;
    Ok(child)
}
