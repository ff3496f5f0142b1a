//! Synthetic crash closers for an interrupted turn (`interruptedTurnClosers`).

use std::collections::HashMap;
use std::sync::Arc;

use session_core::event::seq_value;
use session_core::json::{self, Value};
use session_core::{Event, EventParts, KeyOrder};

/// `error.code` of a synthetic result for a call that was never recorded as started.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";

/// `error.code` of a synthetic result for a call that was recorded but never answered.
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";

/// `error.name` paired with [`TOOL_NOT_STARTED`].
pub const TOOL_NOT_STARTED_ERROR: &str = "ToolNotStartedError";

/// `error.name` paired with [`TOOL_OUTCOME_UNKNOWN`].
pub const TOOL_OUTCOME_UNKNOWN_ERROR: &str = "ToolOutcomeUnknownError";

/// The text of a synthetic result for a call the harness never recorded as started.
pub const TOOL_NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// The text of a synthetic result for a recorded call whose outcome is unknown.
pub const TOOL_OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// The prefix of a synthetic result's message id:
/// `interrupted-tool-result-<callId>-<seq>`.
pub const INTERRUPTED_RESULT_ID_PREFIX: &str = "interrupted-tool-result-";

/// One tool call announced by an assistant message of the open turn and not yet answered.
struct PendingCall {
    /// `data.step` of the assistant message that announced it (absent stays absent).
    step: Option<Value>,
    /// Seq of the last `tool/call` recorded for it.
    call_seq: Option<u64>,
}

/// An insertion-ordered map from call id to pending call. Removal leaves a tombstone so that
/// every operation is O(1); a re-registered id keeps its first position.
#[derive(Default)]
struct Pending {
    slots: Vec<(Arc<str>, Option<PendingCall>)>,
    index: HashMap<Arc<str>, usize>,
}

impl Pending {
    fn clear(&mut self) {
        self.slots.clear();
        self.index.clear();
    }

    fn register(&mut self, id: &Arc<str>, step: Option<Value>) {
        let call = PendingCall {
            step,
            call_seq: None,
        };
        if let Some(&i) = self.index.get(id) {
            self.slots[i].1 = Some(call);
        } else {
            self.index.insert(id.clone(), self.slots.len());
            self.slots.push((id.clone(), Some(call)));
        }
    }

    fn record_call(&mut self, id: &str, seq: u64) {
        if let Some(&i) = self.index.get(id)
            && let Some(call) = &mut self.slots[i].1
        {
            call.call_seq = Some(seq);
        }
    }

    fn answer(&mut self, id: &str) {
        if let Some(i) = self.index.remove(id) {
            self.slots[i].1 = None;
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &PendingCall)> {
        self.slots
            .iter()
            .filter_map(|(id, call)| call.as_ref().map(|c| (id, c)))
    }
}

/// Reads a field of `data` that names a turn or a step: present and not `null`.
fn marker(data: &Value, key: &str) -> Option<Value> {
    match data.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => Some(copy_out(v)),
    }
}

/// A value copied into a closer, in the form a JavaScript writer would print it (numbers
/// respelled). Values a JavaScript reader could not represent are copied unchanged.
fn copy_out(v: &Value) -> Value {
    json::snapshot_for_append(v).unwrap_or_else(|| v.clone())
}

/// The call id named by a string field, when it is a non-empty string.
fn call_id(v: Option<&Value>) -> Option<&Arc<str>> {
    v.and_then(Value::as_arc_str).filter(|s| !s.is_empty())
}

/// The scan state of [`interrupted_turn_closers`].
#[derive(Default)]
struct Scan {
    open_turn: Option<Value>,
    open_step: Option<Value>,
    pending: Pending,
}

impl Scan {
    fn visit(&mut self, event: &Event) {
        let ty = event.event_type();
        if !matches!(
            ty,
            "turn/start"
                | "turn/end"
                | "step/start"
                | "step/end"
                | "assistant/message"
                | "tool/call"
                | "tool/result"
        ) {
            // Nothing to read (and no payload to touch) for other events.
            return;
        }
        let data = event.data();
        match ty {
            "turn/start" => {
                self.open_turn = marker(data, "turn");
                self.open_step = None;
                self.pending.clear();
            }
            "turn/end" => {
                self.open_turn = None;
                self.open_step = None;
                self.pending.clear();
            }
            "step/start" => self.open_step = marker(data, "step"),
            "step/end" => {
                self.pending.clear();
                self.open_step = None;
            }
            "assistant/message" => {
                let Some(blocks) = data
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                else {
                    return;
                };
                for block in blocks.iter() {
                    if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                        continue;
                    }
                    if let Some(id) = call_id(block.get("id")) {
                        self.pending.register(id, data.get("step").map(copy_out));
                    }
                }
            }
            "tool/call" => {
                if let Some(id) = call_id(data.get("callId")) {
                    self.pending.record_call(id, event.seq());
                }
            }
            "tool/result" => {
                let id = data
                    .get("message")
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("callId"));
                if let Some(id) = call_id(id) {
                    self.pending.answer(id);
                }
            }
            _ => {}
        }
    }
}

fn closer(ty: &str, seq: u64, time: i64, data: Value) -> Event {
    Event::from_parts(
        EventParts {
            ty: json::key(ty),
            seq,
            time,
            data,
            surface_op: None,
            source_event_seqs: None,
            ignorable: false,
        },
        KeyOrder::CLOSER,
    )
}

