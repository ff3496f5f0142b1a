//! The event rules that readers apply to stored events and that a live `append` applies to
//! new drafts, so that every log that can be appended can also be read back unchanged
//! (decision 5 of the port: a log that can be appended but not reloaded is a defect).
//!
//! One home for each rule:
//!
//! * [`legacy_type`]: the retired event types readers refuse (`request/header-delta`,
//!   `mode/set`) or rewrite (`steering/message`).
//! * [`upgrade_turn_start`] / [`upgrade_turn_end`]: the read-time upgrade of the pre-react-loop
//!   `turn/start` and `turn/end` shapes (persistence §1.6 step 2). Readers migrate an
//!   [`Upgrade::Upgraded`] shape and refuse a [`Upgrade::Malformed`] one; a live append refuses
//!   both, because the stored event would not read back as the acknowledged one.
//! * [`is_supported_type`]: the unknown-type check (a type outside
//!   [`KNOWN_EVENT_TYPES`](crate::event::KNOWN_EVENT_TYPES) needs `ignorable: true`).
//! * [`is_reserved_storage_tag`]: the packed-row tags (`text-chunks`, …), which a reader
//!   decodes as packed rows whatever the record's other keys are.
//!
//! The message-shape, request-header and surface rules need a session and live in
//! `session-surface`; [`check_new_event`] runs the rules of this module on one new event, in
//! the order a reader applies them.
//!
//! ```
//! use session_core::json::Value;
//! use session_core::rules::{check_new_event, Violation};
//!
//! let bad = Value::parse(r#"{"turn":1,"reason":{"kind":"completed"},"x":1}"#)?;
//! let err = check_new_event("s", "turn/end", &bad, 4, false).unwrap_err();
//! assert_eq!(err.to_string(), r#"session "s" contains malformed pre-react-loop turn/end at seq 4"#);
//! assert!(matches!(
//!     check_new_event("s", "future/event", &Value::Null, 0, false),
//!     Err(Violation::UnknownType { .. })
//! ));
//! assert!(check_new_event("s", "future/event", &Value::Null, 0, true).is_ok());
//! # Ok::<(), session_core::Error>(())
//! ```

use std::fmt;

use crate::chunk_rows::is_row_tag;
use crate::event::is_known_event_type;
use crate::json::{MAX_SAFE_INTEGER, Object, Value};

/// A retired event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyType {
    /// `request/header-delta`: refused everywhere.
    HeaderDelta,
    /// `mode/set`: refused by readers.
    ModeSet,
    /// `steering/message`: rewritten to `user/message` by readers.
    Steering,
}

impl LegacyType {
    /// The type's name.
    pub fn name(self) -> &'static str {
        match self {
            LegacyType::HeaderDelta => "request/header-delta",
            LegacyType::ModeSet => "mode/set",
            LegacyType::Steering => "steering/message",
        }
    }
}

/// The retired type `ty` is, if any.
pub fn legacy_type(ty: &str) -> Option<LegacyType> {
    match ty {
        "request/header-delta" => Some(LegacyType::HeaderDelta),
        "mode/set" => Some(LegacyType::ModeSet),
        "steering/message" => Some(LegacyType::Steering),
        _ => None,
    }
}

/// Whether a reader accepts an event of type `ty` (with or without `ignorable: true`): known,
/// or marked ignorable.
pub fn is_supported_type(ty: &str, ignorable: bool) -> bool {
    ignorable || is_known_event_type(ty)
}

/// Whether `ty` is a packed-row storage tag (`text-chunks`, `reasoning-chunks`,
/// `tool-call-chunks`): a stored record of that type is decoded as a packed row, never as an
/// event.
pub fn is_reserved_storage_tag(ty: &str) -> bool {
    is_row_tag(ty)
}

/// The outcome of a read-time upgrade of one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Upgrade {
    /// The payload is in the current shape (or not one the upgrade reads): kept as it is.
    Current,
    /// A retired shape: readers replace the payload with this one.
    Upgraded(Value),
    /// A shape readers refuse (`malformed pre-react-loop <type>`).
    Malformed,
}

