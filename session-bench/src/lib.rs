//! `session-bench` owns the benchmark fixtures of the session layer: builders of realistic
//! sessions of a given size, shared by the criterion benches in `benches/`, and
//! [`generator`], which writes large realistic sessions in the reference's on-disk format
//! through our session and JSONL backend (the `gen_session` binary; `restore` loads them).
//!
//! ```
//! let session = session_bench::chat_session(100);
//! assert!(session.seq() >= 100);
//! ```

pub mod generator;
mod persisted;

pub use persisted::PersistedStore;

use std::sync::Arc;

use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_surface::{Draft, Session};

/// The positive count a harness binary takes as an optional argument: `default` when `arg` is
/// absent; `Err` with the message to print (naming `bin` and the argument's `name`) when it is
/// not a positive number.
pub fn count_arg(
    arg: Option<&str>,
    default: usize,
    bin: &str,
    name: &str,
) -> Result<usize, String> {
    match arg.map(str::parse::<usize>) {
        None => Ok(default),
        Some(Ok(n)) if n > 0 => Ok(n),
        Some(_) => Err(format!("{bin}: {name} must be a positive number")),
    }
}

/// A fixed clock for reproducible fixtures.
pub fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_767_225_600_000))
}

fn text_block(text: &str) -> Value {
    Value::array([Value::object([
        ("type", Value::from("text")),
        ("text", Value::from(text)),
    ])])
}

/// A `user/message` draft.
pub fn user_message(id: &str, text: &str) -> Draft {
    Draft::new(
        "user/message",
        Value::object([
            ("id", Value::from(id)),
            ("role", Value::from("user")),
            ("content", text_block(text)),
            ("source", Value::object([("kind", Value::from("user"))])),
        ]),
    )
    .append_op()
}

/// An `assistant/message` draft.
pub fn assistant_message(id: &str, turn: u32, step: u32, text: &str) -> Draft {
    Draft::new(
        "assistant/message",
        Value::object([
            ("turn", Value::from(turn)),
            ("step", Value::from(step)),
            (
                "message",
                Value::object([
                    ("id", Value::from(id)),
                    ("role", Value::from("assistant")),
                    ("content", text_block(text)),
                    (
                        "source",
                        Value::object([
                            ("kind", Value::from("model")),
                            ("provider", Value::from("deepseek")),
                            ("model", Value::from("deepseek-chat")),
                        ]),
                    ),
                ]),
            ),
        ]),
    )
    .append_op()
}

/// An `assistant/chunk` text-delta draft.
pub fn text_chunk(turn: u32, step: u32, text: &str) -> Draft {
    Draft::new(
        "assistant/chunk",
        Value::object([
            ("turn", Value::from(turn)),
            ("step", Value::from(step)),
            (
                "chunk",
                Value::object([
                    ("type", Value::from("text-delta")),
                    ("index", Value::from(0u8)),
                    ("text", Value::from(text)),
                ]),
            ),
        ]),
    )
}

fn boundary(ty: &str, turn: u32, step: Option<u32>) -> Draft {
    let mut fields = vec![("turn", Value::from(turn))];
    if let Some(step) = step {
        fields.push(("step", Value::from(step)));
    }
    if ty == "turn/end" {
        fields.push((
            "reason",
            Value::object([("kind", Value::from("completed"))]),
        ));
    }
    Draft::new(ty, Value::object(fields))
}

/// A session of closed turns with at least `messages` surface messages: each turn holds a user
/// message, four chunks and an assistant message.
pub fn chat_session(messages: usize) -> Session {
    let mut s = Session::create("bench", None, None, clock()).expect("fresh session");
    let mut turn = 0u32;
    while s.derive_messages().len() < messages {
        turn += 1;
        append_turn(&mut s, turn);
    }
    s
}

/// A session of closed turns (as in [`chat_session`]) with at least `events` events.
pub fn chat_session_with_events(events: usize) -> Session {
    let mut s = Session::create("bench", None, None, clock()).expect("fresh session");
    let mut turn = 0u32;
    while s.seq() < events as u64 {
        turn += 1;
        append_turn(&mut s, turn);
    }
    s
}

/// Appends one closed turn (user message, 4 chunks, assistant message) to `s`.
pub fn append_turn(s: &mut Session, turn: u32) {
    let id = format!("m{turn}");
    s.append(boundary("turn/start", turn, None))
        .expect("turn/start");
    s.append(user_message(&format!("u{id}"), "please do the thing"))
        .expect("user/message");
    s.append(boundary("step/start", turn, Some(1)))
        .expect("step/start");
    for _ in 0..4 {
        s.append(text_chunk(turn, 1, "tok ")).expect("chunk");
    }
    s.append(assistant_message(&format!("a{id}"), turn, 1, "done"))
        .expect("assistant/message");
    s.append(boundary("step/end", turn, Some(1)))
        .expect("step/end");
    s.append(boundary("turn/end", turn, None))
        .expect("turn/end");
}
