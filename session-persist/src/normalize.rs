//! Read-side normalization of stored events (spec §1.6): refusal of retired shapes, in-memory
//! migration of the pre-identity and pre-react-loop shapes the reference still reads, and the
//! message-shape check. Storage is never rewritten by a read.

use std::collections::HashMap;
use std::sync::Arc;

use session_core::json::{self, Object, Value};
use session_core::rules::{Upgrade, has_only_keys, is_supported_type, upgrade_turn_payload};
use session_core::{Event, EventParts};

use crate::error::{Error, LegacyKind, Result};

const HEADER_DELTA: &str = "request/header-delta";
const MODE_SET: &str = "mode/set";
const STEERING: &str = "steering/message";

/// Refuses a batch containing a retired shape (checked on read and on every append): any
/// `request/header-delta`, then any `mode/set`, then any `request/header` with reason
/// `"fallback"`; the first event of the first kind found is named.
pub(crate) fn assert_no_retired_shapes(events: &[Event], id: &str) -> Result<()> {
    let refuse = |kind: LegacyKind, event: &Event| Error::LegacyEvent {
        id: id.to_owned(),
        kind,
        seq: event.seq(),
    };
    if let Some(e) = events.iter().find(|e| e.event_type() == HEADER_DELTA) {
        return Err(refuse(LegacyKind::HeaderDelta, e));
    }
    if let Some(e) = events.iter().find(|e| e.event_type() == MODE_SET) {
        return Err(refuse(LegacyKind::ModeSet, e));
    }
    if let Some(e) = events.iter().find(|e| {
        e.event_type() == "request/header"
            && e.data().get("reason").and_then(Value::as_str) == Some("fallback")
    }) {
        return Err(refuse(LegacyKind::FallbackReason, e));
    }
    Ok(())
}

/// Types whose `data` the read-time upgrade reads without checking that there is one
/// (`steering/message` has its own malformed-shape refusal).
const UPGRADE_READS_DATA: [&str; 6] = [
    "turn/start",
    "turn/end",
    "user/message",
    "assistant/message",
    "tool/result",
    REQUEST_HEADER,
];

const REQUEST_HEADER: &str = "request/header";

/// Refuses an event whose `data` the upgrade must read but which has none: a record kept as
/// stored without `data`, or a `request/header` whose `data` is `null` (the retired-reason
/// check reads its `reason`).
fn assert_upgrade_readable(events: &[Event], id: &str) -> Result<()> {
    let unreadable = |e: &&Event| {
        let ty = e.event_type();
        UPGRADE_READS_DATA.contains(&ty)
            && (e.stored_record().is_some_and(|r| r.get("data").is_none())
                || (ty == REQUEST_HEADER && e.data().is_null()))
    };
    match events.iter().find(unreadable) {
        None => Ok(()),
        Some(e) => Err(Error::UpgradeWithoutData {
            id: id.to_owned(),
            event_type: e.event_type().to_owned(),
            seq: e.seq(),
        }),
    }
}

/// Whether reading `event` from a suffix needs facts from the events before it (a legacy shape
/// whose migration mints or inherits a message id).
pub(crate) fn needs_legacy_prefix(event: &Event) -> bool {
    if event.event_type() == STEERING {
        return true;
    }
    if !is_message_type(event.event_type()) {
        return false;
    }
    let Some(data) = event.data().as_object() else {
        return false;
    };
    match event.event_type() {
        "user/message" => !data.contains_key("id") && data.contains_key("content"),
        "assistant/message" => !data.contains_key("message") && data.contains_key("content"),
        "tool/result" => !data.contains_key("message") && data.contains_key("callId"),
        _ => false,
    }
}

/// Steps 1–3 of the read-side normalization: retired shapes are refused, legacy shapes
/// migrated (turn/start, turn/end, steering, then pre-identity messages), and every message
/// event's message shape checked (`session event at seq <seq> …`).
pub(crate) fn normalize_events(events: Vec<Event>, id: &str) -> Result<Vec<Event>> {
    assert_no_retired_shapes(&events, id)?;
    assert_upgrade_readable(&events, id)?;
    let mut message_ids: HashMap<u64, Value> = HashMap::new();
    // Collected in place: the events replace themselves in the same vector.
    events
        .into_iter()
        .map(|event| normalize_one(event, id, &mut message_ids))
        .collect()
}