fn synthetic_result(turn: &Value, id: &Arc<str>, call: &PendingCall, seq: u64, time: i64) -> Event {
    let started = call.call_seq.is_some();
    let (text, name, code) = if started {
        (
            TOOL_OUTCOME_UNKNOWN_TEXT,
            TOOL_OUTCOME_UNKNOWN_ERROR,
            TOOL_OUTCOME_UNKNOWN,
        )
    } else {
        (
            TOOL_NOT_STARTED_TEXT,
            TOOL_NOT_STARTED_ERROR,
            TOOL_NOT_STARTED,
        )
    };
    let block = Value::object([
        ("type", Value::from("tool-result")),
        ("toolCallId", Value::String(id.clone())),
        ("isError", Value::Bool(true)),
        (
            "content",
            Value::array([Value::object([
                ("type", Value::from("text")),
                ("text", Value::from(text)),
            ])]),
        ),
    ]);
    let message = Value::object([
        (
            "id",
            Value::from(format!("{INTERRUPTED_RESULT_ID_PREFIX}{id}-{seq}")),
        ),
        ("role", Value::from("user")),
        (
            "source",
            Value::object([
                ("kind", Value::from("tool")),
                ("callId", Value::String(id.clone())),
            ]),
        ),
        ("content", Value::array([block])),
    ]);
    let mut data: Vec<(&str, Value)> = Vec::with_capacity(4);
    data.push(("turn", turn.clone()));
    if let Some(step) = &call.step {
        data.push(("step", step.clone()));
    }
    data.push(("message", message));
    data.push((
        "error",
        Value::object([("name", Value::from(name)), ("code", Value::from(code))]),
    ));
    Event::from_parts(
        EventParts {
            ty: json::key("tool/result"),
            seq,
            time,
            data: Value::object(data),
            surface_op: Some(Value::from("append")),
            source_event_seqs: call.call_seq.map(|s| Value::array([seq_value(s)])),
            ignorable: false,
        },
        KeyOrder::CLOSER,
    )
}

/// The synthetic events that close the turn a crashed log left open (`interruptedTurnClosers`).
///
/// A pure function: it scans `events` in order and returns the events to append, contiguous
/// with the log (`seq` from the last event's seq + 1, every `time` equal to the last event's
/// time), in this order: one `tool/result` per tool call of the open step that has no result
/// (in the order the calls were announced), `step/end` when a step is open, and always
/// `turn/end` with reason `{kind: "interrupted"}`. A log without an open turn (including an
/// empty log) gives no closers, so applying the closers and running the scan again gives none:
/// repair is idempotent.
///
/// A call is *started* when a `tool/call` was recorded for it; its result then cites that
/// event in `sourceEventSeqs` and carries [`TOOL_OUTCOME_UNKNOWN`]. Otherwise the result
/// carries [`TOOL_NOT_STARTED`].
///
/// Only the events from the last `turn/start` or `turn/end` on can change the result (both
/// reset the scan), so the events are walked from the back to that boundary: the cost is the
/// length of the last turn, not of the log.
///
/// The input is not validated, and malformed payloads never cause a panic. What cannot be
/// read is skipped:
/// - a `turn/start` whose `data.turn` is absent or `null` (or whose `data` is not an object)
///   still resets the scan, but leaves no turn open, because its closers could not name it;
///   a `step/start` without a readable `data.step` likewise leaves no step open;
/// - a `tool-call` block, `tool/call` or `tool/result` whose call id is not a non-empty string
///   is ignored (a synthetic result for it could not pass the tool-result shape check);
/// - a non-object `data`, `message` or block, or a non-array `content`, is treated as
///   carrying nothing.
///
/// Turn and step values are copied in JavaScript spelling (`1.0` is written `1`); a pending
/// call's `step` is omitted from its result when the announcing message had none.
pub fn interrupted_turn_closers<'a, I>(events: I) -> Vec<Event>
where
    I: IntoIterator<Item = &'a Event>,
    I::IntoIter: DoubleEndedIterator,
{
    // `turn/start` and `turn/end` reset the whole scan state, so the result depends only on
    // the events from the last such boundary on: walk back to it, then scan forward. The cost
    // is the length of the last turn, not of the log.
    let mut tail: Vec<&Event> = Vec::new();
    for event in events.into_iter().rev() {
        tail.push(event);
        if matches!(event.event_type(), "turn/start" | "turn/end") {
            break;
        }
    }
    let last = tail.first().copied();
    let mut scan = Scan::default();
    for event in tail.iter().rev() {
        scan.visit(event);
    }
    let (Some(turn), Some(last)) = (scan.open_turn, last) else {
        return Vec::new();
    };
    let time = last.time();
    let mut seq = last.seq().saturating_add(1);
    let mut out = Vec::new();
    for (id, call) in scan.pending.iter() {
        out.push(synthetic_result(&turn, id, call, seq, time));
        seq = seq.saturating_add(1);
    }
    if let Some(step) = scan.open_step {
        out.push(closer(
            "step/end",
            seq,
            time,
            Value::object([("turn", turn.clone()), ("step", step)]),
        ));
        seq = seq.saturating_add(1);
    }
    out.push(closer(
        "turn/end",
        seq,
        time,
        Value::object([
            ("turn", turn),
            (
                "reason",
                Value::object([("kind", Value::from("interrupted"))]),
            ),
        ]),
    ));
    out
}
