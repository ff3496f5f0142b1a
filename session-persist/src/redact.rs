//! Redaction of events before they are persisted (off by default).
//!
//! A [`Redactor`] set in [`crate::PersistenceOptions::redact`] sees every event right before the
//! coordinator hands a batch to [`crate::Backend::append_batch`], and returns the copy that is
//! written instead. The in-memory session keeps the original event; only the stored copy is
//! redacted, so a session reloaded from storage shows the redacted payloads.
//!
//! A redactor may rewrite `data` only. The envelope (type, seq, time, `surfaceOp`,
//! `sourceEventSeqs` and the ignorable flag) is what the surface, repair and every reader rely
//! on, so [`apply`] checks it and refuses the whole batch with
//! [`crate::Error::RedactionChangedEnvelope`] when a redactor changed it: nothing is written,
//! and the flush that carried the batch fails.
//!
//! Re-attaching a live session to its stored log accepts a stored event that equals the
//! redacted copy of the live one, so redaction does not break that check. The hook must be
//! deterministic and cheap: it runs on the write path of every batch.
//!
//! ```
//! use std::sync::Arc;
//! use session_core::{Event, json::Value};
//! use session_persist::redact::{Redactor, apply, with_data};
//!
//! let hide: Redactor = Arc::new(|e: &Event| {
//!     if e.event_type() == "user/message" {
//!         with_data(e, Value::parse(r#"{"text":"[redacted]"}"#).expect("valid JSON"))
//!     } else {
//!         e.clone()
//!     }
//! });
//! let secret = Event::appended("user/message", 0, 1, Value::parse(r#"{"text":"pw"}"#)?, None, None);
//! let stored = apply(&hide, "demo", vec![secret])?;
//! assert_eq!(stored[0].data().to_json(), r#"{"text":"[redacted]"}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use session_core::event::{EventParts, KeyOrder};
use session_core::{Event, json::Value};

use crate::{Error, Result};

/// A redaction hook: maps an admitted event to the copy that is persisted.
pub type Redactor = Arc<dyn Fn(&Event) -> Event + Send + Sync>;

/// A copy of `event` with `data` replaced and the envelope kept (serialized in the key order
/// of appended events).
pub fn with_data(event: &Event, data: Value) -> Event {
    Event::from_parts(
        EventParts {
            ty: Arc::from(event.event_type()),
            seq: event.seq(),
            time: event.time(),
            data,
            surface_op: event.surface_op_value().cloned(),
            source_event_seqs: event.source_event_seqs_value().cloned(),
            ignorable: event.ignorable(),
        },
        KeyOrder::APPEND,
    )
}

/// Runs `redactor` over a batch of session `id`, refusing any result whose envelope differs
/// from the original's.
///
/// # Errors
///
/// [`Error::RedactionChangedEnvelope`] naming the first changed field.
pub fn apply(redactor: &Redactor, id: &str, events: Vec<Event>) -> Result<Vec<Event>> {
    events
        .into_iter()
        .map(|original| {
            let redacted = redactor(&original);
            let field = if redacted.event_type() != original.event_type() {
                Some("type")
            } else if redacted.seq() != original.seq() {
                Some("seq")
            } else if redacted.time() != original.time() {
                Some("time")
            } else if redacted.surface_op_value() != original.surface_op_value() {
                Some("surfaceOp")
            } else if redacted.source_event_seqs_value() != original.source_event_seqs_value() {
                Some("sourceEventSeqs")
            } else if redacted.ignorable() != original.ignorable() {
                Some("ignorable")
            } else {
                None
            };
            match field {
                Some(field) => Err(Error::RedactionChangedEnvelope {
                    id: id.to_owned(),
                    seq: original.seq(),
                    field,
                }),
                None => Ok(redacted),
            }
        })
        .collect()
}