/// Step 3 of [`normalize_events`] for one event, in log order (`message_ids` carries the
/// message ids of the events before it).
fn normalize_one(event: Event, id: &str, message_ids: &mut HashMap<u64, Value>) -> Result<Event> {
    let event = migrate_turn(event, id)?;
    let event = migrate_steering(event, id)?;
    let event = migrate_message(event, id, message_ids);
    if is_message_type(event.event_type()) {
        let subject = format!("session event at seq {}", event.seq());
        session_surface::check_message_shape(event.event_type(), event.data(), &subject)
            .map_err(Error::Session)?;
        if let Some(message_id) = message_id(&event) {
            message_ids.insert(event.seq(), message_id);
        }
    }
    Ok(event)
}

/// Whether the read-side normalization of a log, as [`normalize_events`] followed by the
/// unknown-type check ([`first_unsupported`]) runs it, keeps `event` as it is and refuses
/// nothing because of it, given the events before it (their message ids in `message_ids`,
/// which this updates). When this holds for every event of a log, normalizing the log
/// returns it unchanged; an event for which it fails sends a reader to the whole-log path,
/// which names the error exactly.
pub(crate) fn is_kept_as_read(
    event: &Event,
    id: &str,
    message_ids: &mut HashMap<u64, Value>,
) -> bool {
    let ty = event.event_type();
    // A restored chunk delta: none of the checks or migrations reads it.
    if ty == "assistant/chunk" && event.stored_record().is_none() {
        return true;
    }
    if ty == HEADER_DELTA || ty == MODE_SET || !is_supported_type(ty, event.ignorable()) {
        return false;
    }
    let single = [event.clone()];
    if assert_no_retired_shapes(&single, id).is_err()
        || assert_upgrade_readable(&single, id).is_err()
    {
        return false;
    }
    let [event] = single;
    let copy = event.clone();
    normalize_one(event, id, message_ids).is_ok_and(|out| out.ptr_eq(&copy))
}

/// The first event whose type is unknown and not marked ignorable (step 4).
pub(crate) fn first_unsupported(events: &[Event]) -> Option<&Event> {
    events
        .iter()
        .find(|e| !is_supported_type(e.event_type(), e.ignorable()))
}

fn is_message_type(ty: &str) -> bool {
    matches!(ty, "user/message" | "assistant/message" | "tool/result")
}

/// The identified message's id of a message event (a string `id`).
fn message_id(event: &Event) -> Option<Value> {
    let data = event.data();
    let message = if event.event_type() == "user/message" {
        Some(data)
    } else {
        data.get("message")
    };
    message
        .and_then(Value::as_object)
        .and_then(|m| m.get("id"))
        .filter(|v| v.as_str().is_some())
        .cloned()
}

fn legacy_message_id(id: &str, seq: u64) -> Value {
    Value::String(Arc::from(format!("legacy-message:{id}:{seq}")))
}

/// The same event with another type and data, keeping the envelope and its key order (a
/// record kept as stored stays one, with its `type` and `data` replaced).
fn rebuild(event: &Event, ty: Option<&str>, data: Value) -> Event {
    if let Some(record) = event.stored_record().and_then(Value::as_object) {
        let mut record = record.with("data", data);
        if let Some(ty) = ty {
            record = record.with("type", Value::from(ty));
        }
        return Event::verbatim(Value::Object(record), event.seq());
    }
    Event::from_parts(
        EventParts {
            ty: ty.map_or_else(|| event.event_type_arc().clone(), Arc::from),
            seq: event.seq(),
            time: event.time(),
            data,
            surface_op: event.surface_op_value().cloned(),
            source_event_seqs: event.source_event_seqs_value().cloned(),
            ignorable: event.ignorable(),
        },
        event.key_order(),
    )
}

fn malformed(id: &str, event_type: &'static str, event: &Event) -> Error {
    Error::MalformedLegacy {
        id: id.to_owned(),
        event_type,
        seq: event.seq(),
    }
}

/// `turn/start` and `turn/end`: the read-time upgrade of `session_core::rules` (a retired
/// shape is migrated, a malformed one refused, a current one kept).
fn migrate_turn(event: Event, id: &str) -> Result<Event> {
    let event_type = match event.event_type() {
        "turn/start" => "turn/start",
        "turn/end" => "turn/end",
        _ => return Ok(event),
    };
    match upgrade_turn_payload(event_type, event.data()) {
        Upgrade::Current => Ok(event),
        Upgrade::Upgraded(data) => Ok(rebuild(&event, None, data)),
        Upgrade::Malformed => Err(malformed(id, event_type, &event)),
    }
}