/// `required` ⊆ keys ⊆ `required ∪ optional`: every required key present, nothing outside
/// both lists.
pub fn has_only_keys(o: &Object, required: &[&str], optional: &[&str]) -> bool {
    o.keys()
        .all(|k| required.contains(&k) || optional.contains(&k))
        && required.iter().all(|k| o.contains_key(k))
}

/// `Number.isSafeInteger(v) && v >= min`.
fn safe_int_at_least(v: Option<&Value>, min: i64) -> bool {
    v.and_then(Value::as_i64).is_some_and(|n| n >= min)
}

/// The `turn/start` upgrade: a payload with a `trigger` must be exactly `{turn, trigger}` with
/// `turn` a safe integer ≥ 1 and `trigger.kind` a non-empty string, and becomes `{turn}`.
/// Payloads without `trigger` (and non-object payloads) are current.
pub fn upgrade_turn_start(data: &Value) -> Upgrade {
    let Some(o) = data.as_object() else {
        return Upgrade::Current;
    };
    if !o.contains_key("trigger") {
        return Upgrade::Current;
    }
    let trigger_kind = o
        .get("trigger")
        .and_then(Value::as_object)
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str);
    if !safe_int_at_least(o.get("turn"), 1)
        || !has_only_keys(o, &["turn", "trigger"], &[])
        || trigger_kind.is_none_or(str::is_empty)
    {
        return Upgrade::Malformed;
    }
    let turn = o.get("turn").cloned().unwrap_or_default();
    Upgrade::Upgraded(Value::object([("turn", turn)]))
}

/// The `turn/end` upgrade: an object payload must be exactly `{turn, reason}` with `turn` a
/// safe integer ≥ 1 and a string `reason.kind`. `completed`, `blocked`, `max-tokens` and
/// `interrupted` have only `kind`; `aborted` without `reason` and `disposed` become
/// `aborted` reasons; `error` without `error` is upgraded from its retired forms; other kinds
/// pass unchanged. Non-object payloads are current (the upgrade does not read them).
pub fn upgrade_turn_end(data: &Value) -> Upgrade {
    let Some(o) = data.as_object() else {
        return Upgrade::Current;
    };
    let reason = o.get("reason").and_then(Value::as_object);
    let kind = reason.and_then(|r| r.get("kind")).and_then(Value::as_str);
    let (Some(reason), Some(kind)) = (reason, kind) else {
        return Upgrade::Malformed;
    };
    if !safe_int_at_least(o.get("turn"), 1) || !has_only_keys(o, &["turn", "reason"], &[]) {
        return Upgrade::Malformed;
    }
    let only_kind = has_only_keys(reason, &["kind"], &[]);
    let upgraded = match kind {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            return if only_kind {
                Upgrade::Current
            } else {
                Upgrade::Malformed
            };
        }
        "aborted" if reason.contains_key("reason") => return Upgrade::Current,
        "aborted" | "disposed" if !only_kind => return Upgrade::Malformed,
        "aborted" => aborted_reason("legacy"),
        "disposed" => aborted_reason("disposed"),
        "error" if reason.contains_key("error") => return Upgrade::Current,
        "error" => match legacy_error_reason(reason) {
            Some(v) => v,
            None => return Upgrade::Malformed,
        },
        _ => return Upgrade::Current,
    };
    Upgrade::Upgraded(Value::Object(o.with("reason", upgraded)))
}

fn aborted_reason(cause: &str) -> Value {
    Value::object([
        ("kind", Value::from("aborted")),
        ("reason", Value::object([("kind", Value::from(cause))])),
    ])
}

