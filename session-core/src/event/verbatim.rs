//! Stored records kept exactly as stored: what a read without session validation
//! (`readFrom`) returns for a record whose envelope breaks the envelope rules.

use std::sync::Arc;

use super::{Event, Repr};
use crate::json::Value;

/// A stored record with an invalid envelope, and the facts the log rules established for it.
pub(super) struct Verbatim {
    /// The record as stored.
    pub(super) value: Value,
    /// Its `type` when that is a string, else the empty string.
    pub(super) ty: Arc<str>,
    /// The seq the log gives it (its stored `seq` equals it numerically).
    pub(super) seq: u64,
    /// Its `time` when that is a safe integer, else 0.
    pub(super) time: i64,
    /// Whether it stores exactly `"ignorable": true`.
    pub(super) ignorable: bool,
}

/// `null`, for the `data` of a record that has none.
static NO_DATA: Value = Value::Null;

impl Verbatim {
    pub(super) fn data(&self) -> &Value {
        self.value.get("data").unwrap_or(&NO_DATA)
    }
}

impl Event {
    /// A stored record kept exactly as stored, at position `seq` of its log, although its
    /// envelope breaks the envelope rules (a fractional or missing `time`, a missing `data` or
    /// `type`, an extra key, `ignorable: false`): what a read without session validation
    /// returns (`read_from`). Such an event is never appendable
    /// ([`Event::snapshot_for_append`] is `None`), serializes as the stored record, and its
    /// accessors give what the record holds where it is well typed: [`Event::event_type`] is
    /// empty for a non-string `type`, [`Event::time`] is 0 for an invalid `time`,
    /// [`Event::data`] is `null` when absent. [`Event::stored_record`] gives the record.
    pub fn verbatim(value: Value, seq: u64) -> Event {
        let ty = value
            .get("type")
            .and_then(Value::as_arc_str)
            .cloned()
            .unwrap_or_else(|| Arc::from(""));
        let time = value.get("time").and_then(Value::as_i64).unwrap_or(0);
        let ignorable = value.get("ignorable").and_then(Value::as_bool) == Some(true);
        Event(Repr::Verbatim(Arc::new(Verbatim {
            value,
            ty,
            seq,
            time,
            ignorable,
        })))
    }

    /// Whether this event is a stored record kept as stored ([`Event::verbatim`]).
    pub fn is_verbatim(&self) -> bool {
        matches!(self.0, Repr::Verbatim(_))
    }

    /// The stored record of an event kept as stored ([`Event::verbatim`]); `None` for every
    /// event with a valid envelope.
    pub fn stored_record(&self) -> Option<&Value> {
        match &self.0 {
            Repr::Verbatim(v) => Some(&v.value),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Event;
    use crate::json::Value;

    #[test]
    fn a_verbatim_event_serializes_as_stored_and_is_never_appendable() {
        let text = r#"{"type":"assistant/chunk","seq":3,"time":0.5,"note":1}"#;
        let e = Event::verbatim(Value::parse(text).unwrap(), 3);
        assert!(e.is_verbatim());
        assert_eq!(e.to_json(), text);
        assert_eq!(e.to_value().to_json(), text);
        assert_eq!(e.event_type(), "assistant/chunk");
        assert_eq!((e.seq(), e.time()), (3, 0));
        assert_eq!(e.data(), &Value::Null);
        assert!(!e.ignorable());
        assert!(e.snapshot_for_append().is_none());
        assert_eq!(e, Event::verbatim(Value::parse(text).unwrap(), 3));
        let valid = Event::parse(r#"{"type":"assistant/chunk","seq":3,"time":0,"data":{}}"#);
        assert_ne!(e, valid.unwrap());
        let untyped = Event::verbatim(Value::parse(r#"{"seq":0,"ignorable":true}"#).unwrap(), 0);
        assert_eq!(untyped.event_type(), "");
        assert!(untyped.ignorable());
        assert!(
            Event::parse("{}")
                .unwrap_err()
                .to_string()
                .contains("envelope")
        );
    }
}