/// `steering/message` becomes `user/message`: `{turn, message}` unwraps the message;
/// `{turn, content, source}` becomes an identified user message.
fn migrate_steering(event: Event, id: &str) -> Result<Event> {
    if event.event_type() != STEERING {
        return Ok(event);
    }
    let Some(data) = event.data().as_object() else {
        return Err(malformed(id, STEERING, &event));
    };
    let turn_ok = data.get("turn").and_then(Value::as_i64).is_some();
    if let Some(wrapped) = data.get("message").filter(|m| {
        m.as_object().is_some() && turn_ok && has_only_keys(data, &["turn", "message"], &[])
    }) {
        return Ok(rebuild(&event, Some("user/message"), wrapped.clone()));
    }
    if !turn_ok || !has_only_keys(data, &["turn", "content", "source"], &[]) {
        return Err(malformed(id, STEERING, &event));
    }
    let message = data
        .without("turn")
        .with("id", legacy_message_id(id, event.seq()))
        .with("role", Value::from("user"));
    Ok(rebuild(
        &event,
        Some("user/message"),
        Value::Object(message),
    ))
}

/// Pre-identity message events gain the current identified-message shape.
fn migrate_message(event: Event, id: &str, message_ids: &HashMap<u64, Value>) -> Event {
    // Only message events are read (other payloads, such as stored chunks, stay untouched).
    if !is_message_type(event.event_type()) {
        return event;
    }
    let Some(data) = event.data().as_object() else {
        return event;
    };
    match event.event_type() {
        "user/message" => {
            if data.contains_key("id")
                || data.contains_key("role")
                || data.contains_key("message")
                || !data.contains_key("content")
                || !data.contains_key("source")
            {
                return event;
            }
            let data = data
                .with("id", legacy_message_id(id, event.seq()))
                .with("role", Value::from("user"));
            rebuild(&event, None, Value::Object(data))
        }
        "assistant/message" => {
            if data.contains_key("message")
                || !data.contains_key("content")
                || !data.contains_key("provenance")
            {
                return event;
            }
            let content = data.get("content").cloned().unwrap_or_default();
            let source = data
                .get("provenance")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
                .with("kind", Value::from("model"));
            let message = Value::object([
                ("id", legacy_message_id(id, event.seq())),
                ("role", Value::from("assistant")),
                ("content", content),
                ("source", Value::Object(source)),
            ]);
            let data = data
                .without("content")
                .without("provenance")
                .with("message", message);
            rebuild(&event, None, Value::Object(data))
        }
        "tool/result" => {
            if data.contains_key("message")
                || !data.contains_key("callId")
                || !data.contains_key("content")
                || !data.contains_key("isError")
            {
                return event;
            }
            let call_id = data.get("callId").cloned().unwrap_or_default();
            let content = data.get("content").cloned().unwrap_or_default();
            let is_error = data.get("isError").cloned().unwrap_or_default();
            let message_id = match replacement_start(&event) {
                None => Some(legacy_message_id(id, event.seq())),
                Some(start) => start.and_then(|s| message_ids.get(&s).cloned()),
            };
            let mut message: Vec<(Arc<str>, Value)> = Vec::with_capacity(4);
            if let Some(mid) = message_id {
                message.push((json::key("id"), mid));
            }
            message.push((json::key("role"), Value::from("user")));
            message.push((
                json::key("content"),
                Value::array([Value::object([
                    ("type", Value::from("tool-result")),
                    ("toolCallId", call_id.clone()),
                    ("content", content),
                    ("isError", is_error),
                ])]),
            ));
            message.push((
                json::key("source"),
                Value::object([("kind", Value::from("tool")), ("callId", call_id)]),
            ));
            let data = data
                .without("callId")
                .without("content")
                .without("isError")
                .with("message", Value::Object(Object::from_entries(message)));
            rebuild(&event, None, Value::Object(data))
        }
        _ => event,
    }
}