/// The current form of a retired `error` reason (`{kind, step, failure}` or
/// `{kind, step, message, code?}`), or `None` when it is malformed.
fn legacy_error_reason(reason: &Object) -> Option<Value> {
    if !safe_int_at_least(reason.get("step"), 0) {
        return None;
    }
    if let Some(failure) = legacy_failure(reason) {
        return Some(Value::object([
            ("kind", Value::from("error")),
            ("error", Value::Object(failure.clone())),
        ]));
    }
    let code = reason.get("code");
    let keys: &[&str] = if code.is_none() {
        &["kind", "step", "message"]
    } else {
        &["kind", "step", "message", "code"]
    };
    let message = reason.get("message").filter(|m| m.as_str().is_some())?;
    if !has_only_keys(reason, keys, &[]) {
        return None;
    }
    let code = match code {
        None => Value::from("UNKNOWN"),
        Some(c) if c.as_str().is_some() => c.clone(),
        Some(_) => return None,
    };
    Some(Value::object([
        ("kind", Value::from("error")),
        (
            "error",
            Value::object([("message", message.clone()), ("code", code)]),
        ),
    ]))
}

/// The `failure` record of a retired `error` reason, when the reason has exactly the keys
/// `{kind, step, failure}` and the failure is `{message, code, status?,
/// providerRetryAfterMs?, requestId?}` with the right types.
fn legacy_failure(reason: &Object) -> Option<&Object> {
    let failure = reason.get("failure")?.as_object()?;
    let typed = |k: &str, ok: fn(&Value) -> bool| failure.get(k).is_none_or(ok);
    let is_string = |v: &Value| v.as_str().is_some();
    let is_number = |v: &Value| v.as_number().is_some();
    (has_only_keys(reason, &["kind", "step", "failure"], &[])
        && has_only_keys(
            failure,
            &["message", "code"],
            &["status", "providerRetryAfterMs", "requestId"],
        )
        && failure.get("message").is_some_and(is_string)
        && failure.get("code").is_some_and(is_string)
        && typed("status", is_number)
        && typed("providerRetryAfterMs", is_number)
        && typed("requestId", is_string))
    .then_some(failure)
}

/// The read-time upgrade of `ty`'s payload (`turn/start` and `turn/end`; every other type is
/// current).
pub fn upgrade_turn_payload(ty: &str, data: &Value) -> Upgrade {
    match ty {
        "turn/start" => upgrade_turn_start(data),
        "turn/end" => upgrade_turn_end(data),
        _ => Upgrade::Current,
    }
}

/// Whether `time` is a safe integer (the envelope rule for `time`).
pub fn is_safe_time(time: i64) -> bool {
    (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&time)
}

