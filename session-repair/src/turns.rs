//! The turns of a log: where each `turn/start` is closed by its `turn/end`, if it is.

use std::borrow::Borrow;

use session_core::Event;
use session_core::json::Value;

/// One turn of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSpan {
    /// `data.turn` of its `turn/start`, as stored.
    pub turn: Value,
    /// Seq of its `turn/start`.
    pub start: u64,
    /// Seq of the `turn/end` that closed it (`None`: the turn is open).
    pub end: Option<u64>,
    /// `data.reason.kind` of that `turn/end`, when it is a string.
    pub reason: Option<String>,
}

/// Every turn of `events`, in order. A `turn/end` closes the last turn when it is open and is
/// ignored otherwise; a `turn/start` while a turn is open starts a new one (the open one stays
/// open).
/// Events are taken by reference or by value, so a caller streams them from any source
/// without collecting them first.
pub fn turn_spans(events: impl IntoIterator<Item = impl Borrow<Event>>) -> Vec<TurnSpan> {
    let mut out: Vec<TurnSpan> = Vec::new();
    for e in events {
        let e = e.borrow();
        match e.event_type() {
            "turn/start" => out.push(TurnSpan {
                turn: e.data().get("turn").cloned().unwrap_or_default(),
                start: e.seq(),
                end: None,
                reason: None,
            }),
            "turn/end" => {
                if let Some(open) = out.last_mut().filter(|t| t.end.is_none()) {
                    open.end = Some(e.seq());
                    open.reason = e
                        .data()
                        .get("reason")
                        .and_then(|r| r.get("kind"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(ty: &str, seq: u64, data: &str) -> Event {
        Event::appended(ty, seq, 0, Value::parse(data).unwrap(), None, None)
    }

    #[test]
    fn closed_and_open_turns_and_a_stray_end() {
        let events = [
            event("turn/end", 0, r#"{"turn":0,"reason":{"kind":"completed"}}"#),
            event("turn/start", 1, r#"{"turn":1}"#),
            event(
                "turn/end",
                2,
                r#"{"turn":1,"reason":{"kind":"interrupted"}}"#,
            ),
            event("turn/start", 3, r#"{"turn":2}"#),
        ];
        let spans = turn_spans(&events);
        assert_eq!(spans.len(), 2, "the end before any start closes nothing");
        assert_eq!(
            (spans[0].start, spans[0].end, spans[0].reason.as_deref()),
            (1, Some(2), Some("interrupted"))
        );
        assert_eq!(spans[0].turn, Value::parse("1").unwrap());
        assert_eq!((spans[1].start, spans[1].end), (3, None));
    }
}
