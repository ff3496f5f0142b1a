//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::Arc;

use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_surface::{Draft, Session};

/// Parses JSON text (panics on bad test input).
pub fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

/// A fixed clock at 1000 ms.
pub fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1000))
}

/// A fresh session without seed.
pub fn session() -> Session {
    Session::create("s", None, None, clock()).unwrap()
}

/// A well-formed user message.
pub fn user(id: &str, text: &str) -> Value {
    Value::object([
        ("id", Value::from(id)),
        ("role", Value::from("user")),
        (
            "content",
            Value::array([Value::object([
                ("type", Value::from("text")),
                ("text", Value::from(text)),
            ])]),
        ),
        ("source", v(r#"{"kind":"user"}"#)),
    ])
}

/// `assistant/message` data with the given content blocks (JSON array text).
pub fn assistant(id: &str, content: &str) -> Value {
    v(&format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"assistant","content":{content},"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
    ))
}

/// `assistant/message` data with one text block.
pub fn assistant_text(id: &str, text: &str) -> Value {
    assistant(id, &format!(r#"[{{"type":"text","text":"{text}"}}]"#))
}

/// `tool/result` data for `call_id` with one text result.
pub fn tool_result(id: &str, call_id: &str, text: &str) -> Value {
    v(&format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"user","content":[{{"type":"tool-result","toolCallId":"{call_id}","content":[{{"type":"text","text":"{text}"}}]}}],"source":{{"kind":"tool","callId":"{call_id}"}}}}}}"#
    ))
}

/// A log-only draft.
pub fn log_only(ty: &str, data: &str) -> Draft {
    Draft::new(ty, v(data))
}

/// Appends and unwraps.
pub fn push(session: &mut Session, draft: Draft) -> session_core::Event {
    session.append(draft).unwrap()
}

/// The event list as JSON values (for re-seeding).
pub fn values(session: &Session) -> Vec<Value> {
    session
        .events()
        .iter()
        .map(session_core::Event::to_value)
        .collect()
}

/// The error message of a failed result.
pub fn err<T: std::fmt::Debug>(r: Result<T, session_surface::Error>) -> String {
    r.unwrap_err().to_string()
}

/// A seeded session (snapshot mode) from event JSON texts.
pub fn seeded(events: &[&str]) -> Result<Session, session_surface::Error> {
    Session::create(
        "s",
        Some(events.iter().map(|e| v(e)).collect()),
        None,
        clock(),
    )
}