/// A new event that a reader would refuse or rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// `session "<id>" contains unsupported legacy <type> event at seq <seq>` (the reader's
    /// text for `request/header-delta` and `mode/set`).
    LegacyType {
        /// The session id.
        id: String,
        /// The retired type.
        legacy: LegacyType,
        /// The seq.
        seq: u64,
    },
    /// `session "<id>" contains malformed pre-react-loop <type> at seq <seq>` (the reader's
    /// text).
    MalformedLegacy {
        /// The session id.
        id: String,
        /// `turn/start`, `turn/end` or `steering/message`.
        event_type: &'static str,
        /// The seq.
        seq: u64,
    },
    /// `session "<id>" contains pre-react-loop <type> at seq <seq>, which readers rewrite;
    /// append the current shape`: a retired shape a reader would upgrade, so the stored event
    /// would not read back as the acknowledged one.
    RewrittenOnRead {
        /// The session id.
        id: String,
        /// `turn/start`, `turn/end` or `steering/message`.
        event_type: &'static str,
        /// The seq.
        seq: u64,
    },
    /// `session "<id>" contains event type "<type>" (seq <seq>) unknown to this harness and
    /// not marked ignorable; …` (the reader's text).
    UnknownType {
        /// The session id.
        id: String,
        /// The type, as JavaScript's `String(type)` would print it.
        event_type: String,
        /// The seq.
        seq: u64,
    },
    /// `session "<id>" event at seq <seq> has type "<type>", a reserved packed-row storage tag`.
    StorageTag {
        /// The session id.
        id: String,
        /// The tag.
        event_type: String,
        /// The seq.
        seq: u64,
    },
    /// `session "<id>" event at seq <seq> has time <time>, which is not a safe integer`.
    UnsafeTime {
        /// The session id.
        id: String,
        /// The seq.
        seq: u64,
        /// The clock's time.
        time: i64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::LegacyType { id, legacy, seq } => write!(
                f,
                "session \"{id}\" contains unsupported legacy {} event at seq {seq}",
                legacy.name()
            ),
            Violation::MalformedLegacy {
                id,
                event_type,
                seq,
            } => write!(
                f,
                "session \"{id}\" contains malformed pre-react-loop {event_type} at seq {seq}"
            ),
            Violation::RewrittenOnRead {
                id,
                event_type,
                seq,
            } => write!(
                f,
                "session \"{id}\" contains pre-react-loop {event_type} at seq {seq}, which \
                 readers rewrite; append the current shape"
            ),
            Violation::UnknownType {
                id,
                event_type,
                seq,
            } => write!(
                f,
                "session \"{id}\" contains event type \"{event_type}\" (seq {seq}) unknown to \
                 this harness and not marked ignorable; refusing to interpret the log \u{2014} it \
                 was likely written by a newer harness"
            ),
            Violation::StorageTag {
                id,
                event_type,
                seq,
            } => write!(
                f,
                "session \"{id}\" event at seq {seq} has type \"{event_type}\", a reserved \
                 packed-row storage tag"
            ),
            Violation::UnsafeTime { id, seq, time } => write!(
                f,
                "session \"{id}\" event at seq {seq} has time {time}, which is not a safe integer"
            ),
        }
    }
}

impl std::error::Error for Violation {}

/// The rules of this module for one new event of session `id` that would get `seq`, in the
/// order a reader applies them: retired types, the turn upgrades, then the unknown-type and
/// storage-tag checks. (`request/header-delta` and the `fallback` reason are refused earlier
/// by `append`, with the reference's append texts.)
pub fn check_new_event(
    id: &str,
    ty: &str,
    data: &Value,
    seq: u64,
    ignorable: bool,
) -> Result<(), Violation> {
    match legacy_type(ty) {
        Some(LegacyType::Steering) => {
            return Err(Violation::RewrittenOnRead {
                id: id.to_owned(),
                event_type: LegacyType::Steering.name(),
                seq,
            });
        }
        Some(legacy) => {
            return Err(Violation::LegacyType {
                id: id.to_owned(),
                legacy,
                seq,
            });
        }
        None => {}
    }
    let event_type = match ty {
        "turn/start" => "turn/start",
        "turn/end" => "turn/end",
        _ => "",
    };
    // A crash closer copies `turn/start`'s turn into a `turn/end`, which readers check: a turn
    // that is not a safe integer >= 1 would make the repaired log unreadable.
    if ty == "turn/start" && !safe_int_at_least(data.get("turn"), 1) {
        return Err(Violation::MalformedLegacy {
            id: id.to_owned(),
            event_type,
            seq,
        });
    }
    match upgrade_turn_payload(ty, data) {
        Upgrade::Current => {}
        Upgrade::Upgraded(_) => {
            return Err(Violation::RewrittenOnRead {
                id: id.to_owned(),
                event_type,
                seq,
            });
        }
        Upgrade::Malformed => {
            return Err(Violation::MalformedLegacy {
                id: id.to_owned(),
                event_type,
                seq,
            });
        }
    }
    if !is_supported_type(ty, ignorable) {
        return Err(Violation::UnknownType {
            id: id.to_owned(),
            event_type: ty.to_owned(),
            seq,
        });
    }
    if is_reserved_storage_tag(ty) {
        return Err(Violation::StorageTag {
            id: id.to_owned(),
            event_type: ty.to_owned(),
            seq,
        });
    }
    Ok(())
}