/// `None`: not a replacement. `Some(start)`: a replacement whose numeric `start` is `start`
/// (`Some(None)` when the number is not a seq, so nothing can be inherited).
#[allow(clippy::option_option)]
fn replacement_start(event: &Event) -> Option<Option<u64>> {
    let op = event.surface_op_value()?.as_object()?;
    if op.get("op").and_then(Value::as_str) != Some("replace") {
        return None;
    }
    let start = op.get("start")?.as_number()?;
    Some(start.as_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(line: &str) -> Event {
        Event::parse(line).unwrap()
    }

    fn norm(lines: &[&str]) -> Result<Vec<String>> {
        normalize_events(lines.iter().map(|l| ev(l)).collect(), "s")
            .map(|events| events.iter().map(Event::to_json).collect())
    }

    fn err(lines: &[&str]) -> String {
        norm(lines).unwrap_err().to_string()
    }

    #[test]
    fn retired_shapes_are_refused_by_kind_then_seq() {
        let delta = r#"{"type":"request/header-delta","seq":1,"time":0,"data":{}}"#;
        let mode = r#"{"type":"mode/set","seq":0,"time":0,"data":{}}"#;
        let fallback = r#"{"type":"request/header","seq":2,"time":0,"data":{"reason":"fallback"}}"#;
        assert_eq!(
            err(&[mode, delta, fallback]),
            r#"session "s" contains unsupported legacy request/header-delta event at seq 1"#
        );
        assert_eq!(
            err(&[mode]),
            r#"session "s" contains unsupported legacy mode/set event at seq 0"#
        );
        assert_eq!(
            err(&[fallback]),
            r#"session "s" contains unsupported legacy request/header reason "fallback" at seq 2"#
        );
    }

    #[test]
    fn pre_react_loop_turns() {
        let out = norm(&[
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1,"trigger":{"kind":"user"}}}"#,
            r#"{"type":"turn/end","seq":1,"time":5,"data":{"turn":1,"reason":{"kind":"error","step":0,"message":"boom"}}}"#,
            r#"{"type":"turn/end","seq":2,"time":5,"data":{"turn":1,"reason":{"kind":"error","step":2,"message":"boom","code":"E"}}}"#,
            r#"{"type":"turn/end","seq":3,"time":5,"data":{"turn":1,"reason":{"kind":"aborted"}}}"#,
            r#"{"type":"turn/end","seq":4,"time":5,"data":{"turn":1,"reason":{"kind":"disposed"}}}"#,
            r#"{"type":"turn/end","seq":5,"time":5,"data":{"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"m","code":"C","status":500}}}}"#,
            r#"{"type":"turn/end","seq":6,"time":5,"data":{"turn":1,"reason":{"kind":"future-kind","x":1}}}"#,
            r#"{"type":"turn/end","seq":7,"time":5,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}"#,
        ])
        .unwrap();
        assert_eq!(
            out,
            [
                r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
                r#"{"type":"turn/end","seq":1,"time":5,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}}"#,
                r#"{"type":"turn/end","seq":2,"time":5,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"E"}}}}"#,
                r#"{"type":"turn/end","seq":3,"time":5,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}}"#,
                r#"{"type":"turn/end","seq":4,"time":5,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}}"#,
                r#"{"type":"turn/end","seq":5,"time":5,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"m","code":"C","status":500}}}}"#,
                r#"{"type":"turn/end","seq":6,"time":5,"data":{"turn":1,"reason":{"kind":"future-kind","x":1}}}"#,
                r#"{"type":"turn/end","seq":7,"time":5,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}"#,
            ]
        );
    }

    #[test]
    fn malformed_pre_react_loop_shapes() {
        for (line, ty) in [
            (
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":null}}"#,
                "turn/start",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":0,"trigger":{"kind":"u"}}}"#,
                "turn/start",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":""}}}"#,
                "turn/start",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"step":0,"reason":{"kind":"completed"}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed","step":1}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":0,"reason":{"kind":"completed"}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","message":"m"}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"message":"m","code":5}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"disposed","x":1}}}"#,
                "turn/end",
            ),
            (
                r#"{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":{"turn":1,"content":[],"source":{"kind":"user"},"extra":true}}"#,
                "steering/message",
            ),
            (
                r#"{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":null}"#,
                "steering/message",
            ),
        ] {
            assert_eq!(
                err(&[line]),
                format!("session \"s\" contains malformed pre-react-loop {ty} at seq 0"),
                "{line}"
            );
        }
    }

    #[test]
    fn steering_and_pre_identity_messages() {
        let out = norm(&[
            r#"{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}}"#,
            r#"{"type":"steering/message","seq":1,"time":1,"data":{"turn":1,"message":{"id":"m1","role":"user","content":[],"source":{"kind":"user"}}}}"#,
            r#"{"type":"user/message","seq":2,"time":1,"surfaceOp":"append","data":{"content":[],"source":{"kind":"user"}}}"#,
            r#"{"type":"assistant/message","seq":3,"time":1,"surfaceOp":"append","data":{"turn":1,"content":[],"provenance":{"provider":"p","model":"m"}}}"#,
            r#"{"type":"tool/result","seq":4,"time":1,"surfaceOp":"append","data":{"turn":1,"callId":"c1","content":[],"isError":false}}"#,
            r#"{"type":"tool/result","seq":5,"time":1,"surfaceOp":{"op":"replace","start":4,"end":4},"data":{"callId":"c1","content":[],"isError":true}}"#,
        ])
        .unwrap();
        assert_eq!(
            out,
            [
                r#"{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:s:0","role":"user"}}"#,
                r#"{"type":"user/message","seq":1,"time":1,"data":{"id":"m1","role":"user","content":[],"source":{"kind":"user"}}}"#,
                r#"{"type":"user/message","seq":2,"time":1,"surfaceOp":"append","data":{"content":[],"source":{"kind":"user"},"id":"legacy-message:s:2","role":"user"}}"#,
                r#"{"type":"assistant/message","seq":3,"time":1,"surfaceOp":"append","data":{"turn":1,"message":{"id":"legacy-message:s:3","role":"assistant","content":[],"source":{"provider":"p","model":"m","kind":"model"}}}}"#,
                r#"{"type":"tool/result","seq":4,"time":1,"surfaceOp":"append","data":{"turn":1,"message":{"id":"legacy-message:s:4","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}}"#,
                r#"{"type":"tool/result","seq":5,"time":1,"surfaceOp":{"op":"replace","start":4,"end":4},"data":{"message":{"id":"legacy-message:s:4","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":true}],"source":{"kind":"tool","callId":"c1"}}}}"#,
            ]
        );
    }

    #[test]
    fn messages_are_validated() {
        assert_eq!(
            err(&[
                r#"{"type":"user/message","seq":0,"time":1,"data":{"id":"m","role":"assistant","content":[],"source":{"kind":"user"}}}"#
            ]),
            r#"session event at seq 0 message must have role "user""#
        );
        assert_eq!(
            err(&[r#"{"type":"tool/result","seq":0,"time":1,"data":{"message":null}}"#]),
            "session event at seq 0 lacks an identified message"
        );
        // A replacement whose target carries no message id cannot inherit one.
        assert_eq!(
            err(&[
                r#"{"type":"tool/result","seq":0,"time":1,"surfaceOp":{"op":"replace","start":7,"end":7},"data":{"callId":"c","content":[],"isError":false}}"#
            ]),
            "session event at seq 0 lacks an identified message"
        );
        assert!(
            norm(&[r#"{"type":"plugin/x","seq":0,"time":1,"data":null,"ignorable":true}"#]).is_ok()
        );
    }

    #[test]
    fn prefix_needs_and_unknown_types() {
        assert!(needs_legacy_prefix(&ev(
            r#"{"type":"steering/message","seq":0,"time":1,"data":null}"#
        )));
        assert!(needs_legacy_prefix(&ev(
            r#"{"type":"user/message","seq":0,"time":1,"data":{"content":[]}}"#
        )));
        assert!(!needs_legacy_prefix(&ev(
            r#"{"type":"user/message","seq":0,"time":1,"data":{"id":"x","content":[]}}"#
        )));
        assert!(needs_legacy_prefix(&ev(
            r#"{"type":"tool/result","seq":0,"time":1,"data":{"callId":"c"}}"#
        )));
        let events = vec![
            ev(r#"{"type":"plugin/x","seq":0,"time":1,"data":null,"ignorable":true}"#),
            ev(r#"{"type":"future/event","seq":1,"time":1,"data":null}"#),
        ];
        assert_eq!(first_unsupported(&events).map(Event::seq), Some(1));
    }
}
